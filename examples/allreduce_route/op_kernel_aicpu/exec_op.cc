/*
 * exec_op.cc -- allreduce on a full mesh with links taken down (the public HCCL operator contest
 * task: an 8-NPU A2 server whose ranks 0 and 1 lost their direct link). README.md explains the
 * design from `hcomm-kit model explain`'s view.
 *
 *   hcomm-kit test examples/allreduce_route        (op.toml [test]: A2:1x8 with the link 0-1 down)
 *
 * Every peer has a device thread of its own (threads[1..n-1]), so every link moves data at once;
 * the main thread (threads[0]) stages, reduces and joins. Two algorithms (op.toml algorithms;
 * OpParam.algo 0 picks by size):
 *
 *   oneshot  (small) every rank reads every peer's whole slice into its HCCL buffer (one region
 *            per rank), then reduces the n regions in rank order: one step, few tasks.
 *   twoshot  (large) reduce-scatter: rank c reads chunk c of every peer's slice and reduces it;
 *            allgather: every rank reads each reduced chunk from its owner into the output. Each
 *            link carries 2/n of the data instead of all of it.
 *
 * A downed link (a, b) (channels[b].handle == 0 on rank a; AlgResourceCtx.linkUp, op.toml
 * link_map) is relayed by every other rank: the data b would have read from a is cut into n - 2
 * parts, and relay j (the k-th rank outside the pair) holds part k, which b reads from j. A relay
 * reads a's part first and tells b at once (RELAYED), so the far end waits for one part's transfer,
 * not a whole slice's. The downed links must share no rank (each rank relays at most one link of
 * its own), so every rank outside a pair reaches both of its ends.
 *
 * Per slice and step, with every peer q (channel notify slots, each recorded once and waited once):
 *   main:   stage my data, record POSTED to q            ("my region holds this slice")
 *   t_q:    wait POSTED from q, read q's region, record CONSUMED to q ("done reading yours"),
 *           [relay duties], record "done" to main (thread notify)
 *   main:   wait every thread's "done", reduce (or copy), wait CONSUMED from every peer (and
 *           RELAY_CONSUMED from the far ends of the links it relays) before its regions are reused.
 * A thread reuses its regions in the next slice only after main's GO (thread notify): main has
 * reduced them by then. The call ends with every thread joined and every region consumed, so the
 * next call starts clean.
 */
#include "exec_op.h"
#include "allreduce_route_log.h"

namespace ops_allreduce_route {
namespace {

// Channel notify slots (op.toml resources.channels.notifies = 8): step 1 (one-shot's only step,
// two-shot's reduce-scatter) and step 2 (two-shot's allgather).
constexpr uint32_t POSTED = 0;          // -> peer: my region holds this slice's data: read it
constexpr uint32_t CONSUMED = 1;        // -> peer: I have read your region
constexpr uint32_t RELAYED = 2;         // relay -> far end: your part of the unreachable rank's data is here
constexpr uint32_t RELAY_CONSUMED = 3;  // far end -> relay: I have read that part
constexpr uint32_t STEP2 = 4;           // the same four for step 2
// Thread notify slots (op.toml resources.notifies_per_thread = 32): a peer thread's GO, and on
// the main thread one "done" slot per peer thread and step (slot t for threads[t] in step 1,
// n - 1 + t in step 2: a thread may finish step 2 before main has joined step 1).
constexpr uint32_t GO = ALLREDUCE_ROUTE_THREAD_NOTIFY_BASE;
constexpr uint32_t NO_RANK = 0xffffffffu;
constexpr uint64_t ALIGN = 128;
// OpParam.algo 0: one-shot up to this many bytes, two-shot above: the modelled crossover on A2:1x8
// with 0-1 down lies between 1 MiB (one-shot 92.8 us, two-shot 134.2 us) and 2 MiB (154.4, 134.2);
// README.md.
constexpr uint64_t ONE_SHOT_MAX_BYTES = 3ULL << 19;

uint64_t Min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t AlignDown(uint64_t x)
{
    return x / ALIGN * ALIGN;
}

uint64_t AlignUp(uint64_t x)
{
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

// Element range [*first, *first + *count) of part `index` of `total` elements cut into `parts`.
void Part(uint64_t total, uint32_t parts, uint32_t index, uint64_t *first, uint64_t *count)
{
    const uint64_t base = total / parts;
    const uint64_t extra = total % parts;
    *count = base + (index < extra ? 1 : 0);
    *first = index * base + (index < extra ? index : extra);
}

struct Ctx {
    const OpParam *param;
    const AlgResourceCtx *res;
    uint32_t me;
    uint32_t n;
    uint32_t unit;
    HcommDataType dataType;
    HcommReduceOp reduceOp;
    uint32_t timeout;
    ThreadHandle main;
    uint32_t far;        // the rank my link is down to, or NO_RANK
    uint32_t relays;     // ranks outside a downed pair: n - 2
};

bool Up(const Ctx &c, uint32_t a, uint32_t b)
{
    return a != b && ((c.res->linkUp[a] >> b) & 1u) != 0;
}

// The rank r's link is down to, NO_RANK if none; *many set when r has more than one.
uint32_t FarOf(const Ctx &c, uint32_t r, bool *many)
{
    uint32_t far = NO_RANK;
    for (uint32_t q = 0; q < c.n; ++q) {
        if (q != r && !Up(c, r, q)) {
            if (far != NO_RANK) {
                *many = true;
            }
            far = q;
        }
    }
    return far;
}

bool Live(const Ctx &c, uint32_t q)
{
    return q != c.me && c.res->channels[q].handle != 0;
}

uint32_t ThreadIndex(const Ctx &c, uint32_t q)
{
    return q < c.me ? q + 1 : q;
}

ThreadHandle Thread(const Ctx &c, uint32_t q)
{
    return c.res->threads[ThreadIndex(c, q)];
}

ChannelHandle Chan(const Ctx &c, uint32_t q)
{
    return c.res->channels[q].handle;
}

uint8_t *Remote(const Ctx &c, uint32_t q, uint64_t offset)
{
    return static_cast<uint8_t *>(c.res->channels[q].remoteBuffer.addr) + offset;
}

uint8_t *Local(const Ctx &c, uint64_t offset)
{
    return static_cast<uint8_t *>(c.res->localBuffer.addr) + offset;
}

// My index among the relays of the downed pair (a, b): the ranks outside the pair, ascending.
uint32_t RelayIndex(uint32_t a, uint32_t b, uint32_t j)
{
    return j - (j > a ? 1 : 0) - (j > b ? 1 : 0);
}

// The far end of the downed link I relay for source q: Far(q) when q has a downed link that is
// not to me (then I reach both ends), else NO_RANK.
uint32_t RelayFor(const Ctx &c, uint32_t q)
{
    bool many = false;
    const uint32_t far = FarOf(c, q, &many);
    return far == c.me ? NO_RANK : far;
}

HcclResult Record(const Ctx &c, ThreadHandle t, uint32_t q, uint32_t slot)
{
    OP_CHECK(c.param->tag, HcommChannelNotifyRecordOnThread(t, Chan(c, q), slot));
    return HCCL_SUCCESS;
}

HcclResult Wait(const Ctx &c, ThreadHandle t, uint32_t q, uint32_t slot)
{
    OP_CHECK(c.param->tag, HcommChannelNotifyWaitOnThread(t, Chan(c, q), slot, c.timeout));
    return HCCL_SUCCESS;
}

HcclResult Read(const Ctx &c, ThreadHandle t, uint32_t q, void *dst, const void *src, uint64_t bytes)
{
    if (bytes != 0) {
        OP_CHECK(c.param->tag, HcommReadOnThread(t, Chan(c, q), dst, src, bytes));
    }
    return HCCL_SUCCESS;
}

// Main -> every peer thread: GO (its regions of the previous slice are reduced).
HcclResult Go(const Ctx &c)
{
    for (uint32_t q = 0; q < c.n; ++q) {
        if (Live(c, q)) {
            OP_CHECK(c.param->tag, HcommThreadNotifyRecordOnThread(c.main, Thread(c, q), GO));
        }
    }
    return HCCL_SUCCESS;
}

// Main waits for every peer thread's "done" of `step` (1 or 2).
HcclResult Join(const Ctx &c, uint32_t step)
{
    for (uint32_t q = 0; q < c.n; ++q) {
        if (Live(c, q)) {
            OP_CHECK(c.param->tag, HcommThreadNotifyWaitOnThread(c.main, (step - 1) * (c.n - 1) + ThreadIndex(c, q),
                                                                 c.timeout));
        }
    }
    return HCCL_SUCCESS;
}

HcclResult Done(const Ctx &c, uint32_t q, uint32_t step)
{
    OP_CHECK(c.param->tag, HcommThreadNotifyRecordOnThread(Thread(c, q), c.main,
                                                           (step - 1) * (c.n - 1) + ThreadIndex(c, q)));
    return HCCL_SUCCESS;
}

// Main, at the end of a step: every peer has read my regions, every far end my relay regions.
HcclResult AwaitConsumed(const Ctx &c, uint32_t base)
{
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        OP_CHECK(c.param->tag, Wait(c, c.main, q, base + CONSUMED));
        if (RelayFor(c, q) != NO_RANK) {
            OP_CHECK(c.param->tag, Wait(c, c.main, RelayFor(c, q), base + RELAY_CONSUMED));
        }
    }
    return HCCL_SUCCESS;
}

// The relayed part of a region of `elems` elements: relay j's part of the data of the pair (a, b).
void RelayPart(const Ctx &c, uint64_t elems, uint32_t a, uint32_t b, uint32_t j, uint64_t *first, uint64_t *count)
{
    Part(elems, c.relays, RelayIndex(a, b, j), first, count);
}

// Reduce n sources into dst in rank order (the same order, so the same bits, on every rank).
HcclResult ReduceInOrder(const Ctx &c, void *dst, const uint8_t *const *src, uint64_t elems)
{
    if (elems == 0) {
        return HCCL_SUCCESS;
    }
    OP_CHECK(c.param->tag, HcommLocalCopyOnThread(c.main, dst, src[0], elems * c.unit));
    for (uint32_t r = 1; r < c.n; ++r) {
        OP_CHECK(c.param->tag, HcommLocalReduceOnThread(c.main, dst, src[r], elems, c.dataType, c.reduceOp));
    }
    return HCCL_SUCCESS;
}

/*
 * One-shot, one slice of `elems` elements at element offset `done`. Region r (of `region` bytes)
 * of every buffer holds rank r's slice: rank r stages its own there, the others read it into the
 * same region of theirs.
 */
HcclResult OneShotSlice(const Ctx &c, uint64_t done, uint64_t elems, uint64_t region, bool first)
{
    const uint64_t bytes = elems * c.unit;
    const uint8_t *in = static_cast<const uint8_t *>(c.param->inputPtr) + done * c.unit;
    uint8_t *out = static_cast<uint8_t *>(c.param->outputPtr) + done * c.unit;
    if (!first) {
        OP_CHECK(c.param->tag, Go(c));
    }
    OP_CHECK(c.param->tag, HcommLocalCopyOnThread(c.main, Local(c, c.me * region), in, bytes));
    for (uint32_t q = 0; q < c.n; ++q) {
        if (Live(c, q)) {
            OP_CHECK(c.param->tag, Record(c, c.main, q, POSTED));
        }
    }
    // The AICPU issues every thread's tasks one after another (in this order): every thread's wait
    // first, then their reads, so that every link starts moving early; the handshakes last.
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        const ThreadHandle t = Thread(c, q);
        if (!first) {
            OP_CHECK(c.param->tag, HcommThreadNotifyWaitOnThread(t, GO, c.timeout));
        }
        OP_CHECK(c.param->tag, Wait(c, t, q, POSTED));
    }
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        const ThreadHandle t = Thread(c, q);
        const uint32_t b = RelayFor(c, q);
        uint64_t pf = 0;
        uint64_t pc = 0;
        if (b != NO_RANK) {  // the far end's part first, then tell it
            RelayPart(c, elems, q, b, c.me, &pf, &pc);
            OP_CHECK(c.param->tag, Read(c, t, q, Local(c, q * region + pf * c.unit), Remote(c, q, q * region + pf * c.unit),
                                        pc * c.unit));
            OP_CHECK(c.param->tag, Record(c, t, b, RELAYED));
        }
        OP_CHECK(c.param->tag, Read(c, t, q, Local(c, q * region), Remote(c, q, q * region), pf * c.unit));
        OP_CHECK(c.param->tag, Read(c, t, q, Local(c, q * region + (pf + pc) * c.unit),
                                    Remote(c, q, q * region + (pf + pc) * c.unit), bytes - (pf + pc) * c.unit));
    }
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        const ThreadHandle t = Thread(c, q);
        OP_CHECK(c.param->tag, Record(c, t, q, CONSUMED));
        if (c.far != NO_RANK) {  // my part of the far rank's slice, held by relay q
            uint64_t pf = 0;
            uint64_t pc = 0;
            RelayPart(c, elems, c.far, c.me, q, &pf, &pc);
            OP_CHECK(c.param->tag, Wait(c, t, q, RELAYED));
            OP_CHECK(c.param->tag, Read(c, t, q, Local(c, c.far * region + pf * c.unit),
                                        Remote(c, q, c.far * region + pf * c.unit), pc * c.unit));
            OP_CHECK(c.param->tag, Record(c, t, q, RELAY_CONSUMED));
        }
        OP_CHECK(c.param->tag, Done(c, q, 1));
    }
    OP_CHECK(c.param->tag, Join(c, 1));
    const uint8_t *src[ALLREDUCE_ROUTE_MAX_CHANNELS];
    for (uint32_t r = 0; r < c.n; ++r) {
        src[r] = Local(c, r * region);
    }
    OP_CHECK(c.param->tag, ReduceInOrder(c, out, src, elems));
    return AwaitConsumed(c, 0);
}

/*
 * Two-shot, one slice of `elems` elements. My buffer: STAGE (my slice, `stage` bytes), GATHER[q]
 * (chunk me of q's slice, `chunk` bytes each), RESULT (my reduced chunk), and for the links I
 * relay RLY1[q] (step 1: part of q's chunk for the far end) and RLY2[q] (step 2: part of q's
 * reduced chunk), `part` bytes each.
 */
struct Layout {
    uint64_t stage, chunk, part;
    uint64_t Gather(uint32_t q) const { return stage + q * chunk; }
    uint64_t Result(uint32_t n) const { return stage + n * chunk; }
    uint64_t Rly1(uint32_t n, uint32_t q) const { return stage + (n + 1) * chunk + q * part; }
    uint64_t Rly2(uint32_t n, uint32_t q) const { return stage + (n + 1) * chunk + (n + q) * part; }
    uint64_t Size(uint32_t n) const { return stage + (n + 1) * chunk + 2 * n * part; }
};

Layout TwoShotLayout(const Ctx &c, uint64_t sliceElems)
{
    const uint64_t chunkElems = (sliceElems + c.n - 1) / c.n;
    const uint32_t parts = c.relays == 0 ? 1 : c.relays;
    Layout l;
    l.stage = AlignUp(sliceElems * c.unit);
    l.chunk = AlignUp(chunkElems * c.unit);
    l.part = c.far == NO_RANK && c.relays == 0 ? 0 : AlignUp((chunkElems + parts - 1) / parts * c.unit);
    return l;
}

HcclResult TwoShotSlice(const Ctx &c, uint64_t done, uint64_t elems, const Layout &l, bool first)
{
    const uint8_t *in = static_cast<const uint8_t *>(c.param->inputPtr) + done * c.unit;
    uint8_t *out = static_cast<uint8_t *>(c.param->outputPtr) + done * c.unit;
    uint64_t cf[ALLREDUCE_ROUTE_MAX_CHANNELS];  // chunk r: elements [cf[r], cf[r] + cc[r])
    uint64_t cc[ALLREDUCE_ROUTE_MAX_CHANNELS];
    for (uint32_t r = 0; r < c.n; ++r) {
        Part(elems, c.n, r, &cf[r], &cc[r]);
    }
    const uint32_t me = c.me;
    // ---- step 1: reduce-scatter ----
    if (!first) {
        OP_CHECK(c.param->tag, Go(c));
    }
    // Stage chunk by chunk, each peer told as soon as its chunk is in place: the chunks of the ranks
    // with a downed link first (the relays read theirs from the first POSTED on; their reads carry
    // the most), then the others; my own chunk is reduced from the input and not staged.
    for (uint32_t pass = 0; pass < 2; ++pass) {
        for (uint32_t q = 0; q < c.n; ++q) {
            bool many = false;
            if (q == me || (FarOf(c, q, &many) != NO_RANK) != (pass == 0)) {
                continue;
            }
            if (cc[q] != 0) {
                OP_CHECK(c.param->tag, HcommLocalCopyOnThread(c.main, Local(c, cf[q] * c.unit), in + cf[q] * c.unit,
                                                              cc[q] * c.unit));
            }
            if (Live(c, q)) {
                OP_CHECK(c.param->tag, Record(c, c.main, q, POSTED));
            }
        }
    }
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        const ThreadHandle t = Thread(c, q);
        if (!first) {
            OP_CHECK(c.param->tag, HcommThreadNotifyWaitOnThread(t, GO, c.timeout));
        }
        OP_CHECK(c.param->tag, Wait(c, t, q, POSTED));
        const uint32_t b = RelayFor(c, q);
        uint64_t pf = 0;
        uint64_t pc = 0;
        if (b != NO_RANK) {  // my part of q's chunk b, for b: first, then tell b
            RelayPart(c, cc[b], q, b, me, &pf, &pc);
            OP_CHECK(c.param->tag, Read(c, t, q, Local(c, l.Rly1(c.n, q)), Remote(c, q, (cf[b] + pf) * c.unit),
                                        pc * c.unit));
            OP_CHECK(c.param->tag, Record(c, t, b, RELAYED));
        }
        OP_CHECK(c.param->tag, Read(c, t, q, Local(c, l.Gather(q)), Remote(c, q, cf[me] * c.unit), cc[me] * c.unit));
        OP_CHECK(c.param->tag, Record(c, t, q, CONSUMED));
        if (c.far != NO_RANK) {  // relay q holds my part of the far rank's chunk me
            RelayPart(c, cc[me], c.far, me, q, &pf, &pc);
            OP_CHECK(c.param->tag, Wait(c, t, q, RELAYED));
            OP_CHECK(c.param->tag, Read(c, t, q, Local(c, l.Gather(c.far) + pf * c.unit), Remote(c, q, l.Rly1(c.n, c.far)),
                                        pc * c.unit));
            OP_CHECK(c.param->tag, Record(c, t, q, RELAY_CONSUMED));
        }
        OP_CHECK(c.param->tag, Done(c, q, 1));
    }
    OP_CHECK(c.param->tag, Join(c, 1));
    const uint8_t *src[ALLREDUCE_ROUTE_MAX_CHANNELS];
    for (uint32_t r = 0; r < c.n; ++r) {
        src[r] = r == me ? in + cf[me] * c.unit : Local(c, l.Gather(r));
    }
    OP_CHECK(c.param->tag, ReduceInOrder(c, Local(c, l.Result(c.n)), src, cc[me]));
    // ---- step 2: allgather ----
    for (uint32_t q = 0; q < c.n; ++q) {
        if (Live(c, q)) {
            OP_CHECK(c.param->tag, Record(c, c.main, q, STEP2 + POSTED));
        }
    }
    if (cc[me] != 0) {
        OP_CHECK(c.param->tag, HcommLocalCopyOnThread(c.main, out + cf[me] * c.unit, Local(c, l.Result(c.n)),
                                                      cc[me] * c.unit));
    }
    for (uint32_t q = 0; q < c.n; ++q) {
        if (!Live(c, q)) {
            continue;
        }
        const ThreadHandle t = Thread(c, q);
        OP_CHECK(c.param->tag, Wait(c, t, q, STEP2 + POSTED));
        OP_CHECK(c.param->tag, Read(c, t, q, out + cf[q] * c.unit, Remote(c, q, l.Result(c.n)), cc[q] * c.unit));
        const uint32_t b = RelayFor(c, q);
        uint64_t pf = 0;
        uint64_t pc = 0;
        if (b != NO_RANK) {  // my part of q's reduced chunk, for b (q's chunk is now in my output)
            RelayPart(c, cc[q], q, b, me, &pf, &pc);
            if (pc != 0) {
                OP_CHECK(c.param->tag, HcommLocalCopyOnThread(t, Local(c, l.Rly2(c.n, q)), out + (cf[q] + pf) * c.unit,
                                                              pc * c.unit));
            }
            OP_CHECK(c.param->tag, Record(c, t, b, STEP2 + RELAYED));
        }
        OP_CHECK(c.param->tag, Record(c, t, q, STEP2 + CONSUMED));
        if (c.far != NO_RANK) {  // relay q holds my part of the far rank's reduced chunk
            RelayPart(c, cc[c.far], c.far, me, q, &pf, &pc);
            OP_CHECK(c.param->tag, Wait(c, t, q, STEP2 + RELAYED));
            OP_CHECK(c.param->tag, Read(c, t, q, out + (cf[c.far] + pf) * c.unit, Remote(c, q, l.Rly2(c.n, c.far)),
                                        pc * c.unit));
            OP_CHECK(c.param->tag, Record(c, t, q, STEP2 + RELAY_CONSUMED));
        }
        OP_CHECK(c.param->tag, Done(c, q, 2));
    }
    OP_CHECK(c.param->tag, Join(c, 2));
    OP_CHECK(c.param->tag, AwaitConsumed(c, 0));
    return AwaitConsumed(c, STEP2);
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    Ctx c;
    c.param = &param;
    c.res = &resCtx;
    c.me = resCtx.rank;
    c.n = resCtx.rankSize;
    c.unit = OpDataTypeSize(param.dataType);
    c.dataType = static_cast<HcommDataType>(param.dataType);
    c.reduceOp = static_cast<HcommReduceOp>(param.reduceOp);
    c.timeout = param.notifyTimeout;
    c.main = resCtx.aicpuThread;
    if (c.unit == 0) {
        OP_LOG_ERROR("unsupported dataType %d, tag %s", static_cast<int>(param.dataType), param.tag);
        return HCCL_E_PARA;
    }
    if (c.n == 1 || param.count == 0) {
        if (param.count != 0 && param.outputPtr != param.inputPtr) {
            OP_CHECK(param.tag, HcommLocalCopyOnThread(c.main, param.outputPtr, param.inputPtr, param.count * c.unit));
        }
        return HCCL_SUCCESS;
    }
    if (2 * (c.n - 1) > ALLREDUCE_ROUTE_THREAD_NOTIFY_NUM || resCtx.threadNum < c.n) {
        OP_LOG_ERROR("%u ranks: this operator joins one thread per peer and step on the main thread's %u notify "
                     "slots (op.toml notifies_per_thread: 17 ranks at most), and has %u threads, tag %s", c.n,
                     ALLREDUCE_ROUTE_THREAD_NOTIFY_NUM, resCtx.threadNum, param.tag);
        return HCCL_E_PARA;
    }
    // The downed links: each rank has at most one, so that the ranks outside a pair reach both ends.
    c.relays = 0;
    for (uint32_t r = 0; r < c.n; ++r) {
        bool many = false;
        const uint32_t far = FarOf(c, r, &many);
        if (many) {
            OP_LOG_ERROR("rank %u has more than one link down (HCOMM_KIT_LINKS_DOWN): this operator relays one "
                         "downed link per rank, tag %s", r, param.tag);
            return HCCL_E_NOT_SUPPORT;
        }
        if (far != NO_RANK) {
            c.relays = c.n - 2;
        }
    }
    bool many = false;
    c.far = FarOf(c, c.me, &many);
    if (c.far != NO_RANK && c.relays == 0) {
        OP_LOG_ERROR("the link %u-%u is down (HCOMM_KIT_LINKS_DOWN) and no third rank can relay it, tag %s",
                     c.me < c.far ? c.me : c.far, c.me < c.far ? c.far : c.me, param.tag);
        return HCCL_E_NETWORK;
    }
    uint64_t bufferBytes = resCtx.localBuffer.size;
    for (uint32_t q = 0; q < c.n; ++q) {
        if (Live(c, q)) {
            bufferBytes = Min(bufferBytes, resCtx.channels[q].remoteBuffer.size);
        }
    }
    uint32_t algo = param.algo;
    if (algo == ALLREDUCE_ROUTE_ALGO_NONE) {
        algo = param.count * c.unit <= ONE_SHOT_MAX_BYTES ? ALLREDUCE_ROUTE_ALGO_ONESHOT : ALLREDUCE_ROUTE_ALGO_TWOSHOT;
    }
    if (algo == ALLREDUCE_ROUTE_ALGO_ONESHOT) {
        const uint64_t region = AlignDown(bufferBytes / c.n);
        const uint64_t maxSlice = region / c.unit;
        if (maxSlice == 0) {
            OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u regions), tag %s",
                         static_cast<unsigned long long>(bufferBytes), c.n, param.tag);
            return HCCL_E_MEMORY;
        }
        for (uint64_t done = 0; done < param.count; done += maxSlice) {
            OP_CHECK(param.tag, OneShotSlice(c, done, Min(maxSlice, param.count - done), region, done == 0));
        }
        return HCCL_SUCCESS;
    }
    if (algo != ALLREDUCE_ROUTE_ALGO_TWOSHOT) {
        OP_LOG_ERROR("unknown algorithm %u (op.toml algorithms: 1 oneshot, 2 twoshot), tag %s", algo, param.tag);
        return HCCL_E_PARA;
    }
    // The largest slice whose layout fits the buffer: about bufferBytes / (2 + 2 / (n - 2)).
    uint64_t maxSlice = bufferBytes / c.unit / 2;
    while (maxSlice > 0 && TwoShotLayout(c, maxSlice).Size(c.n) > bufferBytes) {
        maxSlice -= maxSlice / 16 + 1;
    }
    if (maxSlice == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    const Layout layout = TwoShotLayout(c, maxSlice);
    for (uint64_t done = 0; done < param.count; done += maxSlice) {
        OP_CHECK(param.tag, TwoShotSlice(c, done, Min(maxSlice, param.count - done), layout, done == 0));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_allreduce_route
