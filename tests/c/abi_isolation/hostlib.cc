/* A host library compiled with -D_GLIBCXX_USE_CXX11_ABI=0, like CANN example 05's host library. */
#include <cstdio>

#include "abi_blob.h"

extern "C" uint64_t AbiHostChecksum(uint32_t words)
{
    AbiBlob blob;
    char w[48];
    for (uint32_t i = 0; i < words; ++i) {
        snprintf(w, sizeof w, "word-number-%u-long-enough-to-allocate", i);
        blob.Add(w);
    }
    return blob.Checksum() ^ blob.Size();
}
