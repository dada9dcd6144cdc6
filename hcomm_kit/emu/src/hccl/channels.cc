/* HCCL host plane: channels (HcclChannelAcquire and friends; hcomm.md §3.8): the handshake through
 * the job segment's mailboxes. */
#include "hccl/comm.h"

#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ channels */

namespace {
const char* proto_name(int p) {
    switch (p) {
        case COMM_PROTOCOL_HCCS: return "COMM_PROTOCOL_HCCS";
        case COMM_PROTOCOL_ROCE: return "COMM_PROTOCOL_ROCE";
        case COMM_PROTOCOL_PCIE: return "COMM_PROTOCOL_PCIE";
        case COMM_PROTOCOL_SIO: return "COMM_PROTOCOL_SIO";
        case COMM_PROTOCOL_UB_CTP: return "COMM_PROTOCOL_UB_CTP";
        case COMM_PROTOCOL_UBC_TP: return "COMM_PROTOCOL_UBC_TP";
        case COMM_PROTOCOL_UB_MEM: return "COMM_PROTOCOL_UB_MEM";
        case COMM_PROTOCOL_UBOE: return "COMM_PROTOCOL_UBOE";
        case COMM_PROTOCOL_HCCS_ONLY: return "COMM_PROTOCOL_HCCS_ONLY";
        case COMM_PROTOCOL_UB_RTP: return "COMM_PROTOCOL_UB_RTP";
        case COMM_PROTOCOL_RESERVED: return "COMM_PROTOCOL_RESERVED";
        default: return "unknown protocol";
    }
}

bool proto_ok(int p) {
    if (is_950())
        return p == COMM_PROTOCOL_UB_CTP || p == COMM_PROTOCOL_UBOE || p == COMM_PROTOCOL_ROCE || p == COMM_PROTOCOL_UB_MEM;
    return p == COMM_PROTOCOL_HCCS || p == COMM_PROTOCOL_ROCE || p == COMM_PROTOCOL_HCCS_ONLY || p == COMM_PROTOCOL_SIO ||
           p == COMM_PROTOCOL_PCIE;
}

int check_desc(Comm* c, const HcclChannelDesc& d, uint32_t i, const char* api) {
    if (d.header.magicWord != HCCL_CHANNEL_MAGIC_WORD)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u] header magic 0x%08x is not 0x%08x: initialise it with "
                      "HcclChannelDescInit", i, d.header.magicWord, HCCL_CHANNEL_MAGIC_WORD);
    if (d.remoteRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].remoteRank %u is not below the rank size %u", i, d.remoteRank,
                      c->nranks);
    if (d.remoteRank == c->rank)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].remoteRank %u is this rank itself", i, d.remoteRank);
    if (c->topo.is_down(c->rank, d.remoteRank))
        return (HcclResult)seterr(HCCL_E_NETWORK, api, "rank %u: channelDescs[%u]: %s: route through another rank",
                                  c->rank, i, link_down_text(c, c->rank, d.remoteRank).c_str());
    if (d.notifyNum > 1024)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].notifyNum %u is above 1024", i, d.notifyNum);
    if (!proto_ok((int)d.channelProtocol))
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "channelDescs[%u]: protocol %s (%d) is not supported on %s (%s)", i,
                      proto_name((int)d.channelProtocol), (int)d.channelProtocol, cfg().soc_name.c_str(),
                      is_950() ? "use UB_CTP, UBOE, ROCE or UB_MEM" : "use HCCS, ROCE, HCCS_ONLY, SIO or PCIE");
    return 0;
}

int check_channel_engine(int engine, const char* api) {
    if (engine == COMM_ENGINE_CCU || engine == COMM_ENGINE_AIV)
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "channels of engine %s are not emulated",
                      engine == COMM_ENGINE_CCU ? "COMM_ENGINE_CCU" : "COMM_ENGINE_AIV");
    if (engine < COMM_ENGINE_CPU || engine > COMM_ENGINE_AICPU_TS)
        return (HcclResult)seterr(HCCL_E_PARA, api, "engine %d is not a CommEngine value", engine);
    return 0;
}

std::tuple<int, uint32_t, int> chan_key(int engine, const HcclChannelDesc& d) {
    return std::make_tuple((int)engine_side(engine), d.remoteRank, (int)d.channelProtocol);
}

struct Pending {
    uint32_t idx;      /* descriptor index */
    uint32_t peer;
    uint64_t seq;
    uint32_t slot_base;
    bool posted = false, matched = false;
    /* the peer's request */
    uint32_t got_notify = 0, got_slot = 0;
    int32_t got_proto = 0;
};

int acquire_channels(Comm* c, int engine, const HcclChannelDesc* descs, uint32_t n, ChannelHandle* out, const char* api) {
    if (int r = check_channel_engine(engine, api)) return r;
    if (n == 0 || n > (1u << 20)) return (HcclResult)seterr(HCCL_E_PARA, api, "channelNum %u is not in (0, 1048576]", n);
    comm_clear_failed_call(c);
    for (uint32_t i = 0; i < n; i++)
        if (int r = check_desc(c, descs[i], i, api)) {
            /* The peers of this call make their ends in their own HcclChannelAcquire and would wait
             * for this one until HCCL_CONNECT_TIMEOUT: the board tells them it failed. */
            uint64_t peers = 0;
            for (uint32_t k = 0; k < n; k++)
                if (descs[k].remoteRank < 64 && descs[k].remoteRank != c->rank) peers |= 1ull << descs[k].remoteRank;
            comm_note_failed_call(c, last_err(), peers);
            if (r == HCCL_E_NETWORK) comm_tell_link_failure(c, last_err());
            return r;
        }
    std::lock_guard<std::mutex> g(c->m);
    JobSeg* j = c->job;
    std::vector<Pending> pend;
    std::map<std::tuple<int, uint32_t, int>, size_t> in_call; /* key -> pend index */
    std::vector<int64_t> slot_of(n, -1);                       /* desc -> pend index, or -1 = existing */
    auto free_unmatched = [&] {
        for (auto& p : pend)
            if (!p.matched) slots_free(c->dev, p.slot_base, descs[p.idx].notifyNum);
    };
    for (uint32_t i = 0; i < n; i++) {
        auto key = chan_key(engine, descs[i]);
        if (c->channels.count(key)) continue;
        auto it = in_call.find(key);
        if (it != in_call.end()) {
            slot_of[i] = (int64_t)it->second;
            if (descs[pend[it->second].idx].notifyNum != descs[i].notifyNum) {
                free_unmatched();
                return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u] and [%u] name the same channel (rank %u, %s) with "
                              "different notifyNum (%u, %u)", pend[it->second].idx, i, descs[i].remoteRank,
                              proto_name((int)descs[i].channelProtocol), descs[pend[it->second].idx].notifyNum,
                              descs[i].notifyNum);
            }
            continue;
        }
        Pending p;
        p.idx = i;
        p.peer = descs[i].remoteRank;
        std::string err;
        if (!slots_alloc(c->dev, descs[i].notifyNum, &p.slot_base, &err)) {
            free_unmatched();
            return (HcclResult)seterr(HCCL_E_UNAVAIL, api, "channelDescs[%u] (to rank %u): %s", i, p.peer, err.c_str());
        }
        in_call[key] = pend.size();
        slot_of[i] = (int64_t)pend.size();
        pend.push_back(p);
    }
    /* Sequence numbers per peer, in descriptor order (the peer numbers its requests alike). */
    for (auto& p : pend) p.seq = ++c->send_seq[p.peer];
    /* Posts and matches progress together: a full ring waits for the peer to consume. The ranks
     * still to match are published for the hang analysis (a cycle of hosts blocked here). */
    uint64_t waiting_for = ~0ull;
    auto step = [&]() -> bool {
        bool all = true;
        uint64_t unmatched = 0;
        for (auto& p : pend) {
            if (!p.posted) {
                MailBox& mb = j->mail[c->rank][p.peer];
                if (p.seq - mb.consumed.load(std::memory_order_acquire) <= kMailDepth) {
                    const HcclChannelDesc& d = descs[p.idx];
                    if (comm_far(c, p.peer)) { /* its host's job segment gets the request */
                        CtlMsg m;
                        m.key = c->net_key;
                        m.type = (uint32_t)CtlType::Mail;
                        m.from = c->rank;
                        m.to = p.peer;
                        m.a = p.seq;
                        m.b = d.notifyNum;
                        m.c = (uint64_t)(int64_t)d.channelProtocol;
                        m.d = p.slot_base;
                        m.e = (uint64_t)(int64_t)engine;
                        std::string err;
                        if (c->link[p.peer]->control(m, nullptr, 0, &err) == 0) p.posted = true;
                    } else {
                        MailEntry& e = mb.e[p.seq % kMailDepth];
                        e.notify_num = d.notifyNum;
                        e.protocol = (int32_t)d.channelProtocol;
                        e.slot_base = p.slot_base;
                        e.engine = engine;
                        e.seq.store(p.seq, std::memory_order_release);
                        p.posted = true;
                        job_wake(j);
                    }
                }
            }
            if (!p.matched) {
                MailBox& mb = j->mail[p.peer][c->rank];
                MailEntry& e = mb.e[p.seq % kMailDepth];
                if (e.seq.load(std::memory_order_acquire) == p.seq) {
                    p.got_notify = e.notify_num;
                    p.got_proto = e.protocol;
                    p.got_slot = e.slot_base;
                    mb.consumed.store(p.seq, std::memory_order_release);
                    p.matched = true;
                    if (comm_far(c, p.peer)) { /* its host's job segment learns it */
                        CtlMsg m;
                        m.key = c->net_key;
                        m.type = (uint32_t)CtlType::MailAck;
                        m.from = c->rank;
                        m.to = p.peer;
                        m.a = p.seq;
                        std::string err;
                        c->link[p.peer]->control(m, nullptr, 0, &err);
                    }
                    job_wake(j);
                }
            }
            all = all && p.posted && p.matched;
            if (!p.matched && p.peer < 64) unmatched |= 1ull << p.peer;
        }
        if (unmatched != waiting_for) {
            waiting_for = unmatched;
            comm_note_connect(c, unmatched);
        }
        return all;
    };
    std::vector<uint32_t> peers;
    for (auto& p : pend) peers.push_back(p.peer);
    std::string why;
    int wr = kWaitOk;
    if (!pend.empty()) {
        std::string who;
        for (uint32_t r : peers) who += (who.empty() ? "" : ", ") + std::to_string(r);
        comm_note_host_call(c, strprintf("%s: setting up channels with rank(s) %s", api, who.c_str()).c_str());
        wr = comm_wait(c, &j->wake, secs_deadline(connect_timeout_s(c)), step, &peers, &why);
        comm_note_connect(c, 0);
        comm_note_host_call(c, nullptr);
    }
    /* Whatever matched becomes a channel even on failure (the peer made its end). */
    int rc = 0;
    for (auto& p : pend) {
        if (!p.matched) continue;
        c->recv_seq[p.peer] = std::max(c->recv_seq[p.peer], p.seq);
        const HcclChannelDesc& d = descs[p.idx];
        if (!rc && (p.got_notify != d.notifyNum || p.got_proto != (int32_t)d.channelProtocol)) {
            rc = seterr(HCCL_E_PARA, api,
                        "channel %llu between rank %u and rank %u: this rank asked for %s with notifyNum %u "
                        "(channelDescs[%u]) but rank %u asked for %s with notifyNum %u; both ends must match",
                        (unsigned long long)p.seq, c->rank, p.peer, proto_name((int)d.channelProtocol), d.notifyNum,
                        p.idx, p.peer, proto_name(p.got_proto), p.got_notify);
        }
        Channel* ch = new Channel();
        ch->comm = c;
        ch->engine = engine;
        ch->protocol = (int)d.channelProtocol;
        ch->remote_rank = p.peer;
        ch->notify_num = std::min(d.notifyNum, p.got_notify);
        ch->local_slot_base = p.slot_base;
        ch->remote_ctl = c->ctl[p.peer];
        ch->remote_slot_base = p.got_slot;
        ch->remote_buf = c->pbuf[p.peer];
        ch->remote_buf_size = c->pbuf_size[p.peer];
        ch->link = c->link.empty() ? nullptr : c->link[p.peer];
        channel_register(ch);
        c->channels[chan_key(engine, d)] = ch;
    }
    if (wr != kWaitOk) {
        for (auto& p : pend)
            if (!p.matched) slots_free(c->dev, p.slot_base, descs[p.idx].notifyNum);
        std::string missing;
        for (auto& p : pend)
            if (!p.matched) missing += (missing.empty() ? "" : ", ") + std::to_string(p.peer);
        if (wr == kWaitTimeout)
            return (HcclResult)seterr(HCCL_E_TIMEOUT, api,
                          "rank %u: rank(s) %s did not call HcclChannelAcquire for the matching channel within "
                          "%s%u s (channel creation is collective: both ends must call it)", c->rank, missing.c_str(),
                          c->connect_timeout_s ? "the communicator's connect timeout of " : "HCCL_CONNECT_TIMEOUT=",
                          connect_timeout_s(c));
        if (wr == kWaitPeerDead) comm_abort(c, why, AbortKind::PeerDead);
        return (HcclResult)seterr(HCCL_E_REMOTE, api, "rank %u: %s while connecting to rank(s) %s", c->rank, why.c_str(),
                      missing.c_str());
    }
    if (rc) return rc;
    for (uint32_t i = 0; i < n; i++) out[i] = (ChannelHandle)(uintptr_t)c->channels.at(chan_key(engine, descs[i]));
    return HCCL_SUCCESS;
}
}  // namespace

EMU_API HcclResult HcclChannelAcquire(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                      uint32_t channelNum, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    return (HcclResult)acquire_channels(c, engine, channelDescs, channelNum, channels, __func__);
}

EMU_API HcclResult HcclChannelAcquireWithConfig(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                                uint32_t channelNum, HcclChannelConfig config, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    (void)config;
    return (HcclResult)acquire_channels(c, engine, channelDescs, channelNum, channels, __func__);
}

EMU_API HcclResult HcclChannelQuery(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                    uint32_t channelNum, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    if (int r = check_channel_engine(engine, __func__)) return (HcclResult)r;
    if (channelNum == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "channelNum is 0");
    std::lock_guard<std::mutex> g(c->m);
    int missing = -1;
    for (uint32_t i = 0; i < channelNum; i++) {
        auto it = c->channels.find(chan_key(engine, channelDescs[i]));
        channels[i] = it == c->channels.end() ? 0 : (ChannelHandle)(uintptr_t)it->second;
        if (!channels[i] && missing < 0) missing = (int)i;
    }
    if (missing >= 0)
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no channel to rank %u over %s exists yet (channelDescs[%d])",
                      channelDescs[missing].remoteRank, proto_name((int)channelDescs[missing].channelProtocol), missing);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclChannelDestroy(HcclComm comm, const ChannelHandle* channels, uint32_t channelNum) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)channels;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "only CCU channels can be destroyed (spec §3.8); %u channel(s) stay until HcclCommDestroy", channelNum);
}

static Channel* comm_channel(Comm* c, ChannelHandle h, const char* api, int* rc) {
    Channel* ch = channel_from_handle(h);
    if (!ch) {
        *rc = seterr(h ? HCCL_E_PARA : HCCL_E_PTR, api, "channel 0x%llx is not a live channel handle", (unsigned long long)h);
        return nullptr;
    }
    if (ch->comm != c) {
        *rc = seterr(HCCL_E_PARA, api, "channel 0x%llx belongs to another communicator", (unsigned long long)h);
        return nullptr;
    }
    return ch;
}

EMU_API HcclResult HcclChannelGetHcclBuffer(HcclComm comm, ChannelHandle channel, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    int rc = 0;
    Channel* ch = comm_channel(c, channel, __func__, &rc);
    if (!ch) return (HcclResult)rc;
    *buffer = ch->remote_buf;
    *size = ch->remote_buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclChannelGetRemoteMems(HcclComm comm, ChannelHandle channel, uint32_t* memNum, CommMem** remoteMems,
                                            char*** memTags) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(memNum);
    NEED_PTR(remoteMems);
    NEED_PTR(memTags);
    if (!is_950())
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "remote memories are an Ascend950 feature (SoC is %s)",
                      cfg().soc_name.c_str());
    int rc = 0;
    if (!comm_channel(c, channel, __func__, &rc)) return (HcclResult)rc;
    /* HcclCommMemReg is not emulated, so no channel carries registered memories. */
    *memNum = 0;
    *remoteMems = nullptr;
    *memTags = nullptr;
    return HCCL_SUCCESS;
}
