/* hcomm-kit CPU emulator, base layer: POSIX shared-memory segments (shm.cc). */
#ifndef HCOMM_KIT_EMU_BASE_SHM_H
#define HCOMM_KIT_EMU_BASE_SHM_H

#include <cstddef>
#include <string>

namespace emu {

/* ------------------------------------------------------------------ shared memory */

struct ShmSeg {
    std::string name; /* "/hcomm_kit...." */
    int fd = -1;
    void* addr = nullptr;
    size_t size = 0;
    bool owner = false;  /* created by this process: unlinked on close */
    bool linked = false; /* still has a name in /dev/shm */
};
/* Creates a new named segment of size bytes (sparse, zero-filled), locked by this process
 * (flock LOCK_EX) so that peers can tell whether the owner is alive. */
bool shm_create(ShmSeg* seg, const std::string& prefix, size_t size, std::string* err, bool shared_lock = false,
                const std::string& exact_name = std::string());
/* The job (rendezvous) segment: created with a shared lock under an exact name; *err == "EEXIST"
 * when another rank published it first. */
/* Opens and maps a peer's segment by name (no lock taken). */
bool shm_open_map(ShmSeg* seg, const std::string& name, size_t size, std::string* err);
void shm_unlink_seg(ShmSeg* seg);
void shm_close(ShmSeg* seg); /* unmaps, closes, unlinks if owner and still linked */
/* True when nobody holds the owner lock on this (peer) segment any more: the owner died. */
bool shm_owner_dead(const ShmSeg* seg);
/* Removes /dev/shm/hcomm_kit.* segments whose owner died (crashed runs). Called once per process. */
void shm_reclaim_stale();
std::string shm_prefix();  /* "/hcomm_kit.<uid>." */
std::string random_hex(size_t nbytes);

}  // namespace emu

#endif
