/*
 * Host program of the kernel-isolation regression test. It is linked against libabi_host.so (old
 * C++ ABI, in the global symbol scope like a CANN example's host library), loads abi_kernel.so
 * (new ABI) from its op-info JSON and launches it. The kernel must run its own copy of the
 * shared inline class: the result must equal a reference computed here with the new ABI.
 * Usage: abi_main <dir of abi_kernel.json>. Prints "OK" and exits 0 on success.
 */
#include <cstdio>
#include <string>

#include <acl/acl.h>

#include "abi_blob.h" /* AbiArgs only: this program must not carry a copy of AbiBlob's methods */

extern "C" uint64_t AbiHostChecksum(uint32_t words);

/* The expected blob, computed without the class: size and FNV-1a checksum of "w0,w1,...,". */
static void Reference(uint32_t words, uint64_t* size, uint64_t* checksum)
{
    uint64_t h = 1469598103934665603ull, n = 0;
    char w[48];
    for (uint32_t i = 0; i < words; ++i) {
        int len = snprintf(w, sizeof w, "word-number-%u-long-enough-to-allocate,", i);
        for (int k = 0; k < len && k < (int)sizeof w - 1; ++k) {
            h = (h ^ static_cast<unsigned char>(w[k])) * 1099511628211ull;
        }
        n += (uint64_t)len;
    }
    *size = n;
    *checksum = h;
}

#define CHECK(expr)                                                                                   \
    do {                                                                                              \
        int rc_ = (expr);                                                                             \
        if (rc_ != 0) {                                                                               \
            const char* m_ = aclGetRecentErrMsg();                                                    \
            fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #expr, rc_, m_ ? m_ : ""); \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)

int main(int argc, char** argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <kernel dir>\n", argv[0]);
        return 2;
    }
    const uint32_t words = 40;
    /* The host library runs its (old-ABI) copy first, so that it is certainly bound. */
    uint64_t host = AbiHostChecksum(words);
    uint64_t refSize = 0, refSum = 0;
    Reference(words, &refSize, &refSum);
    if (host != (refSum ^ refSize)) {
        fprintf(stderr, "host library checksum %llu differs from the reference\n", (unsigned long long)host);
        return 1;
    }
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = nullptr;
    CHECK(aclrtCreateStream(&stream));
    std::string json = std::string(argv[1]) + "/abi_kernel.json";
    aclrtBinaryLoadOption opt;
    opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt.value.cpuKernelMode = 0;
    aclrtBinaryLoadOptions opts = {&opt, 1};
    aclrtBinHandle bin = nullptr;
    CHECK(aclrtBinaryLoadFromFile(json.c_str(), &opts, &bin));
    aclrtFuncHandle fn = nullptr;
    CHECK(aclrtBinaryGetFunction(bin, "HkAbiKernel", &fn));
    void* out = nullptr;
    CHECK(aclrtMalloc(&out, 2 * sizeof(uint64_t), ACL_MEM_MALLOC_HUGE_FIRST));
    AbiArgs args = {static_cast<uint64_t*>(out), words};
    aclrtArgsHandle ah = nullptr;
    aclrtParamHandle ph = nullptr;
    CHECK(aclrtKernelArgsInit(fn, &ah));
    CHECK(aclrtKernelArgsAppend(ah, &args, sizeof args, &ph));
    CHECK(aclrtKernelArgsFinalize(ah));
    CHECK(aclrtLaunchKernelWithConfig(fn, 1, stream, nullptr, ah, nullptr));
    CHECK(aclrtSynchronizeStream(stream));
    uint64_t got[2] = {0, 0};
    CHECK(aclrtMemcpy(got, sizeof got, out, sizeof got, ACL_MEMCPY_DEVICE_TO_HOST));
    if (got[0] != refSize || got[1] != refSum) {
        fprintf(stderr, "kernel computed size %llu checksum %llu, expected %llu / %llu\n",
                (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)refSize,
                (unsigned long long)refSum);
        return 1;
    }
    CHECK(aclrtFree(out));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("OK\n");
    return 0;
}
