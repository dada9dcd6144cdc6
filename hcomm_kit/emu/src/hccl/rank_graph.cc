/* HCCL host plane: the rank graph (HcclRankGraph*: one layer, one topology instance of every
 * rank). */
#include "hccl/comm.h"

#include <algorithm>
#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ rank graph
 * Answers from the communicator's topology (hccl/topology.h), with the semantics CANN's own
 * operators read them with (hicann/hccl src/ops/op_common/topo/topo_host.cc: SetSuperPodInfo,
 * CalcGroupIdx): net layer L0 = inside a server, L1 = between servers (inside a super-pod when
 * there are several super-pods of several servers), L2 = between super-pods; the instance size
 * list of a layer has one entry per instance (server, super-pod) in rank order; ranks / rank
 * size by layer are those of the caller's instance. L0 is a full mesh (COMM_TOPO_1DMESH), the
 * upper layers a switched network (COMM_TOPO_CLOS). A link between two ranks exists at the
 * lowest layer whose instance holds both, unless it was taken down (HCOMM_KIT_LINKS_DOWN): then
 * HcclRankGraphGetLinks answers no link. Every rank has one endpoint per layer. */

namespace {
int check_layer(Comm* c, uint32_t layer, const char* api) {
    uint32_t n = c->topo.layers();
    if (layer >= n)
        return (HcclResult)seterr(HCCL_E_PARA, api, "netLayer %u does not exist (this communicator's topology, %s, has %u "
                                  "layer%s: 0..%u)", layer, c->topo.source.c_str(), n, n == 1 ? "" : "s", n - 1);
    return 0;
}

int check_inst(Comm* c, uint32_t layer, uint32_t inst, const char* api) {
    if (int r = check_layer(c, layer, api)) return r;
    uint32_t g = c->topo.groups(layer);
    if (inst >= g)
        return (HcclResult)seterr(HCCL_E_PARA, api, "topoInstId %u does not exist at netLayer %u (instances 0..%u)", inst, layer,
                                  g - 1);
    return 0;
}

/* Protocol of a rank's endpoint at a layer. */
int layer_protocol(const Topology& t, uint32_t layer) {
    if (layer == 0) return t.product == "A2" ? COMM_PROTOCOL_HCCS : t.product == "950" ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    if (layer == 1 && t.layers() == 3 && t.product != "A2") return t.product == "950" ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    return COMM_PROTOCOL_ROCE;
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

HcclResult give_list(Comm* c, const std::vector<uint32_t>& v, uint32_t** out, uint32_t* n) {
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list = v;
    *out = c->graph_list.data();
    *n = (uint32_t)v.size();
    return HCCL_SUCCESS;
}
}  // namespace

EMU_API HcclResult HcclRankGraphGetLayers(HcclComm comm, uint32_t** netLayers, uint32_t* netLayerNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(netLayers);
    NEED_PTR(netLayerNum);
    std::lock_guard<std::mutex> g(c->m);
    c->layer_list.clear();
    for (uint32_t l = 0; l < c->topo.layers(); l++) c->layer_list.push_back(l);
    *netLayers = c->layer_list.data();
    *netLayerNum = (uint32_t)c->layer_list.size();
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByLayer(HcclComm comm, uint32_t netLayer, uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    return give_list(c, c->topo.members(netLayer, c->topo.group(netLayer, c->rank)), ranks, rankNum);
}

EMU_API HcclResult HcclRankGraphGetRankSizeByLayer(HcclComm comm, uint32_t netLayer, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *rankNum = (uint32_t)c->topo.members(netLayer, c->topo.group(netLayer, c->rank)).size();
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoTypeByLayer(HcclComm comm, uint32_t netLayer, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *topoType = netLayer == 0 ? COMM_TOPO_1DMESH : COMM_TOPO_CLOS;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetInstSizeListByLayer(HcclComm comm, uint32_t netLayer, uint32_t** instSizeList,
                                                       uint32_t* listSize) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(instSizeList);
    NEED_PTR(listSize);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    std::vector<uint32_t> sizes;
    for (uint32_t g = 0; g < c->topo.groups(netLayer); g++) sizes.push_back((uint32_t)c->topo.members(netLayer, g).size());
    return give_list(c, sizes, instSizeList, listSize);
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
    std::lock_guard<std::mutex> g(c->m);
    const Topology& t = c->topo;
    if (t.common_layer(srcRank, dstRank) != netLayer || t.is_down(srcRank, dstRank)) {
        c->links.clear();
        *links = nullptr;
        *linkNum = 0;
        if (t.is_down(srcRank, dstRank))
            EMU_LOG(LOG_DEBUG, "%s: the %s link %u-%u is down (HCOMM_KIT_LINKS_DOWN): no link", __func__,
                    link_type_name(t.link(srcRank, dstRank)), srcRank, dstRank);
        return HCCL_SUCCESS;
    }
    int proto = t.protocol(srcRank, dstRank);
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
    return give_list(c, {c->topo.group(netLayer, c->rank)}, topoInsts, topoInstNum);
}

EMU_API HcclResult HcclRankGraphGetTopoType(HcclComm comm, uint32_t netLayer, uint32_t topoInstId, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_inst(c, netLayer, topoInstId, __func__)) return (HcclResult)r;
    *topoType = netLayer == 0 ? COMM_TOPO_1DMESH : COMM_TOPO_CLOS;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByTopoInst(HcclComm comm, uint32_t netLayer, uint32_t topoInstId,
                                                   uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_inst(c, netLayer, topoInstId, __func__)) return (HcclResult)r;
    return give_list(c, c->topo.members(netLayer, topoInstId), ranks, rankNum);
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
    NEED_PTR(num);
    if (int r = check_inst(c, layer, topoInstId, __func__)) return (HcclResult)r;
    *num = (uint32_t)c->topo.members(layer, topoInstId).size();
    return HCCL_SUCCESS;
}

/* *descNum: in, the entries of endpointDesc; out, the endpoints written (one per rank of the
 * instance, in rank order). */
EMU_API HcclResult HcclRankGraphGetEndpointDesc(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t* descNum,
                                                EndpointDesc* endpointDesc) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(descNum);
    NEED_PTR(endpointDesc);
    if (int r = check_inst(c, layer, topoInstId, __func__)) return (HcclResult)r;
    std::vector<uint32_t> m = c->topo.members(layer, topoInstId);
    if (*descNum < m.size())
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "*descNum %u is below the %zu endpoints of topoInst %u at layer %u "
                                  "(HcclRankGraphGetEndpointNum)", *descNum, m.size(), topoInstId, layer);
    int proto = layer_protocol(c->topo, layer);
    for (size_t i = 0; i < m.size(); i++) fill_endpoint(c, &endpointDesc[i], m[i], proto);
    *descNum = (uint32_t)m.size();
    return HCCL_SUCCESS;
}

/* BW_COEFF: relative bandwidth of the endpoint's link type (HCCS/UB 4, RoCE 1); DIE_ID: 0;
 * LOCATION: the EndpointLocType (device). Each a uint32_t: infoLen must be at least 4. */
EMU_API HcclResult HcclRankGraphGetEndpointInfo(HcclComm comm, uint32_t rankId, const EndpointDesc* endpointDesc,
                                                EndpointAttr endpointAttr, uint32_t infoLen, void* info) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(endpointDesc);
    NEED_PTR(info);
    if (rankId >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "rankId %u is not below the rank size %u", rankId, c->nranks);
    if (infoLen < sizeof(uint32_t))
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "infoLen %u is below %zu (each attribute is a uint32_t)", infoLen,
                                  sizeof(uint32_t));
    uint32_t v = 0;
    switch (endpointAttr) {
        case ENDPOINT_ATTR_BW_COEFF: v = endpointDesc->protocol == COMM_PROTOCOL_ROCE ? 1 : 4; break;
        case ENDPOINT_ATTR_DIE_ID: v = 0; break;
        case ENDPOINT_ATTR_LOCATION: v = (uint32_t)ENDPOINT_LOC_TYPE_DEVICE; break;
        default:
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "endpointAttr %d is not an EndpointAttr (BW_COEFF 0, DIE_ID 1, "
                                      "LOCATION 2)", (int)endpointAttr);
    }
    memcpy(info, &v, sizeof v);
    return HCCL_SUCCESS;
}

/* hcomm-kit extension: the communicator's topology as one line of JSON (hcomm_kit/emu_ext.h). */
EMU_API int32_t HcommKitCommTopology(HcclComm comm, char* buf, uint64_t bufLen) {
    Comm* c = comm_from_handle(comm);
    if (!c) return -(int32_t)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)comm);
    std::string j = c->topo.json();
    if (buf && bufLen) {
        size_t n = std::min<size_t>(j.size(), (size_t)bufLen - 1);
        memcpy(buf, j.data(), n);
        buf[n] = 0;
    }
    return (int32_t)j.size();
}
