/* ACL runtime: initialisation, error text, devices, contexts, memory (acl_runtime.md §3.1, §3.2, §3.4). */
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

std::mutex g_mem_m;
std::map<uintptr_t, MemRegion> g_mem; /* base -> region */
}  // namespace

int check_init(const char* api) {
    if (g_init_count <= 0)
        return seterr(ACL_ERROR_UNINITIALIZE, api, "aclInit has not been called (or aclFinalize already was)");
    return ACL_SUCCESS;
}

Context* current_ctx() { return tl_ctx; }
void set_current_ctx(Context* c) { tl_ctx = c; }

/* ---------------------------------------------------------------- memory registry */

void mem_register(void* base, size_t size, int device, MemKind kind) {
    std::lock_guard<std::mutex> g(g_mem_m);
    g_mem[(uintptr_t)base] = MemRegion{(uintptr_t)base, size, device, kind};
}

bool mem_register_exclusive(void* base, size_t size, int device, MemKind kind, MemRegion* clash) {
    uintptr_t a = (uintptr_t)base;
    std::lock_guard<std::mutex> g(g_mem_m);
    auto it = g_mem.lower_bound(a);
    if (it != g_mem.end() && it->first < a + size) {
        *clash = it->second;
        return false;
    }
    if (it != g_mem.begin()) {
        --it;
        if (it->second.base + it->second.size + (it->second.size == 0) > a) {
            *clash = it->second;
            return false;
        }
    }
    g_mem[a] = MemRegion{a, size, device, kind};
    return true;
}

void mem_unregister(void* base) {
    std::lock_guard<std::mutex> g(g_mem_m);
    g_mem.erase((uintptr_t)base);
}

bool mem_find(const void* p, size_t len, MemRegion* out, bool* partial) {
    if (partial) *partial = false;
    std::lock_guard<std::mutex> g(g_mem_m);
    auto it = g_mem.upper_bound((uintptr_t)p);
    if (it == g_mem.begin()) return false;
    --it;
    const MemRegion& r = it->second;
    uintptr_t a = (uintptr_t)p;
    if (a < r.base || a >= r.base + r.size + (r.size == 0)) return false;
    if (out) *out = r;
    if (len > r.base + r.size - a) {
        if (partial) *partial = true;
        return false;
    }
    return true;
}

bool mem_is_device(const void* p, size_t len, int device) {
    MemRegion r;
    if (!mem_find(p, len ? len : 1, &r)) return false;
    if (r.kind == MemKind::HostPinned) return false;
    return device < 0 || r.device == device;
}

const char* mem_kind_name(MemKind k) {
    switch (k) {
        case MemKind::Device: return "device memory";
        case MemKind::HcclBuffer: return "HCCL buffer";
        case MemKind::EngineCtx: return "engine context";
        case MemKind::HostPinned: return "page-locked host memory";
        case MemKind::HostMapped: return "registered host memory";
    }
    return "memory";
}

/* ---------------------------------------------------------------- devices */

Device* device_peek(int id) {
    if (id < 0 || id >= 64) return nullptr;
    std::lock_guard<std::mutex> g(g_dev_m);
    return g_devices[id];
}

/* Device control blocks stay linked while the process lives (peers of later communicators open
 * them by name); they are unlinked at aclFinalize and at exit. A SIGKILLed process leaves them to
 * its peers (comm.cc unlinks a dead peer's block) or to shm_reclaim_stale() of the next run. */
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
    d->ctl->version = 1;
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

/* ================================================================ memory */

/* No allocation can exceed the address space a pointer difference can span; refusing such sizes
 * up front also keeps the rounding below from wrapping. */
constexpr size_t kMaxAlloc = (size_t)PTRDIFF_MAX;

static Device* need_device(const char* api, int* code) {
    if (!tl_ctx) {
        *code = seterr(ACL_ERROR_RT_CONTEXT_NULL, api, "no device set on this thread (call aclrtSetDevice first)");
        return nullptr;
    }
    return tl_ctx->dev;
}

static aclError malloc_impl(void** devPtr, size_t size, aclrtMemMallocPolicy policy, bool align32, const char* api) {
    if (int r = check_init(api)) return r;
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, api, "devPtr is NULL");
    if (size == 0) return seterr(ACL_ERROR_INVALID_PARAM, api, "size is 0");
    if (size > kMaxAlloc)
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "size %zu is above the largest possible allocation (%zu bytes)",
                      size, kMaxAlloc);
    int code = 0;
    Device* d = need_device(api, &code);
    if (!d) return code;
    size_t rounded = (size + 31) / 32 * 32; /* cannot wrap: size <= kMaxAlloc */
    bool huge1g = policy == ACL_MEM_MALLOC_HUGE1G_ONLY || policy == ACL_MEM_MALLOC_HUGE1G_ONLY_P2P;
    /* Spec §3.4: round up to 32 then add the 32-byte pad, except HUGE1G, Ascend 950 and Align32. */
    if (!align32 && !huge1g && !is_950()) rounded += 32;
    if (rounded < size) return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "size %zu overflows", size);
    void* p = nullptr;
    if (posix_memalign(&p, 64, rounded) != 0 || !p)
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, api, "cannot allocate %zu bytes of device memory on device %d",
                      rounded, d->id);
    mem_register(p, rounded, d->id, MemKind::Device);
    *devPtr = p;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    return malloc_impl(devPtr, size, policy, false, __func__);
}

EMU_API aclError aclrtMallocAlign32(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
    return malloc_impl(devPtr, size, policy, true, __func__);
}

EMU_API aclError aclrtFree(void* devPtr) {
    if (int r = check_init(__func__)) return r;
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "devPtr is NULL");
    MemRegion r;
    if (!mem_find(devPtr, 1, &r) || r.base != (uintptr_t)devPtr || r.kind != MemKind::Device)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p was not returned by aclrtMalloc (or was already freed)",
                      devPtr);
    mem_unregister(devPtr);
    free(devPtr);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtMallocHost(void** hostPtr, size_t size) {
    if (int r = check_init(__func__)) return r;
    if (!hostPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "hostPtr is NULL");
    if (size == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "size is 0");
    if (size > kMaxAlloc)
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__,
                      "size %zu is above the largest possible allocation (%zu bytes)", size, kMaxAlloc);
    void* p = nullptr;
    if (posix_memalign(&p, 64, size) != 0 || !p)
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "cannot allocate %zu bytes of host memory", size);
    mem_register(p, size, -1, MemKind::HostPinned);
    *hostPtr = p;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtFreeHost(void* hostPtr) {
    if (int r = check_init(__func__)) return r;
    if (!hostPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "hostPtr is NULL");
    MemRegion r;
    if (!mem_find(hostPtr, 1, &r) || r.base != (uintptr_t)hostPtr || r.kind != MemKind::HostPinned)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p was not returned by aclrtMallocHost", hostPtr);
    mem_unregister(hostPtr);
    free(hostPtr);
    return ACL_SUCCESS;
}

/* Host memory mapped for the device. The emulator's device shares the host's address space, so
 * the device address is the host address (as on RC/SVM systems); the range becomes device memory
 * of the current device until aclrtHostUnregister. */
EMU_API aclError aclrtHostRegister(void* ptr, uint64_t size, aclrtHostRegisterType type, void** devPtr) {
    if (int r = check_init(__func__)) return r;
    if (!ptr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "ptr is NULL");
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "devPtr is NULL");
    if (size == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "size is 0");
    if ((int)type != (int)ACL_HOST_REGISTER_MAPPED)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__,
                      "type %d is not a supported aclrtHostRegisterType (ACL_HOST_REGISTER_MAPPED = 0)", (int)type);
    if ((uintptr_t)ptr + size < (uintptr_t)ptr)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "ptr %p + size %llu overflows the address space", ptr,
                      (unsigned long long)size);
    int code = 0;
    Device* d = need_device(__func__, &code);
    if (!d) return code;
    MemRegion clash{};
    if (!mem_register_exclusive(ptr, (size_t)size, d->id, MemKind::HostMapped, &clash))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "%p + %llu bytes overlaps the %zu-byte %s at 0x%lx (register each host range once; "
                      "aclrtHostUnregister it first)",
                      ptr, (unsigned long long)size, clash.size, mem_kind_name(clash.kind), (unsigned long)clash.base);
    *devPtr = ptr;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtHostUnregister(void* ptr) {
    if (int r = check_init(__func__)) return r;
    if (!ptr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "ptr is NULL");
    MemRegion r;
    if (!mem_find(ptr, 1, &r) || r.base != (uintptr_t)ptr || r.kind != MemKind::HostMapped)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p was not registered with aclrtHostRegister", ptr);
    mem_unregister(ptr);
    return ACL_SUCCESS;
}

namespace emu {
/* Checks one side of a copy. want_device: 1 must be device memory, 0 must not be, -1 either. */
int check_side(const char* api, const char* what, const void* p, size_t n, int want_device, const char* kind) {
    /* A range that wraps the address space (or spans more than a pointer difference) is never
     * memory; refuse it before anything computes p + n. */
    if (n > (size_t)PTRDIFF_MAX || (uintptr_t)p > UINTPTR_MAX - n)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "%s %p + %zu bytes runs past the end of the address space (count/size too large)", what, p, n);
    MemRegion r;
    bool partial = false;
    bool found = mem_find(p, n, &r, &partial);
    bool is_dev = (found || partial) && r.kind != MemKind::HostPinned;
    if (partial && r.kind != MemKind::HostPinned)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "%s %p + %zu bytes runs past the end of its %zu-byte %s allocation at 0x%lx (by %zu bytes)", what, p,
                      n, r.size, mem_kind_name(r.kind), (unsigned long)r.base,
                      (size_t)((uintptr_t)p + n - (r.base + r.size)));
    if (want_device == 1 && !is_dev)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "kind %s but %s %p is not device memory (use aclrtMalloc)", kind,
                      what, p);
    if (want_device == 0 && is_dev)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "kind %s but %s %p is device memory", kind, what, p);
    return ACL_SUCCESS;
}

const char* memcpy_kind_name(int k) {
    static const char* n[] = {"ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE", "ACL_MEMCPY_DEVICE_TO_HOST",
                              "ACL_MEMCPY_DEVICE_TO_DEVICE", "ACL_MEMCPY_DEFAULT", "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE"};
    return k >= 0 && k <= 5 ? n[k] : "?";
}

/* Validates a memcpy request; 0 if fine. */
int memcpy_check(const char* api, void* dst, size_t destMax, const void* src, size_t count, int kind) {
    if (!dst) return seterr(ACL_ERROR_INVALID_PARAM, api, "dst is NULL");
    if (!src) return seterr(ACL_ERROR_INVALID_PARAM, api, "src is NULL");
    if (kind < 0 || kind > 5)
        return seterr(ACL_ERROR_INVALID_PARAM, api, "kind %d is not a supported aclrtMemcpyKind (0..5)", kind);
    if (destMax < count)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "count %zu exceeds destMax %zu", count, destMax);
    const char* kn = memcpy_kind_name(kind);
    int dd = -1, sd = -1;
    switch (kind) {
        case ACL_MEMCPY_HOST_TO_HOST: dd = 0, sd = 0; break;
        case ACL_MEMCPY_HOST_TO_DEVICE:
        case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: dd = 1, sd = 0; break;
        case ACL_MEMCPY_DEVICE_TO_HOST: dd = 0, sd = 1; break;
        case ACL_MEMCPY_DEVICE_TO_DEVICE: dd = 1, sd = 1; break;
        default: break;
    }
    if (int r = check_side(api, "dst", dst, count, dd, kn)) return r;
    if (int r = check_side(api, "src", src, count, sd, kn)) return r;
    return ACL_SUCCESS;
}
}  // namespace emu

EMU_API aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
    if (int r = check_init(__func__)) return r;
    if (count == 0) return ACL_SUCCESS;
    int k; /* the kind read as an int: callers may pass values outside the enum */
    memcpy(&k, &kind, sizeof k);
    if (int r = memcpy_check(__func__, dst, destMax, src, count, k)) return r;
    memmove(dst, src, count);
    note_host_write(dst, count);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
    if (int r = check_init(__func__)) return r;
    if (count == 0) return ACL_SUCCESS;
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "devPtr is NULL");
    if (maxCount < count)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "count %zu exceeds maxCount %zu", count, maxCount);
    if (int r = check_side(__func__, "devPtr", devPtr, count, -1, "memset")) return r;
    memset(devPtr, value, count);
    note_host_write(devPtr, count);
    return ACL_SUCCESS;
}
