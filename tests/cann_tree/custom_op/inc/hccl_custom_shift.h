/* Public API of the test operator: recvBuf of rank r = sendBuf of rank r-1 (ring shift). */
#ifndef HCCL_CUSTOM_SHIFT_H
#define HCCL_CUSTOM_SHIFT_H

#include <hccl/hccl_types.h>
#include <acl/acl_rt.h>

#ifdef __cplusplus
extern "C" {
#endif
HcclResult HcclShiftCustom(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclComm comm,
                           aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
