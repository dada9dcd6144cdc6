/*
 * A class both the host library (old C++ ABI) and the kernel (new ABI) compile from this header,
 * like the serialisation class of CANN's example 05: each must run its own copy.
 */
#ifndef HK_SHIFT_TAG_TEXT_H
#define HK_SHIFT_TAG_TEXT_H

#include <stdint.h>
#include <string>

class TagText {
public:
    __attribute__((noinline)) void Add(const char* part)
    {
        text_ += part;
        text_ += '/';
    }
    __attribute__((noinline)) uint64_t Hash() const
    {
        uint64_t h = 1469598103934665603ull;
        for (char c : text_) h = (h ^ (unsigned char)c) * 1099511628211ull;
        return h;
    }

private:
    std::string text_;
};

#endif
