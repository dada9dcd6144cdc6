"""Views of a simulated operation (``comm.model_explain()``, ``HcommKitModelExplain``): what bound
its modelled time, in words an author acts on, and the tables behind them (``hcomm-kit model
explain``).

The simulation's JSON carries the facts (emu_ext.h documents its keys): every directed link's
bytes, busy time and utilisation, the idle links, every device thread's use, and the critical
path cut into phases, each bound by the host ``launch``, the AICPU's ``issue`` of the tasks before
the path's first, a ``link`` (transfers), a ``local`` copy / reduction, or a ``peer``'s notify in
flight. :func:`summarise` turns them into the ``summary`` added to ``--json``: the time by bound,
the dominant bound, and sentences saying why and what to change.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BOUNDS", "summarise", "format_explain", "format_compare", "size_text"]

#: The kinds of critical-path phases, in the order they are printed.
BOUNDS = ("issue", "link", "local", "peer", "launch")


def size_text(n: float) -> str:
    """``8 MiB``, ``128 KiB``, ``300 B``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def _ranks_list(idle: list[list[int]]) -> str:
    by: dict[int, list[int]] = {}
    for a, b in idle:
        by.setdefault(a, []).append(b)
    return "; ".join(f"{a} -> {','.join(map(str, bs))}" for a, bs in sorted(by.items()))


def _pct(x: float, total: float) -> str:
    return f"{100 * x / total:.0f} %" if total > 0 else "-"


def _link_figures(product: str, link: str) -> tuple[float, float, float] | None:
    """(write GB/s, read GB/s, notify us) of a link type from the product's parameters, None when unknown."""
    try:
        from ..base import model_params

        lp = model_params.load(product).links[link]
        return lp.write_GBps, lp.read_GBps, lp.notify_us
    except Exception:  # noqa: BLE001 - a view: the sentence just goes without the figures
        return None


def summarise(sim: dict[str, Any]) -> dict[str, Any]:
    """What bound ``sim``'s time: ``{"bound_us": {kind: us}, "dominant": kind, "why": [sentences]}``.

    The sentences name the ranks, threads, links and task counts and say what would shorten the
    time; the first is about the dominant bound.
    """
    t = float(sim.get("time_us") or 0.0)
    bound = {k: float(sim.get("bound", {}).get(k, 0.0)) for k in BOUNDS}
    phases = sim.get("phases", [])
    out: dict[str, Any] = {"bound_us": bound, "dominant": None, "why": []}
    if not phases or t <= 0:
        return out
    ranked = sorted((k for k in BOUNDS if k != "launch"), key=lambda k: -bound[k])
    out["dominant"] = ranked[0] if bound[ranked[0]] > 0 else "launch"
    why: list[str] = []
    task_us = float(sim.get("task_us", 0.0))
    per_rank: dict[int, int] = {}
    for th in sim.get("threads", []):
        per_rank[th["rank"]] = per_rank.get(th["rank"], 0) + th["tasks"]
    links = sim.get("links", [])
    idle = sim.get("idle_links", [])
    nlinks = len(links) + len(idle)
    product = sim.get("product", "")

    def issue() -> str:
        ph = next(p for p in phases if p["bound"] == "issue")
        busiest = max(per_rank.items(), key=lambda kv: kv[1]) if per_rank else (ph["rank"], ph["tasks"])
        return (f"issue: rank {ph['rank']}'s AICPU issued {ph['tasks']} tasks, one after another at {task_us:g} us "
                f"each (every thread's: they share it), before the critical path's first task could start: "
                f"{ph['us']:.1f} of {t:.1f} us. Issue fewer tasks (fewer, larger transfers; fewer notifies and "
                f"handshakes per slice), or issue the critical chain's tasks first; more threads do not issue "
                f"faster. Busiest rank: {busiest[0]}, {busiest[1]} tasks.")

    def link() -> str:
        # the path's transfers by the thread that ran them one after another
        agg: dict[tuple, dict[str, Any]] = {}
        for p in phases:
            if p["bound"] != "link":
                continue
            a = agg.setdefault((p["rank"], p["thread"]), {"us": 0.0, "bytes": 0, "tasks": 0, "shared": False,
                                                         "peers": set(), "ops": set(), "links": set()})
            a["us"] += p["us"]
            a["bytes"] += p["bytes"]
            a["tasks"] += p["tasks"]
            a["shared"] |= p["shared"]
            a["peers"].add(p["peer"])
            a["ops"].add(p["op"])
            a["links"].add(p.get("link", ""))
        (rank, thread), a = max(agg.items(), key=lambda kv: kv[1]["us"])
        each = a["bytes"] / a["tasks"] if a["tasks"] else 0
        rate = a["bytes"] / a["us"] / 1e3 if a["us"] > 0 else 0
        ops = " / ".join(sorted(a["ops"]))
        kinds = "/".join(sorted(a["links"]))
        peers = sorted(a["peers"])
        with_ = f"rank {peers[0]}" if len(peers) == 1 else f"{len(peers)} peers ({','.join(map(str, peers))})"
        nranks = len({r for r, _ in agg})
        s = (f"link: transfers make {bound['link']:.1f} of {t:.1f} us of the critical path, on {len(agg)} "
             f"thread(s) of {nranks} rank(s); rank {rank} {thread} ran {a['tasks']} of them ({ops}, "
             f"{size_text(each)} each, with {with_}, {kinds}) one after another: {a['us']:.1f} us at {rate:.1f} GB/s")
        s += ", sharing a link or a port with other transfers." if a["shared"] else "."
        if len(peers) == 1:
            s += " One link carries them while others wait: spread the bytes over more links at once (a thread per " \
                 "peer, as a mesh does)"
        else:
            s += " One thread takes its peers in turn: give each peer its own thread so that the links run at once"
        s += f"; {len(links)} of {nlinks} links between the ranks carried bytes"
        s += f", {len(idle)} sat idle." if idle else "."
        fig = _link_figures(product, kinds)
        if fig and "write" in ops and "read" not in ops and fig[1] > fig[0] * 1.05:
            s += f" On {kinds} a read moves {fig[1]:g} GB/s against a write's {fig[0]:g}."
        return s

    def local() -> str:
        rows = [p for p in phases if p["bound"] == "local"]
        us = sum(p["us"] for p in rows)
        top = max(rows, key=lambda p: p["us"])
        ops = sorted({p["op"] for p in rows})
        return (f"local: {sum(p['tasks'] for p in rows)} local {' / '.join(ops)} task(s) on the critical path "
                f"({us:.1f} of {t:.1f} us; most on rank {top['rank']} {top['thread']}): copy less (write straight "
                f"into the peer's buffer or the output) or let the transfer reduce (write-reduce, read-reduce).")

    def peer() -> str:
        rows = [p for p in phases if p["bound"] == "peer"]
        us = sum(p["us"] for p in rows)
        hops = sum(p["tasks"] for p in rows)
        kinds = sorted({p.get("link", "thread") for p in rows})
        fig = _link_figures(product, kinds[0]) if kinds and kinds[0] != "thread" else None
        each = f", {fig[2]:g} us each on {kinds[0]}" if fig else ""
        return (f"peer: {hops} notify hop(s) between ranks on the critical path ({us:.1f} of {t:.1f} us{each}): "
                f"each step that waits for a peer's notify pays its latency; fewer handshakes (larger slices, "
                f"fewer steps) shorten it.")

    say = {"issue": issue, "link": link, "local": local, "peer": peer}
    for k in ranked:
        if bound[k] > 0.05 * t or k == out["dominant"]:
            why.append(say[k]())
    if bound["launch"] > 0:
        why.append(f"launch: the host's launch of the kernel, {bound['launch']:.1f} us (an assumption of the model).")
    out["why"] = why
    return out


def _header(sim: dict, row: dict, topo) -> str:
    shape = f"{len(topo.servers)} server(s) x {len(topo.servers[0])}"
    down = f", links down {', '.join(f'{a}-{b}' for a, b in topo.links_down)}" if topo.links_down else ""
    bus = f", busbw {row['model_busbw']:.3f} GB/s" if row.get("model_busbw") else ""
    algo = row.get("selected") or row.get("algorithm", "auto")
    return (f"# {row['collective']} ({algo}), {row['ranks']} ranks, {row['size']} bytes, {row['dtype']} on "
            f"{sim['product']} ({shape}{down}): modelled {sim['time_us']:.2f} us{bus}")


def _task_table(sim: dict) -> list[str]:
    lines = [f"{'issue_us':>10} {'start_us':>10} {'end_us':>10}  {'rank':>4}  {'thread':<16} {'task':<22} "
             f"{'bytes':>10} {'peer':>4} {'link':<5} why"]
    for t in sim["critical_path"]:
        lines.append(f"{t['issue_us']:>10.2f} {t['start_us']:>10.2f} {t['end_us']:>10.2f}  {t['rank']:>4}  "
                     f"{t['thread']:<16} {t['task']:<22} {t.get('bytes', ''):>10} {t.get('peer', ''):>4} "
                     f"{t.get('link', ''):<5} {t['why']}"
                     + (f" (rank {t['after'][0]} task {t['after'][1]})" if t.get("after") and t["why"] == "notify"
                        else ""))
    return lines


def _phase_what(p: dict) -> str:
    if p["bound"] == "launch":
        return "host launch of the kernel"
    if p["bound"] == "issue":
        return f"the AICPU issuing {p['tasks']} tasks before the path's first"
    if p["bound"] == "link":
        src, dst = (p["peer"], p["rank"]) if p["op"].startswith("read") else (p["rank"], p["peer"])
        n = p["tasks"]
        return (f"{n} {p['op']}{'s' if n != 1 else ''}, {size_text(p['bytes'])}, {src} -> {dst} {p.get('link', '')}"
                + (" (shared)" if p["shared"] else ""))
    if p["bound"] == "local":
        return f"{p['tasks']} local {p['op']}, {size_text(p['bytes'])}"
    who = f"rank {p['peer']}" if "peer" in p else "another thread"
    return f"{p['tasks']} notify hop(s) from {who} ({p.get('link', 'thread')})"


def format_explain(sim: dict, row: dict, topo, *, tasks: bool = False, top: int = 12) -> str:
    """The simulation as text: the time and what bound it, why, the links, the threads, the
    critical path in phases (with ``tasks``, task by task as well)."""
    t = float(sim["time_us"])
    lines = [_header(sim, row, topo),
             f"# operation '{sim['op']}' #{sim['instance']}: {sim['tasks']} tasks on {len(sim['ranks'])} ranks"]
    if "phases" in sim:
        summ = summarise(sim)
        b = summ["bound_us"]
        lines.append("bound by: " + " | ".join(f"{k} {b[k]:.1f} us ({_pct(b[k], t)})" for k in BOUNDS))
        lines.append("why:")
        lines += [f"  - {w}" for w in summ["why"]]
        links, idle = sim.get("links", []), sim.get("idle_links", [])
        lines.append(f"links (directed, busiest first; {len(links)} of {len(links) + len(idle)} carried bytes):")
        lines.append(f"  {'from':>4} {'to':>4} {'type':<5} {'bytes':>12} {'transfers':>9} {'busy_us':>10} "
                     f"{'busy':>6} {'GB/s':>8}")
        for u in links[:top]:
            lines.append(f"  {u['from']:>4} {u['to']:>4} {u['type']:<5} {u['bytes']:>12} {u['transfers']:>9} "
                         f"{u['busy_us']:>10.2f} {_pct(u['busy_us'], t):>6} {u['GBps']:>8.2f}")
        if len(links) > top:
            lines.append(f"  ... {len(links) - top} more (--json lists them all)")
        if idle:
            lines.append(f"idle links ({len(idle)}): {_ranks_list(idle)}")
        threads = sorted(sim.get("threads", []), key=lambda x: -x["busy_us"])
        lines.append(f"threads (busiest first; {len(threads)}):")
        lines.append(f"  {'rank':>4} {'thread':<16} {'tasks':>6} {'bytes':>12} {'busy_us':>10} {'wait_us':>10} "
                     f"{'busy':>6}")
        for th in threads[:top]:
            lines.append(f"  {th['rank']:>4} {th['thread']:<16} {th['tasks']:>6} {th['bytes']:>12} "
                         f"{th['busy_us']:>10.2f} {th['wait_us']:>10.2f} {_pct(th['busy_us'], t):>6}")
        if len(threads) > top:
            lines.append(f"  ... {len(threads) - top} more")
        phases = sim["phases"]
        lines.append(f"critical path in phases ({len(phases)}, first to last; {len(sim['critical_path'])} tasks):")
        lines.append(f"  {'start_us':>10} {'end_us':>10} {'us':>9}  {'bound':<6} {'rank':>4} {'thread':<16} what")
        shown = phases if len(phases) <= 3 * top else phases[:top] + [None] + phases[-top:]
        for p in shown:
            if p is None:
                lines.append(f"  ... {len(phases) - 2 * top} phases (--json lists them all)")
                continue
            lines.append(f"  {p['start_us']:>10.2f} {p['end_us']:>10.2f} {p['us']:>9.2f}  {p['bound']:<6} "
                         f"{p['rank']:>4} {p.get('thread', ''):<16} {_phase_what(p)}")
    if tasks or "phases" not in sim:
        lines.append(f"critical path task by task ({len(sim['critical_path'])} tasks, first to last):")
        lines += _task_table(sim)
    for n in sim.get("notes", []):
        lines.append(f"# note: {n}")
    return "\n".join(lines)


def format_compare(runs: list[tuple[dict, dict]], names: tuple[str, str], topo) -> str:
    """Two operators side by side: ``runs`` holds ``(sim, row)`` pairs, the first subject's and
    the second's of each size in turn."""
    a_name, b_name = names
    lines = [f"# {a_name} against {b_name} on {runs[0][0]['product']} ({len(topo.servers)} server(s) x "
             f"{len(topo.servers[0])}), {runs[0][1]['ranks']} ranks, {runs[0][1]['dtype']}: modelled"]
    head = f"{'size':>12} | {'us':>10} {'busbw':>8} {'bound':<12} | {'us':>10} {'busbw':>8} {'bound':<12} | ratio"
    lines += [f"{'':>12} | {a_name[:32]:<32} | {b_name[:32]:<32} |", head]
    for i in range(0, len(runs), 2):
        (sa, ra), (sb, rb) = runs[i], runs[i + 1]
        cells = []
        for s, r in ((sa, ra), (sb, rb)):
            summ = summarise(s)
            dom = summ["dominant"] or "-"
            share = _pct(summ["bound_us"].get(dom, 0.0), s["time_us"]) if summ["dominant"] else ""
            bus = r.get("model_busbw")
            bus_text = "-" if bus is None else f"{bus:.3f}"
            cells.append(f"{s['time_us']:>10.2f} {bus_text:>8} {dom + ' ' + share:<12}")
        ratio = sb["time_us"] / sa["time_us"] if sa["time_us"] else float("nan")
        lines.append(f"{ra['size']:>12} | {cells[0]} | {cells[1]} | {ratio:.2f}x")
    lines.append(f"(ratio: {b_name}'s time / {a_name}'s; > 1 means {a_name} is faster)")
    for i in range(0, len(runs), 2):
        for s, r, name in ((runs[i][0], runs[i][1], a_name), (runs[i + 1][0], runs[i + 1][1], b_name)):
            summ = summarise(s)
            lines.append(f"why, {name} at {size_text(r['size'])}:")
            lines += [f"  - {w}" for w in summ["why"]]
    return "\n".join(lines)
