/* Tensor views of the aclnn operators (aclnn_impl.h): the checks phase one makes on every
 * aclTensor, the contiguous byte runs of a strided view, and its staging through the workspace
 * (a non-contiguous view is gathered into the workspace before the kernel / collective and
 * scattered back after it, by one stream task each, in the call's stream order). Shared by the
 * operators' engine (op.cc) and the built-in collectives (coll.cc), with the checks phase two
 * starts with (PhaseTwo). */
#include "aclnn/aclnn_impl.h"
#include "hccl/comm.h"
#include "acl/hooks.h"
#include "acl/runtime.h"
#include "acl/device.h"
#include "base/common.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace emu {
namespace {

/* The runs of t's view: size-1 dimensions dropped, (i, i+1) fused where stride[i] == stride[i+1] *
 * dim[i+1], the innermost dimension of stride 1 (if any) the run. */
void describe(const aclTensor* t, size_t es, HkView* v) {
    std::vector<std::pair<uint64_t, uint64_t>> m; /* (size, stride in elements), outer -> inner */
    for (size_t i = 0; i < t->view.size(); i++) {
        if (t->view[i] == 1) continue;
        uint64_t n = (uint64_t)t->view[i], st = (uint64_t)t->stride[i];
        if (!m.empty() && m.back().second == n * st) {
            m.back().first *= n;
            m.back().second = st;
        } else {
            m.emplace_back(n, st);
        }
    }
    uint64_t inner = 1;
    if (!m.empty() && m.back().second == 1) {
        inner = m.back().first;
        m.pop_back();
    }
    v->run = inner * es;
    v->outer.clear();
    for (auto& d : m) v->outer.emplace_back(d.first, d.second * es);
}

/* Bytes from the first element of the view to one past its last. */
uint64_t view_extent(const aclTensor* t, size_t es) {
    if (t->numel() == 0) return 0;
    uint64_t last = 0;
    for (size_t i = 0; i < t->view.size(); i++) last += (uint64_t)(t->view[i] - 1) * (uint64_t)t->stride[i];
    return (last + 1) * es;
}

std::vector<HkRun> runs_of(const HkView& v) {
    std::vector<HkRun> r;
    r.reserve(v.runs());
    v.for_each_run([&](uint64_t off, uint64_t len) { r.push_back({off, len}); });
    return r;
}

/* Gathers a staged view into a contiguous buffer (gather) or scatters one into it, on the stream
 * worker: one task for every run of the view. */
struct StageTask : Task {
    HkView v;
    char* flat;
    bool gather;
    StageTask(const HkView& view, char* f, bool g) : v(view), flat(f), gather(g) {}
    int run(Stream*, std::string*) override {
        uint64_t pos = 0;
        v.for_each_run([&](uint64_t off, uint64_t len) {
            if (gather) {
                memcpy(flat + pos, v.first + off, len);
            } else {
                memcpy(v.first + off, flat + pos, len);
                note_host_write(v.first + off, len);
            }
            pos += len;
        });
        if (gather) note_host_write(flat, v.bytes);
        return 0;
    }
    const char* name() const override { return gather ? "aclnn staging (gather)" : "aclnn staging (scatter)"; }
};

int stage(const char* api, const char* what, const HkView& v, char* flat, aclrtStream stream, bool gather) {
    if (!v.bytes) return 0;
    int code = 0;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s", last_err().c_str());
    if (int rc = stream_enqueue(s, std::make_unique<StageTask>(v, flat, gather)))
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s %s %s the workspace: %s (aclError %d)",
                      gather ? "staging" : "copying", what, gather ? "into" : "out of", last_err().c_str(), rc);
    return 0;
}

}  // namespace

std::string shape_str(const aclTensor* t) {
    std::string s = "[";
    for (size_t i = 0; i < t->view.size(); i++) s += strprintf("%s%lld", i ? ", " : "", (long long)t->view[i]);
    return s + "]";
}

int check_view(const char* api, const char* what, const char* owner, const aclTensor* t, size_t es, HkView* v) {
    if (!tensor_live(t))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s = %p is not a live aclTensor (aclCreateTensor)", what,
                      (const void*)t);
    if (t->format == ACL_FORMAT_NC1HWC0 || t->format == ACL_FORMAT_FRACTAL_Z || t->format == ACL_FORMAT_FRACTAL_NZ)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s has the private format %d: %s takes ND (or NCHW/NHWC) tensors",
                      what, (int)t->format, owner);
    uint64_t n = t->numel();
    v->bytes = n * es;
    v->first = static_cast<char*>(t->data) + (uint64_t)t->offset * es;
    v->outer.clear();
    v->run = v->bytes;
    v->extent = 0;
    if (n == 0) return 0;
    if (!t->data) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s has no data (tensorData NULL)", what);
    v->extent = view_extent(t, es);
    if (check_side(api, what, v->first, v->extent, 1, "aclTensor"))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s (shape %s, offset %lld): %s", what, shape_str(t).c_str(),
                      (long long)t->offset, last_err().c_str());
    describe(t, es, v);
    return 0;
}

int check_overlap(const char* api, const char* owner, const HkView& x, const HkView& out, bool inplace) {
    const uint64_t xe = x.extent, oe = out.extent;
    const bool same = x.first == out.first && !x.staged() && !out.staged() && xe == oe;
    if (!xe || !oe || !(x.first < out.first + oe && out.first < x.first + xe) || (same && inplace)) return 0;
    /* out is the same non-contiguous view as x: both go through the workspace (x gathered before,
     * the result scattered after), which is an in-place call whatever the operator allows */
    if (x.first == out.first && x.bytes == out.bytes && x.staged() && x.run == out.run && x.outer == out.outer) return 0;
    const char* how = inplace ? "runs in place only when out is x (the same memory, or the same view)"
                              : "does not run in place";
    if (x.runs() > kMaxOverlapRuns || out.runs() > kMaxOverlapRuns)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "x and out may overlap (views of more than %llu pieces over the "
                      "same bytes): %s %s", (unsigned long long)kMaxOverlapRuns, owner, how);
    /* byte runs of x and out that intersect (interleaved views of one storage may not) */
    std::vector<HkRun> a = runs_of(x), b = runs_of(out);
    auto by_off = [](const HkRun& l, const HkRun& r) { return l.off < r.off; };
    std::sort(a.begin(), a.end(), by_off);
    std::sort(b.begin(), b.end(), by_off);
    const uintptr_t ia = (uintptr_t)x.first, ib = (uintptr_t)out.first;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        uintptr_t a0 = ia + a[i].off, a1 = a0 + a[i].len, b0 = ib + b[j].off, b1 = b0 + b[j].len;
        if (a0 < b1 && b0 < a1)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "x and out overlap%s: %s %s", same ? "" : " partially", owner,
                          how);
        if (a1 <= b1) i++;
        else j++;
    }
    return 0;
}

uint64_t layout_workspace(std::initializer_list<HkView*> views) {
    return layout_workspace(std::vector<HkView*>(views));
}

uint64_t layout_workspace(const std::vector<HkView*>& views) {
    uint64_t ws = 0;
    for (HkView* v : views) {
        if (!v->staged()) continue;
        v->ws = ws;
        ws += (v->bytes + kAlign - 1) / kAlign * kAlign;
    }
    return ws;
}

int stage_gather(const char* api, const char* what, const HkView& v, char* dst, aclrtStream s) {
    return stage(api, what, v, dst, s, true);
}

int stage_scatter(const char* api, const char* what, const HkView& v, const char* src, aclrtStream s) {
    return stage(api, what, v, const_cast<char*>(src), s, false);
}

PhaseTwo::~PhaseTwo() {
    if (e && !e->repeatable) executor_free(e);
}

int PhaseTwo::begin(const char* api, int coll, aclOpExecutor* ex, void* workspace, uint64_t workspaceSize,
                    aclrtStream stream) {
    if (!ex) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "executor is NULL");
    if (!executor_live(ex))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "executor %p is not live (released by an earlier run: make it "
                      "repeatable with aclSetAclOpExecutorRepeatable to run it again)", (void*)ex);
    if (ex->coll != coll || ex->api != api)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "executor %p was made by %sGetWorkspaceSize, not %sGetWorkspaceSize",
                      (void*)ex, ex->api.c_str(), api);
    e = ex; /* from here on, released at the end of the call unless repeatable */
    e->ran = true;
    if (e->ws_size && !workspace)
        return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "workspace is NULL but phase one asked for %llu bytes",
                      (unsigned long long)e->ws_size);
    if (workspaceSize < e->ws_size)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "workspaceSize %llu is less than the %llu bytes phase one asked for",
                      (unsigned long long)workspaceSize, (unsigned long long)e->ws_size);
    if (e->ws_size && check_side(api, "workspace", workspace, e->ws_size, 1, "workspace"))
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s", last_err().c_str());
    c = comm_from_handle(e->comm);
    if (!c || c->name != e->group)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "the communicator of group '%s' was destroyed after phase one",
                      e->group.c_str());
    int code = 0;
    s = stream_resolve(stream, &code, api);
    if (!s) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%s", last_err().c_str());
    if (s->dev != c->dev)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "stream %u is on device %d, group '%s' on device %d", s->id,
                      s->dev->id, e->group.c_str(), c->dev->id);
    ws = static_cast<char*>(workspace);
    in = staged(e->in);
    out = staged(e->out);
    return 0;
}

}  // namespace emu
