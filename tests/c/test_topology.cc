/* Cluster topology of a communicator: every rank-graph function, links taken down, the topology
 * JSON. One std::thread per rank, communicators from a root info, topology from the environment
 * (HCOMM_KIT_TOPOLOGY=PRODUCT:SxN, HCOMM_KIT_LINKS_DOWN, HCOMM_KIT_SOC set by the caller).
 *
 * Usage: test_topology <nranks> <servers> <npus per server> [down-a down-b]
 *   nranks != servers * npus: every rank's HcclCommInitRootInfo must fail naming both.
 *        test_topology table <scratch path>: an A3 rank table with super_pod_list (8 ranks).
 * Prints "PASS" and exits 0 on success; prints every failed check and exits 1 otherwise. */
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_rank_graph.h>
#include <hcomm_kit/emu_ext.h>

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

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            std::lock_guard<std::mutex> g_(g_print_m);                                                \
            const char* m_ = aclGetRecentErrMsg();                                                    \
            fprintf(stderr, "%s:%d: rank %u: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, rank, \
                    #cond, m_ ? m_ : "-");                                                            \
            g_failures++;                                                                             \
        }                                                                                             \
    } while (0)

#define CHECK_RC(expr, want)                                                                          \
    do {                                                                                              \
        int rc_ = (int)(expr);                                                                        \
        if (rc_ != (int)(want)) {                                                                     \
            std::lock_guard<std::mutex> g_(g_print_m);                                                \
            const char* m_ = aclGetRecentErrMsg();                                                    \
            fprintf(stderr, "%s:%d: rank %u: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, rank, #expr, \
                    rc_, (int)(want), m_ ? m_ : "no message");                                        \
            g_failures++;                                                                             \
        }                                                                                             \
    } while (0)

static void expect_msg(uint32_t rank, const char* needle, int line) {
    const char* m = aclGetRecentErrMsg();
    if (!m || !strstr(m, needle)) {
        std::lock_guard<std::mutex> g(g_print_m);
        fprintf(stderr, "line %d: rank %u: error message '%s' does not mention '%s'\n", line, rank, m ? m : "(none)",
                needle);
        g_failures++;
    }
}
#define EXPECT_MSG(needle) expect_msg(rank, needle, __LINE__)

static uint32_t g_n = 0, g_s = 0, g_p = 0;
static int g_down_a = -1, g_down_b = -1;
static std::string g_product;
static HcclRootInfo g_root;
static std::atomic<uint32_t> g_done{0};

static CommProtocol intra_proto() {
    return g_product == "950" ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
}

static bool is_down(uint32_t a, uint32_t b) {
    return g_down_a >= 0 && (((int)a == g_down_a && (int)b == g_down_b) || ((int)a == g_down_b && (int)b == g_down_a));
}

static void rank_main(uint32_t rank) {
    CHECK_RC(aclrtSetDevice((int32_t)rank), ACL_SUCCESS);
    HcclComm comm = nullptr;
    if (g_n != g_s * g_p) {
        CHECK_RC(HcclCommInitRootInfo(g_n, &g_root, rank, &comm), HCCL_E_PARA);
        const char* m = aclGetRecentErrMsg(); /* read once: reading clears it */
        std::string msg = m ? m : "";
        char a[64], b[64];
        snprintf(a, sizeof a, "%u servers x %u NPUs", g_s, g_p);
        snprintf(b, sizeof b, "the communicator has %u ranks", g_n);
        CHECK(msg.find(a) != std::string::npos && msg.find(b) != std::string::npos);
        return;
    }
    CHECK_RC(HcclCommInitRootInfo(g_n, &g_root, rank, &comm), HCCL_SUCCESS);
    if (!comm) return;
    const uint32_t server = rank / g_p, nlayers = g_s > 1 ? 2 : 1;

    uint32_t* list = nullptr;
    uint32_t num = 0;
    CHECK_RC(HcclRankGraphGetLayers(comm, &list, &num), HCCL_SUCCESS);
    CHECK(num == nlayers);
    for (uint32_t i = 0; i < num && i < nlayers; i++) CHECK(list[i] == i);

    /* L0: the caller's server. */
    CHECK_RC(HcclRankGraphGetRanksByLayer(comm, 0, &list, &num), HCCL_SUCCESS);
    CHECK(num == g_p);
    for (uint32_t i = 0; i < num && i < g_p; i++) CHECK(list[i] == server * g_p + i);
    CHECK_RC(HcclRankGraphGetRankSizeByLayer(comm, 0, &num), HCCL_SUCCESS);
    CHECK(num == g_p);
    CommTopo topo = COMM_TOPO_RESERVED;
    CHECK_RC(HcclRankGraphGetTopoTypeByLayer(comm, 0, &topo), HCCL_SUCCESS);
    CHECK(topo == COMM_TOPO_1DMESH);
    CHECK_RC(HcclRankGraphGetInstSizeListByLayer(comm, 0, &list, &num), HCCL_SUCCESS);
    CHECK(num == g_s);
    for (uint32_t i = 0; i < num && i < g_s; i++) CHECK(list[i] == g_p);
    CHECK_RC(HcclRankGraphGetTopoInstsByLayer(comm, 0, &list, &num), HCCL_SUCCESS);
    CHECK(num == 1 && list[0] == server);
    CHECK_RC(HcclRankGraphGetTopoType(comm, 0, server, &topo), HCCL_SUCCESS);
    CHECK(topo == COMM_TOPO_1DMESH);
    CHECK_RC(HcclRankGraphGetTopoType(comm, 0, g_s, &topo), HCCL_E_PARA);
    EXPECT_MSG("topoInstId");
    uint32_t other = (server + 1) % g_s;
    CHECK_RC(HcclRankGraphGetRanksByTopoInst(comm, 0, other, &list, &num), HCCL_SUCCESS);
    CHECK(num == g_p && list[0] == other * g_p);

    /* L1: every rank, between servers. */
    if (nlayers == 2) {
        CHECK_RC(HcclRankGraphGetRanksByLayer(comm, 1, &list, &num), HCCL_SUCCESS);
        CHECK(num == g_n);
        CHECK_RC(HcclRankGraphGetRankSizeByLayer(comm, 1, &num), HCCL_SUCCESS);
        CHECK(num == g_n);
        CHECK_RC(HcclRankGraphGetTopoTypeByLayer(comm, 1, &topo), HCCL_SUCCESS);
        CHECK(topo == COMM_TOPO_CLOS);
        CHECK_RC(HcclRankGraphGetInstSizeListByLayer(comm, 1, &list, &num), HCCL_SUCCESS);
        CHECK(num == 1 && list[0] == g_n);
    }
    CHECK_RC(HcclRankGraphGetRankSizeByLayer(comm, nlayers, &num), HCCL_E_PARA);
    EXPECT_MSG("netLayer");

    /* Links: HCCS (A2) / the super-pod bus (A3 HCCS, 950 UB_CTP) inside a server at L0, RoCE
     * between servers at L1, none where the layer does not join the pair or the link is down. */
    for (uint32_t peer = 0; peer < g_n; peer++) {
        if (peer == rank) continue;
        bool same = peer / g_p == server;
        for (uint32_t layer = 0; layer < nlayers; layer++) {
            CommLink* links = nullptr;
            uint32_t nl = 99;
            CHECK_RC(HcclRankGraphGetLinks(comm, layer, rank, peer, &links, &nl), HCCL_SUCCESS);
            bool want = (layer == 0) == same && !is_down(rank, peer);
            CHECK(nl == (want ? 1u : 0u));
            if (want && nl == 1 && links) {
                CommProtocol p = layer == 0 ? intra_proto() : COMM_PROTOCOL_ROCE;
                CHECK(links[0].linkAttr.linkProtocol == p);
                CHECK(links[0].srcEndpointDesc.commAddr.id == rank);
                CHECK(links[0].dstEndpointDesc.commAddr.id == peer);
                CHECK(links[0].dstEndpointDesc.protocol == p);
            }
        }
    }

    /* Endpoints: one per rank of the instance. */
    CHECK_RC(HcclRankGraphGetEndpointNum(comm, 0, server, &num), HCCL_SUCCESS);
    CHECK(num == g_p);
    std::vector<EndpointDesc> eps(g_p);
    uint32_t dn = g_p;
    CHECK_RC(HcclRankGraphGetEndpointDesc(comm, 0, server, &dn, eps.data()), HCCL_SUCCESS);
    CHECK(dn == g_p);
    for (uint32_t i = 0; i < dn && i < g_p; i++) {
        CHECK(eps[i].commAddr.id == server * g_p + i);
        CHECK(eps[i].protocol == intra_proto());
    }
    dn = g_p - 1;
    CHECK_RC(HcclRankGraphGetEndpointDesc(comm, 0, server, &dn, eps.data()), HCCL_E_PARA);
    uint32_t v = 0;
    CHECK_RC(HcclRankGraphGetEndpointInfo(comm, rank, &eps[0], ENDPOINT_ATTR_BW_COEFF, sizeof v, &v), HCCL_SUCCESS);
    CHECK(v == 4);
    CHECK_RC(HcclRankGraphGetEndpointInfo(comm, rank, &eps[0], ENDPOINT_ATTR_LOCATION, sizeof v, &v), HCCL_SUCCESS);
    CHECK(v == (uint32_t)ENDPOINT_LOC_TYPE_DEVICE);
    CHECK_RC(HcclRankGraphGetEndpointInfo(comm, rank, &eps[0], ENDPOINT_ATTR_DIE_ID, 2, &v), HCCL_E_PARA);
    if (nlayers == 2) {
        dn = g_n;
        std::vector<EndpointDesc> all(g_n);
        CHECK_RC(HcclRankGraphGetEndpointNum(comm, 1, 0, &num), HCCL_SUCCESS);
        CHECK(num == g_n);
        CHECK_RC(HcclRankGraphGetEndpointDesc(comm, 1, 0, &dn, all.data()), HCCL_SUCCESS);
        CHECK(dn == g_n && all[g_n - 1].protocol == COMM_PROTOCOL_ROCE);
        CHECK_RC(HcclRankGraphGetEndpointInfo(comm, rank, &all[0], ENDPOINT_ATTR_BW_COEFF, sizeof v, &v), HCCL_SUCCESS);
        CHECK(v == 1);
    }

    /* A channel over a downed link fails on both of its ranks, naming the link. */
    if (g_down_a >= 0 && ((int)rank == g_down_a || (int)rank == g_down_b)) {
        uint32_t peer = (uint32_t)((int)rank == g_down_a ? g_down_b : g_down_a);
        HcclChannelDesc d;
        HcclChannelDescInit(&d, 1);
        d.remoteRank = peer;
        d.channelProtocol = intra_proto();
        d.notifyNum = 1;
        ChannelHandle h = 0;
        CHECK_RC(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, &d, 1, &h), HCCL_E_NETWORK);
        char want[96];
        /* the message names the pair in the caller's order */
        snprintf(want, sizeof want, "link between rank %u and rank %u is down", rank, peer);
        EXPECT_MSG(want);
    }

    char json[1024];
    int32_t len = HcommKitCommTopology(comm, json, sizeof json);
    CHECK(len > 0 && len < (int32_t)sizeof json);
    CHECK(strstr(json, ("\"product\":\"" + g_product + "\"").c_str()) != nullptr);
    if (g_down_a >= 0) {
        char want[48];
        snprintf(want, sizeof want, "\"down\":[[%d,%d]]", g_down_a < g_down_b ? g_down_a : g_down_b,
                 g_down_a < g_down_b ? g_down_b : g_down_a);
        CHECK(strstr(json, want) != nullptr);
    }
    /* every rank done before any destroys (a slow rank still bootstrapping must not see a
     * destroyed peer) */
    g_done++;
    while (g_done.load() < g_n) std::this_thread::yield();
    CHECK_RC(HcclCommDestroy(comm), HCCL_SUCCESS);
}

/* Rank-table mode: an A3 table of 2 super-pods x 2 servers x 2 devices (8 ranks). Layers: 0 =
 * server, 1 = super-pod, 2 = everyone; UB (HCCS channels) inside a super-pod, RoCE across. */
static std::string g_table;

static void table_main(uint32_t rank) {
    CHECK_RC(aclrtSetDevice((int32_t)rank), ACL_SUCCESS);
    HcclComm comm = nullptr;
    CHECK_RC(HcclCommInitClusterInfo(g_table.c_str(), rank, &comm), HCCL_SUCCESS);
    if (!comm) return;
    uint32_t* list = nullptr;
    uint32_t num = 0;
    CHECK_RC(HcclRankGraphGetLayers(comm, &list, &num), HCCL_SUCCESS);
    CHECK(num == 3);
    CHECK_RC(HcclRankGraphGetInstSizeListByLayer(comm, 0, &list, &num), HCCL_SUCCESS);
    CHECK(num == 4 && list[0] == 2 && list[3] == 2);
    CHECK_RC(HcclRankGraphGetInstSizeListByLayer(comm, 1, &list, &num), HCCL_SUCCESS);
    CHECK(num == 2 && list[0] == 4 && list[1] == 4);
    CHECK_RC(HcclRankGraphGetInstSizeListByLayer(comm, 2, &list, &num), HCCL_SUCCESS);
    CHECK(num == 1 && list[0] == 8);
    CHECK_RC(HcclRankGraphGetRanksByLayer(comm, 1, &list, &num), HCCL_SUCCESS);
    CHECK(num == 4 && list[0] == rank / 4 * 4);
    CommTopo topo = COMM_TOPO_RESERVED;
    CHECK_RC(HcclRankGraphGetTopoTypeByLayer(comm, 2, &topo), HCCL_SUCCESS);
    CHECK(topo == COMM_TOPO_CLOS);
    for (uint32_t peer = 0; peer < 8; peer++) {
        if (peer == rank) continue;
        uint32_t want_layer = peer / 2 == rank / 2 ? 0 : peer / 4 == rank / 4 ? 1 : 2;
        for (uint32_t layer = 0; layer < 3; layer++) {
            CommLink* links = nullptr;
            uint32_t nl = 99;
            CHECK_RC(HcclRankGraphGetLinks(comm, layer, rank, peer, &links, &nl), HCCL_SUCCESS);
            CHECK(nl == (layer == want_layer ? 1u : 0u));
            if (nl == 1 && links)
                CHECK(links[0].linkAttr.linkProtocol == (want_layer == 2 ? COMM_PROTOCOL_ROCE : COMM_PROTOCOL_HCCS));
        }
    }
    char json[1024];
    CHECK(HcommKitCommTopology(comm, json, sizeof json) > 0);
    CHECK(strstr(json, "\"servers\":[[0,1],[2,3],[4,5],[6,7]],\"pods\":[[0,1],[2,3]]") != nullptr);
    CHECK(strstr(json, "\"link_in_server\":\"UB\",\"link_in_pod\":\"UB\"") != nullptr);
    g_done++;
    while (g_done.load() < 8) std::this_thread::yield();
    CHECK_RC(HcclCommDestroy(comm), HCCL_SUCCESS);
}

static int run_table(const char* path) {
    uint32_t rank = 0;
    g_table = path;
    FILE* f = fopen(path, "w");
    CHECK(f != nullptr);
    if (!f) return 1;
    fprintf(f, "{\"status\":\"completed\",\"version\":\"1.0\",\"server_count\":\"4\",\"server_list\":[");
    for (uint32_t s = 0; s < 4; s++) {
        fprintf(f, "%s{\"server_id\":\"node_%u\",\"device\":[", s ? "," : "", s);
        for (uint32_t d = 0; d < 2; d++)
            fprintf(f, "%s{\"device_id\":\"%u\",\"super_device_id\":\"%u\",\"rank_id\":\"%u\"}", d ? "," : "", d,
                    s * 2 + d, s * 2 + d);
        fprintf(f, "]}");
    }
    fprintf(f, "],\"super_pod_list\":[{\"super_pod_id\":\"0\",\"server_list\":[{\"server_id\":\"node_0\"},"
               "{\"server_id\":\"node_1\"}]},{\"super_pod_id\":\"1\",\"server_list\":[{\"server_id\":\"node_2\"},"
               "{\"server_id\":\"node_3\"}]}]}\n");
    fclose(f);
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < 8; i++) ts.emplace_back(table_main, i);
    for (auto& t : ts) t.join();
    remove(path);
    if (g_failures) {
        fprintf(stderr, "FAIL: %d check(s)\n", g_failures.load());
        return 1;
    }
    printf("PASS\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "table") == 0) {
        uint32_t rank = 0;
        CHECK_RC(aclInit(nullptr), ACL_SUCCESS);
        return run_table(argv[2]);
    }
    if (argc < 4) {
        fprintf(stderr, "usage: %s <nranks> <servers> <npus per server> [down-a down-b]\n", argv[0]);
        return 2;
    }
    g_n = (uint32_t)atoi(argv[1]);
    g_s = (uint32_t)atoi(argv[2]);
    g_p = (uint32_t)atoi(argv[3]);
    if (argc > 5) g_down_a = atoi(argv[4]), g_down_b = atoi(argv[5]);
    uint32_t rank = 0;
    CHECK_RC(aclInit(nullptr), ACL_SUCCESS);
    const char* soc = aclrtGetSocName();
    g_product = strcmp(soc, "Ascend910_93") == 0 ? "A3" : strcmp(soc, "Ascend950") == 0 ? "950" : "A2";
    CHECK_RC(HcclGetRootInfo(&g_root), HCCL_SUCCESS);
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < g_n; i++) ts.emplace_back(rank_main, i);
    for (auto& t : ts) t.join();
    if (g_failures) {
        fprintf(stderr, "FAIL: %d check(s)\n", g_failures.load());
        return 1;
    }
    printf("PASS\n");
    return 0;
}
