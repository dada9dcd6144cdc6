// CANN's bounds-checked C library (securec / libc_sec) for the emulator.
//
// Behaviour follows Huawei's securec (openeuler libboundscheck) so operator code sees the same
// return codes and destination clearing:
//   EOK 0                      success
//   ERANGE 34                  destMax is 0 or > SECUREC_{MEM,STRING}_MAX_LEN (dest untouched)
//   EINVAL 22                  dest is NULL (nothing to clear)
//   EINVAL_AND_RESET 150       src is NULL, or strcat's dest is not terminated within destMax;
//                              dest cleared
//   ERANGE_AND_RESET 162       result does not fit (count > destMax, string too long); dest cleared
//   EOVERLAP_AND_RESET 182     source and destination overlap; dest cleared
// "Cleared" means: mem* functions zero all destMax bytes (memset_s fills them with c), str*
// functions set dest[0] = '\0'. The *printf_s functions return the number of characters written
// (excluding the terminator) or -1; on error dest[0] = '\0' when dest/destMax are usable, except
// snprintf_s with count < destMax, which keeps the output truncated to count characters and
// returns -1 (securec semantics). "%n" is rejected (-1), as securec does not support it.
#include <cstdint>
#include <cstdio>
#include <cstring>

#pragma GCC visibility push(default)
#include "securec.h"
#pragma GCC visibility pop

namespace emu {
namespace {

inline uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// [a, a+n) and [b, b+n) overlap and a != b (identical ranges count as "no overlap", as securec).
inline bool mem_overlap(const void* a, const void* b, size_t n) {
    const uintptr_t x = addr(a), y = addr(b);
    return (x > y && x < y + n) || (y > x && y < x + n);
}

// String copy of len chars plus terminator from src to dest would overlap.
inline bool str_overlap(const char* dest, const char* src, size_t len) {
    const uintptr_t d = addr(dest), s = addr(src);
    return (d < s && d + len >= s) || (s < d && s + len >= d);
}

// Overlap test of securec's strcat/strncat: appending srcLen chars after destLen chars.
inline bool cat_overlap(const char* dest, size_t destLen, const char* src, size_t srcLen) {
    const uintptr_t d = addr(dest), s = addr(src);
    return (d < s && d + destLen + srcLen >= s) || (s < d && s + srcLen >= d);
}

errno_t do_strcat(char* strDest, size_t destMax, const char* strSrc, size_t srcLimit) {
    const size_t destLen = strnlen(strDest, destMax);
    const size_t srcLen = strnlen(strSrc, srcLimit);
    if (cat_overlap(strDest, destLen, strSrc, srcLen)) {
        strDest[0] = '\0';
        if (addr(strDest) + destLen <= addr(strSrc) && destLen == destMax) return EINVAL_AND_RESET;
        return EOVERLAP_AND_RESET;
    }
    if (srcLen + destLen >= destMax || strDest == strSrc) {
        strDest[0] = '\0';
        return destLen == destMax ? EINVAL_AND_RESET : ERANGE_AND_RESET;  // unterminated dest / too long
    }
    std::memcpy(strDest + destLen, strSrc, srcLen);
    strDest[destLen + srcLen] = '\0';
    return EOK;
}

// True if the format contains a %n conversion (securec refuses to write through %n).
bool has_percent_n(const char* fmt) {
    for (const char* p = fmt; *p; ++p) {
        if (*p != '%') continue;
        ++p;
        if (*p == '%') continue;
        while (*p && std::strchr("-+ #0'123456789*.$hlLqjztI", *p) != nullptr) ++p;
        if (*p == 'n') return true;
        if (*p == '\0') break;
    }
    return false;
}

constexpr int kFormatError = -1;
constexpr int kTruncated = -2;

// Formats into dest[0, size) (size >= 1). Returns the length, kTruncated if the output did not
// fit (dest then holds the first size-1 characters), or kFormatError.
int format_into(char* dest, size_t size, const char* format, va_list ap) {
    if (has_percent_n(format)) return kFormatError;
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(dest, size, format, copy);
    va_end(copy);
    if (n < 0) return kFormatError;
    if (static_cast<size_t>(n) >= size) return kTruncated;
    return n;
}

}  // namespace
}  // namespace emu

extern "C" {

errno_t memcpy_s(void* dest, size_t destMax, const void* src, size_t count) {
    if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
    if (dest == nullptr || src == nullptr) {
        if (dest == nullptr) return EINVAL;
        std::memset(dest, 0, destMax);
        return EINVAL_AND_RESET;
    }
    if (count > destMax) {
        std::memset(dest, 0, destMax);
        return ERANGE_AND_RESET;
    }
    if (emu::mem_overlap(dest, src, count)) {
        std::memset(dest, 0, destMax);
        return EOVERLAP_AND_RESET;
    }
    if (count > 0 && dest != src) std::memcpy(dest, src, count);
    return EOK;
}

errno_t memmove_s(void* dest, size_t destMax, const void* src, size_t count) {
    if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
    if (dest == nullptr || src == nullptr) {
        if (dest == nullptr) return EINVAL;
        std::memset(dest, 0, destMax);
        return EINVAL_AND_RESET;
    }
    if (count > destMax) {
        std::memset(dest, 0, destMax);
        return ERANGE_AND_RESET;
    }
    if (count > 0 && dest != src) std::memmove(dest, src, count);
    return EOK;
}

errno_t memset_s(void* dest, size_t destMax, int c, size_t count) {
    if (destMax == 0 || destMax > SECUREC_MEM_MAX_LEN) return ERANGE;
    if (dest == nullptr) return EINVAL;
    if (count > destMax) {
        std::memset(dest, c, destMax);  // securec fills the whole buffer, then reports the error
        return ERANGE_AND_RESET;
    }
    std::memset(dest, c, count);
    return EOK;
}

errno_t strcpy_s(char* strDest, size_t destMax, const char* strSrc) {
    if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
    if (strDest == nullptr || strSrc == nullptr) {
        if (strDest == nullptr) return EINVAL;
        strDest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    if (strDest == strSrc) return EOK;
    const size_t srcLen = strnlen(strSrc, destMax);
    if (srcLen == destMax) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    if (emu::str_overlap(strDest, strSrc, srcLen)) {
        strDest[0] = '\0';
        return EOVERLAP_AND_RESET;
    }
    std::memcpy(strDest, strSrc, srcLen + 1);
    return EOK;
}

errno_t strncpy_s(char* strDest, size_t destMax, const char* strSrc, size_t count) {
    if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
    if (strDest == nullptr || strSrc == nullptr) {
        if (strDest == nullptr) return EINVAL;
        strDest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    if (count > SECUREC_STRING_MAX_LEN && count != static_cast<size_t>(-1)) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    if (count == 0) {
        strDest[0] = '\0';
        return EOK;
    }
    size_t len;
    if (count < destMax) {
        len = strnlen(strSrc, count);
    } else {
        len = strnlen(strSrc, destMax);
        if (len == destMax) {
            strDest[0] = '\0';
            return ERANGE_AND_RESET;
        }
    }
    if (strDest != strSrc && emu::str_overlap(strDest, strSrc, len)) {
        strDest[0] = '\0';
        return EOVERLAP_AND_RESET;
    }
    if (strDest != strSrc) std::memcpy(strDest, strSrc, len);
    strDest[len] = '\0';
    return EOK;
}

errno_t strcat_s(char* strDest, size_t destMax, const char* strSrc) {
    if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
    if (strDest == nullptr || strSrc == nullptr) {
        if (strDest == nullptr) return EINVAL;
        strDest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    // The source is measured only as far as it could still fit.
    const size_t destLen = strnlen(strDest, destMax);
    return emu::do_strcat(strDest, destMax, strSrc, destMax - destLen);
}

errno_t strncat_s(char* strDest, size_t destMax, const char* strSrc, size_t count) {
    if (destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) return ERANGE;
    if (strDest == nullptr || strSrc == nullptr) {
        if (strDest == nullptr) return EINVAL;
        strDest[0] = '\0';
        return EINVAL_AND_RESET;
    }
    if (count > SECUREC_STRING_MAX_LEN) {
        strDest[0] = '\0';
        return ERANGE_AND_RESET;
    }
    return emu::do_strcat(strDest, destMax, strSrc, count);
}

int vsprintf_s(char* strDest, size_t destMax, const char* format, va_list argList) {
    if (format == nullptr || strDest == nullptr || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN) {
        if (strDest != nullptr && destMax > 0 && destMax <= SECUREC_STRING_MAX_LEN) strDest[0] = '\0';
        return -1;
    }
    const int r = emu::format_into(strDest, destMax, format, argList);
    if (r < 0) {
        strDest[0] = '\0';
        return -1;
    }
    return r;
}

int vsnprintf_s(char* strDest, size_t destMax, size_t count, const char* format, va_list argList) {
    if (format == nullptr || strDest == nullptr || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN ||
        (count > SECUREC_STRING_MAX_LEN - 1 && count != static_cast<size_t>(-1))) {
        if (strDest != nullptr && destMax > 0 && destMax <= SECUREC_STRING_MAX_LEN) strDest[0] = '\0';
        return -1;
    }
    int r;
    if (destMax > count) {
        // Output limited to count characters; truncation keeps the text and returns -1.
        r = emu::format_into(strDest, count + 1, format, argList);
        if (r == emu::kTruncated) return -1;
    } else {
        r = emu::format_into(strDest, destMax, format, argList);
    }
    if (r < 0) {
        strDest[0] = '\0';
        return -1;
    }
    return r;
}

int sprintf_s(char* strDest, size_t destMax, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    const int r = vsprintf_s(strDest, destMax, format, ap);
    va_end(ap);
    return r;
}

int snprintf_s(char* strDest, size_t destMax, size_t count, const char* format, ...) {
    va_list ap;
    va_start(ap, format);
    const int r = vsnprintf_s(strDest, destMax, count, format, ap);
    va_end(ap);
    return r;
}

}  // extern "C"
