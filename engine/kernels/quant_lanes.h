/* quant_lanes.h - what the ggml block kernels (quant_matvec.c) need beyond
 * the v8f vocabulary of kernels_arch.h, one version per back end: v16b, 16
 * byte lanes with the few byte operations that turn any block type's packed
 * fields into 16 small signed integers (nibbles, 2-bit pairs, single high
 * bits, table levels), and their conversion to fp32. Every
 * operation is exact integer arithmetic on each byte and the conversion to
 * fp32 is exact, so every back end gives the same bits. Kept apart from
 * kernels_x86.h, kernels_neon.h and kernels_generic.h so that the block
 * types stay in files of their own.
 *
 * v16b operations (byte lane i of each operand):
 *   v16b_load(p)                  p[i]
 *   v16b_shr_and(a, shift, mask)  (a >> shift) & mask; mask must not reach
 *                                 past the bits a byte keeps (mask <= 0xFF >> shift)
 *   v16b_or_shl(a, b, shift)      a | (b << shift); b << shift must fit a byte
 *   v16b_sub_const(a, k)          a - k, wrapping (read as a signed byte)
 *   v16b_lookup(table16, a)       table16[a], a in 0..15
 *   v16b_from_bits(bits2, value)  value where bit i % 8 of bits2[i / 8] is
 *                                 set, else 0
 *   v16b_sign_by(a, signs)        a[i] * signs[i], signs +1 or -1 (|a| < 128)
 *   v16_from_v16b(a, lo, hi)      the 16 lanes as signed bytes -> fp32
 * and f16_scale_at(p), the little-endian binary16 at p as fp32 (exact, as
 * k3_f16_to_f32), inline where the machine converts f16 itself.
 *
 * v16s (16 int16 lanes) and v8i (8 int32 lanes), for the integer dot
 * products of the q8 activation path (quant_matvec.c); no operation
 * overflows within its bounds there (|code x scale| < 2^15):
 *   v16s_scaled(codes, k)         the 16 signed byte codes times k, as int16
 *   v8i_dot_pairs(w, q16)         lane l = w[2l] q16[2l] + w[2l+1] q16[2l+1]
 *                                 (q16 signed bytes)
 *   v8i_zero(), v8i_add(a, b)     0, a + b
 *   v8f_from_v8i(a)               the lanes as fp32 (exact below 2^24)
 *
 * v32b (32 byte lanes: two 16-weight chunks a and b of a block, lanes 0-15
 * chunk a and 16-31 chunk b, each in column order) and q8w, a chunk pair
 * made ready for the q8 dot products of several tokens:
 *   v32b_load(p)                  p[i] (a = p[0..15], b = p[16..31])
 *   v32b_nibbles(p16)             a = p16[i] & 15, b = p16[i] >> 4
 *   v32b_shr_and, v32b_or_shl, v32b_sub_const, v32b_lookup  as for v16b
 *   v32b_from_bits(bits4, value)  value where bit i % 8 of bits4[i / 8] is set
 *   v32b_join(a, b)               two v16b chunks as one pair
 *   q8w_prepare(codes, is_signed, scale_a, scale_b)  codes are signed bytes
 *                                 (is_signed) or unsigned ones below 128
 *   q8w_prepare_signs(magnitudes, signs, scale_a, scale_b)  the same for the
 *                                 signed codes magnitudes[i] * signs[i]
 *                                 (magnitudes below 128, signs +1 or -1)
 *   v8i_dot_q8w(w, q32)           lane l = scale_a (a[2l] qa[2l] + a[2l+1] qa[2l+1])
 *                                        + scale_b (b[2l] qb[2l] + b[2l+1] qb[2l+1])
 *                                 where q32 holds the 32 activation codes of the
 *                                 pair in the back end's order, Q8_GROUPED_ORDER:
 *                                 0 = column order (qa = q32, qb = q32 + 16); 1 =
 *                                 position 4l + i holds column 2l + i (i < 2) or
 *                                 16 + 2l + i - 2 (i >= 2), so that one 4-byte
 *                                 group carries all of lane l's products. */
#ifndef K3_QUANT_LANES_H
#define K3_QUANT_LANES_H

#include <stdint.h>
#include <string.h>
#include "kernels_arch.h"

/* k3_e8m0_half_to_f32 (quant_types.c) inline, for MXFP4's per-block scale
 * in the kernels' inner loop: 2^(x - 128), the float with exponent field
 * x - 1 for x >= 2, the subnormals 2^-128 and 2^-127 for x = 0 and 1. */
K3_INLINE float e8m0_half_scale(uint8_t x)
{
    uint32_t bits = x < 2 ? 0x00200000u << x : (uint32_t)(x - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#if defined(K3_KERNELS_X86_H)

typedef __m128i v16b;

/* 16 bytes from any address. */
K3_INLINE v16b v16b_load(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

/* A 16-bit shift and a byte mask: the mask drops the bits the neighbour
 * byte shifted in. */
K3_INLINE v16b v16b_shr_and(v16b a, int shift, uint8_t mask)
{
    return _mm_and_si128(_mm_srl_epi16(a, _mm_cvtsi32_si128(shift)), _mm_set1_epi8((char)mask));
}

/* A 16-bit shift is a byte shift when b << shift fits in the byte. */
K3_INLINE v16b v16b_or_shl(v16b a, v16b b, int shift)
{
    return _mm_or_si128(a, _mm_sll_epi16(b, _mm_cvtsi32_si128(shift)));
}

/* Wrapping byte subtract. */
K3_INLINE v16b v16b_sub_const(v16b a, uint8_t k) { return _mm_sub_epi8(a, _mm_set1_epi8((char)k)); }

/* pshufb: lane i takes table byte a[i] (a[i] < 16). */
K3_INLINE v16b v16b_lookup(const int8_t *table16, v16b a)
{
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)table16), a);
}

/* The two bit bytes spread to lanes 0-7 and 8-15, each lane tests its
 * own bit, the all-ones lanes keep value. */
K3_INLINE v16b v16b_from_bits(const uint8_t *bits2, uint8_t value)
{
    const __m128i bit_of_lane = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    __m128i spread = _mm_shuffle_epi8(_mm_cvtsi32_si128(bits2[0] | bits2[1] << 8),
                                      _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
    __m128i set = _mm_cmpeq_epi8(_mm_and_si128(spread, bit_of_lane), bit_of_lane);
    return _mm_and_si128(set, _mm_set1_epi8((char)value));
}

/* psignb: signs are +1 or -1, never 0. */
K3_INLINE v16b v16b_sign_by(v16b a, v16b signs) { return _mm_sign_epi8(a, signs); }

/* F16C's scalar conversion: exact, no call in the kernels' inner loops. */
K3_INLINE float f16_scale_at(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

/* Sign-extend each half to 8 int32 lanes, convert (exact). */
K3_INLINE void v16_from_v16b(v16b a, v8f *lo, v8f *hi)
{
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(a, 8)));
}

typedef __m256i v16s;
typedef __m256i v8i;

K3_INLINE v8i v8i_zero(void) { return _mm256_setzero_si256(); }

/* Sign-extend to 16 int16 lanes, then one vpmullw (k = 1: no multiply). */
K3_INLINE v16s v16s_scaled(v16b codes, int k)
{
    __m256i wide = _mm256_cvtepi8_epi16(codes);
    return k == 1 ? wide : _mm256_mullo_epi16(wide, _mm256_set1_epi16((short)k));
}

/* q16 widened to int16; vpmaddwd multiplies and adds adjacent pairs into
 * 8 int32 lanes. */
K3_INLINE v8i v8i_dot_pairs(v16s w, const int8_t *q16)
{
    return _mm256_madd_epi16(w, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q16)));
}

K3_INLINE v8i v8i_add(v8i a, v8i b) { return _mm256_add_epi32(a, b); }
K3_INLINE v8f v8f_from_v8i(v8i a) { return _mm256_cvtepi32_ps(a); }

/* The q8 chunk pairs, 32 bytes per instruction. A pair's codes are put in
 * the grouped order once (vpermq takes columns 0-7 and 16-23 to the low
 * 128 bits, 8-15 and 24-31 to the high; pshufb then gathers columns 2l,
 * 2l + 1, 16 + 2l, 17 + 2l into 4-byte group l), the activations were
 * stored in that order by the quantizer, and per token vpmaddubsw
 * multiplies the unsigned magnitudes by the signed activation codes and
 * adds adjacent products into int16 (columns 2l, 2l + 1 of chunk a in word
 * 2l, of chunk b in word 2l + 1), and vpmaddwd by (scale_a, scale_b) adds
 * each group's two words into int32 lane l: the contract's lane exactly.
 * Signed codes go through the sign trick: |code| unsigned times q with
 * code's sign (vpsignb; code 0 gives 0, a product of 0 either way).
 *
 * No int16 saturation for any input: the activation codes are in
 * [-127, 127] (the quantizer clamps), every code's magnitude is at most
 * 128 (Q8_0's -128: vpabsb gives 0x80, read as 128 unsigned by vpmaddubsw;
 * the other types' codes are 127 (IQ4 levels) or less), so a word is at
 * most 2 x 128 x 127 = 32512 < 32767 in magnitude. vpmaddwd is exact in
 * int32: 2 x 32512 x 128 (the largest sub-scale magnitude, Q6_K's -128)
 * is below 2^23. */
#define Q8_GROUPED_ORDER 1

typedef __m256i v32b;

typedef struct {
    __m256i magnitudes, signs, scales;
    int is_signed;
} q8w;

K3_INLINE v32b v32b_load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

K3_INLINE v32b v32b_join(v16b a, v16b b) { return _mm256_set_m128i(b, a); }

/* The 16 bytes in both halves, the high half shifted by 4, then masked. */
K3_INLINE v32b v32b_nibbles(const uint8_t *p16)
{
    __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p16));
    return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                            _mm256_set1_epi8(0x0F));
}

K3_INLINE v32b v32b_shr_and(v32b a, int shift, uint8_t mask)
{
    return _mm256_and_si256(_mm256_srl_epi16(a, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8((char)mask));
}

K3_INLINE v32b v32b_or_shl(v32b a, v32b b, int shift)
{
    return _mm256_or_si256(a, _mm256_sll_epi16(b, _mm_cvtsi32_si128(shift)));
}

K3_INLINE v32b v32b_sub_const(v32b a, uint8_t k) { return _mm256_sub_epi8(a, _mm256_set1_epi8((char)k)); }

K3_INLINE v32b v32b_lookup(const int8_t *table16, v32b a)
{
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table16)), a);
}

/* The 4 bit bytes spread to lanes 8k..8k+7 (byte k), each lane tests its bit. */
K3_INLINE v32b v32b_from_bits(const uint8_t *bits4, uint8_t value)
{
    uint32_t bits;
    memcpy(&bits, bits4, 4);
    const __m256i bit_of_lane = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits),
                                         _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_of_lane), bit_of_lane);
    return _mm256_and_si256(set, _mm256_set1_epi8((char)value));
}

/* A chunk pair's 32 bytes in the grouped order: vpermq + pshufb. */
K3_INLINE __m256i v32b_grouped(v32b a)
{
    const __m256i group = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0, 1, 8, 9, 2, 3,
                                           10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
    return _mm256_shuffle_epi8(_mm256_permute4x64_epi64(a, 0xD8), group);
}

/* The codes in the grouped order, then the magnitudes (and signs). */
K3_INLINE q8w q8w_prepare(v32b codes, int is_signed, int scale_a, int scale_b)
{
    q8w w;
    w.signs = v32b_grouped(codes);
    w.magnitudes = is_signed ? _mm256_abs_epi8(w.signs) : w.signs;
    w.scales = _mm256_set1_epi32((int)((uint32_t)(uint16_t)scale_a | (uint32_t)scale_b << 16));
    w.is_signed = is_signed;
    return w;
}

/* Magnitudes and signs apart (the grid types store them so): both put in
 * the grouped order, no codes formed; vpsignb by the +1 / -1 lanes gives
 * each product its sign as for q8w_prepare's signed codes. */
K3_INLINE q8w q8w_prepare_signs(v32b magnitudes, v32b signs, int scale_a, int scale_b)
{
    q8w w;
    w.magnitudes = v32b_grouped(magnitudes);
    w.signs = v32b_grouped(signs);
    w.scales = _mm256_set1_epi32((int)((uint32_t)(uint16_t)scale_a | (uint32_t)scale_b << 16));
    w.is_signed = 1;
    return w;
}

K3_INLINE v8i v8i_dot_q8w(q8w w, const int8_t *q32)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)q32);
    if (w.is_signed) q = _mm256_sign_epi8(q, w.signs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w.magnitudes, q), w.scales);
}

#elif defined(K3_KERNELS_NEON_H)

typedef uint8x16_t v16b;

K3_INLINE v16b v16b_load(const uint8_t *p) { return vld1q_u8(p); }

K3_INLINE v16b v16b_shr_and(v16b a, int shift, uint8_t mask)
{
    return vandq_u8(vshlq_u8(a, vdupq_n_s8((int8_t)-shift)), vdupq_n_u8(mask));
}

K3_INLINE v16b v16b_or_shl(v16b a, v16b b, int shift)
{
    return vorrq_u8(a, vshlq_u8(b, vdupq_n_s8((int8_t)shift)));
}

K3_INLINE v16b v16b_sub_const(v16b a, uint8_t k) { return vsubq_u8(a, vdupq_n_u8(k)); }

K3_INLINE v16b v16b_lookup(const int8_t *table16, v16b a)
{
    return vqtbl1q_u8(vld1q_u8((const uint8_t *)table16), a);
}

K3_INLINE v16b v16b_from_bits(const uint8_t *bits2, uint8_t value)
{
    static const uint8_t bit_of_lane[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t spread = vcombine_u8(vdup_n_u8(bits2[0]), vdup_n_u8(bits2[1]));
    return vandq_u8(vtstq_u8(spread, vld1q_u8(bit_of_lane)), vdupq_n_u8(value));
}

/* A wrapping byte multiply: exact for |a| < 128 and signs +-1. */
K3_INLINE v16b v16b_sign_by(v16b a, v16b signs)
{
    return vreinterpretq_u8_s8(vmulq_s8(vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(signs)));
}

K3_INLINE float f16_scale_at(const uint8_t *p)
{
    uint16x4_t bits = vdup_n_u16((uint16_t)(p[0] | p[1] << 8));
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(bits)), 0);
}

K3_INLINE void v16_from_v16b(v16b a, v8f *lo, v8f *hi)
{
    int8x16_t b = vreinterpretq_s8_u8(a);
    int16x8_t w0 = vmovl_s8(vget_low_s8(b)), w1 = vmovl_high_s8(b);
    lo->lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w0)));
    lo->hi = vcvtq_f32_s32(vmovl_high_s16(w0));
    hi->lo = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w1)));
    hi->hi = vcvtq_f32_s32(vmovl_high_s16(w1));
}

typedef struct {
    int16x8_t lo, hi;
} v16s;

typedef struct {
    int32x4_t lo, hi;
} v8i;

K3_INLINE v8i v8i_zero(void)
{
    v8i v = {vdupq_n_s32(0), vdupq_n_s32(0)};
    return v;
}

K3_INLINE v16s v16s_scaled(v16b codes, int k)
{
    int8x16_t c = vreinterpretq_s8_u8(codes);
    v16s v = {vmulq_n_s16(vmovl_s8(vget_low_s8(c)), (int16_t)k), vmulq_n_s16(vmovl_high_s8(c), (int16_t)k)};
    return v;
}

/* Products of lanes 0-3 and 4-7 of each half, added in pairs. */
K3_INLINE v8i v8i_dot_pairs(v16s w, const int8_t *q16)
{
    int8x16_t q = vld1q_s8(q16);
    int16x8_t q_lo = vmovl_s8(vget_low_s8(q)), q_hi = vmovl_high_s8(q);
    v8i v = {vpaddq_s32(vmull_s16(vget_low_s16(w.lo), vget_low_s16(q_lo)), vmull_high_s16(w.lo, q_lo)),
             vpaddq_s32(vmull_s16(vget_low_s16(w.hi), vget_low_s16(q_hi)), vmull_high_s16(w.hi, q_hi))};
    return v;
}

K3_INLINE v8i v8i_add(v8i a, v8i b)
{
    v8i v = {vaddq_s32(a.lo, b.lo), vaddq_s32(a.hi, b.hi)};
    return v;
}

K3_INLINE v8f v8f_from_v8i(v8i a)
{
    v8f v = {vcvtq_f32_s32(a.lo), vcvtq_f32_s32(a.hi)};
    return v;
}

#else

typedef struct {
    uint8_t lane[16];
} v16b;

K3_INLINE v16b v16b_load(const uint8_t *p)
{
    v16b v;
    memcpy(v.lane, p, 16);
    return v;
}

K3_INLINE v16b v16b_shr_and(v16b a, int shift, uint8_t mask)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)((a.lane[i] >> shift) & mask);
    return a;
}

K3_INLINE v16b v16b_or_shl(v16b a, v16b b, int shift)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)(a.lane[i] | b.lane[i] << shift);
    return a;
}

K3_INLINE v16b v16b_sub_const(v16b a, uint8_t k)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)(a.lane[i] - k);
    return a;
}

K3_INLINE v16b v16b_lookup(const int8_t *table16, v16b a)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)table16[a.lane[i] & 15];
    return a;
}

K3_INLINE v16b v16b_from_bits(const uint8_t *bits2, uint8_t value)
{
    v16b v;
    for (int i = 0; i < 16; i++) v.lane[i] = (bits2[i / 8] >> (i % 8)) & 1 ? value : 0;
    return v;
}

K3_INLINE v16b v16b_sign_by(v16b a, v16b signs)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)((int8_t)a.lane[i] * (int8_t)signs.lane[i]);
    return a;
}

K3_INLINE float f16_scale_at(const uint8_t *p)
{
    return k3_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

K3_INLINE void v16_from_v16b(v16b a, v8f *lo, v8f *hi)
{
    for (int i = 0; i < 8; i++) {
        lo->lane[i] = (float)(int8_t)a.lane[i];
        hi->lane[i] = (float)(int8_t)a.lane[8 + i];
    }
}

typedef struct {
    int16_t lane[16];
} v16s;

typedef struct {
    int32_t lane[8];
} v8i;

K3_INLINE v8i v8i_zero(void)
{
    v8i v;
    for (int i = 0; i < 8; i++) v.lane[i] = 0;
    return v;
}

K3_INLINE v16s v16s_scaled(v16b codes, int k)
{
    v16s v;
    for (int i = 0; i < 16; i++) v.lane[i] = (int16_t)((int8_t)codes.lane[i] * k);
    return v;
}

K3_INLINE v8i v8i_dot_pairs(v16s w, const int8_t *q16)
{
    v8i v;
    for (int i = 0; i < 8; i++) v.lane[i] = w.lane[2 * i] * q16[2 * i] + w.lane[2 * i + 1] * q16[2 * i + 1];
    return v;
}

K3_INLINE v8i v8i_add(v8i a, v8i b)
{
    for (int i = 0; i < 8; i++) a.lane[i] += b.lane[i];
    return a;
}

K3_INLINE v8f v8f_from_v8i(v8i a)
{
    v8f v;
    for (int i = 0; i < 8; i++) v.lane[i] = (float)a.lane[i];
    return v;
}

#endif


/* The chunk pairs of the back ends without a 32-byte vector: two v16b,
 * the activations in column order, each chunk widened to int16 times its
 * scale once for all tokens (|code x scale| < 2^15, the 16-code path). */
#if !defined(K3_KERNELS_X86_H)
#define Q8_GROUPED_ORDER 0

typedef struct {
    v16b a, b;
} v32b;

typedef struct {
    v16s a, b;
} q8w;

K3_INLINE v32b v32b_load(const uint8_t *p)
{
    v32b v = {v16b_load(p), v16b_load(p + 16)};
    return v;
}

K3_INLINE v32b v32b_join(v16b a, v16b b)
{
    v32b v = {a, b};
    return v;
}

K3_INLINE v32b v32b_nibbles(const uint8_t *p16)
{
    v32b v = {v16b_shr_and(v16b_load(p16), 0, 0x0F), v16b_shr_and(v16b_load(p16), 4, 0x0F)};
    return v;
}

K3_INLINE v32b v32b_shr_and(v32b x, int shift, uint8_t mask)
{
    v32b v = {v16b_shr_and(x.a, shift, mask), v16b_shr_and(x.b, shift, mask)};
    return v;
}

K3_INLINE v32b v32b_or_shl(v32b x, v32b y, int shift)
{
    v32b v = {v16b_or_shl(x.a, y.a, shift), v16b_or_shl(x.b, y.b, shift)};
    return v;
}

K3_INLINE v32b v32b_sub_const(v32b x, uint8_t k)
{
    v32b v = {v16b_sub_const(x.a, k), v16b_sub_const(x.b, k)};
    return v;
}

K3_INLINE v32b v32b_lookup(const int8_t *table16, v32b x)
{
    v32b v = {v16b_lookup(table16, x.a), v16b_lookup(table16, x.b)};
    return v;
}

K3_INLINE v32b v32b_from_bits(const uint8_t *bits4, uint8_t value)
{
    v32b v = {v16b_from_bits(bits4, value), v16b_from_bits(bits4 + 2, value)};
    return v;
}

/* Unsigned codes below 128 read the same as signed bytes. */
K3_INLINE q8w q8w_prepare(v32b codes, int is_signed, int scale_a, int scale_b)
{
    (void)is_signed;
    q8w w = {v16s_scaled(codes.a, scale_a), v16s_scaled(codes.b, scale_b)};
    return w;
}

/* The signed codes formed first (16-code path: nothing to save). */
K3_INLINE q8w q8w_prepare_signs(v32b magnitudes, v32b signs, int scale_a, int scale_b)
{
    return q8w_prepare(v32b_join(v16b_sign_by(magnitudes.a, signs.a), v16b_sign_by(magnitudes.b, signs.b)), 1,
                       scale_a, scale_b);
}

K3_INLINE v8i v8i_dot_q8w(q8w w, const int8_t *q32)
{
    return v8i_add(v8i_dot_pairs(w.a, q32), v8i_dot_pairs(w.b, q32 + 16));
}
#endif

#endif
