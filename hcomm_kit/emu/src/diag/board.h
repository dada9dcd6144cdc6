/*
 * hcomm-kit CPU emulator, diagnosis: what its files share (internal to diag/).
 */
#ifndef HCOMM_KIT_EMU_DIAG_BOARD_H
#define HCOMM_KIT_EMU_DIAG_BOARD_H

#include "diag/diag.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

/* The board, the clock-vector outboxes and the access logs are seqlocks over shared memory: a
 * reader copies, then checks the sequence number and drops a torn copy. ThreadSanitizer does not
 * support the fences and cannot know that torn copies are dropped, so in TSan builds the copies
 * are also serialised by a process-local mutex (within a process that is the only concurrency it
 * sees). */
#if defined(__SANITIZE_THREAD__)
#define SEQ_FENCE(order) ((void)0)
#define SEQ_GUARD() std::lock_guard<std::mutex> seq_guard_(emu::seq_tsan_mutex())
#else
#define SEQ_FENCE(order) std::atomic_thread_fence(order)
#define SEQ_GUARD() ((void)0)
#endif

namespace emu {

#if defined(__SANITIZE_THREAD__)
inline std::mutex& seq_tsan_mutex() {
    static std::mutex& m = *new std::mutex();
    return m;
}
#endif

constexpr uint64_t kTickNs = 100000000ull;          /* monitor period */
constexpr uint64_t kAnalyseAfterNs = 250000000ull;  /* a wait this old makes the monitor analyse */
constexpr uint64_t kDeadGraceNs = 1000000000ull;    /* a dead rank's direct waiters fail it before this */
constexpr uint64_t kMismatchSettleNs = 1000000000ull; /* a mismatch waits this long for the ranks to reach it */
constexpr uint64_t kFreshNs = 600000000ull;         /* a live rank's snapshot older than this is unknown */
constexpr uint64_t kConnectFreshNs = 300000000ull;  /* ... and for its host's HcclChannelAcquire */
constexpr uint64_t kSpinNoteMaxNs = 1000000000ull;  /* a running kernel that issued no task for this long is named */
constexpr uint64_t kResampleNs = 2000000000ull;     /* ... and its position sampled again at most this often */
constexpr uint64_t kPendingAgeNs = 200000000ull;    /* a record still set after this long is reported as pending */

template <size_t N>
void copy_str(char (&dst)[N], const char* src) { /* truncating strcpy (on hot paths: no snprintf) */
    size_t n = src ? strnlen(src, N - 1) : 0;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
}
std::string json_esc(const std::string& s);
inline double secs(uint64_t ns) { return (double)ns / 1e9; }
/* A running kernel that issued no task for this long is named: 1 s, or half the progress interval
 * (so that the first progress line can name it). */
inline uint64_t spin_note_ns() {
    return std::min<uint64_t>(kSpinNoteMaxNs, (uint64_t)cfg().progress_s * 500000000ull);
}

/* ---------------------------------------------------------------- words (text.cc) */
std::string wait_text(const DiagWait& w);
/* "op 'tag' #3" / "op 'tag' #3, use #2 of the channel with rank 1" */
std::string op_text(const char* tag, uint32_t inst, uint32_t use, int peer);
std::string task_pos(uint32_t bidx, uint32_t bsize);
/* The description of the notify a record sets (Record, or Copy/Reduce with post record). */
std::string record_target_text(const SlotDesc& d, int slot_rank);
std::string record_target_text(const HTask& t, int slot_rank);
std::string prov_text(Comm* c, uint64_t p);

/* ---------------------------------------------------------------- race checker (race.cc) */
uint64_t vc_publish(HThread* self);
void vc_join(HThread* self, uint64_t vid);
void race_comm_added(Comm* c);
void race_comm_removed(Comm* c);

/* ---------------------------------------------------------------- per-rank log (log.cc) */
std::string world_rank_text();

/* ---------------------------------------------------------------- the board (snapshot.cc) */
void build_snap(Comm* c, DiagSnap* s, uint64_t pending_age_ns = kPendingAgeNs);
void publish_snap(Comm* c, const DiagSnap& s);
bool read_snap(Comm* c, uint32_t r, DiagSnap* out, uint64_t* heartbeat);

/* ---------------------------------------------------------------- analysis and reports (analysis.cc) */
struct RankView {
    bool have = false;  /* a fresh snapshot */
    bool dead = false;
    bool gone = false;
    uint64_t seen_ns = 0; /* when its content was last read from the rank's state (heartbeat) */
    std::unique_ptr<DiagSnap> s;
};

struct Node {
    /* Host: blocked in a synchronize call; Connect: blocked in HcclChannelAcquire for other ranks. */
    enum Type : uint8_t { ThreadWait, StreamWait, Barrier, Host, Connect } type;
    int rank;
    int idx;            /* thread / stream index in the snapshot (Host: -1) */
    bool stuck = true;
    std::string dead_end; /* nothing will ever record it: why */
    std::vector<int> deps;    /* the stuck waits of the tasks that would record its notify */
    std::vector<int> through; /* stuck hosts / barriers it depends on otherwise (dead ends) */
};

struct Analysis {
    std::vector<RankView> ranks;
    std::vector<Node> nodes;
    std::vector<int> host_node;   /* per rank, -1 */
    std::vector<int> connect_node; /* per rank, -1 */
    uint64_t now = 0;
    int self = -1;
};

const DiagWait* node_wait(const Analysis& A, const Node& n);
const DiagChan* find_chan(const DiagSnap& s, uint32_t peer);
const char* op_tag_of(const DiagSnap& s, uint32_t tag16);
void analyse(Comm* c, Analysis& A);
std::string node_who(const Analysis& A, const Node& nd);
std::string wait_detail(const Analysis& A, const Node& nd);
std::string recorder_text(const Analysis& A, const Node& nd);
std::string spin_text(const DiagKernel& k, uint64_t now);
std::string spinning_kernels(const Analysis& A, int skip_rank = -1);
std::string rank_summary(const Analysis& A, uint32_t r, const char* indent);
std::string report_json(const Analysis& A, Comm* c, const char* kind, const std::string& headline,
                        const std::vector<std::vector<int>>& cycles);
std::string report_text(const Analysis& A, Comm* c, const std::string& headline, bool deadlock,
                        std::vector<std::vector<int>>* cycles_out = nullptr);
void write_report_file(Comm* c, const char* kind, const std::string& json);
uint64_t stuck_signature(const Analysis& A);

}  // namespace emu

#endif
