/* Diagnosis (hcomm-kit extensions to the emulator; they change no CANN behaviour of a correct
 * program): the notify checker, cross-rank hang analysis and reports, per-rank logs, state dumps
 * for launchers, and the collective-call check.
 *
 * Checker (HCOMM_KIT_CHECK, on by default). Every notify record stores who made it (DevCtl::src,
 * prov:: encoding) next to the flag. A record that finds the flag still set is a lost signal (two
 * records merge); a wait that consumes a record made by another call of its operation (or by
 * another operation of the communicator) takes a signal that was not meant for it. Findings fail
 * the operation (code kCheckErrorCode on every rank) or, with HCOMM_KIT_CHECK=warn, are logged.
 *
 * Hang analysis. A monitor thread per process publishes, every kTickNs, a snapshot of every live
 * communicator of the process into its rank's area of the job segment (comm.h DiagArea): blocked
 * waits, the notifies each thread and stream still has to record, running kernels, channel uses,
 * whether the host is blocked in a synchronising call. From the snapshots of every rank, any rank
 * computes which waits can never be satisfied: a wait is stuck when every task that could record
 * its notify is itself stuck, or when nothing can record it any more (the recorder's part of the
 * operation finished or queued all its tasks without recording it, it died, or its host is blocked
 * behind stuck work). When the same set of waits is stuck in two analyses kTickNs apart with no
 * progress anywhere, the hang is certain: the monitor aborts the communicator with a report naming
 * the root causes (dead ends and wait-for cycles) and every knock-on wait, whatever
 * HCCL_EXEC_TIMEOUT says. Waits that are merely long get a progress line every 10 s. Timeouts and
 * launch timeouts use the same report. */
#include "diag/diag.h"

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

/* The board, the clock-vector outboxes and the access logs are seqlocks over shared memory: a
 * reader copies, then checks the sequence number and drops a torn copy. ThreadSanitizer does not
 * support the fences and cannot know that torn copies are dropped, so in TSan builds the copies
 * are also serialised by a process-local mutex (within a process that is the only concurrency it
 * sees). */
#if defined(__SANITIZE_THREAD__)
#define SEQ_FENCE(order) ((void)0)
#define SEQ_GUARD() std::lock_guard<std::mutex> seq_guard_(emu::seq_tsan_mutex())
#else
#define SEQ_FENCE(order) std::atomic_thread_fence(order)
#define SEQ_GUARD() ((void)0)
#endif

namespace emu {

#if defined(__SANITIZE_THREAD__)
static std::mutex& seq_tsan_mutex() {
    static std::mutex& m = *new std::mutex();
    return m;
}
#endif

namespace {
constexpr uint64_t kTickNs = 100000000ull;          /* monitor period */
constexpr uint64_t kAnalyseAfterNs = 250000000ull;  /* a wait this old makes the monitor analyse */
constexpr uint64_t kDeadGraceNs = 1000000000ull;    /* a dead rank's direct waiters fail it before this */
constexpr uint64_t kMismatchSettleNs = 1000000000ull; /* a mismatch waits this long for the ranks to reach it */
constexpr uint64_t kFreshNs = 600000000ull;         /* a live rank's snapshot older than this is unknown */
constexpr uint64_t kConnectFreshNs = 300000000ull;  /* ... and for its host's HcclChannelAcquire */
constexpr uint64_t kSpinNoteMaxNs = 1000000000ull;  /* a running kernel that issued no task for this long is named */
constexpr uint64_t kResampleNs = 2000000000ull;     /* ... and its position sampled again at most this often */
constexpr uint64_t kPendingAgeNs = 200000000ull;    /* a record still set after this long is reported as pending */

template <size_t N>
void copy_str(char (&dst)[N], const char* src) {
    snprintf(dst, N, "%s", src ? src : "");
}

std::string json_esc(const std::string& s) {
    std::string o;
    o.reserve(s.size() + 8);
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (ch < 0x20) o += strprintf("\\u%04x", ch);
                else o += (char)ch;
        }
    }
    return o;
}

double secs(uint64_t ns) { return (double)ns / 1e9; }

/* A running kernel that issued no task for this long is named: 1 s, or half the progress interval
 * (so that the first progress line can name it). */
uint64_t spin_note_ns() { return std::min<uint64_t>(kSpinNoteMaxNs, (uint64_t)cfg().progress_s * 500000000ull); }
}  // namespace

/* ================================================================ naming */

namespace {
std::string wait_text(const DiagWait& w) {
    switch (w.kind) {
        case 1: return strprintf("channel notify slot %u from rank %u", w.index, (unsigned)w.peer);
        case 2: return strprintf("ACL notify id %u", w.index);
        default: return strprintf("thread notify slot %u of %s", w.index, thread_name(w.slot_thread).c_str());
    }
}

/* "op 'tag' #3" / "op 'tag' #3, use #2 of the channel with rank 1" */
std::string op_text(const char* tag, uint32_t inst, uint32_t use, int peer) {
    if (!tag || !*tag) return "a host-side task";
    if (use) return strprintf("op '%s' #%u, use #%u of the channel with rank %d", tag, inst, use, peer);
    return strprintf("op '%s' #%u", tag, inst);
}

std::string task_pos(uint32_t bidx, uint32_t bsize) {
    if (!bsize) return "a task";
    return strprintf("task %u of %u", bidx + 1, bsize);
}

/* The description of the notify a record sets (Record, or Copy/Reduce with post record). */
std::string record_target_text(const SlotDesc& d, int slot_rank) {
    switch (d.kind) {
        case 1: return strprintf("channel notify slot %u of rank %d", d.index, slot_rank);
        case 2: return strprintf("ACL notify id %u of rank %d", d.index, slot_rank);
        case 0xff: return strprintf("notify slot %u of rank %d", d.index, slot_rank);
        default: return strprintf("thread notify slot %u of rank %d %s", d.index, slot_rank, thread_name(d.thread_no).c_str());
    }
}
std::string record_target_text(const HTask& t, int slot_rank) { return record_target_text(t.desc, slot_rank); }

std::string prov_text(Comm* c, uint64_t p) {
    if (!(p & prov::kValid)) return "an earlier record";
    if (p & prov::kHost) return strprintf("an earlier record by rank %u's host side", prov::rank(p));
    std::string tag;
    if (c) comm_op_tag(c, prov::tag16(p), &tag);
    return strprintf("an earlier record by rank %u %s for %s", prov::rank(p), thread_name(prov::thread(p)).c_str(),
                     tag.empty() ? strprintf("an operation with tag hash %04x", prov::tag16(p)).c_str()
                                 : strprintf("op '%s'", tag.c_str()).c_str());
}
}  // namespace

/* ================================================================ checker */


/* ---------------------------------------------------------------- race checker */

namespace {
int32_t vc_index(HThread* t) {
    if (t->vcg != -1) return t->vcg;
    Comm* c = t->comm;
    if (!c || !c->job) return t->vcg = -2;
    std::lock_guard<std::mutex> g(c->m);
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
std::vector<Comm*>& g_race_comms = *new std::vector<Comm*>();

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
        Ranges this_op, stale, unsure;
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

std::string check_finding(Comm* c, const std::string& text) {
    std::string full = "[hcomm-kit check] " + text;
    rank_log("%s", full.c_str());
    if (check_mode() == 2) {
        EMU_LOG(LOG_WARN, "%s (HCOMM_KIT_CHECK=warn: the operation goes on)", full.c_str());
        return "";
    }
    (void)c;
    return full + " (HCOMM_KIT_CHECK=warn reports without failing; =0 turns the checker off)";
}

std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan) {
    bool chk = check_mode() != 0, tr = trace_on();
    if (!chk && !tr) {
        slot_record(ctl, slot);
        return "";
    }
    Comm* c = self && self->comm ? self->comm : t.comm;
    int rank = c ? comm_rank(c) : -1;
    uint64_t fid = chk && self ? vc_publish(self) : 0;
    if (!fid && tr && self) fid = trace_flow_id((uint32_t)(rank < 0 ? 0 : rank));
    ctl->flow[slot].store(fid, std::memory_order_release);
    if (tr) trace_flow(true, fid, self, now_ns());
    if (!chk) {
        slot_record(ctl, slot);
        return "";
    }
    uint32_t code = thread_code(self);
    uint64_t p = prov::make(t.tag16 == 0, chan, rank < 0 ? 0x7f : (uint32_t)rank, code, t.tag16, t.inst, t.use);
    uint64_t before = ctl->src[slot].load(std::memory_order_relaxed);
    ctl->src[slot].store(p, std::memory_order_release);
    if (self) {
        std::lock_guard<std::mutex> g(self->rec_m);
        HThread::RecentRecord& r = self->recent[self->nrecent++ % 8];
        r.ctl = ctl;
        r.slot = slot;
        r.slot_rank = slot_rank;
        r.prov = p;
        r.when_ns = now_ns();
        r.caller = t.caller;
        r.api = t.api;
        r.tag = t.tag;
        r.desc = t.desc;
        if (!(t.desc.kind || t.op == HOp::Record)) { /* a post record: only the slot is known */
            r.desc.kind = 0xff;
            r.desc.index = slot;
        }
        r.bidx = t.bidx;
        r.bsize = t.bsize;
        r.inst = t.inst;
        r.use = t.use;
    }
    uint32_t old = ctl->slots[slot].exchange(1, std::memory_order_acq_rel);
    doorbell_ring(ctl);
    if (!old) return "";
    if (c && comm_aborted(c, nullptr)) return ""; /* leftovers of the operation that failed */
    std::string who = self ? strprintf("rank %d %s", rank, thread_name(code).c_str()) : std::string("the host");
    std::string at = t.caller ? " at " + code_line(t.caller) : std::string();
    std::string text = strprintf(
        "lost notify: %s, %s (%s%s, %s), set %s while it was still set by %s that no wait has consumed yet; "
        "the two records merge into one, so a wait will miss a signal (a doubled record, or a record before the "
        "peer consumed the previous one)",
        who.c_str(), task_pos(t.bidx, t.bsize).c_str(), t.api, at.c_str(),
        op_text(t.tag, t.inst, t.use, slot_rank).c_str(),
        t.desc.kind || t.op == HOp::Record ? record_target_text(t, slot_rank).c_str()
                                           : strprintf("notify slot %u of rank %d", slot, slot_rank).c_str(),
        prov_text(c, before).c_str());
    return check_finding(c, text);
}

bool consume_slot(const HTask& t, HThread* self, std::string* finding) {
    DevCtl* c = t.slot_ctl;
    uint32_t s = t.slot;
    bool chk = check_mode() != 0, tr = trace_on();
    if (!chk && !tr) return slot_consume(c, s);
    if (c->slots[s].load(std::memory_order_acquire) == 0) return false;
    /* Provenance first, then the flag (record_slot writes them in the other order): a record that
     * lands in between finds the flag still set and is reported as lost, never misattributed. */
    uint64_t vid = c->flow[s].exchange(0, std::memory_order_acq_rel);
    uint64_t p = chk ? c->src[s].exchange(0, std::memory_order_acq_rel) : 0;
    if (c->slots[s].exchange(0, std::memory_order_acq_rel) != 1) return false;
    if (tr) trace_flow(false, vid, self, now_ns());
    if (!chk) return true;
    if (self && vid && !(vid & kTraceOnlyId)) vc_join(self, vid);
    if (!(p & prov::kValid) || (p & prov::kHost) || t.tag16 == 0 || !t.comm) return true;
    /* Which call of its operation made the record, against the waiter's: the same operation (op
     * tag hash) and, for collectives, the same instance number on both ranks; for channel notifies
     * also the same use number of the channel (the only match for point-to-point calls, whose
     * instance numbers differ per partner). A finding needs every available match to fail. */
    bool chan = t.desc.kind == 1 && (p & prov::kChan);
    uint32_t ptag = prov::tag16(p);
    int d_inst = prov::delta(t.inst % prov::kMod, prov::inst(p));
    int d_use = chan ? prov::delta(t.use % prov::kMod, prov::use(p)) : 0;
    std::string other;
    bool same = ptag == t.tag16;
    if (same) {
        if (d_inst == 0 || (chan && d_use == 0)) return true;
    } else {
        if (chan && d_use == 0) return true;               /* paired operators of different names */
        if (!comm_op_tag(t.comm, ptag, &other)) return true; /* a tag this rank never ran: no claim */
    }
    int rank = comm_rank(t.comm);
    std::string waiter = strprintf("rank %d %s, %s (%s%s on %s, %s)", rank, thread_name(thread_code(self)).c_str(),
                                   task_pos(t.bidx, t.bsize).c_str(), t.api,
                                   t.caller ? (" at " + code_line(t.caller)).c_str() : "",
                                   t.desc.kind == 1 ? strprintf("channel notify slot %u from rank %u", t.desc.index, t.desc.peer).c_str()
                                   : t.desc.kind == 2 ? strprintf("ACL notify id %u", t.desc.index).c_str()
                                                      : strprintf("thread notify slot %u", t.desc.index).c_str(),
                                   op_text(t.tag, t.inst, chan ? t.use : 0, t.desc.peer).c_str());
    std::string rec = strprintf("rank %u %s", prov::rank(p), thread_name(prov::thread(p)).c_str());
    int d = chan ? d_use : d_inst;
    const char* unit = chan ? "use of the channel" : "call of the operation";
    std::string why;
    if (same && d > 0)
        why = strprintf("it was recorded by %s in a later %s (%d ahead): the matching call there never recorded it (a "
                        "missing record in that rank's call, or one wait too many here)",
                        rec.c_str(), unit, d);
    else if (same)
        why = strprintf("it was recorded by %s in an earlier %s (%d behind) and left set: that call recorded it once more "
                        "than it was waited for (a doubled record), and this call consumed the leftover instead of its "
                        "own signal",
                        rec.c_str(), unit, -d);
    else
        why = strprintf("it was recorded by %s for another operation, op '%s': notifies of two operations met (collective "
                        "calls that do not match across ranks, or two operations sharing a channel or thread at once)",
                        rec.c_str(), other.c_str());
    *finding = check_finding(t.comm, "notify from another call: " + waiter + " consumed a notify, but " + why);
    return true;
}

/* ================================================================ per-rank log */

namespace {
std::mutex& g_log_m = *new std::mutex();
FILE* g_log = nullptr;
bool g_log_tried = false;

std::string world_rank_text() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HCOMM_KIT_RANK", "RANK"}) {
        const char* x = getenv(v);
        if (x && *x && strspn(x, "0123456789") == strlen(x)) return x;
    }
    return "";
}
}  // namespace

void diag_logv(const char* fmt, va_list ap) {
    const std::string& dir = cfg().log_dir;
    if (dir.empty()) return;
    char small[1024];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    std::string msg;
    if (n >= (int)sizeof small) {
        msg.resize((size_t)n + 1);
        vsnprintf(&msg[0], msg.size(), fmt, ap2);
        msg.resize((size_t)n);
    } else {
        msg.assign(small, n < 0 ? 0 : (size_t)n);
    }
    va_end(ap2);
    std::lock_guard<std::mutex> g(g_log_m);
    if (!g_log && !g_log_tried) {
        g_log_tried = true;
        mkdir(dir.c_str(), 0777);
        std::string r = world_rank_text();
        std::string path = dir + "/" + (r.empty() ? strprintf("pid%d", (int)getpid()) : "rank" + r) + ".log";
        g_log = fopen(path.c_str(), "a");
        if (!g_log) {
            fprintf(stderr, "[hcomm-kit emu WARN pid %d] HCOMM_KIT_LOG_DIR: cannot open %s: %s\n", (int)getpid(),
                    path.c_str(), strerror(errno));
            return;
        }
        setvbuf(g_log, nullptr, _IOLBF, 0);
    }
    if (!g_log) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tmv;
    localtime_r(&ts.tv_sec, &tmv);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
    fprintf(g_log, "%s.%06ld pid %d emu: %s\n", when, ts.tv_nsec / 1000, (int)getpid(), msg.c_str());
}

/* ================================================================ snapshots */

namespace {
int rank_of_ctl(Comm* c, const DevCtl* ctl) {
    for (uint32_t r = 0; r < c->nranks; r++)
        if (c->ctl[r] == ctl) return (int)r;
    return -1;
}

void fill_wait(DiagWait* w, const HTask& h) {
    w->kind = h.desc.kind;
    w->peer = h.desc.peer;
    w->index = h.desc.index;
    w->slot = h.slot;
    w->slot_thread = h.desc.thread_no;
    w->timeout_s = h.timeout_s;
    w->inst = h.inst;
    w->use = h.use;
    w->tag16 = h.tag16;
    w->bidx = h.bidx;
    w->bsize = h.bsize;
    w->since_ns = __atomic_load_n(&h.wait_start_ns, __ATOMIC_RELAXED);
    w->kseq = h.kseq;
    copy_str(w->api, h.api);
    /* the source line costs an addr2line run the first time: only for waits that last */
    uint64_t now = now_ns();
    if (h.caller && w->since_ns && now - std::min(now, w->since_ns) >= kAnalyseAfterNs / 2)
        copy_str(w->where, code_line(h.caller).c_str());
}

void add_rec(DiagRec* rec, uint8_t* n, uint32_t* more, int rank, uint32_t slot) {
    for (uint8_t i = 0; i < *n; i++)
        if (rec[i].rank == rank && rec[i].slot == slot) return;
    if (*n < kDiagRecs) rec[(*n)++] = DiagRec{(int16_t)rank, 0, slot};
    else (*more)++;
}

struct KSeen {
    uint64_t kseq;
    uint32_t queued;
    const char* kernel;
    const char* tag;
};

/* The snapshot of communicator c on this rank. */
void build_snap(Comm* c, DiagSnap* s, uint64_t pending_age_ns = kPendingAgeNs) {
    memset(s, 0, offsetof(DiagSnap, threads));
    s->npending = s->nunclaimed = 0;
    std::set<uint32_t> waited; /* slots of this rank that a queued wait of this communicator consumes */
    struct Running {
        uint64_t kseq, deadline_ns;
        std::shared_ptr<KernelRun> run;
    };
    std::vector<Running> running;
    s->pid = (int32_t)getpid();
    s->device = c->dev->id;
    s->host_sync = c->dev->host_sync.load();
    s->host_sync_stream = c->dev->host_sync_stream.load();
    s->taken_ns = now_ns();
    std::vector<HThread*> threads;
    std::vector<std::pair<uint32_t, Channel*>> chans;
    std::vector<std::pair<uint32_t, Comm::OpTrack>> ops;
    /* c->m may be held for long by a control-plane call (channel setup waits for its peers): never
     * wait for it here, use what was read last time (threads and channels are only ever added). */
    std::unique_lock<std::mutex> cm(c->m, std::try_to_lock);
    {
        std::lock_guard<std::mutex> dg(c->diag_m);
        if (cm.owns_lock()) {
            c->diag_threads = c->threads;
            c->diag_chans.clear();
            for (auto& kv : c->channels) c->diag_chans.emplace_back(std::get<1>(kv.first), kv.second);
            c->diag_ops.assign(c->ops.begin(), c->ops.end());
            cm.unlock();
        }
        threads = c->diag_threads;
        chans = c->diag_chans;
        ops = c->diag_ops;
        copy_str(s->host_call, c->cp_what.c_str());
        s->host_call_since = c->cp_since;
        s->host_connect = c->cp_peers;
    }
    std::vector<KSeen> ks;
    auto seen = [&](const HTask& h) {
        if (!h.kseq) return;
        for (auto& k : ks)
            if (k.kseq == h.kseq) {
                k.queued++;
                return;
            }
        ks.push_back(KSeen{h.kseq, 1, h.kernel, h.tag});
    };
    uint64_t progress = 0;
    for (HThread* t : threads) {
        if (t->stream_bound) {
            progress += t->executed.load(std::memory_order_relaxed);
            continue;
        }
        progress += t->executed.load(std::memory_order_relaxed);
        std::lock_guard<std::mutex> g(t->qm);
        if (t->q.empty()) {
            if (t->failed.load() && s->nthreads < kDiagThreads) {
                DiagThread& d = s->threads[s->nthreads++];
                memset(&d, 0, sizeof d);
                d.code = (uint16_t)thread_code(t);
                d.state = 3;
                d.executed = t->executed.load();
            } else {
                s->idle_threads++;
            }
            continue;
        }
        if (s->nthreads >= kDiagThreads) continue;
        DiagThread& d = s->threads[s->nthreads++];
        memset(&d, 0, sizeof d);
        d.code = (uint16_t)thread_code(t);
        d.executed = t->executed.load(std::memory_order_relaxed);
        d.queued = (uint32_t)t->q.size();
        const HTask& h = t->q.front();
        fill_wait(&d.head, h);
        copy_str(d.tag, h.tag);
        copy_str(d.kernel, h.kernel);
        if (h.op == HOp::Wait) {
            bool set = h.slot_ctl->slots[h.slot].load(std::memory_order_relaxed) != 0;
            d.head.set = set;
            d.state = set ? 1 : 2;
        } else {
            d.state = 1;
        }
        bool first = true;
        for (const HTask& q : t->q) {
            seen(q);
            if (q.op == HOp::Wait && q.slot_ctl == c->dev->ctl) waited.insert(q.slot);
            if (first) { /* the head's own record counts too when it is not a blocked wait */
                first = false;
                if (d.state == 2) continue;
            }
            if (q.op == HOp::Record) add_rec(d.rec, &d.nrec, &d.rec_more, q.slot_rank, q.slot);
            if (q.has_post_record) add_rec(d.rec, &d.nrec, &d.rec_more, q.post_rank, q.post_slot);
        }
    }
    /* streams of the device */
    streams_visit(c->dev, [&](Stream* st) {
        std::lock_guard<std::mutex> g(st->m);
        if (!st->cur && st->q.empty()) return;
        /* Only this communicator's streams: its stream-bound threads', and those running or holding
         * its barriers, Hcomm tasks or kernels (other communicators on the device are another
         * analysis; mixing them in would make their waits look unrecordable here). */
        uint16_t code = 0xffff;
        for (HThread* t : threads)
            if (t->stream_bound && t->stream == st) code = (uint16_t)thread_code(t);
        bool mine = code != 0xffff ||
                    std::find(st->kernel_comms.begin(), st->kernel_comms.end(), c) != st->kernel_comms.end();
        if (!mine && st->cur) {
            TaskDiag td;
            st->cur->describe(&td);
            mine = td.comm == c;
        }
        for (size_t i = 0; !mine && i < st->q.size(); i++) {
            TaskDiag td;
            st->q[i]->describe(&td);
            mine = td.comm == c;
        }
        if (!mine) return;
        progress += st->completed.load(std::memory_order_relaxed);
        if (s->nstreams >= kDiagStreams) return;
        DiagStream& d = s->streams[s->nstreams++];
        memset(&d, 0, sizeof d);
        d.id = st->id;
        d.thread = code;
        d.pending = (uint32_t)st->q.size();
        d.since_ns = st->cur_since_ns;
        if (st->cur) {
            TaskDiag td;
            st->cur->describe(&td);
            copy_str(d.what, td.what.c_str());
            switch (td.kind) {
                case TaskDiag::Kernel: {
                    d.state = 1;
                    d.kseq = st->kernel_seq;
                    if (st->kernel_run) running.push_back(Running{d.kseq, st->kernel_deadline_ns, st->kernel_run});
                    bool found = false;
                    for (auto& k : ks)
                        if (k.kseq == d.kseq) found = true;
                    if (!found && d.kseq) ks.push_back(KSeen{d.kseq, 0, nullptr, nullptr});
                    break;
                }
                case TaskDiag::Wait:
                    if (td.wait) {
                        fill_wait(&d.wait, *td.wait);
                        if (td.since_ns) d.wait.since_ns = td.since_ns;
                        d.wait.set = td.wait->slot_ctl->slots[td.wait->slot].load(std::memory_order_relaxed) != 0;
                    }
                    d.state = td.since_ns && !d.wait.set ? 2 : 4;
                    break;
                case TaskDiag::Barrier:
                    d.state = td.comm == c ? 3 : 4;
                    d.barrier_seq = td.barrier_seq;
                    break;
                default: d.state = 4;
            }
            for (auto& r : td.records) add_rec(d.rec, &d.nrec, &d.rec_more, rank_of_ctl(c, r.first), r.second);
        } else {
            d.state = 4;
            copy_str(d.what, "(between tasks)");
        }
        if (st->cur) {
            TaskDiag td;
            st->cur->describe(&td);
            if (td.wait && td.wait->slot_ctl == c->dev->ctl) waited.insert(td.wait->slot);
        }
        for (auto& t : st->q) {
            TaskDiag td;
            t->describe(&td);
            for (auto& r : td.records) add_rec(d.rec, &d.nrec, &d.rec_more, rank_of_ctl(c, r.first), r.second);
            if (td.wait && td.wait->slot_ctl == c->dev->ctl) waited.insert(td.wait->slot);
        }
    });
    /* kernels: running ones (on streams) and returned ones with queued tasks */
    for (auto& k : ks) {
        if (s->nkernels >= kDiagKernels) break;
        DiagKernel& d = s->kernels[s->nkernels++];
        memset(&d, 0, sizeof d);
        d.kseq = k.kseq;
        d.queued = k.queued;
        copy_str(d.name, k.kernel);
        copy_str(d.tag, k.tag);
        for (uint32_t i = 0; i < s->nstreams; i++)
            if (s->streams[i].state == 1 && s->streams[i].kseq == k.kseq) {
                d.running = 1;
                d.stream = s->streams[i].id;
                if (!k.kernel) copy_str(d.name, s->streams[i].what + (strncmp(s->streams[i].what, "kernel ", 7) ? 0 : 7));
            }
        for (auto& r : running)
            if (r.kseq == k.kseq && d.running) {
                d.start_ns = r.run->start_ns.load();
                d.last_task_ns = r.run->last_task_ns.load();
                d.deadline_ns = r.deadline_ns;
                /* issued no task for a while: where is it? (the stream lock is not held here) */
                uint64_t now = now_ns(), since = std::max(d.start_ns, d.last_task_ns);
                if (since && now - std::min(now, since) >= spin_note_ns())
                    copy_str(d.where, kernel_sample_where(*r.run, kResampleNs).c_str());
            }
    }
    /* notifies this rank recorded that are still set (nobody consumed them yet) */
    uint64_t pnow = now_ns();
    for (HThread* t : threads) {
        std::lock_guard<std::mutex> g(t->rec_m);
        for (uint32_t i = 0; i < std::min<uint32_t>(t->nrecent, 8) && s->npending < kDiagPending; i++) {
            const HThread::RecentRecord& r = t->recent[i];
            if (!r.ctl || pnow - std::min(pnow, r.when_ns) < pending_age_ns) continue;
            if (!r.ctl->slots[r.slot].load(std::memory_order_relaxed) ||
                r.ctl->src[r.slot].load(std::memory_order_relaxed) != r.prov)
                continue;
            bool dup = false;
            for (uint32_t k = 0; k < s->npending; k++)
                if (s->pending[k].owner == r.slot_rank && s->pending[k].slot == r.slot) dup = true;
            if (dup) continue;
            DiagPending& d = s->pending[s->npending++];
            memset(&d, 0, sizeof d);
            d.owner = (int16_t)r.slot_rank;
            d.thread = (uint16_t)thread_code(t);
            d.slot = r.slot;
            d.bidx = r.bidx;
            d.bsize = r.bsize;
            d.inst = r.inst;
            d.use = r.use;
            d.tag16 = prov::tag16(r.prov);
            d.when_ns = r.when_ns;
            copy_str(d.api, r.api);
            if (r.caller) copy_str(d.where, code_line(r.caller).c_str());
            copy_str(d.target, record_target_text(r.desc, r.slot_rank).c_str());
            copy_str(d.tag, r.tag);
        }
    }
    /* slots of this rank that are set and that no queued wait of this communicator consumes */
    {
        DevCtl* ctl = c->dev->ctl;
        auto look = [&](uint32_t base, uint32_t n) {
            for (uint32_t i = 0; i < n && s->nunclaimed < kDiagUnclaimed; i++) {
                uint64_t p = ctl->src[base + i].load(std::memory_order_relaxed);
                if (ctl->slots[base + i].load(std::memory_order_relaxed) && (p & prov::kValid) && !(p & prov::kHost) &&
                    !waited.count(base + i))
                    s->unclaimed[s->nunclaimed++] = DiagSetSlot{base + i, 0};
            }
        };
        for (HThread* t : threads)
            if (!t->stream_bound) look(t->slot_base, t->nslots);
        for (auto& pc : chans) look(pc.second->local_slot_base, pc.second->notify_num);
    }
    /* instances (or channel uses) up to `submitted` whose kernel has no task left queued */
    auto done_upto = [&](uint32_t submitted, const std::function<uint64_t(uint32_t)>& kseq_of) {
        uint32_t done = submitted;
        while (done > 0 && submitted - done < 8) {
            uint64_t kq = kseq_of(done);
            bool queued = false;
            for (auto& k : ks)
                if (k.kseq == kq && k.queued) queued = true;
            if (!queued) break;
            done--;
        }
        return submitted - done >= 8 ? submitted - 8 : done;
    };
    for (auto& pc : chans) {
        if (s->nchans >= kDiagChans) break;
        Channel* ch = pc.second;
        DiagChan& d = s->chans[s->nchans++];
        d.peer = (uint16_t)pc.first;
        d.uses = ch->uses.load();
        d.submitted = ch->uses_submitted.load();
        d.done = done_upto(d.submitted, [&](uint32_t n) { return ch->use_kseq[n % 8].load(); });
    }
    for (auto& o : ops) {
        if (s->nops >= kDiagOps) break;
        DiagOp& d = s->ops[s->nops++];
        d.tag16 = o.first;
        d.started = o.second.started;
        d.submitted = o.second.submitted;
        d.done = done_upto(d.submitted, [&](uint32_t n) { return o.second.kseq[n % 8]; });
        copy_str(d.tag, o.second.tag.c_str());
    }
    s->progress = progress;
}

void publish(Comm* c, const DiagSnap& s) {
    SEQ_GUARD();
    DiagArea& a = c->job->diag[c->rank];
    uint32_t q = a.seq.load(std::memory_order_relaxed);
    a.seq.store(q + 1, std::memory_order_relaxed);
    SEQ_FENCE(std::memory_order_release);
    memcpy(&a.snap, &s, sizeof s);
    SEQ_FENCE(std::memory_order_release);
    a.seq.store(q + 2, std::memory_order_release);
    a.heartbeat_ns.store(now_ns(), std::memory_order_release);
}

/* Copies rank r's snapshot; false when it is being rewritten over and over or never published. */
bool read_snap(Comm* c, uint32_t r, DiagSnap* out, uint64_t* heartbeat) {
    SEQ_GUARD();
    DiagArea& a = c->job->diag[r];
    for (int i = 0; i < 50; i++) {
        uint32_t q1 = a.seq.load(std::memory_order_acquire);
        if (q1 & 1) {
            std::this_thread::yield();
            continue;
        }
        if (q1 == 0) return false;
        memcpy(out, &a.snap, sizeof *out);
        SEQ_FENCE(std::memory_order_acquire);
        if (a.seq.load(std::memory_order_relaxed) == q1) {
            *heartbeat = a.heartbeat_ns.load(std::memory_order_acquire);
            return true;
        }
    }
    return false;
}

/* ================================================================ analysis */

struct RankView {
    bool have = false;  /* a fresh snapshot */
    bool dead = false;
    bool gone = false;
    std::unique_ptr<DiagSnap> s;
};

struct Node {
    /* Host: blocked in a synchronize call; Connect: blocked in HcclChannelAcquire for other ranks. */
    enum Type : uint8_t { ThreadWait, StreamWait, Barrier, Host, Connect } type;
    int rank;
    int idx;            /* thread / stream index in the snapshot (Host: -1) */
    bool stuck = true;
    std::string dead_end; /* nothing will ever record it: why */
    std::vector<int> deps;    /* the stuck waits of the tasks that would record its notify */
    std::vector<int> through; /* stuck hosts / barriers it depends on otherwise (dead ends) */
};

struct Analysis {
    std::vector<RankView> ranks;
    std::vector<Node> nodes;
    std::vector<int> host_node;   /* per rank, -1 */
    std::vector<int> connect_node; /* per rank, -1 */
    uint64_t now = 0;
    int self = -1;
};

const DiagWait* node_wait(const Analysis& A, const Node& n) {
    const DiagSnap& s = *A.ranks[n.rank].s;
    if (n.type == Node::ThreadWait) return &s.threads[n.idx].head;
    if (n.type == Node::StreamWait) return &s.streams[n.idx].wait;
    return nullptr;
}

bool truncated(const DiagSnap& s) {
    for (uint32_t i = 0; i < s.nthreads; i++)
        if (s.threads[i].rec_more) return true;
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].rec_more) return true;
    return s.idle_threads + s.nthreads >= kDiagThreads && s.nthreads >= kDiagThreads;
}

const DiagChan* find_chan(const DiagSnap& s, uint32_t peer) {
    for (uint32_t i = 0; i < s.nchans; i++)
        if (s.chans[i].peer == peer) return &s.chans[i];
    return nullptr;
}

bool any_runnable_stream(const DiagSnap& s) {
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].state == 1 || s.streams[i].state == 4) return true;
    return false;
}

const char* op_tag_of(const DiagSnap& s, uint32_t tag16) {
    for (uint32_t i = 0; i < s.nops; i++)
        if (s.ops[i].tag16 == tag16) return s.ops[i].tag;
    return nullptr;
}

void analyse(Comm* c, Analysis& A) {
    uint32_t n = c->nranks;
    A.now = now_ns();
    A.self = (int)c->rank;
    A.ranks.resize(n);
    for (uint32_t r = 0; r < n; r++) {
        RankView& v = A.ranks[r];
        if (r != c->rank) {
            v.dead = c->dead[r].load() || comm_peer_dead(c, (int)r);
            v.gone = comm_peer_gone(c, (int)r);
        }
        if (v.dead) continue;
        v.s.reset(new DiagSnap);
        if (v.gone) { /* its last words: the records it left unconsumed (diag_comm_removed) */
            uint64_t hb = 0;
            if (!read_snap(c, r, v.s.get(), &hb)) v.s.reset();
            continue;
        }
        uint64_t hb = 0;
        if (r == c->rank) {
            build_snap(c, v.s.get());
            v.have = true;
        } else if (read_snap(c, r, v.s.get(), &hb) && A.now - std::min(hb, A.now) < kFreshNs) {
            v.have = true;
        }
    }
    A.host_node.assign(n, -1);
    A.connect_node.assign(n, -1);
    for (uint32_t r = 0; r < n; r++) {
        RankView& v = A.ranks[r];
        if (!v.have) continue;
        const DiagSnap& s = *v.s;
        for (uint32_t i = 0; i < s.nthreads; i++)
            if (s.threads[i].state == 2) A.nodes.push_back(Node{Node::ThreadWait, (int)r, (int)i, true, "", {}, {}});
        for (uint32_t i = 0; i < s.nstreams; i++) {
            if (s.streams[i].state == 2) A.nodes.push_back(Node{Node::StreamWait, (int)r, (int)i, true, "", {}, {}});
            if (s.streams[i].state == 3) A.nodes.push_back(Node{Node::Barrier, (int)r, (int)i, true, "", {}, {}});
        }
        if (s.host_sync) {
            A.host_node[r] = (int)A.nodes.size();
            A.nodes.push_back(Node{Node::Host, (int)r, -1, true, "", {}, {}});
        }
        /* A host in HcclChannelAcquire is judged from a recent snapshot only: a peer that has just
         * moved on (into the matching call) must not look blocked elsewhere. */
        if (s.host_connect && (r == c->rank || A.now - std::min(A.now, s.taken_ns) < kConnectFreshNs)) {
            A.connect_node[r] = (int)A.nodes.size();
            A.nodes.push_back(Node{Node::Connect, (int)r, -1, true, "", {}, {}});
        }
    }
    /* who records what: (rank owning the slot, slot) -> sources (node index, or -1 = runnable) */
    std::map<std::pair<int, uint32_t>, std::vector<int>> sources;
    auto node_of = [&](int r, bool thread, int idx) -> int {
        for (size_t k = 0; k < A.nodes.size(); k++) {
            const Node& nd = A.nodes[k];
            if (nd.rank == r && nd.idx == idx &&
                (thread ? nd.type == Node::ThreadWait : (nd.type == Node::StreamWait || nd.type == Node::Barrier)))
                return (int)k;
        }
        return -1;
    };
    for (uint32_t r = 0; r < n; r++) {
        if (!A.ranks[r].have) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.nthreads; i++) {
            const DiagThread& t = s.threads[i];
            if (t.state == 3) continue; /* failed: records nothing any more */
            int nd = t.state == 2 ? node_of((int)r, true, (int)i) : -1;
            for (uint8_t k = 0; k < t.nrec; k++) sources[{t.rec[k].rank, t.rec[k].slot}].push_back(nd);
        }
        for (uint32_t i = 0; i < s.nstreams; i++) {
            const DiagStream& st = s.streams[i];
            int nd = (st.state == 2 || st.state == 3) ? node_of((int)r, false, (int)i) : -1;
            for (uint8_t k = 0; k < st.nrec; k++) sources[{st.rec[k].rank, st.rec[k].slot}].push_back(nd);
        }
    }
    /* A rank's host can no longer issue anything: every call it is blocked in is stuck. */
    auto host_stuck = [&](int r) {
        int h = A.host_node[r], k = A.connect_node[r];
        return (h >= 0 || k >= 0) && (h < 0 || A.nodes[h].stuck) && (k < 0 || A.nodes[k].stuck);
    };
    auto host_blocker = [&](int r) { return A.connect_node[r] >= 0 ? A.connect_node[r] : A.host_node[r]; };
    /* greatest fixpoint: start from "everything blocked is stuck", unmark what can progress */
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t k = 0; k < A.nodes.size(); k++) {
            Node& nd = A.nodes[k];
            if (!nd.stuck) continue;
            bool stuck = true;
            std::string dead_end;
            std::vector<int> deps, through;
            const DiagSnap& s = *A.ranks[nd.rank].s;
            if (nd.type == Node::Host) {
                uint32_t want = s.host_sync_stream;
                bool found = false;
                for (uint32_t i = 0; i < s.nstreams && stuck; i++) {
                    const DiagStream& st = s.streams[i];
                    if (want && st.id != want) continue;
                    found = true;
                    int sn = node_of(nd.rank, false, (int)i);
                    if (sn < 0 || !A.nodes[sn].stuck) stuck = false;
                    else through.push_back(sn);
                }
                if (want && !found) stuck = false; /* the stream is idle: the synchronize returns */
                if (!want && any_runnable_stream(s)) stuck = false;
                if (!found && !want && through.empty()) stuck = false;
            } else if (nd.type == Node::Connect) {
                /* Rank p completes its end of the channel only from its own HcclChannelAcquire: not
                 * while its host is blocked in another one that does not include this rank, or in a
                 * stuck synchronize call. */
                for (uint32_t p = 0; p < n && p < 64 && stuck; p++) {
                    if (!(s.host_connect >> p & 1)) continue;
                    if (A.ranks[p].dead || A.ranks[p].gone) {
                        if (dead_end.empty())
                            dead_end = strprintf("rank %u %s", p, A.ranks[p].dead ? "died" : "already destroyed its communicator");
                        continue;
                    }
                    if (!A.ranks[p].have || (A.ranks[p].s->host_connect >> nd.rank & 1) || !host_stuck((int)p)) {
                        stuck = false; /* unknown, both ends are in the handshake, or p may still call it */
                    } else if (A.connect_node[p] >= 0) {
                        deps.push_back(A.connect_node[p]);
                    } else {
                        through.push_back(A.host_node[p]);
                        if (dead_end.empty())
                            dead_end = strprintf("rank %u cannot call HcclChannelAcquire for it: its host is blocked in a "
                                                 "synchronize call behind work that is stuck", p);
                    }
                }
            } else if (nd.type == Node::Barrier) {
                uint32_t b = s.streams[nd.idx].barrier_seq;
                for (uint32_t q = 0; q < n && stuck; q++) {
                    if ((int)q == nd.rank) continue;
                    if ((int32_t)(c->job->bar_seq[q].load() - b) >= 0) continue; /* arrived */
                    if (A.ranks[q].dead || A.ranks[q].gone) {
                        if (dead_end.empty())
                            dead_end = strprintf("rank %u %s", q, A.ranks[q].dead ? "died" : "already destroyed its communicator");
                        continue;
                    }
                    if (!A.ranks[q].have || !host_stuck((int)q)) stuck = false;
                    else through.push_back(host_blocker((int)q));
                }
            } else {
                const DiagWait& w = *node_wait(A, nd);
                auto it = sources.find({nd.rank, w.slot});
                if (it != sources.end() && !it->second.empty()) {
                    for (int src : it->second) {
                        if (src < 0 || !A.nodes[src].stuck) {
                            stuck = false;
                            break;
                        }
                        deps.push_back(src);
                    }
                } else if (w.kind == 1) {
                    uint32_t p = w.peer;
                    if (p < n && A.ranks[p].dead) {
                        dead_end = strprintf("rank %u died", p);
                    } else if (p < n && A.ranks[p].gone) {
                        dead_end = strprintf("rank %u already destroyed its communicator", p);
                    } else if (p >= n || !A.ranks[p].have || truncated(*A.ranks[p].s)) {
                        stuck = false;
                    } else {
                        const DiagSnap& ps = *A.ranks[p].s;
                        const DiagChan* ch = find_chan(ps, (uint32_t)nd.rank);
                        const DiagOp* op = nullptr;
                        for (uint32_t i = 0; i < ps.nops; i++)
                            if (ps.ops[i].tag16 == w.tag16) op = &ps.ops[i];
                        const char* tag = op_tag_of(s, w.tag16);
                        std::string opname = tag ? strprintf("'%s' #%u", tag, w.inst) : std::string("this operation");
                        /* Rank p's part of this call is known by two numbers: the instance of the
                         * same op tag, and its use of the channel with this rank. Both must say
                         * "finished" (or "started") before anything is concluded. */
                        auto stage = [](uint32_t n, uint32_t done, uint32_t submitted, uint32_t started) {
                            return n <= done ? 3 : n <= submitted ? 2 : n <= started ? 1 : 0;
                        };
                        int s_ch = ch && w.use ? stage(w.use, ch->done, ch->submitted, ch->uses) : -1;
                        int s_op = op && w.inst ? stage(w.inst, op->done, op->submitted, op->started) : -1;
                        int lo = s_ch < 0 ? s_op : s_op < 0 ? s_ch : std::min(s_ch, s_op);
                        if (!ch) {
                            dead_end = strprintf("rank %u has no channel to rank %d", p, nd.rank);
                        } else if (s_ch < 0 || s_op < 0) {
                            stuck = false; /* rank p's part cannot be matched by both numbers: no claim */
                        } else if (lo >= 2) {
                            dead_end = strprintf("rank %u's part of %s (its use #%u of the channel with rank %d) %s", p,
                                                 opname.c_str(), w.use, nd.rank,
                                                 lo == 3 ? "finished without recording it"
                                                         : "has queued all its tasks and none of them records it");
                        } else if (lo == 1) {
                            stuck = false; /* its kernel still runs and may record it */
                        } else if (!host_stuck((int)p) || any_runnable_stream(ps)) {
                            stuck = false; /* rank p has not started it yet and still can */
                        } else {
                            dead_end = strprintf("rank %u has not started its part of %s and cannot: its host is "
                                                 "blocked in a synchronize call behind work that is stuck",
                                                 p, opname.c_str());
                            through.push_back(host_blocker((int)p));
                        }
                    }
                } else {
                    if (truncated(s) || any_runnable_stream(s)) {
                        stuck = false;
                    } else if (!host_stuck(nd.rank)) {
                        stuck = false; /* the host may still enqueue the record */
                    } else {
                        bool own_kernel_running = false;
                        for (uint32_t i = 0; i < s.nkernels; i++)
                            if (s.kernels[i].running) own_kernel_running = true;
                        if (own_kernel_running) stuck = false;
                        else {
                            dead_end = strprintf("no thread or stream of rank %d will record it: every kernel returned, "
                                                 "no queued task records it, and the host is blocked in a synchronize "
                                                 "call",
                                                 nd.rank);
                            through.push_back(host_blocker(nd.rank));
                        }
                    }
                }
            }
            if (!stuck) {
                nd.stuck = false;
                nd.deps.clear();
                nd.through.clear();
                changed = true;
            } else {
                nd.deps = deps;
                nd.through = through;
                nd.dead_end = dead_end;
            }
        }
    }
}

/* ---------------------------------------------------------------- report text */

std::string node_who(const Analysis& A, const Node& nd) {
    const DiagSnap& s = *A.ranks[nd.rank].s;
    switch (nd.type) {
        case Node::ThreadWait: return strprintf("rank %d %s", nd.rank, thread_name(s.threads[nd.idx].code).c_str());
        case Node::StreamWait:
        case Node::Barrier: {
            const DiagStream& st = s.streams[nd.idx];
            if (st.thread != 0xffff) return strprintf("rank %d %s (host stream %u)", nd.rank, thread_name(st.thread).c_str(), st.id);
            return strprintf("rank %d stream %u", nd.rank, st.id);
        }
        case Node::Host:
        case Node::Connect: return strprintf("rank %d host", nd.rank);
    }
    return "?";
}

std::string rank_list(uint64_t bits) {
    std::string out;
    for (uint32_t r = 0; r < 64; r++)
        if (bits >> r & 1) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
}

std::string wait_detail(const Analysis& A, const Node& nd) {
    const DiagSnap& s = *A.ranks[nd.rank].s;
    if (nd.type == Node::Host)
        return s.host_sync_stream ? strprintf("blocked in a synchronize call on stream %u", s.host_sync_stream)
                                  : std::string("blocked in a synchronize call (event or device)");
    if (nd.type == Node::Barrier)
        return strprintf("waits in HcclBarrier #%u for the ranks that have not arrived", s.streams[nd.idx].barrier_seq);
    if (nd.type == Node::Connect)
        return strprintf("is blocked in HcclChannelAcquire (a channel is made by both of its ends) waiting for rank(s) %s, "
                         "%.1f s so far", rank_list(s.host_connect).c_str(),
                         secs(A.now - std::min(A.now, s.host_call_since)));
    const DiagWait& w = *node_wait(A, nd);
    const char* tag = nd.type == Node::ThreadWait ? s.threads[nd.idx].tag : nullptr;
    if (!tag || !*tag) tag = op_tag_of(s, w.tag16);
    std::string op = w.tag16 && tag ? "; " + op_text(tag, w.inst, w.kind == 1 ? w.use : 0, w.peer) : std::string();
    uint64_t since = w.since_ns && w.since_ns < A.now ? A.now - w.since_ns : 0;
    return strprintf("waits for %s (%s%s%s, %s%s), %.1f s so far", wait_text(w).c_str(), w.api, w.where[0] ? " at " : "",
                     w.where, task_pos(w.bidx, w.bsize).c_str(), op.c_str(), secs(since));
}

/* Who would record the notify nd waits for, in words. */
std::string recorder_text(const Analysis& A, const Node& nd) {
    if (!nd.dead_end.empty()) return nd.dead_end;
    std::string out;
    if (nd.type == Node::Connect) {
        for (int d : nd.deps)
            out += (out.empty() ? "" : "; ") + strprintf("rank %d cannot make its end before its own call returns: its "
                                                         "host %s", A.nodes[d].rank, wait_detail(A, A.nodes[d]).c_str());
        return out;
    }
    for (int d : nd.deps) {
        const Node& o = A.nodes[d];
        std::string w = o.type == Node::Host ? "whose host is stuck" : "which " + wait_detail(A, o);
        out += (out.empty() ? "" : "; ") + std::string("recorded later by ") + node_who(A, o) + " (queued after its " +
               "current wait), " + w;
    }
    return out;
}

/* Wait-for cycles among the stuck nodes (at most 4), as "a waits for b, which waits for a". */
std::vector<std::vector<int>> find_cycles(const Analysis& A) {
    std::vector<std::vector<int>> cycles;
    size_t N = A.nodes.size();
    std::vector<int> color(N, 0), stack;
    std::set<std::vector<int>> seen;
    std::function<void(int)> dfs = [&](int u) {
        color[u] = 1;
        stack.push_back(u);
        for (int v : A.nodes[u].deps) {
            if (!A.nodes[v].stuck || cycles.size() >= 4) continue;
            if (color[v] == 1) {
                auto it = std::find(stack.begin(), stack.end(), v);
                std::vector<int> cyc(it, stack.end());
                std::vector<int> key = cyc;
                std::sort(key.begin(), key.end());
                if (seen.insert(key).second) cycles.push_back(cyc);
            } else if (color[v] == 0) {
                dfs(v);
            }
        }
        stack.pop_back();
        color[u] = 2;
    };
    for (size_t u = 0; u < N; u++)
        if (A.nodes[u].stuck && color[u] == 0) dfs((int)u);
    return cycles;
}

/* A running kernel that has issued no Hcomm task for a while, in words ("" otherwise):
 * "kernel K (launch #n, op 'tag') is running kernel code, issued no task for 9.8 s, at
 * exec_op.cc:42 in ExecOp (...); its launch timeout (1836 s) ends it in 1826 s". */
std::string spin_text(const DiagKernel& k, uint64_t now) {
    uint64_t since = std::max(k.start_ns, k.last_task_ns);
    if (!k.running || !since || now - std::min(now, since) < spin_note_ns()) return "";
    std::string op = k.tag[0] ? strprintf(", op '%s'", k.tag) : std::string();
    std::string out = strprintf("kernel %s (launch #%llu%s) is running kernel code, issued no task for %.1f s%s",
                                k.name[0] ? k.name : "?", (unsigned long long)k.kseq, op.c_str(),
                                secs(now - std::min(now, since)), k.last_task_ns ? "" : " (none since it started)");
    if (k.where[0]) out += strprintf(", at %s", k.where);
    if (k.deadline_ns)
        out += strprintf("; its launch timeout (%.0f s) ends it in %.0f s", secs(k.deadline_ns - std::min(k.deadline_ns, k.start_ns)),
                         secs(k.deadline_ns - std::min(k.deadline_ns, now)));
    else
        out += "; it has no launch timeout";
    return out;
}

/* Every rank's kernels running without issuing tasks: "rank 1 kernel ...; rank 3 kernel ...". */
std::string spinning_kernels(const Analysis& A, int skip_rank = -1) {
    std::string out;
    for (uint32_t r = 0; r < A.ranks.size(); r++) {
        if (!A.ranks[r].have || (int)r == skip_rank) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.nkernels; i++) {
            std::string t = spin_text(s.kernels[i], A.now);
            if (!t.empty()) out += (out.empty() ? "" : "; ") + strprintf("rank %u ", r) + t;
        }
    }
    return out;
}

/* Notifies recorded and still set that no wait of their owner consumes, as report lines (a record
 * to the wrong peer or slot leaves one behind while the intended waiter hangs). */
std::string unconsumed_records(const Analysis& A, const char* indent) {
    std::string out;
    for (uint32_t r = 0; r < A.ranks.size(); r++) {
        if (!A.ranks[r].have && !(A.ranks[r].gone && A.ranks[r].s)) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.npending; i++) {
            const DiagPending& p = s.pending[i];
            if (p.owner < 0 || (uint32_t)p.owner >= A.ranks.size()) continue;
            const RankView& ov = A.ranks[p.owner];
            std::string why = strprintf("no wait of rank %d consumes it", p.owner);
            if (ov.gone || ov.dead) {
                why = strprintf("rank %d %s without consuming it", p.owner,
                                ov.gone ? "destroyed its communicator" : "died");
            } else {
                if (!ov.have) continue;
                bool unclaimed = false;
                for (uint32_t k = 0; k < ov.s->nunclaimed; k++)
                    if (ov.s->unclaimed[k].slot == p.slot) unclaimed = true;
                if (!unclaimed) continue;
            }
            std::string op = p.tag[0] ? "; " + op_text(p.tag, p.inst, 0, 0) : std::string();
            out += strprintf("%srank %u %s set %s (%s%s%s, %s%s), %.1f s ago, and %s\n", indent, r,
                             thread_name(p.thread).c_str(), p.target, p.api, p.where[0] ? " at " : "", p.where,
                             task_pos(p.bidx, p.bsize).c_str(), op.c_str(), secs(A.now - std::min(A.now, p.when_ns)),
                             why.c_str());
        }
    }
    return out;
}

std::string rank_summary(const Analysis& A, uint32_t r, const char* indent) {
    const RankView& v = A.ranks[r];
    if (v.dead) return strprintf("%srank %u: died\n", indent, r);
    if (v.gone) return strprintf("%srank %u: destroyed its communicator\n", indent, r);
    if (!v.have) return strprintf("%srank %u: no recent state (its process did not report within %.1f s)\n", indent, r,
                                  secs(kFreshNs));
    const DiagSnap& s = *v.s;
    std::string host = s.host_call[0] ? strprintf("blocked in %s for %.1f s", s.host_call,
                                                  secs(A.now - std::min(A.now, s.host_call_since)))
                       : s.host_sync ? (s.host_sync_stream ? strprintf("blocked in a synchronize call on stream %u",
                                                                       s.host_sync_stream)
                                                           : std::string("blocked in a synchronize call"))
                                     : std::string("not in an hcomm-kit call");
    std::string out = strprintf("%srank %u (pid %d, device %d): host %s; %u idle thread(s)\n", indent, r, s.pid, s.device,
                                host.c_str(), s.idle_threads);
    for (uint32_t i = 0; i < s.nkernels; i++) {
        const DiagKernel& k = s.kernels[i];
        std::string spin = spin_text(k, A.now);
        if (!spin.empty()) {
            out += strprintf("%s  %s; %u task(s) queued\n", indent, spin.c_str(), k.queued);
            continue;
        }
        out += strprintf("%s  kernel %s (launch #%llu%s%s): %s, %u task(s) still queued\n", indent, k.name[0] ? k.name : "?",
                         (unsigned long long)k.kseq, k.tag[0] ? ", op '" : "", k.tag[0] ? (std::string(k.tag) + "'").c_str() : "",
                         k.running ? "still running (may still submit tasks)" : "returned", k.queued);
    }
    for (uint32_t i = 0; i < s.nstreams; i++) {
        const DiagStream& st = s.streams[i];
        std::string what;
        uint64_t since = st.since_ns && st.since_ns < A.now ? A.now - st.since_ns : 0;
        if (st.state == 2) {
            Node tmp{Node::StreamWait, (int)r, (int)i, false, "", {}, {}};
            what = wait_detail(A, tmp);
        } else {
            what = strprintf("runs %s for %.1f s", st.what, secs(since));
        }
        out += strprintf("%s  stream %u%s: %s; %u more task(s) queued\n", indent, st.id,
                         st.thread != 0xffff ? strprintf(" (%s)", thread_name(st.thread).c_str()).c_str() : "",
                         what.c_str(), st.pending);
    }
    for (uint32_t i = 0; i < s.nthreads; i++) {
        const DiagThread& t = s.threads[i];
        if (t.state == 3) {
            out += strprintf("%s  %s: failed (its remaining tasks were dropped)\n", indent, thread_name(t.code).c_str());
            continue;
        }
        std::string what;
        if (t.state == 2) {
            Node tmp{Node::ThreadWait, (int)r, (int)i, false, "", {}, {}};
            what = wait_detail(A, tmp);
        } else {
            what = strprintf("runnable at %s (%s%s)", task_pos(t.head.bidx, t.head.bsize).c_str(), t.head.api,
                             t.head.set ? ", its notify is set" : "");
        }
        out += strprintf("%s  %s: %s; %u task(s) left%s\n", indent, thread_name(t.code).c_str(), what.c_str(), t.queued,
                         t.kernel[0] ? strprintf(" [kernel %s]", t.kernel).c_str() : "");
    }
    return out;
}

std::string report_json(const Analysis& A, Comm* c, const char* kind, const std::string& headline,
                        const std::vector<std::vector<int>>& cycles) {
    std::string j = strprintf("{\"kind\": \"%s\", \"communicator\": \"%s\", \"ranks\": %u, \"detected_by\": %d, "
                              "\"headline\": \"%s\", \"waits\": [",
                              kind, json_esc(c->name).c_str(), c->nranks, A.self, json_esc(headline).c_str());
    bool first = true;
    for (size_t k = 0; k < A.nodes.size(); k++) {
        const Node& nd = A.nodes[k];
        j += strprintf("%s{\"id\": %zu, \"who\": \"%s\", \"rank\": %d, \"type\": \"%s\", \"stuck\": %s, \"detail\": \"%s\", "
                       "\"recorder\": \"%s\", \"waits_for\": [",
                       first ? "" : ", ", k, json_esc(node_who(A, nd)).c_str(), nd.rank,
                       nd.type == Node::ThreadWait ? "thread" : nd.type == Node::StreamWait ? "stream"
                       : nd.type == Node::Barrier ? "barrier" : nd.type == Node::Connect ? "connect" : "host",
                       nd.stuck ? "true" : "false", json_esc(wait_detail(A, nd)).c_str(),
                       json_esc(recorder_text(A, nd)).c_str());
        for (size_t d = 0; d < nd.deps.size(); d++) j += strprintf("%s%d", d ? ", " : "", nd.deps[d]);
        j += "]}";
        first = false;
    }
    j += "], \"cycles\": [";
    for (size_t i = 0; i < cycles.size(); i++) {
        j += i ? ", [" : "[";
        for (size_t k = 0; k < cycles[i].size(); k++) j += strprintf("%s%d", k ? ", " : "", cycles[i][k]);
        j += "]";
    }
    j += "], \"rank_states\": [";
    for (uint32_t r = 0; r < A.ranks.size(); r++)
        j += strprintf("%s\"%s\"", r ? ", " : "", json_esc(rank_summary(A, r, "")).c_str());
    j += "]}";
    return j;
}

/* Full text report. stuck_only: a certain hang (only the stuck waits are listed as such). */
std::string report_text(const Analysis& A, Comm* c, const std::string& headline, bool deadlock,
                        std::vector<std::vector<int>>* cycles_out = nullptr) {
    (void)c;
    std::vector<std::vector<int>> cycles = find_cycles(A);
    if (cycles_out) *cycles_out = cycles;
    std::string out = headline + "\n";
    std::set<int> in_cycle;
    for (auto& cyc : cycles) {
        std::string line = "  wait-for cycle:";
        for (size_t i = 0; i < cyc.size(); i++) {
            const Node& a = A.nodes[cyc[i]];
            const Node& b = A.nodes[cyc[(i + 1) % cyc.size()]];
            in_cycle.insert(cyc[i]);
            const char* how = a.type == Node::Connect ? "makes its end only after its own call returns"
                                                      : "records it, after its own wait";
            line += strprintf("\n    %s %s; %s%s %s%s", node_who(A, a).c_str(), wait_detail(A, a).c_str(),
                              a.type == Node::Connect ? "" : "only ", node_who(A, b).c_str(), how,
                              i + 1 == cyc.size() ? " (the first one above): none of them can move" : ";");
        }
        out += line + "\n";
    }
    bool any_root = false;
    for (const Node& nd : A.nodes)
        if (nd.stuck && !nd.dead_end.empty()) {
            if (!any_root) out += "  root cause(s):\n";
            any_root = true;
            out += strprintf("    %s %s: %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str(), nd.dead_end.c_str());
        }
    std::string stray = unconsumed_records(A, "    ");
    if (!stray.empty())
        out += std::string(deadlock ? "  likely cause(s): notifies recorded that no wait consumes (a record to the wrong "
                                      "peer or slot?):\n"
                                    : "  notifies recorded that no queued wait consumes (yet):\n") + stray;
    if (!deadlock) {
        std::string spin = spinning_kernels(A);
        if (!spin.empty()) out += "  running kernel code without issuing tasks (the emulator cannot tell whether it will return):\n    " + spin + "\n";
    }
    bool any_knock = false;
    for (size_t k = 0; k < A.nodes.size(); k++) {
        const Node& nd = A.nodes[k];
        if (!nd.stuck || !nd.dead_end.empty() || in_cycle.count((int)k) || nd.type == Node::Host) continue;
        if (!any_knock) out += deadlock ? "  waiting on those:\n" : "  also waiting:\n";
        any_knock = true;
        out += strprintf("    %s %s: %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str(),
                         recorder_text(A, nd).c_str());
    }
    if (!deadlock) {
        bool head = false;
        for (const Node& nd : A.nodes) {
            if (nd.stuck || nd.type == Node::Host) continue;
            if (!head) out += "  waiting (not known to be stuck):\n";
            head = true;
            out += strprintf("    %s %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str());
        }
    }
    out += "  state of every rank:\n";
    for (uint32_t r = 0; r < A.ranks.size(); r++) out += rank_summary(A, r, "    ");
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

void write_report_file(Comm* c, const char* kind, const std::string& json) {
    const std::string& dir = cfg().log_dir;
    if (dir.empty()) return;
    mkdir(dir.c_str(), 0777);
    std::string path = strprintf("%s/%s-%s-rank%u.json", dir.c_str(), kind, c->name.c_str(), c->rank);
    std::string tmp = path + strprintf(".tmp%d", (int)getpid());
    FILE* f = fopen(tmp.c_str(), "w");
    if (!f) return;
    fwrite(json.data(), 1, json.size(), f);
    fputc('\n', f);
    fclose(f);
    rename(tmp.c_str(), path.c_str());
}

/* A stable signature of the stuck set: which waits, since when, and the progress of their ranks. */
uint64_t stuck_signature(const Analysis& A) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (const Node& nd : A.nodes) {
        if (!nd.stuck) continue;
        mix((uint64_t)nd.type << 32 | (uint32_t)nd.rank);
        mix((uint64_t)(uint32_t)nd.idx);
        if (const DiagWait* w = node_wait(A, nd)) {
            mix(w->slot);
            mix(w->since_ns);
        }
        if (nd.type == Node::Connect) {
            mix(A.ranks[nd.rank].s->host_connect);
            mix(A.ranks[nd.rank].s->host_call_since);
        }
        mix(A.ranks[nd.rank].s->progress);
    }
    return h;
}

/* ================================================================ monitor */

struct MonState {
    uint64_t stuck_sig = 0;
    uint64_t stuck_at = 0;
    uint64_t next_progress = 0;
    uint64_t last_published_progress = ~0ull;
    uint64_t dead_seen = 0; /* when a dead rank was first seen (0: none) */
    uint64_t next_spin = 0; /* progress lines about this rank's own kernel running without issuing tasks */
    bool reported = false;
};

std::mutex& g_mon_m = *new std::mutex();
std::map<Comm*, MonState>& g_mon = *new std::map<Comm*, MonState>();
std::condition_variable& g_mon_cv = *new std::condition_variable();
bool g_mon_started = false;
int64_t g_dump_mtime = -1;

/* The oldest blocked wait of this rank (0: none). */
uint64_t oldest_wait(const DiagSnap& s, uint64_t now) {
    uint64_t best = 0;
    auto take = [&](const DiagWait& w) {
        if (w.since_ns && w.since_ns < now && now - w.since_ns > best) best = now - w.since_ns;
    };
    for (uint32_t i = 0; i < s.nthreads; i++)
        if (s.threads[i].state == 2) take(s.threads[i].head);
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].state == 2) take(s.streams[i].wait);
    if (s.host_connect && s.host_call_since && s.host_call_since < now && now - s.host_call_since > best)
        best = now - s.host_call_since;
    return best;
}

void monitor_comm(Comm* c, MonState& st, const DiagSnap& mine) {
    JobSeg* j = c->job;
    uint64_t now = now_ns();
    if (comm_aborted(c, nullptr)) return;
    /* This rank's own kernel running without issuing tasks: a progress line every interval (the
     * ranks waiting on it name it too). It ends when it returns or at its launch timeout. */
    {
        const uint64_t every = (uint64_t)cfg().progress_s * 1000000000ull;
        uint64_t longest = 0;
        std::string text;
        for (uint32_t i = 0; i < mine.nkernels; i++) {
            const DiagKernel& k = mine.kernels[i];
            std::string t = spin_text(k, now);
            uint64_t since = std::max(k.start_ns, k.last_task_ns);
            if (t.empty() || now - std::min(now, since) < longest) continue;
            longest = now - std::min(now, since);
            text = t;
        }
        if (longest < every) {
            st.next_spin = 0;
        } else if (longest / every > st.next_spin) {
            st.next_spin = longest / every;
            std::string line = strprintf("[hcomm-kit] rank %u %s", c->rank, text.c_str());
            EMU_LOG(LOG_WARN, "%s", line.c_str());
            rank_log("%s", line.c_str());
        }
    }
    uint64_t oldest = oldest_wait(mine, now);
    bool stream_barrier = false;
    for (uint32_t i = 0; i < mine.nstreams; i++)
        if (mine.streams[i].state == 3 && now - mine.streams[i].since_ns > kAnalyseAfterNs) stream_barrier = true;
    if (oldest < kAnalyseAfterNs && !stream_barrier) {
        st.stuck_sig = 0;
        st.next_progress = 0;
        return;
    }
    j->attention_ns.store(now, std::memory_order_relaxed);
    Analysis A;
    analyse(c, A);
    /* A dead rank is the cause of every wait on it, not a deadlock: the waits on it fail through
     * their own liveness checks (507057, naming the wait and the dead rank). Should none of them do
     * so within a second (only indirect waits left), fail the communicator here the same way. */
    for (uint32_t r = 0; r < A.ranks.size(); r++)
        if (A.ranks[r].dead) {
            if (!st.dead_seen) st.dead_seen = now;
            if (now - st.dead_seen >= kDeadGraceNs) {
                comm_abort(c, comm_dead_msg(c, r), AbortKind::PeerDead);
                st.reported = true;
            }
            return;
        }
    bool any = false;
    for (const Node& nd : A.nodes)
        if (nd.stuck && nd.type != Node::Host) any = true;
    if (any) {
        uint64_t sig = stuck_signature(A);
        if (sig == st.stuck_sig && now - st.stuck_at >= kTickNs) {
            uint64_t first_ns = now;
            for (const Node& nd : A.nodes) {
                if (!nd.stuck) continue;
                const DiagWait* w = node_wait(A, nd);
                uint64_t since = w ? w->since_ns : nd.type == Node::Connect ? A.ranks[nd.rank].s->host_call_since : 0;
                if (since && since < first_ns) first_ns = since;
            }
            std::string head = strprintf(
                "[hcomm-kit] DEADLOCK on communicator %s (%u ranks), found by rank %u: the waits below can never be "
                "satisfied, so they fail now instead of after HCCL_EXEC_TIMEOUT=%u s (stuck for %.1f s)",
                c->name.c_str(), c->nranks, c->rank, cfg().default_kernel_timeout_s, secs(now - first_ns));
            std::vector<std::vector<int>> cycles;
            std::string text = report_text(A, c, head, true, &cycles);
            if (comm_abort(c, text, AbortKind::Deadlock)) {
                EMU_LOG(LOG_ERROR, "%s", text.c_str());
                rank_log("%s", text.c_str());
                write_report_file(c, "deadlock", report_json(A, c, "deadlock", head, cycles));
            }
            st.reported = true;
            return;
        }
        if (sig != st.stuck_sig) {
            st.stuck_sig = sig;
            st.stuck_at = now;
        }
    } else {
        st.stuck_sig = 0;
    }
    /* long waits: a progress line every 10 s */
    const uint64_t every = (uint64_t)cfg().progress_s * 1000000000ull;
    if (oldest >= every) {
        uint64_t bucket = oldest / every;
        if (bucket > st.next_progress) {
            st.next_progress = bucket;
            /* The wait of this rank the others hang on: a device thread's wait for another rank
             * first, then any device thread's, then a stream's (usually the host's "done"); the
             * oldest of the kind. */
            const Node* best = nullptr;
            uint64_t age = 0;
            int best_prio = -1;
            for (const Node& nd : A.nodes) {
                if (nd.rank != (int)c->rank) continue;
                const DiagWait* w = node_wait(A, nd);
                if (!w || !w->since_ns) continue;
                int prio = nd.type == Node::ThreadWait ? (w->kind == 1 ? 2 : 1) : 0;
                uint64_t a = now - std::min(now, w->since_ns);
                if (prio > best_prio || (prio == best_prio && a >= age)) {
                    best_prio = prio;
                    age = a;
                    best = &nd;
                }
            }
            if (best) {
                const DiagWait& w = *node_wait(A, *best);
                std::string line = strprintf("[hcomm-kit] %s has waited %.0f s for %s (%s, %s)", node_who(A, *best).c_str(),
                                             secs(age), wait_text(w).c_str(), w.api, task_pos(w.bidx, w.bsize).c_str());
                std::string spin = spinning_kernels(A, w.kind == 1 ? (int)w.peer : -1);
                if (w.kind == 1 && w.peer < A.ranks.size()) {
                    std::string peer = rank_summary(A, w.peer, "");
                    /* the peer's own kernel running without issuing tasks is the news, not its host */
                    std::string own;
                    if (A.ranks[w.peer].have)
                        for (uint32_t i = 0; i < A.ranks[w.peer].s->nkernels && own.empty(); i++)
                            own = spin_text(A.ranks[w.peer].s->kernels[i], A.now);
                    line += "; " + (own.empty() ? peer.substr(0, peer.find('\n')) : strprintf("rank %u ", w.peer) + own);
                    uint32_t p = w.peer;
                    if (A.ranks[p].have) {
                        const DiagChan* ch = find_chan(*A.ranks[p].s, c->rank);
                        if (ch && w.use > ch->uses)
                            line += strprintf("; rank %u has not started its use #%u of the channel yet (it is at #%u)", p,
                                              w.use, ch->uses);
                    }
                } else {
                    std::string rec = recorder_text(A, *best);
                    if (!rec.empty()) line += "; " + rec;
                }
                if (!spin.empty()) line += "; " + spin;
                line += strprintf(" (timeout %s)", w.timeout_s ? strprintf("%u s", w.timeout_s).c_str() : "none");
                EMU_LOG(LOG_WARN, "%s", line.c_str());
                rank_log("%s", line.c_str());
            } else if (mine.host_connect && A.connect_node[c->rank] >= 0) {
                const Node& nd = A.nodes[A.connect_node[c->rank]];
                std::string line = strprintf("[hcomm-kit] rank %u host %s (HCCL_CONNECT_TIMEOUT %u s)", c->rank,
                                             wait_detail(A, nd).c_str(), cfg().connect_timeout_s);
                for (uint32_t p = 0; p < A.ranks.size() && p < 64; p++)
                    if (mine.host_connect >> p & 1) {
                        std::string peer = rank_summary(A, p, "");
                        line += "; " + peer.substr(0, peer.find('\n'));
                    }
                EMU_LOG(LOG_WARN, "%s", line.c_str());
                rank_log("%s", line.c_str());
            }
        }
    }
}

/* Launcher state dumps: $HCOMM_KIT_JOB_DIR/dump.request -> rank<R>.state.json. */
void answer_dump_request() {
    const std::string& dir = cfg().job_dir;
    if (dir.empty()) return;
    struct stat stv;
    if (stat((dir + "/dump.request").c_str(), &stv) != 0) return;
    int64_t mt = (int64_t)stv.st_mtim.tv_sec * 1000000000ll + stv.st_mtim.tv_nsec;
    if (mt == g_dump_mtime) return;
    g_dump_mtime = mt;
    std::string r = world_rank_text();
    std::string summary, report;
    for (auto& kv : g_mon) {
        Comm* c = kv.first;
        Analysis A;
        analyse(c, A);
        std::string rep = report_text(A, c, strprintf("[hcomm-kit] state of communicator %s (%u ranks) seen by rank %u",
                                                      c->name.c_str(), c->nranks, c->rank), false);
        report += (report.empty() ? "" : "\n") + rep;
        if (summary.empty()) {
            const DiagSnap& s = *A.ranks[c->rank].s;
            uint64_t now = A.now;
            std::string what;
            /* its own kernel running without issuing tasks first: the others wait on it */
            for (uint32_t i = 0; i < s.nkernels && what.empty(); i++) what = spin_text(s.kernels[i], now);
            for (uint32_t i = 0; i < s.nthreads && what.empty(); i++)
                if (s.threads[i].state == 2)
                    what = strprintf("%s waits for %s (%s, %.1f s)", thread_name(s.threads[i].code).c_str(),
                                     wait_text(s.threads[i].head).c_str(), s.threads[i].head.api,
                                     secs(now - std::min(now, s.threads[i].head.since_ns)));
            for (uint32_t i = 0; i < s.nstreams && what.empty(); i++)
                what = strprintf("stream %u %s", s.streams[i].id,
                                 s.streams[i].state == 2 ? ("waits for " + wait_text(s.streams[i].wait)).c_str()
                                                         : ("runs " + std::string(s.streams[i].what)).c_str());
            if (what.empty() && s.host_call[0])
                what = strprintf("host blocked in %s for %.1f s", s.host_call, secs(now - std::min(now, s.host_call_since)));
            if (what.empty()) what = s.host_sync ? "host in a synchronize call, nothing queued" : "idle (no hcomm-kit work)";
            std::string others = spinning_kernels(A, (int)c->rank);
            if (!others.empty()) what += "; " + others;
            summary = strprintf("communicator %s rank %u: %s", c->name.c_str(), c->rank, what.c_str());
        }
    }
    if (summary.empty()) summary = "no live communicator";
    std::string name = r.empty() ? strprintf("pid%d", (int)getpid()) : "rank" + r;
    std::string json = strprintf("{\"rank\": %s, \"pid\": %d, \"summary\": \"%s\", \"report\": \"%s\"}\n",
                                 r.empty() ? "null" : r.c_str(), (int)getpid(), json_esc(summary).c_str(),
                                 json_esc(report).c_str());
    std::string path = dir + "/" + name + ".state.json", tmp = path + ".tmp";
    if (FILE* f = fopen(tmp.c_str(), "w")) {
        fwrite(json.data(), 1, json.size(), f);
        fclose(f);
        rename(tmp.c_str(), path.c_str());
    }
}

void monitor_main() {
    background_thread_init();
    std::unique_lock<std::mutex> lk(g_mon_m);
    DiagSnap* snap = new DiagSnap;
    for (;;) {
        g_mon_cv.wait_for(lk, std::chrono::nanoseconds(kTickNs));
        for (auto& kv : g_mon) {
            Comm* c = kv.first;
            MonState& st = kv.second;
            build_snap(c, snap);
            /* Republish when something moved, or when a rank asked for attention; otherwise only
             * the heartbeat says the snapshot is current. */
            uint64_t att = c->job->attention_ns.load(std::memory_order_relaxed);
            bool attention = att && now_ns() - att < 2 * kFreshNs;
            uint64_t key = snap->progress ^ ((uint64_t)snap->nthreads << 40) ^ ((uint64_t)snap->nstreams << 48) ^
                           ((uint64_t)snap->host_sync << 56);
            if (attention || key != st.last_published_progress || snap->nthreads || snap->nstreams) {
                publish(c, *snap);
                st.last_published_progress = key;
            } else {
                c->job->diag[c->rank].heartbeat_ns.store(now_ns(), std::memory_order_release);
            }
            monitor_comm(c, st, *snap);
        }
        answer_dump_request();
    }
}
}  // namespace

void diag_comm_added(Comm* c) {
    c->p2p_seq.assign(c->nranks, 0);
    trace_comm_added(c);
    {
        std::lock_guard<std::mutex> g(g_race_m);
        g_race_comms.push_back(c);
    }
    std::lock_guard<std::mutex> g(g_mon_m);
    g_mon[c];
    if (!g_mon_started) {
        g_mon_started = true;
        std::thread(monitor_main).detach();
    }
    /* an empty first snapshot, so peers see this rank as present and idle at once */
    DiagSnap* s = new DiagSnap;
    build_snap(c, s);
    publish(c, *s);
    delete s;
}

void diag_comm_removed(Comm* c) {
    trace_comm_removed(c);
    {
        std::lock_guard<std::mutex> g(g_race_m);
        g_race_comms.erase(std::remove(g_race_comms.begin(), g_race_comms.end(), c), g_race_comms.end());
    }
    std::lock_guard<std::mutex> g(g_mon_m);
    g_mon.erase(c);
    if (!c->job || !check_mode() || comm_aborted(c, nullptr)) return;
    /* a last snapshot: the records this rank made that nobody consumed yet stay known to the others'
     * hang reports (a record to the wrong peer leaves one behind while its intended waiter hangs) */
    {
        std::unique_ptr<DiagSnap> s(new DiagSnap);
        build_snap(c, s.get(), 0);
        publish(c, *s);
    }
    /* notifies left set by this communicator's operations: nobody will consume them any more */
    std::vector<std::pair<std::string, uint64_t>> left;
    {
        std::lock_guard<std::mutex> cg(c->m);
        DevCtl* ctl = c->dev->ctl;
        auto look = [&](uint32_t base, uint32_t n, const std::string& what) {
            for (uint32_t i = 0; i < n && left.size() < 8; i++) {
                uint64_t p = ctl->src[base + i].load();
                if (ctl->slots[base + i].load() && (p & prov::kValid) && !(p & prov::kHost))
                    left.emplace_back(strprintf("%s slot %u", what.c_str(), i), p);
            }
        };
        for (HThread* t : c->threads)
            if (!t->stream_bound) look(t->slot_base, t->nslots, "thread notify of " + thread_name(thread_code(t)));
        for (auto& kv : c->channels)
            look(kv.second->local_slot_base, kv.second->notify_num,
                 strprintf("channel notify from rank %u", kv.second->remote_rank));
    }
    if (!left.empty()) {
        std::string all;
        for (auto& s : left) all += (all.empty() ? "" : "; ") + s.first + " (set by " + prov_text(c, s.second).substr(12) + ")";
        std::string text = strprintf("[hcomm-kit check] rank %u: notifies left set when communicator %s was destroyed "
                                     "(recorded by an operation but never waited for: a doubled or extra record): %s",
                                     c->rank, c->name.c_str(), all.c_str());
        EMU_LOG(LOG_WARN, "%s", text.c_str());
        rank_log("%s", text.c_str());
    }
}

std::string diag_wait_report(Comm* c, const HTask& t, const HThread* self, const char* headline) {
    (void)t;
    (void)self;
    Analysis A;
    analyse(c, A);
    std::vector<std::vector<int>> cycles;
    std::string text = report_text(A, c, headline, false, &cycles);
    write_report_file(c, "timeout", report_json(A, c, "timeout", headline, cycles));
    return text;
}

std::string diag_comm_report(Comm* c, const char* headline) {
    Analysis A;
    analyse(c, A);
    return report_text(A, c, headline, false);
}

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

/* Two calls match when their descriptions are equal and, if `sites` and both carry a call site,
 * their sites are equal too. */
bool sig_match(const std::string& a, const std::string& b, bool sites) {
    if (a == b) return true;
    auto x = sig_split(a), y = sig_split(b);
    if (x.first != y.first) return false;
    return !sites || x.second.empty() || y.second.empty() || x.second == y.second;
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

}  // namespace

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
        /* what the other ranks posted for call seq so far */
        auto collect = [&] {
            posted.clear();
            for (uint32_t r = 0; r < c->nranks; r++) {
                if (r == c->rank) continue;
                CallSig& o = j->calls[r][seq % kCallDepth];
                if (o.seq.load(std::memory_order_seq_cst) != seq) continue;
                char text[sizeof o.text];
                memcpy(text, o.text, sizeof text);
                text[sizeof text - 1] = 0;
                if (o.seq.load(std::memory_order_seq_cst) != seq) continue;
                posted.emplace_back(r, text);
                if (!sig_match(text, expected, true)) bad = text;
            }
        };
        collect();
        if (bad.empty()) return "";
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
        bool same_args = true;
        for (auto& p : posted) same_args = same_args && sig_split(p.second).first == sig_split(mine).first;
        std::string text = strprintf("[hcomm-kit] collective mismatch on communicator %s, call #%llu: the ranks do not make "
                                     "the same call (%s; ranks not listed have not reached this call yet). Nothing was "
                                     "exchanged for this call; every rank's call fails.",
                                     c->name.c_str(), (unsigned long long)seq, calls_by_rank(posted).c_str());
        if (same_args)
            text += " The calls differ only in their call site: a rank skipped a call (or made an extra one) before "
                    "this one. If the ranks make this call from different lines on purpose, wrap those calls in "
                    "`with hcomm_kit.same_call():` (or set HCOMM_KIT_CALL_CHECK=loose).";
        if (comm_abort(c, text, AbortKind::Mismatch)) rank_log("%s", text.c_str());
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
    if (o.seq.load(std::memory_order_seq_cst) != seq || sig_match(text, expected, false)) return "";
    std::string msg = strprintf("[hcomm-kit] point-to-point mismatch on communicator %s, call #%llu between ranks %u and "
                                "%d: rank %u: %s; rank %d: %s (expected %s). Nothing was exchanged; both calls fail.",
                                c->name.c_str(), (unsigned long long)seq, c->rank, peer, c->rank,
                                sig_shown(mine).c_str(), peer, sig_shown(text).c_str(), sig_split(expect).first.c_str());
    if (comm_abort(c, msg, AbortKind::Mismatch)) rank_log("%s", msg.c_str());
    return msg;
}

}  // namespace emu

using namespace emu;

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
