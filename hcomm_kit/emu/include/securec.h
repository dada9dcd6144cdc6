/*
 * hcomm-kit CPU emulator: declarations of CANN's bounds-checked C library
 * (libc_sec, "securec"). The implementation lives in the emulator library,
 * which is also installed as libc_sec.so.
 *
 * Return convention: EOK (0) on success, otherwise an errno-style code.
 */
#ifndef __SECUREC_H__5D13A042_DC3F_4ED9_A8D1_882811274C27
#define __SECUREC_H__5D13A042_DC3F_4ED9_A8D1_882811274C27
#ifndef SECUREC_H
#define SECUREC_H
#endif

#include <stddef.h>
#include <stdarg.h>
#include <errno.h>

#ifndef SECUREC_ERRNO_T_DEFINED
#define SECUREC_ERRNO_T_DEFINED
#if !defined(__errno_t_defined) && !defined(_ERRCODE_DEFINED)
typedef int errno_t;
#endif
#endif

#ifndef EOK
#define EOK 0
#endif
#ifndef EINVAL
#define EINVAL 22
#endif
#ifndef ERANGE
#define ERANGE 34
#endif
#ifndef EOVERLAP
#define EOVERLAP 54
#endif
/* "_AND_RESET": the error was detected and the destination was cleared. */
#ifndef EINVAL_AND_RESET
#define EINVAL_AND_RESET (22 | 128)
#endif
#ifndef ERANGE_AND_RESET
#define ERANGE_AND_RESET (34 | 128)
#endif
#ifndef EOVERLAP_AND_RESET
#define EOVERLAP_AND_RESET (54 | 128)
#endif

/* Largest accepted destination size (as in securec). */
#ifndef SECUREC_MEM_MAX_LEN
#define SECUREC_MEM_MAX_LEN 0x7fffffffUL
#endif
#ifndef SECUREC_STRING_MAX_LEN
#define SECUREC_STRING_MAX_LEN 0x7fffffffUL
#endif

#ifdef __cplusplus
extern "C" {
#endif

errno_t memcpy_s(void *dest, size_t destMax, const void *src, size_t count);
errno_t memmove_s(void *dest, size_t destMax, const void *src, size_t count);
errno_t memset_s(void *dest, size_t destMax, int c, size_t count);

errno_t strcpy_s(char *strDest, size_t destMax, const char *strSrc);
errno_t strncpy_s(char *strDest, size_t destMax, const char *strSrc, size_t count);
errno_t strcat_s(char *strDest, size_t destMax, const char *strSrc);
errno_t strncat_s(char *strDest, size_t destMax, const char *strSrc, size_t count);

/* The formatting functions return the number of characters written, or -1. */
int sprintf_s(char *strDest, size_t destMax, const char *format, ...);
int snprintf_s(char *strDest, size_t destMax, size_t count, const char *format, ...);
int vsprintf_s(char *strDest, size_t destMax, const char *format, va_list argList);
int vsnprintf_s(char *strDest, size_t destMax, size_t count, const char *format, va_list argList);

#ifdef __cplusplus
}
#endif

#endif /* securec.h */
