/* HCCL host control plane, one std::thread per rank (like CANN's testcase/main.cc).
 *
 * Usage: test_comm_threads <nranks> [rank-table scratch path]
 * Uses only the public headers and the emulator library. Prints "PASS" and exits 0 on success;
 * prints every failed check (file:line, expression, codes) and exits 1 otherwise. */
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_rank_graph.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static std::atomic<int> g_failures{0};
static std::mutex g_print_m;

#define CHECK(cond)                                                                                       \
    do {                                                                                                  \
        if (!(cond)) {                                                                                    \
            std::lock_guard<std::mutex> g_(g_print_m);                                                    \
            const char* m_ = aclGetRecentErrMsg();                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond,     \
                    m_ ? m_ : "-");                                                                       \
            g_failures++;                                                                                 \
        }                                                                                                 \
    } while (0)

#define CHECK_RC(expr, want)                                                                              \
    do {                                                                                                  \
        int rc_ = (int)(expr);                                                                            \
        if (rc_ != (int)(want)) {                                                                         \
            std::lock_guard<std::mutex> g_(g_print_m);                                                    \
            const char* m_ = aclGetRecentErrMsg();                                                        \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, #expr, rc_,   \
                    (int)(want), m_ ? m_ : "no message");                                                 \
            g_failures++;                                                                                 \
        }                                                                                                 \
    } while (0)

/* The last error message must exist and mention `needle`. */
static void expect_msg(const char* needle, int line) {
    const char* m = aclGetRecentErrMsg();
    if (!m || !strstr(m, needle)) {
        std::lock_guard<std::mutex> g(g_print_m);
        fprintf(stderr, "line %d: error message '%s' does not mention '%s'\n", line, m ? m : "(none)", needle);
        g_failures++;
    }
}
#define EXPECT_MSG(needle) expect_msg(needle, __LINE__)

static uint32_t g_n = 0;
static bool g_950 = false;
static CommProtocol g_proto = COMM_PROTOCOL_HCCS; /* the product's native link protocol */
static HcclRootInfo g_root;
static std::vector<std::string> g_names;
static std::atomic<uint32_t> g_bar_counter{0};

static HcclChannelDesc make_desc(uint32_t peer, CommProtocol proto, uint32_t notify) {
    HcclChannelDesc d;
    HcclChannelDescInit(&d, 1);
    d.remoteRank = peer;
    d.channelProtocol = proto;
    d.notifyNum = notify;
    return d;
}

static void barrier(HcclComm comm, aclrtStream s) {
    CHECK_RC(HcclBarrier(comm, s), HCCL_SUCCESS);
    CHECK_RC(aclrtSynchronizeStream(s), ACL_SUCCESS);
}

static void rank_main(uint32_t rank) {
    CHECK_RC(aclrtSetDevice((int32_t)rank), ACL_SUCCESS);
    HcclComm comm = nullptr;
    CHECK_RC(HcclCommInitRootInfo(g_n, &g_root, rank, &comm), HCCL_SUCCESS);
    if (!comm) return;
    uint32_t r = 99, sz = 0;
    CHECK_RC(HcclGetRankId(comm, &r), HCCL_SUCCESS);
    CHECK_RC(HcclGetRankSize(comm, &sz), HCCL_SUCCESS);
    CHECK(r == rank && sz == g_n);
    char name[COMM_NAME_MAX_LENGTH];
    CHECK_RC(HcclGetCommName(comm, name), HCCL_SUCCESS);
    g_names[rank] = name;

    aclrtStream stream = nullptr;
    CHECK_RC(aclrtCreateStream(&stream), ACL_SUCCESS);

    /* Barriers really synchronise: nobody leaves barrier k before everyone entered it. */
    for (uint32_t k = 0; k < 5; k++) {
        g_bar_counter.fetch_add(1);
        barrier(comm, stream);
        CHECK(g_bar_counter.load() >= g_n * (k + 1));
        barrier(comm, stream);
    }

    /* Threads. */
    ThreadHandle th[2] = {0, 0}, onCpu[2] = {0, 0}, back[2] = {0, 0};
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 2, 3, th), HCCL_SUCCESS);
    CHECK(th[0] != 0 && th[1] != 0 && th[0] != th[1]);
    CHECK_RC(HcclThreadExportToCommEngine(comm, 2, th, COMM_ENGINE_CPU_TS, onCpu), HCCL_SUCCESS);
    CHECK(onCpu[0] != 0 && onCpu[0] != th[0] && onCpu[1] != th[1]);
    CHECK_RC(HcclThreadExportToCommEngine(comm, 2, onCpu, COMM_ENGINE_AICPU_TS, back), HCCL_SUCCESS);
    CHECK(back[0] == th[0] && back[1] == th[1]);
    ThreadHandle old = 0;
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AICPU, 1, 0, &old), HCCL_SUCCESS);
    ThreadHandle cpu = 0, cpu2 = 0, cpuOnAicpu = 0;
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_CPU_TS, 1, 1, &cpu), HCCL_SUCCESS);
    CHECK_RC(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &cpu), HCCL_SUCCESS);
    CHECK_RC(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &cpu2), HCCL_SUCCESS);
    CHECK(cpu != 0 && cpu == cpu2); /* same stream, enough slots: same thread */
    CHECK_RC(HcclThreadExportToCommEngine(comm, 1, &cpu, COMM_ENGINE_AICPU_TS, &cpuOnAicpu), HCCL_SUCCESS);
    CHECK(cpuOnAicpu != 0 && cpuOnAicpu != cpu);
    ThreadConfig tcfg;
    ThreadConfigInit(&tcfg, 1);
    tcfg.notifyNumPerThread = 2;
    ThreadHandle tc = 0;
    CHECK_RC(HcclThreadAcquireWithConfig(comm, COMM_ENGINE_AICPU_TS, 1, THREAD_TYPE_TS, &tcfg, &tc), HCCL_SUCCESS);
    tcfg.header.magicWord = 0;
    CHECK_RC(HcclThreadAcquireWithConfig(comm, COMM_ENGINE_AICPU_TS, 1, THREAD_TYPE_TS, &tcfg, &tc), HCCL_E_PARA);
    ThreadHandle bad = 0;
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 0, 1, &bad), HCCL_E_PARA);
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AIV, 1, 1, &bad), HCCL_E_NOT_SUPPORT);
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 70000, &bad), HCCL_E_PARA);
    CHECK_RC(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, nullptr), HCCL_E_PTR);
    ThreadHandle junk = 12345;
    CHECK_RC(HcclThreadExportToCommEngine(comm, 1, &junk, COMM_ENGINE_CPU_TS, &bad), HCCL_E_PARA);
    EXPECT_MSG("threads[0]");

    /* Channels: mesh over HCCS, ring over ROCE. */
    std::vector<HcclChannelDesc> mesh;
    std::vector<uint32_t> peers;
    for (uint32_t p = 0; p < g_n; p++)
        if (p != rank) mesh.push_back(make_desc(p, g_proto, 2)), peers.push_back(p);
    std::vector<ChannelHandle> mh(mesh.size(), 0), mh2(mesh.size(), 0), mq(mesh.size(), 0);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, mesh.data(), (uint32_t)mesh.size(), mh.data()), HCCL_SUCCESS);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, mesh.data(), (uint32_t)mesh.size(), mh2.data()), HCCL_SUCCESS);
    CHECK_RC(HcclChannelQuery(comm, COMM_ENGINE_AICPU_TS, mesh.data(), (uint32_t)mesh.size(), mq.data()), HCCL_SUCCESS);
    for (size_t i = 0; i < mesh.size(); i++) CHECK(mh[i] != 0 && mh[i] == mh2[i] && mh[i] == mq[i]);
    uint32_t prev = (rank + g_n - 1) % g_n, next = (rank + 1) % g_n;
    HcclChannelDesc ring[2] = {make_desc(prev, COMM_PROTOCOL_ROCE, 1), make_desc(next, COMM_PROTOCOL_ROCE, 1)};
    ChannelHandle rh[2] = {0, 0};
    CHECK_RC(HcclChannelQuery(comm, COMM_ENGINE_AICPU_TS, ring, 2, rh), HCCL_E_NOT_FOUND);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, ring, 2, rh), HCCL_SUCCESS);
    CHECK(rh[0] != 0 && rh[1] != 0);
    CHECK((g_n == 2) == (rh[0] == rh[1]));
    for (size_t i = 0; i < mesh.size(); i++) CHECK(rh[0] != mh[i] && rh[1] != mh[i]);
    /* A host-engine channel is a different channel from the device one. */
    HcclChannelDesc hostd[2] = {make_desc(prev, g_proto, 1), make_desc(next, g_proto, 1)};
    ChannelHandle hh[2] = {0, 0};
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_CPU_TS, hostd, 2, hh), HCCL_SUCCESS);
    CHECK(hh[0] != 0 && hh[1] != 0);
    for (size_t i = 0; i < mesh.size(); i++) CHECK(hh[0] != mh[i] && hh[1] != mh[i]);
    /* Validation. */
    ChannelHandle bh = 0;
    HcclChannelDesc bd = make_desc(rank, g_proto, 1);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, &bd, 1, &bh), HCCL_E_PARA);
    bd = make_desc(g_n, g_proto, 1);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, &bd, 1, &bh), HCCL_E_PARA);
    EXPECT_MSG("remoteRank");
    bd = make_desc(next, g_950 ? COMM_PROTOCOL_HCCS : COMM_PROTOCOL_UB_CTP, 1);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, &bd, 1, &bh), HCCL_E_NOT_SUPPORT);
    EXPECT_MSG(g_950 ? "COMM_PROTOCOL_HCCS" : "COMM_PROTOCOL_UB_CTP");
    bd = make_desc(next, g_proto, 1);
    CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_CCU, &bd, 1, &bh), HCCL_E_NOT_SUPPORT);
    CHECK_RC(HcclChannelDestroy(comm, mh.data(), 1), HCCL_E_NOT_SUPPORT);

    /* HCCL buffers: what rank r writes through its channel lands in the peer's own buffer. */
    void* local = nullptr;
    uint64_t lsize = 0;
    CHECK_RC(HcclGetHcclBufferCleared(comm, &local, &lsize), HCCL_SUCCESS);
    CHECK(local != nullptr && lsize >= 4096);
    barrier(comm, stream); /* everyone cleared before anyone writes */
    for (size_t i = 0; i < mesh.size(); i++) {
        void* rb = nullptr;
        uint64_t rs = 0;
        CHECK_RC(HcclChannelGetHcclBuffer(comm, mh[i], &rb, &rs), HCCL_SUCCESS);
        CHECK(rb != nullptr && rs == lsize && rb != local);
        void* ipc = nullptr;
        uint64_t is = 0;
        CHECK_RC(HcclGetRemoteIpcHcclBuf(comm, peers[i], &ipc, &is), HCCL_SUCCESS);
        CHECK(ipc == rb && is == rs);
        char msg[64];
        snprintf(msg, sizeof msg, "from %u to %u", rank, peers[i]);
        if (rb) memcpy(static_cast<char*>(rb) + rank * 64, msg, strlen(msg) + 1);
    }
    barrier(comm, stream);
    for (uint32_t p : peers) {
        char want[64];
        snprintf(want, sizeof want, "from %u to %u", p, rank);
        CHECK(local && strcmp(static_cast<char*>(local) + p * 64, want) == 0);
    }
    void* b2 = nullptr;
    uint64_t s2 = 0;
    CHECK_RC(HcclGetHcclBuffer(comm, &b2, &s2), HCCL_SUCCESS);
    CHECK(b2 == local && s2 == lsize);
    CHECK_RC(HcclGetRemoteIpcHcclBuf(comm, g_n, &b2, &s2), HCCL_E_PARA);

    /* Engine contexts. */
    void* ctx = nullptr;
    uint64_t csize = 0;
    const char* tag = "test_comm_threads";
    CHECK(HcclEngineCtxGet(comm, tag, COMM_ENGINE_AICPU, &ctx, &csize) != HCCL_SUCCESS);
    CHECK_RC(HcclEngineCtxCreate(comm, tag, COMM_ENGINE_AICPU_TS, 256, &ctx), HCCL_SUCCESS);
    CHECK(ctx != nullptr);
    void* dup = nullptr;
    CHECK_RC(HcclEngineCtxCreate(comm, tag, COMM_ENGINE_AICPU_TS, 256, &dup), HCCL_E_PARA);
    void* got = nullptr;
    CHECK_RC(HcclEngineCtxGet(comm, tag, COMM_ENGINE_AICPU, &got, &csize), HCCL_SUCCESS); /* same engine side */
    CHECK(got == ctx && csize == 256);
    char blob[16];
    memset(blob, 0x5a, sizeof blob);
    CHECK_RC(HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, tag, blob, 16, 240), HCCL_SUCCESS);
    CHECK(ctx && memcmp(static_cast<char*>(ctx) + 240, blob, 16) == 0);
    CHECK_RC(HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, tag, blob, 16, 250), HCCL_E_PARA);
    EXPECT_MSG("250");
    /* Device memory: aclrtMemcpy host-to-device accepts it (the p2p example does this). */
    CHECK_RC(aclrtMemcpy(ctx, 256, blob, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    void* hctx = nullptr;
    CHECK_RC(HcclEngineCtxCreate(comm, tag, COMM_ENGINE_CPU_TS, 64, &hctx), HCCL_SUCCESS);
    CHECK(hctx != nullptr && hctx != ctx);
    CHECK_RC(HcclEngineCtxCreate(comm, "zero", COMM_ENGINE_AICPU_TS, 0, &dup), HCCL_E_PARA);
    CHECK_RC(HcclEngineCtxCreate(comm, nullptr, COMM_ENGINE_AICPU_TS, 8, &dup), HCCL_E_PTR);
    std::string longtag(300, 'x');
    CHECK_RC(HcclEngineCtxCreate(comm, longtag.c_str(), COMM_ENGINE_AICPU_TS, 8, &dup), HCCL_E_PARA);
    CHECK_RC(HcclEngineCtxDestroy(comm, tag, COMM_ENGINE_AICPU_TS), HCCL_SUCCESS);
    CHECK(HcclEngineCtxGet(comm, tag, COMM_ENGINE_AICPU_TS, &got, &csize) != HCCL_SUCCESS);
    CHECK_RC(HcclEngineCtxGet(comm, tag, COMM_ENGINE_CPU_TS, &got, &csize), HCCL_SUCCESS);
    CHECK(got == hctx && csize == 64);

    /* Rank graph. */
    CommLink* links = nullptr;
    uint32_t nl = 0;
    CHECK_RC(HcclRankGraphGetLinks(comm, 0, rank, next, &links, &nl), HCCL_SUCCESS);
    CHECK(nl == 1 && links && links[0].linkAttr.linkProtocol == g_proto && links[0].linkAttr.hop == 1);
    CHECK(links && links[0].srcEndpointDesc.commAddr.type == COMM_ADDR_TYPE_ID &&
          links[0].srcEndpointDesc.commAddr.id == rank && links[0].dstEndpointDesc.commAddr.id == next &&
          links[0].dstEndpointDesc.loc.locType == ENDPOINT_LOC_TYPE_DEVICE &&
          links[0].dstEndpointDesc.loc.device.devPhyId == next);
    uint32_t* layers = nullptr;
    uint32_t nlayers = 0, rsz = 0;
    CHECK_RC(HcclRankGraphGetLayers(comm, &layers, &nlayers), HCCL_SUCCESS);
    CHECK(nlayers == 1 && layers[0] == 0);
    CHECK_RC(HcclRankGraphGetRankSizeByLayer(comm, 0, &rsz), HCCL_SUCCESS);
    CHECK(rsz == g_n);
    CommTopo topo = COMM_TOPO_RESERVED;
    CHECK_RC(HcclRankGraphGetTopoTypeByLayer(comm, 0, &topo), HCCL_SUCCESS);
    CHECK(topo == COMM_TOPO_1DMESH);
    CHECK_RC(HcclRankGraphGetLinks(comm, 1, rank, next, &links, &nl), HCCL_E_PARA);

    /* Unsupported features say so. */
    CHECK_RC(HcclCommMemReg(comm, "m", nullptr, nullptr), HCCL_E_NOT_SUPPORT);
    CHECK_RC(HcclDedicatedThreadAcquire(comm, HCCL_DED_THREAD_TYPE_AICPU_LAUNCH, 1, &bad), HCCL_E_NOT_SUPPORT);

    barrier(comm, stream);
    CHECK_RC(HcclCommDestroy(comm), HCCL_SUCCESS);
    CHECK_RC(HcclGetRankId(comm, &r), HCCL_E_PARA); /* no longer a communicator */
    CHECK_RC(aclrtDestroyStream(stream), ACL_SUCCESS);
}

/* Rank-table communicators: the same table used twice in a row. */
static void table_main(uint32_t rank, const char* path, std::string* name) {
    CHECK_RC(aclrtSetDevice((int32_t)rank), ACL_SUCCESS);
    aclrtStream stream = nullptr;
    CHECK_RC(aclrtCreateStream(&stream), ACL_SUCCESS);
    for (int round = 0; round < 2; round++) {
        HcclComm comm = nullptr;
        CHECK_RC(HcclCommInitClusterInfo(path, rank, &comm), HCCL_SUCCESS);
        if (!comm) continue;
        uint32_t r = 0, sz = 0;
        HcclGetRankId(comm, &r);
        HcclGetRankSize(comm, &sz);
        CHECK(r == rank && sz == g_n);
        char nm[COMM_NAME_MAX_LENGTH];
        HcclGetCommName(comm, nm);
        *name = nm;
        barrier(comm, stream);
        CHECK_RC(HcclCommDestroy(comm), HCCL_SUCCESS);
    }
    CHECK_RC(aclrtDestroyStream(stream), ACL_SUCCESS);
}

static void error_paths() {
    HcclComm comm = nullptr;
    /* No device on this fresh thread. */
    std::thread([&] {
        CHECK_RC(HcclCommInitRootInfo(2, &g_root, 0, &comm), HCCL_E_RUNTIME);
        EXPECT_MSG("aclrtSetDevice");
    }).join();
    CHECK_RC(HcclCommInitRootInfo(2, nullptr, 0, &comm), HCCL_E_PTR);
    CHECK_RC(HcclCommInitRootInfo(2, &g_root, 2, &comm), HCCL_E_PARA);
    CHECK_RC(HcclCommInitRootInfo(0, &g_root, 0, &comm), HCCL_E_PARA);
    CHECK_RC(HcclCommInitRootInfo(65, &g_root, 0, &comm), HCCL_E_PARA);
    HcclRootInfo junk;
    memset(&junk, 0, sizeof junk);
    CHECK_RC(HcclCommInitRootInfo(2, &junk, 0, &comm), HCCL_E_PARA);
    CHECK_RC(HcclCommInitClusterInfo("/nonexistent/rank_table.json", 0, &comm), HCCL_E_OPEN_FILE_FAILURE);
    EXPECT_MSG("/nonexistent/rank_table.json");
    CHECK_RC(HcclGetRankId(nullptr, nullptr), HCCL_E_PTR);
    CHECK(strcmp(HcclGetErrorString(HCCL_E_TIMEOUT), "HCCL_E_TIMEOUT") == 0);
    CHECK_RC(HcclGroupStart(), HCCL_SUCCESS);
    CHECK_RC(HcclGroupEnd(), HCCL_SUCCESS);

    /* nRanks disagreement: the second rank fails with E_PARA, the first one learns it at once. */
    HcclRootInfo root;
    CHECK_RC(HcclGetRootInfo(&root), HCCL_SUCCESS);
    int rc0 = -1, rc1 = -1;
    std::thread a([&] {
        aclrtSetDevice(0);
        HcclComm c = nullptr;
        rc0 = HcclCommInitRootInfo(2, &root, 0, &c);
    });
    std::thread b([&] {
        aclrtSetDevice(1);
        HcclComm c = nullptr;
        /* let rank 0 arrive first */
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        rc1 = HcclCommInitRootInfo(3, &root, 1, &c);
        EXPECT_MSG("nRanks=3");
    });
    a.join();
    b.join();
    CHECK(rc1 == HCCL_E_PARA);
    CHECK(rc0 != HCCL_SUCCESS);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <nranks> [rank-table path]\n", argv[0]);
        return 2;
    }
    g_n = (uint32_t)atoi(argv[1]);
    std::string table = argc > 2 ? argv[2] : "/tmp/test_comm_threads_rank_table.json";
    CHECK_RC(aclInit(nullptr), ACL_SUCCESS);
    g_950 = strcmp(aclrtGetSocName(), "Ascend950") == 0;
    g_proto = g_950 ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    CHECK_RC(HcclGetRootInfo(&g_root), HCCL_SUCCESS);
    g_names.assign(g_n, "");
    {
        std::vector<std::thread> ts;
        for (uint32_t i = 0; i < g_n; i++) ts.emplace_back(rank_main, i);
        for (auto& t : ts) t.join();
    }
    for (uint32_t i = 0; i < g_n; i++) CHECK(!g_names[i].empty() && g_names[i] == g_names[0]);
    CHECK(g_names[0].size() < COMM_NAME_MAX_LENGTH);

    /* Rank table. */
    FILE* f = fopen(table.c_str(), "w");
    CHECK(f != nullptr);
    if (f) {
        fprintf(f, "{\"server_count\":\"1\",\"server_list\":[{\"server_id\":\"127.0.0.1\",\"device\":[");
        for (uint32_t i = 0; i < g_n; i++)
            fprintf(f, "%s{\"device_id\":\"%u\",\"device_ip\":\"192.168.1.%u\",\"rank_id\":\"%u\"}", i ? "," : "", i, i, i);
        fprintf(f, "]}],\"status\":\"completed\",\"version\":\"1.0\"}\n");
        fclose(f);
        std::vector<std::string> tnames(g_n);
        std::vector<std::thread> ts;
        for (uint32_t i = 0; i < g_n; i++) ts.emplace_back(table_main, i, table.c_str(), &tnames[i]);
        for (auto& t : ts) t.join();
        for (uint32_t i = 0; i < g_n; i++) CHECK(!tnames[i].empty() && tnames[i] == tnames[0]);
        CHECK(tnames[0] != g_names[0]);
        /* A rank that is not in the table, and a broken table. */
        HcclComm comm = nullptr;
        aclrtSetDevice(0);
        CHECK_RC(HcclCommInitClusterInfo(table.c_str(), g_n, &comm), HCCL_E_PARA);
        f = fopen(table.c_str(), "w");
        fprintf(f, "{\"server_list\":[{\"device\":[{\"device_id\":\"0\"}]}]}");
        fclose(f);
        CHECK_RC(HcclCommInitClusterInfo(table.c_str(), 0, &comm), HCCL_E_PARA);
        EXPECT_MSG("rank_id");
        remove(table.c_str());
    }

    /* HcclCommInitAll: one communicator per device in this process; barrier on each. */
    {
        std::vector<int32_t> devs(g_n);
        for (uint32_t i = 0; i < g_n; i++) devs[i] = (int32_t)(g_n - 1 - i);
        std::vector<HcclComm> comms(g_n, nullptr);
        CHECK_RC(HcclCommInitAll(g_n, devs.data(), comms.data()), HCCL_SUCCESS);
        std::vector<aclrtStream> ss(g_n, nullptr);
        for (uint32_t i = 0; i < g_n; i++) {
            uint32_t r = 99;
            CHECK_RC(HcclGetRankId(comms[i], &r), HCCL_SUCCESS);
            CHECK(r == i);
            CHECK_RC(aclrtSetDevice(devs[i]), ACL_SUCCESS);
            CHECK_RC(aclrtCreateStream(&ss[i]), ACL_SUCCESS);
            CHECK_RC(HcclBarrier(comms[i], ss[i]), HCCL_SUCCESS);
        }
        for (uint32_t i = 0; i < g_n; i++) {
            CHECK_RC(aclrtSynchronizeStream(ss[i]), ACL_SUCCESS);
            CHECK_RC(aclrtDestroyStream(ss[i]), ACL_SUCCESS);
            CHECK_RC(HcclCommDestroy(comms[i]), HCCL_SUCCESS);
        }
        devs[g_n - 1] = devs[0];
        if (g_n > 1) CHECK_RC(HcclCommInitAll(g_n, devs.data(), comms.data()), HCCL_E_PARA);
    }

    error_paths();
    aclFinalize();
    if (g_failures.load()) {
        fprintf(stderr, "FAIL: %d check(s) failed\n", g_failures.load());
        return 1;
    }
    printf("PASS %u ranks\n", g_n);
    return 0;
}
