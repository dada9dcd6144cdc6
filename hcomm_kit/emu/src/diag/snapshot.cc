/* Diagnosis: the hang-analysis board (comm.h DiagArea): every rank's snapshot of what its threads
 * and streams are doing, published under a per-rank seqlock in the job segment and read by copying. */
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

/* ================================================================ snapshots */

namespace {
/* Queued tasks of a moving stream a snapshot looks at (build_snap). */
constexpr size_t kScanQueued = 64;

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

}  // namespace

/* The snapshot of communicator c on this rank. */
void build_snap(Comm* c, DiagSnap* s, uint64_t pending_age_ns) {
    memset(s, 0, offsetof(DiagSnap, threads));
    s->npending = s->nunclaimed = 0;
    std::set<uint32_t> waited; /* slots of this rank that a queued wait of this communicator consumes */
    bool partial = false;      /* a moving stream's queue was looked at in part: `waited` may miss some */
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
            cm.unlock();
        }
        threads = c->diag_threads;
        chans = c->diag_chans;
        copy_str(s->host_call, c->cp_what.c_str());
        s->host_call_since = c->cp_since;
        s->host_connect = c->cp_peers;
        copy_str(s->failed_call, c->failed_call.c_str());
        s->failed_ns = c->failed_ns;
        s->failed_peers = c->failed_peers;
    }
    {
        std::lock_guard<std::mutex> og(c->ops_m);
        ops.assign(c->ops.begin(), c->ops.end());
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
        std::lock_guard<std::mutex> g(t->qm);
        /* under qm: a task the queue below no longer holds is counted (run_thread counts it there) */
        progress += t->executed.load(std::memory_order_relaxed);
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
        /* A stream that moved since the last snapshot is not stuck: look at the head of its queue
         * only (a benchmark queues thousands of calls, and this holds the stream's lock); a stuck
         * one in full (the next snapshot, kTickNs later). */
        const uint64_t done = st->completed.load(std::memory_order_relaxed);
        const size_t scan = done == st->diag_seen_completed ? st->q.size() : std::min<size_t>(st->q.size(), kScanQueued);
        st->diag_seen_completed = done;
        partial = partial || scan < st->q.size();
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
            td.brief = true;
            st->cur->describe(&td);
            mine = td.comm == c;
        }
        for (size_t i = 0; !mine && i < scan; i++) {
            TaskDiag td;
            td.brief = true;
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
            td.brief = true;
            st->cur->describe(&td);
            if (td.wait && td.wait->slot_ctl == c->dev->ctl) waited.insert(td.wait->slot);
        }
        for (size_t i = 0; i < scan; i++) {
            TaskDiag td;
            td.brief = true;
            st->q[i]->describe(&td);
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
    /* slots of this rank that are set and that no queued wait of this communicator consumes (not
     * known after a partial scan: that stream moves, the next snapshot of a stuck one is whole) */
    if (!partial) {
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
    {
        std::lock_guard<std::mutex> dg(c->diag_m);
        if (progress != c->diag_progress) {
            c->diag_progress = progress;
            c->diag_progress_ns = now_ns(); /* the change happened before this */
        }
        s->progress_ns = c->diag_progress_ns;
    }
}


void publish_snap(Comm* c, const DiagSnap& s) {
    SEQ_GUARD();
    DiagArea& a = c->job->diag[c->rank];
    uint32_t q = a.seq.load(std::memory_order_relaxed);
    a.seq.store(q + 1, std::memory_order_relaxed);
    SEQ_FENCE(std::memory_order_release);
    memcpy(&a.snap, &s, sizeof s);
    SEQ_FENCE(std::memory_order_release);
    a.seq.store(q + 2, std::memory_order_release);
    a.heartbeat_ns.store(s.taken_ns, std::memory_order_release); /* its content is as of then */
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

}  // namespace emu
