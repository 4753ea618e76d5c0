/* build_info.c - what this engine was compiled with, for `k3 --version`
 * and bug reports: the kernel set chosen at compile time (the dot products
 * in matvec.c follow the instruction set the compiler was allowed). */
#include "k3.h"

const char *k3_build_kernels(void)
{
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    return "x86-64 AVX2 + FMA + F16C (8-lane f32 dot products, fixed summation order)";
#elif defined(__aarch64__) && defined(__ARM_NEON)
    return "AArch64 NEON (fixed summation order)";
#else
    return "portable C (scalar reference order)";
#endif
}
