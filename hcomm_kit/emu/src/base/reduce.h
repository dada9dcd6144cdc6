// Element-wise reductions for the emulated data plane (HcommLocalReduceOnThread, *_REDUCE
// transfers, built-in collectives) and the dtype/op tables they need.
//
// dtype values follow HcommDataType / HcclDataType: INT8 0, INT16 1, INT32 2, FP16 3, FP32 4,
// INT64 5, UINT64 6, UINT8 7, UINT16 8, UINT32 9, FP64 10, BFP16 11. Other values (INT128,
// HIF8, FP8*, ...) are not supported here. op values follow HcommReduceOp: SUM 0, PROD 1,
// MAX 2, MIN 3. Which (dtype, op) pairs a given product accepts is decided by the caller.
//
// Semantics: integer SUM/PROD wrap modulo 2^bits; MAX/MIN are the usual ones. FP32/FP64 are
// computed natively. FP16/BF16 are widened to float, combined, and rounded back to nearest-even.
// Floating MAX/MIN propagate NaN (like numpy.maximum / numpy.minimum).
#ifndef HCOMM_EMU_REDUCE_H
#define HCOMM_EMU_REDUCE_H

#include <cstddef>
#include <cstdint>

namespace emu {

enum : int {
    kDtInt8 = 0, kDtInt16 = 1, kDtInt32 = 2, kDtFp16 = 3, kDtFp32 = 4, kDtInt64 = 5,
    kDtUint64 = 6, kDtUint8 = 7, kDtUint16 = 8, kDtUint32 = 9, kDtFp64 = 10, kDtBf16 = 11,
};
enum : int { kOpSum = 0, kOpProd = 1, kOpMax = 2, kOpMin = 3 };

// Element size in bytes (SIZE_TABLE of CANN for these 12 types); 0 for any other value.
size_t dtype_size(int dtype);
// "int8", "int16", "int32", "fp16", "fp32", "int64", "uint64", "uint8", "uint16", "uint32",
// "fp64", "bf16"; otherwise "unknown(<n>)" (in a thread-local buffer valid until the next call
// from the same thread).
const char* dtype_name(int dtype);
// "sum", "prod", "max", "min"; otherwise "unknown(<n>)" (thread-local buffer as above).
const char* redop_name(int op);
// True for the 12 dtypes above x the 4 ops.
bool reduce_supported(int dtype, int op);

// dst[i] = dst[i] op src[i] for i < count. dst == src is allowed; otherwise the ranges should
// not overlap (if they do, elements are processed one by one in increasing order, which is
// defined but slow). count == 0 is a no-op (pointers may then be null). Returns false, touching
// nothing, if (dtype, op) is unsupported or a pointer is null while count > 0.
bool reduce_inplace(void* dst, const void* src, uint64_t count, int dtype, int op);

// Kernel family reduce_inplace currently uses: "avx2" (x86-64 CPU with AVX2 and F16C, chosen at
// run time) or "portable" (SSE2 baseline / other architectures). Both give identical results
// except for the payload bits of NaN results.
const char* reduce_isa();
// Testing hook: true makes reduce_inplace use the portable kernels in this process.
void reduce_force_portable(bool on);

// IEEE 754 binary16 <-> binary32. Exact widening; narrowing rounds to nearest-even, overflow
// gives +-inf, subnormals handled, NaN stays NaN (quiet, sign kept).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
// bfloat16 <-> binary32. Narrowing rounds to nearest-even; NaN stays NaN (quiet, sign kept).
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

}  // namespace emu

#endif  // HCOMM_EMU_REDUCE_H
