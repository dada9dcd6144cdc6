/*
 * hcomm-kit CPU emulator: rank-graph (topology) queries, matching CANN's
 * <hccl/hccl_rank_graph.h>. CommLink layout follows hcomm.md §2.5.
 * Lists returned through pointer-to-pointer parameters are owned by the
 * library and stay valid until the next query on the same communicator.
 */
#ifndef HCCL_RANK_GRAPH_H
#define HCCL_RANK_GRAPH_H

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include "securec.h"
#include "hccl_res.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ENDPOINT_ATTR_INVALID = -1,
    ENDPOINT_ATTR_BW_COEFF = 0,
    ENDPOINT_ATTR_DIE_ID = 1,
    ENDPOINT_ATTR_LOCATION = 2
} EndpointAttr;

typedef uint32_t EndpointAttrBwCoeff;
typedef uint32_t EndpointAttrDieId;
typedef uint32_t EndpointAttrLocation;

typedef enum {
    HCCL_HETEROG_MODE_INVALID = -1,
    HCCL_HETEROG_MODE_HOMOGENEOUS = 0,
    HCCL_HETEROG_MODE_MIX_A2_A3 = 1
} HcclHeterogMode;

/* Anonymous structs are standard C11 and a GNU extension in C++. */
#if defined(__GNUC__)
#define HCOMM_KIT_ANON_STRUCT __extension__
#else
#define HCOMM_KIT_ANON_STRUCT
#endif

static const uint32_t COMM_LINK_MAGIC_WORD = 0x0f0e0f0fU;
static const uint32_t COMM_LINK_VERSION = 1U;

/* One link between two endpoints (464 bytes, LP64): srcEndpointDesc @16,
 * dstEndpointDesc @176, linkAttr @336. */
typedef struct {
    CommAbiHeader header;
    EndpointDesc srcEndpointDesc;
    EndpointDesc dstEndpointDesc;
    union {
        uint8_t raws[128];
        HCOMM_KIT_ANON_STRUCT struct {
            CommProtocol linkProtocol;
            uint8_t hop;
        };
    } linkAttr;
} CommLink;

/* Prepare `linkNum` links: every byte 0xFF, valid ABI header, unset endpoints,
 * protocol RESERVED, hop 1. Returns HCCL_SUCCESS or HCCL_E_PTR. */
static inline HcclResult CommLinkInit(CommLink *commLink, uint32_t linkNum)
{
    uint32_t i;
    if (commLink == NULL && linkNum > 0) {
        return HCCL_E_PTR;
    }
    for (i = 0; i < linkNum; ++i) {
        CommLink *cur = commLink + i;
        memset(cur, 0xFF, sizeof(CommLink));
        cur->header.version = COMM_LINK_VERSION;
        cur->header.magicWord = COMM_LINK_MAGIC_WORD;
        cur->header.size = (uint32_t)sizeof(CommLink);
        cur->header.reserved = 0;
        if (EndpointDescInit(&cur->srcEndpointDesc, 1) != 0 || EndpointDescInit(&cur->dstEndpointDesc, 1) != 0) {
            return HCCL_E_INTERNAL;
        }
        cur->linkAttr.linkProtocol = COMM_PROTOCOL_RESERVED;
        cur->linkAttr.hop = 1;
    }
    return HCCL_SUCCESS;
}

extern HcclResult HcclRankGraphGetLayers(HcclComm comm, uint32_t **netLayers, uint32_t *netLayerNum);
extern HcclResult HcclRankGraphGetRanksByLayer(HcclComm comm, uint32_t netLayer, uint32_t **ranks,
                                               uint32_t *rankNum);
extern HcclResult HcclRankGraphGetRankSizeByLayer(HcclComm comm, uint32_t netLayer, uint32_t *rankNum);
extern HcclResult HcclRankGraphGetTopoTypeByLayer(HcclComm comm, uint32_t netLayer, CommTopo *topoType);
extern HcclResult HcclRankGraphGetInstSizeListByLayer(HcclComm comm, uint32_t netLayer, uint32_t **instSizeList,
                                                      uint32_t *listSize);
extern HcclResult HcclRankGraphGetLinks(HcclComm comm, uint32_t netLayer, uint32_t srcRank, uint32_t dstRank,
                                        CommLink **links, uint32_t *linkNum);
extern HcclResult HcclRankGraphGetTopoInstsByLayer(HcclComm comm, uint32_t netLayer, uint32_t **topoInsts,
                                                   uint32_t *topoInstNum);
extern HcclResult HcclRankGraphGetTopoType(HcclComm comm, uint32_t netLayer, uint32_t topoInstId,
                                           CommTopo *topoType);
extern HcclResult HcclRankGraphGetRanksByTopoInst(HcclComm comm, uint32_t netLayer, uint32_t topoInstId,
                                                  uint32_t **ranks, uint32_t *rankNum);
extern HcclResult HcclGetHeterogMode(HcclComm comm, HcclHeterogMode *mode);
extern HcclResult HcclRankGraphGetEndpointNum(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t *num);
extern HcclResult HcclRankGraphGetEndpointDesc(HcclComm comm, uint32_t layer, uint32_t topoInstId,
                                               uint32_t *descNum, EndpointDesc *endpointDesc);
extern HcclResult HcclRankGraphGetEndpointInfo(HcclComm comm, uint32_t rankId, const EndpointDesc *endpointDesc,
                                               EndpointAttr endpointAttr, uint32_t infoLen, void *info);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_RANK_GRAPH_H */
