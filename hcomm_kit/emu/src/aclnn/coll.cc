/* The built-in collectives behind CANN's two-phase aclnn interface (<hcomm_kit/aclnn_ext.h>
 * HkAclnnCollGetWorkspaceSize / HkAclnnCollRun), called by the aclnnHk<Name> pairs of the
 * built-ins' host library (aicpu_kernels/_op_api/, libcust_opapi.so of the vendor package):
 *
 *   aclnnHkAllReduce      x, reduceOp, group -> out           (HcclAllReduce)
 *   aclnnHkAllGather      x, group -> out (ranks x x)         (HcclAllGather)
 *   aclnnHkReduceScatter  x, reduceOp, group -> out (x/ranks) (HcclReduceScatter)
 *   aclnnHkBroadcast      selfRef, root, group (in place)     (HcclBroadcast)
 *   aclnnHkReduce         x, reduceOp, root, group -> out     (HcclReduce; out of a non-root: scratch)
 *   aclnnHkScatter        x (root), root, group -> out        (HcclScatter)
 *   aclnnHkAllToAll       x, group -> out                     (HcclAlltoAll)
 *   aclnnHkSend           x, dstRank, group                   (HcclSend)
 *   aclnnHkRecv           srcRank, group -> out               (HcclRecv)
 *
 * Phase one checks what CANN's aclnn operators check, with the ACLNN codes: NULL arguments
 * (ACLNN_ERR_PARAM_NULLPTR); dtypes and reduce ops against the product's table of the HCCL API
 * the collective runs as (hccl_api_support.h, CANN's API pages), shapes against the collective's
 * element-count rule, the group (a live communicator of this process on the current device),
 * root / peer, device memory, x and out sharing bytes (ACLNN_ERR_PARAM_INVALID). It sizes the
 * workspace: the staging of non-contiguous views (view.cc). Phase two enqueues, on the stream:
 * the gather of a staged x, the HCCL collective (its resources, algorithm selection and launch are
 * the C API's, hccl/collectives.cc), the scatter of a staged out. Errors of the collective itself
 * surface at the next synchronization, as the C API's do.
 */
#include "aclnn/aclnn_impl.h"
#include "hccl/comm.h"
#include "hccl/hccl_api_support.h"
#include "acl/runtime.h"
#include "acl/device.h"
#include "base/common.h"
#include "base/reduce.h"

#pragma GCC visibility push(default)
#include "hccl/hccl.h"
#pragma GCC visibility pop

#include <cstring>
#include <memory>

namespace emu {
namespace {

enum Rule { SAME, TIMES_RANKS, DIV_RANKS };
enum Side { NONE, REQUIRED, ROOT_ONLY };

struct CollInfo {
    const char* api;   /* aclnnHkAllReduce (phase one: + "GetWorkspaceSize") */
    const char* hccl;  /* the HCCL API it runs as: its row of hccl_api_support.h */
    bool reduce;       /* takes reduceOp */
    const char* root;  /* name of the rank argument ("root", "dstRank", ...); nullptr: none */
    Side x, out;
    Rule rule;         /* out elements from x's (x, out both present) */
    bool inplace;      /* out may be x (same contiguous memory) */
};

const CollInfo kColl[HK_COLL_COUNT] = {
    {"aclnnHkAllReduce", "HcclAllReduce", true, nullptr, REQUIRED, REQUIRED, SAME, true},
    {"aclnnHkAllGather", "HcclAllGather", false, nullptr, REQUIRED, REQUIRED, TIMES_RANKS, false},
    {"aclnnHkReduceScatter", "HcclReduceScatter", true, nullptr, REQUIRED, REQUIRED, DIV_RANKS, false},
    {"aclnnHkBroadcast", "HcclBroadcast", false, "root", REQUIRED, REQUIRED, SAME, true},
    {"aclnnHkReduce", "HcclReduce", true, "root", REQUIRED, REQUIRED, SAME, true},
    {"aclnnHkScatter", "HcclScatter", false, "root", ROOT_ONLY, REQUIRED, DIV_RANKS, false},
    {"aclnnHkAllToAll", "HcclAlltoAll", false, nullptr, REQUIRED, REQUIRED, SAME, false},
    {"aclnnHkSend", "HcclSend", false, "dstRank", REQUIRED, NONE, SAME, false},
    {"aclnnHkRecv", "HcclRecv", false, "srcRank", NONE, REQUIRED, SAME, false},
};

/* aclDataType -> HcclDataType (-1: none) */
int hccl_dtype(int acl) {
    switch (acl) {
        case ACL_INT8: return HCCL_DATA_TYPE_INT8;
        case ACL_INT16: return HCCL_DATA_TYPE_INT16;
        case ACL_INT32: return HCCL_DATA_TYPE_INT32;
        case ACL_INT64: return HCCL_DATA_TYPE_INT64;
        case ACL_UINT8: return HCCL_DATA_TYPE_UINT8;
        case ACL_UINT16: return HCCL_DATA_TYPE_UINT16;
        case ACL_UINT32: return HCCL_DATA_TYPE_UINT32;
        case ACL_UINT64: return HCCL_DATA_TYPE_UINT64;
        case ACL_FLOAT16: return HCCL_DATA_TYPE_FP16;
        case ACL_BF16: return HCCL_DATA_TYPE_BFP16;
        case ACL_FLOAT: return HCCL_DATA_TYPE_FP32;
        case ACL_DOUBLE: return HCCL_DATA_TYPE_FP64;
        default: return -1;
    }
}

/* The aclDataType names of an HcclDataType mask. */
std::string acl_names(uint32_t mask) {
    static const int acl[] = {ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8, ACL_UINT16,
                              ACL_UINT32, ACL_UINT64, ACL_FLOAT16, ACL_BF16, ACL_FLOAT, ACL_DOUBLE};
    std::string s;
    for (int a : acl)
        if (mask >> hccl_dtype(a) & 1u) s += std::string(s.empty() ? "" : ", ") + acl_dtype_name(a);
    return s.empty() ? "-" : s;
}

/* dtype (and reduce op) against the product's row of the HCCL API (CANN's API pages). */
int check_types(const CollInfo& ci, const char* api, int acl, int hdt, int64_t op) {
    const char* product = cfg().soc_name.c_str();
    if (ci.reduce) {
        if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "reduceOp %lld is not a reduce op (sum 0, prod 1, max 2, min 3)",
                          (long long)op);
        for (const HcclApiReduceRow& r : kHcclApiReduce) {
            if (strcmp(r.api, ci.hccl) || strcmp(r.product, product)) continue;
            if (hdt >= 0 && (r.ops[op] >> hdt & 1u)) return 0;
            return seterr(ACLNN_ERR_PARAM_INVALID, api,
                          "x has dataType %s with reduceOp %s: not supported on %s (%s with %s takes %s)",
                          acl_dtype_name(acl), redop_name((int)op), product, ci.hccl, redop_name((int)op),
                          acl_names(r.ops[op]).c_str());
        }
    } else {
        for (const HcclApiMoveRow& r : kHcclApiMove) {
            if (strcmp(r.api, ci.hccl) || strcmp(r.product, product)) continue;
            if (hdt >= 0 && (r.dtypes >> hdt & 1u)) return 0;
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "dataType %s is not supported on %s (%s takes %s)",
                          acl_dtype_name(acl), product, ci.hccl, acl_names(r.dtypes).c_str());
        }
    }
    return seterr(ACLNN_ERR_INNER, api, "no dtype table row for %s on %s", ci.hccl, product);
}

}  // namespace
}  // namespace emu

using namespace emu;

EMU_API aclnnStatus HkAclnnCollGetWorkspaceSize(int32_t coll, const aclTensor* x, const aclTensor* out,
                                                int64_t reduceOp, int64_t root, const char* group,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
    if (coll < 0 || coll >= HK_COLL_COUNT)
        return seterr(ACLNN_ERR_INNER, "HkAclnnCollGetWorkspaceSize", "collective %d unknown: rebuild the host library",
                      (int)coll);
    const CollInfo& ci = kColl[coll];
    const std::string api1 = std::string(ci.api) + "GetWorkspaceSize";
    const char* api = api1.c_str();
    clear_err();
    if (check_init(api)) return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s", last_err().c_str());
    if (ci.x == REQUIRED && !x)
        return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", coll == HK_COLL_BROADCAST ? "selfRef" : "x");
    if (ci.out == REQUIRED && !out) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "out is NULL");
    if (!group) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "group is NULL");
    if (!workspaceSize) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "workspaceSize is NULL");
    if (!executor) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "executor is NULL");
    *executor = nullptr;
    *workspaceSize = 0;
    if (x && !tensor_live(x)) return seterr(ACLNN_ERR_PARAM_INVALID, api, "x = %p is not a live aclTensor", (const void*)x);
    if (out && !tensor_live(out))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "out = %p is not a live aclTensor", (const void*)out);
    /* group, root */
    Context* ctx = current_ctx();
    if (!ctx) return seterr(ACLNN_ERR_PARAM_INVALID, api, "no current device (aclrtSetDevice) to find group '%s' on", group);
    Comm* c = comm_find_by_name(group, ctx->dev);
    if (!c)
        return seterr(ACLNN_ERR_PARAM_INVALID, api,
                      "group '%s' names no live HCCL communicator of this process on device %d (pass HcclGetCommName of "
                      "this rank's communicator)", group, ctx->dev->id);
    if (ci.root) {
        if (root < 0 || root >= (int64_t)c->nranks)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s %lld is not a rank of the %u-rank group '%s'", ci.root,
                          (long long)root, c->nranks, group);
        if ((coll == HK_COLL_SEND || coll == HK_COLL_RECV) && root == (int64_t)c->rank)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s %lld is this rank (no %s to self)", ci.root, (long long)root,
                          coll == HK_COLL_SEND ? "send" : "receive");
    }
    const bool is_root = ci.root && root == (int64_t)c->rank;
    /* x is read on this rank (Scatter: on the root only) */
    const aclTensor* xr = (ci.x == REQUIRED || (ci.x == ROOT_ONLY && is_root)) ? x : nullptr;
    if (ci.x == ROOT_ONLY && is_root && !x) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "x is NULL on the root");
    /* dtypes */
    const aclTensor* t0 = xr ? xr : out;
    if (xr && out && out->dtype != xr->dtype)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has dataType %s, x has %s: they must be the same",
                      acl_dtype_name(out->dtype), acl_dtype_name(xr->dtype));
    const int hdt = hccl_dtype(t0->dtype);
    if (int rc = check_types(ci, api, t0->dtype, hdt, reduceOp)) return rc;
    const size_t es = acl_dtype_size(t0->dtype);
    /* shapes */
    const uint64_t n = xr ? xr->numel() : 0, n_out = out ? out->numel() : 0;
    uint64_t count = xr ? n : n_out; /* the HCCL API's count */
    if (xr && out) {
        uint64_t want = n;
        const char* rule = "as many elements as x";
        if (ci.rule == TIMES_RANKS) {
            want = n * c->nranks;
            rule = "ranks x the elements of x";
        } else if (ci.rule == DIV_RANKS) {
            if (n % c->nranks)
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "x has %llu elements, not a multiple of the %u ranks",
                              (unsigned long long)n, c->nranks);
            want = n / c->nranks;
            rule = "the elements of x / ranks";
        }
        if (n_out != want)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has shape %s (%llu elements); %s writes %s (%llu for x of "
                          "shape %s on %u ranks)", shape_str(out).c_str(), (unsigned long long)n_out, ci.api, rule,
                          (unsigned long long)want, shape_str(xr).c_str(), c->nranks);
        if (coll == HK_COLL_REDUCE_SCATTER || coll == HK_COLL_SCATTER) count = want;
    } else if (coll == HK_COLL_SCATTER) {
        count = n_out; /* a non-root: out alone */
    }
    if (coll == HK_COLL_ALL_TO_ALL && n % c->nranks)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "x has %llu elements, not a multiple of the %u ranks (one block per "
                      "rank)", (unsigned long long)n, c->nranks);
    if (coll == HK_COLL_ALL_TO_ALL) count = n / c->nranks;
    std::unique_ptr<aclOpExecutor, void (*)(aclOpExecutor*)> e(executor_new(), executor_free);
    if (!e) return seterr(ACLNN_ERR_INNER_CREATE_EXECUTOR, api, "out of memory");
    if (xr)
        if (int rc = check_view(api, "x", ci.api, xr, es, &e->in)) return rc;
    if (out)
        if (int rc = check_view(api, "out", ci.api, out, es, &e->out)) return rc;
    if (xr && out) {
        if (coll == HK_COLL_BROADCAST) {
            /* the host library passes selfRef as both; anything else is a bug of the caller */
            if (x != out) return seterr(ACLNN_ERR_PARAM_INVALID, api, "broadcast runs in place (x is out)");
        } else if (int rc = check_overlap(api, ci.api, e->in, e->out, ci.inplace)) {
            return rc;
        }
    }
    /* Broadcast: one tensor, staged once (gathered on the root, scattered elsewhere) */
    e->ws_size = coll == HK_COLL_BROADCAST ? layout_workspace({&e->out}) : layout_workspace({&e->in, &e->out});
    if (coll == HK_COLL_BROADCAST) e->in = e->out;
    e->api = ci.api;
    e->coll = coll;
    e->comm = c;
    e->group = group;
    e->hccl_dtype = hdt;
    e->reduce_op = ci.reduce ? (int32_t)reduceOp : 0;
    e->root = ci.root ? (uint32_t)root : 0;
    e->count = count;
    *workspaceSize = e->ws_size;
    *executor = e.release();
    return ACLNN_SUCCESS;
}

EMU_API aclnnStatus HkAclnnCollRun(int32_t coll, void* workspace, uint64_t workspaceSize, aclOpExecutor* e,
                                   aclrtStream stream) {
    if (coll < 0 || coll >= HK_COLL_COUNT)
        return seterr(ACLNN_ERR_INNER, "HkAclnnCollRun", "collective %d unknown: rebuild the host library", (int)coll);
    const CollInfo& ci = kColl[coll];
    const char* api = ci.api;
    clear_err();
    if (!e) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "executor is NULL");
    if (!executor_live(e))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "executor %p is not live (released by an earlier run: make it "
                      "repeatable with aclSetAclOpExecutorRepeatable to run it again)", (void*)e);
    if (e->coll != coll)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "executor %p was made by %sGetWorkspaceSize, not %sGetWorkspaceSize",
                      (void*)e, e->api.c_str(), api);
    struct Release {
        aclOpExecutor* e;
        ~Release() {
            if (e && !e->repeatable) executor_free(e);
        }
    } release{e};
    e->ran = true;
    if (e->ws_size && !workspace)
        return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "workspace is NULL but phase one asked for %llu bytes",
                      (unsigned long long)e->ws_size);
    if (workspaceSize < e->ws_size)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "workspaceSize %llu is less than the %llu bytes phase one asked for",
                      (unsigned long long)workspaceSize, (unsigned long long)e->ws_size);
    if (e->ws_size && check_side(api, "workspace", workspace, e->ws_size, 1, "workspace"))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s", last_err().c_str());
    Comm* c = comm_from_handle(e->comm);
    if (!c || c->name != e->group)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "the communicator of group '%s' was destroyed after phase one",
                      e->group.c_str());
    int code = 0;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s", last_err().c_str());
    if (s->dev != c->dev)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "stream %u is on device %d, group '%s' on device %d", s->id,
                      s->dev->id, e->group.c_str(), c->dev->id);
    if (e->count == 0) return ACLNN_SUCCESS; /* as the HCCL API: nothing to do */
    const bool is_root = ci.root && e->root == c->rank;
    /* what moves through the workspace on this rank */
    bool gather = e->in.staged(), scatter = e->out.staged();
    if (coll == HK_COLL_BROADCAST) {
        gather = gather && is_root;
        scatter = scatter && !is_root;
    } else if (coll == HK_COLL_REDUCE) {
        scatter = scatter && is_root; /* out of a non-root is scratch */
    }
    char* ws = static_cast<char*>(workspace);
    char* in = e->in.staged() ? ws + e->in.ws : e->in.first;
    char* out = e->out.staged() ? ws + e->out.ws : e->out.first;
    if (gather)
        if (int rc = stage_gather(api, "x", e->in, in, s)) return rc;
    HcclComm comm = c;
    const HcclDataType dt = (HcclDataType)e->hccl_dtype;
    const HcclReduceOp op = (HcclReduceOp)e->reduce_op;
    HcclResult r = HCCL_SUCCESS;
    switch (coll) {
        case HK_COLL_ALL_REDUCE: r = HcclAllReduce(in, out, e->count, dt, op, comm, s); break;
        case HK_COLL_ALL_GATHER: r = HcclAllGather(in, out, e->count, dt, comm, s); break;
        case HK_COLL_REDUCE_SCATTER: r = HcclReduceScatter(in, out, e->count, dt, op, comm, s); break;
        case HK_COLL_BROADCAST: r = HcclBroadcast(out, e->count, dt, e->root, comm, s); break;
        case HK_COLL_REDUCE: r = HcclReduce(in, out, e->count, dt, op, e->root, comm, s); break;
        case HK_COLL_SCATTER: r = HcclScatter(is_root ? in : nullptr, out, e->count, dt, e->root, comm, s); break;
        case HK_COLL_ALL_TO_ALL: r = HcclAlltoAll(in, e->count, dt, out, e->count, dt, comm, s); break;
        case HK_COLL_SEND: r = HcclSend(in, e->count, dt, e->root, comm, s); break;
        case HK_COLL_RECV: r = HcclRecv(out, e->count, dt, e->root, comm, s); break;
        default: break;
    }
    if (r != HCCL_SUCCESS)
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s (HcclResult %d): %s", ci.hccl, (int)r, last_err().c_str());
    if (scatter)
        if (int rc = stage_scatter(api, "the result", e->out, out, s)) return rc;
    return ACLNN_SUCCESS;
}
