/* HCCL host plane: the rank graph (HcclRankGraph*: one layer, one topology instance of every
 * rank). */
#include "hccl/comm.h"

#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ rank graph */

namespace {
int check_layer(Comm* c, uint32_t layer, const char* api) {
    (void)c;
    if (layer != 0) return (HcclResult)seterr(HCCL_E_PARA, api, "netLayer %u does not exist (the emulator has one layer, 0)", layer);
    return 0;
}

void fill_endpoint(Comm* c, EndpointDesc* e, uint32_t rank, int proto) {
    EndpointDescInit(e, 1);
    e->protocol = (CommProtocol)proto;
    memset(e->commAddr.raws, 0, sizeof e->commAddr.raws);
    e->commAddr.type = COMM_ADDR_TYPE_ID;
    e->commAddr.id = rank;
    memset(e->loc.raws, 0, sizeof e->loc.raws);
    e->loc.locType = ENDPOINT_LOC_TYPE_DEVICE;
    e->loc.device.devPhyId = (uint32_t)c->device[rank];
}
}  // namespace

EMU_API HcclResult HcclRankGraphGetLayers(HcclComm comm, uint32_t** netLayers, uint32_t* netLayerNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(netLayers);
    NEED_PTR(netLayerNum);
    c->layer0 = 0;
    *netLayers = &c->layer0;
    *netLayerNum = 1;
    return HCCL_SUCCESS;
}

static HcclResult all_ranks(Comm* c, uint32_t** ranks, uint32_t* rankNum) {
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.resize(c->nranks);
    for (uint32_t r = 0; r < c->nranks; r++) c->graph_list[r] = r;
    *ranks = c->graph_list.data();
    *rankNum = c->nranks;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByLayer(HcclComm comm, uint32_t netLayer, uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    return all_ranks(c, ranks, rankNum);
}

EMU_API HcclResult HcclRankGraphGetRankSizeByLayer(HcclComm comm, uint32_t netLayer, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *rankNum = c->nranks;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoTypeByLayer(HcclComm comm, uint32_t netLayer, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *topoType = COMM_TOPO_1DMESH;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetInstSizeListByLayer(HcclComm comm, uint32_t netLayer, uint32_t** instSizeList,
                                                       uint32_t* listSize) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(instSizeList);
    NEED_PTR(listSize);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.assign(1, c->nranks);
    *instSizeList = c->graph_list.data();
    *listSize = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetLinks(HcclComm comm, uint32_t netLayer, uint32_t srcRank, uint32_t dstRank,
                                         CommLink** links, uint32_t* linkNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(links);
    NEED_PTR(linkNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (srcRank >= c->nranks || dstRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "srcRank %u / dstRank %u: both must be below the rank size %u", srcRank,
                      dstRank, c->nranks);
    if (srcRank == dstRank) return (HcclResult)seterr(HCCL_E_PARA, __func__, "srcRank and dstRank are both %u: no link to itself", srcRank);
    int proto = is_950() ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    std::lock_guard<std::mutex> g(c->m);
    c->links.resize(1);
    CommLink* l = &c->links[0];
    CommLinkInit(l, 1);
    fill_endpoint(c, &l->srcEndpointDesc, srcRank, proto);
    fill_endpoint(c, &l->dstEndpointDesc, dstRank, proto);
    memset(l->linkAttr.raws, 0, sizeof l->linkAttr.raws);
    l->linkAttr.linkProtocol = (CommProtocol)proto;
    l->linkAttr.hop = 1;
    *links = c->links.data();
    *linkNum = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoInstsByLayer(HcclComm comm, uint32_t netLayer, uint32_t** topoInsts,
                                                    uint32_t* topoInstNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoInsts);
    NEED_PTR(topoInstNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.assign(1, 0);
    *topoInsts = c->graph_list.data();
    *topoInstNum = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoType(HcclComm comm, uint32_t netLayer, uint32_t topoInstId, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (topoInstId != 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "topoInstId %u does not exist (only 0)", topoInstId);
    *topoType = COMM_TOPO_1DMESH;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByTopoInst(HcclComm comm, uint32_t netLayer, uint32_t topoInstId,
                                                   uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (topoInstId != 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "topoInstId %u does not exist (only 0)", topoInstId);
    return all_ranks(c, ranks, rankNum);
}

EMU_API HcclResult HcclGetHeterogMode(HcclComm comm, HcclHeterogMode* mode) {
    RESOLVE_COMM(c, comm);
    (void)c;
    NEED_PTR(mode);
    *mode = HCCL_HETEROG_MODE_HOMOGENEOUS;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetEndpointNum(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t* num) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)num;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint queries (layer %u, topoInst %u) are not emulated; use "
                  "HcclRankGraphGetLinks", layer, topoInstId);
}

EMU_API HcclResult HcclRankGraphGetEndpointDesc(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t* descNum,
                                                EndpointDesc* endpointDesc) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)descNum;
    (void)endpointDesc;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint queries (layer %u, topoInst %u) are not emulated; use "
                  "HcclRankGraphGetLinks", layer, topoInstId);
}

EMU_API HcclResult HcclRankGraphGetEndpointInfo(HcclComm comm, uint32_t rankId, const EndpointDesc* endpointDesc,
                                                EndpointAttr endpointAttr, uint32_t infoLen, void* info) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)endpointDesc;
    (void)infoLen;
    (void)info;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint attribute %d of rank %u is not emulated", (int)endpointAttr,
                  rankId);
}
