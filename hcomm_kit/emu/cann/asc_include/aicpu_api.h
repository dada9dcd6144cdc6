/*
 * aicpu_api.h -- the AICPU kernel API of Ascend C, as far as the hcomm-kit emulator provides it.
 * On the emulator an AICPU kernel (`extern "C" __global__ __aicpu__ uint32_t K(void *args)` in an
 * .aicpu file) is host code: the execution-space keywords expand to nothing, and
 * AscendC::printf prints to stdout.
 */
#ifndef HCOMM_KIT_AICPU_API_H
#define HCOMM_KIT_AICPU_API_H

#include <stdint.h>
#include <stdio.h>

#ifndef __global__
#define __global__
#endif
#ifndef __aicpu__
#define __aicpu__
#endif

#ifdef __cplusplus
namespace AscendC {
template <typename... Args>
inline void printf(const char *fmt, Args... args)
{
    ::printf(fmt, args...);
}
}  // namespace AscendC
#endif

#endif /* HCOMM_KIT_AICPU_API_H */
