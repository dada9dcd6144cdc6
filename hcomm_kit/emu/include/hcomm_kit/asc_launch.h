/*
 * hcomm-kit CPU emulator extension: what the Ascend C launch syntax of an AICPU kernel becomes.
 *
 * CANN's ASC compiler turns `Kernel<<<numBlocks, l2ctrl, stream>>>(&args, sizeof(args))` in an
 * .asc file into a launch of the AICPU kernel `Kernel` (declared
 * `extern "C" __global__ __aicpu__ uint32_t Kernel(void *args)`). The emulator's ASC compiler
 * (bin/hk-asc of the tree written by `hcomm-kit config --ascend-home`) rewrites it into the call
 * below. The kernel is looked up by name among the loaded kernel libraries, the libraries
 * installed under $ASCEND_HOME_PATH/opp/vendors/<vendor>/aicpu/kernel (and HCOMM_KIT_KERNEL_PATH),
 * and the program itself; it gets a copy of the argsSize bytes at args. Asynchronous, like any
 * launch; a failure is also the calling thread's last error (aclrtGetLastError).
 */
#ifndef HCOMM_KIT_ASC_LAUNCH_H
#define HCOMM_KIT_ASC_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclError hcomm_kit_asc_launch_aicpu(const char *kernel, uint32_t numBlocks, void *l2ctrl,
                                                        aclrtStream stream, const void *args, size_t argsSize);

#ifdef __cplusplus
}
#endif

#endif /* HCOMM_KIT_ASC_LAUNCH_H */
