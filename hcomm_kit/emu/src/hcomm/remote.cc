/* The data plane's tasks whose peer is reached over the network (net/transport.h): the same
 * transfers and records as htask_exec makes into a mapped peer (hcomm/sched.cc), through the
 * task's link; and the owner's side of a record that came over the network. */
#include "acl/device.h"
#include "base/reduce.h"
#include "hcomm/hooks.h"
#include "net/hooks.h"

#include <cstring>

namespace emu {

namespace {
uint64_t link_off(const PeerLink* l, const void* p) { return (uint64_t)((uintptr_t)p - (uintptr_t)l->base); }

/* The owner's side: slot `slot` of device `device` of this process, set as a local record sets it
 * (diag/checker.cc record_slot): model id, trace flow and provenance first, then the flag and the
 * doorbell, which wakes the waiters. */
void apply_record(int device, uint32_t slot, const RecordWords& w) {
    Device* d = device_peek(device);
    if (!d || !d->ctl || slot == 0 || slot >= kMaxSlots) {
        EMU_LOG(LOG_ERROR, "network: a notify record for slot %u of device %d, which this process does not have: "
                "dropped", slot, device);
        return;
    }
    DevCtl* ctl = d->ctl;
    ctl->mrec[slot].store(w.mrec, std::memory_order_relaxed);
    ctl->flow[slot].store(w.flow, std::memory_order_release);
    uint64_t before = 0;
    if (w.prov) {
        before = ctl->src[slot].load(std::memory_order_relaxed);
        ctl->src[slot].store(w.prov, std::memory_order_release);
    }
    uint32_t old = ctl->slots[slot].exchange(1, std::memory_order_acq_rel);
    doorbell_ring(ctl);
    if (old && w.prov && hcomm_hooks.remote_lost_notify)
        if (Comm* c = comm_by_net_key(w.key)) hcomm_hooks.remote_lost_notify(c, slot, w.prov, before);
}

struct RemoteHooks {
    RemoteHooks() { net_hooks.record = apply_record; }
} g_remote_hooks;
}  // namespace

int link_exec(HTask& t, HThread* self, std::string* msg, AbortKind* kind) {
    PeerLink* l = t.link;
    std::string err;
    int rc = 0;
    if (t.op == HOp::Copy) {
        if (t.mkind == mkind::Write) rc = l->write(link_off(l, t.dst), t.src, t.n, &err);
        else rc = l->read(t.dst, link_off(l, t.src), t.n, &err);
    } else if (t.op == HOp::Reduce) {
        if (t.mkind == mkind::WriteReduce) rc = l->write_reduce(link_off(l, t.dst), t.src, t.n, t.dtype, t.redop, &err);
        else rc = l->read_reduce(t.dst, link_off(l, t.src), t.n, t.dtype, t.redop, &err);
    }
    /* a read lands in this rank's memory: the unwritten-output check sees it as a local copy's write */
    if (!rc && t.op != HOp::Record && t.mkind != mkind::Write && t.mkind != mkind::WriteReduce && self &&
        self->dev->watches.load(std::memory_order_relaxed))
        output_watch_write(self->dev, t.dst, t.op == HOp::Copy ? t.n : t.n * dtype_size(t.dtype));
    if (!rc && (t.op == HOp::Record || t.has_post_record)) {
        bool post = t.op != HOp::Record;
        uint32_t slot = post ? t.post_slot : t.slot;
        int slot_rank = post ? t.post_rank : t.slot_rank;
        DevCtl* ctl = post ? t.post_ctl : t.slot_ctl;
        RecordWords w;
        w.mrec = t.mid;
        if (hcomm_hooks.record_words) hcomm_hooks.record_words(t, self, ctl, slot, slot_rank, t.chan_rec, &w.flow, &w.prov);
        w.key = t.comm ? comm_net_key(t.comm) : 0;
        rc = l->record(slot, w, &err);
    }
    if (!rc) return 1;
    Comm* c = t.comm;
    *msg = strprintf("rank %d: %s to rank %u over the network failed: %s", c ? comm_rank(c) : -1, t.api, l->rank,
                     err.c_str());
    *kind = rc == HCCL_E_REMOTE ? AbortKind::PeerDead : AbortKind::Other;
    return -3;
}

}  // namespace emu
