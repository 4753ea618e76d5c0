/* quant_lanes.h - the two integer-to-float decoders the ggml block kernels
 * (quant_matvec.c) need beyond the v8f vocabulary of kernels_arch.h, one
 * version per back end. Each gives the exact fp32 values of small integers,
 * so every back end gives the same bits. Kept apart from kernels_x86.h,
 * kernels_neon.h and kernels_generic.h so that the block types stay in
 * files of their own. */
#ifndef K3_QUANT_LANES_H
#define K3_QUANT_LANES_H

#include <stdint.h>
#include "kernels_arch.h"

#if defined(K3_KERNELS_X86_H)

/* 16 signed bytes -> lanes 0-7 and 8-15 as fp32. */
K3_INLINE void v16_from_i8(const int8_t *p, v8f *lo, v8f *hi)
{
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
}

/* The low (high == 0) or high nibbles of 16 bytes -> 16 fp32 values 0..15. */
K3_INLINE void v16_from_nibbles(const uint8_t *p, int high, v8f *lo, v8f *hi)
{
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    if (high) b = _mm_srli_epi16(b, 4);
    b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
}

#elif defined(K3_KERNELS_NEON_H)

K3_INLINE void v16_from_i8(const int8_t *p, v8f *lo, v8f *hi)
{
    int8x16_t b = vld1q_s8(p);
    int16x8_t w0 = vmovl_s8(vget_low_s8(b)), w1 = vmovl_high_s8(b);
    lo->lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w0)));
    lo->hi = vcvtq_f32_s32(vmovl_high_s16(w0));
    hi->lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w1)));
    hi->hi = vcvtq_f32_s32(vmovl_high_s16(w1));
}

K3_INLINE void v16_from_nibbles(const uint8_t *p, int high, v8f *lo, v8f *hi)
{
    uint8x16_t b = vld1q_u8(p);
    b = high ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(0x0F));
    uint16x8_t w0 = vmovl_u8(vget_low_u8(b)), w1 = vmovl_high_u8(b);
    lo->lo = vcvtq_f32_u32(vmovl_u16(vget_low_u16(w0)));
    lo->hi = vcvtq_f32_u32(vmovl_high_u16(w0));
    hi->lo = vcvtq_f32_u32(vmovl_u16(vget_low_u16(w1)));
    hi->hi = vcvtq_f32_u32(vmovl_high_u16(w1));
}

#else

K3_INLINE void v16_from_i8(const int8_t *p, v8f *lo, v8f *hi)
{
    for (int i = 0; i < 8; i++) {
        lo->lane[i] = (float)p[i];
        hi->lane[i] = (float)p[8 + i];
    }
}

K3_INLINE void v16_from_nibbles(const uint8_t *p, int high, v8f *lo, v8f *hi)
{
    for (int i = 0; i < 8; i++) {
        lo->lane[i] = (float)(high ? p[i] >> 4 : p[i] & 0x0F);
        hi->lane[i] = (float)(high ? p[8 + i] >> 4 : p[8 + i] & 0x0F);
    }
}

#endif

#endif
