/*
 * abi_blob.h -- a class shared by a host library and an AICPU kernel through a header, as CANN's
 * 05_custom_ops_allgather example shares its serialisation class. The host library is compiled
 * with -D_GLIBCXX_USE_CXX11_ABI=0 (copy-on-write std::string, 8 bytes) and the kernel with the
 * default ABI (small-string std::string, 32 bytes). The member functions are defined in the
 * class, so both objects carry a weak copy under the same mangled name (nothing in their
 * signatures names std::string); if the kernel's calls bound to the host library's copy, they
 * would run old-ABI code on a new-ABI object and corrupt the heap.
 */
#ifndef HK_TEST_ABI_BLOB_H
#define HK_TEST_ABI_BLOB_H

#include <cstddef>
#include <cstdint>
#include <string>

class AbiBlob {
public:
    __attribute__((noinline)) void Add(const char* word)
    {
        text_ += word;
        text_ += ',';
    }
    __attribute__((noinline)) uint64_t Size() const { return text_.size(); }
    __attribute__((noinline)) uint64_t Checksum() const
    {
        uint64_t h = 1469598103934665603ull;
        for (char c : text_) {
            h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
        }
        return h;
    }

private:
    std::string text_;
};

/* What the kernel computes (and the host checks): the blob of n words "w0", "w1", ... */
struct AbiArgs {
    uint64_t* out; /* device memory: [0] size, [1] checksum */
    uint32_t words;
};

#endif
