/* The aclnn meta objects (aclTensor & co., aclOpExecutor) shared by aclnn_meta.cc (CANN's
 * <aclnn/acl_meta.h>) and aclnn_op.cc (the operators' two phases, <hcomm_kit/aclnn_ext.h>). */
#ifndef HCOMM_KIT_EMU_ACLNN_IMPL_H
#define HCOMM_KIT_EMU_ACLNN_IMPL_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
#include "aclnn/aclnn_base.h"
#include "hcomm_kit/aclnn_ext.h"
#pragma GCC visibility pop

namespace emu {
constexpr uint64_t kTensorMagic = 0x686b54656e736f72ull;   /* "hkTensor" */
constexpr uint64_t kExecMagic = 0x686b4578656375ull;       /* "hkExecu" */
constexpr uint64_t kMiscMagic = 0x686b4d697363ull;         /* scalars, arrays, lists */
constexpr uint64_t kDeadMagic = 0xdeadull;
size_t acl_dtype_size(int dt); /* 0 for a type the emulator does not know */
const char* acl_dtype_name(int dt);
}  // namespace emu

struct aclTensor;
struct aclOpExecutor;
namespace emu {
bool tensor_live(const aclTensor* t);
bool executor_live(const aclOpExecutor* e);
bool misc_live(const void* p); /* a live aclScalar / array / aclTensorList */
aclOpExecutor* executor_new(); /* registered as live; nullptr when out of memory */
void executor_free(aclOpExecutor* e);
}  // namespace emu

struct aclTensor {
    uint64_t magic = emu::kTensorMagic;
    std::vector<int64_t> view, stride, storage;
    int64_t offset = 0;
    aclDataType dtype = ACL_DT_UNDEFINED;
    aclFormat format = ACL_FORMAT_ND;
    void* data = nullptr;
    uint64_t numel() const {
        uint64_t n = 1;
        for (int64_t d : view) n *= (uint64_t)d;
        return n;
    }
};

struct aclScalar {
    uint64_t magic = emu::kMiscMagic;
    aclDataType dtype = ACL_DT_UNDEFINED;
    unsigned char value[16] = {};
};
struct aclIntArray {
    uint64_t magic = emu::kMiscMagic;
    std::vector<int64_t> v;
};
struct aclFloatArray {
    uint64_t magic = emu::kMiscMagic;
    std::vector<float> v;
};
struct aclBoolArray {
    uint64_t magic = emu::kMiscMagic;
    std::vector<bool> v;
};
struct aclTensorList {
    uint64_t magic = emu::kMiscMagic;
    std::vector<aclTensor*> v;
};

/* One contiguous byte run of a strided view, relative to its first byte. */
struct HkRun {
    uint64_t off, len;
};

/* A tensor as phase two moves it: its first byte and, for a non-contiguous view, its shape as
 * contiguous byte runs (size-1 dimensions dropped, adjacent dimensions fused): `outer` (count,
 * byte stride) pairs, outermost first, of runs of `run` bytes. A contiguous view (outer empty) is
 * used in place; a non-contiguous one is staged through the workspace at offset `ws`. */
struct HkView {
    char* first = nullptr;   /* first byte of the view (data + offset) */
    uint64_t bytes = 0;      /* elements x element size */
    uint64_t extent = 0;     /* first byte to one past the last element */
    uint64_t run = 0;        /* bytes of one contiguous run */
    std::vector<std::pair<uint64_t, uint64_t>> outer; /* empty = contiguous */
    uint64_t ws = 0;         /* staging offset in the workspace (staged) */
    bool staged() const { return !outer.empty(); }
    uint64_t runs() const { return run ? bytes / run : 0; }
    /* f(offset from first, length) for every run, in row-major order of the view */
    template <class F>
    void for_each_run(F f) const {
        if (!staged()) {
            if (bytes) f(0, bytes);
            return;
        }
        std::vector<uint64_t> idx(outer.size(), 0);
        for (uint64_t r = 0, n = runs(); r < n; r++) {
            uint64_t off = 0;
            for (size_t i = 0; i < outer.size(); i++) off += idx[i] * outer[i].second;
            f(off, run);
            for (size_t i = outer.size(); i-- > 0;) {
                if (++idx[i] < outer[i].first) break;
                idx[i] = 0;
            }
        }
    }
};

/* One send or receive of aclnnHkBatchSendRecv. */
struct HkItem {
    HkView v;
    bool send = false;
    int32_t hccl_dtype = 0;
    uint32_t peer = 0;
};

struct aclOpExecutor {
    uint64_t magic = emu::kExecMagic;
    std::string api, kernel;
    void* comm = nullptr; /* HcclComm */
    std::string group;
    std::vector<unsigned char> param; /* OpParam, filled but for the stream-dependent fields */
    HkView in, out;                   /* x and out */
    uint64_t ws_size = 0;             /* workspace phase one asked for */
    /* a built-in collective (aclnnHk*, coll.cc); coll < 0: an operator of the engine (op.cc) */
    int coll = -1;
    int32_t hccl_dtype = 0, reduce_op = 0;
    uint32_t root = 0;      /* root, or the peer of Send / Recv */
    uint64_t count = 0;     /* the HCCL API's count argument */
    bool always = false;    /* run even with count 0 (the V collectives, barrier: every rank takes its turn) */
    bool keep_out = false;  /* a staged out is gathered first too: the collective leaves some of it alone */
    std::vector<uint64_t> counts[4]; /* the V collectives' count / displacement tables (elements) */
    std::vector<HkItem> items;       /* batch send/recv */
    bool repeatable = false;
    bool ran = false;
};

namespace emu {
/* Shared by op.cc and coll.cc (view.cc). */
constexpr uint64_t kMaxOverlapRuns = 1u << 20; /* runs compared by the partial-overlap check */
constexpr uint64_t kAlign = 512;        /* workspace staging alignment, bytes */
std::string shape_str(const aclTensor* t);
/* Checks one tensor of phase one (live, ND-like format, device memory) and describes it; owner
 * names the operator in messages. Returns 0 or an ACLNN code. */
int check_view(const char* api, const char* what, const char* owner, const aclTensor* t, size_t es, HkView* v);
/* Refuses x and out sharing bytes, unless out is x itself (same contiguous bytes) and inplace. */
int check_overlap(const char* api, const char* owner, const HkView& x, const HkView& out, bool inplace);
/* Gives every staged view its place in the workspace; returns the workspace size. */
uint64_t layout_workspace(std::initializer_list<HkView*> views);
uint64_t layout_workspace(const std::vector<HkView*>& views);
/* Enqueues the gather of a staged view into dst / the scatter of src into it: one stream task
 * that copies every run (the stream's order: after what was enqueued before, before what follows). */
int stage_gather(const char* api, const char* what, const HkView& v, char* dst, aclrtStream s);
int stage_scatter(const char* api, const char* what, const HkView& v, const char* src, aclrtStream s);

/* Phase two's common start (op.cc, coll.cc): the executor (live, made by this operator's phase
 * one: api and coll), the workspace (the size phase one asked for, device memory), the group's
 * communicator still alive, the stream on its device. On success in / out are the buffers the
 * kernel or collective reads and writes: the views themselves, or their places in the workspace.
 * Destroying it releases a non-repeatable executor (CANN: phase two consumes it), also on error. */
struct Comm;
struct Stream;
class PhaseTwo {
public:
    PhaseTwo() = default;
    PhaseTwo(const PhaseTwo&) = delete;
    PhaseTwo& operator=(const PhaseTwo&) = delete;
    ~PhaseTwo();
    int begin(const char* api, int coll, aclOpExecutor* e, void* workspace, uint64_t workspaceSize, aclrtStream stream);
    char* staged(const HkView& v) const { return v.staged() ? ws + v.ws : v.first; }
    aclOpExecutor* e = nullptr;
    Comm* c = nullptr;
    Stream* s = nullptr;
    char* ws = nullptr;
    char* in = nullptr;
    char* out = nullptr;
};
}  // namespace emu

#endif
