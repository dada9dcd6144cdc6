/* ACL runtime: events (acl_runtime.md §3.9). */
#include "acl/runtime.h"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ events */

namespace emu {
struct Event {
    uint32_t magic = kEventMagic;
    uint32_t flags = 0;
    bool ex = false;
    std::atomic<uint64_t> rec_seq{0};  /* records enqueued */
    std::atomic<uint64_t> done_seq{0}; /* records completed */
    std::atomic<uint64_t> ts_ns{0};    /* time of the last completed record */
    std::atomic<uint32_t> word{0};     /* futex: bumped at each completion */
    std::atomic<Device*> dev{nullptr};  /* device and stream of the latest record (hang analysis) */
    std::atomic<uint32_t> stream_id{0};
    /* The latest completed record's outcome (under g_ev_m): 0, or the error of the stream that
     * dropped it, which aclrtSynchronizeEvent reports (spec: "the next synchronising call on
     * that stream (stream, event or device sync) returns" the error). */
    int err_code = 0;
    std::string err_msg;
    std::shared_ptr<std::atomic<bool>> err_taken;
};
namespace {
std::mutex g_ev_m;
std::unordered_set<Event*> g_events;
uint32_t g_op_wait_timeout_s = 0;

bool event_valid(Event* e) {
    std::lock_guard<std::mutex> g(g_ev_m);
    return g_events.count(e) != 0;
}

void event_complete(Event* e, uint64_t seq) {
    e->ts_ns.store(now_ns(), std::memory_order_release);
    uint64_t cur = e->done_seq.load();
    while (cur < seq && !e->done_seq.compare_exchange_weak(cur, seq)) {
    }
    e->word.fetch_add(1);
    futex_wake(&e->word, INT_MAX, false);
}

void event_set_outcome(Event* e, int code, const std::string& msg, std::shared_ptr<std::atomic<bool>> taken) {
    std::lock_guard<std::mutex> g(g_ev_m);
    e->err_code = code;
    e->err_msg = msg;
    e->err_taken = std::move(taken);
}

struct EventRecordTask : Task {
    Event* e;
    uint64_t seq;
    Stream* s;  /* the stream it was recorded on: alive while the task is queued or running */
    EventRecordTask(Event* ev, uint64_t sq, Stream* st) : e(ev), seq(sq), s(st) {}
    int run(Stream*, std::string*) override {
        event_set_outcome(e, 0, std::string(), nullptr);
        event_complete(e, seq);
        return 0;
    }
    /* A dropped record (the stream failed before it) still completes, so nothing waits forever on
     * a failed stream, and carries the stream's error for aclrtSynchronizeEvent to report. */
    void drop() override {
        int code;
        std::string msg;
        std::shared_ptr<std::atomic<bool>> taken;
        {
            std::lock_guard<std::mutex> g(s->m);
            code = s->err_code;
            msg = s->err_msg;
            taken = s->err_taken;
        }
        if (!code) {
            code = ACL_ERROR_RT_AICPU_EXCEPTION;
            msg = "a task before the event on its stream failed";
        }
        event_set_outcome(e, code, msg, std::move(taken));
        event_complete(e, seq);
    }
    const char* name() const override { return "aclrtRecordEvent"; }
};

struct EventWaitTask : Task {
    Event* e;
    uint64_t target;
    EventWaitTask(Event* ev, uint64_t t) : e(ev), target(t) {}
    int run(Stream* s, std::string* msg) override {
        uint64_t deadline = g_op_wait_timeout_s ? now_ns() + (uint64_t)g_op_wait_timeout_s * 1000000000ull : 0;
        bool ok = wait_word(&e->word, false, deadline, [&] { return e->done_seq.load() >= target; });
        if (!ok) {
            *msg = strprintf("stream %u waited more than %u s (aclrtSetOpWaitTimeout) for an event", s->id,
                             g_op_wait_timeout_s);
            return ACL_ERROR_RT_TASK_TIMEOUT;
        }
        return 0;
    }
    const char* name() const override { return "aclrtStreamWaitEvent"; }
};
}  // namespace
}  // namespace emu

static aclError create_event(aclrtEvent* event, uint32_t flag, bool ex, const char* api) {
    if (int r = check_init(api)) return r;
    if (!event) return seterr(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
    if (flag & ~0x7bu) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "unknown event flag bits 0x%x", flag & ~0x7bu);
    Event* e = new Event();
    e->flags = flag;
    e->ex = ex;
    std::lock_guard<std::mutex> g(g_ev_m);
    g_events.insert(e);
    *event = e;
    return ACL_SUCCESS;
}

#define RESOLVE_EVENT(var, h)                                                                        \
    if (!(h)) return seterr(ACL_ERROR_INVALID_PARAM, __func__, #h " is NULL");                       \
    Event* var = static_cast<Event*>(h);                                                              \
    if (!event_valid(var)) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live event", (void*)(h))

EMU_API aclError aclrtCreateEvent(aclrtEvent* event) { return create_event(event, ACL_EVENT_SYNC, false, __func__); }
EMU_API aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, false, __func__);
}
EMU_API aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, true, __func__);
}

EMU_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    uint64_t seq = e->rec_seq.fetch_add(1) + 1;
    e->dev.store(s->dev);
    e->stream_id.store(s->id);
    return stream_enqueue(s, std::make_unique<EventRecordTask>(e, seq, s));
}

EMU_API aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    (void)s;
    if (!(e->flags & ACL_EVENT_SYNC) || !e->ex)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "event %p was not created with aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)", event);
    e->done_seq.store(e->rec_seq.load());
    return ACL_SUCCESS;
}

EMU_API aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    uint64_t target = e->rec_seq.load();
    if (target == 0) return ACL_SUCCESS; /* never recorded: nothing to wait for */
    return stream_enqueue(s, std::make_unique<EventWaitTask>(e, target));
}

static aclError sync_event(aclrtEvent event, int32_t timeout, const char* api) {
    if (int r = check_init(api)) return r;
    if (!event) return seterr(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
    Event* e = static_cast<Event*>(event);
    if (!event_valid(e)) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not a live event", event);
    if (timeout < -1) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "timeout %d ms is below -1", timeout);
    uint64_t target = e->rec_seq.load();
    uint64_t deadline = timeout >= 0 ? now_ns() + (uint64_t)timeout * 1000000ull : 0;
    if (timeout == 0) deadline = now_ns();
    Device* dev = e->dev.load();
    std::unique_ptr<HostSync> hs(dev ? new HostSync(dev, e->stream_id.load()) : nullptr);
    bool ok = wait_word(&e->word, false, deadline, [&] { return e->done_seq.load() >= target; }, 1000000000ull);
    if (!ok)
        return seterr(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, api, "event %p did not complete within %d ms", event, timeout);
    int code;
    std::string msg;
    {
        std::lock_guard<std::mutex> g(g_ev_m);
        code = e->err_code;
        msg = e->err_msg;
        if (code && e->err_taken) e->err_taken->store(true); /* the stream's next sync stays quiet */
    }
    if (code) return seterr_str(code, api, msg);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSynchronizeEvent(aclrtEvent event) { return sync_event(event, -1, __func__); }
EMU_API aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    return sync_event(event, timeout, __func__);
}

EMU_API aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    if (int r = check_init(__func__)) return r;
    if (!ms) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "ms is NULL");
    RESOLVE_EVENT(a, startEvent);
    RESOLVE_EVENT(b, endEvent);
    if (a->rec_seq.load() == 0 || b->rec_seq.load() == 0)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%s event was never recorded",
                      a->rec_seq.load() == 0 ? "start" : "end");
    if (a->done_seq.load() < a->rec_seq.load() || b->done_seq.load() < b->rec_seq.load())
        return seterr(ACL_ERROR_RT_EVENT_NOT_COMPLETE, __func__,
                      "%s event has not completed yet (synchronise the stream first)",
                      a->done_seq.load() < a->rec_seq.load() ? "start" : "end");
    uint64_t t0 = a->ts_ns.load(), t1 = b->ts_ns.load();
    *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
    if (int r = check_init(__func__)) return r;
    if (!status) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "status is NULL");
    RESOLVE_EVENT(e, event);
    if (e->ex) return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "not allowed on Ex-created events");
    *status = e->done_seq.load() >= e->rec_seq.load() ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
    if (int r = check_init(__func__)) return r;
    if (!status) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "status is NULL");
    RESOLVE_EVENT(e, event);
    *status = e->done_seq.load() >= e->rec_seq.load() ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                                        : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtDestroyEvent(aclrtEvent event) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    /* Records still queued refer to it: retire it (kept reachable, 48 bytes) rather than risk a
     * use after free in a stream worker. */
    static std::vector<Event*>& retired = *new std::vector<Event*>();
    std::lock_guard<std::mutex> g(g_ev_m);
    g_events.erase(e);
    e->magic = 0;
    retired.push_back(e);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSetOpWaitTimeout(uint32_t timeout) {
    if (int r = check_init(__func__)) return r;
    g_op_wait_timeout_s = timeout;
    return ACL_SUCCESS;
}
