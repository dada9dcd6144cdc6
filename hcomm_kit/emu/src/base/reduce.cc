// Element-wise reductions; see reduce.h for semantics.
//
// Performance notes. The library is built with -O2, where GCC 12's "very cheap" vectorizer
// cost model only vectorizes loops whose trip count is a known multiple of the vector width.
// So every kernel processes fixed-size blocks of kBlock elements (compile-time trip count,
// __restrict or local buffers so no alias checks are needed) and handles the remainder with a
// runtime-length loop. Dispatch on (dtype, op) happens once per call through a table of
// template instantiations; the inner loops contain no switches. On x86-64 CPUs with AVX2+F16C
// (detected once at run time) a second table built with target("avx2,f16c") is used; fp16 then
// converts with F16C and bf16 with AVX2 integer ops. reduce_force_portable() lets tests cover
// both tables.
#include "base/reduce.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace emu {
namespace {

constexpr size_t kBlock = 1024;  // elements per block; 2 x 4 KiB float buffers for fp16/bf16

inline uint32_t f2u(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float u2f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// binary16 -> binary32, branch-free (selects only) so it vectorizes. Normal numbers are
// rebased by adding 224 to the exponent field and scaling by 2^-112 (which also maps
// exponent 31 to inf/NaN); subnormals are built as (0.5 + m * 2^-24 in [0.5,1)) - 0.5.
inline float h2f_impl(uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;  // exponent+mantissa, sign dropped
    const float normalized = u2f((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const float denormalized = u2f((two_w >> 17) | (126u << 23)) - 0.5f;
    // Integer mask select rather than ?: so GCC does not turn it into a branch around
    // (possibly trapping) float ops, which would block if-conversion and vectorization.
    const uint32_t use_denorm = 0u - static_cast<uint32_t>(two_w < (1u << 27));
    const uint32_t r = (f2u(denormalized) & use_denorm) | (f2u(normalized) & ~use_denorm);
    return u2f(sign | r);
}

// binary32 -> binary16 with round-to-nearest-even, branch-free. The magnitude is first pushed
// through 2^112 * 2^-110 so values too large for fp16 become inf; then adding a power of two
// chosen from the exponent (at least 2^-14 so subnormals land on the fp16 grid) makes the FPU
// round the mantissa to 10 bits (RNE); the result's bits are repacked. Depends on the default
// rounding mode and on no FMA contraction (ISO -std=c++17 implies -ffp-contract=off).
inline uint16_t f2h_impl(float f) {
    const uint32_t w = f2u(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    float base = (u2f(w & 0x7FFFFFFFu) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t bias = shl1_w & 0xFF000000u;
    bias = bias < 0x71000000u ? 0x71000000u : bias;
    base = u2f((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f2u(base);
    const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    const uint32_t is_nan = 0u - static_cast<uint32_t>(shl1_w > 0xFF000000u);  // mask select, see h2f_impl
    return static_cast<uint16_t>((sign >> 16) | (0x7E00u & is_nan) | (nonsign & ~is_nan));
}

inline float b2f_impl(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }

inline uint16_t f2b_impl(float f) {
    const uint32_t u = f2u(f);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;  // RNE on the low 16 bits
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    const bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

// ---- element types: storage type, compute type, conversions -------------------------------

template <class T>
struct Native {
    using S = T;  // storage
    using C = T;  // compute
    static C load(S v) { return v; }
    static S store(C v) { return v; }
};
struct Half {
    using S = uint16_t;
    using C = float;
    static C load(S v) { return h2f_impl(v); }
    static S store(C v) { return f2h_impl(v); }
};
struct BFloat {
    using S = uint16_t;
    using C = float;
    static C load(S v) { return b2f_impl(v); }
    static S store(C v) { return f2b_impl(v); }
};

// ---- ops --------------------------------------------------------------------------------

// Integer SUM/PROD are done in an unsigned type at least as wide as int, so they wrap
// modulo 2^n without signed overflow (and without int promotion overflow for 16-bit types).
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct OpSum {
    template <class T>
    static T apply(T a, T b) {
        if constexpr (std::is_integral_v<T>) {
            return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
        } else {
            return a + b;
        }
    }
};
struct OpProd {
    template <class T>
    static T apply(T a, T b) {
        if constexpr (std::is_integral_v<T>) {
            return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
        } else {
            return a * b;
        }
    }
};
// Floating MAX/MIN: a NaN in either operand gives NaN (the first NaN if both), like numpy.
struct OpMax {
    template <class T>
    static T apply(T a, T b) {
        T m = a < b ? b : a;
        if constexpr (!std::is_integral_v<T>) {
            m = b != b ? b : m;
            m = a != a ? a : m;
        }
        return m;
    }
};
struct OpMin {
    template <class T>
    static T apply(T a, T b) {
        T m = b < a ? b : a;
        if constexpr (!std::is_integral_v<T>) {
            m = b != b ? b : m;
            m = a != a ? a : m;
        }
        return m;
    }
};

// ---- kernels ----------------------------------------------------------------------------

// Same storage and compute type: operate in place.
template <class T, class Op>
void native_block(T* __restrict d, const T* __restrict s) {
    for (size_t i = 0; i < kBlock; ++i) d[i] = Op::apply(d[i], s[i]);
}
template <class T, class Op>
void native_self_block(T* d) {
    for (size_t i = 0; i < kBlock; ++i) d[i] = Op::apply(d[i], d[i]);
}

// Widened types: read both blocks into float buffers, combine, write back. Reading fully
// before writing makes dst == src safe. kFull selects the compile-time trip count.
template <class E, class Op, bool kFull>
void widened_block(typename E::S* d, const typename E::S* s, size_t n) {
    using C = typename E::C;
    const size_t m = kFull ? kBlock : n;
    C a[kBlock];
    C b[kBlock];
    for (size_t i = 0; i < m; ++i) a[i] = E::load(d[i]);
    for (size_t i = 0; i < m; ++i) b[i] = E::load(s[i]);
    for (size_t i = 0; i < m; ++i) a[i] = Op::apply(a[i], b[i]);
    for (size_t i = 0; i < m; ++i) d[i] = E::store(a[i]);
}

// One element at a time in increasing index order; used for tails and for partially
// overlapping ranges (where the result is then well defined, if odd).
template <class E, class Op>
void sequential(typename E::S* d, const typename E::S* s, size_t n) {
    for (size_t i = 0; i < n; ++i) d[i] = E::store(Op::apply(E::load(d[i]), E::load(s[i])));
}

template <class E, class Op>
void run(void* dst, const void* src, size_t count) {
    using S = typename E::S;
    S* d = static_cast<S*>(dst);
    const S* s = static_cast<const S*>(src);
    const size_t bytes = count * sizeof(S);
    const uintptr_t du = reinterpret_cast<uintptr_t>(d), su = reinterpret_cast<uintptr_t>(s);
    const bool partial_overlap = d != s && du < su + bytes && su < du + bytes;
    if (partial_overlap) {
        sequential<E, Op>(d, s, count);
        return;
    }
    const size_t full = count / kBlock * kBlock;
    if constexpr (std::is_same_v<typename E::S, typename E::C>) {
        if (d == s) {
            for (size_t i = 0; i < full; i += kBlock) native_self_block<S, Op>(d + i);
        } else {
            for (size_t i = 0; i < full; i += kBlock) native_block<S, Op>(d + i, s + i);
        }
        sequential<E, Op>(d + full, s + full, count - full);
    } else {
        for (size_t i = 0; i < full; i += kBlock) widened_block<E, Op, true>(d + i, s + i, kBlock);
        if (count > full) widened_block<E, Op, false>(d + full, s + full, count - full);
    }
}

using Kernel = void (*)(void*, const void*, size_t);

#if defined(__x86_64__)
// x86-64 with AVX2 + F16C (checked at run time): the same templates compiled for 256-bit
// vectors (flatten inlines run<> and its loops into the target("avx2") function before the
// vectorizer runs), and fp16 converted with the F16C instructions, which are exact IEEE
// conversions with round-to-nearest-even. Results are bit-identical to the portable kernels
// except for the payload bits of NaN results.
#define EMU_REDUCE_X86 1

// 8-lane loads/stores of fp16 / bf16 as float vectors.
struct F16cLanes {
    using Portable = Half;
    __attribute__((target("avx2,f16c"))) static __m256 load8(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    __attribute__((target("avx2,f16c"))) static void store8(uint16_t* p, __m256 v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
};
struct Bf16Lanes {
    using Portable = BFloat;
    __attribute__((target("avx2,f16c"))) static __m256 load8(const uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    // Same rounding as f2b_impl: RNE on the low 16 bits, NaN -> quiet NaN.
    __attribute__((target("avx2,f16c"))) static void store8(uint16_t* p, __m256 v) {
        const __m256i u = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                                  _mm256_set1_epi32(0x7F800000));
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
        // packus works per 128-bit lane: [r0..3 r0..3 | r4..7 r4..7]; gather qwords 0 and 2.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    }
};

// One block of fp16/bf16: widen both operands into float buffers, combine, narrow back.
template <class Lanes, class Op>
__attribute__((target("avx2,f16c"), flatten)) void avx2_widened_block(uint16_t* d, const uint16_t* s) {
    alignas(32) float a[kBlock];
    alignas(32) float b[kBlock];
    for (size_t i = 0; i < kBlock; i += 8) {
        _mm256_store_ps(a + i, Lanes::load8(d + i));
        _mm256_store_ps(b + i, Lanes::load8(s + i));
    }
    for (size_t i = 0; i < kBlock; ++i) a[i] = Op::apply(a[i], b[i]);
    for (size_t i = 0; i < kBlock; i += 8) Lanes::store8(d + i, _mm256_load_ps(a + i));
}

template <class Lanes, class Op>
__attribute__((target("avx2,f16c"), flatten)) void run_avx2_widened(void* dst, const void* src, size_t count) {
    using E = typename Lanes::Portable;
    uint16_t* d = static_cast<uint16_t*>(dst);
    const uint16_t* s = static_cast<const uint16_t*>(src);
    const uintptr_t du = reinterpret_cast<uintptr_t>(d), su = reinterpret_cast<uintptr_t>(s);
    if (d != s && du < su + count * 2 && su < du + count * 2) {
        sequential<E, Op>(d, s, count);
        return;
    }
    const size_t full = count / kBlock * kBlock;
    for (size_t i = 0; i < full; i += kBlock) avx2_widened_block<Lanes, Op>(d + i, s + i);
    if (count > full) widened_block<E, Op, false>(d + full, s + full, count - full);
}

template <class E, class Op>
__attribute__((target("avx2,f16c"), flatten)) void run_avx2(void* dst, const void* src, size_t count) {
    if constexpr (std::is_same_v<E, Half>) {
        run_avx2_widened<F16cLanes, Op>(dst, src, count);
    } else if constexpr (std::is_same_v<E, BFloat>) {
        run_avx2_widened<Bf16Lanes, Op>(dst, src, count);
    } else {
        run<E, Op>(dst, src, count);
    }
}

template <class E>
constexpr Kernel avx2_kernels_for(int op) {
    return op == kOpSum    ? &run_avx2<E, OpSum>
           : op == kOpProd ? &run_avx2<E, OpProd>
           : op == kOpMax  ? &run_avx2<E, OpMax>
                           : &run_avx2<E, OpMin>;
}
#endif

template <class E>
constexpr Kernel kernels_for(int op) {
    return op == kOpSum ? &run<E, OpSum> : op == kOpProd ? &run<E, OpProd> : op == kOpMax ? &run<E, OpMax> : &run<E, OpMin>;
}

// Tables indexed by [dtype][op]; row order must follow the dtype numbering.
#define EMU_KERNEL_ROW(E) {F<E>(0), F<E>(1), F<E>(2), F<E>(3)}
#define EMU_KERNEL_TABLE                                                                              \
    {                                                                                                 \
        EMU_KERNEL_ROW(Native<int8_t>), EMU_KERNEL_ROW(Native<int16_t>), EMU_KERNEL_ROW(Native<int32_t>), \
        EMU_KERNEL_ROW(Half), EMU_KERNEL_ROW(Native<float>), EMU_KERNEL_ROW(Native<int64_t>),            \
        EMU_KERNEL_ROW(Native<uint64_t>), EMU_KERNEL_ROW(Native<uint8_t>), EMU_KERNEL_ROW(Native<uint16_t>), \
        EMU_KERNEL_ROW(Native<uint32_t>), EMU_KERNEL_ROW(Native<double>), EMU_KERNEL_ROW(BFloat),        \
    }
#define F kernels_for
constexpr Kernel kPortable[12][4] = EMU_KERNEL_TABLE;
#undef F
#if EMU_REDUCE_X86
#define F avx2_kernels_for
constexpr Kernel kAvx2[12][4] = EMU_KERNEL_TABLE;
#undef F
#endif
#undef EMU_KERNEL_TABLE
#undef EMU_KERNEL_ROW

bool cpu_has_avx2() {
#if EMU_REDUCE_X86
    __builtin_cpu_init();
    /* F16C through cpuid: clang before 15 does not know __builtin_cpu_supports("f16c"). */
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
    return false;
#endif
}

std::atomic<bool> g_force_portable{false};

// The kernel table for this call: AVX2 when the CPU has it and tests did not force portable.
const Kernel (*kernel_table())[4] {
    static const bool avx2 = cpu_has_avx2();
#if EMU_REDUCE_X86
    if (avx2 && !g_force_portable.load(std::memory_order_relaxed)) return kAvx2;
#endif
    (void)avx2;
    return kPortable;
}

constexpr size_t kSizes[12] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
const char* const kDtypeNames[12] = {"int8",  "int16",  "int32",  "fp16",  "fp32", "int64",
                                     "uint64", "uint8", "uint16", "uint32", "fp64", "bf16"};
const char* const kOpNames[4] = {"sum", "prod", "max", "min"};

const char* unknown_name(int v) {
    thread_local char buf[32];
    std::snprintf(buf, sizeof buf, "unknown(%d)", v);
    return buf;
}

}  // namespace

size_t dtype_size(int dtype) { return dtype >= 0 && dtype < 12 ? kSizes[dtype] : 0; }

const char* dtype_name(int dtype) { return dtype >= 0 && dtype < 12 ? kDtypeNames[dtype] : unknown_name(dtype); }

const char* redop_name(int op) { return op >= 0 && op < 4 ? kOpNames[op] : unknown_name(op); }

bool reduce_supported(int dtype, int op) { return dtype >= 0 && dtype < 12 && op >= 0 && op < 4; }

// Addresses not aligned to the element size (an int16 at an odd address, say): the kernels load
// elements through typed pointers, which must be aligned (the compiler may use aligned vector
// loads). Stage through aligned buffers instead: in blocks when the ranges are disjoint or the
// same, element by element in increasing index order when they partially overlap (the same
// result as sequential()).
static void reduce_misaligned(Kernel k, unsigned char* d, const unsigned char* s, size_t n, size_t es) {
    constexpr size_t kStage = 4096;  // bytes per staged block
    alignas(64) unsigned char a[kStage];
    alignas(64) unsigned char b[kStage];
    const size_t bytes = n * es;
    const uintptr_t du = reinterpret_cast<uintptr_t>(d), su = reinterpret_cast<uintptr_t>(s);
    const bool partial_overlap = d != s && du < su + bytes && su < du + bytes;
    const size_t per = partial_overlap ? 1 : kStage / es;
    for (size_t i = 0; i < n; i += per) {
        const size_t m = n - i < per ? n - i : per;
        memcpy(a, d + i * es, m * es);
        memcpy(b, s + i * es, m * es);
        k(a, d == s ? a : b, m);
        memcpy(d + i * es, a, m * es);
    }
}

bool reduce_inplace(void* dst, const void* src, uint64_t count, int dtype, int op) {
    if (!reduce_supported(dtype, op)) return false;
    if (count == 0) return true;
    if (dst == nullptr || src == nullptr) return false;
    if (count > SIZE_MAX / kSizes[dtype]) return false;  // byte length would not fit in size_t
    Kernel k = kernel_table()[dtype][op];
    const size_t es = kSizes[dtype];
    if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % es) {
        reduce_misaligned(k, static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                          static_cast<size_t>(count), es);
        return true;
    }
    k(dst, src, static_cast<size_t>(count));
    return true;
}

const char* reduce_isa() {
#if EMU_REDUCE_X86
    return kernel_table() == kAvx2 ? "avx2" : "portable";
#else
    return "portable";
#endif
}

void reduce_force_portable(bool on) { g_force_portable.store(on, std::memory_order_relaxed); }

float half_to_float(uint16_t h) { return h2f_impl(h); }
uint16_t float_to_half(float f) { return f2h_impl(f); }
float bf16_to_float(uint16_t h) { return b2f_impl(h); }
uint16_t float_to_bf16(float f) { return f2b_impl(f); }

}  // namespace emu
