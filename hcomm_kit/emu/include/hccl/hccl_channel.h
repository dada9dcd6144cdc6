/*
 * hcomm-kit CPU emulator: HCCL channel descriptors and channel management,
 * matching CANN's <hccl/hccl_channel.h>. Layout and prototypes follow
 * hcomm.md §2.5 and §3.8. Valid C11 and C++.
 */
#ifndef HCCL_CHANNEL_H
#define HCCL_CHANNEL_H

#include <stdint.h>
#include <string.h>
#include "hccl_types.h"
#include "hcomm_res_defs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Handle of memory registered with HcclCommMemReg. */
typedef void *HcclMemHandle;

static const uint32_t HCCL_CHANNEL_MAGIC_WORD = 0x0f0f0f0fU;
static const uint32_t HCCL_CHANNEL_VERSION = 1U;
#ifdef __cplusplus
static const uint32_t HCCL_CHANNEL_DESC_RAW_MAX_LEN = 128U;
#else
enum { HCCL_CHANNEL_DESC_RAW_MAX_LEN = 128 };
#endif

/* Channel request (496 bytes, LP64): remoteRank @16, channelProtocol @20,
 * localEndpoint @24, remoteEndpoint @184, notifyNum @344, memHandles @352,
 * memHandleNum @360, protocol attributes @364. Initialise with HcclChannelDescInit. */
typedef struct {
    CommAbiHeader header;
    uint32_t remoteRank;
    CommProtocol channelProtocol;
    EndpointDesc localEndpoint;
    EndpointDesc remoteEndpoint;
    uint32_t notifyNum;          /* notify slots per end */
    HcclMemHandle *memHandles;   /* registered memory to exchange */
    uint32_t memHandleNum;
    union {
        uint8_t raws[HCCL_CHANNEL_DESC_RAW_MAX_LEN];
        struct {
            uint32_t queueNum;
            uint32_t retryCnt;
            uint32_t retryInterval; /* ms */
            uint8_t tc;
            uint8_t sl;
        } roceAttr;
        struct {
            uint8_t pathMode;
        } ubMemAttr;
    };
} HcclChannelDesc;

/* Opaque channel configuration (HcclChannelAcquireWithConfig). */
typedef void *HcclChannelConfig;

#ifndef LIKELY
#define LIKELY(x) (__builtin_expect(!!(x), 1))
#define UNLIKELY(x) (__builtin_expect(!!(x), 0))
#endif

/* Prepare `descNum` descriptors: every byte 0xFF, then a valid ABI header,
 * remoteRank = ~0, protocol RESERVED, no notifies, no memory handles and both
 * endpoints marked unset. Returns HCCL_SUCCESS or HCCL_E_PTR. */
static inline HcclResult HcclChannelDescInit(HcclChannelDesc *channelDesc, uint32_t descNum)
{
    uint32_t i;
    if (channelDesc == NULL && descNum > 0) {
        return HCCL_E_PTR;
    }
    for (i = 0; i < descNum; ++i) {
        HcclChannelDesc *cur = channelDesc + i;
        memset(cur, 0xFF, sizeof(HcclChannelDesc));
        cur->header.version = HCCL_CHANNEL_VERSION;
        cur->header.magicWord = HCCL_CHANNEL_MAGIC_WORD;
        cur->header.size = (uint32_t)sizeof(HcclChannelDesc);
        cur->header.reserved = 0;
        cur->remoteRank = ~0U;
        cur->channelProtocol = COMM_PROTOCOL_RESERVED;
        cur->notifyNum = 0;
        cur->memHandles = NULL;
        cur->memHandleNum = 0;
        if (EndpointDescInit(&cur->localEndpoint, 1) != 0 || EndpointDescInit(&cur->remoteEndpoint, 1) != 0) {
            return HCCL_E_INTERNAL;
        }
    }
    return HCCL_SUCCESS;
}

/* Collective: both peers call it. Returns the existing channel for a matching
 * (comm, engine, remoteRank, protocol). */
extern HcclResult HcclChannelAcquire(HcclComm comm, CommEngine engine, const HcclChannelDesc *channelDescs,
                                     uint32_t channelNum, ChannelHandle *channels);
extern HcclResult HcclChannelAcquireWithConfig(HcclComm comm, CommEngine engine,
                                               const HcclChannelDesc *channelDescs, uint32_t channelNum,
                                               HcclChannelConfig config, ChannelHandle *channels);
/* Existing channel handle per descriptor, or 0 when none exists. */
extern HcclResult HcclChannelQuery(HcclComm comm, CommEngine engine, const HcclChannelDesc *channelDescs,
                                   uint32_t channelNum, ChannelHandle *channels);
extern HcclResult HcclChannelDestroy(HcclComm comm, const ChannelHandle *channels, uint32_t channelNum);
/* The peer's HCCL buffer: valid as a Write destination or a Read source. */
extern HcclResult HcclChannelGetHcclBuffer(HcclComm comm, ChannelHandle channel, void **buffer, uint64_t *size);
extern HcclResult HcclChannelGetRemoteMems(HcclComm comm, ChannelHandle channel, uint32_t *memNum,
                                           CommMem **remoteMems, char ***memTags);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_CHANNEL_H */
