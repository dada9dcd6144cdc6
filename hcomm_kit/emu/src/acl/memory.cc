/* ACL runtime: memory (acl_runtime.md §3.4): the registry of device, HCCL-buffer, engine-context and
 * host memory, allocation, host registration, and the synchronous copies and their checks. */
#include "acl/hooks.h"
#include "acl/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace emu {

namespace {
std::mutex g_mem_m;
std::map<uintptr_t, MemRegion> g_mem; /* base -> region */
/* Bumped (under g_mem_m) by every change of the registry: a thread's cache of regions it found
 * (mem_find: every Hcomm call checks its buffers) is good while it reads the same number. */
std::atomic<uint64_t> g_mem_gen{1};
struct MemCache {
    uint64_t gen = 0;
    MemRegion r[4];
    unsigned n = 0, next = 0;
};
thread_local MemCache tl_mem;
}  // namespace

/* ---------------------------------------------------------------- memory registry */

void mem_register(void* base, size_t size, int device, MemKind kind) {
    std::lock_guard<std::mutex> g(g_mem_m);
    g_mem[(uintptr_t)base] = MemRegion{(uintptr_t)base, size, device, kind};
    g_mem_gen.fetch_add(1, std::memory_order_release);
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
    g_mem_gen.fetch_add(1, std::memory_order_release);
    return true;
}

void mem_unregister(void* base) {
    std::lock_guard<std::mutex> g(g_mem_m);
    g_mem.erase((uintptr_t)base);
    g_mem_gen.fetch_add(1, std::memory_order_release);
}

/* The answer of mem_find for region r holding p. */
static bool mem_found(const MemRegion& r, uintptr_t a, size_t len, MemRegion* out, bool* partial) {
    if (out) *out = r;
    if (len > r.base + r.size - a) {
        if (partial) *partial = true;
        return false;
    }
    return true;
}

bool mem_find(const void* p, size_t len, MemRegion* out, bool* partial) {
    if (partial) *partial = false;
    uintptr_t a = (uintptr_t)p;
    MemCache& mc = tl_mem;
    uint64_t gen = g_mem_gen.load(std::memory_order_acquire);
    if (mc.gen == gen) {
        for (unsigned i = 0; i < mc.n; i++) {
            const MemRegion& r = mc.r[i];
            if (a >= r.base && a < r.base + r.size + (r.size == 0)) return mem_found(r, a, len, out, partial);
        }
    } else {
        mc.gen = gen;
        mc.n = mc.next = 0;
    }
    MemRegion r;
    {
        std::lock_guard<std::mutex> g(g_mem_m);
        auto it = g_mem.upper_bound(a);
        if (it == g_mem.begin()) return false;
        --it;
        r = it->second;
        if (a < r.base || a >= r.base + r.size + (r.size == 0)) return false;
        if (g_mem_gen.load(std::memory_order_relaxed) == gen) { /* what we cache is of generation gen */
            mc.r[mc.next] = r;
            mc.next = (mc.next + 1) % 4;
            if (mc.n < 4) mc.n++;
        }
    }
    return mem_found(r, a, len, out, partial);
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

}  // namespace emu

using namespace emu;

/* ================================================================ memory */

/* No allocation can exceed the address space a pointer difference can span; refusing such sizes
 * up front also keeps the rounding below from wrapping. */
constexpr size_t kMaxAlloc = (size_t)PTRDIFF_MAX;

namespace {
/* The fill of new device memory (checker on): word i of an allocation; no write of data reproduces
 * it at that offset, so a word still holding it was never written, by anything (kernel code too). */
constexpr size_t kFillMax = 256ull << 20;
inline uint64_t fill_word(uint64_t i) { return 0xA5C3E1F0D2B49687ull ^ (i * 0x9E3779B97F4A7C15ull); }
void fill_new(void* p, size_t n) {
    uint64_t* w = static_cast<uint64_t*>(p);
    for (size_t i = 0; i < n / 8; i++) w[i] = fill_word(i);
}
}  // namespace

std::string emu::mem_unwritten_finding(const char* api, const void* src, size_t n) {
    if (!check_mode() || !n) return "";
    MemRegion r;
    if (!mem_find(src, n, &r) || r.kind != MemKind::Device || r.size > kFillMax) return "";
    const uint64_t* w = reinterpret_cast<const uint64_t*>(r.base);
    uint64_t lo = (uintptr_t)src - r.base, hi = lo + n;
    uint64_t first = (lo + 7) / 8, last = hi / 8; /* whole words of [lo, hi) */
    uint64_t unwritten = 0;
    std::string ranges;
    int shown = 0;
    for (uint64_t i = first; i < last;) {
        if (w[i] != fill_word(i)) {
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < last && w[j] == fill_word(j)) j++;
        unwritten += (j - i) * 8;
        if (shown++ < 8)
            ranges += strprintf("%s[%llu, %llu)", ranges.empty() ? "" : ", ", (unsigned long long)(i * 8 - lo),
                                (unsigned long long)(j * 8 - lo));
        i = j;
    }
    if (!unwritten) return "";
    /* An allocation nothing wrote at all is no operator's output (CANN's reduce example reads back its
     * non-roots' untouched receive buffers): only one written in part is reported. */
    bool written = false;
    for (uint64_t i = 0, words = r.size / 8; i < words && !written; i++) written = w[i] != fill_word(i);
    if (!written) return "";
    if (shown > 8) ranges += ", ...";
    Device* d = device_peek(r.device);
    std::string k;
    if (d) {
        std::lock_guard<std::mutex> g(d->m);
        k = d->last_kernel;
    }
    std::string text = strprintf(
        "[hcomm-kit check] read of device memory nothing wrote: %s reads %llu byte(s) that nothing wrote since "
        "aclrtMalloc (no host copy or memset, no device task, no kernel code) while the rest of their allocation "
        "was written: bytes %s of the %llu it copies from %p, device %d (an allocation of %zu bytes at 0x%lx); on "
        "Ascend they would be whatever the memory held. The latest kernel launched on device %d: %s (an operator "
        "that leaves part of its output unwritten?)",
        api, (unsigned long long)unwritten, ranges.c_str(), (unsigned long long)n, src, r.device, r.size,
        (unsigned long)r.base, r.device, k.empty() ? "none" : k.c_str());
    rank_log("%s", text.c_str());
    if (check_mode() == 2) {
        EMU_LOG(LOG_WARN, "%s (HCOMM_KIT_CHECK=warn: the copy goes on)", text.c_str());
        return "";
    }
    return text + " (HCOMM_KIT_CHECK=warn reports without failing; =0 turns the checker off)";
}

static Device* need_device(const char* api, int* code) {
    Context* ctx = current_ctx();
    if (!ctx) {
        *code = seterr(ACL_ERROR_RT_CONTEXT_NULL, api, "no device set on this thread (call aclrtSetDevice first)");
        return nullptr;
    }
    return ctx->dev;
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
    if (check_mode() && rounded <= kFillMax) fill_new(p, rounded); /* garbage, as on a device (see above) */
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

int memset_check(const char* api, void* devPtr, size_t maxCount, size_t count) {
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, api, "devPtr is NULL");
    if (maxCount < count)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "count %zu exceeds maxCount %zu", count, maxCount);
    return check_side(api, "devPtr", devPtr, count, -1, "memset");
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
    if (k == ACL_MEMCPY_DEVICE_TO_HOST) {
        std::string f = mem_unwritten_finding(__func__, src, count);
        if (!f.empty()) return seterr_str(kCheckErrorCode, __func__, f);
    }
    return ACL_SUCCESS;
}

EMU_API aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
    if (int r = check_init(__func__)) return r;
    if (count == 0) return ACL_SUCCESS;
    if (int r = memset_check(__func__, devPtr, maxCount, count)) return r;
    memset(devPtr, value, count);
    note_host_write(devPtr, count);
    return ACL_SUCCESS;
}

/* ================================================================ the unwritten-output check */

namespace emu {

uint64_t output_watch_begin(Device* dev, const void* base, uint64_t len) {
    if (!dev || !base || !len) return 0;
    std::lock_guard<std::mutex> g(dev->watch_m);
    OutputWatch w;
    w.id = dev->watch_next++;
    w.base = (uintptr_t)base;
    w.len = len;
    dev->watch_list.push_back(std::move(w));
    dev->watches.fetch_add(1, std::memory_order_relaxed);
    return dev->watch_list.back().id;
}

void output_watch_write(Device* dev, const void* dst, uint64_t n) {
    if (!n || !dev->watches.load(std::memory_order_relaxed)) return;
    uintptr_t a = (uintptr_t)dst;
    std::lock_guard<std::mutex> g(dev->watch_m);
    for (OutputWatch& w : dev->watch_list) {
        if (a >= w.base + w.len || a + n <= w.base) continue;
        uint64_t lo = a > w.base ? a - w.base : 0, hi = std::min<uint64_t>(a + n - w.base, w.len);
        /* merge [lo, hi) into the sorted disjoint list */
        auto& v = w.written;
        auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(lo, (uint64_t)0));
        if (it != v.begin() && std::prev(it)->second >= lo) --it;
        auto end = it;
        while (end != v.end() && end->first <= hi) {
            lo = std::min(lo, end->first);
            hi = std::max(hi, end->second);
            ++end;
        }
        it = v.erase(it, end);
        v.insert(it, std::make_pair(lo, hi));
    }
}

std::vector<std::pair<uint64_t, uint64_t>> output_watch_end(Device* dev, uint64_t id, uint64_t* unwritten,
                                                            size_t max_ranges) {
    std::vector<std::pair<uint64_t, uint64_t>> gaps;
    *unwritten = 0;
    if (!dev || !id) return gaps;
    std::lock_guard<std::mutex> g(dev->watch_m);
    for (size_t i = 0; i < dev->watch_list.size(); i++) {
        OutputWatch& w = dev->watch_list[i];
        if (w.id != id) continue;
        uint64_t at = 0;
        auto gap = [&](uint64_t lo, uint64_t hi) {
            if (hi <= lo) return;
            *unwritten += hi - lo;
            if (gaps.size() < max_ranges) gaps.emplace_back(lo, hi);
        };
        for (const auto& r : w.written) {
            gap(at, r.first);
            at = r.second;
        }
        gap(at, w.len);
        dev->watch_list.erase(dev->watch_list.begin() + (long)i);
        dev->watches.fetch_sub(1, std::memory_order_relaxed);
        break;
    }
    return gaps;
}

}  // namespace emu
