/* C11 compile-only check of the emulator's public headers (hcomm-kit).
 *   gcc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I hcomm_kit/emu/include tests/c/header_check_c.c
 */
#include <stddef.h>
#include <stdint.h>

#include <securec.h>
#include <acl/acl.h>
#include <acl/acl_base.h>
#include <acl/acl_base_rt.h>
#include <acl/acl_base_mdl.h>
#include <acl/acl_rt.h>
#include <acl/error_codes/rt_error_codes.h>
#include <acl/error_codes/ge_error_codes.h>
#include <hcomm_res_defs.h>
#include <hccl/hccl_types.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hccl_rank_graph.h>
#include <hccl/hccl_launch.h>
#include <hccl/hccl_comm.h>
#include <hccl/hcomm_primitives.h>
#include <hcomm/hcomm_primitives.h>

_Static_assert(sizeof(aclrtTimeoutUs) == 8, "aclrtTimeoutUs");
_Static_assert(sizeof(aclrtLaunchKernelAttrValue) == 16, "aclrtLaunchKernelAttrValue");
_Static_assert(sizeof(aclrtLaunchKernelAttr) == 20, "aclrtLaunchKernelAttr");
_Static_assert(offsetof(aclrtLaunchKernelAttr, value) == 4, "aclrtLaunchKernelAttr.value");
_Static_assert(sizeof(aclrtLaunchKernelCfg) == 16, "aclrtLaunchKernelCfg");
_Static_assert(offsetof(aclrtLaunchKernelCfg, numAttrs) == 8, "aclrtLaunchKernelCfg.numAttrs");
_Static_assert(sizeof(aclrtPlaceHolderInfo) == 8, "aclrtPlaceHolderInfo");
_Static_assert(sizeof(aclrtBinaryLoadOptionValue) == 16, "aclrtBinaryLoadOptionValue");
_Static_assert(sizeof(aclrtBinaryLoadOption) == 20, "aclrtBinaryLoadOption");
_Static_assert(sizeof(aclrtBinaryLoadOptions) == 16, "aclrtBinaryLoadOptions");
_Static_assert(sizeof(aclrtMemcpyKind) == 4 && sizeof(aclrtMemMallocPolicy) == 4, "4-byte enums");
_Static_assert(ACL_MINOR_VERSION == 17, "ACL 1.17");
_Static_assert(ACL_ERROR_RT_AICPU_EXCEPTION == 507018, "rt code");

_Static_assert(sizeof(HcclRootInfo) == 4108, "HcclRootInfo");
_Static_assert(sizeof(HcclResult) == 4, "HcclResult");
_Static_assert(HCCL_CMD_MAX == 104, "HcclCMDType");
_Static_assert(HCCL_E_RESERVED == 1042, "HcclResult");
_Static_assert(sizeof(HcommBatchTransferDesc) == 64, "HcommBatchTransferDesc");
_Static_assert(offsetof(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.notifyIdx) == 40, "wrn.idx");
_Static_assert(sizeof(CommMem) == 24, "CommMem");
_Static_assert(sizeof(ThreadConfig) == 32, "ThreadConfig");
_Static_assert(sizeof(CommAddr) == 40, "CommAddr");
_Static_assert(sizeof(EndpointLoc) == 64, "EndpointLoc");
_Static_assert(sizeof(EndpointDesc) == 160, "EndpointDesc");
_Static_assert(offsetof(EndpointDesc, raws) == 108, "EndpointDesc.raws");
_Static_assert(sizeof(HcclChannelDesc) == 496, "HcclChannelDesc");
_Static_assert(offsetof(HcclChannelDesc, raws) == 364, "HcclChannelDesc union");
_Static_assert(sizeof(CommLink) == 464, "CommLink");
_Static_assert(offsetof(CommLink, linkAttr) == 336, "CommLink.linkAttr");
_Static_assert(sizeof(HcclKernelFuncInfo) == 528, "HcclKernelFuncInfo");
_Static_assert(sizeof(HcclKernelLaunchCfg) == 128, "HcclKernelLaunchCfg");
_Static_assert(sizeof(HcclOpDesc) == 360, "HcclOpDesc");
_Static_assert(offsetof(HcclOpDesc, p2p) == 280, "HcclOpDesc.p2p");

int header_check_c(void);
int header_check_c(void)
{
    ThreadConfig tc[2];
    HcclChannelDesc cd;
    HcclCommConfig cc;
    CommLink link;
    char buf[16];
    HcclCommConfigInit(&cc);
    if (ThreadConfigInit(tc, 2) != 0 || HcclChannelDescInit(&cd, 1) != HCCL_SUCCESS ||
        CommLinkInit(&link, 1) != HCCL_SUCCESS) {
        return 1;
    }
    (void)snprintf_s(buf, sizeof(buf), sizeof(buf) - 1, "%d", 1);
    return (aclError)ACL_SUCCESS;
}
