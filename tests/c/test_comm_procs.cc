/* HCCL communicator across processes: one process per rank, root info passed through a file.
 *
 * Usage: test_comm_procs <rank> <nranks> <rootfile> <mode>
 *   mode "ok":  init, barriers, mesh channels, write into every peer's HCCL buffer, verify, destroy.
 *   mode "die": init, one barrier, print READY; the last rank then sleeps (the driver SIGKILLs it)
 *               while the others keep calling HcclBarrier until it fails; they print
 *               "ERR <code> <message>" and exit 0 if the code is ACL_ERROR_RT_SUSPECT_REMOTE_ERROR.
 * Rank 0 writes the root info to <rootfile> (atomically: temp file + rename) unless the file
 * already exists; every other case reads it. */
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_res.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static int fail(const char* what, int rc) {
    const char* m = aclGetRecentErrMsg();
    fprintf(stderr, "FAIL %s: rc=%d (%s)\n", what, rc, m ? m : "no message");
    return 1;
}

#define TRY(expr)                                  \
    do {                                           \
        int rc_ = (int)(expr);                     \
        if (rc_ != 0) return fail(#expr, rc_);     \
    } while (0)

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s <rank> <nranks> <rootfile> ok|die\n", argv[0]);
        return 2;
    }
    uint32_t rank = (uint32_t)atoi(argv[1]), n = (uint32_t)atoi(argv[2]);
    std::string path = argv[3], mode = argv[4];
    setvbuf(stdout, nullptr, _IONBF, 0);
    TRY(aclInit(nullptr));
    TRY(aclrtSetDevice(0)); /* every process uses its own device 0 */
    HcclRootInfo root;
    if (rank == 0 && access(path.c_str(), F_OK) != 0) {
        TRY(HcclGetRootInfo(&root));
        std::string tmp = path + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&root, sizeof root, 1, f) != 1 || fclose(f) != 0) return fail("write root info", -1);
        if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename root info", -1);
    } else {
        FILE* f = nullptr;
        for (int i = 0; i < 3000 && !(f = fopen(path.c_str(), "rb")); i++) usleep(10000);
        if (!f || fread(&root, sizeof root, 1, f) != 1) return fail("read root info", -1);
        fclose(f);
    }
    HcclComm comm = nullptr;
    TRY(HcclCommInitRootInfo(n, &root, rank, &comm));
    aclrtStream s = nullptr;
    TRY(aclrtCreateStream(&s));
    TRY(HcclBarrier(comm, s));
    TRY(aclrtSynchronizeStream(s));

    if (mode == "die") {
        printf("READY %u\n", rank);
        if (rank == n - 1) {
            for (;;) pause();
        }
        for (int i = 0; i < 100000; i++) {
            int rc = HcclBarrier(comm, s);
            if (rc == 0) rc = aclrtSynchronizeStream(s);
            if (rc != 0) {
                const char* m = aclGetRecentErrMsg();
                printf("ERR %d %s\n", rc, m ? m : "");
                /* The communicator can still be destroyed cleanly. */
                TRY(HcclCommDestroy(comm));
                TRY(aclrtDestroyStream(s));
                aclFinalize();
                return rc == ACL_ERROR_RT_SUSPECT_REMOTE_ERROR ? 0 : 1;
            }
        }
        return fail("no barrier failed", -1);
    }

    for (int i = 0; i < 20; i++) TRY(HcclBarrier(comm, s));
    TRY(aclrtSynchronizeStream(s));
    std::vector<HcclChannelDesc> descs;
    std::vector<uint32_t> peers;
    for (uint32_t p = 0; p < n; p++) {
        if (p == rank) continue;
        HcclChannelDesc d;
        HcclChannelDescInit(&d, 1);
        d.remoteRank = p;
        d.channelProtocol = COMM_PROTOCOL_HCCS;
        d.notifyNum = 2;
        descs.push_back(d);
        peers.push_back(p);
    }
    std::vector<ChannelHandle> ch(descs.size(), 0);
    if (!descs.empty()) TRY(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs.data(), (uint32_t)descs.size(), ch.data()));
    void* local = nullptr;
    uint64_t lsize = 0;
    TRY(HcclGetHcclBuffer(comm, &local, &lsize));
    for (size_t i = 0; i < ch.size(); i++) {
        void* rb = nullptr;
        uint64_t rs = 0;
        TRY(HcclChannelGetHcclBuffer(comm, ch[i], &rb, &rs));
        char msg[64];
        snprintf(msg, sizeof msg, "from %u to %u", rank, peers[i]);
        memcpy(static_cast<char*>(rb) + rank * 64, msg, strlen(msg) + 1);
    }
    TRY(HcclBarrier(comm, s));
    TRY(aclrtSynchronizeStream(s));
    for (uint32_t p : peers) {
        char want[64];
        snprintf(want, sizeof want, "from %u to %u", p, rank);
        if (strcmp(static_cast<char*>(local) + p * 64, want) != 0) return fail("peer write not visible", -1);
    }
    char name[COMM_NAME_MAX_LENGTH];
    TRY(HcclGetCommName(comm, name));
    TRY(HcclBarrier(comm, s));
    TRY(aclrtSynchronizeStream(s));
    TRY(HcclCommDestroy(comm));
    TRY(aclrtDestroyStream(s));
    TRY(aclrtResetDevice(0));
    aclFinalize();
    printf("OK %u %s\n", rank, name);
    return 0;
}
