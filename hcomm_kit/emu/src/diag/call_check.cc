/* Diagnosis: the collective-call check (HcommKitCallCheck) and hcomm-kit's other diagnosis C API
 * (HcommKitSetCheck, HcommKitCommReport). */
#include "diag/board.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <set>

namespace emu {

/* ================================================================ collective-call check */

namespace {

/* A posted call is "description @ call site" (hcomm_kit/ops/callsite.py SEPARATOR; the site is the
 * caller's file:line) or just "description" (no site: matches any site). */
constexpr const char* kSiteSep = " @ ";

/* The description and the site ("" when none) of a posted call text. */
std::pair<std::string, std::string> sig_split(const std::string& text) {
    size_t at = text.rfind(kSiteSep);
    if (at == std::string::npos) return {text, ""};
    return {text.substr(0, at), text.substr(at + strlen(kSiteSep))};
}

/* Two calls match when their descriptions are equal, wherever they were made. */
bool sig_match(const std::string& a, const std::string& b) {
    return a == b || sig_split(a).first == sig_split(b).first;
}

/* A posted call as shown in messages: "all_reduce(count=8, dtype=fp32, op=sum) at train.py:12". */
std::string sig_shown(const std::string& text) {
    auto p = sig_split(text);
    return p.second.empty() ? p.first : p.first + " at " + p.second;
}

/* "rank 1: X at a.py:5; ranks 0, 2, 3: X at a.py:4": the ranks that posted each distinct call, in
 * the order of their lowest rank. */
std::string calls_by_rank(const std::vector<std::pair<uint32_t, std::string>>& posted) {
    std::vector<std::pair<std::string, std::vector<uint32_t>>> groups;
    for (auto& p : posted) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == p.second; });
        if (it == groups.end()) groups.push_back({p.second, {p.first}});
        else it->second.push_back(p.first);
    }
    for (auto& g : groups) std::sort(g.second.begin(), g.second.end());
    std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.second[0] < b.second[0]; });
    std::string out;
    for (auto& g : groups) {
        if (!out.empty()) out += "; ";
        out += g.second.size() == 1 ? "rank " : "ranks ";
        for (size_t i = 0; i < g.second.size(); i++) out += (i ? ", " : "") + std::to_string(g.second[i]);
        out += ": " + sig_shown(g.first);
    }
    return out;
}

/* Rank r's posted text of collective call `seq`, if its slot still holds that call. */
bool posted_call(JobSeg* j, uint32_t r, uint64_t seq, std::string* out) {
    CallSig& o = j->calls[r][seq % kCallDepth];
    if (o.seq.load(std::memory_order_seq_cst) != seq) return false;
    char text[sizeof o.text];
    memcpy(text, o.text, sizeof text);
    text[sizeof text - 1] = 0;
    if (o.seq.load(std::memory_order_seq_cst) != seq) return false;
    *out = text;
    return true;
}

/* True when two of `posted` carry different call sites (a text without a site matches any). */
bool sites_differ(const std::vector<std::pair<uint32_t, std::string>>& posted) {
    std::string first;
    for (auto& p : posted) {
        std::string site = sig_split(p.second).second;
        if (site.empty()) continue;
        if (first.empty()) first = site;
        else if (site != first) return true;
    }
    return false;
}

/* The calls before `seq` that the ranks made with the same arguments from different call sites,
 * back to the last call made from one site on every rank (as far as the kCallDepth calls each
 * rank keeps reach): "" when call seq - 1 came from one site, else a sentence naming them (the
 * first two and the last two of a longer run) with every rank's site. A site difference alone is
 * no error (ranks branch around the same collective); once the calls differ, one of them is where
 * a rank skipped a call or made an extra one. */
std::string site_history(Comm* c, uint64_t seq) {
    JobSeg* j = c->job;
    std::vector<std::pair<uint64_t, std::string>> run; /* newest first: (call, every rank's call) */
    std::vector<std::pair<uint32_t, std::string>> posted;
    for (uint64_t s = seq - 1; s >= 1 && s + kCallDepth > seq; s--) {
        posted.clear();
        for (uint32_t r = 0; r < c->nranks; r++) {
            std::string text;
            if (posted_call(j, r, s, &text)) posted.emplace_back(r, text);
        }
        if (!sites_differ(posted)) break;
        run.emplace_back(s, calls_by_rank(posted));
    }
    if (run.empty()) return "";
    std::reverse(run.begin(), run.end());
    std::string calls;
    for (size_t i = 0; i < run.size(); i++) {
        if (run.size() > 4 && i == 2) {
            calls += strprintf("; ... %zu more ...", run.size() - 4);
            i = run.size() - 3;
            continue;
        }
        calls += strprintf("%scall #%llu (%s)", i ? "; " : "", (unsigned long long)run[i].first, run[i].second.c_str());
    }
    if (run.size() == 1)
        return strprintf(" Before it, the ranks made %s with the same arguments from different lines: a rank skipped a "
                         "call (or made an extra one) there. Ranks may make one call from different lines; only calls "
                         "that differ afterwards are an error.", calls.c_str());
    return strprintf(" Before it, the ranks made calls #%llu to #%llu with the same arguments from different lines (%s): a "
                     "rank skipped a call (or made an extra one) at one of them. Ranks may make one call from different "
                     "lines; only calls that differ afterwards are an error.",
                     (unsigned long long)run.front().first, (unsigned long long)run.back().first, calls.c_str());
}

}  // namespace

/* Rank `from` of another host posted collective call seq (net: the post is in this host's job segment
 * now): this host's ranks that posted the same call compared theirs before it arrived, so the
 * comparison is made here. "" or the report (as call_check's); the caller aborts. */
std::string far_call_posted(Comm* c, uint32_t from, uint64_t seq) {
    JobSeg* j = c->job;
    if (!j || from >= c->nranks) return "";
    std::string theirs;
    if (!posted_call(j, from, seq, &theirs)) return "";
    bool differ = false;
    std::vector<std::pair<uint32_t, std::string>> posted;
    for (uint32_t r = 0; r < c->nranks; r++) {
        std::string text;
        if (!posted_call(j, r, seq, &text)) continue;
        posted.emplace_back(r, text);
        if (!comm_far(c, r) && !sig_match(text, theirs)) differ = true;
    }
    if (!differ) return "";
    std::string text = strprintf("[hcomm-kit] collective mismatch on communicator %s, call #%llu: the ranks do not make "
                                 "the same call (%s; ranks not listed have not reached this call yet; rank %u is on "
                                 "host %s, found by host %s). Nothing was exchanged for this call; every rank's call "
                                 "fails.",
                                 c->name.c_str(), (unsigned long long)seq, calls_by_rank(posted).c_str(), from,
                                 c->host[from].c_str(), c->host[c->rank].c_str());
    return text + site_history(c, seq);
}

/* Posts this rank's description of its next collective call (peer < 0) or of its next
 * point-to-point call with `peer`, and compares it with what the other ranks posted for the same
 * call: the later of two mismatching ranks finds it (both post before reading), aborts the
 * communicator (every rank's call fails, naming each rank's call) and returns the text. */
std::string call_check(Comm* c, int peer, const char* mine, const char* expect) {
    JobSeg* j = c->job;
    if (!j) return "";
    if (peer >= (int)c->nranks || peer == (int)c->rank) return "";
    uint64_t seq;
    std::vector<std::pair<uint32_t, std::string>> posted;
    std::string bad;
    /* compared with the other rank's text as posted: cut to the slot's size as copy_str does */
    std::string expected(expect);
    expected.resize(std::min(expected.size(), (peer < 0 ? sizeof(CallSig::text) : sizeof(P2PSig::text)) - 1));
    if (peer < 0) {
        {
            std::lock_guard<std::mutex> g(c->m);
            seq = ++c->call_seq;
        }
        CallSig& me = j->calls[c->rank][seq % kCallDepth];
        copy_str(me.text, mine);
        me.seq.store(seq, std::memory_order_seq_cst);
        comm_call_posted(c, seq, me.text); /* the other hosts' job segments (far_call_posted) */
        /* what the other ranks posted for call seq so far */
        auto collect = [&] {
            posted.clear();
            for (uint32_t r = 0; r < c->nranks; r++) {
                if (r == c->rank) continue;
                std::string text;
                if (!posted_call(j, r, seq, &text)) continue;
                posted.emplace_back(r, text);
                /* the arguments only: a call site that differs is remembered in the ranks' posted
                 * calls and named when the calls differ later (site_history) */
                if (!sig_match(text, expected)) bad = text;
            }
        };
        collect();
        if (bad.empty()) {
            me.checked.store(seq, std::memory_order_seq_cst);
            comm_call_checked(c, seq);
            return "";
        }
        /* Before failing the communicator, let the ranks still finishing earlier calls reach this
         * one (they find the mismatch themselves when they post it): an abort now would also fail
         * their earlier call, which every rank made alike. Bounded: a rank stuck elsewhere does
         * not keep the others waiting. */
        auto reached = [&](uint32_t r) {
            return r == c->rank || comm_peer_dead(c, (int)r) || comm_peer_gone(c, (int)r) ||
                   j->calls[r][seq % kCallDepth].seq.load(std::memory_order_seq_cst) >= seq;
        };
        for (uint64_t until = now_ns() + kMismatchSettleNs; now_ns() < until && !comm_aborted(c, nullptr);) {
            bool all = true;
            for (uint32_t r = 0; r < c->nranks && all; r++) all = reached(r);
            if (all) break;
            usleep(1000);
        }
        collect(); /* every rank's call in the message */
        posted.emplace_back(c->rank, mine);
        std::string text = strprintf("[hcomm-kit] collective mismatch on communicator %s, call #%llu: the ranks do not make "
                                     "the same call (%s; ranks not listed have not reached this call yet). Nothing was "
                                     "exchanged for this call; every rank's call fails.",
                                     c->name.c_str(), (unsigned long long)seq, calls_by_rank(posted).c_str());
        text += site_history(c, seq);
        if (comm_abort(c, text, AbortKind::Mismatch)) rank_log("%s", text.c_str());
        me.checked.store(seq, std::memory_order_seq_cst); /* after the abort: see settle_call */
        comm_call_checked(c, seq);
        return text;
    }
    {
        std::lock_guard<std::mutex> g(c->m);
        seq = ++c->p2p_seq[peer];
    }
    P2PSig& me = j->p2p[c->rank][peer][seq % kP2PDepth];
    copy_str(me.text, mine);
    me.seq.store(seq, std::memory_order_seq_cst);
    P2PSig& o = j->p2p[peer][c->rank][seq % kP2PDepth];
    if (o.seq.load(std::memory_order_seq_cst) != seq) return "";
    char text[sizeof o.text];
    memcpy(text, o.text, sizeof text);
    text[sizeof text - 1] = 0;
    /* partners call from different lines by design (a send and its recv): sites shown, not compared */
    if (o.seq.load(std::memory_order_seq_cst) != seq || sig_match(text, expected)) return "";
    std::string msg = strprintf("[hcomm-kit] point-to-point mismatch on communicator %s, call #%llu between ranks %u and "
                                "%d: rank %u: %s; rank %d: %s (expected %s). Nothing was exchanged; both calls fail.",
                                c->name.c_str(), (unsigned long long)seq, c->rank, peer, c->rank,
                                sig_shown(mine).c_str(), peer, sig_shown(text).c_str(), sig_split(expect).first.c_str());
    if (comm_abort(c, msg, AbortKind::Mismatch)) rank_log("%s", msg.c_str());
    return msg;
}

/* Posts this rank's description of its next send to `peer` (recv false) or receive from it (recv
 * true) and compares it with the peer's description of the same transfer: sends from A to B pair
 * with B's receives from A in order, whatever else either rank posts in between (MPI's, NCCL's
 * and gloo's matching). The later of the two finds a mismatch, aborts the communicator and returns
 * the text. */
std::string p2p_check(Comm* c, int peer, bool recv, const char* mine, const char* expect) {
    JobSeg* j = c->job;
    if (!j || peer < 0 || peer >= (int)c->nranks || peer == (int)c->rank) return "";
    uint32_t sender = recv ? (uint32_t)peer : c->rank, receiver = recv ? c->rank : (uint32_t)peer;
    uint64_t seq;
    {
        std::lock_guard<std::mutex> g(c->m);
        seq = recv ? ++c->p2p_received[peer] : ++c->p2p_sent[peer];
    }
    P2PSig& me = j->p2p_dir[sender][receiver][recv ? 1 : 0][seq % kP2PDirDepth];
    copy_str(me.text, mine);
    me.seq.store(seq, std::memory_order_seq_cst);
    P2PSig& o = j->p2p_dir[sender][receiver][recv ? 0 : 1][seq % kP2PDirDepth];
    if (o.seq.load(std::memory_order_seq_cst) != seq) return "";
    char text[sizeof o.text];
    memcpy(text, o.text, sizeof text);
    text[sizeof text - 1] = 0;
    std::string expected(expect);
    expected.resize(std::min(expected.size(), sizeof(P2PSig::text) - 1));
    /* a send and its receive come from different lines by design: sites shown, not compared */
    if (o.seq.load(std::memory_order_seq_cst) != seq || sig_match(text, expected)) return "";
    unsigned long long k = (unsigned long long)seq;
    std::string msg = strprintf("[hcomm-kit] point-to-point mismatch on communicator %s, transfer #%llu from rank %u to "
                                "rank %u (send #%llu of rank %u to rank %u, receive #%llu of rank %u from rank %u): rank "
                                "%u: %s; rank %d: %s (expected %s). Nothing was exchanged; both calls fail.",
                                c->name.c_str(), k, sender, receiver, k, sender, receiver, k, receiver, sender, c->rank,
                                sig_shown(mine).c_str(), peer, sig_shown(text).c_str(), sig_split(expect).first.c_str());
    if (comm_abort(c, msg, AbortKind::Mismatch)) rank_log("%s", msg.c_str());
    return msg;
}

}  // namespace emu

using namespace emu;

/* hcomm-kit extension (hcomm_kit/emu_ext.h): the point-to-point call check matched per direction
 * (p2p_check). recv: 0 = this rank sends to peer, 1 = it receives from peer. Returns HCCL_SUCCESS,
 * or HCCL_E_PARA when a mismatch was found (the communicator is then aborted; msg gets the text). */
EMU_API int32_t HcommKitP2PCheck(HcclComm comm, int32_t peer, int32_t recv, const char* signature, const char* expected,
                                 char* msg, uint64_t msgLen) {
    Comm* c = comm_from_handle(comm);
    if (!comm) return seterr(HCCL_E_PTR, __func__, "comm is NULL");
    if (!c) return seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", comm);
    if (!signature || !expected) return seterr(HCCL_E_PTR, __func__, "signature or expected is NULL");
    if (recv != 0 && recv != 1) return seterr(HCCL_E_PARA, __func__, "recv %d is not 0 (send) or 1 (receive)", recv);
    if (peer < 0 || peer >= (int)c->nranks || peer == (int)c->rank)
        return seterr(HCCL_E_PARA, __func__, "peer %d is not another rank of this %u-rank communicator (rank %u)", peer,
                      c->nranks, c->rank);
    std::string bad = p2p_check(c, peer, recv == 1, signature, expected);
    if (bad.empty()) return HCCL_SUCCESS;
    if (msg && msgLen) snprintf(msg, msgLen, "%s", bad.c_str());
    return seterr_str(HCCL_E_PARA, __func__, bad);
}

/* hcomm-kit extension (not a CANN API; declared in hcomm_kit/emu_ext.h): the collective-call
 * check used by hcomm-kit's Python collectives (and any host that wants it). signature describes
 * this rank's call; expected, what the other rank(s) must have posted for the same call (the same
 * text for collectives; the mirrored send/recv for point-to-point). peer = -1: a collective of
 * every rank; else the k-th point-to-point call between this rank and peer. Returns HCCL_SUCCESS,
 * or HCCL_E_PARA when a mismatch was found (the communicator is then aborted; msg gets the text). */
EMU_API int32_t HcommKitCallCheck(HcclComm comm, int32_t peer, const char* signature, const char* expected, char* msg,
                                  uint64_t msgLen) {
    Comm* c = comm_from_handle(comm);
    if (!comm) return seterr(HCCL_E_PTR, __func__, "comm is NULL");
    if (!c) return seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", comm);
    if (!signature || !expected) return seterr(HCCL_E_PTR, __func__, "signature or expected is NULL");
    std::string bad = call_check(c, peer, signature, expected);
    if (bad.empty()) return HCCL_SUCCESS;
    if (msg && msgLen) snprintf(msg, msgLen, "%s", bad.c_str());
    return seterr_str(HCCL_E_PARA, __func__, bad);
}

/* hcomm-kit extension (hcomm_kit/emu_ext.h): why the communicator was aborted. Returns 0 when it was
 * not (or comm is not a live communicator), else the kind (HCOMM_KIT_ABORT_MISMATCH & co.), with the
 * text in buf (truncated to bufLen - 1). */
static_assert((int)AbortKind::Mismatch + 1 == HCOMM_KIT_ABORT_MISMATCH &&
                  (int)AbortKind::KernelTimeout + 1 == HCOMM_KIT_ABORT_KERNEL_TIMEOUT,
              "HCOMM_KIT_ABORT_MISMATCH & co. follow AbortKind");
EMU_API int32_t HcommKitCommAbortReason(HcclComm comm, char* buf, uint64_t bufLen) {
    Comm* c = comm_from_handle(comm);
    std::string why;
    AbortKind kind = AbortKind::Other;
    if (!c || !comm_aborted(c, &why) || !comm_abort_info(c, &kind, nullptr)) return 0;
    if (buf && bufLen) snprintf(buf, bufLen, "%s", why.c_str());
    return (int32_t)kind + 1;
}

/* hcomm-kit extension (hcomm_kit/emu_ext.h): abort the communicator on every rank with `reason`, for a
 * host that posted a call (the call check) it will not make after all (interrupted in between): its
 * peers' calls fail at once naming it instead of waiting for this rank's part. The first abort's
 * reason stays. Returns HCCL_SUCCESS, or HCCL_E_PARA for a communicator that is not live. */
EMU_API int32_t HcommKitCommAbort(HcclComm comm, const char* reason) {
    Comm* c = comm_from_handle(comm);
    if (!c) return seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", comm);
    std::string why = strprintf("rank %u: %s", c->rank, reason && *reason ? reason : "aborted by its host");
    if (comm_abort(c, why, AbortKind::Other)) rank_log("%s", why.c_str());
    return HCCL_SUCCESS;
}

/* hcomm-kit extension: the notify checker's mode for this process from now on (0 off, 1 findings
 * fail the operation, 2 warn only); returns the previous mode, or -1 for a bad value. */
EMU_API int32_t HcommKitSetCheck(int32_t mode) {
    if (mode < 0 || mode > 2) return seterr(-1, __func__, "mode %d is not 0 (off), 1 (fail) or 2 (warn)", mode);
    return set_check_mode(mode);
}

/* hcomm-kit extension: the cross-rank state report of a communicator (what every rank's threads
 * and streams wait for), as text. Returns the length written (truncated to bufLen - 1). */
EMU_API uint64_t HcommKitCommReport(HcclComm comm, char* buf, uint64_t bufLen) {
    Comm* c = comm_from_handle(comm);
    if (!c || !buf || !bufLen) return 0;
    std::string r = diag_comm_report(c, strprintf("[hcomm-kit] state of communicator %s (%u ranks) seen by rank %u",
                                                  c->name.c_str(), c->nranks, c->rank).c_str());
    snprintf(buf, bufLen, "%s", r.c_str());
    return std::min<uint64_t>(r.size(), bufLen - 1);
}
