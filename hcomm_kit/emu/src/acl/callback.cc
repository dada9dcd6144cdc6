/* ACL runtime: host callbacks (aclrtLaunchCallback, aclrtSubscribeReport, aclrtProcessReport). */
#include "acl/runtime.h"

#include <algorithm>
#include <climits>

using namespace emu;

/* ================================================================ callbacks */

namespace emu {
namespace {
struct CbItem {
    aclrtCallback fn;
    void* data;
    bool block;
    std::atomic<uint32_t> done{0};
};
struct Subscriber {
    std::mutex m;
    std::deque<std::shared_ptr<CbItem>> q;
    std::atomic<uint32_t> word{0};
    int nstreams = 0;
};
std::mutex g_cb_m;
std::unordered_map<uint64_t, std::shared_ptr<Subscriber>> g_subs;

std::shared_ptr<Subscriber> find_sub(uint64_t tid) {
    std::lock_guard<std::mutex> g(g_cb_m);
    auto it = g_subs.find(tid);
    return it == g_subs.end() ? nullptr : it->second;
}

struct CallbackTask : Task {
    std::shared_ptr<CbItem> item;
    uint64_t tid;
    explicit CallbackTask(std::shared_ptr<CbItem> i, uint64_t t) : item(std::move(i)), tid(t) {}
    int run(Stream* s, std::string* msg) override {
        auto sub = find_sub(tid);
        if (!sub) {
            *msg = strprintf("stream %u: the thread subscribed for its callbacks unsubscribed", s->id);
            return ACL_ERROR_RT_STREAM_NO_CB_REG;
        }
        {
            std::lock_guard<std::mutex> g(sub->m);
            sub->q.push_back(item);
        }
        sub->word.fetch_add(1);
        futex_wake(&sub->word, INT_MAX, false);
        if (item->block) {
            wait_word(&item->done, false, 0, [&] { return item->done.load() != 0 || !find_sub(tid); }, 200000000ull);
        }
        return 0;
    }
    const char* name() const override { return "aclrtLaunchCallback"; }
};
}  // namespace
}  // namespace emu

EMU_API aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_STREAM(s, stream);
    std::lock_guard<std::mutex> g(g_cb_m);
    if (s->subscriber_set && s->subscriber != threadId)
        return seterr(ACL_ERROR_RT_STREAM_SUBSCRIBE, __func__, "stream %u is already served by thread %llu", s->id,
                      (unsigned long long)s->subscriber);
    if (s->subscriber_set) return seterr(ACL_ERROR_REPEAT_SUBSCRIBE, __func__, "stream %u already subscribed", s->id);
    if (g_subs.size() >= 1024 && !g_subs.count(threadId))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "1024 report threads already registered");
    auto& sub = g_subs[threadId];
    if (!sub) sub = std::make_shared<Subscriber>();
    sub->nstreams++;
    s->subscriber_set = 1;
    s->subscriber = threadId;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_STREAM(s, stream);
    std::lock_guard<std::mutex> g(g_cb_m);
    if (!s->subscriber_set || s->subscriber != threadId)
        return seterr(ACL_ERROR_STREAM_NOT_SUBSCRIBE, __func__, "stream %u is not subscribed by thread %llu", s->id,
                      (unsigned long long)threadId);
    s->subscriber_set = 0;
    auto it = g_subs.find(threadId);
    if (it != g_subs.end() && --it->second->nstreams <= 0) {
        it->second->word.fetch_add(1);
        futex_wake(&it->second->word, INT_MAX, false);
        g_subs.erase(it);
    }
    return ACL_SUCCESS;
}

EMU_API aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                                     aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    if (!fn) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "fn is NULL");
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "blockType %d is not ACL_CALLBACK_NO_BLOCK/BLOCK", (int)blockType);
    RESOLVE_STREAM(s, stream);
    uint64_t tid;
    {
        std::lock_guard<std::mutex> g(g_cb_m);
        if (!s->subscriber_set)
            return seterr(ACL_ERROR_RT_STREAM_NO_CB_REG, __func__,
                          "stream %u has no thread subscribed for callbacks (call aclrtSubscribeReport)", s->id);
        tid = s->subscriber;
    }
    auto item = std::make_shared<CbItem>();
    item->fn = fn;
    item->data = userData;
    item->block = blockType == ACL_CALLBACK_BLOCK;
    return stream_enqueue(s, std::make_unique<CallbackTask>(item, tid));
}

EMU_API aclError aclrtProcessReport(int32_t timeout) {
    if (int r = check_init(__func__)) return r;
    if (timeout == 0 || timeout < -1)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "timeout %d ms must be -1 or positive", timeout);
    uint64_t tid = (uint64_t)pthread_self();
    auto sub = find_sub(tid);
    if (!sub)
        return seterr(ACL_ERROR_RT_THREAD_SUBSCRIBE, __func__,
                      "thread %llu is not subscribed to any stream (call aclrtSubscribeReport)", (unsigned long long)tid);
    uint64_t deadline = timeout > 0 ? now_ns() + (uint64_t)timeout * 1000000ull : 0;
    std::shared_ptr<CbItem> item;
    bool ok = wait_word(&sub->word, false, deadline, [&] {
        std::lock_guard<std::mutex> g(sub->m);
        if (sub->q.empty()) return false;
        item = sub->q.front();
        sub->q.pop_front();
        return true;
    }, 200000000ull);
    if (!ok) return seterr(ACL_ERROR_RT_REPORT_TIMEOUT, __func__, "no callback arrived within %d ms", timeout);
    item->fn(item->data);
    item->done.store(1);
    futex_wake(&item->done, INT_MAX, false);
    return ACL_SUCCESS;
}
