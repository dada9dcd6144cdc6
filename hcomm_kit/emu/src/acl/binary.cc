/* AICPU kernel binaries and their functions (acl_runtime.md §3.5): loading from an op-info JSON and
 * its kernel library, or from memory; function handles; the kernel lookup of Ascend C launches. */
#include "acl/kernel.h"
#include "base/json.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/syscall.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace emu {

/* dlopen of kernel libraries and reads of their link maps, under one lock: two threads
 * loading the same library share its link map, which the loader writes under its own lock (one
 * the race checker cannot see). */
static std::mutex g_dl_m;

static void* kernel_dlopen(const char* path, int flags) {
    std::lock_guard<std::mutex> g(g_dl_m);
    return dlopen(path, flags);
}

/* The executable segments of a library opened with dlopen (runaway-kernel cancellation). */
static void code_ranges(void* dl, std::vector<std::pair<uintptr_t, uintptr_t>>* out) {
    std::lock_guard<std::mutex> g(g_dl_m);
    struct link_map* lm = nullptr;
    if (!dl || dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
    struct Ctx {
        uintptr_t base;
        std::vector<std::pair<uintptr_t, uintptr_t>>* out;
    } ctx{(uintptr_t)lm->l_addr, out};
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* p) -> int {
            Ctx* c = static_cast<Ctx*>(p);
            if ((uintptr_t)info->dlpi_addr != c->base) return 0;
            for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
                    c->out->emplace_back(c->base + ph.p_vaddr, c->base + ph.p_vaddr + ph.p_memsz);
            }
            return 1;
        },
        &ctx);
}

namespace {
std::mutex g_bin_m;
std::unordered_set<Binary*> g_bins;
std::unordered_set<Func*> g_funcs;
std::unordered_set<Image*> g_images;
}  // namespace

/* The directories of HCOMM_KIT_KERNEL_PATH (colon-separated, empty entries skipped), in order. */
static std::vector<std::string> kernel_path_dirs() {
    std::vector<std::string> dirs;
    if (const char* kp = getenv("HCOMM_KIT_KERNEL_PATH")) {
        std::string s = kp;
        size_t a = 0;
        while (a <= s.size()) {
            size_t e = s.find(':', a);
            if (e == std::string::npos) e = s.size();
            if (e > a) dirs.push_back(s.substr(a, e - a));
            a = e + 1;
        }
    }
    return dirs;
}

/* Handle h as a T* when registry (under g_bin_m) holds it; else nullptr with the error set (api):
 * "<name> is NULL", or "<h> <not_live>". */
template <class T>
T* registered(void* h, const std::unordered_set<T*>& registry, const char* api, int* code, const char* name,
              const char* not_live) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "%s is NULL", name);
        return nullptr;
    }
    T* p = static_cast<T*>(h);
    std::lock_guard<std::mutex> g(g_bin_m);
    if (!registry.count(p)) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p %s", h, not_live);
        return nullptr;
    }
    return p;
}

bool func_valid(Func* f) {
    std::lock_guard<std::mutex> g(g_bin_m);
    return g_funcs.count(f) != 0;
}

}  // namespace emu

using namespace emu;

/* ================================================================ binaries */

static int parse_options(const aclrtBinaryLoadOptions* options, int* mode, bool from_file, const char* api) {
    *mode = -1;
    if (!options) return ACL_SUCCESS;
    if (!options->options && options->numOpt)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "options->options is NULL with numOpt %zu", options->numOpt);
    if (!options->options)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "options->options is NULL");
    for (size_t i = 0; i < options->numOpt; i++) {
        const aclrtBinaryLoadOption& o = options->options[i];
        int32_t type; /* read as an int: callers may pass values outside the enum */
        memcpy(&type, &o.type, sizeof type);
        switch (type) {
            case ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD:
                if (o.value.isLazyLoad > 1)
                    return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "option %zu: isLazyLoad %u is not 0 or 1", i,
                                  o.value.isLazyLoad);
                break;
            case ACL_RT_BINARY_LOAD_OPT_MAGIC:
                if (from_file)
                    return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                                  "option %zu: ACL_RT_BINARY_LOAD_OPT_MAGIC is valid only with aclrtBinaryLoadFromData", i);
                break;
            case ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE: *mode = o.value.cpuKernelMode; break;
            default:
                return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "option %zu: type %d is not a load option type (1..3)", i,
                              type);
        }
    }
    return ACL_SUCCESS;
}

static std::string dirname_of(const std::string& p) {
    size_t k = p.rfind('/');
    return k == std::string::npos ? "." : p.substr(0, k);
}

static bool file_exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/* Kernel isolation. On Ascend an AICPU kernel runs in the device's address space, so it never
 * sees the host program's libraries. Here it shares the host process: with default symbol
 * binding, an inline (vague-linkage) function that both the host program and the kernel define
 * (e.g. a class shared through a header, compiled with different _GLIBCXX_USE_CXX11_ABI values)
 * would bind the kernel's calls to the host's copy. RTLD_DEEPBIND makes the kernel look in its own
 * symbols and its own dependencies (the emulator's device API, libstdc++, libc) before the global
 * scope. The sanitizer runtimes refuse RTLD_DEEPBIND (their interceptors must come first), so
 * sanitizer builds of the emulator load kernels with default binding: link kernels with
 * -Wl,-Bsymbolic there if host and kernel share inline code. */
static int kernel_dlopen_flags() {
    /* Decided at run time: a sanitizer runtime may be in the process even when this library was
     * built without one (a sanitized host program, the fuzzers' replay builds). */
    static const int flags = [] {
        bool san = dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init") ||
                   dlsym(RTLD_DEFAULT, "__msan_init") || dlsym(RTLD_DEFAULT, "__hwasan_init");
        return RTLD_NOW | RTLD_LOCAL | (san ? 0 : RTLD_DEEPBIND);
    }();
    return flags;
}

/* AICPU packages (aicpu_*.tar.gz, CMS-signed by CANN's build) in the directories searched. */
static std::vector<std::string> find_packages(const std::vector<std::string>& tried, const std::string& json_dir) {
    std::vector<std::string> found;
    std::unordered_set<std::string> dirs = {json_dir, json_dir + "/../kernel"}; /* CANN's opp layout */
    for (const std::string& t : tried) dirs.insert(dirname_of(t));
    for (const std::string& d : dirs) {
        DIR* dp = opendir(d.c_str());
        if (!dp) continue;
        while (struct dirent* e = readdir(dp)) {
            std::string n = e->d_name;
            if (n.size() > 7 && n.compare(n.size() - 7, 7, ".tar.gz") == 0) found.push_back(d + "/" + n);
        }
        closedir(dp);
    }
    std::sort(found.begin(), found.end());
    return found;
}

/* Why a kernel library could not be found: the op-info JSON, the paths looked at, and what to do,
 * including the common CANN layout where only the signed device package was installed. */
static std::string missing_kernel_message(const std::string& json_path, const std::string& so_name, int mode,
                                          const std::vector<std::string>& tried) {
    std::string list;
    for (auto& t : tried) list += (list.empty() ? "" : ", ") + t;
    std::string msg = strprintf("kernel library %s named by the op-info JSON %s was not found (cpuKernelMode %d); "
                                "looked for: %s",
                                so_name.c_str(), json_path.c_str(), mode, list.c_str());
    std::vector<std::string> pkgs = find_packages(tried, dirname_of(json_path));
    if (!pkgs.empty()) {
        std::string p;
        for (auto& f : pkgs) p += (p.empty() ? "" : ", ") + f;
        msg += strprintf(". Found the AICPU package(s) %s instead: CANN installs custom kernels only as signed device "
                         "packages (aarch64 code inside a CMS-signed tar.gz), which the emulator cannot load. Put the "
                         "host-built %s beside the JSON or in %s/../kernel",
                         p.c_str(), so_name.c_str(), dirname_of(json_path).c_str());
        if (mode == 0) msg += ", or add its directory to HCOMM_KIT_KERNEL_PATH";
    } else if (mode == 0) {
        msg += " (add the directory of the host-built kernel library to HCOMM_KIT_KERNEL_PATH)";
    } else {
        msg += " (cpuKernelMode 1 loads the .so with the JSON's file name beside it)";
    }
    return msg;
}

/* opInfo.<key> must be a non-empty string: missing -> 100007, another type or empty -> 100008. */
static int opinfo_string(const std::string& json_path, const std::string& op, const char* key, const json::Value* v,
                         const char* api) {
    if (!v)
        return seterr(ACL_ERROR_FILE_MISSING_ATTR, api, "op-info JSON %s: key \"%s.opInfo.%s\" is missing",
                      json_path.c_str(), op.c_str(), key);
    if (!v->is_string())
        return seterr(ACL_ERROR_FILE_ATTR_INVALID, api, "op-info JSON %s: \"%s.opInfo.%s\" must be a string, not a %s",
                      json_path.c_str(), op.c_str(), key, v->type_name());
    if (v->str.empty() || v->str.find('\0') != std::string::npos)
        return seterr(ACL_ERROR_FILE_ATTR_INVALID, api, "op-info JSON %s: \"%s.opInfo.%s\" must be a non-empty string%s",
                      json_path.c_str(), op.c_str(), key, v->str.empty() ? "" : " without NUL characters");
    return ACL_SUCCESS;
}

static void register_binary(Binary* b) {
    std::lock_guard<std::mutex> g(g_bin_m);
    g_bins.insert(b);
}

EMU_API aclError aclrtBinaryLoadFromFile(const char* binPath, aclrtBinaryLoadOptions* options, aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!binPath) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binPath is NULL");
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int mode;
    if (int r = parse_options(options, &mode, true, __func__)) return r;
    std::string path = binPath;
    if (mode == -1)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "%s: only AICPU kernels can run on the emulator; pass ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE "
                      "(0 or 1) with an op-info JSON",
                      binPath);
    if (mode != 0 && mode != 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "cpuKernelMode %d is not valid with aclrtBinaryLoadFromFile (0 or 1; 2 needs LoadFromData)", mode);
    /* The runtime swaps the extension to find both <stem>.json and <stem>.so. */
    std::string stem = path;
    size_t dot = stem.rfind('.'), slash = stem.rfind('/');
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) stem = stem.substr(0, dot);
    std::string json_path = stem + ".json";
    std::string text, err;
    json::ReadStatus rs = json::ReadStatus::Ok;
    if (!json::read_file(json_path, text, err, &rs))
        return seterr(rs == json::ReadStatus::TooLarge ? ACL_ERROR_INVALID_FILE_SIZE : ACL_ERROR_INVALID_FILE, __func__,
                      "cannot read the op-info JSON %s: %s", json_path.c_str(), err.c_str());
    json::Value root;
    if (!json::parse(text, root, err))
        return seterr(ACL_ERROR_PARSE_FILE, __func__, "op-info JSON %s is malformed: %s", json_path.c_str(), err.c_str());
    if (!root.is_object())
        return seterr(ACL_ERROR_PARSE_FILE, __func__, "op-info JSON %s: the top level must be an object keyed by op type",
                      json_path.c_str());
    auto b = std::make_unique<Binary>();
    b->mode = mode;
    b->json_path = json_path;
    for (auto& kv : root.obj) {
        const json::Value* info = kv.second.get("opInfo");
        if (!info) continue; /* entries without opInfo are skipped */
        if (!info->is_object())
            return seterr(ACL_ERROR_FILE_ATTR_INVALID, __func__, "op-info JSON %s: \"%s.opInfo\" must be an object, not a %s",
                          json_path.c_str(), kv.first.c_str(), info->type_name());
        const json::Value* fn = info->get("functionName");
        const json::Value* so = info->get("kernelSo");
        if (int r = opinfo_string(json_path, kv.first, "functionName", fn, __func__)) return r;
        if (int r = opinfo_string(json_path, kv.first, "kernelSo", so, __func__)) return r;
        const json::Value* lib = info->get("opKernelLib");
        if (lib && (!lib->is_string() || (lib->str != "AICPUKernel" && lib->str != "CUSTAICPUKernel")))
            return seterr(ACL_ERROR_FILE_ATTR_INVALID, __func__,
                          "op-info JSON %s: \"%s.opInfo.opKernelLib\" must be \"AICPUKernel\"", json_path.c_str(),
                          kv.first.c_str());
        b->entries[kv.first] = {fn->str, so->str};
    }
    if (b->entries.empty())
        return seterr(ACL_ERROR_FILE_MISSING_ATTR, __func__, "op-info JSON %s has no entry with an \"opInfo\" object",
                      json_path.c_str());
    /* Which .so: mode 1 = the file beside the JSON; mode 0 = the package "on the device". */
    std::string so_name = b->entries.begin()->second.second;
    std::vector<std::string> tried;
    if (mode == 1) {
        b->so_path = stem + ".so";
        tried.push_back(b->so_path);
    } else {
        std::vector<std::string> dirs = kernel_path_dirs();
        std::string jd = dirname_of(json_path);
        dirs.push_back(jd);
        dirs.push_back(jd + "/../kernel");
        for (auto& dd : dirs) {
            std::string c = dd + "/" + so_name;
            tried.push_back(c);
            if (file_exists(c)) {
                b->so_path = c;
                break;
            }
        }
    }
    if (b->so_path.empty() || !file_exists(b->so_path)) {
        std::string msg = missing_kernel_message(json_path, mode == 1 ? stem + ".so" : so_name, mode, tried);
        EMU_LOG(LOG_ERROR, "aclrtBinaryLoadFromFile: %s", msg.c_str());
        return seterr_str(ACL_ERROR_RT_FILE_OPEN, __func__, msg);
    }
    b->dl = kernel_dlopen(b->so_path.c_str(), kernel_dlopen_flags());
    if (!b->dl)
        return seterr(ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR, __func__, "cannot load kernel library %s: %s",
                      b->so_path.c_str(), dlerror());
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* Loads a kernel image (an ELF shared object for this host) from memory: it is written to a
 * memfd and dlopen'ed from there. The runtime names the .so after a hash of its contents. */
static int stage_image(const void* data, size_t length, Binary* b, const char* api) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < length; i++) h = (h ^ ((const uint8_t*)data)[i]) * 1099511628211ull;
    std::string name = strprintf("aicpu_kernel_%016llx.so", (unsigned long long)h);
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return seterr(ACL_ERROR_RT_FILE_OPEN, api, "memfd_create failed: %s", strerror(errno));
    size_t off = 0;
    while (off < length) {
        ssize_t w = write(fd, (const char*)data + off, length - off);
        if (w <= 0) {
            close(fd);
            return seterr(ACL_ERROR_RT_FILE_WRITE, api, "cannot stage the kernel image: %s", strerror(errno));
        }
        off += (size_t)w;
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    b->dl = kernel_dlopen(path.c_str(), kernel_dlopen_flags());
    if (!b->dl) {
        std::string e = dlerror();
        close(fd);
        return seterr(ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR, api, "cannot load the kernel image (%zu bytes): %s", length,
                      e.c_str());
    }
    b->memfd = fd;
    b->so_path = name;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtBinaryLoadFromData(const void* data, size_t length, const aclrtBinaryLoadOptions* options,
                                         aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!data) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "data is NULL");
    if (length == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "length is 0");
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int mode;
    if (int r = parse_options(options, &mode, false, __func__)) return r;
    auto b = std::make_unique<Binary>();
    if (mode != -1 && mode != 2)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "cpuKernelMode %d is not valid with aclrtBinaryLoadFromData (only 2)", mode);
    b->mode = mode;
    if (mode == 2) {
        if (int r = stage_image(data, length, b.get(), __func__)) return r;
    }
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- binaries from memory (aclrtBinary) */

EMU_API aclrtBinary aclrtCreateBinary(const void* data, size_t dataLen) {
    if (!data) {
        seterr(ACL_ERROR_INVALID_PARAM, __func__, "data is NULL");
        return nullptr;
    }
    if (dataLen == 0) {
        seterr(ACL_ERROR_INVALID_PARAM, __func__, "dataLen is 0");
        return nullptr;
    }
    Image* img = new (std::nothrow) Image();
    if (!img) {
        seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory for a %zu-byte binary", dataLen);
        return nullptr;
    }
    try {
        img->data.assign((const uint8_t*)data, (const uint8_t*)data + dataLen);
    } catch (const std::bad_alloc&) {
        delete img;
        seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory for a %zu-byte binary", dataLen);
        return nullptr;
    }
    std::lock_guard<std::mutex> g(g_bin_m);
    g_images.insert(img);
    return img;
}

static Image* image_check(aclrtBinary binary, const char* api, int* code) {
    return registered(binary, g_images, api, code, "binary", "is not a binary made by aclrtCreateBinary (or it was destroyed)");
}

EMU_API aclError aclrtDestroyBinary(aclrtBinary binary) {
    int code = 0;
    Image* img = image_check(binary, __func__, &code);
    if (!img) return code;
    {
        std::lock_guard<std::mutex> g(g_bin_m);
        g_images.erase(img);
    }
    img->magic = 0;
    delete img;
    return ACL_SUCCESS;
}

/* ELF header fields of an image, or false if it is not a 64-bit ELF file. */
static bool elf_kind(const std::vector<uint8_t>& d, uint16_t* type, uint16_t* machine) {
    if (d.size() < 64 || memcmp(d.data(), "\x7f" "ELF", 4) != 0 || d[4] != 2 /* ELFCLASS64 */) return false;
    memcpy(type, d.data() + 16, 2);
    memcpy(machine, d.data() + 18, 2);
    return true;
}

#if defined(__x86_64__)
static constexpr uint16_t kHostMachine = 62; /* EM_X86_64 */
#elif defined(__aarch64__)
static constexpr uint16_t kHostMachine = 183; /* EM_AARCH64 */
#else
static constexpr uint16_t kHostMachine = 0;
#endif

EMU_API aclError aclrtBinaryLoad(const aclrtBinary binary, aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int code = 0;
    Image* img = image_check(binary, __func__, &code);
    if (!img) return code;
    uint16_t type = 0, machine = 0;
    if (!elf_kind(img->data, &type, &machine))
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "binary %p (%zu bytes) is not an ELF file; the emulator loads only AICPU kernels built for this "
                      "host as shared objects",
                      binary, img->data.size());
    if (machine != kHostMachine || type != 3 /* ET_DYN */)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "binary %p (%zu bytes, ELF type %u, machine %u) is not a shared object for this host (machine %u): "
                      "AI Core / AIV (Ascend C) kernel images are not emulated; only AICPU kernels run on the emulator",
                      binary, img->data.size(), type, machine, kHostMachine);
    auto b = std::make_unique<Binary>();
    b->mode = 2;
    b->by_symbol = true;
    if (int r = stage_image(img->data.data(), img->data.size(), b.get(), __func__)) return r;
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* Shortest launch-timeout step in microseconds; a timeout takes effect as interval * N, N in
 * [1, 254]. The value mirrors the A2/A3 hardware, whose longest operator timeout is 254 steps
 * (about 1091 s); the emulator itself enforces launch timeouts exactly as given. */
static constexpr uint64_t kOpTimeoutIntervalUs = 4294967;

EMU_API aclError aclrtGetOpTimeOutInterval(uint64_t* interval) {
    if (!interval) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "interval is NULL");
    *interval = kOpTimeoutIntervalUs;
    return ACL_SUCCESS;
}

static Binary* bin_check(aclrtBinHandle h, const char* api, int* code) {
    return registered(h, g_bins, api, code, "binHandle", "is not a loaded binary");
}

static Func* make_func(Binary* b, const std::string& op, const std::string& fname, int* code, const char* api) {
    auto it = b->funcs.find(op);
    if (it != b->funcs.end()) return it->second;
    dlerror();
    void* sym = dlsym(b->dl, fname.c_str());
    if (!sym) {
        *code = seterr(ACL_ERROR_RT_SYMBOL_NOT_FOUND, api,
                       "kernel library %s does not export \"%s\" (op type \"%s\"); declare it extern \"C\"",
                       b->so_path.c_str(), fname.c_str(), op.c_str());
        return nullptr;
    }
    Func* f = new Func();
    f->bin = b;
    f->op_type = op;
    f->func_name = fname;
    f->so_name = b->so_path;
    f->fn = sym;
    if (b->code.empty()) code_ranges(b->dl, &b->code);
    f->code = b->code;
    b->funcs[op] = f;
    g_funcs.insert(f);
    return f;
}

EMU_API aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName,
                                        aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    if (!kernelName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "kernelName is NULL");
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcHandle is NULL");
    int code = 0;
    Binary* b = bin_check(binHandle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    if (b->mode == -1)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "binary is not an AICPU kernel; the emulator runs AICPU only");
    auto it = b->funcs.find(kernelName);
    if (it != b->funcs.end()) {
        *funcHandle = it->second;
        return ACL_SUCCESS;
    }
    if (b->by_symbol) {
        Func* f = make_func(b, kernelName, kernelName, &code, __func__);
        if (!f) return code;
        *funcHandle = f;
        return ACL_SUCCESS;
    }
    auto e = b->entries.find(kernelName);
    if (e == b->entries.end()) {
        std::string keys;
        for (auto& kv : b->entries) keys += (keys.empty() ? "" : ", ") + kv.first;
        return seterr(ACL_ERROR_KERNEL_NOT_FOUND, __func__, "op type \"%s\" is not a key of %s (keys: %s)", kernelName,
                      b->json_path.empty() ? "this binary" : b->json_path.c_str(), keys.c_str());
    }
    Func* f = make_func(b, kernelName, e->second.first, &code, __func__);
    if (!f) return code;
    *funcHandle = f;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtRegisterCpuFunc(const aclrtBinHandle handle, const char* funcName, const char* kernelName,
                                      aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    if (!funcName || !*funcName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcName is NULL or empty");
    if (!kernelName || !*kernelName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "kernelName is NULL or empty");
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcHandle is NULL");
    int code = 0;
    Binary* b = bin_check(handle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    if (b->mode != 2 || !b->dl)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "binary is not an AICPU image loaded with cpuKernelMode 2 (aclrtBinaryLoadFromData)");
    Func* f = make_func(b, kernelName, funcName, &code, __func__);
    if (!f) return code;
    *funcHandle = f;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtBinaryGetFunctionByEntry(aclrtBinHandle binHandle, uint64_t funcEntry, aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    (void)binHandle;
    (void)funcHandle;
    return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                  "lookup by entry %llu is reserved for AI Core kernels and not supported (use aclrtBinaryGetFunction)",
                  (unsigned long long)funcEntry);
}

EMU_API aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    Binary* b = bin_check(binHandle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    g_bins.erase(b);
    /* Launches still queued keep using their entries: the library stays mapped and the Func
     * objects are retired (kept reachable until exit) rather than freed under a running kernel. */
    static std::vector<Func*>& retired = *new std::vector<Func*>();
    for (auto& kv : b->funcs) {
        g_funcs.erase(kv.second);
        kv.second->magic = 0;
        kv.second->bin = nullptr;
        retired.push_back(kv.second);
    }
    if (b->memfd >= 0) close(b->memfd);
    delete b;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtGetFunctionAttribute(aclrtFuncHandle funcHandle, aclrtFuncAttribute attrType, int64_t* attrValue) {
    if (int r = check_init(__func__)) return r;
    if (!funcHandle || !attrValue) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "NULL argument");
    if (!func_valid(static_cast<Func*>(funcHandle)))
        return seterr(ACL_ERROR_RT_INVALID_HANDLE, __func__, "%p is not a live function handle", funcHandle);
    if ((int)attrType != ACL_FUNC_ATTR_KERNEL_TYPE)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "attribute %d is not supported", (int)attrType);
    *attrValue = ACL_KERNEL_TYPE_AICPU;
    return ACL_SUCCESS;
}

namespace emu {
Func* func_check(aclrtFuncHandle h, const char* api, int* code) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "funcHandle is NULL");
        return nullptr;
    }
    Func* f = static_cast<Func*>(h);
    if (!func_valid(f)) {
        *code = seterr(ACL_ERROR_RT_INVALID_HANDLE, api, "%p is not a live function handle", h);
        return nullptr;
    }
    return f;
}
}  // namespace emu

/* ================================================================ kernels of Ascend C <<<>>> launches */

namespace {
std::map<std::string, Func*> g_asc_funcs; /* kernel name -> function (under g_bin_m) */

/* Directories holding installed kernel libraries: HCOMM_KIT_KERNEL_PATH, then
 * <opp>/vendors/<vendor>/aicpu/kernel for $ASCEND_OPP_PATH and $ASCEND_HOME_PATH/opp. */
std::vector<std::string> asc_kernel_dirs() {
    std::vector<std::string> dirs = kernel_path_dirs();
    std::vector<std::string> opps;
    if (const char* o = getenv("ASCEND_OPP_PATH")) opps.push_back(o);
    if (const char* h = getenv("ASCEND_HOME_PATH")) opps.push_back(std::string(h) + "/opp");
    for (const std::string& opp : opps) {
        std::string vd = opp + "/vendors";
        DIR* dp = opendir(vd.c_str());
        if (!dp) continue;
        std::vector<std::string> vendors;
        while (struct dirent* e = readdir(dp))
            if (e->d_name[0] != '.') vendors.push_back(e->d_name);
        closedir(dp);
        std::sort(vendors.begin(), vendors.end());
        for (auto& v : vendors) dirs.push_back(vd + "/" + v + "/aicpu/kernel");
    }
    return dirs;
}

/* The function named `kernel` for an Ascend C launch (caller holds g_bin_m): a loaded binary
 * exporting it, else a kernel library of asc_kernel_dirs() (loaded and kept), else a symbol of
 * the program itself (an .aicpu file compiled into the host library). *looked gets the search. */
Func* asc_find(const std::string& kernel, std::string* looked) {
    auto it = g_asc_funcs.find(kernel);
    if (it != g_asc_funcs.end()) return it->second;
    int code = 0;
    for (Binary* b : g_bins) {
        if (!b->dl || !dlsym(b->dl, kernel.c_str())) continue;
        Func* f = make_func(b, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
        if (f) return g_asc_funcs[kernel] = f;
    }
    for (const std::string& d : asc_kernel_dirs()) {
        *looked += (looked->empty() ? "" : ", ") + d;
        DIR* dp = opendir(d.c_str());
        if (!dp) continue;
        std::vector<std::string> sos;
        while (struct dirent* e = readdir(dp)) {
            std::string n = e->d_name;
            if (n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0) sos.push_back(d + "/" + n);
        }
        closedir(dp);
        std::sort(sos.begin(), sos.end());
        for (const std::string& so : sos) {
            void* dl = kernel_dlopen(so.c_str(), kernel_dlopen_flags());
            if (!dl) continue;
            if (!dlsym(dl, kernel.c_str())) {
                dlclose(dl);
                continue;
            }
            auto b = std::make_unique<Binary>();
            b->mode = 2;
            b->by_symbol = true;
            b->dl = dl;
            b->so_path = so;
            Binary* raw = b.release();
            g_bins.insert(raw);
            Func* f = make_func(raw, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
            if (f) return g_asc_funcs[kernel] = f;
        }
    }
    if (dlsym(RTLD_DEFAULT, kernel.c_str())) {
        auto b = std::make_unique<Binary>();
        b->mode = 2;
        b->by_symbol = true;
        b->dl = RTLD_DEFAULT;
        b->so_path = "(the program)";
        Binary* raw = b.release();
        g_bins.insert(raw);
        Func* f = make_func(raw, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
        if (f) return g_asc_funcs[kernel] = f;
    }
    return nullptr;
}
}  // namespace

namespace emu {
Func* asc_function(const std::string& kernel, std::string* looked) {
    std::lock_guard<std::mutex> g(g_bin_m);
    return asc_find(kernel, looked);
}
}  // namespace emu
