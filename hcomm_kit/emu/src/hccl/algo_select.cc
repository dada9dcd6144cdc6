/* HCCL host plane: the algorithm of a built-in collective, as CANN's HCCL chooses it (see
 * algo_select.h). Line numbers cited below are of hicann/hccl at 09300b70; the emulator's own code
 * restates the decisions, it does not copy CANN's. */
#include "hccl/algo_select.h"

#include "base/json.h"
#include "base/reduce.h"
#include "hccl/comm.h"
#include "hccl/hooks.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>

namespace emu {

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

uint32_t gcd(uint32_t a, uint32_t b) {
    while (b) {
        uint32_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

bool all_equal(const std::vector<uint32_t>& v) {
    return std::all_of(v.begin(), v.end(), [&](uint32_t x) { return x == v.front(); });
}

std::string json_list(const std::vector<uint32_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

std::string json_escape(const std::string& in) {
    std::string s;
    for (char ch : in) {
        if (ch == '"' || ch == '\\') s += '\\';
        if ((unsigned char)ch < 0x20) {
            s += strprintf("\\u%04x", (unsigned)ch);
            continue;
        }
        s += ch;
    }
    return s;
}

bool is64bit(int dt) {  /* auto_selector_base.h Is64BitDataType */
    return dt == HCCL_DATA_TYPE_INT64 || dt == HCCL_DATA_TYPE_UINT64 || dt == HCCL_DATA_TYPE_FP64;
}

/* IsTwoLevelNetLayer (auto_selector_base.cc:269): more than one net layer, a CLOS instance at layer
 * 1, more than one rank in the local layer-0 instance (host-DPU-only never: the rank graph's
 * endpoints are on devices). */
bool two_level_net(const CannTopoInfo& t) {
    return t.netLayerNum > 1 && t.level1Clos && !t.localNetInsSizeOfLayer.empty() && t.localNetInsSizeOfLayer[0] > 1;
}

uint32_t local0(const CannTopoInfo& t) { return t.localNetInsSizeOfLayer.empty() ? 0 : t.localNetInsSizeOfLayer[0]; }
uint32_t local1(const CannTopoInfo& t) { return t.localNetInsSizeOfLayer.size() > 1 ? t.localNetInsSizeOfLayer[1] : 0; }

/* A branch of CANN's selector: the name and where (file:line). */
struct Pick {
    AlgoPick* out;
    const char* file;
    bool operator()(const char* name, int line) const {
        out->name = name;
        out->source = strprintf("%s:%d", file, line);
        return true;
    }
};

bool not_emulated(const CannTopoInfo& t, const char* file, int line, std::string* why) {
    *why = strprintf("level-0 shape %s (%s:%d) is not one the emulator's rank graph produces",
                     t.level0Topo == CannTopoInfo::CLOS ? "CLOS" : "MESH_1D_CLOS", file, line);
    return false;
}

/* ---- AllReduceAutoSelector (src/ops/all_reduce/selector/all_reduce_auto_selector.cc) ---- */
bool select_allreduce(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* out, std::string* why) {
    const char* F = "all_reduce_auto_selector.cc";
    Pick pick{out, F};
    const uint64_t d = q.count * dtype_size(q.dtype);
    const uint32_t n = t.userRankSize;
    /* DETERMINISTIC_STRICT (HCCL_DETERMINISTIC, lines 412-425) is not emulated: never strict. */
    const bool special = is64bit(q.dtype) || q.op == HCCL_REDUCE_PROD; /* :427-430 */
    if (t.topoLevelNums > 1) {                                         /* :432 */
        if (special) return pick("AicpuAllReduceSoleNHRAicpuReduce", 434);
        if (t.topoLevelNums == 3 && t.level2Uboe) {
            bool sym = t.level0Symmetric && t.level1Symmetric;
            if (sym && t.deviceNumPerModule == 8) return pick("AicpuAllReducePipeLine", 438);
            if (!sym || local1(t) == 1) return pick("AicpuAllReduceSoleNHR", 440);
            return pick("InsAllReduceParallelRSAGUboe", 442);
        }
        if (t.Level1Nhr) return pick("AicpuAllReduceSoleNHR", 446);
        if (local0(t) == 1) return pick("AicpuAllReduceSoleNHR", 449);
        if (t.level0Topo == CannTopoInfo::MESH_1D) {
            if (t.topoLevelNums == 3) return pick("AicpuAllReduceSequenceMeshConcurNHRNHR", 452);
            if (t.topoLevelNums == 2) {
                if (d > 32 * MiB) /* AR_AICPU_1D_CROSS_SMALL_DATA_SIZE */
                    return d > 4 * GiB ? pick("AicpuAllReduceSequenceMeshConcurNHR", 455)
                                       : pick("AicpuAllReduceParallelMeshNHR", 456);
                return pick("AicpuAllReduceSoleNHR", 458);
            }
            return pick("AicpuAllReduceSoleNHR", 461);
        }
        if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuAllReduceSoleNHRTwoShotMultiLink", 464);
        *why = strprintf("%s:466: no AICPU algorithm for level-0 shape %d across levels", F, (int)t.level0Topo);
        return false;
    }
    /* SelectMeshAlgoAicpu (:517) */
    const double ratio = n ? 8.0 / n / n : 1.0; /* DEFAULT_RANK_SIZE / n / n (:533) */
    const bool two = two_level_net(t);
    if (t.level0Topo == CannTopoInfo::MESH_1D) {
        if (special)
            return d <= 8 * MiB ? pick("AicpuAllReduceSoleMeshOneShot", 539) : pick("AicpuAllReduceSoleMeshTwoShot", 540);
        if (two && n == 2 && d >= 8 * MiB) return pick("AicpuAllReduceSoleMeshConcur", 543);
        if (d <= 8 * MiB) return pick("AicpuAllReduceSoleMeshOneShot", 545);
        if ((double)d * ratio > (double)(32 * MiB))
            return two && d > 4 * GiB ? pick("AicpuAllReduceSoleMeshConcur", 547)
                                      : pick("AicpuAllReduceSoleMeshChunkTwoShot", 548);
        return pick("AicpuAllReduceSoleMeshTwoShot", 550);
    }
    if (t.level0Topo == CannTopoInfo::CLOS)
        return special ? pick("AicpuAllReduceSoleNHRAicpuReduce", 554) : pick("AicpuAllReduceSoleNHRTwoShotMultiLink", 556);
    return not_emulated(t, F, 558, why);
}

/* ---- AllGatherAutoSelector (src/ops/all_gather/selector/all_gather_auto_selector.cc) ---- */
bool select_allgather(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* out, std::string* why) {
    const char* F = "all_gather_auto_selector.cc";
    Pick pick{out, F};
    const uint64_t d = q.count * dtype_size(q.dtype);
    const uint64_t n = t.userRankSize;
    if (t.topoLevelNums > 1) { /* :314 */
        if (t.topoLevelNums == 3 && t.level2Uboe) {
            bool sym = t.level0Symmetric && t.level1Symmetric;
            if (sym && t.deviceNumPerModule == 8) return pick("AicpuAllGatherPipeLine", 318);
            if (!sym || local1(t) == 1) return pick("AicpuAllGatherSoleNHR", 320);
            return pick("AicpuAllGatherParallelNHRNHR", 322);
        }
        if (t.Level1Nhr) return pick("AicpuAllGatherSoleNHR", 325);
        if (t.Level0Nhr) return pick("AicpuAllGatherSoleNHR", 328);
        if (local0(t) == 1) return pick("AicpuAllGatherSoleNHR", 330);
        if (t.level0Topo == CannTopoInfo::MESH_1D) {
            if (t.topoLevelNums >= 3) return pick("AicpuAllGatherSequenceMeshConcurNHRNHR", 335);
            if (d * n >= 1 * GiB && n >= 1024) return pick("AicpuAllGatherParallelMeshNHR", 339);
            if (d > 1 * MiB) /* AG_AICPU_SMALL_DATA_SIZE */
                return d * n > 4 * GiB ? pick("AicpuAllGatherSequenceMeshConcurNHR", 342)
                                       : pick("AicpuAllGatherParallelMeshNHR", 343);
            return pick("AicpuAllGatherSoleNHR", 345);
        }
        if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuAllGatherSoleNHRMultiLink", 348);
        *why = strprintf("%s:351: no AICPU algorithm for level-0 shape %d across levels", F, (int)t.level0Topo);
        return false;
    }
    if (t.level0Topo == CannTopoInfo::MESH_1D) {
        if (two_level_net(t) && (d * n > 1 * GiB || (n == 2 && d >= 4 * MiB)))
            return pick("AicpuAllGatherSoleMeshConcur", 358);
        return pick("AicpuAllGatherSoleMesh", 360);
    }
    if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuAllGatherSoleNHRMultiLink", 397);
    return not_emulated(t, F, 362, why);
}

/* ---- ReduceScatterAutoSelector (src/ops/reduce_scatter/selector/reduce_scatter_auto_selector.cc) ---- */
bool select_reduce_scatter(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* out, std::string* why) {
    const char* F = "reduce_scatter_auto_selector.cc";
    Pick pick{out, F};
    const uint64_t d = q.count * dtype_size(q.dtype); /* DataDes.count = recvCount (reduce_scatter_op.cc:177) */
    const uint64_t n = t.userRankSize;
    const bool special = is64bit(q.dtype) || q.op == HCCL_REDUCE_PROD;
    if (t.topoLevelNums > 1) { /* :421 */
        if (special) return pick("AicpuReduceScatterSoleNHRAicpuReduce", 423);
        if (t.topoLevelNums == 3 && t.level2Uboe) {
            bool sym = t.level0Symmetric && t.level1Symmetric;
            if (sym && t.deviceNumPerModule == 8) return pick("AicpuReduceScatterPipeLine", 427);
            if (!sym || local1(t) == 1) return pick("AicpuReduceScatterSoleNHR", 429);
            return pick("InsReduceScatterParallelNHRNHRUboe", 431);
        }
        if (t.Level1Nhr) return pick("AicpuReduceScatterSoleNHR", 434);
        if (t.Level0Nhr) return pick("AicpuReduceScatterSoleNHR", 437);
        if (local0(t) > 1 && t.level0Topo == CannTopoInfo::MESH_1D) {
            if (t.topoLevelNums == 3) return pick("AicpuReduceScatterSequenceMeshConcurNHRNHR", 444);
            if (d * n >= 1 * GiB && n >= 256) return pick("AicpuReduceScatterParallelMeshNHR", 448);
            if (d > 4 * MiB) /* RS_AICPU_1D_MIN_DATA_SIZE */
                return d * n > 4 * GiB ? pick("AicpuReduceScatterSequenceMeshConcurNHR", 451)
                                       : pick("AicpuReduceScatterParallelMeshNHR", 452);
            return pick("AicpuReduceScatterSoleNHR", 454);
        }
        if (local0(t) == 1) return pick("AicpuReduceScatterSoleNHR", 457);
        if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuReduceScatterSoleNHRMultiLink", 459);
        *why = strprintf("%s:464: no AICPU algorithm for level-0 shape %d across levels", F, (int)t.level0Topo);
        return false;
    }
    /* SelectMeshAlgoAicpu (:502), SelectMeshAlgoAicpuForMesh1D (:473) */
    const double ratio = n ? (8.0 / n) * (8.0 / n) : 1.0; /* :512 */
    if (t.level0Topo == CannTopoInfo::MESH_1D) {
        if (special) return pick("AicpuReduceScatterSoleMesh", 478);
        if (two_level_net(t)) {
            if (n == 2 && d >= 4 * MiB) return pick("AicpuReduceScatterSoleMeshConcur", 482);
            if (d * n > 1536 * MiB) return pick("AicpuReduceScatterSoleMeshChunk", 484);
            if ((double)d * ratio > (double)(16 * MiB)) return pick("AicpuReduceScatterSoleMeshChunk", 486);
            return pick("AicpuReduceScatterSoleMesh", 488);
        }
        if ((double)d * ratio > (double)(16 * MiB)) return pick("AicpuReduceScatterSoleMeshChunk", 492);
        return pick("AicpuReduceScatterSoleMesh", 494);
    }
    if (t.level0Topo == CannTopoInfo::CLOS)
        return special ? pick("AicpuReduceScatterSoleNHRAicpuReduce", 518) : pick("AicpuReduceScatterSoleNHRMultiLink", 520);
    return not_emulated(t, F, 522, why);
}

/* ---- BroadcastAutoSelector (src/ops/broadcast/selector/broadcast_auto_selector.cc) ---- */
bool select_broadcast(const CannTopoInfo& t, const AlgoQuery&, AlgoPick* out, std::string* why) {
    const char* F = "broadcast_auto_selector.cc";
    Pick pick{out, F};
    if (t.topoLevelNums > 1) { /* :202 */
        if (t.topoLevelNums == 3) {
            bool sym = t.level0Symmetric && t.level1Symmetric;
            if (!sym || local0(t) == 1) return pick("AicpuBroadcastSoleNHR", 206);
            if (t.level0Topo == CannTopoInfo::MESH_1D && !t.level2Uboe) return pick("AicpuBroadcastSequenceMesh1dNHRNHR", 208);
            return pick("InsBroadcastParallelNHRNHRUboe", 210);
        }
        if (t.Level1Nhr) return pick("AicpuBroadcastSoleNHR", 213);
        if (local0(t) == 1) return pick("AicpuBroadcastSoleNHR", 215);
        if (t.level0Topo == CannTopoInfo::MESH_1D) return pick("AicpuBroadcastParallelMeshNHR", 217);
        if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuBroadcastSoleNHRTwoShotMultiLink", 219);
        *why = strprintf("%s:222: no AICPU algorithm for level-0 shape %d across levels", F, (int)t.level0Topo);
        return false;
    }
    if (t.level0Topo == CannTopoInfo::MESH_1D) return pick("AicpuBroadcastSoleMeshTwoShot", 236); /* :232 */
    if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuBroadcastSoleNHRTwoShotMultiLink", 246);
    return not_emulated(t, F, 237, why);
}

/* ---- ReduceAutoSelector (src/ops/reduce/selector/reduce_auto_selector.cc) ---- */
bool select_reduce(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* out, std::string* why) {
    const char* F = "reduce_auto_selector.cc";
    Pick pick{out, F};
    const uint64_t d = q.count * dtype_size(q.dtype);
    const bool special = is64bit(q.dtype) || q.op == HCCL_REDUCE_PROD;
    if (t.topoLevelNums > 1) { /* :278 */
        if (special) return pick("AicpuReduceSoleNHRAicpuReduce", 280);
        if (local0(t) == 1 || t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuReduceSoleNHR", 283);
        const bool sym = t.level0Symmetric && t.level1Symmetric;
        if (t.topoLevelNums == 3 && t.level2Uboe)
            return !sym || local1(t) == 1 ? pick("AicpuReduceSoleNHRAicpuReduce", 287) : pick("ReduceParallelNHRNHRUboe", 289);
        if (t.topoLevelNums == 3 && t.level0Topo == CannTopoInfo::MESH_1D)
            return sym ? pick("AicpuReduceSequenceMesh1DNHRNHR", 294) : pick("AicpuReduceSoleNHR", 296);
        if (t.Level1Nhr) return pick("AicpuReduceSoleNHR", 299);
        if (t.deviceNumPerModule > 1 && t.level0Topo == CannTopoInfo::MESH_1D) return pick("AicpuReduceParallelMeshNHR", 301);
        *why = strprintf("%s:303: no AICPU algorithm across levels here", F);
        return false;
    }
    if (t.level0Topo == CannTopoInfo::MESH_1D) /* SelectMeshAlgoAicpu (:312) */
        return d >= 8 * MiB ? pick("AicpuReduceSoleMeshTwoShot", 322) : pick("AicpuReduceSoleMesh", 324);
    if (t.level0Topo == CannTopoInfo::CLOS)
        return special ? pick("AicpuReduceSoleNHRAicpuReduce", 358) : pick("AicpuReduceSoleNHR", 360);
    return not_emulated(t, F, 326, why);
}

/* ---- ScatterAutoSelector (src/ops/scatter/selector/scatter_auto_selector.cc) ---- */
bool select_scatter(const CannTopoInfo& t, const AlgoQuery&, AlgoPick* out, std::string* why) {
    const char* F = "scatter_auto_selector.cc";
    Pick pick{out, F};
    if (t.topoLevelNums > 1) { /* SelectMultiLevelAicpuAlgo (:161) */
        if (t.topoLevelNums == 3) {
            bool sym = t.level0Symmetric && t.level1Symmetric;
            if (!sym || local0(t) == 1) return pick("AicpuScatterSoleNHR", 167);
            if (t.level0Topo == CannTopoInfo::MESH_1D && !t.level2Uboe) return pick("AicpuScatterSequenceMeshConcurNHRNHR", 169);
            return pick("AicpuScatterSoleNHR", 171);
        }
        if (t.Level1Nhr) return pick("AicpuScatterSoleNHR", 174);
        if (local0(t) == 1) return pick("AicpuScatterSoleNHR", 176);
        if (t.level0Topo == CannTopoInfo::MESH_1D) return pick("AicpuScatterParallelMeshNHR", 178);
        if (t.level0Topo == CannTopoInfo::CLOS) return pick("AicpuScatterSoleNHR", 180);
        *why = strprintf("%s:183: no AICPU algorithm for level-0 shape %d across levels", F, (int)t.level0Topo);
        return false;
    }
    if (t.level0Topo == CannTopoInfo::MESH_1D) return pick("AicpuScatterSoleMesh", 192); /* :188 */
    if (t.level0Topo == CannTopoInfo::CLOS)
        return t.level0PcieMix ? pick("AicpuScatterSoleNHR", 203) : pick("AicpuScatterSoleMesh", 205);
    return not_emulated(t, F, 193, why);
}

/* ---- AlltoAll / AlltoAllV / AlltoAllVC (src/ops/all_to_all_v/selector/) ---- */
bool select_alltoall(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* out, std::string* why) {
    const char* F = "alltoall_auto_selector.cc";
    Pick pick{out, F};
    /* :141-149 names AicpuAllToAllSoleMesh across levels, then :151 decides again by size for
     * MESH_1D / CLOS (no return in between): the size rule is what holds. */
    if (t.level0Topo == CannTopoInfo::MESH_1D || t.level0Topo == CannTopoInfo::CLOS) {
        const uint64_t d = q.count * dtype_size(q.dtype); /* sendCounts[0] x type size (:157) */
        if (d * t.userRankSize > 150 * MiB) return pick("AicpuAllToAllSoleMesh", 159);
        return pick("AicpuAllToAllSoleMeshSingleChannel", 161);
    }
    return not_emulated(t, F, 163, why);
}

bool select_alltoallv(const CannTopoInfo& t, const AlgoQuery&, AlgoPick* out, std::string* why) {
    const char* F = "alltoallv_auto_selector.cc";
    Pick pick{out, F};
    if (t.level0Topo == CannTopoInfo::MESH_1D || t.level0Topo == CannTopoInfo::CLOS)
        return pick("AicpuAllToAllVSoleMesh", 120); /* :119 (the :112 choice across levels is the same) */
    return not_emulated(t, F, 121, why);
}

}  // namespace

/* ---------------------------------------------------------------- topology fields */

CannTopoInfo cann_topo_info(const Topology& t, uint32_t rank) {
    CannTopoInfo i;
    i.userRank = rank;
    i.userRankSize = t.nranks;
    i.product = t.product;
    /* ExtractNetLayerDetails (topo_host.cc:886): per net layer of the rank graph, the instance
     * sizes, their number and the size of this rank's instance */
    const uint32_t layers = t.layers();
    i.netLayerNum = layers;
    for (uint32_t l = 0; l < layers; l++) {
        std::vector<uint32_t> sizes;
        for (uint32_t g = 0; g < t.groups(l); g++) sizes.push_back((uint32_t)t.members(l, g).size());
        i.instSizeListOfLayer.push_back(sizes);
        i.netInstNumOfLayer.push_back(t.groups(l));
        i.localNetInsSizeOfLayer.push_back((uint32_t)t.members(l, t.group(l, rank)).size());
    }
    /* the smallest number of layers whose last one has a single instance (:933-941) */
    i.topoLevelNums = 0;
    for (uint32_t l = 0; l < layers; l++) {
        i.topoLevelNums++;
        if (i.netInstNumOfLayer[l] == 1) break;
    }
    i.level0Symmetric = all_equal(i.instSizeListOfLayer[0]);                                /* :954-960 */
    i.level1Symmetric = i.topoLevelNums > 1 && all_equal(i.instSizeListOfLayer[1]);          /* :962-968 */
    if (i.topoLevelNums > 1) {                                                               /* CalcLevel1Nhr (:638) */
        uint32_t g = 0;
        for (uint32_t s : i.instSizeListOfLayer[0]) g = gcd(g, s);
        i.Level1Nhr = g == 1;
    }
    /* ExtractTopoDetails + CalcLevel0TopoShape (:578): the rank graph gives a rank one topology
     * instance per layer, COMM_TOPO_1DMESH of its server's ranks at layer 0, COMM_TOPO_CLOS above:
     * one 1DMESH instance of localNetInsSizeOfLayer[0] ranks -> MESH_1D (:596-605) */
    i.level0Topo = CannTopoInfo::MESH_1D;
    i.level1Clos = layers > 1;
    i.serverNum = t.groups(0);                    /* CalcGroupIdx (:262): L0 instances */
    i.deviceNumPerModule = i.localNetInsSizeOfLayer[0]; /* GetDeviceNumPerModule (:396): RankSizeByLayer(L0) */
    /* Is2DieFullMesh (:1046) and CalcLevel0MeshType (:1103) ask for a link to every other rank of
     * the server when it has more than 2: a link taken down leaves HcclRankGraphGetLinks without
     * one and the calculation fails (CHK_PTR_NULL, :1070). Every endpoint is on die 0: one die. */
    const std::vector<uint32_t> mine = t.members(0, t.group(0, rank));
    if (mine.size() > 2)
        for (uint32_t q : mine)
            if (q != rank && t.is_down(rank, q)) {
                i.error = strprintf("rank %u has no link to rank %u of its server (the %s link %u-%u is down), so "
                                    "CANN's topology calculation fails there (topo_host.cc:1070, Is2DieFullMesh)",
                                    rank, q, link_type_name(t.link(rank, q)), std::min(rank, q), std::max(rank, q));
                break;
            }
    i.level0MeshType = CannTopoInfo::SINGLE_DIE; /* :1114-1157 */
    return i;
}

std::string CannTopoInfo::json() const {
    std::string s = strprintf("{\"userRank\":%u,\"userRankSize\":%u,\"product\":\"%s\",\"serverNum\":%u,"
                              "\"deviceNumPerModule\":%u,\"netLayerNum\":%u,\"topoLevelNums\":%u,",
                              userRank, userRankSize, product.c_str(), serverNum, deviceNumPerModule, netLayerNum,
                              topoLevelNums);
    s += "\"netInstNumOfLayer\":" + json_list(netInstNumOfLayer) + ",\"localNetInsSizeOfLayer\":" +
         json_list(localNetInsSizeOfLayer) + ",\"instSizeListOfLayer\":[";
    for (size_t l = 0; l < instSizeListOfLayer.size(); l++) s += (l ? "," : "") + json_list(instSizeListOfLayer[l]);
    s += strprintf("],\"level0Topo\":%d,\"level0MeshType\":%d,\"Level0Nhr\":%d,\"Level1Nhr\":%d,\"is2DieFullMesh\":%d,"
                   "\"level0PcieMix\":%d,\"level2Uboe\":%d,\"level2UbRtp\":%d,\"hostDpuOnly\":%d,\"level0Symmetric\":%d,"
                   "\"level1Symmetric\":%d,\"level1Clos\":%d,\"twoLevelNetLayer\":%d,\"error\":\"%s\"}",
                   (int)level0Topo, (int)level0MeshType, Level0Nhr, Level1Nhr, is2DieFullMesh, level0PcieMix,
                   level2Uboe, level2UbRtp, hostDpuOnly, level0Symmetric, level1Symmetric, level1Clos,
                   two_level_net(*this), json_escape(error).c_str());
    return s;
}

/* ---------------------------------------------------------------- the rule-based choice */

bool auto_select(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* pick, std::string* why) {
    Pick p{pick, ""};
    switch (q.coll) {
        case HCCL_CMD_ALLREDUCE: return select_allreduce(t, q, pick, why);
        case HCCL_CMD_ALLGATHER: return select_allgather(t, q, pick, why);
        case HCCL_CMD_REDUCE_SCATTER: return select_reduce_scatter(t, q, pick, why);
        case HCCL_CMD_BROADCAST: return select_broadcast(t, q, pick, why);
        case HCCL_CMD_REDUCE: return select_reduce(t, q, pick, why);
        case HCCL_CMD_SCATTER: return select_scatter(t, q, pick, why);
        case HCCL_CMD_ALLTOALL: return select_alltoall(t, q, pick, why);
        case HCCL_CMD_ALLTOALLV: return select_alltoallv(t, q, pick, why);
        case HCCL_CMD_ALLTOALLVC: p.file = "alltoallvc_auto_selector.cc"; return p("AicpuAllToAllVCSoleMesh", 63);
        case HCCL_CMD_ALLGATHER_V: p.file = "all_gather_v_auto_selector.cc"; return p("AicpuAllGatherVSoleMesh", 88);
        case HCCL_CMD_REDUCE_SCATTER_V:
            if (q.dtype == HCCL_DATA_TYPE_UINT64 || q.dtype == HCCL_DATA_TYPE_FP64) {
                *why = "reduce_scatter_v_auto_selector.cc:186-189: uint64 and fp64 have no AICPU algorithm";
                return false;
            }
            p.file = "reduce_scatter_v_auto_selector.cc";
            return p("AicpuReduceScatterVSoleMesh", 193);
        case HCCL_CMD_BARRIER: p.file = "barrier_auto_selector.cc"; return p("AicpuBarrierSoleNHR", 41);
        case HCCL_CMD_BATCH_SEND_RECV:
            p.file = "batch_send_recv_auto_selector.cc";
            return p("AicpuBatchSendRecvSoleMesh", 24);
        case HCCL_CMD_SEND: p.file = "send_auto_selector.cc"; return p("AicpuSendSole", 24);
        case HCCL_CMD_RECEIVE: p.file = "recv_auto_selector.cc"; return p("AicpuRecvSole", 24);
        default:
            *why = strprintf("CANN has no selector for %s (HcclCMDType %d)", coll_label(q.coll), q.coll);
            return false;
    }
}

const char* coll_label(int coll) {
    switch (coll) {
        case HCCL_CMD_BROADCAST: return "broadcast";
        case HCCL_CMD_ALLREDUCE: return "allreduce";
        case HCCL_CMD_REDUCE: return "reduce";
        case HCCL_CMD_SEND: return "send";
        case HCCL_CMD_RECEIVE: return "recv";
        case HCCL_CMD_ALLGATHER: return "allgather";
        case HCCL_CMD_REDUCE_SCATTER: return "reduce_scatter";
        case HCCL_CMD_ALLTOALLV: return "alltoallv";
        case HCCL_CMD_ALLTOALLVC: return "alltoallvc";
        case HCCL_CMD_ALLTOALL: return "alltoall";
        case HCCL_CMD_GATHER: return "gather";
        case HCCL_CMD_SCATTER: return "scatter";
        case HCCL_CMD_BATCH_SEND_RECV: return "batch_send_recv";
        case HCCL_CMD_ALLGATHER_V: return "allgatherv";
        case HCCL_CMD_REDUCE_SCATTER_V: return "reduce_scatter_v";
        case HCCL_CMD_BARRIER: return "barrier";
        default: return "collective";
    }
}

/* ---------------------------------------------------------------- CANN's registered algorithms */

const std::vector<std::string>& cann_algorithms(int coll) {
    /* The AICPU-engine algorithms registered per op (REGISTER_EXEC_V2 / _MULTI in src/ops/<op>/executor),
     * ordered: one level before several, mesh before NHR, the plainer variant first. */
    static const std::map<int, std::vector<std::string>> table = {
        {HCCL_CMD_ALLREDUCE,
         {"AicpuAllReduceSoleMeshOneShot", "AicpuAllReduceSoleMeshTwoShot", "AicpuAllReduceSoleMeshChunkTwoShot",
          "AicpuAllReduceSoleMeshConcur", "AicpuAllReduceSoleNHR", "AicpuAllReduceSoleNHRAicpuReduce",
          "AicpuAllReduceSoleNHRTwoShotMultiLink", "AicpuAllReduceParallelMeshNHR", "AicpuAllReduceSequenceMeshConcurNHR",
          "AicpuAllReduceSequenceMeshConcurNHRNHR", "AicpuAllReduceConcurMeshTwoShotNHR", "AicpuAllReducePipeLine",
          "AicpuAllReducePipeLineMeshNHRMesh", "AicpuAllReducePipeLinePcie", "AicpuAllReducePipeLineUBX",
          "AicpuAllReduceStrictOrderedMesh", "AllReduceOrderPreservedGroup", "InsAllReduceParallelMesh1DNHRPcie",
          "InsAllReduceParallelRSAGDpu", "InsAllReduceParallelRSAGUBX", "InsAllReduceParallelRSAGUboe"}},
        {HCCL_CMD_ALLGATHER,
         {"AicpuAllGatherSoleMesh", "AicpuAllGatherSoleMeshConcur", "AicpuAllGatherSoleNHR",
          "AicpuAllGatherSoleNHRMultiLink", "AicpuAllGatherParallelMeshNHR", "AicpuAllGatherParallelNHRNHR",
          "AicpuAllGatherSequenceMeshConcurNHR", "AicpuAllGatherSequenceMeshConcurNHRNHR", "AicpuAllGatherConcurMeshNHR",
          "AicpuAllGatherPipeLine", "AicpuAllGatherPipeLineMeshNHRNHR", "AicpuAllGatherPipeLinePcie",
          "AicpuAllGatherPipeLineUBX", "InsAllGatherParallelMesh1DNHRMultiJetty", "InsAllGatherParallelMesh1DNHRPcie"}},
        {HCCL_CMD_REDUCE_SCATTER,
         {"AicpuReduceScatterSoleMesh", "AicpuReduceScatterSoleMeshChunk", "AicpuReduceScatterSoleMeshConcur",
          "AicpuReduceScatterSoleNHR", "AicpuReduceScatterSoleNHRAicpuReduce", "AicpuReduceScatterSoleNHRMultiLink",
          "AicpuReduceScatterParallelMeshNHR", "AicpuReduceScatterSequenceMeshConcurNHR",
          "AicpuReduceScatterSequenceMeshConcurNHRNHR", "AicpuReduceScatterConcurMeshNHR", "AicpuReduceScatterPipeLine",
          "AicpuReduceScatterPipeLineMeshNHRMesh", "AicpuReduceScatterPipeLinePcie", "AicpuReduceScatterPipeLineUBX",
          "AicpuReduceScatterStrictOrderedMesh", "ReduceScatterOrderPreservedGroup",
          "InsReduceScatterParallelMesh1DNHRPcie", "InsReduceScatterParallelMesh1DNHRUBX",
          "InsReduceScatterParallelNHRNHRUboe"}},
        {HCCL_CMD_ALLTOALL,
         {"AicpuAllToAllSoleMesh", "AicpuAllToAllSoleMeshSingleChannel", "AicpuAllToAllSoleMeshConcurrent",
          "AicpuAllToAllSoleMeshUBX"}},
        {HCCL_CMD_ALLTOALLV, {"AicpuAllToAllVSoleMesh", "AicpuAllToAllVSoleMeshConcurrent", "AicpuAllToAllVSoleMeshUBX"}},
        {HCCL_CMD_ALLTOALLVC, {"AicpuAllToAllVCSoleMesh"}},
        {HCCL_CMD_BROADCAST,
         {"AicpuBroadcastSoleMeshTwoShot", "AicpuBroadcastSoleNHR", "AicpuBroadcastSoleNHRTwoShotMultiLink",
          "AicpuBroadcastParallelMeshNHR", "AicpuBroadcastSequenceMesh1dNHR", "AicpuBroadcastSequenceMesh1dNHRNHR",
          "InsBroadcastParallelMesh1DNHRPcie", "InsBroadcastParallelMesh1DNHRUBX", "InsBroadcastParallelNHRNHRUboe"}},
        {HCCL_CMD_REDUCE,
         {"AicpuReduceSoleMesh", "AicpuReduceSoleMeshTwoShot", "AicpuReduceSoleNHR", "AicpuReduceSoleNHRAicpuReduce",
          "AicpuReduceParallelMeshNHR", "AicpuReduceSequenceMesh1DNHR", "AicpuReduceSequenceMesh1DNHRNHR",
          "ReduceParallelMesh1DNHRPcie", "ReduceParallelMesh1DNHRUBX", "ReduceParallelNHRNHRUboe"}},
        {HCCL_CMD_SCATTER,
         {"AicpuScatterSoleMesh", "AicpuScatterSoleNHR", "AicpuScatterParallelMeshNHR",
          "AicpuScatterSequenceMeshConcurNHR", "AicpuScatterSequenceMeshConcurNHRNHR", "InsScatterParallelMesh1DNHRPcie",
          "InsScatterParallelMesh1DNHRUBX"}},
        {HCCL_CMD_ALLGATHER_V, {"AicpuAllGatherVSoleMesh"}},
        {HCCL_CMD_REDUCE_SCATTER_V, {"AicpuReduceScatterVSoleMesh"}},
        {HCCL_CMD_BARRIER, {"AicpuBarrierSoleNHR"}},
        {HCCL_CMD_BATCH_SEND_RECV, {"AicpuBatchSendRecvSoleMesh"}},
        {HCCL_CMD_SEND, {"AicpuSendSole"}},
        {HCCL_CMD_RECEIVE, {"AicpuRecvSole"}},
    };
    static const std::vector<std::string> none;
    auto it = table.find(coll);
    return it == table.end() ? none : it->second;
}

/* ---------------------------------------------------------------- the built-in kernels */

namespace {

/* OpParam.algo of the built-in kernels (HK_ALGO_* of aicpu_kernels/_common/hk_coll.h) by the name
 * the selection uses: CANN's algorithm names where a kernel implements CANN's algorithm, the
 * emulator's own names for its other algorithms. Mirrors hcomm_kit/ops/algorithms.py ALGORITHMS
 * (tests/test_algo_select.py checks both against each other). */
struct KernelName {
    int coll;
    const char* name;
    int id;
};
const KernelName kKernels[] = {
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSoleMeshOneShot", 2},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSoleMeshTwoShot", 3},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSoleMeshChunkTwoShot", 4},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSoleNHR", 5},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSoleNHRAicpuReduce", 6},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceParallelMeshNHR", 7},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSequenceMeshConcurNHR", 8},
    {HCCL_CMD_ALLREDUCE, "AicpuAllReduceSequenceMeshConcurNHRNHR", 9},
    {HCCL_CMD_ALLGATHER, "AicpuAllGatherSoleMesh", 1},
    {HCCL_CMD_ALLGATHER, "AicpuAllGatherSoleNHR", 5},
    {HCCL_CMD_ALLGATHER, "AicpuAllGatherParallelMeshNHR", 7},
    {HCCL_CMD_ALLGATHER, "AicpuAllGatherSequenceMeshConcurNHR", 8},
    {HCCL_CMD_ALLGATHER, "AicpuAllGatherSequenceMeshConcurNHRNHR", 9},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSoleMesh", 1},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSoleMeshChunk", 4},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSoleNHR", 5},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSoleNHRAicpuReduce", 6},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterParallelMeshNHR", 7},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSequenceMeshConcurNHR", 8},
    {HCCL_CMD_REDUCE_SCATTER, "AicpuReduceScatterSequenceMeshConcurNHRNHR", 9},
    /* the mesh kernel also runs CANN's single-channel form (ALIASES) */
    {HCCL_CMD_ALLTOALL, "AicpuAllToAllSoleMesh", 1},
    {HCCL_CMD_ALLTOALL, "AicpuAllToAllSoleMeshSingleChannel", 1},
    {HCCL_CMD_ALLTOALLV, "AicpuAllToAllVSoleMesh", 1},
    {HCCL_CMD_BROADCAST, "AicpuBroadcastSoleMeshTwoShot", 3},
    {HCCL_CMD_BROADCAST, "AicpuBroadcastSoleNHR", 5},
    {HCCL_CMD_BROADCAST, "AicpuBroadcastParallelMeshNHR", 7},
    {HCCL_CMD_BROADCAST, "AicpuBroadcastSequenceMesh1dNHR", 8},
    {HCCL_CMD_BROADCAST, "AicpuBroadcastSequenceMesh1dNHRNHR", 9},
    {HCCL_CMD_REDUCE, "AicpuReduceSoleMesh", 1},
    {HCCL_CMD_REDUCE, "AicpuReduceSoleMeshTwoShot", 3},
    {HCCL_CMD_REDUCE, "AicpuReduceSoleNHR", 5},
    {HCCL_CMD_REDUCE, "AicpuReduceSoleNHRAicpuReduce", 6},
    {HCCL_CMD_REDUCE, "AicpuReduceParallelMeshNHR", 7},
    {HCCL_CMD_REDUCE, "AicpuReduceSequenceMesh1DNHR", 8},
    {HCCL_CMD_REDUCE, "AicpuReduceSequenceMesh1DNHRNHR", 9},
    {HCCL_CMD_SCATTER, "AicpuScatterSoleMesh", 1},
    {HCCL_CMD_SCATTER, "AicpuScatterSoleNHR", 5},
    {HCCL_CMD_SCATTER, "AicpuScatterParallelMeshNHR", 7},
    {HCCL_CMD_SCATTER, "AicpuScatterSequenceMeshConcurNHR", 8},
    {HCCL_CMD_SCATTER, "AicpuScatterSequenceMeshConcurNHRNHR", 9},
    {HCCL_CMD_BARRIER, "AicpuBarrierSoleNHR", 5},
    /* gather: CANN has no gather; the emulator's own mesh kernel */
    {HCCL_CMD_GATHER, "mesh", 1},
};

/* The collective whose kernel table a call uses (the C API runs AllGatherV and AlltoAllVC on the
 * alltoallv kernel, ReduceScatterV on the reduce-scatter one). */
int kernel_coll(int coll) {
    switch (coll) {
        case HCCL_CMD_ALLTOALLVC:
        case HCCL_CMD_ALLGATHER_V: return HCCL_CMD_ALLTOALLV;
        case HCCL_CMD_REDUCE_SCATTER_V: return HCCL_CMD_REDUCE_SCATTER;
        default: return coll;
    }
}

bool is_collective(int coll) {
    return coll != HCCL_CMD_SEND && coll != HCCL_CMD_RECEIVE && coll != HCCL_CMD_BATCH_SEND_RECV;
}

bool registered(int coll, const std::string& name) {
    const auto& v = cann_algorithms(coll);
    return std::find(v.begin(), v.end(), name) != v.end();
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
    return s;
}

std::string kernel_names(int coll) {
    std::vector<std::string> v;
    for (const KernelName& k : kKernels)
        if (k.coll == kernel_coll(coll)) v.push_back(k.name);
    return v.empty() ? "none" : join(v);
}

/* The documented HCCL_ALGO form for coll: the algorithms of CANN's registry it keeps (by the
 * template family the value names), or an error. "" value: nothing asked. */
bool level_filter(const AlgoConfig& cfg, int coll, const std::vector<std::string>& names, std::vector<bool>* kept,
                  std::string* rule, std::string* forced_kernel, std::string* err) {
    std::string v;
    for (auto& e : cfg.levels)
        if (e.first == coll) v = !e.second.first.empty() ? e.second.first : e.second.second;
    if (v.empty()) return false;
    *rule = "level1:" + v;
    kept->assign(names.size(), false);
    bool any = false;
    for (size_t i = 0; i < names.size(); i++) {
        const std::string& n = names[i];
        bool k = false;
        if (v == "NHR") k = n.find("NHR") != std::string::npos;
        else if (v == "fullmesh") k = n.find("Mesh") != std::string::npos && n.find("NHR") == std::string::npos;
        else if (v == "pipeline") k = n.find("PipeLine") != std::string::npos;
        (*kept)[i] = k && algo_starts_with(n, "Aicpu");
        any |= (*kept)[i];
    }
    if (any) return true;
    /* no algorithm of CANN's for it: an emulator kernel of that name (ring, pairwise), else an error */
    std::string low = algo_lower(v);
    for (const KernelName& k : kKernels)
        if (k.coll == kernel_coll(coll) && low == k.name) {
            *forced_kernel = k.name;
            return true;
        }
    *err = strprintf("HCCL_ALGO='%s' asks %s for %s, but none of CANN's AICPU algorithms of %s is one (CANN registers "
                     "%s); the emulator maps NHR, fullmesh and pipeline to CANN's templates%s",
                     cfg.text.c_str(), coll_label(coll), v.c_str(), coll_label(coll), join(names).c_str(),
                     kernel_names(coll) == "none" ? "" : strprintf(" and its kernels' names (%s)", kernel_names(coll).c_str()).c_str());
    return true;
}

}  // namespace

int kernel_algo_id(int coll, const std::string& name) {
    for (const KernelName& k : kKernels)
        if (k.coll == kernel_coll(coll) && name == k.name) return k.id;
    return -1;
}

std::string kernel_table_json() {
    std::string s = "[";
    bool first = true;
    for (const KernelName& k : kKernels) {
        s += strprintf("%s{\"coll\":%d,\"collective\":\"%s\",\"name\":\"%s\",\"id\":%d}", first ? "" : ",", k.coll,
                       coll_label(k.coll), k.name, k.id);
        first = false;
    }
    return s + "]";
}

/* ---------------------------------------------------------------- one call's selection */

std::string Selection::json() const {
    std::string s = strprintf("{\"chosen\":\"%s\",\"name\":\"%s\",\"cann\":\"%s\",\"source\":\"%s\",\"how\":\"%s\",\"kernel\":%d,"
                              "\"tuner_matched\":%d,\"entries\":[",
                              json_escape(chosen).c_str(), json_escape(name).c_str(), json_escape(cann).c_str(),
                              json_escape(source).c_str(),
                              json_escape(how).c_str(), kernel, tuner_matched ? 1 : 0);
    for (size_t i = 0; i < entries.size(); i++) {
        const CostEntry& e = entries[i];
        s += strprintf("%s{\"algName\":\"%s\",\"engine\":\"%s\",\"executor\":\"%s\",\"template\":\"%s\","
                       "\"model_cost\":%.9g,\"cost\":%.9g}",
                       i ? "," : "", e.name.c_str(), e.engine.c_str(), e.executor.c_str(), e.tpl.c_str(),
                       (double)e.model_cost, (double)e.cost);
    }
    return s + "]}";
}

namespace {

/* NHR's pairs over `group` (NHR.md: in step s a rank exchanges with the ranks 2^s away). */
void nhr_pairs(const std::vector<uint32_t>& group, std::set<std::pair<uint32_t, uint32_t>>* out) {
    const size_t p = group.size();
    for (size_t d = 1; d < p; d <<= 1)
        for (size_t i = 0; i < p; i++) {
            uint32_t a = group[i], b = group[(i + d) % p];
            if (a != b) out->insert({std::min(a, b), std::max(a, b)});
        }
}

/* The links algorithm `name` uses and whether one of them is down (*d, *shape = which part of it):
 * the multi-level ones a mesh inside each server and NHR among the ranks of the same local index;
 * the sole NHR ones NHR over every rank; anything else (the meshes, the emulator's own kernels)
 * every pair. */
bool needs_downed_link(const Topology& t, int coll, const std::string& name, std::pair<uint32_t, uint32_t>* d,
                       std::string* shape) {
    (void)coll;
    std::set<std::pair<uint32_t, uint32_t>> need;
    const bool levels = name.find("Parallel") != std::string::npos || name.find("Sequence") != std::string::npos;
    std::vector<std::vector<uint32_t>> servers(t.nservers);
    for (uint32_t r = 0; r < t.nranks; r++) servers[t.server[r]].push_back(r);
    bool equal = std::all_of(servers.begin(), servers.end(), [&](auto& s) { return s.size() == servers[0].size(); });
    if (levels && t.nservers > 1 && equal) {
        *shape = "a mesh inside each server, NHR among the ranks of the same local index";
        for (auto& s : servers)
            for (size_t i = 0; i < s.size(); i++)
                for (size_t j = i + 1; j < s.size(); j++) need.insert({s[i], s[j]});
        for (size_t j = 0; j < servers[0].size(); j++) {
            std::vector<uint32_t> g;
            for (auto& s : servers) g.push_back(s[j]);
            nhr_pairs(g, &need);
        }
    } else if (name.find("NHR") != std::string::npos) {
        *shape = "NHR over every rank";
        std::vector<uint32_t> all(t.nranks);
        for (uint32_t r = 0; r < t.nranks; r++) all[r] = r;
        nhr_pairs(all, &need);
    } else {
        *shape = "a channel to every peer";
        for (uint32_t a = 0; a < t.nranks; a++)
            for (uint32_t b = a + 1; b < t.nranks; b++) need.insert({a, b});
    }
    for (auto& x : t.down)
        if (need.count(x)) {
            *d = x;
            return true;
        }
    return false;
}

/* The choice without a communicator: topology fields, CANN's rule or HCCL_ALGO, the kernel. The
 * cost table and the tuner plugin need the communicator (select_algo). */
int choose(const CannTopoInfo& info, const Topology& topo, const AlgoConfig& cfg, const AlgoQuery& q,
           const std::string& forced, bool new_selector, Comm* tuner_comm, Selection* out, std::string* err) {
    *out = Selection();
    AlgoPick pick;
    std::string why;
    if (auto_select(info, q, &pick, &why)) {
        out->cann = pick.name;
        out->source = pick.source;
    }
    const std::vector<std::string>& names = cann_algorithms(q.coll);
    std::string name;
    if (!forced.empty()) {
        if (!registered(q.coll, forced) && kernel_algo_id(q.coll, forced) < 0) {
            *err = strprintf("%s: unknown algorithm '%s'; CANN registers %s; the built-in kernels implement %s",
                             coll_label(q.coll), forced.c_str(), names.empty() ? "none" : join(names).c_str(),
                             kernel_names(q.coll).c_str());
            return HCCL_E_PARA;
        }
        name = forced;
        out->how = "algorithm=" + forced;
    } else {
        std::vector<bool> kept;
        std::string rule, forced_kernel, lerr;
        bool decided = cfg.executor_grammar ? apply_algo_config(cfg, q.coll, names, &kept, &rule)
                                            : level_filter(cfg, q.coll, names, &kept, &rule, &forced_kernel, &lerr);
        if (!lerr.empty()) {
            *err = lerr;
            return HCCL_E_NOT_SUPPORT;
        }
        if (decided && !forced_kernel.empty()) {
            name = forced_kernel;
            out->how = "HCCL_ALGO " + rule;
        } else if (new_selector && new_selector_supports(q.coll)) {
            /* SelectorEngine::Run (selector_engine.cc:181): the cost table HCCL_ALGO and the op's rules
             * leave, the tuner plugin over it, the cheapest (the first of equal ones) */
            if (kept.size() != names.size()) kept.assign(names.size(), true);
            out->entries = cost_table(info, q, names, kept);
            auto cheapest = [&](bool tuned) {
                int best = -1;
                for (size_t i = 0; i < out->entries.size(); i++) {
                    float v = tuned ? out->entries[i].cost : out->entries[i].model_cost;
                    if (v >= 0 && (best < 0 || v < (tuned ? out->entries[best].cost : out->entries[best].model_cost)))
                        best = (int)i;
                }
                return best;
            };
            const int before = cheapest(false);
            const bool matched = tuner_comm && tuner_apply(tuner_comm, q, &out->entries);
            const int best = cheapest(true);
            if (best < 0) {
                std::string list;
                for (auto& e : out->entries) list += strprintf("%s%s %.6g", list.empty() ? "" : ", ", e.name.c_str(), e.cost);
                *err = strprintf("%s: CANN's cost table (HCCL_USE_NEW_SELECTOR=1) has no valid algorithm%s%s%s "
                                 "(selector_engine.cc SelectMinCost)", coll_label(q.coll),
                                 out->entries.empty() ? "" : " (", list.c_str(), out->entries.empty() ? "" : ")");
                return HCCL_E_NOT_SUPPORT;
            }
            name = out->entries[best].name;
            out->tuner_matched = matched && best != before;
            out->how = std::string(out->tuner_matched ? "tuner plugin" : "cost table") + " (HCCL_USE_NEW_SELECTOR=1" +
                       (decided ? ", HCCL_ALGO " + rule : "") + ")";
        } else if (decided) {
            std::vector<std::string> left;
            for (size_t i = 0; i < names.size(); i++)
                if (kept[i]) left.push_back(names[i]);
            auto it = std::find(left.begin(), left.end(), out->cann);
            if (it != left.end()) {
                name = out->cann;
                out->how = "auto (HCCL_ALGO " + rule + " keeps it)";
            } else {
                for (const std::string& n : left)
                    if (kernel_algo_id(q.coll, n) >= 0) {
                        name = n;
                        break;
                    }
                if (name.empty()) {
                    *err = strprintf("%s: HCCL_ALGO='%s' (rule %s) leaves %s, none of which has a built-in kernel "
                                     "(the kernels implement %s)",
                                     coll_label(q.coll), cfg.text.c_str(), rule.c_str(),
                                     left.empty() ? "no algorithm" : join(left).c_str(), kernel_names(q.coll).c_str());
                    return HCCL_E_NOT_SUPPORT;
                }
                out->how = "HCCL_ALGO " + rule;
            }
        } else if (!out->cann.empty()) {
            name = out->cann;
            out->how = "auto";
        } else {
            out->how = "auto (" + why + ")";
        }
    }
    out->chosen = out->name = name;
    /* a link the algorithm needs taken down: it fails on every rank at once, naming the link
     * (CANN's own topology calculation already fails on the ranks of a server without it;
     * elsewhere its channels would). Point-to-point calls need only their peer's link. */
    if (is_collective(q.coll) && !topo.down.empty()) {
        std::pair<uint32_t, uint32_t> d;
        std::string shape;
        if (needs_downed_link(topo, q.coll, name, &d, &shape)) {
            const char* env = getenv("HCOMM_KIT_LINKS_DOWN");
            *err = strprintf("%s: %s needs the %s link %u-%u (%s), which is down (HCOMM_KIT_LINKS_DOWN=%s)%s; route "
                             "around it with an operator of your own (examples/allreduce_route)",
                             coll_label(q.coll), name.empty() ? "the built-in" : name.c_str(),
                             link_type_name(topo.link(d.first, d.second)), d.first, d.second, shape.c_str(),
                             env ? env : "", info.error.empty() ? "" : ("; on CANN " + info.error).c_str());
            return HCCL_E_NETWORK;
        }
    }
    out->kernel = name.empty() ? 0 : kernel_algo_id(q.coll, name);
    if (out->kernel < 0) {
        if (!forced.empty()) {
            *err = strprintf("%s: CANN's algorithm %s has no built-in kernel in this build (the kernels implement %s)",
                             coll_label(q.coll), forced.c_str(), kernel_names(q.coll).c_str());
            return HCCL_E_NOT_SUPPORT;
        }
        out->how += "; no built-in kernel implements " + name + ": the kernel chose by itself";
        out->kernel = 0;
        out->name.clear();
    }
    return 0;
}

}  // namespace

namespace {
std::string costs_json(const Selection& s) {
    std::string j;
    for (const CostEntry& e : s.entries) j += strprintf("%s\"%s\":%.6g", j.empty() ? "" : ",", e.name.c_str(), (double)e.cost);
    return j;
}
}  // namespace

int select_algo(Comm* c, const AlgoQuery& q, const std::string& forced, Selection* out, const char* api) {
    std::string err;
    int rc = choose(c->cann_topo, c->topo, c->algo_cfg, q, forced, c->new_selector, c, out, &err);
    if (rc) return seterr_str(rc, api, err);
    const uint64_t bytes = q.count * dtype_size(q.dtype);
    if (hccl_hooks.trace_note)
        hccl_hooks.trace_note(c, "algorithm selection",
                              strprintf("\"collective\":\"%s\",\"bytes\":%llu,\"chosen\":\"%s\",\"ran\":\"%s\","
                                        "\"cann\":\"%s\",\"source\":\"%s\",\"how\":\"%s\",\"tuner_matched\":%d,"
                                        "\"costs\":{%s}",
                                        coll_label(q.coll), (unsigned long long)bytes, json_escape(out->chosen).c_str(),
                                        out->name.empty() ? "the kernel's own choice" : json_escape(out->name).c_str(),
                                        out->cann.c_str(), out->source.c_str(), json_escape(out->how).c_str(),
                                        out->tuner_matched ? 1 : 0, costs_json(*out).c_str()));
    if (c->rank == 0 && g_log_level >= LOG_INFO) {
        std::string table;
        for (const CostEntry& e : out->entries)
            table += strprintf("%s%s %.6g s%s", table.empty() ? "cost table: " : ", ", e.name.c_str(), (double)e.cost,
                               e.cost != e.model_cost ? strprintf(" (cost model %.6g)", (double)e.model_cost).c_str() : "");
        EMU_LOG(LOG_INFO, "[Selector] %s of %llu bytes (%s) on %s: %s%s%s (%s%s%s)%s", coll_label(q.coll),
                (unsigned long long)bytes, dtype_name(q.dtype), c->name.c_str(), table.c_str(),
                table.empty() ? "" : " -> ", out->chosen.empty() ? "the kernel's own choice" : out->chosen.c_str(),
                out->how.c_str(), out->source.empty() ? "" : "; CANN's rule: ", out->source.c_str(),
                out->tuner_matched ? " (tuner plugin matched)" : "");
    }
    return 0;
}

}  // namespace emu

using namespace emu;

namespace {

int32_t give(const std::string& j, char* out, uint64_t outLen) {
    if (out && outLen) {
        size_t n = std::min<size_t>(j.size(), (size_t)outLen - 1);
        memcpy(out, j.data(), n);
        out[n] = 0;
    }
    return (int32_t)j.size();
}

/* {"product", "servers": [[ranks]...], "pods": [[servers]...], "down": [[a, b]...]} (the JSON of
 * HcommKitCommTopology) -> a Topology. */
bool topology_of_json(const char* text, Topology* t, std::string* err) {
    json::Value v;
    if (!text || !json::parse(text, v, *err)) {
        if (!text) *err = "topology JSON is NULL";
        return false;
    }
    const json::Value* product = v.get("product");
    const json::Value* servers = v.get("servers");
    if (!product || !product->is_string() || !servers || !servers->is_array()) {
        *err = "needs \"product\" (a string) and \"servers\" (arrays of ranks)";
        return false;
    }
    t->product = product->str;
    t->source = "HcommKitAlgoSelectOn";
    uint32_t n = 0;
    for (auto& s : servers->arr) n += (uint32_t)s.arr.size();
    if (n == 0 || n > kMaxRanks) {
        *err = strprintf("%u ranks: between 1 and %u", n, kMaxRanks);
        return false;
    }
    t->nranks = n;
    t->server.assign(n, UINT32_MAX);
    t->nservers = (uint32_t)servers->arr.size();
    for (uint32_t g = 0; g < t->nservers; g++)
        for (auto& r : servers->arr[g].arr) {
            if (!r.is_integer() || r.num < 0 || r.num >= n || t->server[(size_t)r.num] != UINT32_MAX) {
                *err = "\"servers\" must hold every rank 0..n-1 once";
                return false;
            }
            t->server[(size_t)r.num] = g;
        }
    t->pod = t->server;
    t->npods = t->nservers;
    if (const json::Value* pods = v.get("pods")) {
        t->npods = (uint32_t)pods->arr.size();
        for (uint32_t p = 0; p < t->npods; p++)
            for (auto& s : pods->arr[p].arr)
                for (uint32_t r = 0; r < n; r++)
                    if (s.is_integer() && t->server[r] == (uint32_t)s.num) t->pod[r] = p;
    }
    if (const json::Value* down = v.get("down"))
        for (auto& d : down->arr) {
            if (d.arr.size() != 2 || !d.arr[0].is_integer() || !d.arr[1].is_integer() || d.arr[0].num >= n ||
                d.arr[1].num >= n || d.arr[0].num == d.arr[1].num) {
                *err = "\"down\" entries are [a, b] with two different ranks";
                return false;
            }
            uint32_t a = (uint32_t)d.arr[0].num, b = (uint32_t)d.arr[1].num;
            t->down.insert(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
        }
    return true;
}

}  // namespace

/* hcomm-kit extension (hcomm_kit/emu_ext.h): the algorithm of one call on a communicator. */
EMU_API int32_t HcommKitAlgoSelect(HcclComm comm, int32_t collType, uint64_t count, int32_t dataType, int32_t reduceOp,
                                   const char* forced, char* out, uint64_t outLen) {
    Comm* c = comm_from_handle(comm);
    if (!c) return -(int32_t)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)comm);
    if (dtype_size(dataType) == 0)
        return -(int32_t)seterr(HCCL_E_PARA, __func__, "dataType %d is not an HcclDataType", dataType);
    AlgoQuery q;
    q.coll = collType;
    q.count = count;
    q.dtype = dataType;
    q.op = reduceOp;
    Selection sel;
    if (int rc = select_algo(c, q, forced ? forced : "", &sel, __func__)) return -(int32_t)rc;
    return give(sel.json(), out, outLen);
}

/* The same without a communicator (tests, tools): topology as HcommKitCommTopology's JSON, the rank
 * asking, HCCL_ALGO text (NULL: none), newSelector as HCCL_USE_NEW_SELECTOR=1 (no tuner plugin: it
 * needs a communicator). Writes {"topo": CANN's topology fields, "selection": ...}. */
EMU_API int32_t HcommKitAlgoSelectOn(const char* topologyJson, uint32_t rank, int32_t collType, uint64_t count,
                                     int32_t dataType, int32_t reduceOp, const char* algoConfig, const char* forced,
                                     int32_t newSelector, char* out, uint64_t outLen) {
    Topology t;
    std::string err;
    if (!topology_of_json(topologyJson, &t, &err))
        return -(int32_t)seterr(HCCL_E_PARA, __func__, "topology: %s", err.c_str());
    if (rank >= t.nranks) return -(int32_t)seterr(HCCL_E_PARA, __func__, "rank %u of %u ranks", rank, t.nranks);
    if (dtype_size(dataType) == 0)
        return -(int32_t)seterr(HCCL_E_PARA, __func__, "dataType %d is not an HcclDataType", dataType);
    AlgoConfig cfg;
    if (algoConfig)
        if (int rc = parse_algo_config(algoConfig, &cfg, &err)) return -(int32_t)seterr_str(rc, __func__, err);
    CannTopoInfo info = cann_topo_info(t, rank);
    AlgoQuery q;
    q.coll = collType;
    q.count = count;
    q.dtype = dataType;
    q.op = reduceOp;
    Selection sel;
    if (int rc = choose(info, t, cfg, q, forced ? forced : "", newSelector != 0, nullptr, &sel, &err))
        return -(int32_t)seterr_str(rc, __func__, err);
    return give("{\"topo\":" + info.json() + ",\"selection\":" + sel.json() + "}", out, outLen);
}

/* HCCL_ALGO checked as communicator creation checks it: 0, or HCCL_E_PARA with the message. */
EMU_API int32_t HcommKitAlgoConfigCheck(const char* text, char* msg, uint64_t msgLen) {
    AlgoConfig cfg;
    std::string err;
    int rc = parse_algo_config(text ? text : "", &cfg, &err);
    give(err, msg, msgLen);
    return rc;
}

/* The built-in kernels' algorithm names and OpParam.algo ids, as JSON. */
EMU_API int32_t HcommKitAlgoKernels(char* out, uint64_t outLen) { return give(kernel_table_json(), out, outLen); }

/* HCCL_ALGO applied to CANN's registered algorithms of collType (tests, tools): {"decided", "rule",
 * "kept": [names], "kernel": an emulator kernel the documented form names, or ""}; minus an HCCL
 * code (HCCL_E_PARA: malformed; HCCL_E_NOT_SUPPORT: the documented form names no algorithm of
 * CANN's or kernel of the emulator's), with the message. */
EMU_API int32_t HcommKitAlgoConfigApply(const char* text, int32_t collType, char* out, uint64_t outLen) {
    AlgoConfig cfg;
    std::string err;
    if (int rc = parse_algo_config(text ? text : "", &cfg, &err)) return -(int32_t)seterr_str(rc, __func__, err);
    const std::vector<std::string>& names = cann_algorithms(collType);
    std::vector<bool> kept;
    std::string rule, kernel;
    bool decided = cfg.executor_grammar ? apply_algo_config(cfg, collType, names, &kept, &rule)
                                        : level_filter(cfg, collType, names, &kept, &rule, &kernel, &err);
    if (!err.empty()) return -(int32_t)seterr_str(HCCL_E_NOT_SUPPORT, __func__, err);
    if (kept.size() != names.size()) kept.assign(names.size(), true);
    std::string j = strprintf("{\"decided\":%s,\"rule\":\"%s\",\"kernel\":\"%s\",\"kept\":[", decided ? "true" : "false",
                              rule.c_str(), kernel.c_str());
    bool first = true;
    for (size_t i = 0; i < names.size(); i++)
        if (kept[i]) {
            j += strprintf("%s\"%s\"", first ? "" : ",", names[i].c_str());
            first = false;
        }
    return give(j + "]}", out, outLen);
}
