/* HCCL host plane: CANN's cost table for HCCL_USE_NEW_SELECTOR=1 (hicann/hccl at 09300b70,
 * src/ops/op_common/selector/ selector_engine.cc, cost_model.cc, cost_table.cc, and each
 * executor's and template's CalcCostCoeff). For allreduce, allgather and reduce-scatter (CANN's
 * SelectorEngine::IsOpSupported), the AICPU algorithms CANN registers, in this order:
 *
 *   1. HCCL_ALGO's rules (FilterCmByHcclAlgo; hccl/algo_select.cc apply_algo_config);
 *   2. the calibrated ones: each executor composes its templates' coefficients (A per byte over
 *      the links, B per byte of local copy and reduce, C fixed), an empty list drops it;
 *   3. the op's rules (cost_table.cc Build*Rules: must-select, must-not-select by topology);
 *   4. cost = sum over groups (sum or max inside a group) of (A / util + B) x bytes + C, util from
 *      CANN's UB utilisation table of the segment's network (mesh or CLOS) at that size; an AICPU
 *      algorithm other than allgather costs at least 0.5 ms (cost_table.cc:671-673).
 *
 * The constants are CANN's (cost_model.cc InitBandwidth: 56 GB/s across chips, 750 GB/s local
 * copy, 483 GB/s local reduce, 2 us per AICPU task; allgather's templates 5 us per task), not the
 * emulator's timing model: this is what CANN's selector believes, which is what it picks by. */
#include "hccl/algo_select.h"

#include "base/common.h"
#include "base/reduce.h"
#include "hccl/hccl_types.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>

namespace emu {

namespace {

enum Net { MESH = 0, CLOS = 1 }; /* AlgNetType */

struct Abc {
    float A, B, C;
};
using Params = std::vector<Abc>;

/* CalcCostCoeffParam: rank size of the template's level, the share of the data it moves, its
 * network, whether it copies locally, the algorithm's name, a port count (0: the template's own). */
struct P {
    uint32_t rank;
    float n;
    Net net;
    bool copy;
    const std::string& alg;
    uint32_t port = 0;
};

/* cost_model.cc InitBandwidth / Calc*Params */
constexpr float kCross = 56.0f * 1000 * 1000 * 1000, kCopy = 750.0f * 1000 * 1000 * 1000,
                kReduce = 483.0f * 1000 * 1000 * 1000;
float mesh_a(float n, Net net, int port, uint32_t rank) {
    return net == MESH ? n / kCross : (n * (float)(rank - 1)) / ((float)port * kCross);
}
float nhr_a(float n, Net net, int port, uint32_t rank) {
    float data = n * (float)(rank - 1);
    return net == MESH ? data / kCross : data / ((float)port * kCross);
}
float copy_b(float n) { return n / kCopy; }
float reduce_b(float n) { return n / kReduce; }
float tasks_c(int tasks) { return 0.000002f * (float)tasks; } /* AICPU: 2 us a task */

/* ---- templates (CalcCostCoeff of src/ops/<op>/template/aicpu/ins_temp_*.cc) ---- */
using Tpl = std::function<Params(const P&)>;

Params ar_one_shot(const P& p) { /* ins_temp_all_reduce_mesh_1D_one_shot.cc */
    if (p.rank > 8) return {};
    float n = p.n * (float)p.rank;
    return {{mesh_a(n, p.net, p.net == CLOS ? 8 : 1, p.rank),
             (p.copy ? copy_b(n) : 0.0f) + (float)(p.rank - 1) * reduce_b(n), tasks_c(1)}};
}
Params ar_two_shot(const P& p) { /* ins_temp_all_reduce_mesh_1D_two_shot.cc */
    if (p.rank > 8) return {};
    return {{mesh_a(2 * p.n, p.net, p.net == CLOS ? 8 : 1, p.rank),
             (p.copy ? copy_b(p.n) : 0.0f) + (float)(p.rank - 1) * reduce_b(p.n), tasks_c(20)}};
}
Params ar_two_shot_chunk(const P& p) { /* ins_temp_all_reduce_mesh_1D_two_shot_mesh_chunk.cc */
    if (p.rank > 8) return {};
    return {{mesh_a(2 * p.n, p.net, p.net == CLOS ? 8 : 1, p.rank), p.copy ? copy_b(p.n) : 0.0f,
             tasks_c((int)p.rank * 5)}};
}
Params ar_nhr(const P& p) { /* ins_temp_all_reduce_nhr.cc: always CLOS, 8 ports */
    return {{nhr_a(p.n * 2, CLOS, 8, p.rank), p.copy ? copy_b(p.n * (float)p.rank * 2) : 0.0f, tasks_c(10)}};
}
Params ar_aicpu_reduce_nhr(const P&) { return {{10.0f, 0.0f, 0.0f}}; } /* "not ranked": A = 10 */

Params rs_mesh(const P& p) { /* ins_temp_reduce_scatter_mesh_1D.cc */
    if (p.rank > 8) return {};
    return {{mesh_a(p.n, p.net, p.net == CLOS ? 8 : 1, p.rank),
             (p.copy ? copy_b(p.n) : 0.0f) + (float)(p.rank - 1) * reduce_b(p.n), tasks_c(1)}};
}
Params rs_z_detour(const P& p) { /* ins_temp_reduce_scatter_mesh_1D_Z_axis_detour.cc */
    if (p.rank > 8) return {};
    float a = std::max(mesh_a(p.n * 0.5f, MESH, 1, p.rank), mesh_a(p.n * 0.5f, CLOS, 8, p.rank));
    return {{a, (p.copy ? copy_b(p.n) : 0.0f) + (float)(p.rank - 1) * reduce_b(p.n), tasks_c(1)}};
}
Params rs_chunk(const P& p) { /* ins_temp_reduce_scatter_mesh_1D_meshchunk.cc */
    if (p.rank > 8) return {};
    return {{mesh_a(p.n, p.net, p.net == CLOS ? 8 : 1, p.rank), (p.copy ? copy_b(p.n) : 0.0f) * 2, tasks_c(1)}};
}
Params rs_nhr(const P& p) { /* ins_temp_reduce_scatter_nhr.cc: 6 ports for the single-channel SoleNHR */
    bool single = p.alg == "AicpuReduceScatterSoleNHR";
    float b = (p.copy ? copy_b(p.n) : 0.0f) * (float)(p.rank / 2 + 1);
    float c = tasks_c(1);
    if (single) c += b; /* as CANN adds it ("fast and slow cards") */
    return {{nhr_a(p.n, CLOS, single ? 6 : 8, p.rank), b, c}};
}
Params rs_order_preserved(const P& p) { /* ins_temp_reduce_scatter_order_preserved_{level1,group}.cc */
    return {{mesh_a(p.n, p.net, p.net == CLOS ? 8 : 1, p.rank), reduce_b(p.n), tasks_c(1)}};
}

Params ag_mesh(const P& p) { /* ins_temp_all_gather_mesh_1D.cc: 10 tasks at 5 us */
    return {{mesh_a(p.n, p.net, p.net == CLOS ? 8 : 1, p.rank), p.copy ? copy_b(p.n) : 0.0f, 0.000005f * 10}};
}
Params ag_z_detour(const P& p) { /* ins_temp_all_gather_mesh_1D_Z_axis_detour.cc: 15 tasks at 5 us */
    float half = p.n * 0.5f;
    float a = std::max(mesh_a(half, MESH, 1, p.rank), mesh_a(half, CLOS, 2, p.rank));
    float b = p.copy ? copy_b(half) + copy_b(half) : 0.0f;
    return {{a, b, 0.000005f * 15}};
}
Params ag_nhr(const P& p) { /* ins_temp_all_gather_nhr.cc: 4 log2(R) + 1 tasks at 5 us */
    uint32_t port = p.port ? p.port : (p.net == CLOS ? 8 : 1);
    int log2r = 0;
    for (uint32_t r = p.rank; r > 1; r >>= 1) log2r++;
    return {{nhr_a(p.n, p.net, (int)port, p.rank), p.copy ? copy_b(p.n) : 0.0f, 0.000005f * (float)(4 * log2r + 1)}};
}
Params none(const P&) { return {}; } /* a template without CalcCostCoeff: uncalibrated */

/* CostModelManager::CalcRankSizeByTopo: level0 = the first layer-0 instance, level1 = n / level0,
 * level2 = n / (level0 x level1) */
struct Levels {
    uint32_t l0, l1, l2;
};
Levels levels(const CannTopoInfo& t) {
    Levels s{t.userRankSize, 0, 0};
    if (!t.instSizeListOfLayer.empty() && !t.instSizeListOfLayer[0].empty()) s.l0 = t.instSizeListOfLayer[0][0];
    if (s.l0) s.l1 = t.userRankSize / s.l0;
    if (s.l0 && s.l1) s.l2 = t.userRankSize / (s.l0 * s.l1);
    return s;
}

/* An algorithm's coefficients and how CANN adds them up (AlgNetMeta). */
struct Coeff {
    Params params;
    std::vector<Net> nets;
    bool max = false; /* intraGroupMode */
    std::vector<uint32_t> groups;
};

void add(Params& v, const Params& p) { v.insert(v.end(), p.begin(), p.end()); }

/* The executors' CalcCostCoeff and GetAlgNetMeta (src/ops/<op>/executor/ins_*_executor*.cc). */
Coeff coeff(const CannTopoInfo& t, int coll, const std::string& alg) {
    const uint32_t n = t.userRankSize;
    const Levels r = levels(t);
    Coeff c;
    auto sole = [&](Tpl tpl, float share, Net net) {
        c.params = tpl(P{n, share, net, true, alg});
        c.nets = {net};
        c.groups = {1};
    };
    auto two_sum = [&](Tpl t0, Tpl t1, Net n0, Net n1, float s0, float s1, uint32_t k0, uint32_t k1,
                       std::vector<uint32_t> groups) {
        add(c.params, t0(P{k0, s0, n0, true, alg}));
        add(c.params, t1(P{k1, s1, n1, true, alg}));
        c.nets = {n0, n1};
        c.groups = groups;
    };
    /* InsAllReduceParallelExecutor (ins_v2_all_reduce_parallel_executor.cc:38): RS mesh / NHR, AG mesh / NHR */
    auto ar_parallel = [&]() {
        const float l0 = (float)r.l0, l1 = (float)r.l1, all = (float)n;
        add(c.params, rs_mesh(P{r.l0, 1.0f / 2 / l0, MESH, true, alg}));
        add(c.params, rs_nhr(P{r.l1, 1.0f / 2 / l1, CLOS, true, alg}));
        add(c.params, rs_mesh(P{r.l0, 1.0f / 2 / all, MESH, false, alg}));
        add(c.params, rs_nhr(P{r.l1, 1.0f / 2 / all, CLOS, false, alg}));
        add(c.params, ag_mesh(P{r.l0, 1.0f / 2 / all, MESH, false, alg}));
        add(c.params, ag_nhr(P{r.l1, 1.0f / 2 / all, CLOS, false, alg}));
        add(c.params, ag_mesh(P{r.l0, 1.0f / 2 / l0, MESH, false, alg}));
        add(c.params, ag_nhr(P{r.l1, 1.0f / 2 / l1, CLOS, false, alg}));
        c.nets = {MESH, CLOS, MESH, CLOS, MESH, CLOS, MESH, CLOS};
        c.max = true;
        c.groups = {2, 2, 2, 2};
    };
    if (coll == HCCL_CMD_ALLREDUCE) {
        /* InsV2AllReduceSoleExecutor: the template with n = 1 / rankSize on a mesh */
        static const std::map<std::string, Tpl> soles = {
            {"AicpuAllReduceSoleMeshOneShot", ar_one_shot},     {"AicpuAllReduceSoleMeshTwoShot", ar_two_shot},
            {"AicpuAllReduceSoleNHR", ar_nhr},                  {"AicpuAllReduceSoleNHRTwoShotMultiLink", ar_nhr},
            {"AicpuAllReduceSoleMeshChunkTwoShot", ar_two_shot_chunk},
            {"AicpuAllReduceSoleNHRAicpuReduce", ar_aicpu_reduce_nhr}};
        auto it = soles.find(alg);
        if (it != soles.end()) {
            sole(it->second, 1.0f / (float)n, MESH);
        } else if (alg == "AicpuAllReduceSoleMeshConcur") { /* InsV2AllReduceTwoShotSoleExecutor */
            two_sum(rs_z_detour, ag_z_detour, MESH, MESH, 1.0f, 1.0f, n, n, {1, 1});
        } else if (alg == "AicpuAllReduceParallelMeshNHR" || alg == "InsAllReduceParallelMesh1DNHRPcie" ||
                   alg == "InsAllReduceParallelRSAGDpu" || alg == "InsAllReduceParallelRSAGUBX" ||
                   alg == "InsAllReduceParallelRSAGUboe") {
            ar_parallel();
        } else if (alg == "AicpuAllReduceSequenceMeshConcurNHR") { /* InsV2AllReduceSequenceExecutorAicpu */
            add(c.params, rs_z_detour(P{r.l0, 1.0f / (float)r.l0, MESH, true, alg}));
            add(c.params, rs_nhr(P{r.l1, 1.0f / (float)n, CLOS, true, alg}));
            add(c.params, ag_nhr(P{r.l1, 1.0f / (float)n, CLOS, true, alg}));
            add(c.params, ag_z_detour(P{r.l0, 1.0f / (float)r.l0, MESH, true, alg}));
            c.nets = {MESH, CLOS, CLOS, MESH};
            c.groups = {1, 1, 1, 1};
        } else if (alg == "AicpuAllReduceSequenceMeshConcurNHRNHR") { /* ...ExecutorAicpu3Level */
            const float s = 1.0f / (float)n;
            add(c.params, rs_z_detour(P{r.l0, s, MESH, true, alg}));
            add(c.params, rs_nhr(P{r.l1, s, CLOS, true, alg}));
            add(c.params, rs_nhr(P{r.l2, s, MESH, true, alg}));
            add(c.params, ag_nhr(P{r.l0, s, CLOS, true, alg}));
            add(c.params, ag_nhr(P{r.l1, s, MESH, true, alg}));
            add(c.params, ag_z_detour(P{r.l2, s, CLOS, true, alg}));
            c.nets = {MESH, CLOS, MESH, CLOS, MESH, CLOS};
            c.groups = {1, 1, 1, 1, 1, 1};
        } else if (alg == "AicpuAllReduceConcurMeshTwoShotNHR") { /* InsV2AllReduceConcurrentExecutor */
            two_sum(ar_two_shot, ar_nhr, MESH, CLOS, 1.0f, 1.0f, n, n, {2});
        } else if (alg == "AicpuAllReduceStrictOrderedMesh") { /* InsV2AllReduceOrderPreservedExecutor */
            two_sum(rs_order_preserved, ag_mesh, MESH, MESH, 1.0f, 1.0f, n, n, {1, 1});
        } else if (alg == "AllReduceOrderPreservedGroup") {
            two_sum(rs_order_preserved, ag_nhr, MESH, MESH, 1.0f, 1.0f, n, n, {1, 1});
        } /* PipeLine*: InsV2AllReduceOmniPipeExecutor has no CalcCostCoeff: uncalibrated */
    } else if (coll == HCCL_CMD_ALLGATHER) {
        /* InsV2AllGatherSoleExecutor: CLOS for an NHR template or across levels; SoleNHR 6 ports */
        const Net net = t.topoLevelNums > 1 ? CLOS : MESH;
        if (alg == "AicpuAllGatherSoleMesh") {
            sole(ag_mesh, 1.0f, net);
        } else if (alg == "AicpuAllGatherSoleMeshConcur") {
            sole(ag_z_detour, 1.0f, net);
        } else if (alg == "AicpuAllGatherSoleNHR" || alg == "AicpuAllGatherSoleNHRMultiLink") {
            c.params = ag_nhr(P{n, 1.0f, CLOS, true, alg, alg == "AicpuAllGatherSoleNHR" ? 6u : 0u});
            c.nets = {CLOS};
            c.groups = {1};
        } else if (alg == "AicpuAllGatherParallelMeshNHR" || alg == "AicpuAllGatherParallelNHRNHR" ||
                   alg == "InsAllGatherParallelMesh1DNHRMultiJetty" || alg == "InsAllGatherParallelMesh1DNHRPcie") {
            /* InsV2AllGatherParallelExecutor: half first on each network, then the rest; +70 us */
            Tpl t0 = alg == "AicpuAllGatherParallelNHRNHR" ? Tpl(ag_nhr) : Tpl(ag_mesh);
            add(c.params, t0(P{r.l0, 0.5f, MESH, true, alg}));
            add(c.params, ag_nhr(P{r.l1, 0.5f, CLOS, true, alg}));
            add(c.params, t0(P{r.l0, 0.5f * (float)r.l1, MESH, true, alg}));
            add(c.params, ag_nhr(P{r.l1, 0.5f * (float)r.l0, CLOS, true, alg}));
            for (Abc& a : c.params) a.C += 0.000070f;
            c.nets = {MESH, CLOS, MESH, CLOS};
            c.max = true;
            c.groups = {2, 2};
        } else if (alg == "AicpuAllGatherSequenceMeshConcurNHR") { /* InsV2AllGatherSequenceExecutorAicpu */
            two_sum(ag_z_detour, ag_nhr, MESH, CLOS, (float)r.l1, 1.0f, r.l0, r.l1, {1, 1});
        } else if (alg == "AicpuAllGatherSequenceMeshConcurNHRNHR") { /* InsV2AllGatherSequenceExecutor3Level */
            add(c.params, ag_z_detour(P{r.l0, (float)r.l2 * (float)r.l1, MESH, true, alg}));
            add(c.params, ag_nhr(P{r.l1, (float)r.l2, CLOS, true, alg}));
            add(c.params, ag_nhr(P{r.l2, 1.0f, CLOS, true, alg}));
            c.nets = {MESH, CLOS, CLOS};
            c.groups = {1, 1, 1};
        } /* ConcurMeshNHR (UBX only: dropped on a MESH_1D level 0 first), PipeLine*: uncalibrated */
    } else if (coll == HCCL_CMD_REDUCE_SCATTER) {
        /* InsV2ReduceScatterSoleExecutor: the template with n = 1 on a mesh */
        static const std::map<std::string, Tpl> soles = {
            {"AicpuReduceScatterSoleMesh", rs_mesh},      {"AicpuReduceScatterSoleMeshChunk", rs_chunk},
            {"AicpuReduceScatterSoleNHR", rs_nhr},        {"AicpuReduceScatterSoleNHRMultiLink", rs_nhr},
            {"AicpuReduceScatterSoleMeshConcur", rs_z_detour}, {"AicpuReduceScatterSoleNHRAicpuReduce", none}};
        auto it = soles.find(alg);
        if (it != soles.end()) {
            sole(it->second, 1.0f, MESH);
        } else if (alg == "AicpuReduceScatterParallelMeshNHR" || alg == "InsReduceScatterParallelMesh1DNHRUBX") {
            /* InsReduceScatterParallelExecutor: any template uncalibrated drops it */
            Params p0 = rs_mesh(P{r.l0, 0.5f * (float)r.l1, MESH, true, alg});
            Params p1 = rs_nhr(P{r.l1, 0.5f * (float)r.l0, CLOS, true, alg});
            Params p2 = rs_nhr(P{r.l1, 0.5f, CLOS, false, alg});
            Params p3 = rs_mesh(P{r.l0, 0.5f, MESH, false, alg});
            if (!p0.empty() && !p1.empty() && !p2.empty() && !p3.empty()) {
                for (const Params* p : {&p0, &p1, &p2, &p3}) add(c.params, *p);
                c.nets = {MESH, CLOS, CLOS, MESH};
                c.max = true;
                c.groups = {2, 2};
            }
        } else if (alg == "AicpuReduceScatterSequenceMeshConcurNHR") { /* InsV2ReduceScatterSequenceExecutorAicpu */
            Params p0 = rs_z_detour(P{r.l0, (float)r.l1, MESH, true, alg});
            Params p1 = rs_nhr(P{r.l1, 1.0f, CLOS, true, alg});
            if (!p0.empty() && !p1.empty()) {
                add(c.params, p0);
                add(c.params, p1);
                c.nets = {MESH, CLOS};
                c.groups = {1, 1};
            }
        } else if (alg == "AicpuReduceScatterSequenceMeshConcurNHRNHR") { /* ...Executor3Level */
            Params p0 = rs_z_detour(P{r.l0, (float)r.l1 * (float)r.l2 / (float)n, MESH, true, alg});
            Params p1 = rs_nhr(P{r.l1, (float)r.l2 / (float)n, CLOS, true, alg});
            Params p2 = rs_nhr(P{r.l2, 1.0f / (float)n, CLOS, true, alg});
            if (!p0.empty() && !p1.empty() && !p2.empty()) {
                for (const Params* p : {&p0, &p1, &p2}) add(c.params, *p);
                c.nets = {MESH, CLOS, CLOS};
                c.groups = {1, 1, 1};
            }
        } /* ConcurMeshNHR, PipeLine*, StrictOrderedMesh, OrderPreservedGroup: executors without CalcCostCoeff */
    }
    return c;
}

/* cost_table.cc Build*Rules, the AICPU names: must-select sets (any set whose condition holds keeps
 * only them) and must-not-select ones. Deterministic (order-preserving) mode is not emulated. */
void rules(const CannTopoInfo& t, int coll, std::set<std::string>* must, std::set<std::string>* must_not) {
    const bool one_level = t.topoLevelNums == 1;
    const bool one_card = !t.localNetInsSizeOfLayer.empty() && t.localNetInsSizeOfLayer[0] == 1;
    auto put = [](std::set<std::string>* s, std::initializer_list<const char*> names) {
        for (const char* x : names) s->insert(x);
    };
    if (coll == HCCL_CMD_ALLREDUCE) { /* BuildAllReduceRules (:45) */
        if (t.topoLevelNums == 3) put(must, {"AicpuAllReduceSequenceMeshConcurNHRNHR"});
        if (one_card) put(must, {"AicpuAllReduceSoleNHR"});
        if (one_level)
            put(must_not, {"AicpuAllReduceConcurMeshTwoShotNHR", "AicpuAllReduceParallelMeshNHR",
                           "AicpuAllReduceSequenceMeshConcurNHR", "AicpuAllReduceSequenceMeshConcurNHRNHR",
                           "InsAllReduceParallelMesh1DNHRPcie", "InsAllReduceParallelRSAGDpu",
                           "InsAllReduceParallelRSAGUBX", "InsAllReduceParallelRSAGUboe"});
    } else if (coll == HCCL_CMD_ALLGATHER) { /* BuildAllGatherRules (:156) */
        if (t.level0Topo != CannTopoInfo::MESH_1D_CLOS) put(must_not, {"AicpuAllGatherConcurMeshNHR"});
        if (t.level0Topo == CannTopoInfo::MESH_1D)
            put(must_not, {"AicpuAllGatherSoleNHRMultiLink", "InsAllGatherParallelMesh1DNHRPcie",
                           "AicpuAllGatherPipeLinePcie", "AicpuAllGatherConcurMeshNHR",
                           "InsAllGatherParallelMesh1DNHRMultiJetty", "AicpuAllGatherPipeLineUBX"});
        if (one_level)
            put(must_not, {"AicpuAllGatherParallelMeshNHR", "AicpuAllGatherParallelNHRNHR",
                           "AicpuAllGatherSequenceMeshConcurNHR", "AicpuAllGatherSequenceMeshConcurNHRNHR",
                           "AicpuAllGatherPipeLine", "AicpuAllGatherPipeLineMeshNHRNHR"});
        if (!one_level) put(must_not, {"AicpuAllGatherSoleMeshConcur", "AicpuAllGatherSoleMesh"});
    } else if (coll == HCCL_CMD_REDUCE_SCATTER) { /* BuildReduceScatterRules (:271) */
        if (t.topoLevelNums > 1 && one_card && !t.hostDpuOnly) put(must, {"AicpuReduceScatterSoleNHR"});
        if ((t.Level1Nhr || t.Level0Nhr) && !t.hostDpuOnly) put(must, {"AicpuReduceScatterSoleNHR"});
        if (t.topoLevelNums == 3 && !t.hostDpuOnly && !t.Level1Nhr && !t.Level0Nhr && !one_card)
            put(must, {"AicpuReduceScatterSequenceMeshConcurNHRNHR"});
        if (one_level)
            put(must_not, {"AicpuReduceScatterParallelMeshNHR", "InsReduceScatterParallelMesh1DNHRUBX",
                           "InsReduceScatterParallelMesh1DNHRPcie", "InsReduceScatterParallelNHRNHRUboe",
                           "AicpuReduceScatterSequenceMeshConcurNHRNHR", "AicpuReduceScatterSequenceMeshConcurNHR",
                           "AicpuReduceScatterConcurMeshNHR", "AicpuReduceScatterPipeLineMeshNHRMesh",
                           "AicpuReduceScatterPipeLinePcie", "AicpuReduceScatterPipeLineUBX",
                           "AicpuReduceScatterPipeLine"});
        if (t.level0Topo != CannTopoInfo::MESH_1D_CLOS)
            put(must_not, {"InsReduceScatterParallelMesh1DNHRUBX", "InsReduceScatterParallelNHRNHRUboe",
                           "InsReduceScatterParallelMesh1DNHRPcie"});
    }
}

/* cost_table.cc:708-717, QueryUbUtil (:721) */
float ub_util(Net net, uint64_t bytes, int coll) {
    static const std::pair<double, float> clos[] = {
        {0.125 * 1024 * 1024, 0.02755f}, {0.25 * 1024 * 1024, 0.05357f}, {0.5 * 1024 * 1024, 0.10388f},
        {1.0 * 1024 * 1024, 0.1855f},    {2.0 * 1024 * 1024, 0.3f},      {4.0 * 1024 * 1024, 0.4288f},
        {8.0 * 1024 * 1024, 0.5302f},    {16.0 * 1024 * 1024, 0.568f},   {32.0 * 1024 * 1024, 0.6549f},
        {64.0 * 1024 * 1024, 0.7184f},   {128.0 * 1024 * 1024, 0.7408f}, {256.0 * 1024 * 1024, 0.7644f}};
    static const std::pair<double, float> mesh[] = {
        {1.0 * 1024 * 1024, 0.7135f},  {2.0 * 1024 * 1024, 0.7758f},   {4.0 * 1024 * 1024, 0.8112f},
        {8.0 * 1024 * 1024, 0.8301f},  {16.0 * 1024 * 1024, 0.84f},    {32.0 * 1024 * 1024, 0.8449f},
        {64.0 * 1024 * 1024, 0.8475f}, {128.0 * 1024 * 1024, 0.8487f}, {256.0 * 1024 * 1024, 0.8494f}};
    if (coll == HCCL_CMD_ALLGATHER && net == CLOS && bytes < 1024 * 1024) bytes = 1024 * 1024;
    const auto* b = net == CLOS ? std::begin(clos) : std::begin(mesh);
    const auto* e = net == CLOS ? std::end(clos) : std::end(mesh);
    for (const auto* it = b; it != e; ++it)
        if (!(it->first < (double)bytes)) return it->second;
    return (e - 1)->second;
}

/* CalcAlgCost (cost_table.cc:639) */
float cost_of(const Coeff& c, uint64_t bytes, int coll) {
    std::vector<uint32_t> groups = c.groups;
    if (groups.empty()) groups.assign(c.params.size(), 1);
    float cost = 0.0f;
    size_t idx = 0;
    for (size_t g = 0; g < groups.size() && idx < c.params.size(); ++g) {
        float group = 0.0f;
        for (uint32_t k = 0; k < groups[g] && idx < c.params.size(); ++k, ++idx) {
            Net net = idx < c.nets.size() ? c.nets[idx] : MESH;
            float util = ub_util(net, bytes, coll);
            float seg = (c.params[idx].A / util + c.params[idx].B) * (float)bytes + c.params[idx].C;
            group = c.max ? std::max(group, seg) : group + seg;
        }
        cost += group;
    }
    if (coll != HCCL_CMD_ALLGATHER) cost = std::max(cost, 0.0005f); /* AICPU: at least 0.5 ms */
    return cost;
}

/* AlgoNameMapper (algo_name_mapper.cc): engine, executor and template as the tuner plugin sees
 * them, from the name's executor + one template; a name it cannot split gets "" for all three. */
void enrich(int coll, const std::string& alg, CostEntry* e) {
    static const std::pair<const char*, const char*> execs[] = {{"Sole", "sole"},         {"Sequence", "sequence"},
                                                                {"Parallel", "parallel"}, {"PipeLine", "pipeline"},
                                                                {"Concur", "concur"},     {"StrictOrdered", "strictordered"}};
    static const std::pair<const char*, const char*> tpls[] = {
        {"Mesh", "mesh"},
        {"Mesh2Die", "mesh2die"},
        {"MeshOneShot", "meshoneshot"},
        {"MeshTwoShot", "meshtwoshot"},
        {"MeshConcur", "meshconcur"},
        {"MeshMultiLink", "meshmultilink"},
        {"MeshChunk", "meshchunk"},
        {"MeshChunkTwoShot", "meshchunktwoshot"},
        {"NHR", "nhr"},
        {"NHRMultiLink", "nhrmultilink"},
        {"NHRAicpuReduce", "nhraicpureduce"},
        {"MeshSingleChannel", "nhrsinglechannel"},
        {"MeshConcurrent", "meshconcurrent"}};
    const char* op = coll == HCCL_CMD_ALLREDUCE ? "AllReduce" : coll == HCCL_CMD_ALLGATHER ? "AllGather" : "ReduceScatter";
    e->engine = e->executor = e->tpl = "";
    size_t pos = alg.find(op);
    if (pos == std::string::npos || alg.compare(0, pos, "Aicpu") != 0 || pos != 5) return;
    const std::string rest = alg.substr(pos + strlen(op));
    for (auto& x : execs)
        for (auto& t : tpls)
            if (rest == std::string(x.first) + t.first) {
                e->engine = "aicpu";
                e->executor = x.second;
                e->tpl = t.second;
                return;
            }
}

}  // namespace

bool new_selector_supports(int coll) {
    return coll == HCCL_CMD_ALLREDUCE || coll == HCCL_CMD_ALLGATHER || coll == HCCL_CMD_REDUCE_SCATTER;
}

/* CANN's cost table for a call: the entries CostTableGen leaves, in the registry's order. */
std::vector<CostEntry> cost_table(const CannTopoInfo& t, const AlgoQuery& q, const std::vector<std::string>& names,
                                  const std::vector<bool>& kept) {
    std::set<std::string> must, must_not;
    rules(t, q.coll, &must, &must_not);
    const uint64_t bytes = q.count * dtype_size(q.dtype);
    std::vector<CostEntry> out;
    for (size_t i = 0; i < names.size(); i++) {
        if (!kept[i]) continue;
        const std::string& alg = names[i];
        if (!must.empty() ? !must.count(alg) : must_not.count(alg)) continue;
        Coeff c = coeff(t, q.coll, alg);
        if (c.params.empty()) continue; /* uncalibrated: CostModelManager::InitCostModel skips it */
        CostEntry e;
        e.name = alg;
        enrich(q.coll, alg, &e);
        e.model_cost = e.cost = cost_of(c, bytes, q.coll);
        out.push_back(e);
    }
    return out;
}

}  // namespace emu
