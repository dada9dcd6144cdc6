/* POSIX shared-memory segments with owner liveness.
 *
 * Every segment is created under a temporary name, locked by its creator (flock LOCK_EX on the
 * creator's descriptor, released by the kernel when the process dies, even by SIGKILL), and only
 * then linked under its final name. A segment whose lock can be taken therefore has no living
 * owner: peers use that to notice a dead rank, and shm_reclaim_stale() removes such leftovers.
 * Segments are unlinked as soon as every peer has mapped them (hccl/bootstrap.cc) or when closed. */
#include "base/common.h"
#include "base/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace emu {

std::string shm_prefix() { return strprintf("/hcomm_kit.%u.", (unsigned)getuid()); }

std::string random_hex(size_t nbytes) {
    std::string out;
    unsigned char buf[64];
    if (nbytes > sizeof buf) nbytes = sizeof buf;
    ssize_t got = getrandom(buf, nbytes, 0);
    if (got != (ssize_t)nbytes) {
        uint64_t x = now_ns() ^ ((uint64_t)getpid() << 32);
        for (size_t i = 0; i < nbytes; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (unsigned char)(x >> 56);
        }
    }
    static const char* hex = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out += hex[buf[i] >> 4];
        out += hex[buf[i] & 15];
    }
    return out;
}

static std::string dev_shm_path(const std::string& name) { return "/dev/shm" + name; }

bool shm_create(ShmSeg* seg, const std::string& prefix, size_t size, std::string* err, bool shared_lock,
                const std::string& exact_name) {
    std::string final_name = exact_name.empty() ? prefix + random_hex(8) : exact_name;
    std::string tmp_name = final_name + "." + random_hex(4) + ".tmp";
    int fd = shm_open(tmp_name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        *err = strprintf("shm_open(%s) failed: %s", tmp_name.c_str(), strerror(errno));
        return false;
    }
    if (flock(fd, (shared_lock ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 || ftruncate(fd, (off_t)size) != 0) {
        *err = strprintf("cannot size/lock shared memory %s (%zu bytes): %s", tmp_name.c_str(), size, strerror(errno));
        close(fd);
        shm_unlink(tmp_name.c_str());
        return false;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        *err = strprintf("mmap of %s (%zu bytes) failed: %s", tmp_name.c_str(), size, strerror(errno));
        close(fd);
        shm_unlink(tmp_name.c_str());
        return false;
    }
    /* Publish under the final name only once locked: a name without a lock is always stale. */
    if (link(dev_shm_path(tmp_name).c_str(), dev_shm_path(final_name).c_str()) != 0) {
        int e = errno;
        *err = strprintf("cannot publish %s: %s", final_name.c_str(), strerror(e));
        if (e == EEXIST) *err = "EEXIST";
        munmap(p, size);
        close(fd);
        shm_unlink(tmp_name.c_str());
        return false;
    }
    shm_unlink(tmp_name.c_str());
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    seg->name = final_name;
    seg->fd = fd;
    seg->addr = p;
    seg->size = size;
    seg->owner = true;
    seg->linked = true;
    return true;
}

bool shm_open_map(ShmSeg* seg, const std::string& name, size_t size, std::string* err) {
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
        *err = strprintf("cannot open shared memory %s of a peer: %s", name.c_str(), strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < size) {
        *err = strprintf("shared memory %s is smaller than expected (%lld < %zu bytes)", name.c_str(),
                         (long long)st.st_size, size);
        close(fd);
        return false;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        *err = strprintf("mmap of peer segment %s failed: %s", name.c_str(), strerror(errno));
        close(fd);
        return false;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    seg->name = name;
    seg->fd = fd;
    seg->addr = p;
    seg->size = size;
    seg->owner = false;
    seg->linked = true;
    return true;
}

void shm_unlink_seg(ShmSeg* seg) {
    if (seg->owner && seg->linked) {
        shm_unlink(seg->name.c_str());
        seg->linked = false;
    }
}

void shm_close(ShmSeg* seg) {
    shm_unlink_seg(seg);
    if (seg->addr) munmap(seg->addr, seg->size);
    if (seg->fd >= 0) close(seg->fd);
    seg->addr = nullptr;
    seg->fd = -1;
}

bool shm_owner_dead(const ShmSeg* seg) {
    if (seg->fd < 0) return false;
    /* Our descriptor is a separate open file description: it conflicts with the owner's lock
     * while the owner lives, even inside the same process. */
    int fd = open(("/proc/self/fd/" + std::to_string(seg->fd)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool dead = flock(fd, LOCK_SH | LOCK_NB) == 0;
    close(fd);
    return dead;
}

void shm_reclaim_stale() {
    static std::once_flag once;
    std::call_once(once, [] {
        std::string pfx = shm_prefix().substr(1);
        DIR* d = opendir("/dev/shm");
        if (!d) return;
        uint64_t reclaimed = 0;
        while (struct dirent* e = readdir(d)) {
            if (strncmp(e->d_name, pfx.c_str(), pfx.size()) != 0) continue;
            std::string path = std::string("/dev/shm/") + e->d_name;
            int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            struct stat st;
            bool tmp = strstr(e->d_name, ".tmp") != nullptr;
            /* A ".tmp" name is a creation in progress; only reclaim it when clearly abandoned. */
            bool old_enough = fstat(fd, &st) == 0 && (!tmp || time(nullptr) - st.st_mtime > 60);
            if (old_enough && flock(fd, LOCK_EX | LOCK_NB) == 0) {
                unlink(path.c_str());
                reclaimed++;
            }
            close(fd);
        }
        closedir(d);
        if (reclaimed) EMU_LOG(LOG_INFO, "reclaimed %llu stale shared-memory segment(s) of crashed runs",
                               (unsigned long long)reclaimed);
    });
}

}  // namespace emu
