/* Shared helpers of the fuzz targets (tests/fuzz/fuzz_*.cc).
 *
 * Each target defines LLVMFuzzerTestOneInput and is built two ways by tests/fuzz/harness.py:
 * with clang's libFuzzer (coverage-guided, every emulator source compiled in with
 * -fsanitize=fuzzer-no-link,address,undefined), and with replay_main.cc (any C++ compiler) to
 * re-run the stored regression corpus in the quick test suite.
 *
 * Inputs are read with Reader: fixed-width little-endian integers taken from the front, zeros once
 * the input is exhausted, so every byte string is a valid program. FUZZ_ASSERT states what the
 * emulator guarantees (e.g. "a successful call never hands out memory outside the buffer"); a
 * violation prints the reason and aborts, which libFuzzer records as a crash. */
#ifndef HCOMM_KIT_FUZZ_COMMON_H
#define HCOMM_KIT_FUZZ_COMMON_H

#include <acl/acl.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

/* FUZZ_LENIENT (used only to measure older emulator versions, see harness.py --lenient): model
 * mismatches are printed but not fatal, so the run goes on until a real crash or sanitizer report. */
#ifdef FUZZ_LENIENT
#define FUZZ_FAIL() ((void)0)
#else
#define FUZZ_FAIL() abort()
#endif

#define FUZZ_ASSERT(cond, ...)                                                                    \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "FUZZ_ASSERT failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                         \
            const char* m_ = aclGetRecentErrMsg();                                                \
            fprintf(stderr, " (last runtime message: %s)\n", m_ ? m_ : "none");                   \
            FUZZ_FAIL();                                                                          \
        }                                                                                         \
    } while (0)

/* A call that must succeed for the target to make sense (set-up, not the code under test). */
#define FUZZ_SETUP(expr)                                                                          \
    do {                                                                                          \
        int rc_ = (int)(expr);                                                                    \
        if (rc_ != 0) {                                                                           \
            const char* m_ = aclGetRecentErrMsg();                                                \
            fprintf(stderr, "fuzz set-up failed: %s returned %d (%s)\n", #expr, rc_, m_ ? m_ : "-"); \
            exit(2);                                                                              \
        }                                                                                         \
    } while (0)

class Reader {
public:
    Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
    bool empty() const { return p_ >= end_; }
    size_t left() const { return static_cast<size_t>(end_ - p_); }
    template <typename T>
    T take() {
        T v{};
        size_t n = left() < sizeof(T) ? left() : sizeof(T);
        memcpy(&v, p_, n);
        p_ += n;
        return v;
    }
    uint8_t u8() { return take<uint8_t>(); }
    uint32_t u32() { return take<uint32_t>(); }
    uint64_t u64() { return take<uint64_t>(); }
    /* A size: mostly small (the low bits of a byte), sometimes any 64-bit value. */
    uint64_t size(uint64_t small_max) {
        uint8_t sel = u8();
        if (sel & 0x80) return u64();
        return small_max ? u32() % (small_max + 1) : 0;
    }
    /* Up to n bytes (fewer when the input runs out). */
    std::string bytes(size_t n) {
        if (n > left()) n = left();
        std::string s(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        return s;
    }

private:
    const uint8_t* p_;
    const uint8_t* end_;
};

/* Directory of the running executable (the fuzz kernels are built beside it). */
inline std::string exe_dir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = '\0';
    std::string s(buf);
    size_t k = s.rfind('/');
    return k == std::string::npos ? "." : s.substr(0, k);
}

/* Clears the thread's last error so a stale message never shows up in a FUZZ_ASSERT report. */
inline void clear_error() { (void)aclGetRecentErrMsg(); }

#endif
