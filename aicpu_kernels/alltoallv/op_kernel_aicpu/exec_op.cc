/*
 * exec_op.cc -- built-in "alltoallv": rank i sends sendCounts[j] elements from input +
 * sdispls[j] to rank j, which receives them (recvCounts[i] elements) at output + rdispls[i].
 * Counts and displacements are in elements (OpParam arrays of 64, entries >= rankSize are 0);
 * OpParam.count is unused. Zero-length blocks are allowed (no traffic on that pair).
 *
 * What the kernel checks (HCCL_E_PARA with a message, before anything is enqueued):
 *  - offsets/lengths do not overflow, entries beyond rankSize are 0;
 *  - the own block is consistent (sendCounts[rank] == recvCounts[rank]);
 *  - receive blocks do not overlap each other, and the input and output ranges do not overlap.
 * What it cannot check: that sendCounts[j] of rank i equals recvCounts[i] of rank j (each rank
 * sees only its own arrays; a mismatch would make the two ends cut different slices and hang
 * until the notify timeout), and that the buffers are as large as the displacements say (the
 * kernel does not know their sizes). The Python layer (hcomm_kit/collectives.py) validates both:
 * it exchanges the counts and checks the input/output sizes before launching.
 *
 * The algorithm (AicpuAllToAllVSoleMesh; OpParam.algo: HK_ALGO_MESH or 0) lives in
 * inc/hk_alltoall.h, shared with alltoall; see there for the rounds, threads and the protocol.
 */
#include "exec_op.h"
#include "alltoallv_log.h"
#include "hk_coll.h"
#include "hk_alltoall.h"

namespace ops_alltoallv {
namespace {

// Byte range [first, last) of `count` elements at element offset `displ`; false on overflow.
bool ByteRange(uint64_t displ, uint64_t count, uint32_t unitSize, uint64_t *first, uint64_t *bytes)
{
    if (displ > UINT64_MAX / unitSize || count > UINT64_MAX / unitSize) {
        return false;
    }
    *first = displ * unitSize;
    *bytes = count * unitSize;
    return *first <= UINT64_MAX - *bytes;
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unitSize = HkUnitSize(param);
    if (unitSize == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t n = resCtx.rankSize;
    const uint32_t rank = resCtx.rank;
    constexpr uint32_t kMaxPeers = sizeof(param.sendCounts) / sizeof(param.sendCounts[0]);
    if (n == 0 || n > kMaxPeers || rank >= n) {
        OP_LOG_ERROR("bad rank %u / rankSize %u (the count arrays hold %u ranks), tag %s", rank, n, kMaxPeers,
                     param.tag);
        return HCCL_E_PARA;
    }
    for (uint32_t j = n; j < kMaxPeers; ++j) {
        if (param.sendCounts[j] != 0 || param.recvCounts[j] != 0) {
            OP_LOG_ERROR("sendCounts[%u] = %llu / recvCounts[%u] = %llu for a rank >= rankSize %u, tag %s", j,
                         static_cast<unsigned long long>(param.sendCounts[j]), j,
                         static_cast<unsigned long long>(param.recvCounts[j]), n, param.tag);
            return HCCL_E_PARA;
        }
    }
    if (param.sendCounts[rank] != param.recvCounts[rank]) {
        OP_LOG_ERROR("own block inconsistent: sendCounts[%u] = %llu != recvCounts[%u] = %llu, tag %s", rank,
                     static_cast<unsigned long long>(param.sendCounts[rank]), rank,
                     static_cast<unsigned long long>(param.recvCounts[rank]), param.tag);
        return HCCL_E_PARA;
    }

    HkA2aBlock blocks[kMaxPeers];
    uint64_t inLo = UINT64_MAX, inHi = 0, outLo = UINT64_MAX, outHi = 0;
    for (uint32_t j = 0; j < n; ++j) {
        HkA2aBlock &b = blocks[j];
        if (!ByteRange(param.sdispls[j], param.sendCounts[j], unitSize, &b.sendOffset, &b.sendBytes) ||
            !ByteRange(param.rdispls[j], param.recvCounts[j], unitSize, &b.recvOffset, &b.recvBytes)) {
            OP_LOG_ERROR("block %u overflows: sendCounts %llu sdispls %llu recvCounts %llu rdispls %llu, tag %s", j,
                         static_cast<unsigned long long>(param.sendCounts[j]),
                         static_cast<unsigned long long>(param.sdispls[j]),
                         static_cast<unsigned long long>(param.recvCounts[j]),
                         static_cast<unsigned long long>(param.rdispls[j]), param.tag);
            return HCCL_E_PARA;
        }
        if (b.sendBytes != 0) {
            inLo = HkMin(inLo, b.sendOffset);
            inHi = b.sendOffset + b.sendBytes > inHi ? b.sendOffset + b.sendBytes : inHi;
        }
        if (b.recvBytes != 0) {
            outLo = HkMin(outLo, b.recvOffset);
            outHi = b.recvOffset + b.recvBytes > outHi ? b.recvOffset + b.recvBytes : outHi;
        }
    }
    if (outHi == 0 && inHi == 0) {
        return HCCL_SUCCESS;  // nothing to move on this rank (no peer expects anything from it)
    }
    for (uint32_t a = 0; a < n; ++a) {  // receive blocks must be disjoint, or the result is a race
        for (uint32_t b = a + 1; b < n; ++b) {
            const HkA2aBlock &x = blocks[a];
            const HkA2aBlock &y = blocks[b];
            if (x.recvBytes != 0 && y.recvBytes != 0 && x.recvOffset < y.recvOffset + y.recvBytes &&
                y.recvOffset < x.recvOffset + x.recvBytes) {
                OP_LOG_ERROR("receive blocks %u (rdispls %llu, recvCounts %llu) and %u (rdispls %llu, recvCounts %llu) "
                             "overlap, tag %s",
                             a, static_cast<unsigned long long>(param.rdispls[a]),
                             static_cast<unsigned long long>(param.recvCounts[a]), b,
                             static_cast<unsigned long long>(param.rdispls[b]),
                             static_cast<unsigned long long>(param.recvCounts[b]), param.tag);
                return HCCL_E_PARA;
            }
        }
    }
    const uintptr_t in = reinterpret_cast<uintptr_t>(param.inputPtr);
    const uintptr_t out = reinterpret_cast<uintptr_t>(param.outputPtr);
    if ((inHi != 0 && in == 0) || (outHi != 0 && out == 0)) {
        OP_LOG_ERROR("inputPtr/outputPtr is NULL, tag %s", param.tag);
        return HCCL_E_PTR;
    }
    if (inHi != 0 && outHi != 0 && in + inLo < out + outHi && out + outLo < in + inHi) {
        OP_LOG_ERROR("input and output ranges overlap (in-place alltoallv is not supported), tag %s", param.tag);
        return HCCL_E_PARA;
    }
    return HkAlltoallRun(param, resCtx, param.algo, blocks, "AicpuAllToAllVSoleMesh");
}

}  // namespace ops_alltoallv
