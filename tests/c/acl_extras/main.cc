/*
 * ACL calls added for CANN's published examples (acl_runtime.md §3.14), checked against CANN's
 * documented behaviour:
 *   lasterr   aclrtGetLastError / aclrtPeekAtLastError: the calling thread's last runtime error,
 *             Peek keeps it, Get clears it, other threads do not see it, HCCL errors are not
 *             runtime errors, a level other than ACL_RT_THREAD_LEVEL is refused;
 *   binary    aclrtCreateBinary / aclrtBinaryLoad / aclrtDestroyBinary: a host AICPU kernel image
 *             loads and runs (functions by symbol name); AI Core / non-ELF images are refused with
 *             ACL_ERROR_RT_FEATURE_NOT_SUPPORT; NULL and stale handles are refused;
 *   interval  aclrtGetOpTimeOutInterval;
 *   missing   a missing kernel .so: the message names the .so, the paths looked at and the signed
 *             package found instead.
 * Usage: acl_extras_main <kernel .so> <dir of extras_kernel.json (holding a *.tar.gz)>.
 * Prints one "ok <group>" line per group and "ALL OK"; exits non-zero on the first failure.
 */
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <acl/acl.h>
#include <hccl/hccl.h>

static int g_fail = 0;
#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
            g_fail = 1;                                                     \
            return 1;                                                       \
        }                                                                   \
    } while (0)
#define EXPECT_RC(expr, want) \
    do {                      \
        int rc_ = (expr);     \
        EXPECT(rc_ == (want), "%s returned %d, expected %d (%s)", #expr, rc_, (int)(want), Msg().c_str()); \
    } while (0)

static std::string Msg()
{
    const char* m = aclGetRecentErrMsg();
    return m ? m : "";
}

struct ExtrasArgs {
    uint32_t* out;
    uint32_t value;
};

static int LastErr()
{
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS); /* nothing failed yet on this thread */
    void* p = nullptr;
    EXPECT_RC(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM); /* peek keeps it */
    /* a later success does not clear it; a later failure replaces it */
    EXPECT_RC(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtFree(p), ACL_SUCCESS);
    EXPECT_RC(aclrtSetDevice(100000), ACL_ERROR_RT_INVALID_DEVICEID);
    /* another thread has its own (empty) record */
    int other = -1;
    std::thread([&other] { other = aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL); }).join();
    EXPECT(other == ACL_SUCCESS, "another thread sees %d", other);
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS); /* get cleared it */
    /* HCCL errors are not runtime errors */
    uint32_t rank = 0;
    EXPECT_RC(HcclGetRankId(nullptr, &rank), HCCL_E_PTR);
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    /* only the thread level exists; another level is itself a runtime error */
    EXPECT_RC(aclrtPeekAtLastError(static_cast<aclrtLastErrLevel>(1)), ACL_ERROR_INVALID_PARAM);
    EXPECT(Msg().find("ACL_RT_THREAD_LEVEL") != std::string::npos, "message: %s", Msg().c_str());
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    printf("ok lasterr\n");
    return 0;
}

static int Binary(const char* soPath)
{
    std::ifstream f(soPath, std::ios::binary);
    std::vector<char> image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT(image.size() > 64, "cannot read %s", soPath);
    EXPECT(aclrtCreateBinary(nullptr, 10) == nullptr, "NULL data accepted");
    EXPECT_RC(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtCreateBinary(image.data(), 0) == nullptr, "length 0 accepted");
    aclrtBinary bin = aclrtCreateBinary(image.data(), image.size());
    EXPECT(bin != nullptr, "aclrtCreateBinary failed: %s", Msg().c_str());
    std::fill(image.begin(), image.end(), 0); /* the binary holds its own copy */
    aclrtBinHandle h = nullptr;
    EXPECT_RC(aclrtBinaryLoad(bin, nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtBinaryLoad(bin, &h), ACL_SUCCESS);
    aclrtFuncHandle fn = nullptr;
    EXPECT_RC(aclrtBinaryGetFunction(h, "NoSuchKernel", &fn), ACL_ERROR_RT_SYMBOL_NOT_FOUND);
    EXPECT_RC(aclrtBinaryGetFunction(h, "HkExtrasStore", &fn), ACL_SUCCESS);
    aclrtStream stream = nullptr;
    EXPECT_RC(aclrtCreateStream(&stream), ACL_SUCCESS);
    void* out = nullptr;
    EXPECT_RC(aclrtMalloc(&out, 4, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ExtrasArgs args = {static_cast<uint32_t*>(out), 0xC0FFEEu};
    aclrtArgsHandle ah = nullptr;
    aclrtParamHandle ph = nullptr;
    EXPECT_RC(aclrtKernelArgsInit(fn, &ah), ACL_SUCCESS);
    EXPECT_RC(aclrtKernelArgsAppend(ah, &args, sizeof args, &ph), ACL_SUCCESS);
    EXPECT_RC(aclrtKernelArgsFinalize(ah), ACL_SUCCESS);
    EXPECT_RC(aclrtLaunchKernelWithConfig(fn, 1, stream, nullptr, ah, nullptr), ACL_SUCCESS);
    EXPECT_RC(aclrtSynchronizeStream(stream), ACL_SUCCESS);
    uint32_t got = 0;
    EXPECT_RC(aclrtMemcpy(&got, 4, out, 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    EXPECT(got == 0xC0FFEEu, "kernel wrote %#x", got);
    EXPECT_RC(aclrtBinaryUnLoad(h), ACL_SUCCESS);
    EXPECT_RC(aclrtDestroyBinary(bin), ACL_SUCCESS);
    EXPECT_RC(aclrtDestroyBinary(bin), ACL_ERROR_RT_PARAM_INVALID); /* already destroyed */
    EXPECT_RC(aclrtDestroyBinary(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtBinaryLoad(bin, &h), ACL_ERROR_RT_PARAM_INVALID);
    /* an AI Core image (ELF for another machine) and a non-ELF blob are not emulated */
    std::vector<unsigned char> aicore(256, 0);
    const unsigned char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    memcpy(aicore.data(), ident, sizeof ident);
    aicore[16] = 1;      /* ET_REL: a kernel object (.o) */
    aicore[18] = 0x04;   /* some other machine */
    aicore[19] = 0x10;
    aclrtBinary b2 = aclrtCreateBinary(aicore.data(), aicore.size());
    EXPECT(b2 != nullptr, "create: %s", Msg().c_str());
    EXPECT_RC(aclrtBinaryLoad(b2, &h), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT(Msg().find("not emulated") != std::string::npos, "message");
    EXPECT_RC(aclrtDestroyBinary(b2), ACL_SUCCESS);
    const char text[] = "not a kernel image";
    aclrtBinary b3 = aclrtCreateBinary(text, sizeof text);
    EXPECT_RC(aclrtBinaryLoad(b3, &h), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    EXPECT(Msg().find("not an ELF file") != std::string::npos, "message");
    EXPECT_RC(aclrtDestroyBinary(b3), ACL_SUCCESS);
    EXPECT_RC(aclrtFree(out), ACL_SUCCESS);
    EXPECT_RC(aclrtDestroyStream(stream), ACL_SUCCESS);
    printf("ok binary\n");
    return 0;
}

static int Interval()
{
    uint64_t us = 0;
    EXPECT_RC(aclrtGetOpTimeOutInterval(nullptr), ACL_ERROR_INVALID_PARAM);
    EXPECT_RC(aclrtGetOpTimeOutInterval(&us), ACL_SUCCESS);
    /* 254 steps reach the documented longest A2/A3 operator timeout of about 1091 s */
    EXPECT(us * 254 / 1000000 == 1090 || us * 254 / 1000000 == 1091, "interval %llu us", (unsigned long long)us);
    printf("ok interval\n");
    return 0;
}

static int Missing(const char* cfgDir)
{
    for (int mode = 0; mode <= 1; ++mode) {
        std::string json = std::string(cfgDir) + "/extras_kernel.json";
        aclrtBinaryLoadOption opt;
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = mode;
        aclrtBinaryLoadOptions opts = {&opt, 1};
        aclrtBinHandle h = nullptr;
        EXPECT_RC(aclrtBinaryLoadFromFile(json.c_str(), &opts, &h), ACL_ERROR_RT_FILE_OPEN);
        std::string m = Msg();
        const char* so = mode == 0 ? "libhk_extras_missing.so" : "extras_kernel.so";
        EXPECT(m.find(std::string(cfgDir) + "/" + so) != std::string::npos, "path not named: %s", m.c_str());
        EXPECT(m.find("aicpu_hccl_custom_extras.tar.gz") != std::string::npos, "package not named: %s", m.c_str());
        EXPECT(m.find("signed") != std::string::npos, "no word about signing: %s", m.c_str());
    }
    printf("ok missing\n");
    return 0;
}

int main(int argc, char** argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <kernel .so> <config dir>\n", argv[0]);
        return 2;
    }
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        fprintf(stderr, "init failed: %s\n", Msg().c_str());
        return 1;
    }
    if (LastErr() || Binary(argv[1]) || Interval() || Missing(argv[2])) {
        return 1;
    }
    aclrtResetDevice(0);
    aclFinalize();
    printf("ALL OK\n");
    return g_fail;
}
