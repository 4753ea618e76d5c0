/* quant_iq.c - see quant_iq.h: the IQ2/IQ3 row kernels. Each 16 weights
 * are two (IQ2) or four (IQ3) grid points gathered from the byte grids of
 * quant_grids.h into one 16-byte register, negated where their sign bits
 * say, then multiplied by the group's scale and summed (or stored) by the
 * shared emit helpers of quant_emit.h, exactly as the other block types
 * are: the scalar decoders (quant_types.c) round scale * magnitude once
 * and flip the sign, and (-m) * s is -(m * s) in IEEE arithmetic, so the
 * bits agree. */
#include <string.h>
#include "kernels_arch.h"
#include "quant_emit.h"
#include "quant_grids.h"
#include "quant_iq.h"
#include "quant_lanes.h"

/* Two lane operations only these types need, one version per back end:
 *   v16b_from_u64x2(lo, hi)       bytes 0-7 of lo (little-endian) in lanes
 *                                 0-7, of hi in lanes 8-15
 *   v16b_from_u32x4(p0, .., p3)   the 4 bytes at p0 in lanes 0-3, at p1 in
 *                                 4-7, at p2 in 8-11, at p3 in 12-15
 *   v16b_negate_where(a, bits2)   -a[i] (wrapping) where bit i % 8 of
 *                                 bits2[i / 8] is set, else a[i] */
#if defined(K3_KERNELS_X86_H)

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    return _mm_set_epi64x((long long)hi, (long long)lo);
}

/* One 32-bit load and three inserts (assembling two u64 first measured
 * slower: the compiler widens and shifts them). */
K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    int32_t a, b, c, d;
    memcpy(&a, p0, 4);
    memcpy(&b, p1, 4);
    memcpy(&c, p2, 4);
    memcpy(&d, p3, 4);
    return _mm_setr_epi32(a, b, c, d);
}

/* (a ^ m) - m is -a where m is all ones, a where m is 0. */
K3_INLINE v16b v16b_negate_where(v16b a, const uint8_t *bits2)
{
    const v16b m = v16b_from_bits(bits2, 0xFF);
    return _mm_sub_epi8(_mm_xor_si128(a, m), m);
}

#elif defined(K3_KERNELS_NEON_H)

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    return vcombine_u8(vcreate_u8(lo), vcreate_u8(hi));
}

K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    uint32_t words[4];
    memcpy(&words[0], p0, 4);
    memcpy(&words[1], p1, 4);
    memcpy(&words[2], p2, 4);
    memcpy(&words[3], p3, 4);
    return vreinterpretq_u8_u32(vld1q_u32(words));
}

K3_INLINE v16b v16b_negate_where(v16b a, const uint8_t *bits2)
{
    const v16b m = v16b_from_bits(bits2, 0xFF);
    return vsubq_u8(veorq_u8(a, m), m);
}

#else

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    v16b v;
    memcpy(v.lane, &lo, 8);
    memcpy(v.lane + 8, &hi, 8);
    return v;
}

K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    v16b v;
    memcpy(v.lane, p0, 4);
    memcpy(v.lane + 4, p1, 4);
    memcpy(v.lane + 8, p2, 4);
    memcpy(v.lane + 12, p3, 4);
    return v;
}

K3_INLINE v16b v16b_negate_where(v16b a, const uint8_t *bits2)
{
    for (int i = 0; i < 16; i++)
        if ((bits2[i / 8] >> (i % 8)) & 1) a.lane[i] = (uint8_t)-a.lane[i];
    return a;
}

#endif

/* An IQ2 grid point's 8 bytes as one little-endian word (a memcpy, so any
 * alignment). */
K3_INLINE uint64_t point8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The little-endian u32 at p: IQ2_XXS's and IQ3_XXS's sign-and-scale words. */
K3_INLINE uint32_t u32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The block decoders take the expanded grids besides quant_emit.h's
 * BLOCK_ARGS; each block is 256 weights, 8 groups of 32, each group two
 * 16-weight chunks h = 0, 1. */
#define IQ_BLOCK_ARGS const k3_iq_grids *grids, BLOCK_ARGS

/* IQ2_XXS: group g is the u32 of 4 point indices at 2 + 8g and the u32 of
 * 4 sign indices and the scale after it; chunk h is points 2h and 2h + 1. */
K3_INLINE void block_iq2_xxs(IQ_BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const uint8_t *indices = row + 2 + 8 * g;
        const uint32_t signs_scale = u32_le(indices + 4);
        const float scale = d * (0.5f + (float)(signs_scale >> 28)) * 0.25f;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t signs[2] = {k3_iq_signs_of(signs_scale >> (14 * h)),
                                      k3_iq_signs_of(signs_scale >> (14 * h + 7))};
            v16b magnitudes = v16b_from_u64x2(point8(grids->iq2_xxs[indices[2 * h]]),
                                              point8(grids->iq2_xxs[indices[2 * h + 1]]));
            emit_scaled(v16b_negate_where(magnitudes, signs), scale, c + 32 * g + 16 * h, WALK_PASS);
        }
    }
}

/* IQ2_XS: chunk h of group g is the u16 words 4g + 2h and 4g + 2h + 1
 * (9-bit point index, 7-bit sign index), scaled by nibble h of scale
 * byte g. */
K3_INLINE void block_iq2_xs(IQ_BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const float scale = d * (0.5f + (float)((row[66 + g] >> (4 * h)) & 0x0F)) * 0.25f;
            const uint8_t *words = row + 2 + 8 * g + 4 * h;
            const unsigned w0 = (unsigned)words[0] | (unsigned)words[1] << 8;
            const unsigned w1 = (unsigned)words[2] | (unsigned)words[3] << 8;
            const uint8_t signs[2] = {k3_iq_signs_of(w0 >> 9), k3_iq_signs_of(w1 >> 9)};
            v16b magnitudes = v16b_from_u64x2(point8(grids->iq2_xs[w0 & 511]), point8(grids->iq2_xs[w1 & 511]));
            emit_scaled(v16b_negate_where(magnitudes, signs), scale, c + 32 * g + 16 * h, WALK_PASS);
        }
    }
}

/* IQ2_S: chunk h of group g is points 4g + 2h and 4g + 2h + 1 (low index
 * byte at 2 + that, bits 8-9 from byte 66 + g), their two sign bytes at
 * 34 + 4g + 2h, scaled by nibble h of scale byte 74 + g. */
K3_INLINE void block_iq2_s(IQ_BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const unsigned high = row[66 + g];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const float scale = d * (0.5f + (float)((row[74 + g] >> (4 * h)) & 0x0F)) * 0.25f;
            const int p = 4 * g + 2 * h;
            const unsigned i0 = row[2 + p] | ((high >> (4 * h)) & 3) << 8;
            const unsigned i1 = row[3 + p] | ((high >> (4 * h + 2)) & 3) << 8;
            v16b magnitudes = v16b_from_u64x2(point8(grids->iq2_s[i0]), point8(grids->iq2_s[i1]));
            emit_scaled(v16b_negate_where(magnitudes, row + 34 + p), scale, c + 32 * g + 16 * h, WALK_PASS);
        }
    }
}

/* IQ3_XXS: chunk h of group g is the 4-weight points at index bytes
 * 2 + 8g + 4h .. +3, signed by sign indices 2h and 2h + 1 of the group's
 * u32 at 66 + 4g. */
K3_INLINE void block_iq3_xxs(IQ_BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const uint32_t signs_scale = u32_le(row + 66 + 4 * g);
        const float scale = d * (0.5f + (float)(signs_scale >> 28)) * 0.5f;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *indices = row + 2 + 8 * g + 4 * h;
            const uint8_t signs[2] = {k3_iq_signs_of(signs_scale >> (14 * h)),
                                      k3_iq_signs_of(signs_scale >> (14 * h + 7))};
            v16b magnitudes = v16b_from_u32x4(grids->iq3_xxs[indices[0]], grids->iq3_xxs[indices[1]],
                                              grids->iq3_xxs[indices[2]], grids->iq3_xxs[indices[3]]);
            emit_scaled(v16b_negate_where(magnitudes, signs), scale, c + 32 * g + 16 * h, WALK_PASS);
        }
    }
}

/* IQ3_S: chunk h of group g is the 4-weight points at low index bytes
 * 2 + 8g + 4h .. +3, bit 8 of point k's index bit 4h + k of byte 66 + g,
 * signed by bytes 74 + 4g + 2h and the next, scaled by d * (1 + 2 *
 * nibble g % 2 of byte 106 + g / 2). */
K3_INLINE void block_iq3_s(IQ_BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        const float scale = d * (float)(1 + 2 * ((row[106 + g / 2] >> (4 * (g % 2))) & 0x0F));
        const unsigned high = row[66 + g];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const uint8_t *low = row + 2 + 8 * g + 4 * h;
            const unsigned i0 = low[0] | ((high >> (4 * h)) & 1) << 8;
            const unsigned i1 = low[1] | ((high >> (4 * h + 1)) & 1) << 8;
            const unsigned i2 = low[2] | ((high >> (4 * h + 2)) & 1) << 8;
            const unsigned i3 = low[3] | ((high >> (4 * h + 3)) & 1) << 8;
            v16b magnitudes = v16b_from_u32x4(grids->iq3_s[i0], grids->iq3_s[i1], grids->iq3_s[i2], grids->iq3_s[i3]);
            emit_scaled(v16b_negate_where(magnitudes, row + 74 + 4 * g + 2 * h), scale, c + 32 * g + 16 * h,
                        WALK_PASS);
        }
    }
}

/* ROW_KERNELS (quant_emit.h) with the grids fetched once per row and
 * passed to every block: the dot product and the decode of a row of
 * 256-weight blocks of `bytes` bytes, under the names quant_iq.h exports. */
#define IQ_ROW_KERNELS(type, bytes) \
    float k3_##type##_dot_row(const uint8_t *row, int64_t cols, const float *x) \
    { \
        const k3_iq_grids *grids = k3_iq_grids_get(); \
        v8f acc0 = v8_zero(), acc1 = v8_zero(); \
        for (int64_t c = 0; c < cols; c += 256, row += bytes) \
            block_##type(grids, row, c, x, NULL, &acc0, &acc1); \
        return v8_hsum(v8_add(acc0, acc1)); \
    } \
    void k3_##type##_decode_row(const uint8_t *row, int64_t cols, float *out) \
    { \
        const k3_iq_grids *grids = k3_iq_grids_get(); \
        for (int64_t c = 0; c < cols; c += 256, row += bytes) \
            block_##type(grids, row, c, NULL, out, NULL, NULL); \
    }
IQ_ROW_KERNELS(iq2_xxs, 66)
IQ_ROW_KERNELS(iq2_xs, 74)
IQ_ROW_KERNELS(iq2_s, 82)
IQ_ROW_KERNELS(iq3_xxs, 98)
IQ_ROW_KERNELS(iq3_s, 110)
