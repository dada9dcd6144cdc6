/*
 * hk_alltoall.h -- the all-to-all engine shared by the built-ins alltoall and alltoallv.
 *
 * Linked as inc/hk_alltoall.h by both operators and included from exec_op.cc after hk_coll.h.
 * The caller describes, per peer, the bytes it sends (input + sendOffset) and receives (output +
 * recvOffset); the engine runs CANN's AicpuAllToAllSoleMesh / AicpuAllToAllVSoleMesh
 * (InsTempAlltoAllVMesh1D; OpParam.algo HK_ALGO_MESH or 0): the peers in rounds of at most
 * HK_A2A_CONCURRENT (CANN's ALLTOALLV_DIRECT_FULLMESH_CONCURRENT_SIZE, 16) at once, each round the
 * pairs of peers at distances k*P+1 .. (k+1)*P to the right and to the left (P = half of it), a
 * device thread per peer, the round's threads joined before the next. The HCCL buffer is cut into
 * 2P regions: the one of a peer at distance i is 2 ((i-1) mod P) (to the right) or that plus one
 * (to the left), and the peer uses the mirror one for me, so each side knows where the other
 * staged. A block moves in pieces of the region (CANN's executors loop over the CCL buffer): the
 * sender's thread stages a piece in its region, the pull exchange of hk_coll.h (HkPull: "staged" -
 * read - "done reading") moves it straight into the receiver's output, as many pieces as the longer
 * direction needs (both ends count the same). The own block is a local copy on the main thread.
 * (AicpuAllToAllSoleMeshSingleChannel is the same algorithm on one channel per pair, which is all
 * the emulator has.)
 */
#ifndef HK_ALLTOALL_H
#define HK_ALLTOALL_H

#define HK_A2A_CONCURRENT 16u

/* One peer's share of an all-to-all, in bytes. */
typedef struct {
    uint64_t sendOffset; /* from inputPtr */
    uint64_t sendBytes;
    uint64_t recvOffset; /* into outputPtr */
    uint64_t recvBytes;
} HkA2aBlock;

/* On thread t: every piece of my block for p (staged in my region `mine`) and of p's block for me
 * (read from p's region `theirs` into my output), in pull exchanges. */
static inline HcclResult HkA2aExchange(const HkCall &c, ThreadHandle t, uint32_t p, const HkA2aBlock &b,
                                       uint64_t region, uint64_t mine, uint64_t theirs)
{
    const uint8_t *in = static_cast<const uint8_t *>(c.param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(c.param.outputPtr);
    const uint64_t sendPieces = (b.sendBytes + region - 1) / region;
    const uint64_t recvPieces = (b.recvBytes + region - 1) / region;
    const uint64_t pieces = sendPieces > recvPieces ? sendPieces : recvPieces;
    for (uint64_t q = 0; q < pieces; ++q) {
        const uint64_t at = q * region;
        if (at < b.sendBytes) {
            HK_TRY(HkCopy(c.param, t, c.buf + mine * region, in + b.sendOffset + at, HkMin(region, b.sendBytes - at)));
        }
        const uint64_t len = at < b.recvBytes ? HkMin(region, b.recvBytes - at) : 0;
        const HkXfer x{out + b.recvOffset + at, c.Remote(p) + theirs * region, len};
        HK_TRY(HkPull(c, t, p, &x, len != 0 ? 1 : 0));
    }
    return HCCL_SUCCESS;
}

/* Run the all-to-all described by blocks[0..rankSize) (own block: blocks[rank], sendBytes must
 * equal recvBytes). Validates resources before enqueuing anything. */
static inline HcclResult HkAlltoallRun(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t algo,
                                       const HkA2aBlock *blocks, const char *name)
{
    const uint32_t me = resCtx.rank;
    const uint32_t n = resCtx.rankSize;
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);
    const HkA2aBlock &own = blocks[me];
    uint64_t remoteBytes = 0;
    for (uint32_t p = 0; p < n; ++p) {
        if (p != me) {
            remoteBytes |= blocks[p].sendBytes | blocks[p].recvBytes;
        }
    }
    if (remoteBytes == 0) {  /* nothing crosses ranks (1 rank, count 0, or only the own block) */
        return HkCopy(param, resCtx.threads[0], output + own.recvOffset, input + own.sendOffset, own.recvBytes);
    }
    if (algo != HK_ALGO_AUTO && algo != HK_ALGO_MESH) {
        OP_LOG_ERROR("algo %u is not an algorithm of this operator (%u mesh, 0 auto), tag %s", algo, HK_ALGO_MESH,
                     param.tag);
        return HCCL_E_PARA;
    }
    const uint32_t concurrent = n - 1 < HK_A2A_CONCURRENT ? n - 1 : HK_A2A_CONCURRENT;
    const uint32_t pairs = (concurrent + 1) / 2;
    HkCall c{param, resCtx, name, 1, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, name, n > 2 ? (2 * pairs < n - 1 ? 2 * pairs : n - 1) + 1 : 1));
    c.unit = 1;  /* the engine counts bytes */
    for (uint32_t p = 0; p < n; ++p) {
        HK_TRY(HkCallPeer(&c, p));
    }
    const uint64_t region = HkSliceBytes(c.bufBytes / (2 * pairs));
    if (region == 0) {
        OP_LOG_ERROR("%s: HCCL buffer too small (%llu bytes for %u staging regions), tag %s", name,
                     static_cast<unsigned long long>(c.bufBytes), 2 * pairs, param.tag);
        return HCCL_E_MEMORY;
    }
    bool copied = false;
    const uint32_t far = n / 2;  /* the largest distance either way */
    for (uint32_t lo = 1; lo <= far; lo += pairs) {
        uint32_t peer[2 * HK_A2A_CONCURRENT], mine[2 * HK_A2A_CONCURRENT], theirs[2 * HK_A2A_CONCURRENT];
        uint32_t k = 0;
        for (uint32_t i = lo; i < lo + pairs && i <= far; ++i) {
            const uint32_t slot = 2 * ((i - 1) % pairs);
            const uint32_t right = (me + i) % n, left = (me + n - i) % n;
            peer[k] = right, mine[k] = slot, theirs[k] = right == left ? slot : slot + 1, ++k;
            if (left != right) {
                peer[k] = left, mine[k] = slot + 1, theirs[k] = slot, ++k;
            }
        }
        const uint32_t workers = n > 2 ? k : 0;
        if (workers != 0) {
            HK_TRY(HkFork(c, 0, 1, workers));
        }
        if (!copied) {  /* the own block, on the main thread while the first round runs */
            HK_TRY(HkCopy(param, c.Th(0), output + own.recvOffset, input + own.sendOffset, own.recvBytes));
            copied = true;
        }
        for (uint32_t j = 0; j < k; ++j) {
            const HkA2aBlock &b = blocks[peer[j]];
            if (b.sendBytes == 0 && b.recvBytes == 0) {
                continue;
            }
            HK_TRY(HkA2aExchange(c, c.Th(workers != 0 ? 1 + j : 0), peer[j], b, region, mine[j], theirs[j]));
        }
        if (workers != 0) {
            HK_TRY(HkJoin(c, 0, 1, workers));
        }
    }
    return HCCL_SUCCESS;
}

#endif /* HK_ALLTOALL_H */
