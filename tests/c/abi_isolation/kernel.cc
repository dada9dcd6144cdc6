/* AICPU kernel (default C++ ABI) using the class of abi_blob.h; loaded from abi_kernel.json. */
#include <cstdio>

#include "abi_blob.h"

extern "C" uint32_t HkAbiKernel(void* args)
{
    const AbiArgs* a = static_cast<const AbiArgs*>(args);
    AbiBlob blob;
    char w[48];
    for (uint32_t i = 0; i < a->words; ++i) {
        snprintf(w, sizeof w, "word-number-%u-long-enough-to-allocate", i);
        blob.Add(w);
    }
    a->out[0] = blob.Size();
    a->out[1] = blob.Checksum();
    return 0;
}
