/* ACL runtime: initialisation, error text, devices and their notify slots, contexts (acl_runtime.md §3.1, §3.2). */
#include "acl/hooks.h"
#include "acl/runtime.h"
#include "base/json.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace emu {

AclHooks acl_hooks;

namespace {
std::mutex g_init_m;
int g_init_count = 0;
std::mutex g_dev_m;               /* device table and context registry */
Device* g_devices[64] = {};
std::unordered_set<Context*> g_contexts;
thread_local Context* tl_ctx = nullptr;
}  // namespace

int check_init(const char* api) {
    if (g_init_count <= 0)
        return seterr(ACL_ERROR_UNINITIALIZE, api, "aclInit has not been called (or aclFinalize already was)");
    return ACL_SUCCESS;
}

Context* current_ctx() { return tl_ctx; }
void set_current_ctx(Context* c) { tl_ctx = c; }

/* ---------------------------------------------------------------- devices */

Device* device_peek(int id) {
    if (id < 0 || id >= 64) return nullptr;
    std::lock_guard<std::mutex> g(g_dev_m);
    return g_devices[id];
}

/* Device control blocks stay linked while the process lives (peers of later communicators open
 * them by name); they are unlinked at aclFinalize and at exit. A SIGKILLed process leaves them to
 * its peers (hccl/ unlinks a dead peer's block) or to shm_reclaim_stale() of the next run. */
static void unlink_device_segments() {
    for (int i = 0; i < 64; i++)
        if (Device* d = g_devices[i]) shm_unlink_seg(&d->ctl_seg);
}

Device* device_get(int id, int* err_code, const char* api) {
    if (id < 0 || id >= cfg().device_count) {
        *err_code = seterr(ACL_ERROR_RT_INVALID_DEVICEID, api,
                           "deviceId %d is out of range: the emulator offers devices 0..%d "
                           "(set HCOMM_KIT_DEVICE_COUNT for more, at most 64)",
                           id, cfg().device_count - 1);
        return nullptr;
    }
    std::lock_guard<std::mutex> g(g_dev_m);
    if (g_devices[id]) return g_devices[id];
    shm_reclaim_stale();
    static std::once_flag atexit_once;
    std::call_once(atexit_once, [] { atexit(unlink_device_segments); });
    Device* d = new Device();
    d->id = id;
    std::string err;
    if (!shm_create(&d->ctl_seg, shm_prefix() + strprintf("d%d.%d.", (int)getpid(), id), sizeof(DevCtl), &err)) {
        delete d;
        *err_code = seterr(ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, api, "cannot create the control block of device %d: %s",
                           id, err.c_str());
        return nullptr;
    }
    d->ctl = static_cast<DevCtl*>(d->ctl_seg.addr);
    d->ctl->magic = kDevCtlMagic;
    d->ctl->version = 2; /* 2: mrec[] (timing model) */
    d->ctl->pid = (int32_t)getpid();
    d->ctl->device = id;
    g_devices[id] = d;
    return d;
}

bool slots_alloc(Device* d, uint32_t n, uint32_t* base, std::string* err) {
    std::lock_guard<std::mutex> g(d->m);
    if (n == 0) {
        *base = 0;
        return true;
    }
    for (size_t i = 0; i < d->slot_free.size(); i++) {
        auto& f = d->slot_free[i];
        if (f.second >= n) {
            *base = f.first;
            f.first += n;
            f.second -= n;
            if (f.second == 0) d->slot_free.erase(d->slot_free.begin() + (long)i);
            for (uint32_t k = 0; k < n; k++) d->ctl->slots[*base + k].store(0);
            return true;
        }
    }
    if (d->slot_next + n > kMaxSlots) {
        *err = strprintf("device %d is out of notify slots (%u in use, %u requested, limit %u)", d->id,
                         d->slot_next - 1, n, kMaxSlots - 1);
        return false;
    }
    *base = d->slot_next;
    d->slot_next += n;
    for (uint32_t k = 0; k < n; k++) d->ctl->slots[*base + k].store(0);
    return true;
}

void slots_free(Device* d, uint32_t base, uint32_t n) {
    if (!n) return;
    std::lock_guard<std::mutex> g(d->m);
    d->slot_free.emplace_back(base, n);
}

static Context* context_new(Device* d, bool is_default, int* err_code, const char* api) {
    Context* c = new Context();
    c->dev = d;
    c->is_default = is_default;
    c->default_stream = stream_create(c, 0, err_code, api);
    if (!c->default_stream) {
        delete c;
        return nullptr;
    }
    std::lock_guard<std::mutex> g(g_dev_m);
    g_contexts.insert(c);
    return c;
}

static void context_free(Context* c) {
    {
        std::lock_guard<std::mutex> g(g_dev_m);
        g_contexts.erase(c);
    }
    for (Stream* s : std::vector<Stream*>(c->streams)) stream_destroy(s);
    if (c->default_stream) stream_destroy(c->default_stream);
    c->magic = 0;
    delete c;
}

static bool context_valid(Context* c) {
    std::lock_guard<std::mutex> g(g_dev_m);
    return g_contexts.count(c) != 0;
}

static void device_release(Device* d) {
    /* Refcount reached zero: release the default context and its streams (spec §3.2). */
    Context* c = d->default_ctx;
    d->default_ctx = nullptr;
    if (c) {
        if (tl_ctx == c) tl_ctx = nullptr;
        context_free(c);
    }
}

}  // namespace emu

using namespace emu;

/* ================================================================ init / finalize / errors */

EMU_API aclError aclInit(const char* configPath) {
    std::lock_guard<std::mutex> g(g_init_m);
    if (g_init_count > 0) {
        g_init_count++;
        return seterr(ACL_ERROR_REPEAT_INITIALIZE, __func__,
                      "already initialised (reference count now %d); this code is harmless", g_init_count);
    }
    if (configPath && *configPath) {
        std::string text, err;
        json::Value v;
        if (!json::read_file(configPath, text, err))
            return seterr(ACL_ERROR_INVALID_FILE, __func__, "cannot read configuration file: %s", err.c_str());
        if (!json::parse(text, v, err))
            return seterr(ACL_ERROR_PARSE_FILE, __func__, "configuration file %s is not valid JSON: %s", configPath,
                          err.c_str());
    }
    std::string err;
    if (!config_load(&err)) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "%s", err.c_str());
    g_init_count = 1;
    return ACL_SUCCESS;
}

/* aclFinalize: release every device. The Device objects are retired, not freed (objects the
 * user failed to destroy may still point at them); the next aclrtSetDevice makes fresh ones. */
static void finalize_all() {
    for (int i = 0; i < 64; i++) {
        Device* d = device_peek(i);
        if (!d) continue;
        if (d->refcount > 0) {
            d->refcount = 0;
            device_release(d);
        }
        if (acl_hooks.device_reset) acl_hooks.device_reset(d);
        std::lock_guard<std::mutex> g(g_dev_m);
        shm_unlink_seg(&d->ctl_seg);
        g_devices[i] = nullptr;
    }
}

/* hcomm-kit extension (hcomm_kit/emu_ext.h): the process is ending. Unlinks the names of its device
 * control blocks now, as its exit handler would: a Python interpreter ended by a KeyboardInterrupt
 * kills itself with SIGINT after finalizing, so C exit handlers never run. The mappings stay valid
 * (peers keep theirs); a device set afterwards gets a new block. Returns the names unlinked. */
EMU_API int32_t HcommKitProcessExiting(void) {
    int32_t n = 0;
    std::lock_guard<std::mutex> g(g_dev_m);
    for (int i = 0; i < 64; i++)
        if (Device* d = g_devices[i]) {
            n += d->ctl_seg.linked ? 1 : 0;
            shm_unlink_seg(&d->ctl_seg);
        }
    return n;
}

EMU_API aclError aclFinalize(void) {
    std::lock_guard<std::mutex> g(g_init_m);
    if (g_init_count <= 0) return seterr(ACL_ERROR_REPEAT_FINALIZE, __func__, "not initialised (repeated aclFinalize)");
    g_init_count = 0;
    finalize_all();
    return ACL_SUCCESS;
}

EMU_API aclError aclFinalizeReference(uint64_t* refCount) {
    std::lock_guard<std::mutex> g(g_init_m);
    if (g_init_count <= 0) return seterr(ACL_ERROR_REPEAT_FINALIZE, __func__, "not initialised (repeated finalize)");
    g_init_count--;
    if (refCount) *refCount = (uint64_t)g_init_count;
    if (g_init_count == 0) finalize_all();
    return ACL_SUCCESS;
}

EMU_API const char* aclGetRecentErrMsg(void) {
    static thread_local std::string out;
    std::string e = last_err();
    if (e.empty()) return nullptr;
    out = e;
    clear_err();
    return out.c_str();
}

/* ================================================================ devices */

EMU_API aclError aclrtSetDevice(int32_t deviceId) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    Device* d = device_get(deviceId, &code, __func__);
    if (!d) return code;
    std::lock_guard<std::mutex> g(d->m);
    if (!d->default_ctx) {
        /* context_new takes g_dev_m only; d->m is ours. */
        d->m.unlock();
        Context* c = context_new(d, true, &code, __func__);
        d->m.lock();
        if (!c) return code;
        d->default_ctx = c;
    }
    d->refcount++;
    tl_ctx = d->default_ctx;
    return ACL_SUCCESS;
}

static aclError reset_device(int32_t deviceId, bool force, const char* api) {
    if (int r = check_init(api)) return r;
    Device* d = device_peek(deviceId);
    if (!d || d->refcount <= 0)
        return seterr(ACL_ERROR_RT_INVALID_DEVICEID, api, "device %d is not set in this process (call aclrtSetDevice first)",
                      deviceId);
    Context* release = nullptr;
    {
        std::lock_guard<std::mutex> g(d->m);
        d->refcount = force ? 0 : d->refcount - 1;
        if (d->refcount == 0) release = d->default_ctx;
    }
    if (release) {
        for (Stream* s : release->streams) stream_sync(s, -1, api);
        stream_sync(release->default_stream, -1, api);
        device_release(d);
    }
    return ACL_SUCCESS;
}

EMU_API aclError aclrtResetDevice(int32_t deviceId) { return reset_device(deviceId, false, __func__); }
EMU_API aclError aclrtResetDeviceForce(int32_t deviceId) { return reset_device(deviceId, true, __func__); }

EMU_API aclError aclrtGetDevice(int32_t* deviceId) {
    if (int r = check_init(__func__)) return r;
    if (!deviceId) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "deviceId is NULL");
    if (!tl_ctx) return seterr(ACL_ERROR_RT_CONTEXT_NULL, __func__, "no device set on this thread (call aclrtSetDevice)");
    *deviceId = tl_ctx->dev->id;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtGetDeviceCount(uint32_t* count) {
    if (int r = check_init(__func__)) return r;
    if (!count) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "count is NULL");
    *count = (uint32_t)cfg().device_count;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtGetRunMode(aclrtRunMode* runMode) {
    if (int r = check_init(__func__)) return r;
    if (!runMode) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "runMode is NULL");
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

EMU_API const char* aclrtGetSocName(void) { return cfg().soc_name.c_str(); }

static aclError sync_device(int32_t timeout, const char* api) {
    if (int r = check_init(api)) return r;
    if (timeout < -1) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "timeout %d ms is below -1", timeout);
    if (!tl_ctx) return seterr(ACL_ERROR_RT_CONTEXT_NULL, api, "no device set on this thread (call aclrtSetDevice)");
    Device* d = tl_ctx->dev;
    std::vector<Stream*> all;
    {
        std::lock_guard<std::mutex> g(d->m);
        std::vector<Context*> ctxs = d->contexts;
        if (d->default_ctx) ctxs.push_back(d->default_ctx);
        for (Context* c : ctxs) {
            all.push_back(c->default_stream);
            all.insert(all.end(), c->streams.begin(), c->streams.end());
        }
    }
    uint64_t deadline = timeout >= 0 ? now_ns() + (uint64_t)timeout * 1000000ull : 0;
    int first = ACL_SUCCESS;
    for (Stream* s : all) {
        int64_t left = -1;
        if (deadline) {
            uint64_t now = now_ns();
            left = now >= deadline ? 0 : (int64_t)((deadline - now) / 1000000ull);
        }
        int r = stream_sync(s, left, api);
        if (r && !first) first = r;
    }
    return first;
}

EMU_API aclError aclrtSynchronizeDevice(void) { return sync_device(-1, __func__); }
EMU_API aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout) { return sync_device(timeout, __func__); }

/* ================================================================ contexts */

EMU_API aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
    if (int r = check_init(__func__)) return r;
    if (!context) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "context is NULL");
    int code = 0;
    Device* d = device_get(deviceId, &code, __func__);
    if (!d) return code;
    Context* c = context_new(d, false, &code, __func__);
    if (!c) return code;
    {
        std::lock_guard<std::mutex> g(d->m);
        d->contexts.push_back(c);
    }
    tl_ctx = c;
    *context = c;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtDestroyContext(aclrtContext context) {
    if (int r = check_init(__func__)) return r;
    if (!context) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "context is NULL");
    Context* c = static_cast<Context*>(context);
    if (!context_valid(c)) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live context", context);
    if (c->is_default)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "%p is a device's default context; only contexts from aclrtCreateContext can be destroyed "
                      "(use aclrtResetDevice)",
                      context);
    Device* d = c->dev;
    {
        std::lock_guard<std::mutex> g(d->m);
        for (size_t i = 0; i < d->contexts.size(); i++)
            if (d->contexts[i] == c) d->contexts.erase(d->contexts.begin() + (long)i);
    }
    for (Stream* s : c->streams) stream_sync(s, -1, __func__);
    stream_sync(c->default_stream, -1, __func__);
    if (tl_ctx == c) tl_ctx = nullptr;
    context_free(c);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSetCurrentContext(aclrtContext context) {
    if (int r = check_init(__func__)) return r;
    if (!context) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "context is NULL");
    Context* c = static_cast<Context*>(context);
    if (!context_valid(c)) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live context", context);
    tl_ctx = c;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtGetCurrentContext(aclrtContext* context) {
    if (int r = check_init(__func__)) return r;
    if (!context) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "context is NULL");
    if (!tl_ctx) return seterr(ACL_ERROR_RT_CONTEXT_NULL, __func__, "no current context on this thread");
    *context = tl_ctx;
    return ACL_SUCCESS;
}
