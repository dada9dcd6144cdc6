/* The timing model's C extensions (hcomm_kit/emu_ext.h) and the gathering of one operation's
 * logs from every rank's ModelArea. */
#include "hccl/hooks.h"
#include "model/model.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace emu {

namespace {

bool complete(const ModelLaunch& L, uint32_t number) {
    return L.number.load(std::memory_order_acquire) == number && L.closed.load(std::memory_order_acquire) &&
           L.pending.load(std::memory_order_acquire) <= 0;
}

/* The number of rank r's launch of operation (tag16, inst), 0 when not (yet) logged. */
uint32_t find_launch(const ModelArea& a, uint32_t tag16, uint32_t inst) {
    uint32_t best = 0;
    for (uint32_t k = 0; k < kModelLaunches; k++) {
        const ModelLaunch& L = a.l[k];
        uint32_t n = L.number.load(std::memory_order_acquire);
        if (n && L.tag16 == tag16 && L.inst == inst && n > best) best = n;
    }
    return best;
}

/* Adds to *part the ranks launch `number` of rank area a deals with: the peers of its transfers and
 * channel notifies, and the recorders of the notifies its waits consumed (ids carry their rank).
 * True when it also records ACL notifies, whose target rank the log does not know. */
bool add_partners(const ModelArea& a, uint32_t number, uint32_t nranks, std::vector<char>* part) {
    const ModelLaunch& L = a.l[number % kModelLaunches];
    bool unknown = false;
    uint64_t end = L.end.load(std::memory_order_acquire);
    for (uint64_t pos = L.first; pos < end; pos++) {
        const ModelTask& m = a.t[pos % kModelTasks];
        if (m.launch != number) continue;
        if (m.peer >= 0 && (uint32_t)m.peer < nranks) (*part)[(uint32_t)m.peer] = 1;
        uint64_t rec = m.matched.load(std::memory_order_acquire);
        if (rec != kModelIdValid && (rec & kModelIdValid)) {
            uint32_t r = (uint32_t)(rec >> 48) & 0x7fff;
            if (r < nranks) (*part)[r] = 1;
        }
        if (m.kind == mkind::RecordAcl) unknown = true;
    }
    return unknown;
}

/* Every rank's model log as this rank reads it: its area in this host's job segment, or, for a rank
 * on another host, a copy of its area fetched over the network (the launch table, then the tasks of a
 * launch once it is complete: they do not change after that until the ring comes round). */
class Logs {
public:
    explicit Logs(Comm* c) : c_(c), copy_(c->nranks) {}
    ~Logs() {
        for (ModelArea* a : copy_) free(a);
    }
    /* Rank r's area, its launch table fresh (a far rank's fetched now); nullptr + *err on failure. */
    const ModelArea* head(uint32_t r, std::string* err) {
        if (!comm_far(c_, r)) return &c_->job->model[r];
        ModelArea* a = area(r, err);
        if (!a) return nullptr;
        uint64_t n = (uint64_t)((const char*)&a->t[0] - (const char*)a);
        if (int rc = c_->link[r]->read_area(a, 0, n, err)) {
            (void)rc;
            *err = strprintf("rank %u's model log on host %s: %s", r, c_->host[r].c_str(), err->c_str());
            return nullptr;
        }
        return a;
    }
    /* The tasks of rank r's launch L (a far rank's fetched now). */
    int tasks(uint32_t r, const ModelLaunch& L, std::string* err) {
        if (!comm_far(c_, r)) return 0;
        ModelArea* a = copy_[r];
        uint64_t first = L.first, end = L.end.load(std::memory_order_acquire);
        const uint64_t base = (uint64_t)((const char*)&a->t[0] - (const char*)a);
        for (uint64_t pos = first; pos < end;) {
            uint64_t i = pos % kModelTasks, k = std::min<uint64_t>(end - pos, kModelTasks - i);
            if (int rc = c_->link[r]->read_area(&a->t[i], base + i * sizeof(ModelTask), k * sizeof(ModelTask), err)) {
                *err = strprintf("rank %u's model log on host %s: %s", r, c_->host[r].c_str(), err->c_str());
                return rc;
            }
            pos += k;
        }
        return 0;
    }

private:
    ModelArea* area(uint32_t r, std::string* err) {
        if (!copy_[r]) copy_[r] = static_cast<ModelArea*>(calloc(1, sizeof(ModelArea)));
        if (!copy_[r]) *err = "out of memory for a copy of a model log";
        return copy_[r];
    }
    Comm* c_;
    std::vector<ModelArea*> copy_;
};

double wait_default() {
    const char* v = getenv("HCOMM_KIT_MODEL_WAIT");
    double s = v && *v ? atof(v) : 30.0;
    return s > 0 ? s : 30.0;
}

struct Cached {
    uint32_t number = 0;
    uint64_t next = 0;
    ModelResult r;
};
std::mutex g_cache_m;
std::map<Comm*, Cached>& g_cache = *new std::map<Comm*, Cached>();

}  // namespace

namespace {
/* Simulates this rank's launch `number` of c (still in its log) with every rank's launch of the
 * same call; gives_up: a rank that left the job without it ends the wait at once. */
int model_launch(Comm* c, uint32_t number, double wait_s, bool gives_up, ModelResult* out, std::string* err) {
    if (!model_logging()) {
        *err = "the timing model's log is off (HCOMM_KIT_MODEL=0)";
        return HCCL_E_NOT_SUPPORT;
    }
    std::string perr;
    const ModelParams* p = model_params(c->topo.product, &perr);
    if (!p) {
        *err = perr;
        return HCCL_E_NOT_SUPPORT;
    }
    ModelArea& mine = c->job->model[c->rank];
    const ModelLaunch& L = mine.l[number % kModelLaunches];
    uint32_t tag16 = L.tag16, inst = L.inst;
    std::string tag = L.tag;
    if (L.number.load(std::memory_order_acquire) != number) {
        *err = strprintf("rank %u's launch %u on communicator '%s' is no longer in the model's log", c->rank, number,
                         c->name.c_str());
        return HCCL_E_NOT_FOUND;
    }
    uint64_t deadline = now_ns() + (uint64_t)(wait_s * 1e9);
    std::vector<uint32_t> numbers(c->nranks, 0);
    /* The ranks taking part, found from the logs as their launches finish: this rank, then
     * everyone their tasks dealt with. A collective reaches every rank; a point-to-point call only
     * its partners, so a rank that sits it out (the odd rank of paired send/recv) is not waited
     * for. A launch recording ACL notifies (target unknown to the log) takes in every rank. */
    std::vector<char> part(c->nranks, 0), found(c->nranks, 0);
    part[c->rank] = 1;
    Logs logs(c);
    for (;;) {
        std::string why;
        if (comm_aborted(c, &why)) {
            *err = "the communicator was aborted: " + why;
            return HCCL_E_INTERNAL;
        }
        uint32_t missing = UINT32_MAX;
        for (bool grew = true; grew && missing == UINT32_MAX;) { /* until no new partner turns up */
            grew = false;
            for (uint32_t r = 0; r < c->nranks; r++) {
                if (!part[r] || found[r]) continue;
                std::string lerr;
                const ModelArea* ap = logs.head(r, &lerr);
                if (!ap) {
                    *err = lerr;
                    return HCCL_E_NETWORK;
                }
                const ModelArea& a = *ap;
                uint32_t n = r == c->rank ? number : find_launch(a, tag16, inst);
                if (!n || !complete(a.l[n % kModelLaunches], n)) {
                    missing = r;
                    break;
                }
                if (int rc = logs.tasks(r, a.l[n % kModelLaunches], &lerr)) {
                    *err = lerr;
                    return rc;
                }
                numbers[r] = n;
                found[r] = 1;
                grew = true;
                if (add_partners(a, n, c->nranks, &part)) std::fill(part.begin(), part.end(), 1);
            }
        }
        if (missing == UINT32_MAX) break;
        if (now_ns() >= deadline ||
            (gives_up && c->job->ranks[missing].state.load(std::memory_order_acquire) == kRankGone)) {
            *err = strprintf("rank %u has not logged a finished launch of operation '%s' #%u within %.0f s (every "
                             "rank of communicator '%s' that the call's tasks deal with must run the same "
                             "operation call; HCOMM_KIT_MODEL_WAIT sets the wait)",
                             missing, tag.c_str(), inst, wait_s, c->name.c_str());
            return HCCL_E_TIMEOUT;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    {
        std::lock_guard<std::mutex> g(g_cache_m);
        auto it = g_cache.find(c);
        if (it != g_cache.end() && it->second.number == number &&
            it->second.next == mine.next.load(std::memory_order_acquire)) {
            *out = it->second.r;
            return HCCL_SUCCESS;
        }
    }
    std::vector<std::vector<ModelInputTask>> tasks;
    std::vector<uint32_t> ranks;
    for (uint32_t r = 0; r < c->nranks; r++) {
        if (!part[r]) continue;
        ranks.push_back(r);
        tasks.emplace_back();
        std::string lerr;
        const ModelArea* ap = comm_far(c, r) ? logs.head(r, &lerr) : &c->job->model[r];
        if (!ap) {
            *err = lerr;
            return HCCL_E_NETWORK;
        }
        const ModelArea& a = *ap;
        const ModelLaunch& l = a.l[numbers[r] % kModelLaunches];
        uint64_t first = l.first, end = l.end.load(std::memory_order_acquire);
        if (l.overflow.load() || a.next.load(std::memory_order_acquire) - first > kModelTasks) {
            *err = strprintf("rank %u's launch of '%s' #%u queued more tasks than the model's log keeps (%u per rank), "
                             "or later launches overwrote it",
                             r, tag.c_str(), inst, kModelTasks);
            return HCCL_E_INTERNAL;
        }
        for (uint64_t pos = first; pos < end; pos++) {
            const ModelTask& m = a.t[pos % kModelTasks];
            if (m.launch != numbers[r]) continue;
            ModelInputTask t;
            t.thread = m.thread;
            t.kind = m.kind;
            t.dtype = m.dtype;
            t.peer = m.peer;
            t.index = m.index;
            t.bytes = m.bytes;
            t.id = kModelIdValid | ((uint64_t)r << 48) | pos;
            t.matched = m.matched.load(std::memory_order_acquire);
            tasks.back().push_back(t);
        }
        if (l.number.load(std::memory_order_acquire) != numbers[r]) {
            *err = strprintf("rank %u's log of '%s' #%u was overwritten while it was read", r, tag.c_str(), inst);
            return HCCL_E_INTERNAL;
        }
    }
    ModelResult res;
    res.product = p->product;
    res.tag = tag;
    res.inst = inst;
    res.ranks = ranks;
    model_simulate(*p, c->topo, ranks, tasks, &res);
    {
        std::lock_guard<std::mutex> g(g_cache_m);
        Cached& k = g_cache[c];
        k.number = number;
        k.next = mine.next.load(std::memory_order_acquire);
        k.r = res;
    }
    *out = std::move(res);
    return HCCL_SUCCESS;
}
}  // namespace

int model_last(Comm* c, double wait_s, ModelResult* out, std::string* err) {
    uint32_t number = model_logging() ? c->job->model[c->rank].launches.load(std::memory_order_acquire) : 1;
    if (number == 0) {
        *err = strprintf("rank %u ran no kernel that queued Hcomm tasks on communicator '%s' yet: nothing to model",
                         c->rank, c->name.c_str());
        return HCCL_E_NOT_FOUND;
    }
    return model_launch(c, number, wait_s, false, out, err);
}

std::string model_trace(Comm* c, double wait_s, std::string* note) {
    if (!model_logging() || !c->job) {
        *note = "the timing model's log is off (HCOMM_KIT_MODEL=0): no tasks on the modelled clock";
        return "";
    }
    const ModelArea& mine = c->job->model[c->rank];
    uint32_t last = mine.launches.load(std::memory_order_acquire);
    uint32_t first = last > kModelLaunches ? last - kModelLaunches + 1 : 1;
    std::string items;
    std::set<std::pair<uint32_t, uint32_t>> tracks;
    uint64_t flow = 0;
    double clock = 0;
    for (uint32_t n = first; n && n <= last; n++) {
        ModelResult r;
        std::string err;
        if (model_launch(c, n, wait_s, true, &r, &err)) {
            *note = strprintf("operation %u of %u not modelled, nor any after it: %s", n, last, err.c_str());
            break;
        }
        std::string ev = r.trace_events(clock, &flow, &tracks);
        if (!ev.empty()) items += (items.empty() ? "" : ",\n") + ev;
        clock += r.time_us;
    }
    if (note->empty() && first > 1)
        *note = strprintf("the first %u operations had left the model's log (it keeps the last %u per rank): the "
                          "clock starts at operation %u",
                          first - 1, kModelLaunches, first);
    return items;
}

namespace {
void model_forget(Comm* c) {
    std::lock_guard<std::mutex> g(g_cache_m);
    g_cache.erase(c);
}
std::string model_trace_hook(Comm* c, std::string* note) { return model_trace(c, wait_default(), note); }
struct ModelApiHooks {
    ModelApiHooks() {
        hccl_hooks.model_comm_removed = model_forget;
        hccl_hooks.model_trace = model_trace_hook;
    }
} g_model_api_hooks;
}  // namespace

}  // namespace emu

using namespace emu;

EMU_API HcclResult HcommKitModelLastTime(HcclComm comm, double* us) {
    Comm* c = comm_from_handle(comm);
    if (!comm) return (HcclResult)seterr(HCCL_E_PTR, __func__, "comm is NULL");
    if (!c) return (HcclResult)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)comm);
    if (!us) return (HcclResult)seterr(HCCL_E_PTR, __func__, "us is NULL");
    ModelResult r;
    std::string err;
    if (int rc = model_last(c, wait_default(), &r, &err)) return (HcclResult)seterr_str(rc, __func__, err);
    *us = r.time_us;
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommKitModelExplain(HcclComm comm, int32_t allTasks, char* buf, uint64_t bufLen) {
    Comm* c = comm_from_handle(comm);
    if (!comm) return -(int32_t)seterr(HCCL_E_PTR, __func__, "comm is NULL");
    if (!c) return -(int32_t)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)comm);
    ModelResult r;
    std::string err;
    if (int rc = model_last(c, wait_default(), &r, &err)) return -(int32_t)seterr_str(rc, __func__, err);
    if (const ModelParams* p = model_params(c->topo.product, &err)) r.analyse(*p, c->topo);
    std::string j = r.json(allTasks != 0);
    if (j.size() >= (size_t)INT32_MAX)
        return -(int32_t)seterr(HCCL_E_MEMORY, __func__, "the simulation's JSON is %zu bytes (2 GiB at most)", j.size());
    if (buf && bufLen) {
        size_t n = std::min<size_t>(j.size(), (size_t)bufLen - 1);
        memcpy(buf, j.data(), n);
        buf[n] = 0;
    }
    return (int32_t)j.size();
}
