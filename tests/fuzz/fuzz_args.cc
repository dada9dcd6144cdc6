/* Fuzz target: the args-handle API (aclrtKernelArgs*) and the kernel launch calls' size checks.
 *
 * Each input is a program of calls (one opcode byte each, then its operands, see Reader) on one
 * args handle of FuzzNop (fuzz_kernels.cc): Init / InitByUserMem / Append / AppendPlaceHolder /
 * GetPlaceHolderBuffer / ParaUpdate / Finalize, and the launches aclrtLaunchKernelWithConfig,
 * aclrtLaunchKernelWithHostArgs, aclrtLaunchKernel and aclrtLaunchKernelV2 with fuzzed sizes,
 * offsets and launch attributes. A model of acl_runtime.md §3.6/§3.7 predicts every return code
 * and the exact buffer layout; the target asserts both, writes every byte of each placeholder
 * buffer it is given (AddressSanitizer checks the bounds) and synchronises the stream after each
 * launch (the kernel runs, reading the copied argument blob).
 *
 * The harness only hands the runtime host buffers as large as the sizes it passes, except for
 * sizes no buffer could satisfy (above the argument buffer's free room or above 4 GiB), which the
 * runtime must refuse before touching memory. */
#include "fuzz_common.h"

#include <vector>

namespace {

constexpr size_t kMaxParams = 128;
constexpr size_t kSysBuf = 64 * 1024;
constexpr uint64_t kMaxBlob = UINT32_MAX;
constexpr size_t kDevBytes = 4096;

struct Setup {
    aclrtStream stream = nullptr;
    aclrtFuncHandle fn = nullptr;
    void* dev = nullptr;     /* device memory for aclrtLaunchKernel's argsData */
    size_t dev_size = 0;     /* its real extent (aclrtMalloc rounding: +32 bytes after rounding to 32) */
    size_t handle_size = 0;  /* aclrtKernelArgsGetHandleMemSize */
};

Setup& setup() {
    static Setup* s = [] {
        auto* x = new Setup();
        FUZZ_SETUP(aclInit(nullptr));
        FUZZ_SETUP(aclrtSetDevice(0));
        FUZZ_SETUP(aclrtCreateStream(&x->stream));
        aclrtBinaryLoadOption opt;
        memset(&opt, 0, sizeof opt);
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 1;
        aclrtBinaryLoadOptions opts = {&opt, 1};
        aclrtBinHandle bin = nullptr;
        std::string json = exe_dir() + "/fuzz_kernels.json";
        FUZZ_SETUP(aclrtBinaryLoadFromFile(json.c_str(), &opts, &bin));
        FUZZ_SETUP(aclrtBinaryGetFunction(bin, "FuzzNop", &x->fn));
        FUZZ_SETUP(aclrtMalloc(&x->dev, kDevBytes, ACL_MEM_MALLOC_HUGE_FIRST));
        x->dev_size = (kDevBytes + 31) / 32 * 32 + 32;
        memset(x->dev, 0, kDevBytes);
        FUZZ_SETUP(aclrtKernelArgsGetHandleMemSize(x->fn, &x->handle_size));
        return x;
    }();
    return *s;
}

enum State { BUILDING, PH_TAKEN, FINAL, UPDATED };

struct Param {
    aclrtParamHandle h;
    size_t offset, size;
    bool ph, taken;
};

/* The model of one args handle. */
struct Model {
    aclrtArgsHandle h = nullptr;
    uint8_t* base = nullptr; /* caller's buffer (InitByUserMem), or nullptr for the system buffer */
    size_t cap = 0, used = 0, ph_used = 0;
    State state = BUILDING;
    std::vector<Param> params;
    size_t room() const { return cap - used - ph_used; }
    Param* find(aclrtParamHandle p) {
        for (auto& x : params)
            if (x.h == p) return &x;
        return nullptr;
    }
};

#define EXPECT_RC(call, want)                                                                         \
    do {                                                                                              \
        int got_ = (int)(call);                                                                       \
        FUZZ_ASSERT(got_ == (int)(want), "%s returned %d, the model expects %d", #call, got_, (int)(want)); \
    } while (0)

/* A launch configuration from the input: up to 3 attributes, ids mostly 0..10. Returns the code
 * the runtime must give for it (0 if valid). */
struct Cfg {
    aclrtLaunchKernelAttr attrs[3];
    aclrtLaunchKernelCfg cfg;
    aclrtLaunchKernelCfg* ptr = nullptr;
    int expect = 0;
    void read(Reader& r) {
        uint8_t sel = r.u8();
        ptr = nullptr;
        expect = 0;
        if (sel % 4 == 0) return; /* no cfg */
        memset(attrs, 0, sizeof attrs);
        size_t n = sel % 4 - 1;   /* 0..2 attributes, +1 below for 3 */
        if (sel & 0x10) n++;
        bool null_attrs = (sel & 0x20) && n;
        bool s7 = false, s8 = false;
        for (size_t i = 0; i < n; i++) {
            uint8_t k = r.u8();
            int32_t id = (k & 0x80) ? (int32_t)r.u32() : (int32_t)(k % 11);
            memcpy(&attrs[i].id, &id, sizeof id);
            if (id == ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT) {
                attrs[i].value.timeout = (uint16_t)(1 + r.u8() % 30); /* seconds: never fires on a no-op */
            } else if (id == ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US) {
                uint64_t us = r.u64();
                if (us && us < 1000000) us += 1000000;                 /* at least 1 s, up to 2^64-1 us */
                attrs[i].value.timeoutUs.timeoutLow = (uint32_t)us;
                attrs[i].value.timeoutUs.timeoutHigh = (uint32_t)(us >> 32);
            } else {
                attrs[i].value.rsv[0] = r.u32();
            }
            if (!null_attrs && expect == 0 && !(id >= 1 && id <= 9)) expect = ACL_ERROR_RT_PARAM_INVALID;
            s7 |= id == ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
            s8 |= id == ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US;
        }
        cfg.attrs = null_attrs ? nullptr : attrs;
        cfg.numAttrs = n;
        ptr = &cfg;
        if (null_attrs) expect = ACL_ERROR_INVALID_PARAM;
        else if (!expect && s7 && s8) expect = ACL_ERROR_RT_PARAM_INVALID;
    }
};

void sync_stream(Setup& s) {
    int rc = aclrtSynchronizeStream(s.stream);
    FUZZ_ASSERT(rc == ACL_SUCCESS, "a no-op kernel failed: stream sync returned %d", rc);
}

/* A parameter handle chosen by the input: one of the model's, or a foreign / misaligned one. */
aclrtParamHandle pick_param(Reader& r, Model& m, std::vector<aclrtParamHandle>& seen) {
    uint8_t sel = r.u8();
    if (sel < 200 && !seen.empty()) return seen[sel % seen.size()];
    if (sel < 200 && !m.params.empty()) return m.params[sel % m.params.size()].h;
    switch (sel % 4) {
        case 0: return nullptr;
        case 1: return m.params.empty() ? (aclrtParamHandle)&m : (aclrtParamHandle)((char*)m.params[0].h + 1);
        case 2: return (aclrtParamHandle)(uintptr_t)r.u64();
        default: return m.params.empty() ? nullptr : (aclrtParamHandle)((char*)m.params.back().h + 4096);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Setup& s = setup();
    Reader r(data, size);
    Model m;
    void* hmem = aligned_alloc(64, (s.handle_size + 63) / 64 * 64);
    std::vector<uint8_t> umem;
    std::vector<aclrtParamHandle> seen; /* every handle returned so far, incl. earlier lists */
    int steps = 0;
    clear_error();
    while (!r.empty() && steps++ < 400) {
        uint8_t op = r.u8() % 11;
        switch (op) {
            case 0: { /* aclrtKernelArgsInit */
                aclrtArgsHandle h = nullptr;
                EXPECT_RC(aclrtKernelArgsInit(s.fn, &h), 0);
                m = Model();
                m.h = h;
                m.cap = kSysBuf;
                break;
            }
            case 1: { /* aclrtKernelArgsInitByUserMem */
                uint64_t n = r.size(70000);
                if (n == 0) {
                    uint8_t dummy[8];
                    EXPECT_RC(aclrtKernelArgsInitByUserMem(s.fn, hmem, dummy, 0), ACL_ERROR_INVALID_PARAM);
                    m = Model();
                } else if (n > kMaxBlob) {
                    uint8_t dummy[8];
                    EXPECT_RC(aclrtKernelArgsInitByUserMem(s.fn, hmem, dummy, n), ACL_ERROR_RT_PARAM_INVALID);
                    m = Model();
                } else if (n <= (1u << 20)) {
                    umem.assign(n, 0xEE);
                    EXPECT_RC(aclrtKernelArgsInitByUserMem(s.fn, hmem, umem.data(), n), 0);
                    m = Model();
                    m.h = hmem;
                    m.base = umem.data();
                    m.cap = n;
                }
                break;
            }
            case 2: { /* aclrtKernelArgsAppend */
                if (!m.h) break;
                uint64_t n = r.size(300);
                std::vector<uint8_t> buf(n <= (1u << 20) ? n : 16);
                for (size_t i = 0; i < buf.size(); i++) buf[i] = (uint8_t)(i * 7 + steps);
                int want = n == 0                        ? ACL_ERROR_INVALID_PARAM
                           : m.state != BUILDING         ? ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                           : m.params.size() >= kMaxParams ? ACL_ERROR_RT_PARAM_INVALID
                           : n > m.room()                ? ACL_ERROR_RT_PARAM_INVALID
                                                         : 0;
                if (!want && n > buf.size()) break; /* the model would accept: cannot happen (room <= 1 MiB) */
                aclrtParamHandle ph = nullptr;
                EXPECT_RC(aclrtKernelArgsAppend(m.h, buf.empty() ? (void*)&m : buf.data(), n, &ph), want);
                if (want) break;
                FUZZ_ASSERT(ph != nullptr, "Append succeeded without a parameter handle");
                if (m.base) FUZZ_ASSERT(memcmp(m.base + m.used, buf.data(), n) == 0, "argument bytes not packed at %zu", m.used);
                m.params.push_back({ph, m.used, n, false, false});
                seen.push_back(ph);
                m.used += n;
                break;
            }
            case 3: { /* aclrtKernelArgsAppendPlaceHolder */
                if (!m.h) break;
                int want = m.state != BUILDING            ? ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                           : m.params.size() >= kMaxParams ? ACL_ERROR_RT_PARAM_INVALID
                           : m.room() < 8                 ? ACL_ERROR_RT_PARAM_INVALID
                                                          : 0;
                aclrtParamHandle ph = nullptr;
                EXPECT_RC(aclrtKernelArgsAppendPlaceHolder(m.h, &ph), want);
                if (want) break;
                m.params.push_back({ph, m.used, 8, true, false});
                seen.push_back(ph);
                m.used += 8;
                break;
            }
            case 4: { /* aclrtKernelArgsGetPlaceHolderBuffer */
                if (!m.h) break;
                aclrtParamHandle ph = pick_param(r, m, seen);
                uint64_t n = r.size(3000);
                Param* p = m.find(ph);
                int want = n == 0                                   ? ACL_ERROR_INVALID_PARAM
                           : (m.state == FINAL || m.state == UPDATED) ? ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                           : !p || !p->ph || p->taken || n > m.room() ? ACL_ERROR_RT_PARAM_INVALID
                                                                      : 0;
                void* buf = nullptr;
                EXPECT_RC(aclrtKernelArgsGetPlaceHolderBuffer(m.h, ph, n, &buf), want);
                if (want) break;
                m.ph_used += n;
                p->taken = true;
                m.state = PH_TAKEN;
                if (m.base) {
                    FUZZ_ASSERT(buf == m.base + m.cap - m.ph_used, "placeholder buffer %p, expected %p", buf,
                                (void*)(m.base + m.cap - m.ph_used));
                }
                memset(buf, 0x5A, n); /* every byte must be ours (ASan) */
                break;
            }
            case 5: { /* aclrtKernelArgsParaUpdate */
                if (!m.h) break;
                aclrtParamHandle ph = pick_param(r, m, seen);
                Param* p = m.find(ph);
                uint8_t same = r.u8();
                uint64_t n = (p && same < 200) ? p->size : r.size(300);
                std::vector<uint8_t> buf(n <= (1u << 20) ? n : 16, (uint8_t)same);
                int want = !p || p->ph || n != p->size ? ACL_ERROR_RT_PARAM_INVALID : 0;
                if (!want && n > buf.size()) break;
                EXPECT_RC(aclrtKernelArgsParaUpdate(m.h, ph, buf.empty() ? (void*)&m : buf.data(), n), want);
                if (want) break;
                if (m.base) FUZZ_ASSERT(memcmp(m.base + p->offset, buf.data(), n) == 0, "update not written in place");
                if (m.state == FINAL) m.state = UPDATED;
                break;
            }
            case 6: { /* aclrtKernelArgsFinalize */
                if (!m.h) break;
                int want = 0;
                for (auto& p : m.params)
                    if (p.ph && !p.taken) want = ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
                EXPECT_RC(aclrtKernelArgsFinalize(m.h), want);
                if (!want) m.state = FINAL;
                break;
            }
            case 7: { /* aclrtLaunchKernelWithConfig */
                if (!m.h) break;
                uint32_t blocks = r.u8() % 3;
                Cfg c;
                c.read(r);
                int want = blocks == 0               ? ACL_ERROR_INVALID_PARAM
                           : c.expect                 ? c.expect
                           : m.state != FINAL         ? ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                                                      : 0;
                EXPECT_RC(aclrtLaunchKernelWithConfig(s.fn, blocks, s.stream, c.ptr, m.h, nullptr), want);
                if (!want) sync_stream(s);
                break;
            }
            case 8: { /* aclrtLaunchKernelWithHostArgs */
                uint32_t blocks = 1 + r.u8() % 2;
                uint64_t n = r.size(512);
                uint64_t k = r.size(5);
                std::vector<uint8_t> blob(n <= 4096 ? n : 16, 0x11);
                std::vector<aclrtPlaceHolderInfo> phs(k <= kMaxParams ? k : 1);
                bool bad_ph = false;
                for (auto& p : phs) {
                    uint8_t sel = r.u8();
                    p.addrOffset = sel & 0x80 ? r.u32() : (uint32_t)(r.u8() % (n < 591 ? n + 9 : 600));
                    p.dataOffset = sel & 0x40 ? r.u32() : (uint32_t)(r.u8() % (n < 598 ? n + 2 : 600));
                    if ((uint64_t)p.addrOffset + 8 > n || p.dataOffset >= n) bad_ph = true;
                }
                int want = n == 0            ? ACL_ERROR_INVALID_PARAM
                           : n > kMaxBlob    ? ACL_ERROR_RT_PARAM_INVALID
                           : k > kMaxParams  ? ACL_ERROR_RT_PARAM_INVALID
                           : bad_ph          ? ACL_ERROR_RT_PARAM_INVALID
                                             : 0;
                if (n > blob.size() && n <= kMaxBlob) break; /* no such buffer here */
                EXPECT_RC(aclrtLaunchKernelWithHostArgs(s.fn, blocks, s.stream, nullptr, blob.empty() ? (void*)&m : blob.data(),
                                                        n, k ? phs.data() : nullptr, k),
                          want);
                if (!want) sync_stream(s);
                break;
            }
            case 9:
            case 10: { /* aclrtLaunchKernel / aclrtLaunchKernelV2: device-memory arguments */
                uint64_t off = r.size(kDevBytes + 64);
                uint64_t n = r.size(kDevBytes + 64);
                Cfg c;
                if (op == 10) c.read(r);
                const void* p = (const void*)((uintptr_t)s.dev + off);
                bool inside = off < s.dev_size && n <= s.dev_size - off;
                int want = c.expect             ? c.expect
                           : n > kMaxBlob       ? ACL_ERROR_RT_PARAM_INVALID
                           : n && !inside       ? ACL_ERROR_RT_PARAM_INVALID
                                                : 0;
                if (!p) break;
                int got = op == 9 ? aclrtLaunchKernel(s.fn, 1, p, n, s.stream)
                                  : aclrtLaunchKernelV2(s.fn, 1, p, n, c.ptr, s.stream);
                FUZZ_ASSERT(got == want, "aclrtLaunchKernel%s(off %llu, size %llu) returned %d, the model expects %d",
                            op == 9 ? "" : "V2", (unsigned long long)off, (unsigned long long)n, got, want);
                if (!want) sync_stream(s);
                break;
            }
        }
    }
    sync_stream(s);
    free(hmem);
    return 0;
}
