// AICPU test kernels for tests/c/test_acl_runtime.cc, tests/test_acl_python.py and
// scripts/bench_launch.py. Entry convention (acl_runtime.md §3.11): `uint32_t fn(void* args)`,
// called with a copy of exactly the appended argument bytes (packed, 1-byte alignment).
//
// Build: g++ -std=c++17 -O2 -fPIC -shared -Wall -Wextra -Werror acl_test_kernels.cc -o <name>.so
// The op-info JSONs beside this file map op types (top-level keys) to these entry symbols.
#include <cstdint>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

#define KERNEL extern "C" __attribute__((visibility("default"))) uint32_t

namespace {
template <typename T>
T load(const void* args, size_t offset) {  // unaligned read from the packed argument blob
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(args) + offset, sizeof v);
    return v;
}
}  // namespace

// No arguments; returns 0 at once (launch round-trip benchmark).
KERNEL EmptyKernel(void* args) {
    (void)args;
    return 0;
}

// args: uint32_t ms. Sleeps ms milliseconds (timeouts, NOT_READY states, ordering).
KERNEL SleepKernel(void* args) {
    usleep(static_cast<useconds_t>(load<uint32_t>(args, 0)) * 1000u);
    return 0;
}

// No arguments; returns 7 (non-zero return -> 507018 at the next sync).
KERNEL FailKernel(void* args) {
    (void)args;
    return 7;
}

// args: int32_t* target. Stores through the pointer (pass NULL to crash with SIGSEGV).
KERNEL CrashKernel(void* args) {
    volatile int32_t* p = load<int32_t*>(args, 0);
    *p = 42;
    return 0;
}

// args: uint8_t* out; uint32_t len; ... Copies the first `len` bytes of its own argument blob to
// `out`, so the host can check the packed layout byte for byte.
KERNEL CopyArgsKernel(void* args) {
    uint8_t* out = load<uint8_t*>(args, 0);
    uint32_t len = load<uint32_t>(args, 8);
    std::memcpy(out, args, len);
    return 0;
}

// args: uint8_t* out; const uint8_t* slot (placeholder: device address of its data); uint32_t len.
// Copies `len` bytes read through the placeholder pointer to `out`.
KERNEL PlaceholderKernel(void* args) {
    uint8_t* out = load<uint8_t*>(args, 0);
    const uint8_t* data = load<const uint8_t*>(args, 8);
    uint32_t len = load<uint32_t>(args, 16);
    std::memcpy(out, data, len);
    return 0;
}

// args: int32_t* log; int32_t* count; int32_t value; uint32_t sleep_us.
// Sleeps, then appends `value` to log[(*count)++] (FIFO ordering of stream tasks).
KERNEL LogKernel(void* args) {
    int32_t* log = load<int32_t*>(args, 0);
    int32_t* count = load<int32_t*>(args, 8);
    int32_t value = load<int32_t>(args, 16);
    uint32_t sleep_us = load<uint32_t>(args, 20);
    if (sleep_us) usleep(sleep_us);
    log[(*count)++] = value;
    return 0;
}

// args: int32_t* out. Stores the id of the OS thread that runs it (HcommKitStreamCalls INLINE runs
// kernels on the calling thread).
KERNEL TidKernel(void* args) {
    int32_t* out = load<int32_t*>(args, 0);
    *out = static_cast<int32_t>(syscall(SYS_gettid));
    return 0;
}
