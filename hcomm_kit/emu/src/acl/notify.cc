/* ACL runtime: ACL notifies (acl_runtime.md §3.10): a notify is one slot of its device's control
 * block; a wait on a stream worker runs the device's device threads meanwhile (acl/hooks.h). */
#include "acl/hooks.h"
#include "acl/runtime.h"

using namespace emu;

/* ================================================================ ACL notifies */

namespace emu {
struct Notify {
    uint32_t magic = kNotifyMagic;
    Device* dev;
    uint32_t slot;
};
namespace {
std::mutex g_nt_m;
std::unordered_set<Notify*> g_notifies;

/* An ACL notify wait/record seen as an Hcomm task of a host stream (checker, hang reports). */
HTask acl_notify_task(HOp op, const char* api, Device* dev, uint32_t slot, uint32_t timeout_s) {
    HTask h;
    h.op = op;
    h.api = api;
    h.slot_ctl = dev->ctl;
    h.slot = slot;
    h.timeout_s = timeout_s;
    h.desc.kind = 2;
    h.desc.index = slot;
    return h;
}

struct NotifyRecordTask : Task {
    DevCtl* ctl;
    uint32_t slot;
    NotifyRecordTask(Device* d, uint32_t s) : ctl(d->ctl), slot(s) {}
    int run(Stream*, std::string*) override {
        /* A plain ACL notify between host streams is the runtime's business, not an operator's:
         * no lost-signal finding here; the provenance says "host" so Hcomm waits do not judge it. */
        if (check_mode()) ctl->src[slot].store(prov::make(true, false, 0x7f, 0xfff, 0, 0, 0), std::memory_order_release);
        slot_record(ctl, slot);
        return 0;
    }
    const char* name() const override { return "aclrtRecordNotify"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Record;
        if (!d->brief) d->what = strprintf("aclrtRecordNotify (ACL notify id %u)", slot);
        d->records.emplace_back(ctl, slot);
    }
};

struct NotifyWaitTask : Task {
    Device* dev;
    uint32_t slot;
    uint32_t timeout_s;
    HTask h;
    std::atomic<uint64_t> since{0};
    NotifyWaitTask(Device* d, uint32_t s, uint32_t t)
        : dev(d), slot(s), timeout_s(t), h(acl_notify_task(HOp::Wait, "aclrtWaitAndResetNotify", d, s, t)) {
        helps = true;
    }
    int run(Stream* s, std::string* msg) override;
    const char* name() const override { return "aclrtWaitAndResetNotify"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Wait;
        d->wait = &h;
        d->since_ns = since.load(std::memory_order_relaxed);
        if (!d->brief) d->what = strprintf("aclrtWaitAndResetNotify (ACL notify id %u)", slot);
    }
};
}  // namespace

/* Waits for an ACL notify on a stream worker: through the device-thread scheduler, which runs the
 * device's device threads meanwhile; without it (no hcomm/), a plain wait on the doorbell. Returns
 * 1 when consumed, 0 on timeout, -1 when aborted (msg says why). */
static int wait_acl_notify(Device* dev, uint32_t slot, uint64_t deadline_ns, std::string* msg) {
    if (acl_hooks.wait_slot) return acl_hooks.wait_slot(dev, slot, deadline_ns, msg);
    DevCtl* c = dev->ctl;
    for (;;) {
        uint32_t v = c->doorbell.load(std::memory_order_seq_cst);
        if (slot_consume(c, slot)) return 1;
        if (deadline_ns && now_ns() >= deadline_ns) return 0;
        uint64_t poll_deadline = now_ns() + 100000000ull;
        if (deadline_ns && deadline_ns < poll_deadline) poll_deadline = deadline_ns;
        wait_word(&c->doorbell, true, poll_deadline,
                  [&] { return c->doorbell.load(std::memory_order_acquire) != v; }, 100000000ull, &c->sleepers);
    }
}

int NotifyWaitTask::run(Stream* s, std::string* msg) {
    uint64_t deadline = (timeout_s == 0 || timeout_s == UINT32_MAX) ? 0 : now_ns() + (uint64_t)timeout_s * 1000000000ull;
    since.store(now_ns(), std::memory_order_relaxed);
    int r = wait_acl_notify(dev, slot, deadline, msg);
    since.store(0, std::memory_order_relaxed);
    if (r == 1) return 0;
    if (r == 0) {
        std::string acct = device_threads_account(dev);
        *msg = strprintf("stream %u: ACL notify id %u was not recorded within %u s (aclrtWaitAndResetNotify)%s%s",
                         s->id, slot, timeout_s, acct.empty() ? "" : "; ", acct.c_str());
        return ACL_ERROR_RT_TASK_TIMEOUT;
    }
    std::lock_guard<std::mutex> g(dev->m);
    return dev->abort_code ? dev->abort_code : ACL_ERROR_RT_TASK_TIMEOUT;
}
}  // namespace emu

#define RESOLVE_NOTIFY(var, h)                                                                        \
    if (!(h)) return seterr(ACL_ERROR_INVALID_PARAM, __func__, #h " is NULL");                         \
    Notify* var = static_cast<Notify*>(h);                                                             \
    {                                                                                                  \
        std::lock_guard<std::mutex> g_(g_nt_m);                                                        \
        if (!g_notifies.count(var))                                                                    \
            return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live notify", (void*)(h)); \
    }

EMU_API aclError aclrtCreateNotify(aclrtNotify* notify, uint64_t flag) {
    if (int r = check_init(__func__)) return r;
    if (!notify) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "notify is NULL");
    if (flag > 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "flag 0x%llx is not ACL_NOTIFY_DEFAULT (0) or ACL_NOTIFY_DEVICE_USE_ONLY (1)", (unsigned long long)flag);
    Context* c = current_ctx();
    if (!c) return seterr(ACL_ERROR_RT_CONTEXT_NULL, __func__, "no device set on this thread (call aclrtSetDevice)");
    Device* d = c->dev;
    size_t limit = is_950() ? 65535 : 8192;
    {
        std::lock_guard<std::mutex> g(d->m);
        if (d->acl_notifies.size() >= limit)
            return seterr(ACL_ERROR_RT_NO_NOTIFY_RESOURCE, __func__, "device %d already has %zu notifies (limit on %s)",
                          d->id, limit, cfg().soc_name.c_str());
    }
    uint32_t slot;
    std::string err;
    if (!slots_alloc(d, 1, &slot, &err)) return seterr(ACL_ERROR_RT_NO_NOTIFY_RESOURCE, __func__, "%s", err.c_str());
    Notify* n = new Notify();
    n->dev = d;
    n->slot = slot;
    {
        std::lock_guard<std::mutex> g(d->m);
        d->acl_notifies.insert(slot);
    }
    std::lock_guard<std::mutex> g(g_nt_m);
    g_notifies.insert(n);
    *notify = n;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtDestroyNotify(aclrtNotify notify) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    {
        std::lock_guard<std::mutex> g(g_nt_m);
        g_notifies.erase(n);
    }
    {
        std::lock_guard<std::mutex> g(n->dev->m);
        n->dev->acl_notifies.erase(n->slot);
    }
    slots_free(n->dev, n->slot, 1);
    n->magic = 0;
    delete n;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<NotifyRecordTask>(n->dev, n->slot));
}

EMU_API aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    RESOLVE_STREAM(s, stream);
    if (s->dev != n->dev)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "notify belongs to device %d but stream to device %d",
                      n->dev->id, s->dev->id);
    return stream_enqueue(s, std::make_unique<NotifyWaitTask>(n->dev, n->slot, timeout));
}

EMU_API aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t* notifyId) {
    if (int r = check_init(__func__)) return r;
    if (!notifyId) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "notifyId is NULL");
    RESOLVE_NOTIFY(n, notify);
    *notifyId = n->slot;
    return ACL_SUCCESS;
}
