/* quant_types.c - see quant_types.h: the type table and one scalar decoder
 * per ggml block format. Each decoder reads the block's fields from their
 * byte offsets (little-endian, no struct overlay, so no padding or alignment
 * question arises) and computes each weight with the fp32 operations of
 * llama.cpp's reference dequantization, in its order. */
#include <string.h>
#include "kernels.h"
#include "quant_grids.h"
#include "quant_iq1.h"
#include "quant_types.h"

/* A little-endian binary16 at p, as fp32 (exact). */
static float f16_at(const uint8_t *p)
{
    return k3_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

float k3_e8m0_half_to_f32(uint8_t x)
{
    /* 2^(x-128): for x >= 2 the float with exponent field x - 1; below that
     * the subnormals 2^-128 (bits 0x00200000) and 2^-127 (0x00400000). */
    uint32_t bits = x < 2 ? 0x00200000u << x : (uint32_t)(x - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* F32: the bytes are the floats. */
static void decode_f32(const uint8_t *src, int64_t n, float *out)
{
    memcpy(out, src, (size_t)n * sizeof(float));
}

/* F16: one binary16 per weight. */
static void decode_f16(const uint8_t *src, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) out[i] = f16_at(src + 2 * i);
}

/* BF16: one bfloat16 per weight. */
static void decode_bf16(const uint8_t *src, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = k3_bf16_to_f32((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
}

/* Q4_0, 18 bytes / 32 weights: f16 d, then 16 bytes whose low nibbles are
 * weights 0..15 and high nibbles weights 16..31; w = (nibble - 8) * d. */
static void decode_q4_0(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 18, out += 32) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2;
        for (int j = 0; j < 16; j++) {
            out[j] = (float)((qs[j] & 0x0F) - 8) * d;
            out[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q5_0, 22 bytes / 32 weights: f16 d, a 32-bit little-endian word of fifth
 * bits (bit j for weight j), 16 bytes of nibbles as in Q4_0;
 * w = (nibble | fifth bit << 4) - 16, times d. */
static void decode_q5_0(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 22, out += 32) {
        const float d = f16_at(src);
        const uint32_t high_bits = (uint32_t)src[2] | (uint32_t)src[3] << 8 |
                                   (uint32_t)src[4] << 16 | (uint32_t)src[5] << 24;
        const uint8_t *qs = src + 6;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0F) | (int)((high_bits >> j) & 1) << 4;
            int hi = (qs[j] >> 4) | (int)((high_bits >> (j + 16)) & 1) << 4;
            out[j] = (float)(lo - 16) * d;
            out[j + 16] = (float)(hi - 16) * d;
        }
    }
}

/* Q4_1, 20 bytes / 32 weights: f16 d, f16 m, 16 bytes of nibbles as in
 * Q4_0; w = q * d + m (the product rounded, then the sum). */
static void decode_q4_1(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 20, out += 32) {
        const float d = f16_at(src), m = f16_at(src + 2);
        const uint8_t *qs = src + 4;
        for (int j = 0; j < 16; j++) {
            const float lo = (float)(qs[j] & 0x0F) * d, hi = (float)(qs[j] >> 4) * d;
            out[j] = lo + m;
            out[j + 16] = hi + m;
        }
    }
}

/* Q5_1, 24 bytes / 32 weights: f16 d, f16 m, the fifth bits as in Q5_0,
 * 16 bytes of nibbles as in Q4_0; w = q * d + m, q in 0..31 (the fallback
 * of llama-quantize's Q5_K_M where rows are not a multiple of 256). */
static void decode_q5_1(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 24, out += 32) {
        const float d = f16_at(src), m = f16_at(src + 2);
        const uint32_t high_bits = (uint32_t)src[4] | (uint32_t)src[5] << 8 |
                                   (uint32_t)src[6] << 16 | (uint32_t)src[7] << 24;
        const uint8_t *qs = src + 8;
        for (int j = 0; j < 16; j++) {
            const int lo = (qs[j] & 0x0F) | (int)((high_bits >> j) & 1) << 4;
            const int hi = (qs[j] >> 4) | (int)((high_bits >> (j + 16)) & 1) << 4;
            const float lo_d = (float)lo * d, hi_d = (float)hi * d;
            out[j] = lo_d + m;
            out[j + 16] = hi_d + m;
        }
    }
}

/* Q8_0, 34 bytes / 32 weights: f16 d, 32 signed bytes; w = q * d. */
static void decode_q8_0(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 34, out += 32) {
        const float d = f16_at(src);
        for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)src[2 + j] * d;
    }
}

/* MXFP4, 17 bytes / 32 weights: an E8M0 byte, 16 bytes of E2M1 nibbles
 * (low nibbles weights 0..15, high nibbles 16..31 - not interleaved as in
 * compressed-tensors' MXFP4); w = doubled_E2M1[nibble] * 2^(e - 128). */
static void decode_mxfp4(const uint8_t *src, int64_t n_blocks, float *out)
{
    static const int8_t doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int64_t b = 0; b < n_blocks; b++, src += 17, out += 32) {
        const float d = k3_e8m0_half_to_f32(src[0]);
        const uint8_t *qs = src + 1;
        for (int j = 0; j < 16; j++) {
            out[j] = (float)doubled_e2m1[qs[j] & 0x0F] * d;
            out[j + 16] = (float)doubled_e2m1[qs[j] >> 4] * d;
        }
    }
}

/* Q2_K, 84 bytes / 256 weights: 16 scale bytes (low nibble scale, high
 * nibble min, one per 16 weights), 64 bytes of 2-bit quants, f16 d, f16 dmin.
 * Each half of 128 weights uses 32 quant bytes four times (shifts 0, 2, 4,
 * 6), each time as two runs of 16 with their own scale byte:
 * w = (d * scale) * q - (dmin * min). */
static void decode_q2_k(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 84) {
        const uint8_t *scales = src, *q = src + 16;
        const float d = f16_at(src + 80), dmin = f16_at(src + 82);
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int run = 0; run < 2; run++) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * (float)(sc & 0x0F), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *out++ = dl * (float)((q[l + 16 * run] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K, 110 bytes / 256 weights: 32 bytes of high bits (hmask), 64 bytes of
 * 2-bit quants, 12 bytes holding sixteen 6-bit scales, f16 d. Scale k's low
 * 4 bits are a nibble of bytes 0..7 (k < 8: low nibble of byte k, else the
 * high nibble of byte k - 8) and its top 2 bits are bits 2 * (k / 4) and up
 * of byte 8 + k % 4; the scale is that 6-bit number minus 32. The quants
 * walk as in Q2_K; pass p (0..3 in the first 128 weights, 4..7 in the
 * second, one per shift) reads bit p of
 * hmask[l], and a clear bit subtracts 4:
 * w = (d * scale) * (q - (bit ? 0 : 4)). */
static void decode_q3_k(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 110) {
        const uint8_t *hmask = src, *q = src + 32, *packed = src + 96;
        const float d_all = f16_at(src + 108);
        int scales[16];
        for (int k = 0; k < 16; k++) {
            int low4 = k < 8 ? packed[k] & 0x0F : packed[k - 8] >> 4;
            int high2 = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
            scales[k] = (low4 | high2 << 4) - 32;
        }
        int is = 0, pass = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, pass++) {
                for (int run = 0; run < 2; run++) {
                    const float dl = d_all * (float)scales[is++];
                    for (int l = 16 * run; l < 16 * run + 16; l++) {
                        int value = ((q[l] >> shift) & 3) - ((hmask[l] >> pass) & 1 ? 0 : 4);
                        *out++ = dl * (float)value;
                    }
                }
            }
        }
    }
}

/* The K-quants' 12 scale bytes: eight 6-bit scales and eight 6-bit mins.
 * Pairs 0..3 sit in the low 6 bits of bytes j (scale) and j + 4 (min);
 * pairs 4..7 take their low 4 bits from byte j + 4's nibbles and their top
 * 2 bits from the top bits of bytes j - 4 (scale) and j (min). */
static void k_scale_min(int j, const uint8_t *q, uint8_t *scale, uint8_t *min)
{
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *min = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K, 144 bytes / 256 weights: f16 d, f16 dmin, 12 scale bytes, 128 bytes
 * of nibbles. Each 64 weights use 32 bytes: low nibbles with scale pair
 * 2i, then high nibbles with pair 2i + 1; w = (d * scale) * q - (dmin * min). */
static void decode_q4_k(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 144) {
        const float d = f16_at(src), dmin = f16_at(src + 2);
        const uint8_t *scales = src + 4, *q = src + 16;
        for (int i = 0; i < 4; i++, q += 32) {
            uint8_t sc, m;
            k_scale_min(2 * i, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k_scale_min(2 * i + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *out++ = d1 * (float)(q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; l++) *out++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K, 176 bytes / 256 weights: Q4_K's d, dmin and scales, 32 bytes of
 * fifth bits (qh), 128 bytes of nibbles. Group 2i's fifth bit is bit 2i of
 * qh[l], group 2i + 1's bit 2i + 1; it adds 16 to the nibble. */
static void decode_q5_k(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 176) {
        const float d = f16_at(src), dmin = f16_at(src + 2);
        const uint8_t *scales = src + 4, *qh = src + 16, *ql = src + 48;
        for (int i = 0; i < 4; i++, ql += 32) {
            uint8_t sc, m;
            k_scale_min(2 * i, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k_scale_min(2 * i + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *out++ = d1 * (float)((ql[l] & 0x0F) + ((qh[l] >> (2 * i)) & 1) * 16) - m1;
            for (int l = 0; l < 32; l++)
                *out++ = d2 * (float)((ql[l] >> 4) + ((qh[l] >> (2 * i + 1)) & 1) * 16) - m2;
        }
    }
}

/* Q6_K, 210 bytes / 256 weights: 128 bytes of low nibbles (ql), 64 bytes of
 * high 2-bit pairs (qh), 16 signed scales (one per 16 weights), f16 d. Each
 * half of 128 weights uses 64 ql, 32 qh and 8 scales: weight l + 32k
 * (k = 0..3) takes ql[l] / ql[l + 32] low or high nibble and bits 2k of
 * qh[l]; w = (d * scale) * (q - 32). */
static void decode_q6_k(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 210) {
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *sc = (const int8_t *)(src + 192);
        const float d = f16_at(src + 208);
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, out += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                int q1 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                out[l] = d * (float)sc[is] * (float)q1;
                out[l + 32] = d * (float)sc[is + 2] * (float)q2;
                out[l + 64] = d * (float)sc[is + 4] * (float)q3;
                out[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* The 16 non-uniform levels of IQ4_NL and IQ4_XS, indexed by a nibble. */
static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* IQ4_NL, 18 bytes / 32 weights: f16 d, 16 bytes of nibbles as in Q4_0;
 * w = d * level[nibble]. */
static void decode_iq4_nl(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 18, out += 32) {
        const float d = f16_at(src);
        const uint8_t *qs = src + 2;
        for (int j = 0; j < 16; j++) {
            out[j] = d * (float)iq4_levels[qs[j] & 0x0F];
            out[j + 16] = d * (float)iq4_levels[qs[j] >> 4];
        }
    }
}

/* IQ4_XS, 136 bytes / 256 weights: f16 d, a u16 of high scale bits, 4
 * bytes of low scale nibbles, 128 bytes of nibbles. Group g (32 weights,
 * 16 bytes of nibbles as in Q4_0) has the 6-bit scale (nibble g % 2 of
 * byte g / 2) | (bits 2g of the u16) << 4; w = (d * (scale - 32)) *
 * level[nibble]. */
static void decode_iq4_xs(const uint8_t *src, int64_t n_blocks, float *out)
{
    for (int64_t b = 0; b < n_blocks; b++, src += 136) {
        const float d = f16_at(src);
        const unsigned scales_high = (unsigned)src[2] | (unsigned)src[3] << 8;
        const uint8_t *scales_low = src + 4, *qs = src + 8;
        for (int g = 0; g < 8; g++, qs += 16, out += 32) {
            int scale = ((scales_low[g / 2] >> (4 * (g % 2))) & 0x0F) | (int)((scales_high >> (2 * g)) & 3) << 4;
            const float dl = d * (float)(scale - 32);
            for (int j = 0; j < 16; j++) {
                out[j] = dl * (float)iq4_levels[qs[j] & 0x0F];
                out[j + 16] = dl * (float)iq4_levels[qs[j] >> 4];
            }
        }
    }
}

/* A little-endian u32 at p. */
static uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The IQ2/IQ3 types build each group of 8 weights from grid magnitudes
 * (quant_grids.h) and 8 sign bits (bit j set: weight j negative):
 * w = -(scale * magnitude) or +(scale * magnitude), the product rounded
 * once. */
static void emit_signed_8(const uint8_t *magnitudes, uint8_t signs, float scale, float *out)
{
    for (int j = 0; j < 8; j++) {
        const float w = scale * (float)magnitudes[j];
        out[j] = (signs >> j) & 1 ? -w : w;
    }
}

/* IQ2_XXS, 66 bytes / 256 weights: f16 d, then per 32 weights two u32
 * words: the first is four 8-bit indices into the 256-point IQ2_XXS grid
 * (8 weights each), the second four 7-bit sign indices (bits 7l..7l+6)
 * and a 4-bit scale s in bits 28..31; scale = (d * (0.5 + s)) * 0.25. */
static void decode_iq2_xxs(const uint8_t *src, int64_t n_blocks, float *out)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    for (int64_t b = 0; b < n_blocks; b++, src += 66) {
        const float d = f16_at(src);
        for (int g = 0; g < 8; g++) {
            const uint8_t *indices = src + 2 + 8 * g;
            const uint32_t signs_scale = u32_at(indices + 4);
            const float scale = d * (0.5f + (float)(signs_scale >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, out += 8)
                emit_signed_8(grids->iq2_xxs[indices[l]], k3_iq_signs_of(signs_scale >> (7 * l)), scale, out);
        }
    }
}

/* IQ2_XS, 74 bytes / 256 weights: f16 d, 32 u16 (per 8 weights: a 9-bit
 * index into the 512-point IQ2_XS grid, then a 7-bit sign index), 8 scale
 * bytes (per 32 weights: the low nibble scales the first 16, the high
 * nibble the last 16); scale = (d * (0.5 + s)) * 0.25. */
static void decode_iq2_xs(const uint8_t *src, int64_t n_blocks, float *out)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    for (int64_t b = 0; b < n_blocks; b++, src += 74) {
        const float d = f16_at(src);
        for (int g = 0; g < 8; g++) {
            const uint8_t scales = src[66 + g];
            const float scale_lo = d * (0.5f + (float)(scales & 0x0F)) * 0.25f;
            const float scale_hi = d * (0.5f + (float)(scales >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, out += 8) {
                const unsigned word = (unsigned)src[2 + 8 * g + 2 * l] | (unsigned)src[3 + 8 * g + 2 * l] << 8;
                emit_signed_8(grids->iq2_xs[word & 511], k3_iq_signs_of(word >> 9), l < 2 ? scale_lo : scale_hi, out);
            }
        }
    }
}

/* IQ2_S, 82 bytes / 256 weights: f16 d, 32 bytes of low index bits, 32
 * sign bytes (one per 8 weights, the bits themselves), 8 bytes of high
 * index bits (per 32 weights: bits 2l..2l+1 are bits 8-9 of group l's
 * 10-bit index into the 1024-point IQ2_S grid), 8 scale bytes as in
 * IQ2_XS. */
static void decode_iq2_s(const uint8_t *src, int64_t n_blocks, float *out)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    for (int64_t b = 0; b < n_blocks; b++, src += 82) {
        const float d = f16_at(src);
        const uint8_t *low = src + 2, *signs = src + 34, *high = src + 66, *scales = src + 74;
        for (int g = 0; g < 8; g++) {
            const float scale_lo = d * (0.5f + (float)(scales[g] & 0x0F)) * 0.25f;
            const float scale_hi = d * (0.5f + (float)(scales[g] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, out += 8) {
                const unsigned index = low[4 * g + l] | ((unsigned)(high[g] >> (2 * l)) & 3) << 8;
                emit_signed_8(grids->iq2_s[index], signs[4 * g + l], l < 2 ? scale_lo : scale_hi, out);
            }
        }
    }
}

/* IQ3_XXS, 98 bytes / 256 weights: f16 d, 64 bytes of 8-bit indices into
 * the 256-point IQ3_XXS grid (4 weights each), then per 32 weights a u32:
 * four 7-bit sign indices (one per 8 weights) and a 4-bit scale s in bits
 * 28..31; scale = (d * (0.5 + s)) * 0.5. */
static void decode_iq3_xxs(const uint8_t *src, int64_t n_blocks, float *out)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    for (int64_t b = 0; b < n_blocks; b++, src += 98) {
        const float d = f16_at(src);
        for (int g = 0; g < 8; g++) {
            const uint32_t signs_scale = u32_at(src + 66 + 4 * g);
            const float scale = d * (0.5f + (float)(signs_scale >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, out += 8) {
                uint8_t magnitudes[8];
                memcpy(magnitudes, grids->iq3_xxs[src[2 + 8 * g + 2 * l]], 4);
                memcpy(magnitudes + 4, grids->iq3_xxs[src[3 + 8 * g + 2 * l]], 4);
                emit_signed_8(magnitudes, k3_iq_signs_of(signs_scale >> (7 * l)), scale, out);
            }
        }
    }
}

/* IQ3_S, 110 bytes / 256 weights: f16 d, 64 bytes of low index bits, 8
 * bytes of high index bits (bit k of byte g is bit 8 of the index of
 * weights 32g + 4k..+3, into the 512-point IQ3_S grid), 32 sign bytes (one
 * per 8 weights), 4 scale bytes (per 64 weights: the low nibble scales the
 * first 32, the high nibble the last 32); scale = d * (1 + 2s). */
static void decode_iq3_s(const uint8_t *src, int64_t n_blocks, float *out)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    for (int64_t b = 0; b < n_blocks; b++, src += 110) {
        const float d = f16_at(src);
        const uint8_t *low = src + 2, *high = src + 66, *signs = src + 74, *scales = src + 106;
        for (int g = 0; g < 8; g++) {
            const float scale = d * (float)(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 0x0F));
            for (int l = 0; l < 4; l++, out += 8) {
                uint8_t magnitudes[8];
                for (int k = 0; k < 2; k++) {
                    const unsigned index = low[8 * g + 2 * l + k] | ((unsigned)(high[g] >> (2 * l + k)) & 1) << 8;
                    memcpy(magnitudes + 4 * k, grids->iq3_s[index], 4);
                }
                emit_signed_8(magnitudes, signs[4 * g + l], scale, out);
            }
        }
    }
}

/* F32/F16/BF16 decode per element: their "block" is one weight. */
static const k3_quant_type quant_table[] = {
    {"F32", K3_GGML_F32, 1, 4, decode_f32},
    {"F16", K3_GGML_F16, 1, 2, decode_f16},
    {"BF16", K3_GGML_BF16, 1, 2, decode_bf16},
    {"Q8_0", K3_GGML_Q8_0, 32, 34, decode_q8_0},
    {"Q4_0", K3_GGML_Q4_0, 32, 18, decode_q4_0},
    {"Q5_0", K3_GGML_Q5_0, 32, 22, decode_q5_0},
    {"Q4_1", K3_GGML_Q4_1, 32, 20, decode_q4_1},
    {"Q5_1", K3_GGML_Q5_1, 32, 24, decode_q5_1},
    {"Q2_K", K3_GGML_Q2_K, 256, 84, decode_q2_k},
    {"Q3_K", K3_GGML_Q3_K, 256, 110, decode_q3_k},
    {"Q4_K", K3_GGML_Q4_K, 256, 144, decode_q4_k},
    {"Q5_K", K3_GGML_Q5_K, 256, 176, decode_q5_k},
    {"Q6_K", K3_GGML_Q6_K, 256, 210, decode_q6_k},
    {"MXFP4", K3_GGML_MXFP4, 32, 17, decode_mxfp4},
    {"IQ4_NL", K3_GGML_IQ4_NL, 32, 18, decode_iq4_nl},
    {"IQ4_XS", K3_GGML_IQ4_XS, 256, 136, decode_iq4_xs},
    {"IQ2_XXS", K3_GGML_IQ2_XXS, 256, 66, decode_iq2_xxs},
    {"IQ2_XS", K3_GGML_IQ2_XS, 256, 74, decode_iq2_xs},
    {"IQ2_S", K3_GGML_IQ2_S, 256, 82, decode_iq2_s},
    {"IQ3_XXS", K3_GGML_IQ3_XXS, 256, 98, decode_iq3_xxs},
    {"IQ3_S", K3_GGML_IQ3_S, 256, 110, decode_iq3_s},
    {"IQ1_S", K3_GGML_IQ1_S, 256, K3_IQ1_S_BLOCK_BYTES, k3_decode_iq1_s},   /* quant_iq1.c */
    {"IQ1_M", K3_GGML_IQ1_M, 256, K3_IQ1_M_BLOCK_BYTES, k3_decode_iq1_m},
};
#define QUANT_TABLE_LEN ((int)(sizeof quant_table / sizeof quant_table[0]))

int k3_quant_type_count(void) { return QUANT_TABLE_LEN; }

const k3_quant_type *k3_quant_type_at(int i)
{
    return i >= 0 && i < QUANT_TABLE_LEN ? &quant_table[i] : NULL;
}

const k3_quant_type *k3_quant_type_by_id(uint32_t ggml_id)
{
    for (int i = 0; i < QUANT_TABLE_LEN; i++)
        if (quant_table[i].ggml_id == ggml_id) return &quant_table[i];
    return NULL;
}

const k3_quant_type *k3_quant_type_by_name(const char *name)
{
    for (int i = 0; i < QUANT_TABLE_LEN; i++)
        if (!strcmp(quant_table[i].name, name)) return &quant_table[i];
    return NULL;
}

/* llama.cpp's names by ggml type id, gaps where ids were retired. */
const char *k3_ggml_type_name(uint32_t ggml_id)
{
    static const char *const names[] = {
        "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
        "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
        "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
        "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4",
        "NVFP4", "Q1_0", "Q2_0"};
    return ggml_id < sizeof names / sizeof names[0] ? names[ggml_id] : NULL;
}

int k3_quant_bytes(const k3_quant_type *t, uint64_t n_elems, uint64_t *bytes)
{
    if (n_elems % t->block_elems) return -1;
    uint64_t blocks = n_elems / t->block_elems;
    if (blocks > (UINT64_MAX >> 1) / t->block_bytes) return -1;
    *bytes = blocks * t->block_bytes;
    return 0;
}

void k3_quant_decode_scalar(const k3_quant_type *t, const void *src, int64_t n_elems, float *out)
{
    t->decode_scalar((const uint8_t *)src, n_elems / t->block_elems, out);
}
