/* Diagnosis: the race checker (comm.h "race checker"): happens-before over notify edges with vector
 * clocks, accesses to HCCL-buffer bytes logged per owner rank, races and stale reads as findings. */
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

/* ---------------------------------------------------------------- race checker */

namespace {
int32_t vc_index(HThread* t) {
    if (t->vcg != -1) return t->vcg;
    Comm* c = t->comm;
    /* ranks on other hosts log into their own host's job segment: the checker cannot see them */
    if (!c || !c->job || (c->net_key && c->nlocal < c->nranks)) return t->vcg = -2;
    std::lock_guard<std::mutex> g(c->ops_m);
    if (c->vc_threads >= kVcPerRank) return t->vcg = -2;
    return t->vcg = (int32_t)(c->rank * kVcPerRank + c->vc_threads++);
}

/* clock of index g in a sorted vector (0 = never seen) */
uint32_t vc_get(const std::vector<uint64_t>& vc, uint32_t g) {
    auto it = std::lower_bound(vc.begin(), vc.end(), (uint64_t)g << 32);
    return it != vc.end() && (uint32_t)(*it >> 32) == g ? (uint32_t)*it : 0;
}

void vc_put(std::vector<uint64_t>& vc, uint32_t g, uint32_t clock) {
    uint64_t key = (uint64_t)g << 32;
    auto it = std::lower_bound(vc.begin(), vc.end(), key);
    if (it != vc.end() && (uint32_t)(*it >> 32) == g) {
        if ((uint32_t)*it < clock) *it = key | clock;
    } else {
        vc.insert(it, key | clock);
    }
}

/* b happened before (or is) the access with clock vector vc */
bool hb(uint32_t g, uint32_t clock, const std::vector<uint64_t>& vc) { return vc_get(vc, g) >= clock; }
}  // namespace

/* Publishes self's clock vector for a record it makes; returns the id for DevCtl::flow (0: none). */
uint64_t vc_publish(HThread* self) {
    SEQ_GUARD();
    Comm* c = self->comm;
    int32_t g = check_mode() && c ? vc_index(self) : -2;
    if (g < 0) return 0;
    vc_put(self->vc, (uint32_t)g, self->clock);
    RaceArea& ra = c->job->race[c->rank];
    uint64_t n = ra.records.fetch_add(1, std::memory_order_relaxed) + 1;
    VcEntry& e = ra.out[n % kVcRing];
    uint64_t id = ((uint64_t)c->rank << 48) | n;
    e.id.store(0, std::memory_order_relaxed);
    SEQ_FENCE(std::memory_order_release);
    uint32_t m = (uint32_t)std::min<size_t>(self->vc.size(), kVcMax);
    memcpy(e.pairs, self->vc.data(), m * sizeof(uint64_t));
    e.n = m;
    e.truncated = self->vc.size() > kVcMax;
    e.id.store(id, std::memory_order_release);
    self->clock++; /* accesses after the record are not covered by it */
    return id;
}

/* The waiter self consumed a record published as vid: it now knows everything the recorder knew. */
void vc_join(HThread* self, uint64_t vid) {
    SEQ_GUARD();
    Comm* c = self->comm;
    uint32_t r = (uint32_t)(vid >> 48);
    if (!c || r >= c->nranks || vc_index(self) < 0) return;
    VcEntry& e = c->job->race[r].out[(vid & 0xffffffffffffull) % kVcRing];
    uint64_t buf[kVcMax];
    if (e.id.load(std::memory_order_acquire) != vid) {
        self->vc_lost = true; /* overwritten meanwhile: later accesses may look unordered */
        return;
    }
    uint32_t n = std::min<uint32_t>(e.n, kVcMax);
    bool trunc = e.truncated;
    memcpy(buf, e.pairs, n * sizeof(uint64_t));
    SEQ_FENCE(std::memory_order_acquire);
    if (e.id.load(std::memory_order_relaxed) != vid || trunc) {
        self->vc_lost = true;
        if (!trunc) return;
    }
    for (uint32_t i = 0; i < n; i++) vc_put(self->vc, (uint32_t)(buf[i] >> 32), (uint32_t)buf[i]);
}

namespace {
constexpr uint32_t kHostG = 0xffffffffu; /* clock index of host-side writes (aclrtMemcpy & co.) */
std::mutex& g_race_m = *new std::mutex();
std::vector<Comm*>& g_race_comms = *new std::vector<Comm*>(); /* live communicators (diag_host_write), under g_race_m */

/* getpid() without a system call per access (reset in a forked child). */
std::atomic<int32_t> g_pid{0};
int32_t cached_pid() {
    int32_t p = g_pid.load(std::memory_order_relaxed);
    if (p) return p;
    static std::once_flag once;
    std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { g_pid.store(0, std::memory_order_relaxed); }); });
    p = (int32_t)getpid();
    g_pid.store(p, std::memory_order_relaxed);
    return p;
}

void log_access(RaceArea& ra, uint64_t bb, uint64_t off, uint64_t len, uint8_t write, uint32_t g, uint32_t clock,
                uint32_t tag16, uint32_t inst, uint16_t rank, uint16_t thread, uint32_t bidx, uint32_t bsize,
                const char* api, uint64_t now, const void* caller = nullptr) {
    SEQ_GUARD();
    uint64_t b0 = std::min<uint64_t>(off / bb, kBuckets - 1), b1 = std::min<uint64_t>((off + len - 1) / bb, kBuckets - 1);
    for (uint64_t b = b0; b <= b1; b++) {
        AccessBucket& bk = ra.buckets[b];
        uint64_t seq = bk.appends.fetch_add(1, std::memory_order_acq_rel) + 1;
        AccessEntry& e = bk.e[(seq - 1) % kBucketDepth];
        if (e.seq.load(std::memory_order_acquire) && e.write) { /* a write leaves the ring: widen the hull */
            uint64_t nlo = ~e.off, hi = e.off + e.len, cur = bk.evicted_nlo.load(std::memory_order_relaxed);
            while (cur < nlo && !bk.evicted_nlo.compare_exchange_weak(cur, nlo)) {
            }
            cur = bk.evicted_hi.load(std::memory_order_relaxed);
            while (cur < hi && !bk.evicted_hi.compare_exchange_weak(cur, hi)) {
            }
        }
        /* release: a reader that no longer finds the old entry finds the hull that covers it */
        e.seq.store(0, std::memory_order_release);
        SEQ_FENCE(std::memory_order_release);
        e.off = off;
        e.len = len;
        e.when_ns = now;
        e.g = g;
        e.clock = clock;
        e.tag16 = tag16;
        e.inst = inst;
        e.rank = rank;
        e.thread = thread;
        e.write = write;
        e.bidx = bidx;
        e.bsize = bsize;
        e.pid = cached_pid();
        e.caller = (uint64_t)(uintptr_t)caller;
        copy_str(e.api, api);
        e.seq.store(seq, std::memory_order_seq_cst);
    }
}

uint64_t bucket_bytes(Comm* c, uint32_t r) {
    return std::max<uint64_t>(4096, (c->pbuf_size[r] + kBuckets - 1) / kBuckets);
}
}  // namespace

void diag_host_write(const void* dst, uint64_t n) {
    if (!check_mode() || !n) return;
    MemRegion mr;
    if (!mem_find(dst, 1, &mr) || mr.kind != MemKind::HcclBuffer) return;
    std::lock_guard<std::mutex> g(g_race_m);
    uint64_t now = now_ns();
    for (Comm* c : g_race_comms)
        for (uint32_t r = 0; r < c->nranks; r++) {
            uintptr_t b = (uintptr_t)c->pbuf[r], x = (uintptr_t)dst;
            if (!b || x < b || x - b >= c->pbuf_size[r]) continue;
            uint64_t len = std::min<uint64_t>(n, c->pbuf_size[r] - (x - b));
            log_access(c->job->race[r], bucket_bytes(c, r), x - b, len, 1, kHostG, 0, 0, 0, (uint16_t)c->rank, 0xfff,
                       0, 0, "host copy (aclrtMemcpy / aclrtMemset)", now);
        }
}

namespace {
const char* access_kind(uint8_t w) { return w == 0 ? "read" : w == 1 ? "write" : "read-modify-write"; }

/* Byte ranges [first, second) of an HCCL buffer (stale-read check). */
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

/* v sorted and merged: disjoint, ascending, no two touching. */
Ranges merged(Ranges v) {
    std::sort(v.begin(), v.end());
    Ranges out;
    for (auto& iv : v) {
        if (iv.first >= iv.second) continue;
        if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
        else out.push_back(iv);
    }
    return out;
}

/* The parts of `pieces` (disjoint, ascending) inside (keep = true) or outside (false) the merged
 * ranges `cover`. */
Ranges split_by(const Ranges& pieces, const Ranges& cover, bool keep) {
    Ranges out;
    size_t j = 0;
    for (auto [lo, hi] : pieces) {
        while (j < cover.size() && cover[j].second <= lo) j++;
        uint64_t pos = lo;
        for (size_t k = j; k < cover.size() && cover[k].first < hi; k++) {
            uint64_t clo = std::max(cover[k].first, lo), chi = std::min(cover[k].second, hi);
            if (!keep && pos < clo) out.emplace_back(pos, clo);
            if (keep) out.emplace_back(clo, chi);
            pos = chi;
        }
        if (!keep && pos < hi) out.emplace_back(pos, hi);
    }
    return out;
}

std::string access_who(const AccessEntry& e) {
    std::string at;
    if (e.caller && e.pid == cached_pid()) at = " at " + code_line((const void*)(uintptr_t)e.caller);
    return strprintf("rank %u %s, task %u of %u (%s%s)", e.rank, thread_name(e.thread).c_str(), e.bidx + 1, e.bsize, e.api,
                     at.c_str());
}
}  // namespace

void check_op_begin(const HTask& t, HThread* self) {
    if (t.kseq == self->op_kseq || !t.kseq) return;
    /* the first task of another launch on this thread: for it, its operation begins here */
    int32_t g = vc_index(self);
    if (g < 0) return;
    self->op_kseq = t.kseq;
    self->op_start_ns = now_ns();
    vc_put(self->vc, (uint32_t)g, self->clock);
    self->op_start_vc = self->vc;
    self->clock++; /* this operation's own accesses come after that point */
    if (self->qlen.load(std::memory_order_relaxed) <= 1) self->vc_lost = false;
}

std::string check_accesses(const HTask& t, HThread* self) {
    if (!check_mode() || !self || !t.comm || t.comm != self->comm) return "";
    Comm* c = t.comm;
    int32_t g = vc_index(self);
    if (g < 0) return "";
    uint64_t now = now_ns();
    check_op_begin(t, self);
    vc_put(self->vc, (uint32_t)g, self->clock);
    auto at = [&] { return t.caller ? " at " + code_line(t.caller) : std::string(); }; /* findings only */
    for (const HTask::Access& a : t.acc) {
        if (a.rank < 0 || (uint32_t)a.rank >= c->nranks || a.len == 0) continue;
        RaceArea& ra = c->job->race[a.rank];
        /* log it first, then look: of two concurrent accesses at least one sees the other */
        uint64_t bb = bucket_bytes(c, (uint32_t)a.rank);
        uint64_t b0 = std::min<uint64_t>(a.off / bb, kBuckets - 1), b1 = std::min<uint64_t>((a.off + a.len - 1) / bb, kBuckets - 1);
        log_access(ra, bb, a.off, a.len, a.write, (uint32_t)g, self->clock, t.tag16, t.inst, (uint16_t)c->rank,
                   (uint16_t)thread_code(self), t.bidx, t.bsize, t.api, now, t.caller);
        SEQ_FENCE(std::memory_order_seq_cst);
        /* Compare with what the buckets hold. */
        /* overlapping writes of this operation (or staged by the host) / ordered before it (clipped to
         * the bucket they were found in), and the evicted writes' hulls (bytes they may have covered) */
        /* Kept per thread: every checked task fills them (no allocation per access once warm). The
         * uncommon path below (a partly covered read) moves them out, and they are made anew. */
        static thread_local Ranges this_op, stale, unsure;
        this_op.clear();
        stale.clear();
        unsure.clear();
        for (uint64_t b = b0; b <= b1; b++) {
            SEQ_GUARD();
            AccessBucket& bk = ra.buckets[b];
            uint64_t blo = b * bb, bhi = b == kBuckets - 1 ? UINT64_MAX : (b + 1) * bb;
            for (uint32_t i = 0; i < kBucketDepth; i++) {
                AccessEntry& e = bk.e[i];
                uint64_t q = e.seq.load(std::memory_order_acquire);
                if (!q) continue;
                /* most entries of a bucket miss this access: test that before copying the entry */
                if (std::max(e.off, a.off) >= std::min(e.off + e.len, a.off + a.len)) continue;
                AccessEntry x;
                x.off = e.off;
                x.len = e.len;
                x.when_ns = e.when_ns;
                x.g = e.g;
                x.clock = e.clock;
                x.tag16 = e.tag16;
                x.inst = e.inst;
                x.rank = e.rank;
                x.thread = e.thread;
                x.write = e.write;
                x.bidx = e.bidx;
                x.bsize = e.bsize;
                x.pid = e.pid;
                x.caller = e.caller;
                memcpy(x.api, e.api, sizeof x.api);
                x.api[sizeof x.api - 1] = 0;
                SEQ_FENCE(std::memory_order_acquire);
                if (e.seq.load(std::memory_order_relaxed) != q) continue; /* rewritten while copied */
                uint64_t lo = std::max(x.off, a.off), hi = std::min(x.off + x.len, a.off + a.len);
                if (lo >= hi) continue;
                if (x.g == kHostG) { /* the host staged these bytes: fresh data, ordered by the host's calls */
                    this_op.emplace_back(lo, hi);
                    continue;
                }
                bool ordered = hb(x.g, x.clock, self->vc);
                if (x.write) {
                    if (!ordered || !hb(x.g, x.clock, self->op_start_vc)) this_op.emplace_back(lo, hi);
                    else stale.emplace_back(std::max(lo, blo), std::min(hi, bhi));
                }
                if ((x.write || a.write) && !ordered && x.g != (uint32_t)g && x.tag16 == t.tag16 && x.inst == t.inst &&
                    !self->vc_lost) {
                    std::string text = strprintf(
                        "race on rank %d's HCCL buffer bytes [%llu, %llu): the %s by rank %d %s, %s (%s%s, op '%s' "
                        "#%u) and the earlier %s of [%llu, %llu) by %s touch the same bytes in the same operation, and "
                        "no notify orders them: the %s did not wait for a notify recorded after the %s, so the data "
                        "depends on timing",
                        a.rank, (unsigned long long)lo, (unsigned long long)hi, access_kind(a.write), c->rank,
                        thread_name(thread_code(self)).c_str(), task_pos(t.bidx, t.bsize).c_str(), t.api, at().c_str(),
                        t.tag ? t.tag : "", t.inst, access_kind(x.write), (unsigned long long)x.off,
                        (unsigned long long)(x.off + x.len), access_who(x).c_str(), access_kind(a.write),
                        access_kind(x.write));
                    return check_finding(c, text);
                }
            }
            /* Loaded after the scan: an entry that left the ring meanwhile is in the hull (log_access
             * widens it before releasing the slot). */
            SEQ_FENCE(std::memory_order_acquire);
            uint64_t elo = ~bk.evicted_nlo.load(std::memory_order_acquire), ehi = bk.evicted_hi.load(std::memory_order_acquire);
            elo = std::max({elo, blo, a.off});
            ehi = std::min({ehi, bhi, a.off + a.len});
            if (elo < ehi) unsure.emplace_back(elo, ehi);
        }
        if (a.write == 1 || self->vc_lost || !t.tag16) continue;
        /* A read of bytes written only before this operation began (or never written): stale data,
         * byte by byte. Bytes no write of this operation covers are stale when a write ordered before
         * the operation covers them in the same bucket (entries leave a bucket in FIFO order, so every
         * later write to them is still there too), and never written when no write still logged covers
         * them and no write that left the ring did (outside that bucket's hull). Other bytes (a write
         * that left the ring may have been this operation's) are not judged. */
        bool whole = false; /* the common case: one write of this operation covers the whole read */
        for (auto& iv : this_op)
            if (iv.first <= a.off && iv.second >= a.off + a.len) whole = true;
        if (whole) continue;
        Ranges gaps = split_by(Ranges(1, {a.off, a.off + a.len}), merged(std::move(this_op)), false);
        if (gaps.empty()) continue;
        Ranges st = merged(std::move(stale));
        Ranges old_ = split_by(gaps, st, true);
        Ranges never = split_by(split_by(gaps, st, false), merged(std::move(unsure)), false);
        if (old_.empty() && never.empty()) continue;
        struct Piece {
            uint64_t lo, hi;
            bool never;
            bool operator<(const Piece& o) const { return lo < o.lo; }
        };
        std::vector<Piece> pieces;
        uint64_t nbytes = 0;
        for (auto& iv : old_) pieces.push_back({iv.first, iv.second, false});
        for (auto& iv : never) pieces.push_back({iv.first, iv.second, true});
        std::sort(pieces.begin(), pieces.end());
        for (auto& p : pieces) nbytes += p.hi - p.lo;
        auto why = [](bool nv) {
            return nv ? "never written on this communicator" : "their last write came before the operation began";
        };
        std::string which;
        if (pieces.size() == 1 && pieces[0].lo == a.off && pieces[0].hi == a.off + a.len) {
            which = strprintf("that nobody wrote in this operation (%s)", why(pieces[0].never));
        } else {
            which = strprintf("of which %llu byte(s) nobody wrote in this operation:", (unsigned long long)nbytes);
            constexpr size_t kShown = 4;
            for (size_t i = 0; i < pieces.size() && i < kShown; i++)
                which += strprintf("%s [%llu, %llu) (offset %llu, %llu byte(s); %s)", i ? "," : "",
                                   (unsigned long long)pieces[i].lo, (unsigned long long)pieces[i].hi,
                                   (unsigned long long)pieces[i].lo, (unsigned long long)(pieces[i].hi - pieces[i].lo),
                                   why(pieces[i].never));
            if (pieces.size() > kShown) which += strprintf(" and %zu more range(s)", pieces.size() - kShown);
        }
        std::string text = strprintf(
            "read of unwritten bytes: rank %d %s, %s (%s%s, op '%s' #%u) reads rank %d's HCCL buffer bytes [%llu, %llu) "
            "%s: it gets stale data (a wrong offset, or a missing write or notify before the read)",
            c->rank, thread_name(thread_code(self)).c_str(), task_pos(t.bidx, t.bsize).c_str(), t.api, at().c_str(),
            t.tag ? t.tag : "", t.inst, a.rank, (unsigned long long)a.off, (unsigned long long)(a.off + a.len),
            which.c_str());
        return check_finding(c, text);
    }
    return "";
}

void race_comm_added(Comm* c) {
    std::lock_guard<std::mutex> g(g_race_m);
    g_race_comms.push_back(c);
}

void race_comm_removed(Comm* c) {
    std::lock_guard<std::mutex> g(g_race_m);
    g_race_comms.erase(std::remove(g_race_comms.begin(), g_race_comms.end(), c), g_race_comms.end());
}

}  // namespace emu
