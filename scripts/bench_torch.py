#!/usr/bin/env python3
"""The ``hcomm`` torch.distributed backend against ``gloo``, in the same job (not a timed test).

    python scripts/bench_torch.py                      # starts itself under torchrun, 2 ranks
    torchrun --standalone --nproc-per-node 2 scripts/bench_torch.py
    hcomm-kit launch --np 2 -- python scripts/bench_torch.py

Measures, for each backend, with the rounds of the two backends interleaved (a busy machine slows
both alike) and the median over rounds:

* allreduce (fp32 SUM, in place) from 1 MiB to 64 MiB: time per call (max over ranks) and bus
  bandwidth (nccl-tests: 2 (n-1)/n x bytes / time); plus hcomm with its zero-copy path off
  (``staged``: tensors copied into device buffers and back), the measured effect of passing
  tensors by pointer;
* training step time (forward, backward, SGD step; max over ranks) of DDP on MLPs of ~1 M and
  ~25 M parameters, and of FSDP2 (``fully_shard`` per layer) on the ~1 M one.

On the emulator these are CPU figures of this host (the "devices" are threads of the rank
processes), not Ascend figures. ``--json FILE`` writes every number.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

MODELS = {"1M": [512, 768, 768, 10], "25M": [1024, 3072, 3072, 3072, 1000]}


def _launch_self(argv: list[str], np_: int) -> int:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(np_),
           os.path.abspath(__file__), *argv]
    return subprocess.call(cmd)


def _mlp(sizes: list[int]):
    import torch

    torch.manual_seed(0)
    layers: list = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _max_over_ranks(value: float, group) -> float:
    import torch
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t.item())


def _timed(fn, iters: int, group, sync_group) -> float:
    """Mean seconds per ``fn()`` call over ``iters`` calls, max over ranks (``group`` synchronises)."""
    import torch.distributed as dist

    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return _max_over_ranks((time.perf_counter() - t0) / iters, sync_group)


def bench_allreduce(groups: dict, sizes: list[int], rounds: int, gloo) -> dict:
    import torch
    import torch.distributed as dist

    n = dist.get_world_size()
    out: dict = {}
    for nbytes in sizes:
        x = torch.ones(nbytes // 4)
        iters = max(3, min(50, (256 << 20) // nbytes))
        per: dict = {name: [] for name in groups}
        for name, (g, setup) in groups.items():  # warm-up (operators load, buffers register)
            setup()
            for _ in range(2):
                dist.all_reduce(x, group=g)
        for _ in range(rounds):
            for name, (g, setup) in groups.items():
                setup()
                per[name].append(_timed(lambda: dist.all_reduce(x, group=g), iters, g, gloo))
        for name, times in per.items():
            t = statistics.median(times)
            out.setdefault(name, {})[nbytes] = {"time_us": t * 1e6, "busbw_GBs": 2 * (n - 1) / n * nbytes / t / 1e9}
    return out


def bench_training(kind: str, model_name: str, groups: dict, rounds: int, steps: int, batch: int, gloo) -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    sizes = MODELS[model_name]
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(batch, sizes[0], generator=g), torch.randn(batch, sizes[-1], generator=g)
    runs: dict = {}
    for name, (pg, setup) in groups.items():
        setup()
        model = _mlp(sizes)
        if kind == "ddp":
            model = DDP(model, process_group=pg)
        else:
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.fsdp import fully_shard

            mesh = DeviceMesh.from_group(pg, "cpu")
            for layer in model:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt) -> None:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        for _ in range(2):
            step()
        runs[name] = (pg, setup, step)
    params = sum(p.numel() for p in _mlp(sizes).parameters())
    per: dict = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (pg, setup, step) in runs.items():
            setup()
            per[name].append(_timed(step, steps, pg, gloo))
    return {"params": params, **{name: statistics.median(t) * 1e3 for name, t in per.items()}}


def _without_np(argv: list[str]) -> list[str]:
    """``argv`` without ``--np N`` (torchrun would take ``--np`` for its ``--nproc-per-node``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--np":
            skip = True
        elif not a.startswith("--np="):
            out.append(a)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2, help="ranks when the script starts itself (default 2)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per backend (median)")
    ap.add_argument("--steps", type=int, default=3, help="training steps per round")
    ap.add_argument("--train-rounds", type=int, default=25, help="interleaved training rounds per backend")
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--sizes", default="1M,4M,16M,64M", help="allreduce sizes (bytes; K/M suffixes)")
    ap.add_argument("--models", default="1M,25M")
    ap.add_argument("--json", default=None, metavar="FILE")
    args, rest = ap.parse_known_args()
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_RANK" not in os.environ:
        return _launch_self(_without_np(sys.argv[1:]), args.np)

    import torch
    import torch.distributed as dist

    import hcomm_kit.torch  # noqa: F401 - registers "hcomm" (and env:// under mpirun)

    dist.init_process_group("hcomm", timeout=datetime.timedelta(seconds=600))
    hc = dist.group.WORLD
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=600))
    rank, n = dist.get_rank(), dist.get_world_size()

    def zero_copy(on: bool):
        def setup() -> None:
            hc._zero_copy = on
        return setup

    def nothing() -> None:
        pass

    sizes = [int(float(s[:-1]) * {"K": 1 << 10, "M": 1 << 20}[s[-1]]) if s[-1] in "KM" else int(s)
             for s in args.sizes.split(",")]
    ar = bench_allreduce({"hcomm": (hc, zero_copy(True)), "hcomm staged": (hc, zero_copy(False)),
                          "gloo": (gloo, nothing)}, sizes, args.rounds, gloo)
    hc._zero_copy = True
    train = {}
    for m in args.models.split(","):
        train[f"DDP {m}"] = bench_training("ddp", m, {"hcomm": (hc, nothing), "gloo": (gloo, nothing)},
                                           args.train_rounds, args.steps, args.batch, gloo)
    if "1M" in args.models.split(","):
        train["FSDP2 1M"] = bench_training("fsdp", "1M", {"hcomm": (hc, nothing), "gloo": (gloo, nothing)},
                                           args.train_rounds, args.steps, args.batch, gloo)
    if rank == 0:
        print(f"# hcomm vs gloo, {n} ranks, torch {torch.__version__}, CPU emulator figures of this host "
              f"(medians of {args.rounds} / {args.train_rounds} interleaved rounds)")
        print(f"{'allreduce fp32':>16} | {'hcomm us':>10} | {'busbw GB/s':>10} | {'staged us':>10} | "
              f"{'busbw GB/s':>10} | {'gloo us':>10} | {'busbw GB/s':>10} | {'hcomm/gloo busbw':>16}")
        for nbytes in sizes:
            h, s, g = ar["hcomm"][nbytes], ar["hcomm staged"][nbytes], ar["gloo"][nbytes]
            print(f"{nbytes:>16} | {h['time_us']:>10.0f} | {h['busbw_GBs']:>10.3f} | {s['time_us']:>10.0f} | "
                  f"{s['busbw_GBs']:>10.3f} | {g['time_us']:>10.0f} | {g['busbw_GBs']:>10.3f} | "
                  f"{h['busbw_GBs'] / g['busbw_GBs']:>16.2f}")
        print(f"{'training step':>16} | {'params':>10} | {'hcomm ms':>10} | {'gloo ms':>10} | {'hcomm/gloo':>10}")
        for name, r in train.items():
            print(f"{name:>16} | {r['params']:>10} | {r['hcomm']:>10.2f} | {r['gloo']:>10.2f} | "
                  f"{r['hcomm'] / r['gloo']:>10.2f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"ranks": n, "allreduce": {k: {str(b): v for b, v in d.items()} for k, d in ar.items()},
                           "training": train}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
