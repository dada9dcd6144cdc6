/* The aclnn meta objects (aclTensor & co., aclOpExecutor) shared by aclnn_meta.cc (CANN's
 * <aclnn/acl_meta.h>) and aclnn_op.cc (the operators' two phases, <hcomm_kit/aclnn_ext.h>). */
#ifndef HCOMM_KIT_EMU_ACLNN_IMPL_H
#define HCOMM_KIT_EMU_ACLNN_IMPL_H

#include <cstdint>
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

/* One contiguous byte run of a strided view, relative to the tensor's data pointer. */
struct HkRun {
    uint64_t off, len;
};

struct aclOpExecutor {
    uint64_t magic = emu::kExecMagic;
    std::string api, kernel;
    void* comm = nullptr; /* HcclComm */
    std::string group;
    std::vector<unsigned char> param; /* OpParam, filled but for the stream-dependent fields */
    char* in = nullptr;  /* first byte of the input view */
    char* out = nullptr; /* first byte of the output view */
    std::vector<HkRun> in_runs, out_runs; /* empty = contiguous (used in place) */
    uint64_t in_bytes = 0, out_bytes = 0;
    uint64_t ws_in = 0, ws_out = 0, ws_size = 0; /* staging offsets in the workspace */
    bool repeatable = false;
    bool ran = false;
};

#endif
