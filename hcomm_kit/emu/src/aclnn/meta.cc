/* CANN's aclnn meta API (<aclnn/acl_meta.h>, library libnnopbase): aclTensor, aclScalar, the
 * arrays, aclTensorList, their getters, and the executor's aclSetAclOpExecutorRepeatable /
 * aclDestroyAclOpExecutor. Prototypes and documented behaviour: see the header.
 *
 * Creation returns NULL on a bad argument, as CANN does, with the reason in aclGetRecentErrMsg().
 * Getters and destroys return ACLNN_ERR_PARAM_NULLPTR for a NULL argument (CANN's getters), and
 * ACLNN_ERR_PARAM_INVALID for a pointer that is not a live object of that kind (the emulator's
 * check; CANN would crash). Executor calls return ACLNN_ERR_INNER_NULLPTR (561103) for NULL, as the
 * CANN pages of both calls say. */
#include "aclnn/aclnn_impl.h"
#include "acl/runtime.h"
#include "acl/device.h"
#include "base/common.h"

#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

namespace emu {
namespace {
constexpr uint64_t kMaxDims = 64; /* CANN's aclTensor takes at most op::MAX_DIM_NUM (8) per operator; the
                                     description itself is not limited in the pages found: a generous cap */
std::mutex g_meta_m;
std::unordered_set<const void*> g_live; /* every live meta object and executor */

template <class T>
T* track(T* p) {
    if (p) {
        std::lock_guard<std::mutex> g(g_meta_m);
        g_live.insert(p);
    }
    return p;
}
bool live(const void* p) {
    std::lock_guard<std::mutex> g(g_meta_m);
    return g_live.count(p) != 0;
}
bool untrack(const void* p) {
    std::lock_guard<std::mutex> g(g_meta_m);
    return g_live.erase(p) != 0;
}

int64_t* copy_out(const std::vector<int64_t>& v) {
    int64_t* a = new (std::nothrow) int64_t[v.empty() ? 1 : v.size()];
    if (a && !v.empty()) memcpy(a, v.data(), v.size() * sizeof(int64_t));
    return a;
}
}  // namespace

size_t acl_dtype_size(int dt) {
    switch (dt) {
        case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
        case ACL_FLOAT16: case ACL_INT16: case ACL_UINT16: case ACL_BF16: return 2;
        case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
        case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64: return 8;
        case ACL_COMPLEX128: return 16;
        default: return 0;
    }
}

const char* acl_dtype_name(int dt) {
    switch (dt) {
        case ACL_FLOAT: return "ACL_FLOAT";
        case ACL_FLOAT16: return "ACL_FLOAT16";
        case ACL_INT8: return "ACL_INT8";
        case ACL_INT32: return "ACL_INT32";
        case ACL_UINT8: return "ACL_UINT8";
        case ACL_INT16: return "ACL_INT16";
        case ACL_UINT16: return "ACL_UINT16";
        case ACL_UINT32: return "ACL_UINT32";
        case ACL_INT64: return "ACL_INT64";
        case ACL_UINT64: return "ACL_UINT64";
        case ACL_DOUBLE: return "ACL_DOUBLE";
        case ACL_BOOL: return "ACL_BOOL";
        case ACL_BF16: return "ACL_BF16";
        case ACL_COMPLEX64: return "ACL_COMPLEX64";
        case ACL_COMPLEX128: return "ACL_COMPLEX128";
        default: return "unknown";
    }
}

bool tensor_live(const aclTensor* t) { return t && live(t) && t->magic == kTensorMagic; }
bool executor_live(const aclOpExecutor* e) { return e && live(e) && e->magic == kExecMagic; }
bool misc_live(const void* p) { return p && live(p) && static_cast<const aclIntArray*>(p)->magic == kMiscMagic; }
aclOpExecutor* executor_new() { return track(new (std::nothrow) aclOpExecutor); }
void executor_free(aclOpExecutor* e) {
    if (untrack(e)) {
        e->magic = kDeadMagic;
        delete e;
    }
}
}  // namespace emu

using namespace emu;

EMU_API aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                   const int64_t* stride, int64_t offset, aclFormat format, const int64_t* storageDims,
                                   uint64_t storageDimsNum, void* tensorData) {
    const char* api = __func__;
    if (viewDimsNum > kMaxDims || storageDimsNum > kMaxDims) {
        seterr(ACLNN_ERR_PARAM_INVALID, api, "viewDimsNum %llu / storageDimsNum %llu: at most %llu dimensions",
               (unsigned long long)viewDimsNum, (unsigned long long)storageDimsNum, (unsigned long long)kMaxDims);
        return nullptr;
    }
    if ((viewDimsNum && !viewDims) || (storageDimsNum && !storageDims)) {
        seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL with %llu dimensions", viewDimsNum && !viewDims ? "viewDims" :
               "storageDims", (unsigned long long)(viewDimsNum && !viewDims ? viewDimsNum : storageDimsNum));
        return nullptr;
    }
    size_t es = acl_dtype_size(dataType);
    if (es == 0) {
        seterr(ACLNN_ERR_PARAM_INVALID, api, "dataType %d is not an aclDataType the emulator knows", (int)dataType);
        return nullptr;
    }
    if (offset < 0) {
        seterr(ACLNN_ERR_PARAM_INVALID, api, "offset %lld is negative (elements into the storage)", (long long)offset);
        return nullptr;
    }
    auto* t = new (std::nothrow) aclTensor;
    if (!t) {
        seterr(ACLNN_ERR_INNER, api, "out of memory");
        return nullptr;
    }
    t->dtype = dataType;
    t->format = format;
    t->offset = offset;
    t->data = tensorData;
    t->view.assign(viewDims, viewDims + viewDimsNum);
    t->storage.assign(storageDims, storageDims + storageDimsNum);
    /* Bytes the view reaches (last element + 1), checked against the storage, with overflow checks. */
    unsigned __int128 reach = (unsigned __int128)offset + 1, storage = 1;
    bool empty = false;
    for (uint64_t i = 0; i < viewDimsNum; i++) {
        int64_t d = viewDims[i];
        int64_t s = stride ? stride[i] : 0;
        if (d < 0 || s < 0) {
            seterr(ACLNN_ERR_PARAM_INVALID, api, "dimension %llu: size %lld, stride %lld (negative values are not taken)",
                   (unsigned long long)i, (long long)d, (long long)s);
            delete t;
            return nullptr;
        }
        if (d == 0) empty = true;
    }
    /* stride NULL: contiguous row-major strides of the view */
    t->stride.assign(viewDimsNum, 1);
    for (uint64_t i = viewDimsNum; i-- > 0;) {
        if (stride) {
            t->stride[i] = stride[i];
        } else if (i + 1 < viewDimsNum) {
            unsigned __int128 s = (unsigned __int128)t->stride[i + 1] * (uint64_t)std::max<int64_t>(viewDims[i + 1], 1);
            t->stride[i] = s > (unsigned __int128)INT64_MAX ? INT64_MAX : (int64_t)s;
        }
    }
    for (uint64_t i = 0; i < viewDimsNum && !empty; i++) {
        reach += (unsigned __int128)(uint64_t)(viewDims[i] - 1) * (uint64_t)t->stride[i];
        if (reach > ((unsigned __int128)1 << 100)) break;
    }
    for (uint64_t i = 0; i < storageDimsNum; i++) {
        if (storageDims[i] < 0) {
            seterr(ACLNN_ERR_PARAM_INVALID, api, "storageDims[%llu] = %lld is negative", (unsigned long long)i,
                   (long long)storageDims[i]);
            delete t;
            return nullptr;
        }
        storage *= (uint64_t)storageDims[i];
        if (storage > ((unsigned __int128)1 << 100)) storage = (unsigned __int128)1 << 100;
    }
    if (!empty && reach > storage) {
        seterr(ACLNN_ERR_PARAM_INVALID, api,
               "the view (offset %lld, %llu dimensions) reaches element %llu but the storage holds %llu elements",
               (long long)offset, (unsigned long long)viewDimsNum, (unsigned long long)(reach - 1),
               (unsigned long long)storage);
        delete t;
        return nullptr;
    }
    if (storage * es > (unsigned __int128)PTRDIFF_MAX) {
        seterr(ACLNN_ERR_PARAM_INVALID, api, "the storage is larger than the address space");
        delete t;
        return nullptr;
    }
    return track(t);
}

EMU_API aclScalar* aclCreateScalar(void* value, aclDataType dataType) {
    size_t es = acl_dtype_size(dataType);
    if (!value) {
        seterr(ACLNN_ERR_PARAM_NULLPTR, __func__, "value is NULL");
        return nullptr;
    }
    if (es == 0) {
        seterr(ACLNN_ERR_PARAM_INVALID, __func__, "dataType %d is not an aclDataType the emulator knows", (int)dataType);
        return nullptr;
    }
    auto* s = new (std::nothrow) aclScalar;
    if (!s) return nullptr;
    s->dtype = dataType;
    memcpy(s->value, value, es);
    return track(s);
}

template <class A, class V>
static A* make_array(const V* value, uint64_t size, const char* api) {
    if (size && !value) {
        seterr(ACLNN_ERR_PARAM_NULLPTR, api, "value is NULL with size %llu", (unsigned long long)size);
        return nullptr;
    }
    if (size > (1ull << 32)) {
        seterr(ACLNN_ERR_PARAM_INVALID, api, "size %llu is too large", (unsigned long long)size);
        return nullptr;
    }
    auto* a = new (std::nothrow) A;
    if (!a) return nullptr;
    a->v.assign(value, value + size);
    return track(a);
}

EMU_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
    return make_array<aclIntArray>(value, size, __func__);
}
EMU_API aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size) {
    return make_array<aclFloatArray>(value, size, __func__);
}
EMU_API aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
    return make_array<aclBoolArray>(value, size, __func__);
}

EMU_API aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
    if (size && !value) {
        seterr(ACLNN_ERR_PARAM_NULLPTR, __func__, "value is NULL with size %llu", (unsigned long long)size);
        return nullptr;
    }
    for (uint64_t i = 0; i < size; i++)
        if (value[i] && !tensor_live(value[i])) {
            seterr(ACLNN_ERR_PARAM_INVALID, __func__, "value[%llu] = %p is not a live aclTensor", (unsigned long long)i,
                   (const void*)value[i]);
            return nullptr;
        }
    auto* l = new (std::nothrow) aclTensorList;
    if (!l) return nullptr;
    for (uint64_t i = 0; i < size; i++) l->v.push_back(const_cast<aclTensor*>(value[i]));
    return track(l);
}

#define HK_DESTROY(fn, T, magic_)                                                                                \
    EMU_API aclnnStatus fn(const T* p) {                                                                        \
        if (!p) return ACLNN_SUCCESS; /* CANN: destroying NULL is a no-op */                                  \
        if (!live(p) || p->magic != (magic_))                                                                    \
            return seterr(ACLNN_ERR_PARAM_INVALID, #fn, "%p is not a live " #T " (destroyed twice?)", (const void*)p); \
        untrack(p);                                                                                              \
        const_cast<T*>(p)->magic = kDeadMagic;                                                                   \
        delete p;                                                                                                \
        return ACLNN_SUCCESS;                                                                                    \
    }
HK_DESTROY(aclDestroyTensor, aclTensor, kTensorMagic)
HK_DESTROY(aclDestroyScalar, aclScalar, kMiscMagic)
HK_DESTROY(aclDestroyIntArray, aclIntArray, kMiscMagic)
HK_DESTROY(aclDestroyFloatArray, aclFloatArray, kMiscMagic)
HK_DESTROY(aclDestroyBoolArray, aclBoolArray, kMiscMagic)
#undef HK_DESTROY

EMU_API aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
    if (!array) return ACLNN_SUCCESS;
    if (!live(array) || array->magic != kMiscMagic)
        return seterr(ACLNN_ERR_PARAM_INVALID, __func__, "%p is not a live aclTensorList", (const void*)array);
    for (aclTensor* t : array->v)
        if (t) aclDestroyTensor(t);
    untrack(array);
    const_cast<aclTensorList*>(array)->magic = kDeadMagic;
    delete array;
    return ACLNN_SUCCESS;
}

#define HK_TENSOR_ARG(t, out)                                                                                     \
    do {                                                                                                          \
        if (!(t) || !(out)) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", !(t) ? "tensor" : #out);    \
        if (!tensor_live(t)) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%p is not a live aclTensor", (const void*)(t)); \
    } while (0)

static aclnnStatus dims_out(const char* api, const std::vector<int64_t>& v, int64_t** dims, uint64_t* num) {
    int64_t* a = copy_out(v);
    if (!a) return seterr(ACLNN_ERR_INNER_NULLPTR, api, "out of memory");
    *dims = a;
    *num = v.size();
    return ACLNN_SUCCESS;
}

EMU_API aclnnStatus aclGetViewShape(const aclTensor* tensor, int64_t** viewDims, uint64_t* viewDimsNum) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, viewDims);
    if (!viewDimsNum) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "viewDimsNum is NULL");
    return dims_out(api, tensor->view, viewDims, viewDimsNum);
}
EMU_API aclnnStatus aclGetStorageShape(const aclTensor* tensor, int64_t** storageDims, uint64_t* storageDimsNum) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, storageDims);
    if (!storageDimsNum) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "storageDimsNum is NULL");
    return dims_out(api, tensor->storage, storageDims, storageDimsNum);
}
EMU_API aclnnStatus aclGetViewStrides(const aclTensor* tensor, int64_t** stridesValue, uint64_t* stridesNum) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, stridesValue);
    if (!stridesNum) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "stridesNum is NULL");
    return dims_out(api, tensor->stride, stridesValue, stridesNum);
}
EMU_API aclnnStatus aclGetViewOffset(const aclTensor* tensor, int64_t* offset) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, offset);
    *offset = tensor->offset;
    return ACLNN_SUCCESS;
}
EMU_API aclnnStatus aclGetFormat(const aclTensor* tensor, aclFormat* format) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, format);
    *format = tensor->format;
    return ACLNN_SUCCESS;
}
EMU_API aclnnStatus aclGetDataType(const aclTensor* tensor, aclDataType* dataType) {
    const char* api = __func__;
    HK_TENSOR_ARG(tensor, dataType);
    *dataType = tensor->dtype;
    return ACLNN_SUCCESS;
}
#undef HK_TENSOR_ARG

template <class A>
static aclnnStatus array_size(const A* a, uint64_t* size, const char* api) {
    if (!a || !size) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", !a ? "array" : "size");
    if (!live(a) || a->magic != kMiscMagic) return seterr(ACLNN_ERR_PARAM_INVALID, api, "%p is not a live array", (const void*)a);
    *size = a->v.size();
    return ACLNN_SUCCESS;
}
EMU_API aclnnStatus aclGetIntArraySize(const aclIntArray* array, uint64_t* size) { return array_size(array, size, __func__); }
EMU_API aclnnStatus aclGetFloatArraySize(const aclFloatArray* array, uint64_t* size) {
    return array_size(array, size, __func__);
}
EMU_API aclnnStatus aclGetBoolArraySize(const aclBoolArray* array, uint64_t* size) { return array_size(array, size, __func__); }
EMU_API aclnnStatus aclGetTensorListSize(const aclTensorList* tensorList, uint64_t* size) {
    return array_size(tensorList, size, __func__);
}

EMU_API aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor) {
    if (!executor) return seterr(ACLNN_ERR_INNER_NULLPTR, __func__, "executor is NULL");
    if (!executor_live(executor))
        return seterr(ACLNN_ERR_PARAM_INVALID, __func__,
                      "%p is not a live aclOpExecutor (a non-repeatable executor is released by its second phase)",
                      (void*)executor);
    if (executor->ran)
        return seterr(ACLNN_ERR_PARAM_INVALID, __func__,
                      "executor %p has run already: make it repeatable right after aclnn%sGetWorkspaceSize", (void*)executor,
                      executor->api.c_str() + (executor->api.rfind("aclnn", 0) == 0 ? 5 : 0));
    executor->repeatable = true;
    return ACLNN_SUCCESS;
}

EMU_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
    if (!executor) return seterr(ACLNN_ERR_INNER_NULLPTR, __func__, "executor is NULL");
    if (!executor_live(executor))
        return seterr(ACLNN_ERR_PARAM_INVALID, __func__, "%p is not a live aclOpExecutor (destroyed twice, or released "
                      "by the second phase because it was not repeatable)", (void*)executor);
    executor_free(executor);
    return ACLNN_SUCCESS;
}
