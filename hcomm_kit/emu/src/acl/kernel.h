/* hcomm-kit CPU emulator, ACL runtime layer: AICPU kernel binaries, functions, argument lists and
 * the crash guard, shared by binary.cc, kernel_args.cc, kernel_guard.cc and launch.cc. */
#ifndef HCOMM_KIT_EMU_ACL_KERNEL_H
#define HCOMM_KIT_EMU_ACL_KERNEL_H

#include "acl/runtime.h"

#include <map>

namespace emu {

struct Binary;
struct Func {
    uint32_t magic = kFuncMagic;
    Binary* bin = nullptr;
    std::string op_type, func_name, so_name;
    void* fn = nullptr;
    std::vector<std::pair<uintptr_t, uintptr_t>> code; /* executable ranges of its library */
};
struct Binary {
    uint32_t magic = kBinMagic;
    int mode = -1;       /* cpuKernelMode; -1 = not an AICPU binary */
    std::string json_path, so_path;
    void* dl = nullptr;
    int memfd = -1;
    std::map<std::string, Func*> funcs; /* op type -> function */
    std::map<std::string, std::pair<std::string, std::string>> entries; /* op type -> (functionName, kernelSo) */
    std::vector<std::pair<uintptr_t, uintptr_t>> code; /* executable segments of the loaded library */
    bool by_symbol = false; /* aclrtBinaryLoad image: aclrtBinaryGetFunction looks the name up as a symbol */
};
/* aclrtCreateBinary: a private copy of the caller's image. */
constexpr uint32_t kImageMagic = 0x494d4731; /* "IMG1" */
struct Image {
    uint32_t magic = kImageMagic;
    std::vector<uint8_t> data;
};

/* binary.cc: a live function handle; the same with an error set (api) when it is not. */
bool func_valid(Func* f);
Func* func_check(aclrtFuncHandle h, const char* api, int* code);
/* binary.cc: the function named `kernel` for an Ascend C launch: a loaded binary exporting it, else
 * a kernel library of the kernel directories (loaded and kept), else a symbol of the program
 * itself; nullptr when none (*looked gets the directories searched). */
Func* asc_function(const std::string& kernel, std::string* looked);

/* kernel_args.cc: argument lists (aclrtArgsHandle). */
struct ParaDetail {
    uint32_t offset = 0;
    uint32_t size = 0;
    uint8_t type = 0; /* 0 value, 1 placeholder */
    bool ph_taken = false;
    uint32_t ph_data = 0; /* offset of placeholder data from the end of the buffer */
    uint32_t ph_size = 0;
};
enum : uint8_t { ARGS_BUILDING = 0, ARGS_PH_TAKEN = 1, ARGS_FINAL = 2, ARGS_UPDATED = 3 };
constexpr size_t kMaxArgs = 128, kArgsBuf = 64 * 1024;
/* Largest argument blob: offsets into it are 32-bit (ParaDetail here, aclrtPlaceHolderInfo in the
 * API), so no valid blob reaches 4 GiB. Applies to InitByUserMem and every launch's argsSize. */
constexpr size_t kMaxArgsBlob = UINT32_MAX;
struct ArgsHandle {
    uint32_t magic = kArgsMagic;
    Func* f = nullptr;
    uint8_t* buf = nullptr;
    size_t cap = 0;
    size_t used = 0;    /* argument bytes from the front */
    size_t ph_used = 0; /* placeholder data bytes taken from the back */
    uint32_t nparams = 0;
    uint8_t state = ARGS_BUILDING;
    bool user_mem = false;
    ParaDetail params[kMaxArgs];
};
/* The args handle h, or nullptr with the error set (api). */
ArgsHandle* args_check(aclrtArgsHandle h, const char* api, int* code);

/* kernel_guard.cc: the crash guard of kernel entries on AICPU workers. */
typedef uint32_t (*entry_t)(void*);
/* Installs the fault and cancellation handlers (once per process). */
void install_handlers();
/* Calls the kernel entry under the crash guard. Kept free of C++ objects so that nothing in
 * this frame can be clobbered by siglongjmp. Returns the signal number, or 0 (*ret: the entry's
 * return value; *fault, *pc: the faulting address and instruction). */
int guarded_call(entry_t entry, void* args, uint32_t* ret, void** fault, void** pc, KernelRun* run);
/* The launch is over: the cancellation handler of this worker no longer finds it. */
void guard_leave();
/* After a crash of this worker's kernel at `pc` outside the kernel's code (abort() in libc): the
 * return address in the kernel's code of the call that led there (the deepest such frame), or
 * nullptr (the crash was in the kernel's own code, or no frame of it was found). */
constexpr int kCrashFrames = 48;
void* crash_site(const KernelRun* run, void* pc);

}  // namespace emu

#endif
