/* Host of the diagnosis test operator: runs a list of scenarios on one communicator, ranks as
 * std::threads of one process or as processes under mpirun (root info through a file).
 *
 *   diag_main <json> threads <n> <scenarios> <bugRank>
 *   diag_main <json> mpi <rootfile> <scenarios> <bugRank>
 *
 * scenarios: comma-separated kernel names without "Dg" (Good, Missing, ...); a name ending in "-"
 * (Held-) launches without the host's wait for the kernel's "done" notify (the stream's sync then
 * returns once the kernel has queued its tasks, which the device threads may still be running). Each launch is
 * synchronised with aclrtSynchronizeStream (no timeout: HCCL_EXEC_TIMEOUT keeps its 1836 s
 * default), like a C host that only checks return codes. Per launch every rank prints
 *   RESULT rank=<r> scenario=<s> rc=<code> secs=<t>
 * and, on failure, the runtime's message between MSG-BEGIN / MSG-END lines; a failed launch ends
 * that rank's list. "Good", "Ring" and "P2p" also check their output bytes. */
#include <acl/acl.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {
std::mutex g_out;
const char* g_json = nullptr;
aclrtBinHandle g_bin = nullptr;
std::mutex g_bin_m;

#define CHECK(x)                                                                                            \
    do {                                                                                                    \
        int rc_ = (int)(x);                                                                                 \
        if (rc_ != 0) {                                                                                     \
            const char* m_ = aclGetRecentErrMsg();                                                          \
            std::lock_guard<std::mutex> g_(g_out);                                                          \
            printf("FATAL rank=%u %s:%d %s -> %d (%s)\n", R.rank, __FILE__, __LINE__, #x, rc_, m_ ? m_ : ""); \
            fflush(stdout);                                                                                 \
            return 1;                                                                                       \
        }                                                                                                   \
    } while (0)

struct Rank {
    uint32_t rank = 0, n = 0;
    int32_t bug = -1;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    OpParam param;
    AlgResourceCtx host;
    void* ctx = nullptr;
    void* in = nullptr;
    void* out = nullptr;
    ThreadHandle cpu = 0, main_on_cpu = 0;
};

uint8_t pattern(uint32_t rank, uint64_t i) { return (uint8_t)(rank * 37 + i * 11 + 5); }

int setup(Rank& R, const HcclRootInfo* root) {
    CHECK(aclrtSetDevice((int32_t)R.rank));
    CHECK(HcclCommInitRootInfo(R.n, root, R.rank, &R.comm));
    CHECK(aclrtCreateStream(&R.stream));
    OpParam& p = R.param;
    memset(&p, 0, sizeof p);
    CHECK(HcclGetCommName(R.comm, p.commName));
    const char* tag = "diag_test";
    CHECK(HcclEngineCtxCreate(R.comm, tag, COMM_ENGINE_AICPU_TS, sizeof(AlgResourceCtx), &R.ctx));
    AlgResourceCtx& h = R.host;
    memset(&h, 0, sizeof h);
    h.rank = R.rank;
    h.rankSize = R.n;
    CHECK(HcclThreadAcquireWithStream(R.comm, COMM_ENGINE_CPU_TS, R.stream, 1, &R.cpu));
    CHECK(HcclThreadExportToCommEngine(R.comm, 1, &R.cpu, COMM_ENGINE_AICPU_TS, &h.cpuThreadOnAicpu));
    CHECK(HcclThreadAcquire(R.comm, COMM_ENGINE_AICPU_TS, 2, 2, h.threads));
    h.aicpuThread = h.threads[0];
    CHECK(HcclThreadExportToCommEngine(R.comm, 1, &h.threads[0], COMM_ENGINE_CPU_TS, &R.main_on_cpu));
    std::vector<HcclChannelDesc> descs;
    for (uint32_t q = 0; q < R.n; q++) {
        if (q == R.rank) continue;
        HcclChannelDesc d;
        HcclChannelDescInit(&d, 1);
        d.remoteRank = q;
        d.channelProtocol = COMM_PROTOCOL_HCCS;
        d.notifyNum = 2;
        descs.push_back(d);
    }
    std::vector<ChannelHandle> hs(descs.size());
    if (!descs.empty()) CHECK(HcclChannelAcquire(R.comm, COMM_ENGINE_AICPU_TS, descs.data(), (uint32_t)descs.size(), hs.data()));
    for (size_t i = 0; i < descs.size(); i++) {
        ChannelInfo& c = h.channels[descs[i].remoteRank];
        c.remoteRank = descs[i].remoteRank;
        c.notifyNum = 2;
        c.handle = hs[i];
        CHECK(HcclChannelGetHcclBuffer(R.comm, hs[i], &c.remoteBuffer.addr, &c.remoteBuffer.size));
    }
    CHECK(HcclGetHcclBuffer(R.comm, &h.localBuffer.addr, &h.localBuffer.size));
    CHECK(HcclEngineCtxCopy(R.comm, COMM_ENGINE_AICPU_TS, tag, &h, sizeof h, 0));
    CHECK(aclrtMalloc(&R.in, BLOCK, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&R.out, MAX_RANKS * BLOCK, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<uint8_t> v(BLOCK);
    for (uint64_t i = 0; i < BLOCK; i++) v[i] = pattern(R.rank, i);
    CHECK(aclrtMemcpy(R.in, BLOCK, v.data(), BLOCK, ACL_MEMCPY_HOST_TO_DEVICE));
    p.inputPtr = R.in;
    p.outputPtr = R.out;
    p.bugRank = R.bug;
    p.resCtx = static_cast<AlgResourceCtx*>(R.ctx);
    snprintf(p.tag, sizeof p.tag, "%s", tag);
    return 0;
}

int launch(Rank& R, const std::string& name, bool wait_done) {
    {
        std::lock_guard<std::mutex> g(g_bin_m);
        if (!g_bin) {
            aclrtBinaryLoadOptions opts = {};
            aclrtBinaryLoadOption opt;
            opts.numOpt = 1;
            opts.options = &opt;
            opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
            opt.value.cpuKernelMode = 1;
            CHECK(aclrtBinaryLoadFromFile(g_json, &opts, &g_bin));
        }
    }
    aclrtFuncHandle fn;
    CHECK(aclrtBinaryGetFunction(g_bin, ("Dg" + name).c_str(), &fn));
    CHECK(HcommThreadNotifyRecordOnThread(R.cpu, R.main_on_cpu, 0));  /* "go" */
    aclrtArgsHandle args;
    aclrtParamHandle ph;
    CHECK(aclrtKernelArgsInit(fn, &args));
    CHECK(aclrtKernelArgsAppend(args, &R.param, sizeof R.param, &ph));
    CHECK(aclrtKernelArgsFinalize(args));
    CHECK(aclrtLaunchKernelWithConfig(fn, 1, R.stream, nullptr, args, nullptr));
    if (wait_done) CHECK(HcommThreadNotifyWaitOnThread(R.cpu, 0, 0));  /* "done", no timeout */
    return 0;
}

int check_good(Rank& R) {
    std::vector<uint8_t> got(R.n * BLOCK);
    CHECK(aclrtMemcpy(got.data(), got.size(), R.out, got.size(), ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint32_t q = 0; q < R.n; q++)
        for (uint64_t i = 0; i < BLOCK; i++)
            if (got[q * BLOCK + i] != pattern(q, i)) {
                std::lock_guard<std::mutex> g(g_out);
                printf("WRONG rank=%u block=%u byte=%llu got=%u want=%u\n", R.rank, q, (unsigned long long)i,
                       got[q * BLOCK + i], pattern(q, i));
                return 1;
            }
    return 0;
}

/* "Ring": every rank gets the int32 sum (wrapping) of all inputs; "P2p": the input of rank - 1. */
int check_ring_p2p(Rank& R, bool ring) {
    std::vector<uint8_t> got(BLOCK), want(BLOCK);
    CHECK(aclrtMemcpy(got.data(), got.size(), R.out, got.size(), ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < BLOCK; i += 4) {
        uint32_t sum = 0;
        for (uint32_t q = 0; q < R.n; q++) {
            uint32_t v = 0;
            for (int k = 0; k < 4; k++) v |= (uint32_t)pattern(q, i + k) << (8 * k);
            sum += v;
        }
        for (int k = 0; k < 4; k++)
            want[i + k] = ring ? (uint8_t)(sum >> (8 * k)) : pattern((R.rank + R.n - 1) % R.n, i + k);
    }
    for (uint64_t i = 0; i < BLOCK; i++)
        if (got[i] != want[i]) {
            std::lock_guard<std::mutex> g(g_out);
            printf("WRONG rank=%u byte=%llu got=%u want=%u\n", R.rank, (unsigned long long)i, got[i], want[i]);
            return 1;
        }
    return 0;
}

int run_rank(Rank& R, const HcclRootInfo* root, const std::vector<std::string>& scenarios) {
    if (setup(R, root)) return 1;
    for (std::string s : scenarios) {
        bool wait_done = s.back() != '-';
        if (!wait_done) s.pop_back();
        CHECK(HcclBarrier(R.comm, R.stream));
        CHECK(aclrtSynchronizeStream(R.stream));
        auto t0 = std::chrono::steady_clock::now();
        if (launch(R, s, wait_done)) return 1;
        int rc = aclrtSynchronizeStream(R.stream);
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const char* m = aclGetRecentErrMsg();
        int bad = rc != 0 ? 0 : s == "Good" ? check_good(R) : s == "Ring" || s == "P2p" ? check_ring_p2p(R, s == "Ring") : 0;
        if (rc == 0 && s == "OwnBlock") { /* the host reads the output back, as CANN's examples print it */
            std::vector<uint8_t> got(R.n * BLOCK);
            int back = aclrtMemcpy(got.data(), got.size(), R.out, got.size(), ACL_MEMCPY_DEVICE_TO_HOST);
            const char* bm = aclGetRecentErrMsg();
            std::lock_guard<std::mutex> g(g_out);
            printf("READBACK rank=%u rc=%d\nMSG-BEGIN rank=%u\n%s\nMSG-END\n", R.rank, back, R.rank,
                   back && bm ? bm : "");
        }
        {
            std::lock_guard<std::mutex> g(g_out);
            printf("RESULT rank=%u scenario=%s rc=%d secs=%.3f\n", R.rank, s.c_str(), rc, dt);
            if (rc) printf("MSG-BEGIN rank=%u\n%s\nMSG-END\n", R.rank, m ? m : "");
            fflush(stdout);
        }
        if (rc || bad) break;
    }
    HcclCommDestroy(R.comm);
    aclrtDestroyStream(R.stream);
    aclrtResetDevice((int32_t)R.rank);
    return 0;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string x;
    while (std::getline(ss, x, ','))
        if (!x.empty()) out.push_back(x);
    return out;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s <json> threads <n> <scenarios> <bugRank> | <json> mpi <rootfile> <scenarios> <bugRank>\n",
                argv[0]);
        return 2;
    }
    g_json = argv[1];
    std::string mode = argv[2];
    std::vector<std::string> scenarios = split(argv[4]);
    int32_t bug = atoi(argv[5]);
    if (aclInit(nullptr) != 0) return 3;
    int rc = 0;
    if (mode == "threads") {
        uint32_t n = (uint32_t)atoi(argv[3]);
        HcclRootInfo root;
        if (HcclGetRootInfo(&root) != 0) return 4;
        std::vector<Rank> ranks(n);
        std::vector<std::thread> th;
        std::vector<int> rcs(n, 0);
        for (uint32_t r = 0; r < n; r++) {
            ranks[r].rank = r;
            ranks[r].n = n;
            ranks[r].bug = bug;
            th.emplace_back([&, r] { rcs[r] = run_rank(ranks[r], &root, scenarios); });
        }
        for (auto& t : th) t.join();
        for (int x : rcs) rc |= x;
    } else {
        Rank R;
        R.rank = (uint32_t)atoi(getenv("OMPI_COMM_WORLD_RANK"));
        R.n = (uint32_t)atoi(getenv("OMPI_COMM_WORLD_SIZE"));
        R.bug = bug;
        std::string path = argv[3];
        HcclRootInfo root;
        if (R.rank == 0) {
            if (HcclGetRootInfo(&root) != 0) return 4;
            std::string tmp = path + ".tmp";
            std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<char*>(&root), sizeof root);
            rename(tmp.c_str(), path.c_str());
        } else {
            for (int i = 0;; i++) {
                std::ifstream f(path, std::ios::binary);
                if (f && f.read(reinterpret_cast<char*>(&root), sizeof root)) break;
                if (i > 3000) return 5;
                usleep(10000);
            }
        }
        rc = run_rank(R, &root, scenarios);
    }
    aclFinalize();
    printf("EXIT rc=%d\n", rc);
    return rc;
}
