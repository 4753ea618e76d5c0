/* kernels_neon.h - the aarch64 back end of the kernels (Advanced SIMD).
 *
 * The same vocabulary as kernels_x86.h (see there) on 128-bit registers: one
 * 8-lane v8f is a pair of float32x4_t, lanes 0-3 and 4-7. Every operation is
 * the IEEE operation the x86 back end performs on the same lane (vfmaq_f32
 * is a fused multiply-add, fcvtl converts f16 exactly), and the reduction
 * uses the same tree, so results are bit-identical to the x86-64-v3 build.
 * Included only through kernels_arch.h. */
#ifndef K3_KERNELS_NEON_H
#define K3_KERNELS_NEON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>
#include "mxfp4.h"

#define K3_KERNELS_NAME "aarch64 (NEON)"

typedef struct {
    float32x4_t lo, hi;
} v8f;

/* All lanes +0. */
K3_INLINE v8f v8_zero(void)
{
    v8f v = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return v;
}

/* All lanes f. */
K3_INLINE v8f v8_set1(float f)
{
    v8f v = {vdupq_n_f32(f), vdupq_n_f32(f)};
    return v;
}

/* 8 floats from any address (NEON loads need no alignment). */
K3_INLINE v8f v8_loadu(const float *p)
{
    v8f v = {vld1q_f32(p), vld1q_f32(p + 4)};
    return v;
}

/* Same as v8_loadu; kept apart for the x86 back end's aligned loads. */
K3_INLINE v8f v8_load_aligned(const float *p) { return v8_loadu(p); }

/* Store 8 floats to any address. */
K3_INLINE void v8_storeu(float *p, v8f v)
{
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}

/* Lane-wise a + b. */
K3_INLINE v8f v8_add(v8f a, v8f b)
{
    v8f v = {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)};
    return v;
}

/* Lane-wise a * b. */
K3_INLINE v8f v8_mul(v8f a, v8f b)
{
    v8f v = {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)};
    return v;
}

/* v unchanged (kernels_x86.h needs this to keep a broadcast a vector). */
K3_INLINE v8f v8_keep(v8f v) { return v; }

/* Lane-wise a * b + c rounded once (fmla). */
K3_INLINE v8f v8_fma(v8f a, v8f b, v8f c)
{
    v8f v = {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)};
    return v;
}

/* The canonical reduction: lane i + lane i+4, then i + i+2, then 0 + 1. */
K3_INLINE float v8_hsum(v8f v)
{
    float32x4_t s = vaddq_f32(v.lo, v.hi);
    float32x2_t t = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

/* A register-allocation hint for the x86 back end; nothing to do here
 * (32 vector registers leave the 2x2 matmul block no reason to spill). */
K3_INLINE void v8_pin_in_register(v8f *a, v8f *b)
{
    (void)a;
    (void)b;
}

/* 8 bf16 -> 8 fp32: widen each 16-bit pattern into the top half (exact). */
K3_INLINE v8f v8_from_bf16(const void *p)
{
    uint16x8_t h = vld1q_u16((const uint16_t *)p);
    v8f v = {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
             vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
    return v;
}

/* 8 f16 bit patterns -> 8 fp32 (fcvtl, exact). */
K3_INLINE v8f v8_from_f16_bits(uint16x8_t bits)
{
    float16x8_t h = vreinterpretq_f16_u16(bits);
    v8f v = {vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
    return v;
}

/* 8 f16 -> 8 fp32 (exact). */
K3_INLINE v8f v8_from_f16(const void *p)
{
    return v8_from_f16_bits(vld1q_u16((const uint16_t *)p));
}

/* 16 e4m3 bytes -> e4m3 / 256 as fp32 through the f16 bit trick described in
 * kernels_x86.h (sign-extend, shift left 7, clear bit 14; NaN codes forced to
 * f16 0xFFFF when check_nan). Columns 0-7 in *lo, 8-15 in *hi. */
K3_INLINE void v16_from_e4m3_div256(const void *p, int check_nan, v8f *lo, v8f *hi)
{
    int8x16_t codes = vld1q_s8((const int8_t *)p);
    int16x8_t sx[2] = {vmovl_s8(vget_low_s8(codes)), vmovl_high_s8(codes)};
    uint16x8_t h[2];
    for (int i = 0; i < 2; i++) {
        h[i] = vandq_u16(vreinterpretq_u16_s16(vshlq_n_s16(sx[i], 7)), vdupq_n_u16(0xBFFF));
        if (check_nan) {
            uint16x8_t is_nan = vceqq_s16(vorrq_s16(sx[i], vdupq_n_s16((int16_t)0xFF80)), vdupq_n_s16(-1));
            h[i] = vorrq_u16(h[i], is_nan);
        }
    }
    *lo = v8_from_f16_bits(h[0]);
    *hi = v8_from_f16_bits(h[1]);
}

/* True if any of the n_bytes (a multiple of 16) fp8 codes at p is a NaN:
 * b | 0x80 is 0xFF exactly for the NaN codes (running unsigned byte max). */
K3_INLINE int v16_e4m3_has_nan(const unsigned char *p, int64_t n_bytes)
{
    const uint8x16_t high_bit = vdupq_n_u8(0x80);
    uint8x16_t max_code = vdupq_n_u8(0);
    for (int64_t i = 0; i < n_bytes; i += 16)
        max_code = vmaxq_u8(max_code, vorrq_u8(vld1q_u8(p + i), high_bit));
    return vmaxvq_u8(max_code) == 0xFF;
}

/* One MXFP4 group: 16 bytes of nibbles (low nibble = even column) -> four
 * vectors of doubled E2M1 values (exact small integers as floats) for
 * columns 0-7, 8-15, 16-23, 24-31: interleave low and high nibbles (zip),
 * look all 32 up with tbl, widen to int32 and convert. */
K3_INLINE void v32_from_mxfp4_doubled(const uint8_t *bytes16, v8f f[4])
{
    static const int8_t doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const int8x16_t lut = vld1q_s8(doubled_e2m1);
    uint8x16_t b = vld1q_u8(bytes16);
    uint8x16_t lo = vandq_u8(b, vdupq_n_u8(0x0F));
    uint8x16_t hi = vshrq_n_u8(b, 4);
    int8x16_t cols[2] = {vqtbl1q_s8(lut, vzip1q_u8(lo, hi)), vqtbl1q_s8(lut, vzip2q_u8(lo, hi))};
    for (int i = 0; i < 2; i++) {
        int16x8_t lo16 = vmovl_s8(vget_low_s8(cols[i])), hi16 = vmovl_high_s8(cols[i]);
        f[2 * i].lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo16)));
        f[2 * i].hi = vcvtq_f32_s32(vmovl_high_s16(lo16));
        f[2 * i + 1].lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi16)));
        f[2 * i + 1].hi = vcvtq_f32_s32(vmovl_high_s16(hi16));
    }
}

/* The MXFP4 matvec's lane order on this back end: columns in order (see
 * kernels_x86.h for a back end that permutes them). */
#define MXFP4_LANE_COLUMNS {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

/* 16 floats of x (one chunk) in the lane order above: a copy. */
K3_INLINE void v16_to_mxfp4_lanes(const float *x16, float *lanes16)
{
    memcpy(lanes16, x16, 16 * sizeof(float));
}

/* One MXFP4 group -> its 32 exact weights, scale applied, columns in order
 * (w[0] columns 0-7 ... w[3] 24-31): doubled integers times half the scale. */
K3_INLINE void v32_from_mxfp4_lanes(const uint8_t *bytes16, uint8_t scale, v8f w[4])
{
    const v8f half_scale = v8_set1(0.5f * k3_e8m0_to_f32(scale));
    v32_from_mxfp4_doubled(bytes16, w);
    for (int i = 0; i < 4; i++)
        w[i] = v8_mul(w[i], half_scale);
}

/* The 8 integer partial sums of one MXFP4 group against 32 int8 codes in
 * q8 position order (mxfp4_q8.c), as exact floats: lane l = sum over
 * positions 4l..4l+3 of doubled E2M1 code x q (position p < 16 is the low
 * nibble of byte p, p >= 16 the high nibble of byte p - 16), summed
 * directly. */
K3_INLINE v8f v8_mxfp4_q8_partials(const uint8_t *bytes16, const int8_t *q32, const int32_t *offsets8)
{
    (void)offsets8;   /* for back ends that look up code + 12 (kernels_x86.h) */
    static const int8_t doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    float sums[8];
    for (int l = 0; l < 8; l++) {
        int32_t sum = 0;
        for (int p = 4 * l; p < 4 * l + 4; p++)
            sum += doubled[p < 16 ? bytes16[p] & 0x0F : bytes16[p - 16] >> 4] * q32[p];
        sums[l] = (float)sum;
    }
    return v8_loadu(sums);
}

/* The same for n_tokens (1..4) tokens' codes (kernels_x86.h shares the
 * nibble lookup between them; here each token is summed on its own). */
K3_INLINE void v8_mxfp4_q8_partials_tokens(const uint8_t *bytes16, int n_tokens, const int8_t *const *q32,
                                            const int32_t *const *offsets8, v8f *partials)
{
#pragma GCC unroll 4
    for (int t = 0; t < n_tokens; t++)
        partials[t] = v8_mxfp4_q8_partials(bytes16, q32[t], offsets8[t]);
}

#endif
