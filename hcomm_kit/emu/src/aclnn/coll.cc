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
 *   aclnnHkAllGatherV     x, recvCounts, recvDisplsOptional, group -> out            (HcclAllGatherV)
 *   aclnnHkReduceScatterV x, sendCounts, sendDisplsOptional, reduceOp, group -> out  (HcclReduceScatterV)
 *   aclnnHkAllToAllV      x, sendCounts, sendDisplsOptional, recvCounts, recvDisplsOptional, group -> out
 *                                                                                    (HcclAlltoAllV)
 *   aclnnHkAllToAllVC     x, sendCountMatrix, group -> out                           (HcclAlltoAllVC)
 *   aclnnHkGather         x, root, group -> out (root)        (HcclAlltoAllV with every block toward the
 *                                                              root: CANN has no HcclGather)
 *   aclnnHkBatchSendRecv  sendTensors, sendRanks, recvRanks, group -> recvTensors    (HcclBatchSendRecv)
 *   aclnnHkBarrier        group                               (HcclBarrier)
 *
 * Phase one checks what CANN's aclnn operators check, with the ACLNN codes: NULL arguments
 * (ACLNN_ERR_PARAM_NULLPTR); dtypes and reduce ops against the product's table of the HCCL API
 * the collective runs as (hccl_api_support.h, CANN's API pages), shapes against the collective's
 * element-count rule, the group (a live communicator of this process on the current device),
 * root / peer, count and displacement tables (one entry per rank, none negative, within x and
 * out), device memory, x and out sharing bytes (ACLNN_ERR_PARAM_INVALID). It sizes the
 * workspace: the staging of non-contiguous views (view.cc). Phase two enqueues, on the stream:
 * the gather of a staged x (and of a staged out that the collective writes only in part: the V
 * collectives leave the gaps between blocks alone), the HCCL collective (its resources, algorithm selection and launch are
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
    bool v;            /* shapes from count tables (v_shapes), not from `rule` */
};

const CollInfo kColl[HK_COLL_COUNT] = {
    {"aclnnHkAllReduce", "HcclAllReduce", true, nullptr, REQUIRED, REQUIRED, SAME, true, false},
    {"aclnnHkAllGather", "HcclAllGather", false, nullptr, REQUIRED, REQUIRED, TIMES_RANKS, false, false},
    {"aclnnHkReduceScatter", "HcclReduceScatter", true, nullptr, REQUIRED, REQUIRED, DIV_RANKS, false, false},
    {"aclnnHkBroadcast", "HcclBroadcast", false, "root", REQUIRED, REQUIRED, SAME, true, false},
    {"aclnnHkReduce", "HcclReduce", true, "root", REQUIRED, REQUIRED, SAME, true, false},
    {"aclnnHkScatter", "HcclScatter", false, "root", ROOT_ONLY, REQUIRED, DIV_RANKS, false, false},
    {"aclnnHkAllToAll", "HcclAlltoAll", false, nullptr, REQUIRED, REQUIRED, SAME, false, false},
    {"aclnnHkSend", "HcclSend", false, "dstRank", REQUIRED, NONE, SAME, false, false},
    {"aclnnHkRecv", "HcclRecv", false, "srcRank", NONE, REQUIRED, SAME, false, false},
    {"aclnnHkAllGatherV", "HcclAllGatherV", false, nullptr, REQUIRED, REQUIRED, SAME, false, true},
    {"aclnnHkReduceScatterV", "HcclReduceScatterV", true, nullptr, REQUIRED, REQUIRED, SAME, false, true},
    {"aclnnHkAllToAllV", "HcclAlltoAllV", false, nullptr, REQUIRED, REQUIRED, SAME, false, true},
    {"aclnnHkAllToAllVC", "HcclAlltoAllVC", false, nullptr, REQUIRED, REQUIRED, SAME, false, true},
    {"aclnnHkGather", "HcclAlltoAllV", false, "root", REQUIRED, ROOT_ONLY, SAME, false, true},
    {"aclnnHkBatchSendRecv", "HcclBatchSendRecv", false, nullptr, NONE, NONE, SAME, false, false},
    {"aclnnHkBarrier", nullptr, false, nullptr, NONE, NONE, SAME, false, false},
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
int check_types(const CollInfo& ci, const char* api, int acl, int hdt, int64_t op, const char* what = "x") {
    const char* product = cfg().soc_name.c_str();
    if (ci.reduce) {
        if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "reduceOp %lld is not a reduce op (sum 0, prod 1, max 2, min 3)",
                          (long long)op);
        for (const HcclApiReduceRow& r : kHcclApiReduce) {
            if (strcmp(r.api, ci.hccl) || strcmp(r.product, product)) continue;
            if (hdt >= 0 && (r.ops[op] >> hdt & 1u)) return 0;
            return seterr(ACLNN_ERR_PARAM_INVALID, api,
                          "%s has dataType %s with reduceOp %s: not supported on %s (%s with %s takes %s)",
                          what, acl_dtype_name(acl), redop_name((int)op), product, ci.hccl, redop_name((int)op),
                          acl_names(r.ops[op]).c_str());
        }
    } else {
        for (const HcclApiMoveRow& r : kHcclApiMove) {
            if (strcmp(r.api, ci.hccl) || strcmp(r.product, product)) continue;
            if (hdt >= 0 && (r.dtypes >> hdt & 1u)) return 0;
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s has dataType %s: not supported on %s (%s takes %s)",
                          what, acl_dtype_name(acl), product, ci.hccl, acl_names(r.dtypes).c_str());
        }
    }
    return seterr(ACLNN_ERR_INNER, api, "no dtype table row for %s on %s", ci.hccl, product);
}


/* An aclIntArray of `want` non-negative entries (NULL allowed when optional: `v` stays empty). */
int table(const char* api, const char* name, const aclIntArray* a, size_t want, bool optional, const char* group,
          std::vector<uint64_t>* v) {
    v->clear();
    if (!a) return optional ? 0 : seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", name);
    if (!misc_live(a)) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s = %p is not a live aclIntArray", name, (const void*)a);
    if (a->v.size() != want)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s has %zu entries; the group '%s' needs %zu", name, a->v.size(),
                      group, want);
    for (size_t i = 0; i < want; i++) {
        if (a->v[i] < 0)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s[%zu] = %lld is negative", name, i, (long long)a->v[i]);
        if (a->v[i] > (int64_t)(1ull << 48))
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s[%zu] = %lld is too large", name, i, (long long)a->v[i]);
        v->push_back((uint64_t)a->v[i]);
    }
    return 0;
}

/* Packed displacements (exclusive prefix sums) when none were given. */
void packed(const std::vector<uint64_t>& counts, std::vector<uint64_t>* displs) {
    if (!displs->empty()) return;
    uint64_t o = 0;
    for (uint64_t c : counts) {
        displs->push_back(o);
        o += c;
    }
}

/* One past the last element the blocks (counts, displs) reach. */
uint64_t reach(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
    uint64_t r = 0;
    for (size_t i = 0; i < counts.size(); i++)
        if (counts[i]) r = std::max(r, counts[i] + displs[i]);
    return r;
}

int too_small(const char* api, const char* what, const aclTensor* t, const char* tables, uint64_t need) {
    return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s has shape %s (%llu elements) but %s reach element %llu", what,
                  shape_str(t).c_str(), (unsigned long long)t->numel(), tables, (unsigned long long)need);
}

/* The V collectives' (and Gather's) tables and shapes: e->counts, e->count. x / out as read on
 * this rank (out NULL: a non-root of Gather). */
int v_shapes(int coll, const char* api, const HkAclnnCollArgs& a, Comm* c, const aclTensor* x, const aclTensor* out,
             aclOpExecutor* e) {
    const uint32_t n = c->nranks, me = c->rank;
    const char* g = a.group;
    std::vector<uint64_t>* t = e->counts;
    const uint64_t nx = x->numel(), nout = out ? out->numel() : 0;
    e->always = true;
    switch (coll) {
        case HK_COLL_ALL_GATHER_V: {
            if (int rc = table(api, "recvCounts", a.arrays[0], n, false, g, &t[2])) return rc;
            if (int rc = table(api, "recvDisplsOptional", a.arrays[1], n, true, g, &t[3])) return rc;
            packed(t[2], &t[3]);
            if (t[2][me] != nx)
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "recvCounts[%u] = %llu but x (this rank's block) has %llu "
                              "elements", me, (unsigned long long)t[2][me], (unsigned long long)nx);
            if (nout < reach(t[2], t[3])) return too_small(api, "out", out, "recvCounts/recvDispls", reach(t[2], t[3]));
            e->count = nx;
            e->keep_out = true;
            return 0;
        }
        case HK_COLL_REDUCE_SCATTER_V: {
            if (int rc = table(api, "sendCounts", a.arrays[0], n, false, g, &t[0])) return rc;
            if (int rc = table(api, "sendDisplsOptional", a.arrays[1], n, true, g, &t[1])) return rc;
            packed(t[0], &t[1]);
            if (nout != t[0][me])
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has shape %s (%llu elements) but sendCounts[%u] = %llu "
                              "(this rank's block)", shape_str(out).c_str(), (unsigned long long)nout, me,
                              (unsigned long long)t[0][me]);
            if (nx < reach(t[0], t[1])) return too_small(api, "x", x, "sendCounts/sendDispls", reach(t[0], t[1]));
            e->count = t[0][me];
            return 0;
        }
        case HK_COLL_ALL_TO_ALL_V: {
            if (int rc = table(api, "sendCounts", a.arrays[0], n, false, g, &t[0])) return rc;
            if (int rc = table(api, "sendDisplsOptional", a.arrays[1], n, true, g, &t[1])) return rc;
            if (int rc = table(api, "recvCounts", a.arrays[2], n, false, g, &t[2])) return rc;
            if (int rc = table(api, "recvDisplsOptional", a.arrays[3], n, true, g, &t[3])) return rc;
            packed(t[0], &t[1]);
            packed(t[2], &t[3]);
            if (nx < reach(t[0], t[1])) return too_small(api, "x", x, "sendCounts/sendDispls", reach(t[0], t[1]));
            if (nout < reach(t[2], t[3])) return too_small(api, "out", out, "recvCounts/recvDispls", reach(t[2], t[3]));
            e->keep_out = true;
            return 0;
        }
        case HK_COLL_ALL_TO_ALL_VC: {
            if (int rc = table(api, "sendCountMatrix", a.arrays[0], (size_t)n * n, false, g, &t[0])) return rc;
            uint64_t row = 0, col = 0;
            for (uint32_t j = 0; j < n; j++) {
                row += t[0][(size_t)me * n + j];
                col += t[0][(size_t)j * n + me];
            }
            if (nx < row) return too_small(api, "x", x, "the counts of row rank of sendCountMatrix", row);
            if (nout < col) return too_small(api, "out", out, "the counts of column rank of sendCountMatrix", col);
            e->keep_out = true;
            return 0;
        }
        case HK_COLL_GATHER: {
            /* every rank's x to block <rank> of the root's out: an alltoallv toward the root */
            const uint32_t root = (uint32_t)a.root;
            if (out && nout != nx * n)
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has shape %s (%llu elements); aclnnHkGather writes "
                              "ranks x the elements of x (%llu for x of shape %s on %u ranks)", shape_str(out).c_str(),
                              (unsigned long long)nout, (unsigned long long)(nx * n), shape_str(x).c_str(), n);
            for (uint32_t j = 0; j < n; j++) {
                t[0].push_back(j == root ? nx : 0);
                t[1].push_back(0);
                t[2].push_back(me == root ? nx : 0);
                t[3].push_back((uint64_t)j * nx);
            }
            e->count = nx;
            return 0;
        }
        default: return seterr(ACLNN_ERR_INNER, api, "collective %d has no count tables", coll);
    }
}

/* aclnnHkBatchSendRecv's items: lists[0] sendTensors with arrays[0] sendRanks, lists[1]
 * recvTensors with arrays[1] recvRanks. */
int batch_items(const CollInfo& ci, const char* api, const HkAclnnCollArgs& a, Comm* c, aclOpExecutor* e) {
    static const char* kList[2] = {"sendTensors", "recvTensors"};
    static const char* kRanks[2] = {"sendRanks", "recvRanks"};
    for (int k = 0; k < 2; k++) {
        const aclTensorList* l = a.lists[k];
        const aclIntArray* r = a.arrays[k];
        if (l && !misc_live(l))
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s = %p is not a live aclTensorList", kList[k], (const void*)l);
        if (r && !misc_live(r))
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s = %p is not a live aclIntArray", kRanks[k], (const void*)r);
        const size_t nl = l ? l->v.size() : 0, nr = r ? r->v.size() : 0;
        if (nl && !r) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL (%s has %zu tensors)", kRanks[k], kList[k], nl);
        if (nl != nr)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s has %zu entries, %s %zu: one rank per tensor", kRanks[k], nr,
                          kList[k], nl);
        for (size_t i = 0; i < nl; i++) {
            const std::string what = strprintf("%s[%zu]", kList[k], i);
            const aclTensor* t = l->v[i];
            if (!t) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", what.c_str());
            if (!tensor_live(t))
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s = %p is not a live aclTensor", what.c_str(), (const void*)t);
            const int64_t peer = r->v[i];
            if (peer < 0 || peer >= (int64_t)c->nranks)
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s[%zu] = %lld is not a rank of the %u-rank group '%s'",
                              kRanks[k], i, (long long)peer, c->nranks, a.group);
            if (peer == (int64_t)c->rank)
                return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s[%zu] = %lld is this rank (no %s to self)", kRanks[k], i,
                              (long long)peer, k == 0 ? "send" : "receive");
            const int hdt = hccl_dtype(t->dtype);
            if (int rc = check_types(ci, api, t->dtype, hdt, 0, what.c_str())) return rc;
            HkItem it;
            it.send = k == 0;
            it.hccl_dtype = hdt;
            it.peer = (uint32_t)peer;
            if (int rc = check_view(api, what.c_str(), ci.api, t, acl_dtype_size(t->dtype), &it.v)) return rc;
            e->items.push_back(it);
        }
    }
    /* a received tensor shares no byte with any other item (the transfers run together) */
    const size_t ns = a.lists[0] ? a.lists[0]->v.size() : 0;
    for (size_t i = ns; i < e->items.size(); i++)
        for (size_t j = 0; j < e->items.size(); j++) {
            const HkView &p = e->items[i].v, &q = e->items[j].v;
            if (i == j || !p.extent || !q.extent || !(p.first < q.first + q.extent && q.first < p.first + p.extent))
                continue;
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "recvTensors[%zu] and %s[%zu] overlap: the transfers of a batch "
                          "run together", i - ns, j < ns ? "sendTensors" : "recvTensors", j < ns ? j : j - ns);
        }
    std::vector<HkView*> views;
    for (HkItem& it : e->items) views.push_back(&it.v);
    e->ws_size = layout_workspace(views);
    return 0;
}

}  // namespace
}  // namespace emu

using namespace emu;

EMU_API aclnnStatus HkAclnnCollGetWorkspaceSize(int32_t coll, const aclTensor* x, const aclTensor* out,
                                                int64_t reduceOp, int64_t root, const char* group,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.out = out;
    a.reduceOp = reduceOp;
    a.root = root;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(coll, &a, workspaceSize, executor);
}

EMU_API aclnnStatus HkAclnnCollGetWorkspaceSizeEx(int32_t coll, const HkAclnnCollArgs* args, uint64_t* workspaceSize,
                                                  aclOpExecutor** executor) {
    if (coll < 0 || coll >= HK_COLL_COUNT || !args)
        return seterr(ACLNN_ERR_INNER, "HkAclnnCollGetWorkspaceSizeEx", "collective %d unknown: rebuild the host library",
                      (int)coll);
    const CollInfo& ci = kColl[coll];
    const HkAclnnCollArgs& a = *args;
    const aclTensor *x = a.x, *out = a.out;
    const int64_t root = a.root, reduceOp = a.reduceOp;
    const char* group = a.group;
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
    std::unique_ptr<aclOpExecutor, void (*)(aclOpExecutor*)> e(executor_new(), executor_free);
    if (!e) return seterr(ACLNN_ERR_INNER_CREATE_EXECUTOR, api, "out of memory");
    e->api = ci.api;
    e->coll = coll;
    e->comm = c;
    e->group = group;
    if (coll == HK_COLL_BATCH_SEND_RECV || coll == HK_COLL_BARRIER) {
        if (coll == HK_COLL_BATCH_SEND_RECV)
            if (int rc = batch_items(ci, api, a, c, e.get())) return rc;
        e->always = true;
        *workspaceSize = e->ws_size;
        *executor = e.release();
        return ACLNN_SUCCESS;
    }
    const bool is_root = ci.root && root == (int64_t)c->rank;
    /* x is read on this rank (Scatter: on the root only), out written (Gather: on the root only) */
    const aclTensor* xr = (ci.x == REQUIRED || (ci.x == ROOT_ONLY && is_root)) ? x : nullptr;
    if (ci.x == ROOT_ONLY && is_root && !x) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "x is NULL on the root");
    if (ci.out == ROOT_ONLY && !is_root) out = nullptr;
    if (ci.out == ROOT_ONLY && is_root && !out) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "out is NULL on the root");
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
    if (ci.v) {
        if (int rc = v_shapes(coll, api, a, c, xr, out, e.get())) return rc;
        count = e->count;
    } else if (xr && out) {
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
    PhaseTwo run;
    if (int rc = run.begin(api, coll, e, workspace, workspaceSize, stream)) return rc;
    Comm* c = run.c;
    Stream* s = run.s;
    if (e->count == 0 && !e->always) return ACLNN_SUCCESS; /* as the HCCL API: nothing to do */
    const bool is_root = ci.root && e->root == c->rank;
    /* what moves through the workspace on this rank */
    bool gather = e->in.staged(), scatter = e->out.staged();
    if (coll == HK_COLL_BROADCAST) {
        gather = gather && is_root;
        scatter = scatter && !is_root;
    } else if (coll == HK_COLL_REDUCE) {
        scatter = scatter && is_root; /* out of a non-root is scratch */
    }
    char* in = run.in;
    char* out = run.out;
    if (gather)
        if (int rc = stage_gather(api, "x", e->in, in, s)) return rc;
    if (scatter && e->keep_out) /* the gaps between the blocks keep their bytes */
        if (int rc = stage_gather(api, "out", e->out, out, s)) return rc;
    HcclComm comm = c;
    const HcclDataType dt = (HcclDataType)e->hccl_dtype;
    const HcclReduceOp op = (HcclReduceOp)e->reduce_op;
    const std::vector<uint64_t>* t = e->counts;
    HcclResult r = HCCL_SUCCESS;
    const char* hccl = ci.hccl;
    std::vector<HcclSendRecvItem> items;
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
        case HK_COLL_ALL_GATHER_V:
            r = HcclAllGatherV(in, e->count, out, t[2].data(), t[3].data(), dt, comm, s);
            break;
        case HK_COLL_REDUCE_SCATTER_V:
            r = HcclReduceScatterV(in, t[0].data(), t[1].data(), out, e->count, dt, op, comm, s);
            break;
        case HK_COLL_ALL_TO_ALL_V:
        case HK_COLL_GATHER:
            r = HcclAlltoAllV(in, t[0].data(), t[1].data(), dt, out, t[2].data(), t[3].data(),
                              dt, comm, s);
            break;
        case HK_COLL_ALL_TO_ALL_VC: r = HcclAlltoAllVC(in, t[0].data(), dt, out, dt, comm, s); break;
        case HK_COLL_BATCH_SEND_RECV:
            for (const HkItem& it : e->items) {
                char* buf = run.staged(it.v);
                if (it.send && it.v.staged())
                    if (int rc = stage_gather(api, "a sent tensor", it.v, buf, s)) return rc;
                HcclSendRecvItem item;
                memset(&item, 0, sizeof item);
                item.sendRecvType = it.send ? HCCL_SEND : HCCL_RECV;
                item.buf = buf;
                item.count = it.v.bytes / dtype_size(it.hccl_dtype);
                item.dataType = (HcclDataType)it.hccl_dtype;
                item.remoteRank = it.peer;
                items.push_back(item);
            }
            r = HcclBatchSendRecv(items.data(), (uint32_t)items.size(), comm, s);
            break;
        case HK_COLL_BARRIER:
            hccl = "HcclBarrier";
            r = HcclBarrier(comm, s);
            break;
        default: break;
    }
    if (r != HCCL_SUCCESS)
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s (HcclResult %d): %s", hccl, (int)r, last_err().c_str());
    if (scatter)
        if (int rc = stage_scatter(api, "the result", e->out, out, s)) return rc;
    for (const HkItem& it : e->items)
        if (!it.send && it.v.staged())
            if (int rc = stage_scatter(api, "a received tensor", it.v, run.staged(it.v), s)) return rc;
    return ACLNN_SUCCESS;
}
