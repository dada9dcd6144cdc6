/* Host side of the test operator: resources (hcomm.md §3.9 filling, p2p style), kernel loading
 * from the installed op-info JSON (cpuKernelMode 0, as CANN's examples), thread-notify handshake,
 * and the Ascend C launch path when HCCL_CUSTOM_KERNEL_LAUNCH_ASC=1 (as CANN's examples). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include <acl/acl_rt.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hccl_channel.h>
#include <hccl/hcomm_primitives.h>

#include "common.h"
#include "hccl_custom_shift.h"
#include "tag_text.h"

extern "C" HcclResult LaunchShiftAsc(OpParam* param, aclrtStream stream);

#define CHK(expr)                                                                       \
    do {                                                                                \
        int r_ = (int)(expr);                                                           \
        if (r_ != 0) {                                                                  \
            fprintf(stderr, "[shift] %s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, r_); \
            return (HcclResult)(r_ < 100000 ? r_ : HCCL_E_RUNTIME);                     \
        }                                                                               \
    } while (0)

namespace {
struct Res {
    ThreadHandle aicpuOnCpu = 0;
    ThreadHandle cpuOnAicpu = 0;
    AlgResourceCtx host;
    void* ctx = nullptr;
};
std::mutex g_m;
std::map<HcclComm, Res> g_res;
aclrtFuncHandle g_fn = nullptr;

HcclResult LoadKernel(aclrtFuncHandle* fn)
{
    std::lock_guard<std::mutex> g(g_m);
    if (!g_fn) {
        const char* home = getenv("ASCEND_HOME_PATH");
        std::string json = std::string(home ? home : "/usr/local/Ascend/cann") +
                           "/opp/vendors/cust/aicpu/config/libshift_aicpu_kernel.json";
        aclrtBinaryLoadOption opt;
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 0;
        aclrtBinaryLoadOptions opts = {&opt, 1};
        aclrtBinHandle bin = nullptr;
        CHK(aclrtBinaryLoadFromFile(json.c_str(), &opts, &bin));
        CHK(aclrtBinaryGetFunction(bin, "HkShiftAicpuKernel", &g_fn));
    }
    *fn = g_fn;
    return HCCL_SUCCESS;
}

HcclResult Prepare(HcclComm comm, aclrtStream stream, OpParam& p)
{
    CHK(HcclGetCommName(comm, p.commName));
    CHK(HcclGetRankId(comm, &p.rank));
    CHK(HcclGetRankSize(comm, &p.rankSize));
    TagText t; /* the host library's (old ABI) copy of the shared class */
    t.Add("shift");
    t.Add(p.commName);
    snprintf(p.tag, sizeof p.tag, "shift_%llx", (unsigned long long)t.Hash());
    CHK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &p.cpuThread));
    Res* rp;
    {
        /* only the lookup under the lock: channel creation below waits for the peers' calls */
        std::lock_guard<std::mutex> g(g_m);
        rp = &g_res[comm];
    }
    Res& r = *rp;
    ThreadHandle cpuOnAicpu = 0;
    CHK(HcclThreadExportToCommEngine(comm, 1, &p.cpuThread, COMM_ENGINE_AICPU_TS, &cpuOnAicpu));
    if (!r.ctx) {
        memset(&r.host, 0, sizeof r.host);
        CHK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, &r.host.aicpuThread));
        CHK(HcclThreadExportToCommEngine(comm, 1, &r.host.aicpuThread, COMM_ENGINE_CPU_TS, &r.aicpuOnCpu));
        uint32_t prev = (p.rank + p.rankSize - 1) % p.rankSize, next = (p.rank + 1) % p.rankSize;
        uint32_t k = prev == next ? 1 : 2;
        HcclChannelDesc descs[2];
        HcclChannelDescInit(descs, k);
        bool is950 = strcmp(aclrtGetSocName(), "Ascend950") == 0;
        for (uint32_t i = 0; i < k; i++) {
            descs[i].remoteRank = i == 0 ? prev : next;
            descs[i].channelProtocol = is950 ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
            descs[i].notifyNum = 2;
        }
        ChannelHandle handles[2] = {0, 0};
        CHK(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs, k, handles));
        r.host.prev = handles[0];
        r.host.next = k == 2 ? handles[1] : handles[0];
        CHK(HcclGetHcclBuffer(comm, &r.host.localBuffer.addr, &r.host.localBuffer.size));
        CHK(HcclChannelGetHcclBuffer(comm, r.host.prev, &r.host.prevBuffer.addr, &r.host.prevBuffer.size));
        CHK(HcclEngineCtxCreate(comm, p.tag, COMM_ENGINE_AICPU_TS, sizeof(AlgResourceCtx), &r.ctx));
    }
    if (r.cpuOnAicpu != cpuOnAicpu) {
        r.cpuOnAicpu = r.host.cpuThreadOnAicpu = cpuOnAicpu;
        CHK(aclrtMemcpy(r.ctx, sizeof r.host, &r.host, sizeof r.host, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    p.aicpuThreadOnCpu = r.aicpuOnCpu;
    p.resCtx = static_cast<AlgResourceCtx*>(r.ctx);
    return HCCL_SUCCESS;
}
}  // namespace

extern "C" HcclResult HcclShiftCustom(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                      HcclComm comm, aclrtStream stream)
{
    if (!sendBuf || !recvBuf || !comm || !stream) return HCCL_E_PTR;
    OpParam p;
    memset(&p, 0, sizeof p);
    p.inputPtr = sendBuf;
    p.outputPtr = recvBuf;
    p.count = count;
    p.dataType = dataType;
    const char* soc = aclrtGetSocName();
    p.devType = strcmp(soc, "Ascend950") == 0 ? 2 : strcmp(soc, "Ascend910_93") == 0 ? 1 : 0;
    CHK(Prepare(comm, stream, p));
    const char* asc = getenv("HCCL_CUSTOM_KERNEL_LAUNCH_ASC");
    CHK(HcommThreadNotifyRecordOnThread(p.cpuThread, p.aicpuThreadOnCpu, 0));
    if (asc && strcmp(asc, "1") == 0) {
        CHK(LaunchShiftAsc(&p, stream));
    } else {
        aclrtFuncHandle fn = nullptr;
        CHK(LoadKernel(&fn));
        aclrtArgsHandle args = nullptr;
        aclrtParamHandle ph = nullptr;
        CHK(aclrtKernelArgsInit(fn, &args));
        CHK(aclrtKernelArgsAppend(args, &p, sizeof p, &ph));
        CHK(aclrtKernelArgsFinalize(args));
        aclrtLaunchKernelAttr attr;
        attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
        attr.value.timeout = kShiftTimeout;
        aclrtLaunchKernelCfg cfg;
        cfg.numAttrs = 1;
        cfg.attrs = &attr;
        CHK(aclrtLaunchKernelWithConfig(fn, 1, stream, &cfg, args, nullptr));
    }
    CHK(HcommThreadNotifyWaitOnThread(p.cpuThread, 0, kShiftTimeout));
    return HCCL_SUCCESS;
}
