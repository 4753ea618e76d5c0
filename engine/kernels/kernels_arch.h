/* kernels_arch.h - picks the kernels' vector back end at compile time.
 *
 * The Makefile's ARCH sets the compiler flags; this header follows them:
 *   K3_KERNELS_GENERIC defined (ARCH=generic)   -> kernels_generic.h
 *   AVX2 + FMA + F16C enabled (ARCH=x86-64-v3)  -> kernels_x86.h
 *   aarch64 with NEON (ARCH=aarch64)            -> kernels_neon.h
 *   anything else                               -> kernels_generic.h
 * All three give bit-identical results (the canonical order of matvec.c);
 * K3_KERNELS_NAME says which one was built (k3_kernels_name()). Internal to
 * the kernel files (matvec.c, mxfp4.c) and the white-box tests/tools. */
#ifndef K3_KERNELS_ARCH_H
#define K3_KERNELS_ARCH_H

#include "kernels.h"

#ifndef K3_INLINE
#define K3_INLINE static inline __attribute__((always_inline))
#endif

#if defined(K3_KERNELS_GENERIC)
#include "kernels_generic.h"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "kernels_x86.h"
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include "kernels_neon.h"
#else
#include "kernels_generic.h"
#include "k3_util.h"
#endif

#endif
