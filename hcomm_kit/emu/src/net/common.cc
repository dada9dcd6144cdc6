/* Network layer: what does not depend on UCX (modes, host identity, job keys). */
#include "net/hooks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace emu {

NetHooks net_hooks;

NetMode net_mode_env() {
    const char* v = getenv("HCOMM_KIT_TRANSPORT");
    if (!v || !*v || !strcmp(v, "shm")) return NetMode::Shm;
    if (!strcmp(v, "multihost")) return NetMode::MultiHost;
    if (!strcmp(v, "ucx")) return NetMode::Ucx;
    static std::once_flag once;
    std::call_once(once, [v] {
        EMU_LOG(LOG_WARN, "HCOMM_KIT_TRANSPORT=%s is not one of shm, multihost, ucx: using shm", v);
    });
    return NetMode::Shm;
}

const char* net_mode_name(NetMode m) {
    switch (m) {
        case NetMode::MultiHost: return "multihost";
        case NetMode::Ucx: return "ucx";
        default: return "shm";
    }
}

namespace {
uint64_t fnv(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
}  // namespace

uint64_t net_job_key(const std::string& jobid) {
    uint64_t h = fnv(1469598103934665603ull, jobid.data(), jobid.size());
    return h ? h : 1;
}

void net_host_key(uint64_t key[2]) {
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    struct stat shm, ns;
    memset(&shm, 0, sizeof shm);
    memset(&ns, 0, sizeof ns);
    stat("/dev/shm", &shm);
    stat("/proc/self/ns/net", &ns);
    uint64_t words[3] = {(uint64_t)shm.st_dev, (uint64_t)shm.st_ino, (uint64_t)ns.st_ino};
    key[0] = fnv(fnv(1469598103934665603ull, boot.data(), boot.size()), words, sizeof words);
    key[1] = fnv(fnv(0x9e3779b97f4a7c15ull, words, sizeof words), boot.data(), boot.size());
}

std::string net_host_name() {
    char h[256] = {0};
    if (gethostname(h, sizeof h - 1) != 0) return "?";
    return h;
}

}  // namespace emu
