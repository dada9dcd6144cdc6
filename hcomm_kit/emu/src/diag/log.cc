/* Diagnosis: the per-rank log (HCOMM_KIT_LOG_DIR), written through rank_log (base/hooks.h). */
#include "diag/board.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <set>

namespace emu {

/* ================================================================ per-rank log */

namespace {
std::mutex& g_log_m = *new std::mutex();
FILE* g_log = nullptr;
bool g_log_tried = false;

}  // namespace

std::string world_rank_text() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HCOMM_KIT_RANK", "RANK"}) {
        const char* x = getenv(v);
        if (x && *x && strspn(x, "0123456789") == strlen(x)) return x;
    }
    return "";
}


void diag_logv(const char* fmt, va_list ap) {
    const std::string& dir = cfg().log_dir;
    if (dir.empty()) return;
    char small[1024];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    std::string msg;
    if (n >= (int)sizeof small) {
        msg.resize((size_t)n + 1);
        vsnprintf(&msg[0], msg.size(), fmt, ap2);
        msg.resize((size_t)n);
    } else {
        msg.assign(small, n < 0 ? 0 : (size_t)n);
    }
    va_end(ap2);
    std::lock_guard<std::mutex> g(g_log_m);
    if (!g_log && !g_log_tried) {
        g_log_tried = true;
        mkdir(dir.c_str(), 0777);
        std::string r = world_rank_text();
        std::string path = dir + "/" + (r.empty() ? strprintf("pid%d", (int)getpid()) : "rank" + r) + ".log";
        g_log = fopen(path.c_str(), "a");
        if (!g_log) {
            fprintf(stderr, "[hcomm-kit emu WARN pid %d] HCOMM_KIT_LOG_DIR: cannot open %s: %s\n", (int)getpid(),
                    path.c_str(), strerror(errno));
            return;
        }
        setvbuf(g_log, nullptr, _IOLBF, 0);
    }
    if (!g_log) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tmv;
    localtime_r(&ts.tv_sec, &tmv);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
    fprintf(g_log, "%s.%06ld pid %d emu: %s\n", when, ts.tv_nsec / 1000, (int)getpid(), msg.c_str());
}

}  // namespace emu
