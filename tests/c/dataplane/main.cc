/* Host side of the data-plane test operator (tests/c/dataplane): ranks as std::threads of one
 * process (CANN testcase style) or as processes (root info through a file, or under mpirun).
 *
 * Usage:
 *   dataplane_main <json> threads <nranks> [scenarios]
 *   dataplane_main <json> proc <rank> <nranks> <rootfile> [scenarios]
 *   dataplane_main <json> mpi <rootfile> [scenarios]          (rank/size from OMPI_COMM_WORLD_* / PMIX_RANK)
 * scenarios: comma-separated, default "host,gates,local,reduce,write,notify,batch,xfer,aclnotify,oob".
 * Special last scenarios (they abort the communicator): timeout_thread, timeout_channel; "die"
 * (process mode): the last rank prints READY and sleeps until killed, the others wait on it.
 * Every rank checks its data byte-exactly against a host reference; prints "OK rank <r>" and exits 0. */
#include <acl/acl_rt.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>
#include <hcomm_kit/emu_ext.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

const char* g_json = nullptr;
std::mutex g_print_m;
thread_local aclrtBinHandle g_bin = nullptr;

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
    std::lock_guard<std::mutex> g(g_print_m);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

#define FAILF(...)                 \
    do {                           \
        say(__VA_ARGS__);          \
        return 1;                  \
    } while (0)
#define ACLCHECK(x)                                                                                          \
    do {                                                                                                     \
        int r_ = (int)(x);                                                                                   \
        if (r_ != 0) {                                                                                       \
            const char* m_ = aclGetRecentErrMsg();                                                           \
            FAILF("rank %u: %s:%d %s -> %d (%s)", R.rank, __FILE__, __LINE__, #x, r_, m_ ? m_ : "no message"); \
        }                                                                                                    \
    } while (0)

/* ---------------------------------------------------------------- deterministic data */

uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
uint64_t seed_of(uint32_t rank, char what, uint64_t k = 0, uint64_t role = 0) {
    return mix(mix(mix((uint64_t)rank * 1000003 + (uint64_t)(unsigned char)what) + k) + role);
}
std::vector<uint8_t> bytes(uint64_t seed, uint64_t n) {
    std::vector<uint8_t> v(n);
    for (uint64_t i = 0; i < n; i++) v[i] = (uint8_t)(mix(seed + i / 8) >> (8 * (i % 8)));
    return v;
}

size_t dsize(int dt) {
    static const size_t s[12] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
    return dt >= 0 && dt < 12 ? s[dt] : 0;
}
const char* dname(int dt) {
    static const char* n[12] = {"int8", "int16", "int32", "fp16", "fp32", "int64", "uint64", "uint8", "uint16", "uint32",
                                "fp64", "bf16"};
    return dt >= 0 && dt < 12 ? n[dt] : "other";
}

/* Independent binary16 / bfloat16 conversions (exact widening; narrowing rounds to nearest even). */
double h2d(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? std::ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}
double b2d(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Rounds |x| to a binary format with `p` significand bits and minimum normal exponent `emin`
 * (RNE), returns the encoding; exp_bits/bias describe the format. */
uint16_t narrow(double x, int p, int emin, int exp_bits) {
    uint16_t sign = std::signbit(x) ? (uint16_t)(1u << 15) : 0;
    double a = std::fabs(x);
    int bias = (1 << (exp_bits - 1)) - 1, emax = bias;
    uint16_t inf = (uint16_t)(((1u << exp_bits) - 1) << (15 - exp_bits));
    if (std::isinf(a)) return sign | inf;
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);
    e -= 1;  /* a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double q = std::ldexp(1.0, e - (p - 1));
    double r = std::nearbyint(a / q) * q; /* default rounding mode: to nearest even */
    if (r >= std::ldexp(2.0, emax)) return sign | inf;
    if (r < std::ldexp(1.0, emin)) return sign | (uint16_t)(r / std::ldexp(1.0, emin - (p - 1)));
    std::frexp(r, &e);
    e -= 1;
    uint16_t mant = (uint16_t)(r / std::ldexp(1.0, e - (p - 1)) - std::ldexp(1.0, p - 1));
    return sign | (uint16_t)((e + bias) << (p - 1)) | mant;
}
uint16_t d2h(double x) { return narrow(x, 11, -14, 5); }
uint16_t f2b(float x) {
    if (std::isnan(x)) return 0x7fc0;
    return narrow(x, 8, -126, 8);
}

/* Values for one reduction input. Integers stay small for sum/prod (no overflow: the wrap-around
 * of the emulator is not part of the spec); floats are arbitrary finite bit patterns, no -0. */
std::vector<uint8_t> typed(uint64_t seed, int dt, int op, uint64_t count) {
    std::vector<uint8_t> v(count * dsize(dt));
    bool arith = op == 0 || op == 1;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t x = mix(seed * 7919 + i);
        uint8_t* p = v.data() + i * dsize(dt);
        auto rng = [&](int64_t lo, int64_t hi) { return lo + (int64_t)(x % (uint64_t)(hi - lo + 1)); };
        switch (dt) {
            case 0: { int8_t y = arith ? (int8_t)rng(-11, 11) : (int8_t)x; memcpy(p, &y, 1); break; }
            case 1: { int16_t y = arith ? (int16_t)rng(-181, 181) : (int16_t)x; memcpy(p, &y, 2); break; }
            case 2: { int32_t y = arith ? (int32_t)rng(-46340, 46340) : (int32_t)x; memcpy(p, &y, 4); break; }
            case 5: { int64_t y = arith ? rng(-3000000000ll, 3000000000ll) : (int64_t)x; memcpy(p, &y, 8); break; }
            case 7: { uint8_t y = arith ? (uint8_t)rng(0, 15) : (uint8_t)x; memcpy(p, &y, 1); break; }
            case 8: { uint16_t y = arith ? (uint16_t)rng(0, 255) : (uint16_t)x; memcpy(p, &y, 2); break; }
            case 9: { uint32_t y = arith ? (uint32_t)rng(0, 65535) : (uint32_t)x; memcpy(p, &y, 4); break; }
            case 6: { uint64_t y = arith ? (uint64_t)rng(0, 4000000000ll) : x; memcpy(p, &y, 8); break; }
            case 3: case 11: {
                uint16_t y = (uint16_t)x;
                uint16_t expmask = dt == 3 ? 0x7c00 : 0x7f80;
                if ((y & expmask) == expmask) y ^= (uint16_t)(dt == 3 ? 0x4000 : 0x4000);
                if (y == 0x8000) y = 0;
                memcpy(p, &y, 2);
                break;
            }
            case 4: {
                uint32_t y = (uint32_t)x;
                if ((y & 0x7f800000u) == 0x7f800000u) y ^= 0x40000000u;
                if (y == 0x80000000u) y = 0;
                memcpy(p, &y, 4);
                break;
            }
            case 10: {
                uint64_t y = x;
                if ((y & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) y ^= 0x4000000000000000ull;
                if (y == 0x8000000000000000ull) y = 0;
                memcpy(p, &y, 8);
                break;
            }
        }
    }
    return v;
}

template <class T>
T red(T a, T b, int op) {
    switch (op) {
        case 0: return (T)(a + b);
        case 1: return (T)(a * b);
        case 2: return a < b ? b : a;
        default: return b < a ? b : a;
    }
}
template <class T>
void red_n(uint8_t* d, const uint8_t* s, uint64_t n, int op) {
    for (uint64_t i = 0; i < n; i++) {
        T a, b;
        memcpy(&a, d + i * sizeof(T), sizeof(T));
        memcpy(&b, s + i * sizeof(T), sizeof(T));
        T c = red(a, b, op);
        memcpy(d + i * sizeof(T), &c, sizeof(T));
    }
}
/* Host reference: dst = dst op src, elementwise. */
std::vector<uint8_t> reference(std::vector<uint8_t> d, const std::vector<uint8_t>& s, int dt, int op) {
    uint64_t n = d.size() / dsize(dt);
    switch (dt) {
        case 0: red_n<int8_t>(d.data(), s.data(), n, op); break;
        case 1: red_n<int16_t>(d.data(), s.data(), n, op); break;
        case 2: red_n<int32_t>(d.data(), s.data(), n, op); break;
        case 5: red_n<int64_t>(d.data(), s.data(), n, op); break;
        case 6: red_n<uint64_t>(d.data(), s.data(), n, op); break;
        case 7: red_n<uint8_t>(d.data(), s.data(), n, op); break;
        case 8: red_n<uint16_t>(d.data(), s.data(), n, op); break;
        case 9: red_n<uint32_t>(d.data(), s.data(), n, op); break;
        case 4: red_n<float>(d.data(), s.data(), n, op); break;
        case 10: red_n<double>(d.data(), s.data(), n, op); break;
        case 3: case 11:
            for (uint64_t i = 0; i < n; i++) {
                uint16_t a, b;
                memcpy(&a, &d[i * 2], 2);
                memcpy(&b, &s[i * 2], 2);
                float fa = (float)(dt == 3 ? h2d(a) : b2d(a)), fb = (float)(dt == 3 ? h2d(b) : b2d(b));
                float c = red(fa, fb, op); /* computed in float */
                uint16_t h = dt == 3 ? d2h((double)c) : f2b(c);
                memcpy(&d[i * 2], &h, 2);
            }
            break;
    }
    return d;
}

/* ---------------------------------------------------------------- products and expectations */

enum Prod { A2 = 0, A3 = 1, A5 = 2 };
constexpr int NZ = -1000, ANY = -1001; /* expected: any non-zero / anything */
const char* prod_name(int p) { return p == A2 ? "Ascend910B" : p == A3 ? "Ascend910_93" : "Ascend950"; }

bool reduce_allowed(int p, int dt, int op) {
    if (p == A5) return dt >= 0 && dt <= 11 && op >= 0 && op <= 3;
    bool dok = dt == 4 || dt == 3 || dt == 0 || dt == 1 || dt == 2 || dt == 11;
    return dok && (op == 0 || op == 2 || op == 3);
}

struct Expect { int a2, a3, a5; };
const std::map<std::string, Expect>& gate_table() {
    static const std::map<std::string, Expect> t = {
        /* NBI / host-only variants: NOT_SUPPORT on the AICPU path */
        {"nbi.WriteNbiOnThread", {5, 5, 5}}, {"nbi.WriteNbi", {5, 5, 5}}, {"nbi.WriteWithNotifyNbiOnThread", {5, 5, 5}},
        {"nbi.WriteWithNotifyNbi", {5, 5, 5}}, {"nbi.ReadNbiOnThread", {5, 5, 5}}, {"nbi.ReadNbi", {5, 5, 5}},
        {"nbi.ChannelNotifyRecord", {5, 5, 5}}, {"nbi.ChannelNotifyWait", {5, 5, 5}}, {"nbi.ChannelFence", {5, 5, 5}},
        {"nbi.FenceOnThread", {5, 5, 5}},
        /* 950-only task cache (lookups miss; Execute after a miss: no cached tasks) */
        {"cache.Lookup", {5, 5, 0}}, {"cache.Start", {5, 5, 0}}, {"cache.End", {5, 5, 0}}, {"cache.Execute", {5, 5, ANY}},
        {"cache.Clear", {5, 5, 0}}, {"cache.Lookup_null_tag", {5, 5, 2}},
        /* product gates */
        {"WriteReduceWithNotify", {5, 5, 0}}, {"WriteWithNotify.accepted", {0, 0, 0}},
        {"ChannelFence.main", {5, 5, 0}}, {"ChannelFence.roce", {5, 5, ANY}},
        {"ChannelDrain.main", {5, 5, 5}}, {"ChannelDrain.roce", {0, 0, 5}},
        {"BatchTransfer.main.write", {5, 5, 0}}, {"BatchTransfer.roce.write_read", {0, 0, 0}},
        {"BatchTransfer.roce.write_reduce", {5, 5, 0}}, {"BatchTransfer.null", {2, 2, 2}},
        {"BatchTransfer.zero", {1, 1, 1}}, {"BatchTransfer.bad_type", {5, 5, 1}},
        {"AclrtNotifyRecord", {0, 0, 5}}, {"AclrtNotifyWait", {0, 0, 5}}, {"AclrtNotifyRecord.bad_id", {1, 1, 5}},
        {"AcquireComm.null", {2, 2, 2}}, {"AcquireComm.unknown", {NZ, NZ, NZ}}, {"ReleaseComm.null", {2, 2, 2}},
        {"SetNotifyWaitTimeOut.nan", {1, 1, 1}}, {"SetNotifyWaitTimeOut.neg", {1, 1, 1}},
        {"SetNotifyWaitTimeOut.huge", {1, 1, 1}}, {"SetNotifyWaitTimeOut.ok", {0, 0, 0}},
        {"ThreadResAcquireTimeOut.nan", {1, 1, 1}}, {"ThreadResAcquireTimeOut.neg", {1, 1, 1}},
        {"ThreadResAcquireTimeOut.huge", {1, 1, 1}}, {"ThreadResAcquireTimeOut.ok", {0, 0, 0}},
        /* argument checks */
        {"LocalCopy.null_dst", {2, 2, 2}}, {"LocalCopy.null_src", {2, 2, 2}}, {"LocalCopy.len0", {1, 1, 1}},
        {"LocalCopy.thread0", {2, 2, 2}}, {"LocalCopy.bad_thread", {NZ, NZ, NZ}}, {"LocalCopy.host_view", {NZ, NZ, NZ}},
        {"LocalCopy.host_memory", {NZ, NZ, NZ}}, {"LocalReduce.count0", {1, 1, 1}}, {"LocalReduce.null_src", {2, 2, 2}},
        {"LocalReduce.mxfp8", {1, 1, 1}}, {"ThreadNotifyRecord.bad_idx", {1, 1, 1}}, {"ThreadNotifyRecord.dst0", {2, 2, 2}},
        {"ThreadNotifyWait.bad_idx", {1, 1, 1}}, {"ThreadNotifyWaitDefault.bad_idx", {1, 1, 1}},
        {"ChannelNotifyRecord.bad_idx", {1, 1, 1}}, {"ChannelNotifyRecord.chan0", {2, 2, 2}},
        {"ChannelNotifyWait.bad_idx", {1, 1, 1}}, {"ChannelNotifyWaitDefault.bad_idx", {1, 1, 1}},
        {"Write.chan0", {2, 2, 2}}, {"Write.bad_chan", {NZ, NZ, NZ}}, {"Write.null_src", {2, 2, 2}},
        {"Write.len0", {1, 1, 1}}, {"Write.local_dst", {NZ, NZ, NZ}}, {"Read.null_dst", {2, 2, 2}},
        {"WriteWithNotify.bad_idx", {1, 1, 1}}, {"WriteReduce.count0", {1, 1, 1}}, {"ReadReduce.op4", {1, 1, 1}},
        /* DpBatch */
        {"eager.LocalCopy", {5, 5, 0}}, {"eager.ThreadNotifyRecord", {NZ, NZ, 0}}, {"batch.tmp_record", {0, 0, 0}}, {"batch.end_without_start", {NZ, NZ, NZ}}, {"batch.start_null", {0, 0, 0}},
        {"batch.tmp_copy", {0, 0, 0}}, {"batch.end_null", {0, 0, 0}}, {"batch.start_empty", {0, 0, 0}},
        {"batch.end_empty", {0, 0, 0}}, {"batch.start_twice", {NZ, NZ, NZ}}, {"batch.end_wrong_tag", {NZ, NZ, NZ}},
        /* DpOob */
        {"oob.write_tail", {1, 1, 1}}, {"oob.write_before", {1, 1, 1}}, {"oob.read_tail", {1, 1, 1}},
        {"oob.write_reduce_tail", {1, 1, 1}},
        /* DpXfer (950) */
        {"BatchTransfer.partly_invalid", {NZ, NZ, 1}}, {"oob.local_tail", {1, 1, 1}}, {"oob.in_bounds", {0, 0, 0}},
    };
    return t;
}

/* ---------------------------------------------------------------- one rank */

struct Rank {
    uint32_t rank = 0, n = 0;
    int prod = A2;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    AlgResourceCtx host{};
    OpParam param{};
    void *in = nullptr, *in2 = nullptr, *out = nullptr, *scratch = nullptr;
    Results* res = nullptr;
    aclrtNotify acl[3] = {nullptr, nullptr, nullptr};
    char* buf = nullptr; /* local HCCL buffer */
    uint64_t bufsize = 0;
    std::string scenario;
    uint32_t next() const { return (rank + 1) % n; }
    uint32_t prev() const { return (rank + n - 1) % n; }
};

int put(Rank& R, void* dst, const std::vector<uint8_t>& v) {
    ACLCHECK(aclrtMemcpy(dst, v.size(), v.data(), v.size(), ACL_MEMCPY_HOST_TO_DEVICE));
    return 0;
}
int get(Rank& R, std::vector<uint8_t>* v, const void* src, uint64_t n) {
    v->resize(n);
    ACLCHECK(aclrtMemcpy(v->data(), n, src, n, ACL_MEMCPY_DEVICE_TO_HOST));
    return 0;
}
char* P(void* p, uint64_t off) { return static_cast<char*>(p) + off; }

/* Compares device memory with the expected bytes; reports the first difference. */
int expect_mem(Rank& R, const char* what, const void* dev, const std::vector<uint8_t>& want) {
    std::vector<uint8_t> got;
    if (get(R, &got, dev, want.size())) return 1;
    for (size_t i = 0; i < want.size(); i++)
        if (got[i] != want[i])
            FAILF("rank %u: %s: %s: byte %zu of %zu is 0x%02x, expected 0x%02x", R.rank, R.scenario.c_str(), what, i,
                  want.size(), got[i], want[i]);
    return 0;
}

int barrier(Rank& R) {
    ACLCHECK(HcclBarrier(R.comm, R.stream));
    ACLCHECK(aclrtSynchronizeStream(R.stream));
    return 0;
}

int clear_results(Rank& R) {
    ACLCHECK(aclrtMemset(R.res, sizeof(Results), 0, sizeof(Results)));
    return 0;
}

enum Handshake { THREAD_NOTIFY, ACL_NOTIFY, NO_HANDSHAKE };
/* Launches kernel `fn` with the thread-notify (or ACL-notify, or no) handshake; does not synchronise. */
int launch(Rank& R, const char* fn, Handshake hs = THREAD_NOTIFY) {
    if (!g_bin) {
        aclrtBinaryLoadOptions opts = {};
        aclrtBinaryLoadOption opt;
        opts.numOpt = 1;
        opts.options = &opt;
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 0; /* .so found on HCOMM_KIT_KERNEL_PATH, like the device package */
        ACLCHECK(aclrtBinaryLoadFromFile(g_json, &opts, &g_bin));
    }
    OpParam param = R.param;
    snprintf(param.tag, sizeof param.tag, "dp_%s", R.scenario.c_str());
    param.aclHandshake = hs == ACL_NOTIFY ? 1 : 0;
    param.noHandshake = hs == NO_HANDSHAKE ? 1 : 0;
    if (hs == ACL_NOTIFY) ACLCHECK(aclrtRecordNotify(R.acl[0], R.stream));
    else if (hs == THREAD_NOTIFY) ACLCHECK(HcommThreadNotifyRecordOnThread(param.cpuThread, param.aicpuThreadOnCpu, 0));
    aclrtFuncHandle fh;
    ACLCHECK(aclrtBinaryGetFunction(g_bin, fn, &fh));
    aclrtArgsHandle ah;
    aclrtParamHandle ph;
    ACLCHECK(aclrtKernelArgsInit(fh, &ah));
    ACLCHECK(aclrtKernelArgsAppend(ah, &param, sizeof(OpParam), &ph));
    ACLCHECK(aclrtKernelArgsFinalize(ah));
    aclrtLaunchKernelAttr attr;
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = 27 * 68;
    aclrtLaunchKernelCfg cfg;
    cfg.numAttrs = 1;
    cfg.attrs = &attr;
    ACLCHECK(aclrtLaunchKernelWithConfig(fh, 1, R.stream, &cfg, ah, nullptr));
    if (hs == ACL_NOTIFY) ACLCHECK(aclrtWaitAndResetNotify(R.acl[1], R.stream, DP_WAIT_TIMEOUT));
    else if (hs == THREAD_NOTIFY) ACLCHECK(HcommThreadNotifyWaitOnThread(param.cpuThread, 0, DP_WAIT_TIMEOUT));
    return 0;
}

/* launch + synchronise, expecting success */
int run_ok(Rank& R, const char* fn, Handshake hs = THREAD_NOTIFY) {
    if (launch(R, fn, hs)) return 1;
    ACLCHECK(aclrtSynchronizeStream(R.stream));
    return 0;
}

int check_gates(Rank& R, uint32_t expected_count) {
    Results res;
    ACLCHECK(aclrtMemcpy(&res, sizeof res, R.res, sizeof res, ACL_MEMCPY_DEVICE_TO_HOST));
    if (res.ngates != expected_count)
        FAILF("rank %u: %s: kernel recorded %u return codes, expected %u", R.rank, R.scenario.c_str(), res.ngates,
              expected_count);
    const auto& t = gate_table();
    int bad = 0;
    for (uint32_t i = 0; i < res.ngates; i++) {
        auto it = t.find(res.gates[i].name);
        if (it == t.end()) FAILF("rank %u: %s: no expectation for '%s'", R.rank, R.scenario.c_str(), res.gates[i].name);
        int want = R.prod == A2 ? it->second.a2 : R.prod == A3 ? it->second.a3 : it->second.a5;
        int got = res.gates[i].code;
        bool ok = want == ANY || (want == NZ ? got != 0 : got == want);
        if (!ok) {
            say("rank %u: %s: %s on %s returned %d, expected %s", R.rank, R.scenario.c_str(), res.gates[i].name,
                prod_name(R.prod), got, want == NZ ? "non-zero" : std::to_string(want).c_str());
            bad++;
        }
    }
    return bad ? 1 : 0;
}

Results read_results(Rank& R) {
    Results res;
    memset(&res, 0, sizeof res);
    aclrtMemcpy(&res, sizeof res, R.res, sizeof res, ACL_MEMCPY_DEVICE_TO_HOST);
    return res;
}

/* ---------------------------------------------------------------- scenarios */

/* Host-side calls: CPU_TS thread data plane on the user stream, host-only variants, device-only calls. */
int sc_host(Rank& R) {
    std::vector<uint8_t> a = bytes(seed_of(R.rank, 'h'), LEN);
    if (put(R, R.in, a) || put(R, R.out, std::vector<uint8_t>(LEN, 0))) return 1;
    ThreadHandle cpu = R.param.cpuThread;
    ACLCHECK(HcommLocalCopyOnThread(cpu, R.out, R.in, LEN)); /* stream-bound thread: runs in stream order */
    ACLCHECK(aclrtSynchronizeStream(R.stream));
    if (expect_mem(R, "LocalCopy on the CPU_TS thread", R.out, a)) return 1;
    struct { const char* name; int rc; int want; } calls[] = {
        {"HcommWriteNbi", HcommWriteNbi(R.host.channels[R.next()].handle, R.buf, R.in, 8), 5},
        {"HcommReadNbi", HcommReadNbi(R.host.channels[R.next()].handle, R.out, R.buf, 8), 5},
        {"HcommChannelNotifyRecord", HcommChannelNotifyRecord(R.host.channels[R.next()].handle, 0), 5},
        {"HcommChannelNotifyWait", HcommChannelNotifyWait(R.host.channels[R.next()].handle, 0, 1), 5},
        {"HcommChannelFence", HcommChannelFence(R.host.channels[R.next()].handle), 5},
        {"HcommFenceOnThread", HcommFenceOnThread(cpu), 5},
        {"HcommAcquireComm on the host", HcommAcquireComm(R.param.commName), 5},
        {"HcommReleaseComm on the host", HcommReleaseComm(R.param.commName), 5},
        {"AICPU handle used on the host", HcommLocalCopyOnThread(R.host.threads[1], R.out, R.in, 8), NZ},
    };
    for (auto& c : calls)
        if (c.want == NZ ? c.rc == 0 : c.rc != c.want)
            FAILF("rank %u: host: %s returned %d, expected %d", R.rank, c.name, c.rc, c.want);
    return 0;
}

/* The notify checker off while at least one rank (thread) of this process is inside the scope:
 * its mode is process-wide, so the last rank out restores it (not the first, whose restore would
 * turn it on under the others' kernels). */
struct CheckOff {
    static std::mutex& m() {
        static std::mutex mu;
        return mu;
    }
    static int& inside() {
        static int n = 0;
        return n;
    }
    static int32_t& saved() {
        static int32_t v = 1;
        return v;
    }
    CheckOff() {
        std::lock_guard<std::mutex> g(m());
        if (inside()++ == 0) saved() = HcommKitSetCheck(0);
    }
    ~CheckOff() {
        std::lock_guard<std::mutex> g(m());
        if (--inside() == 0) HcommKitSetCheck(saved());
    }
    CheckOff(const CheckOff&) = delete;
    CheckOff& operator=(const CheckOff&) = delete;
};

int sc_gates(Rank& R) {
    /* Return codes only: the accepted calls move meaningless bytes (reads of bytes nobody wrote),
     * which the notify checker would rightly report, so it is off here. */
    int rc;
    {
        CheckOff off;
        rc = clear_results(R) || run_ok(R, "DpGates");
    }
    if (rc) return 1;
    if (check_gates(R, 69)) return 1;
    Results res = read_results(R);
    if (R.prod == A5 && res.flags[10] != 0) FAILF("rank %u: gates: HcommAicpuTsTaskCacheLookup reported a hit", R.rank);
    return 0;
}

int sc_local(Rank& R) {
    std::vector<uint8_t> a = bytes(seed_of(R.rank, 'a'), LOCAL_LEN);
    uint64_t nf = LOCAL_LEN / 4;
    std::vector<uint8_t> fd = typed(seed_of(R.rank, 'f', 0, 0), 4, 0, nf), fs = typed(seed_of(R.rank, 'f', 0, 1), 4, 0, nf);
    std::vector<uint8_t> id = typed(seed_of(R.rank, 'i', 0, 0), 0, 3, 1001), is = typed(seed_of(R.rank, 'i', 0, 1), 0, 3, 1001);
    std::vector<uint8_t> s2(fs.begin(), fs.end());
    s2.resize(OUT3_OFF);
    s2.insert(s2.end(), is.begin(), is.end());
    std::vector<uint8_t> d2(fd.begin(), fd.end());
    d2.resize(OUT3_OFF - OUT2_OFF);
    d2.insert(d2.end(), id.begin(), id.end());
    if (put(R, R.in, a) || put(R, R.in2, s2) || put(R, R.out, std::vector<uint8_t>(OUT2_OFF, 0)) ||
        put(R, P(R.out, OUT2_OFF), d2) || put(R, R.scratch, std::vector<uint8_t>(LOCAL_LEN, 0)))
        return 1;
    if (barrier(R) || run_ok(R, "DpLocal")) return 1;
    if (expect_mem(R, "LocalCopy chain through scratch", R.out, a)) return 1;
    if (expect_mem(R, "LocalReduce fp32 sum", P(R.out, OUT2_OFF), reference(fd, fs, 4, 0))) return 1;
    return expect_mem(R, "LocalReduce int8 min", P(R.out, OUT3_OFF), reference(id, is, 0, 3));
}

int sc_reduce(Rank& R) {
    /* prefill: local dst/src, write-reduce src (in2) + our WR region (dst for prev), read-reduce dst (scratch)
     * + our RR region (src for next) */
    std::vector<uint8_t> ld(48 * RSTRIDE), ls(48 * RSTRIDE), ws(48 * RSTRIDE), wd(48 * RSTRIDE), rd(48 * RSTRIDE),
        rs(48 * RSTRIDE);
    for (int k = 0; k < 48; k++) {
        int dt = k / 4, op = k % 4;
        auto cp = [&](std::vector<uint8_t>& v, const std::vector<uint8_t>& x) { memcpy(&v[k * RSTRIDE], x.data(), x.size()); };
        cp(ld, typed(seed_of(R.rank, 'l', k, 0), dt, op, RCOUNT));
        cp(ls, typed(seed_of(R.rank, 'l', k, 1), dt, op, RCOUNT));
        cp(ws, typed(seed_of(R.rank, 'w', k, 1), dt, op, RCOUNT));
        cp(wd, typed(seed_of(R.rank, 'w', k, 0), dt, op, RCOUNT));
        cp(rd, typed(seed_of(R.rank, 'r', k, 0), dt, op, RCOUNT));
        cp(rs, typed(seed_of(R.rank, 'r', k, 1), dt, op, RCOUNT));
    }
    if (put(R, R.out, ld) || put(R, R.in, ls) || put(R, R.in2, ws) || put(R, R.buf + WR_OFF, wd) || put(R, R.scratch, rd) ||
        put(R, R.buf + RR_OFF, rs) || clear_results(R))
        return 1;
    if (barrier(R) || run_ok(R, "DpReduce")) return 1;
    Results res = read_results(R);
    static const char* kinds[3] = {"HcommLocalReduceOnThread", "HcommWriteReduceOnThread", "HcommReadReduceOnThread"};
    int bad = 0;
    for (int kind = 0; kind < 3; kind++)
        for (uint32_t di = 0; di < DP_NDT; di++)
            for (uint32_t oi = 0; oi < DP_NOP; oi++) {
                int dt = DP_DTYPES[di], op = DP_OPS[oi];
                int want = reduce_allowed(R.prod, dt, op) ? 0 : 1;
                if (res.rcodes[kind][di][oi] != want) {
                    say("rank %u: reduce: %s(dtype %d, op %d) on %s returned %d, expected %d", R.rank, kinds[kind], dt, op,
                        prod_name(R.prod), res.rcodes[kind][di][oi], want);
                    bad++;
                }
            }
    if (bad) return 1;
    std::vector<uint8_t> got_l, got_w, got_r;
    if (get(R, &got_l, R.out, ld.size()) || get(R, &got_w, R.buf + WR_OFF, wd.size()) || get(R, &got_r, R.scratch, rd.size()))
        return 1;
    for (int k = 0; k < 48; k++) {
        int dt = k / 4, op = k % 4;
        bool ok = reduce_allowed(R.prod, dt, op);
        uint64_t nb = RCOUNT * dsize(dt);
        auto slice = [&](const std::vector<uint8_t>& v) { return std::vector<uint8_t>(&v[k * RSTRIDE], &v[k * RSTRIDE] + nb); };
        std::vector<uint8_t> want[3] = {
            ok ? reference(slice(ld), slice(ls), dt, op) : slice(ld),
            ok ? reference(slice(wd), typed(seed_of(R.prev(), 'w', k, 1), dt, op, RCOUNT), dt, op) : slice(wd),
            ok ? reference(slice(rd), typed(seed_of(R.prev(), 'r', k, 1), dt, op, RCOUNT), dt, op) : slice(rd)};
        const std::vector<uint8_t>* got[3] = {&got_l, &got_w, &got_r};
        for (int kind = 0; kind < 3; kind++)
            for (uint64_t i = 0; i < nb; i++)
                if ((*got[kind])[k * RSTRIDE + i] != want[kind][i]) {
                    uint64_t e = i / dsize(dt);
                    FAILF("rank %u: reduce: %s %s %s: element %llu differs (byte %llu: 0x%02x, expected 0x%02x)%s", R.rank,
                          kinds[kind], dname(dt), op == 0 ? "sum" : op == 1 ? "prod" : op == 2 ? "max" : "min",
                          (unsigned long long)e, (unsigned long long)i, (*got[kind])[k * RSTRIDE + i], want[kind][i],
                          ok ? "" : " (refused reduction must not touch memory)");
                }
    }
    return 0;
}

int sc_write(Rank& R) {
    std::vector<uint8_t> in(4 * SEG);
    auto w = bytes(seed_of(R.rank, 'W'), LEN), nn = bytes(seed_of(R.rank, 'N'), LEN);
    auto s = typed(seed_of(R.rank, 'S'), 11, 0, XCOUNT);
    memcpy(&in[0], w.data(), LEN);
    memcpy(&in[SEG], nn.data(), LEN);
    memcpy(&in[2 * SEG], s.data(), s.size());
    std::vector<uint8_t> zero(DP_MAX_RANKS * SEG, 0);
    if (put(R, R.in, in) || put(R, R.buf + W_OFF, zero) || put(R, R.buf + WN_OFF, zero) ||
        put(R, R.buf + RD_OFF, bytes(seed_of(R.rank, 'R'), LEN)) ||
        put(R, R.buf + RDR_OFF, typed(seed_of(R.rank, 'Q'), 4, 2, XCOUNT)) || put(R, R.out, zero))
        return 1;
    for (uint32_t p = 0; p < R.n; p++) {
        if (p == R.rank) continue;
        if (put(R, R.buf + WRN_OFF + p * SEG, typed(seed_of(R.rank, 'I', p), 11, 0, XCOUNT)) ||
            put(R, P(R.out, OUT2_OFF + p * SEG), typed(seed_of(R.rank, 'J', p), 4, 2, XCOUNT)))
            return 1;
    }
    if (barrier(R) || run_ok(R, "DpWrite")) return 1;
    for (uint32_t p = 0; p < R.n; p++) {
        if (p == R.rank) continue;
        char what[96];
        snprintf(what, sizeof what, "HcommWriteOnThread from rank %u", p);
        if (expect_mem(R, what, R.buf + W_OFF + p * SEG, bytes(seed_of(p, 'W'), LEN))) return 1;
        snprintf(what, sizeof what, "HcommWriteWithNotifyOnThread from rank %u", p);
        if (expect_mem(R, what, R.buf + WN_OFF + p * SEG, bytes(seed_of(p, 'N'), LEN))) return 1;
        snprintf(what, sizeof what, "HcommReadOnThread from rank %u", p);
        if (expect_mem(R, what, P(R.out, p * SEG), bytes(seed_of(p, 'R'), LEN))) return 1;
        snprintf(what, sizeof what, "%s bf16 sum from rank %u",
                 R.prod == A5 ? "HcommWriteReduceWithNotifyOnThread" : "HcommWriteReduceOnThread", p);
        if (expect_mem(R, what, R.buf + WRN_OFF + p * SEG,
                       reference(typed(seed_of(R.rank, 'I', p), 11, 0, XCOUNT), typed(seed_of(p, 'S'), 11, 0, XCOUNT), 11, 0)))
            return 1;
        snprintf(what, sizeof what, "HcommReadReduceOnThread fp32 max from rank %u", p);
        if (expect_mem(R, what, P(R.out, OUT2_OFF + p * SEG),
                       reference(typed(seed_of(R.rank, 'J', p), 4, 2, XCOUNT), typed(seed_of(p, 'Q'), 4, 2, XCOUNT), 4, 2)))
            return 1;
    }
    return 0;
}

int sc_notify(Rank& R) {
    auto v1 = bytes(seed_of(R.rank, '1'), LEN), v2 = bytes(seed_of(R.rank, '2'), LEN);
    auto c1 = bytes(seed_of(R.rank, '3'), LEN), c2 = bytes(seed_of(R.rank, '4'), LEN);
    std::vector<uint8_t> in(SEG + LEN);
    memcpy(&in[0], v2.data(), LEN);
    memcpy(&in[SEG], c2.data(), LEN);
    if (put(R, R.in, in) || put(R, R.scratch, v1) || put(R, R.buf + NB_OFF, c1) ||
        put(R, R.out, std::vector<uint8_t>(2 * SEG, 0)))
        return 1;
    /* Two records before one wait is exactly what the notify checker reports as a lost signal:
     * this scenario tests the binary-flag semantics themselves, so the checker is off for it. */
    int rc;
    {
        CheckOff off;
        rc = barrier(R) || run_ok(R, "DpNotify");
    }
    if (rc) return 1;
    if (expect_mem(R, "thread notify: second wait must need a third record (binary flag)", R.out, v2)) return 1;
    return expect_mem(R, "channel notify: second wait must need a third record (binary flag)", P(R.out, SEG),
                      bytes(seed_of(R.prev(), '4'), LEN));
}

int sc_batch(Rank& R) {
    std::vector<uint8_t> in(DP_LOCAL_BYTES);
    auto a = bytes(seed_of(R.rank, 'b'), DP_LOCAL_BYTES);
    if (put(R, R.in, a) || put(R, R.out, std::vector<uint8_t>(DP_LOCAL_BYTES, 0)) ||
        put(R, R.buf + BO_OFF, std::vector<uint8_t>(DP_MAX_RANKS * SEG, 0)) || clear_results(R))
        return 1;
    if (barrier(R) || run_ok(R, "DpBatch")) return 1;
    if (check_gates(R, R.prod == A5 ? 11 : 10)) return 1;
    Results res = read_results(R);
    if (!res.flags[0]) FAILF("rank %u: batch: a local copy ran before HcommBatchModeEnd", R.rank);
    if (!res.flags[1]) FAILF("rank %u: batch: the peer's buffer changed before HcommBatchModeEnd", R.rank);
    if (R.prod == A5 && !res.flags[3])
        FAILF("rank %u: batch: an eager copy on Ascend950 did not run before the kernel ended its batch", R.rank);
    std::vector<uint8_t> head(a.begin(), a.begin() + LEN);
    if (expect_mem(R, "batch local copy", R.out, head)) return 1;
    if (expect_mem(R, "copy in a temporary (NULL-tag) batch", P(R.out, TMP_OFF),
                   std::vector<uint8_t>(a.begin() + TMP_OFF, a.begin() + TMP_OFF + LEN)))
        return 1;
    std::vector<uint8_t> eager(a.begin() + EAGER_OFF, a.begin() + EAGER_OFF + LEN);
    if (R.prod != A5) eager.assign(LEN, 0); /* refused: nothing moved */
    if (expect_mem(R, "eager copy", P(R.out, EAGER_OFF), eager)) return 1;
    return expect_mem(R, "batch write from prev", R.buf + BO_OFF + R.prev() * SEG, bytes(seed_of(R.prev(), 'b'), LEN));
}

int sc_xfer(Rank& R) {
    std::vector<uint8_t> in(4 * SEG), in2(2 * SEG);
    for (int i = 0; i < 4; i++) {
        auto b = bytes(seed_of(R.rank, 'x', i), LEN);
        memcpy(&in[i * SEG], b.data(), LEN);
    }
    auto wr = typed(seed_of(R.rank, 'y', 0), 2, 0, XCOUNT), wrn = typed(seed_of(R.rank, 'y', 1), 6, 1, XCOUNT);
    memcpy(&in2[0], wr.data(), wr.size());
    memcpy(&in2[SEG], wrn.data(), wrn.size());
    std::vector<uint8_t> zero(DP_MAX_RANKS * SEG, 0);
    /* regions peers write into (init values for the reductions), regions next reads from */
    if (put(R, R.in, in) || put(R, R.in2, in2) || put(R, R.out, zero) || put(R, R.buf + BT_OFF, zero) ||
        put(R, R.buf + BTR_OFF, bytes(seed_of(R.rank, 'z'), LEN)) ||
        put(R, R.buf + BTWR_OFF + R.prev() * SEG, typed(seed_of(R.rank, 'u', 0), 2, 0, XCOUNT)) ||
        put(R, R.buf + BTRR_OFF, typed(seed_of(R.rank, 'v'), 3, 2, XCOUNT)) ||
        put(R, P(R.out, OUT2_OFF), typed(seed_of(R.rank, 'o'), 3, 2, XCOUNT)) || put(R, R.buf + BTWN_OFF, zero) ||
        put(R, R.buf + BTWRN_OFF + R.prev() * SEG, typed(seed_of(R.rank, 'u', 1), 6, 1, XCOUNT)) ||
        put(R, R.buf + FENCE_OFF, zero))
        return 1;
    if (put(R, R.scratch, std::vector<uint8_t>(LEN, 0)) || clear_results(R)) return 1;
    if (barrier(R) || run_ok(R, "DpXfer")) return 1;
    if (check_gates(R, R.prod == A5 ? 1 : 0)) return 1;
    if (expect_mem(R, "READ of a rejected HcommBatchTransferOnThread (must not run)", R.scratch,
                   std::vector<uint8_t>(LEN, 0)))
        return 1;
    uint32_t pv = R.prev(), nx = R.next();
    const char* via = R.prod == A5 ? "HcommBatchTransferOnThread (UB_CTP)" : "HcommBatchTransferOnThread (RoCE)";
    std::string w = std::string(via) + " WRITE from prev";
    if (expect_mem(R, w.c_str(), R.buf + BT_OFF + pv * SEG, bytes(seed_of(pv, 'x', 0), LEN))) return 1;
    w = std::string(via) + " READ from next";
    if (expect_mem(R, w.c_str(), R.out, bytes(seed_of(nx, 'z'), LEN))) return 1;
    if (R.prod != A5) return 0;
    if (expect_mem(R, "batch WRITE_REDUCE int32 sum", R.buf + BTWR_OFF + pv * SEG,
                   reference(typed(seed_of(R.rank, 'u', 0), 2, 0, XCOUNT), typed(seed_of(pv, 'y', 0), 2, 0, XCOUNT), 2, 0)))
        return 1;
    if (expect_mem(R, "batch READ_REDUCE fp16 max", P(R.out, OUT2_OFF),
                   reference(typed(seed_of(R.rank, 'o'), 3, 2, XCOUNT), typed(seed_of(nx, 'v'), 3, 2, XCOUNT), 3, 2)))
        return 1;
    if (expect_mem(R, "batch WRITE_WITH_NOTIFY", R.buf + BTWN_OFF + pv * SEG, bytes(seed_of(pv, 'x', 1), LEN))) return 1;
    if (expect_mem(R, "batch WRITE_REDUCE_WITH_NOTIFY uint64 prod", R.buf + BTWRN_OFF + pv * SEG,
                   reference(typed(seed_of(R.rank, 'u', 1), 6, 1, XCOUNT), typed(seed_of(pv, 'y', 1), 6, 1, XCOUNT), 6, 1)))
        return 1;
    auto f = bytes(seed_of(pv, 'x', 2), LEN), g = bytes(seed_of(pv, 'x', 3), LEN);
    memcpy(f.data(), g.data(), LEN / 2);
    return expect_mem(R, "two writes separated by HcommChannelFenceOnThread", R.buf + FENCE_OFF + pv * SEG, f);
}

int sc_aclnotify(Rank& R) {
    auto a = bytes(seed_of(R.rank, 'n'), LEN);
    if (put(R, R.in, a) || put(R, R.out, std::vector<uint8_t>(LEN, 0))) return 1;
    if (barrier(R) || run_ok(R, "DpAclNotify", ACL_NOTIFY)) return 1;
    return expect_mem(R, "copy under the ACL-notify handshake", R.out, a);
}

int sc_oob(Rank& R) {
    if (clear_results(R) || barrier(R) || launch(R, "DpOob", NO_HANDSHAKE)) return 1;
    int rc = aclrtSynchronizeStream(R.stream);
    const char* m = aclGetRecentErrMsg();
    std::string msg = m ? m : "";
    if (rc != 507018) FAILF("rank %u: oob: synchronize returned %d, expected 507018 (%s)", R.rank, rc, msg.c_str());
    char want[6][160];
    snprintf(want[0], sizeof want[0], "returned 77");
    snprintf(want[1], sizeof want[1], "HcommWriteOnThread: rank %u:", R.rank);
    snprintf(want[2], sizeof want[2], "outside rank %u's HCCL buffer", R.next());
    snprintf(want[3], sizeof want[3], "channel to rank %u", R.next());
    snprintf(want[4], sizeof want[4], "offset %llu", (unsigned long long)(R.host.channels[R.next()].remoteBuffer.size - 8));
    snprintf(want[5], sizeof want[5], "length 16");
    for (auto& w : want)
        if (msg.find(w) == std::string::npos) FAILF("rank %u: oob: message lacks '%s': %s", R.rank, w, msg.c_str());
    return check_gates(R, 5);
}

/* The communicator is aborted by rank 0's timeout: a barrier fails on every rank, naming the cause. */
int final_barrier_fails(Rank& R) {
    ACLCHECK(HcclBarrier(R.comm, R.stream));
    int rc = aclrtSynchronizeStream(R.stream);
    const char* m = aclGetRecentErrMsg();
    std::string msg = m ? m : "";
    if (rc != 507057 || msg.find("communicator aborted by rank 0") == std::string::npos ||
        msg.find("timed out") == std::string::npos)
        FAILF("rank %u: %s: barrier after the abort returned %d (%s)", R.rank, R.scenario.c_str(), rc, msg.c_str());
    return 0;
}

/* Only rank 0 launches the op; it fails after ~1 s and aborts the communicator. The other ranks
 * wait in a barrier meanwhile (rank 1 stays alive for the channel wait), which then fails. */
int sc_timeout(Rank& R, bool channel) {
    auto a = bytes(seed_of(R.rank, 't'), LEN);
    if (put(R, R.in, a) || put(R, R.out, std::vector<uint8_t>(LEN, 0)) || barrier(R)) return 1;
    if (R.rank != 0) return final_barrier_fails(R);
    if (!channel) HcommKitSetCheck(0); /* its two merged records are a lost signal for the checker */
    auto t0 = std::chrono::steady_clock::now();
    if (launch(R, channel ? "DpTimeoutChannel" : "DpTimeoutThread")) return 1;
    /* Poll instead of blocking in a synchronize call: with the host blocked, the hang analysis
     * proves that nothing can record the notify and fails the wait before its timeout (tests/c/diag
     * covers that); here the timeout path itself is under test. */
    aclrtStreamStatus st = ACL_STREAM_STATUS_NOT_READY;
    while (aclrtStreamQuery(R.stream, &st) == ACL_SUCCESS && st != ACL_STREAM_STATUS_COMPLETE) usleep(2000);
    int rc = aclrtSynchronizeStream(R.stream);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const char* m = aclGetRecentErrMsg();
    std::string msg = m ? m : "";
    if (R.rank == 0) {
        if (rc != ACL_ERROR_RT_TASK_TIMEOUT)
            FAILF("rank 0: %s: synchronize returned %d, expected %d (%s)", R.scenario.c_str(), rc, ACL_ERROR_RT_TASK_TIMEOUT,
                  msg.c_str());
        if (dt < 0.9 || dt > 10)
            FAILF("rank 0: %s: the 1 s wait failed after %.2f s (%s)", R.scenario.c_str(), dt, msg.c_str());
        std::vector<std::string> want;
        if (channel)
            want = {"rank 0: HcommChannelNotifyWaitOnThread timed out after 1 s on device thread t",
                    "waiting for channel notify slot 3 from rank 1", "(op tag 'dp_timeout_channel')"};
        else
            want = {"rank 0: HcommThreadNotifyWaitOnThreadWithDefaultTimeout timed out after 1 s on device thread t",
                    "waiting for thread notify slot 2 of device thread t", "(op tag 'dp_timeout_thread')"};
        for (auto& w : want)
            if (msg.find(w) == std::string::npos)
                FAILF("rank 0: %s: message lacks '%s': %s", R.scenario.c_str(), w.c_str(), msg.c_str());
        if (!channel && expect_mem(R, "copy after the first (collapsed) wait", R.out, a)) return 1;
        say("rank 0: %s: %.2f s: %s", R.scenario.c_str(), dt, msg.c_str());
    }
    return final_barrier_fails(R);
}

/* ---------------------------------------------------------------- setup / teardown */

int setup(Rank& R, const HcclRootInfo* root, int32_t dev) {
    ACLCHECK(aclrtSetDevice(dev));
    ACLCHECK(HcclCommInitRootInfo(R.n, root, R.rank, &R.comm));
    ACLCHECK(aclrtCreateStream(&R.stream));
    std::string soc = aclrtGetSocName();
    R.prod = soc.find("Ascend950") != std::string::npos ? A5 : soc.find("Ascend910_93") != std::string::npos ? A3 : A2;
    OpParam& p = R.param;
    memset(&p, 0, sizeof p);
    ACLCHECK(HcclGetCommName(R.comm, p.commName));
    p.devType = R.prod == A5 ? DEVICE_TYPE_A5 : R.prod == A3 ? DEVICE_TYPE_A3 : DEVICE_TYPE_A2;
    p.pollChecks = getenv("DP_NO_POLL") ? 0 : 1;
    for (void** b : {&R.in, &R.in2, &R.out, &R.scratch}) ACLCHECK(aclrtMalloc(b, DP_LOCAL_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    void* res = nullptr;
    ACLCHECK(aclrtMalloc(&res, sizeof(Results), ACL_MEM_MALLOC_HUGE_FIRST));
    R.res = static_cast<Results*>(res);
    p.inputPtr = R.in;
    p.input2Ptr = R.in2;
    p.outputPtr = R.out;
    p.scratchPtr = R.scratch;
    p.results = R.res;
    /* resources, as in CANN's examples: engine context first, then threads, channels, buffers */
    const char* tag = "dataplane_test";
    void* ctx = nullptr;
    uint64_t sz = 0;
    if (HcclEngineCtxGet(R.comm, tag, COMM_ENGINE_AICPU_TS, &ctx, &sz) == HCCL_SUCCESS)
        FAILF("rank %u: HcclEngineCtxGet succeeded before HcclEngineCtxCreate", R.rank);
    ACLCHECK(HcclEngineCtxCreate(R.comm, tag, COMM_ENGINE_AICPU_TS, sizeof(AlgResourceCtx), &ctx));
    AlgResourceCtx& h = R.host;
    memset(&h, 0, sizeof h);
    h.rank = R.rank;
    h.rankSize = R.n;
    h.threadNum = R.n > 4 ? R.n : 4;
    ACLCHECK(HcclThreadAcquireWithStream(R.comm, COMM_ENGINE_CPU_TS, R.stream, 1, &p.cpuThread));
    ACLCHECK(HcclThreadExportToCommEngine(R.comm, 1, &p.cpuThread, COMM_ENGINE_AICPU_TS, &h.cpuThreadOnAicpu));
    ACLCHECK(HcclThreadAcquire(R.comm, COMM_ENGINE_AICPU_TS, h.threadNum, DP_THREAD_SLOTS, h.threads));
    h.aicpuThread = h.threads[0];
    ACLCHECK(HcclThreadExportToCommEngine(R.comm, 1, &h.aicpuThread, COMM_ENGINE_CPU_TS, &p.aicpuThreadOnCpu));
    for (int proto_set = 0; proto_set < 2; proto_set++) {
        std::vector<HcclChannelDesc> descs;
        for (uint32_t q = 0; q < R.n; q++) {
            if (q == R.rank) continue;
            HcclChannelDesc d;
            ACLCHECK(HcclChannelDescInit(&d, 1));
            d.remoteRank = q;
            d.channelProtocol = proto_set ? COMM_PROTOCOL_ROCE : R.prod == A5 ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
            d.notifyNum = DP_CHANNEL_SLOTS;
            descs.push_back(d);
        }
        std::vector<ChannelHandle> ch(descs.size());
        ACLCHECK(HcclChannelAcquire(R.comm, COMM_ENGINE_AICPU_TS, descs.data(), (uint32_t)descs.size(), ch.data()));
        for (size_t i = 0; i < descs.size(); i++) {
            ChannelInfo& ci = (proto_set ? h.roce : h.channels)[descs[i].remoteRank];
            ci.remoteRank = descs[i].remoteRank;
            ci.notifyNum = DP_CHANNEL_SLOTS;
            ci.handle = ch[i];
            ACLCHECK(HcclChannelGetHcclBuffer(R.comm, ch[i], &ci.remoteBuffer.addr, &ci.remoteBuffer.size));
        }
    }
    ACLCHECK(HcclGetHcclBuffer(R.comm, &h.localBuffer.addr, &h.localBuffer.size));
    R.buf = static_cast<char*>(h.localBuffer.addr);
    R.bufsize = h.localBuffer.size;
    if (R.bufsize < FENCE_OFF + DP_MAX_RANKS * SEG) FAILF("rank %u: HCCL buffer of %llu bytes is too small", R.rank,
                                                          (unsigned long long)R.bufsize);
    if (R.prod != A5) {
        for (int i = 0; i < 3; i++) {
            ACLCHECK(aclrtCreateNotify(&R.acl[i], ACL_NOTIFY_DEFAULT));
            ACLCHECK(aclrtGetNotifyId(R.acl[i], &h.notifyIds[i]));
        }
    }
    ACLCHECK(aclrtMemcpy(ctx, sizeof h, &h, sizeof h, ACL_MEMCPY_HOST_TO_DEVICE));
    p.resCtx = static_cast<AlgResourceCtx*>(ctx);
    void* again = nullptr;
    ACLCHECK(HcclEngineCtxGet(R.comm, tag, COMM_ENGINE_AICPU_TS, &again, &sz));
    if (again != ctx || sz != sizeof(AlgResourceCtx)) FAILF("rank %u: HcclEngineCtxGet returned another block", R.rank);
    return 0;
}

int teardown(Rank& R) {
    ACLCHECK(aclrtSynchronizeStream(R.stream));
    if (g_bin) {
        ACLCHECK(aclrtBinaryUnLoad(g_bin));
        g_bin = nullptr;
    }
    ACLCHECK(HcclCommDestroy(R.comm));
    for (auto* n : R.acl)
        if (n) ACLCHECK(aclrtDestroyNotify(n));
    for (void* b : {R.in, R.in2, R.out, R.scratch, (void*)R.res}) ACLCHECK(aclrtFree(b));
    ACLCHECK(aclrtDestroyStream(R.stream));
    return 0;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string x;
    while (std::getline(ss, x, ','))
        if (!x.empty()) out.push_back(x);
    return out;
}

int run_rank(uint32_t rank, uint32_t n, const HcclRootInfo* root, int32_t dev, const std::vector<std::string>& scenarios) {
    Rank R;
    R.rank = rank;
    R.n = n;
    if (setup(R, root, dev)) return 1;
    if (barrier(R)) return 1;
    for (const std::string& s : scenarios) {
        R.scenario = s;
        auto t0 = std::chrono::steady_clock::now();
        int rc;
        if (s == "host") rc = sc_host(R);
        else if (s == "gates") rc = sc_gates(R);
        else if (s == "local") rc = sc_local(R);
        else if (s == "reduce") rc = sc_reduce(R);
        else if (s == "write") rc = sc_write(R);
        else if (s == "notify") rc = sc_notify(R);
        else if (s == "batch") rc = sc_batch(R);
        else if (s == "xfer") rc = sc_xfer(R);
        else if (s == "aclnotify") rc = R.prod == A5 ? 0 : sc_aclnotify(R);
        else if (s == "oob") rc = sc_oob(R);
        else if (s == "timeout_thread" || s == "timeout_channel") {
            if (&s != &scenarios.back()) FAILF("%s must be the last scenario (it aborts the communicator)", s.c_str());
            rc = sc_timeout(R, s == "timeout_channel");
        } else if (s == "die") {
            if (n < 2) FAILF("die needs 2 ranks");
            say("READY %u", rank);
            if (rank == n - 1)
                for (;;) pause();
            if (launch(R, "DpWaitPeer")) return 1;
            rc = aclrtSynchronizeStream(R.stream);
            const char* m = aclGetRecentErrMsg();
            say("ERR %d %s", rc, m ? m : "");
            if (rc != 507057) return 1;
            HcclCommDestroy(R.comm);
            return 0;
        } else {
            FAILF("unknown scenario '%s'", s.c_str());
        }
        if (rc) return 1;
        if (s.rfind("timeout", 0) != 0 && barrier(R)) return 1;
        if (rank == 0)
            say("scenario %s ok (%.0f ms)", s.c_str(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (teardown(R)) return 1;
    say("OK rank %u pid %d", rank, (int)getpid());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc < 4) {
        fprintf(stderr, "usage: %s <json> threads <n> [scen] | proc <rank> <n> <rootfile> [scen] | mpi <rootfile> [scen]\n",
                argv[0]);
        return 2;
    }
    g_json = argv[1];
    std::string mode = argv[2];
    std::string scen = "host,gates,local,reduce,write,notify,batch,xfer,aclnotify,oob";
    Rank R; /* for ACLCHECK in main */
    ACLCHECK(aclInit(nullptr));
    if (mode == "threads") {
        uint32_t n = (uint32_t)atoi(argv[3]);
        if (argc > 4) scen = argv[4];
        ACLCHECK(aclrtSetDevice(0));
        HcclRootInfo root;
        ACLCHECK(HcclGetRootInfo(&root));
        std::atomic<int> fails{0};
        std::vector<std::thread> ts;
        auto list = split(scen);
        for (uint32_t i = 0; i < n; i++)
            ts.emplace_back([&, i] { if (run_rank(i, n, &root, (int32_t)i, list)) fails++; });
        for (auto& t : ts) t.join();
        ACLCHECK(aclrtResetDevice(0));
        ACLCHECK(aclFinalize());
        say("%s: %u ranks as threads, %s, scenarios %s", fails ? "FAILED" : "PASS", n, aclrtGetSocName(), scen.c_str());
        return fails ? 1 : 0;
    }
    uint32_t rank, n;
    std::string path;
    if (mode == "proc") {
        if (argc < 6) return 2;
        rank = (uint32_t)atoi(argv[3]);
        n = (uint32_t)atoi(argv[4]);
        path = argv[5];
        if (argc > 6) scen = argv[6];
    } else if (mode == "mpi") {
        const char* r = getenv("OMPI_COMM_WORLD_RANK");
        const char* s = getenv("OMPI_COMM_WORLD_SIZE");
        if (!r) r = getenv("PMIX_RANK");
        if (!r || !s) FAILF("mpi mode: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE not set (run under mpirun)");
        rank = (uint32_t)atoi(r);
        n = (uint32_t)atoi(s);
        path = argv[3];
        if (argc > 4) scen = argv[4];
    } else {
        FAILF("unknown mode '%s'", mode.c_str());
    }
    R.rank = rank;
    HcclRootInfo root;
    if (rank == 0) {
        ACLCHECK(aclrtSetDevice(0));
        ACLCHECK(HcclGetRootInfo(&root));
        std::string tmp = path + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&root, sizeof root, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), path.c_str()) != 0)
            FAILF("rank 0: cannot write %s", path.c_str());
    } else {
        FILE* f = nullptr;
        for (int i = 0; i < 3000 && !(f = fopen(path.c_str(), "rb")); i++) usleep(10000);
        if (!f || fread(&root, sizeof root, 1, f) != 1) FAILF("rank %u: cannot read %s", rank, path.c_str());
        fclose(f);
    }
    int rc = run_rank(rank, n, &root, 0, split(scen));
    ACLCHECK(aclrtResetDevice(0));
    if (rank == 0) aclrtResetDevice(0);
    aclFinalize();
    return rc;
}
