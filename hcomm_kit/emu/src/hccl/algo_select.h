/* HCCL host plane: the algorithm of a built-in collective, chosen as CANN's HCCL chooses it for the
 * AICPU engine (hicann/hccl at 09300b70, src/ops/<op>/selector/<op>_auto_selector.cc and
 * src/ops/op_common/selector/). One implementation for the C API (hccl/collectives.cc) and the
 * Python collectives (HcommKitAlgoSelect, hcomm_kit/ops/collectives.py):
 *
 *   1. the topology fields CANN's selectors read (TopoInfoWithNetLayerDetails), computed from the
 *      communicator's rank graph the way CANN's topo_host.cc computes them (cann_topo_info);
 *   2. CANN's rule-based choice for the AICPU engine (SelectAicpuAlgo of each op's auto selector:
 *      auto_select), each branch with the file and line of CANN's source it follows;
 *   3. HCCL_ALGO (the communicator's hcclAlgo config, else the environment at creation): CANN's
 *      executor grammar (src/common/alg_parse.cc) or its documented level form
 *      ("level0:NA;level1:NHR", alg_env_config.cc), applied to CANN's registered algorithms;
 *   4. HCCL_USE_NEW_SELECTOR=1 (allreduce, allgather, reduce-scatter, as CANN's
 *      SelectorEngine::IsOpSupported): CANN's cost table (algo_cost.cc) and its tuner plugin
 *      (HCCL_TUNER_PLUGIN, tuner.cc), the cheapest entry wins;
 *   5. the built-in kernel that runs the chosen algorithm (OpParam.algo), or an error naming what
 *      cannot run (a downed link, an algorithm without a kernel). */
#ifndef HCOMM_KIT_EMU_ALGO_SELECT_H
#define HCOMM_KIT_EMU_ALGO_SELECT_H

#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "hccl/topology.h"

namespace emu {

struct Comm;

/* The fields of CANN's TopoInfoWithNetLayerDetails (src/ops/op_common/inc/alg_param.h) that the
 * AICPU selectors and the cost table read. */
struct CannTopoInfo {
    enum Shape { CLOS = 0, MESH_1D = 1, MESH_1D_CLOS = 2 };                                /* Level0Shape */
    enum MeshType { NOT_MESH = 0, SINGLE_DIE = 1, TWO_DIE_REGULAR = 2, TWO_DIE_NOT_REGULAR = 3 }; /* Level0MeshType */
    uint32_t userRank = 0, userRankSize = 0;
    std::string product; /* "A2" (DEV_TYPE_910B), "A3" (DEV_TYPE_910_93), "950" */
    uint32_t serverNum = 0, deviceNumPerModule = 0;
    uint32_t netLayerNum = 0, topoLevelNums = 0;
    std::vector<uint32_t> netInstNumOfLayer, localNetInsSizeOfLayer;
    std::vector<std::vector<uint32_t>> instSizeListOfLayer;
    Shape level0Topo = MESH_1D;
    MeshType level0MeshType = SINGLE_DIE;
    bool Level0Nhr = false, Level1Nhr = false, is2DieFullMesh = false, level0PcieMix = false, level2Uboe = false,
         level2UbRtp = false, hostDpuOnly = false, level0Symmetric = false, level1Symmetric = false;
    bool level1Clos = false; /* the instance at net layer 1 is COMM_TOPO_CLOS (IsTwoLevelNetLayer) */
    /* CANN's topology calculation fails on this rank (a peer of its server without a link:
     * topo_host.cc Is2DieFullMesh): why, else "". */
    std::string error;
    /* One line of JSON with every field above (tests, HcommKitAlgoSelectOn). */
    std::string json() const;
};

/* CANN's topology fields for `rank` of topology t, as topo_host.cc's CalcTopoShape computes them
 * from the rank graph (hccl/rank_graph.cc answers from t). */
CannTopoInfo cann_topo_info(const Topology& t, uint32_t rank);

/* One call as the selectors see it (OpParam): HcclCMDType, the count CANN's op puts in
 * DataDes.count (allreduce / broadcast / reduce: count; allgather: sendCount; reduce-scatter /
 * scatter: recvCount; alltoall: sendCounts[0], the count per peer), the dtype (HcclDataType) and
 * the reduce op (HcclReduceOp). */
struct AlgoQuery {
    int coll = 0;
    uint64_t count = 0;
    int dtype = 0;
    int op = 0;
};

/* A choice and why: CANN's algorithm name and the file:line of CANN's source the branch follows. */
struct AlgoPick {
    std::string name;
    std::string source; /* e.g. "all_reduce_auto_selector.cc:545" */
};

/* CANN's rule-based choice for the AICPU engine (ExecuteSelector -> AutoSelectorBase::Select ->
 * SelectAicpuAlgo). False when CANN's selector matches nothing (why in *why). */
bool auto_select(const CannTopoInfo& t, const AlgoQuery& q, AlgoPick* pick, std::string* why);

/* The AICPU algorithms CANN registers for collective `coll` (REGISTER_EXEC_V2* at 09300b70), in the
 * order the emulator breaks ties with (documented in docs: preference order). */
const std::vector<std::string>& cann_algorithms(int coll);

/* HcclOpTypeToPascal-like name of a collective for messages ("allreduce", ...). */
const char* coll_label(int coll);

/* ---- HCCL_ALGO ---------------------------------------------------------------------------- */
struct AlgoRule { /* one segment of CANN's executor grammar (alg_parse.cc HcclAlgoExecutor) */
    std::string op;                                 /* "" = every op; else OP_TYPES key ("allreduce") */
    std::string executor;                           /* EXECUTOR_TYPES key ("sole") */
    std::vector<std::pair<std::string, bool>> algos; /* ALGO_TYPES keys per level, enabled */
    bool enable = true;                             /* false: not(...) */
};
struct AlgoConfig {
    std::string text;
    bool executor_grammar = false;
    std::vector<AlgoRule> rules;                   /* executor grammar */
    /* documented form: per HcclCMDType, the value of level 1 and level 2 ("" = NA / unset) */
    std::vector<std::pair<int, std::pair<std::string, std::string>>> levels;
};
/* Parses HCCL_ALGO as CANN does: the executor grammar first, else the documented level form. 0, or
 * HCCL_E_PARA with *err naming the text, the position and both grammars. */
int parse_algo_config(const std::string& text, AlgoConfig* out, std::string* err);
/* The rules of cfg for collective coll applied to `names` (CANN's UpdateCostModelWithAlgo): kept[i]
 * false when dropped. True when a rule decided for this collective (*rule = its text). */
bool apply_algo_config(const AlgoConfig& cfg, int coll, const std::vector<std::string>& names, std::vector<bool>* kept,
                       std::string* rule);

/* ---- the built-in kernels ------------------------------------------------------------------- */
/* OpParam.algo of the built-in kernel running CANN's algorithm `name` of collective coll, or -1
 * when hcomm-kit has no kernel for it. */
int kernel_algo_id(int coll, const std::string& name);
/* Every (collective, name, id) the built-in kernels implement, as JSON (tests, Python). */
std::string kernel_table_json();

/* ---- the selection of one call on a communicator -------------------------------------------- */
struct CostEntry { /* one entry of CANN's cost table (new selector) */
    std::string name, engine, executor, tpl;
    float model_cost = 0, cost = 0; /* before and after the tuner plugin */
};
struct Selection {
    std::string chosen;  /* the algorithm chosen (CANN's name, or an emulator kernel's) */
    std::string name;    /* the algorithm that runs: chosen, or "" when no kernel implements it */
    std::string cann;    /* CANN's own choice (before HCCL_ALGO / forcing) */
    std::string source;  /* file:line of CANN's source for that choice */
    std::string how;     /* "auto", "HCCL_ALGO ...", "algorithm= ...", "cost table", "tuner plugin" */
    int kernel = -1;     /* OpParam.algo */
    bool tuner_matched = false; /* the plugin's rule changed the choice */
    std::vector<CostEntry> entries; /* the cost table (HCCL_USE_NEW_SELECTOR=1) */
    std::string json() const;
};
/* ---- HCCL_USE_NEW_SELECTOR=1 (algo_cost.cc, tuner.cc) ----------------------------------------- */
/* CANN's SelectorEngine::IsOpSupported: allreduce, allgather, reduce-scatter. */
bool new_selector_supports(int coll);
/* CANN's cost table for a call: of `names`, those kept[i] (HCCL_ALGO), calibrated and left by the
 * op's rules, with CANN's cost model's cost (seconds), engine / executor / template as the tuner
 * plugin sees them. */
std::vector<CostEntry> cost_table(const CannTopoInfo& t, const AlgoQuery& q, const std::vector<std::string>& names,
                                  const std::vector<bool>& kept);
/* CANN's tuner plugin (HCCL_TUNER_PLUGIN, tuner.cc) over the entries: loaded once per process,
 * init once per communicator, getCollInfo per call; it may rewrite the costs (< 0 disables). True
 * when it reports a match. No-op (false) without a plugin. */
bool tuner_apply(Comm* c, const AlgoQuery& q, std::vector<CostEntry>* entries);

/* Chooses for a call on communicator c; `forced` (may be empty): a name the caller asks for
 * (Python's algorithm=). 0, or an HCCL code with the error set (seterr: names the downed link and
 * HCOMM_KIT_LINKS_DOWN, the algorithm without a kernel, ...). Logs the choice at info level and
 * notes it on the trace. */
int select_algo(Comm* c, const AlgoQuery& q, const std::string& forced, Selection* out, const char* api);

/* String helpers of the selection and of HCCL_ALGO's parser (algo_select.cc, algo_config.cc). */
inline std::string algo_lower(std::string s) {
    for (char& ch : s) ch = (char)std::tolower((unsigned char)ch);
    return s;
}
inline bool algo_starts_with(const std::string& s, const std::string& p) {
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

}  // namespace emu

#endif
