/* quant_quantize.c - see quant_quantize.h: one quantizer per block format,
 * each the reference algorithm of llama.cpp's ggml-quants.c restated.
 *
 * What makes the bytes equal, not merely close:
 * - every arithmetic step is an fp32 operation, in llama.cpp's order (an
 *   int meeting a float is converted to float first, as C does there), and
 *   the build's -std=c11 contracts no multiply-add into an FMA;
 * - the three roundings llama.cpp uses are kept apart: the K-quants'
 *   nearest_int (add 1.5 * 2^23 and keep the low mantissa bits: round half
 *   to even for |v| < 2^22), Q8_0's roundf (half away from zero), and the
 *   truncating float-to-integer casts of Q4_0, Q5_0 and MXFP4;
 * - fp16 scales are rounded to nearest even (k3_f32_to_f16), as ggml's
 *   fp32-to-fp16 conversion rounds them, and read back before use where
 *   llama.cpp reads them back.
 * Each block is written completely (no byte left from an earlier content of
 * dst). */
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "quant_quantize.h"

/* GROUP_MAX_EPS of ggml-quants.c: a group whose largest magnitude is below
 * this is all zeros. */
#define ZERO_GROUP_EPS 1e-15f

/* llama.cpp's nearest_int: v + 1.5 * 2^23 rounds v to an integer in the
 * float's low mantissa bits (round half to even; exact for |v| < 2^22, the
 * only range the algorithms produce). Written with memcpy, so defined for
 * every finite v. */
static int nearest_int(float v)
{
    float shifted = v + 12582912.f;
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* The C cast (int8_t)v / (uint8_t)v llama.cpp applies to a float, made
 * defined: truncate toward zero to 32 bits and keep the low byte, which is
 * what its x86-64 build does (cvttss2si), including for the values C leaves
 * undefined: a NaN, an infinity or a value beyond 32 bits becomes INT32_MIN,
 * low byte 0. Those arise only in blocks whose magnitudes are below 2^-121,
 * where 1 / scale overflows; the block then decodes to zeros. Returns the
 * low byte as 0..255. */
static unsigned low_byte_of_trunc(float v)
{
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
    return (unsigned)(uint32_t)(int32_t)v & 0xFFu;
}

/* The same low byte read as a signed 8-bit number (the (int8_t) cast). */
static int int8_of_trunc(float v)
{
    return (int)((low_byte_of_trunc(v) ^ 0x80u)) - 0x80;
}

/* Store an fp16 little-endian at p. */
static void put_f16(uint8_t *p, float f)
{
    uint16_t h = k3_f32_to_f16(f);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

/* An fp16 little-endian at p, as fp32 (exact). */
static float get_f16(const uint8_t *p)
{
    return k3_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

/* ------------------------------------------------------------ 32-weight types */

/* Q8_0: d = amax / 127 (stored fp16), q = roundf(x * (1 / d)) with the fp32
 * d, not the stored one. */
static void quantize_q8_0(const float *x, int64_t n_blocks, uint8_t *y)
{
    for (int64_t b = 0; b < n_blocks; b++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < 32; j++) y[2 + j] = (uint8_t)low_byte_of_trunc(roundf(x[j] * id));
    }
}

/* The weight of largest magnitude in a block, signed (the first one when
 * several tie), as Q4_0 and Q5_0 choose it. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* Q4_0: d = max / -8 from the signed extreme (which lands on level 0 = -8),
 * q = min(15, trunc(x / d + 8.5)), weight j in the low nibble of byte j and
 * weight j + 16 in its high nibble. */
static void quantize_q4_0(const float *x, int64_t n_blocks, uint8_t *y)
{
    for (int64_t b = 0; b < n_blocks; b++, x += 32, y += 18) {
        const float d = signed_absmax(x, 32) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < 16; j++) {
            int lo = int8_of_trunc(x[j] * id + 8.5f), hi = int8_of_trunc(x[j + 16] * id + 8.5f);
            uint8_t qlo = (uint8_t)(lo < 15 ? lo : 15), qhi = (uint8_t)(hi < 15 ? hi : 15);
            y[2 + j] = (uint8_t)(qlo | (qhi << 4));
        }
    }
}

/* Q5_0: as Q4_0 with d = max / -16 and q = min(31, trunc(x / d + 16.5));
 * the low four bits go in the nibbles, the fifth bit of weight j in bit j of
 * the 32-bit word after d. */
static void quantize_q5_0(const float *x, int64_t n_blocks, uint8_t *y)
{
    for (int64_t b = 0; b < n_blocks; b++, x += 32, y += 22) {
        const float d = signed_absmax(x, 32) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_f16(y, d);
        uint32_t fifth_bits = 0;
        for (int j = 0; j < 16; j++) {
            int lo = int8_of_trunc(x[j] * id + 16.5f), hi = int8_of_trunc(x[j + 16] * id + 16.5f);
            uint8_t qlo = (uint8_t)(lo < 31 ? lo : 31), qhi = (uint8_t)(hi < 31 ? hi : 31);
            y[6 + j] = (uint8_t)((qlo & 0x0F) | ((qhi & 0x0F) << 4));
            fifth_bits |= (uint32_t)((qlo & 0x10u) >> 4) << j;
            fifth_bits |= (uint32_t)((qhi & 0x10u) >> 4) << (j + 16);
        }
        for (int k = 0; k < 4; k++) y[2 + k] = (uint8_t)(fifth_bits >> (8 * k));
    }
}

/* MXFP4: the shared exponent e = floor(log2(amax)) - 2 + 127 (so amax lands
 * at 4..8 times the scale 2^(e-128), within the doubled E2M1 levels' top 12),
 * then each weight takes the level whose value times the scale is nearest,
 * the first such level on a tie. log2f is the C library's, as in llama.cpp. */
static void quantize_mxfp4(const float *x, int64_t n_blocks, uint8_t *y)
{
    static const int8_t doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int64_t b = 0; b < n_blocks; b++, x += 32, y += 17) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)low_byte_of_trunc(floorf(log2f(amax)) - 2.0f + 127.0f) : 0;
        const float scale = k3_e8m0_half_to_f32(e);
        y[0] = e;
        for (int j = 0; j < 32; j++) {
            int best = 0;
            float best_err = fabsf((float)doubled_e2m1[0] * scale - x[j]);
            for (int i = 1; i < 16; i++) {
                float err = fabsf((float)doubled_e2m1[i] * scale - x[j]);
                if (err < best_err) {
                    best = i;
                    best_err = err;
                }
            }
            if (j < 16) y[1 + j] = (uint8_t)best;
            else y[1 + j - 16] |= (uint8_t)(best << 4);
        }
    }
}

/* ------------------------------------------------------------- the K-quants */

/* llama.cpp's make_qkx2_quants: quantize n weights to levels 0..nmax as
 * scale * L - min (min >= 0 returned in *min_out), searching for the scale
 * and offset that minimise the weighted squared error. A first guess maps
 * [min(x, 0), max(x)] onto the levels; then for nstep + 1 stretches of the
 * level count (rmin + rdelta * is extra levels) the weights are rounded
 * again and the least-squares scale and offset of that rounding computed
 * (an offset above 0 is clamped to 0 with the scale refit); the rounding of
 * the lowest error wins. Returns the scale; L gets the levels. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *min_out,
                           float rmin, float rdelta, int nstep)
{
    uint8_t trial[32];
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *min_out = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * (float)L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            trial[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)trial[i] + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, trial, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

/* The K-quants' 12 scale bytes from eight 6-bit scales and mins: pairs 0..3
 * in the low 6 bits of bytes j and j + 4; pairs 4..7 as nibbles of byte
 * j + 4 with their top two bits in the top bits of bytes j - 4 and j. */
static void pack_scale_min(const uint8_t ls[8], const uint8_t lm[8], uint8_t *scales)
{
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Scale pair j back from the 12 bytes (the inverse of pack_scale_min). */
static void unpack_scale_min(int j, const uint8_t *q, uint8_t *scale, uint8_t *min)
{
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *min = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The common part of Q4_K and Q5_K for one block of 256: each group of 32
 * is fitted by fit_scale_min with weights sqrt(mean x^2) + |x|; the eight
 * scales and mins become 6-bit multiples of d = max scale / 63 and
 * dmin = max min / 63 (stored fp16 at out_d, out_d + 2; the 12 scale bytes
 * at out_scales); then each weight is rounded again against its group's
 * stored scale and min (a group whose stored scale is 0 keeps the fit's
 * levels). L gets the 256 levels 0..nmax. */
static void k_quant_block(const float *x, int nmax, float rmin, float rdelta, int nstep, uint8_t *out_d,
                          uint8_t *out_scales, uint8_t L[256])
{
    float scales[8], mins[8], weights[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        /* llama.cpp keeps the int in a uint8_t before clamping: same wrap */
        uint8_t s = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t m = (uint8_t)nearest_int(inv_min * mins[j]);
        ls[j] = s < 63 ? s : 63;
        lm[j] = m < 63 ? m : 63;
    }
    pack_scale_min(ls, lm, out_scales);
    put_f16(out_d, max_scale / 63.f);
    put_f16(out_d + 2, max_min / 63.f);
    const float d_all = get_f16(out_d), dmin_all = get_f16(out_d + 2);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        unpack_scale_min(j, out_scales, &sc, &m);
        const float d = d_all * (float)sc;
        if (d == 0.0f) continue;
        const float dm = dmin_all * (float)m;
        for (int i = 0; i < 32; i++) {
            int l = nearest_int((x[32 * j + i] + dm) / d);
            L[32 * j + i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        }
    }
}

/* Q4_K, 144 bytes / 256: d, dmin, 12 scale bytes, then 128 bytes where each
 * 64 weights share 32 bytes: the first 32 in low nibbles, the next 32 high. */
static void quantize_q4_k(const float *x, int64_t n_blocks, uint8_t *y)
{
    uint8_t L[256];
    for (int64_t b = 0; b < n_blocks; b++, x += 256, y += 144) {
        k_quant_block(x, 15, -1.f, 0.1f, 20, y, y + 4, L);
        uint8_t *q = y + 16;
        for (int j = 0; j < 256; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* Q5_K, 176 bytes / 256: as Q4_K with levels 0..31, the fifth bits in 32
 * bytes qh (weight n + l of the 64-weight run n / 64 = r sets bit 2r of
 * qh[l] for the first 32, bit 2r + 1 for the next 32), the nibbles after. */
static void quantize_q5_k(const float *x, int64_t n_blocks, uint8_t *y)
{
    uint8_t L[256];
    for (int64_t b = 0; b < n_blocks; b++, x += 256, y += 176) {
        k_quant_block(x, 31, -0.5f, 0.1f, 15, y, y + 4, L);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, 32);
        for (int n = 0, r = 0; n < 256; n += 64, r++, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= (uint8_t)(1u << (2 * r));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= (uint8_t)(2u << (2 * r));
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

/* llama.cpp's make_qx_quants with its rmse_type 1 and no importance
 * weights (what Q6_K uses): quantize n weights to signed levels
 * -nmax..nmax-1 (stored + nmax in L) under one scale, weighting each
 * weight's error by x^2. The first scale maps the signed extreme to -nmax;
 * its least-squares refit is kept unless one of 18 other level counts
 * (nmax + 0.1 * is, is = -9..9 but 0) gives a larger sumlx^2 / suml2.
 * Returns the scale (0 and all-zero L for a group below ZERO_GROUP_EPS). */
static float fit_scale_signed(int n, int nmax, const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < ZERO_GROUP_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + (l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q6_K, 210 bytes / 256: sixteen groups of 16 fitted by fit_scale_signed
 * (levels -32..31); d = (the signed scale of largest magnitude) / -128
 * stored fp16, each group's scale an int8 nearest(scale / d) capped at 127;
 * then each weight re-rounded against d * its int8 scale (a group whose
 * product is 0 keeps the fit's levels). Layout: 128 bytes of low nibbles,
 * 64 bytes of 2-bit high parts, 16 scale bytes, d. In each half of 128
 * weights, weight l + 32k (k = 0..3) goes to ql[l] (k = 0, 2: low, high
 * nibble) or ql[l + 32] (k = 1, 3) and bits 2k of qh[l]. */
static void quantize_q6_k(const float *x, int64_t n_blocks, uint8_t *y)
{
    int8_t L[256];
    float scales[16];
    for (int64_t b = 0; b < n_blocks; b++, x += 256, y += 210) {
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_signed(16, 32, x + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < ZERO_GROUP_EPS) {
            memset(y, 0, 210);
            put_f16(y + 208, 0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        put_f16(y + 208, 1 / iscale);
        int8_t *sc = (int8_t *)(y + 192);
        for (int g = 0; g < 16; g++) {
            int s = nearest_int(iscale * scales[g]);
            y[192 + g] = (uint8_t)(s < 127 ? s : 127);   /* -128..127 as a byte */
        }
        const float d_all = get_f16(y + 208);
        for (int g = 0; g < 16; g++) {
            float d = d_all * (float)sc[g];
            if (d == 0.0f) continue;
            for (int i = 0; i < 16; i++) {
                int l = nearest_int(x[16 * g + i] / d);
                l = l < -32 ? -32 : l > 31 ? 31 : l;
                L[16 * g + i] = (int8_t)(l + 32);
            }
        }
        uint8_t *ql = y, *qh = y + 128;
        for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t *lv = (const uint8_t *)L + j + l;
                ql[l] = (uint8_t)((lv[0] & 0x0F) | ((lv[64] & 0x0F) << 4));
                ql[l + 32] = (uint8_t)((lv[32] & 0x0F) | ((lv[96] & 0x0F) << 4));
                qh[l] = (uint8_t)((lv[0] >> 4) | ((lv[32] >> 4) << 2) | ((lv[64] >> 4) << 4) | ((lv[96] >> 4) << 6));
            }
        }
    }
}

/* ------------------------------------------------------------------ table */

typedef void (*quantize_fn)(const float *x, int64_t n_blocks, uint8_t *y);

/* The quantizer of a ggml type id, or NULL when k3 does not write it. */
static quantize_fn quantizer_of(uint32_t ggml_id)
{
    switch (ggml_id) {
    case K3_GGML_Q8_0: return quantize_q8_0;
    case K3_GGML_Q4_0: return quantize_q4_0;
    case K3_GGML_Q5_0: return quantize_q5_0;
    case K3_GGML_MXFP4: return quantize_mxfp4;
    case K3_GGML_Q4_K: return quantize_q4_k;
    case K3_GGML_Q5_K: return quantize_q5_k;
    case K3_GGML_Q6_K: return quantize_q6_k;
    default: return NULL;
    }
}

int k3_quant_can_quantize(const k3_quant_type *t)
{
    return t && quantizer_of(t->ggml_id) != NULL;
}

int k3_quant_quantize(const k3_quant_type *t, const float *src, int64_t n_elems, void *dst)
{
    quantize_fn fn = t ? quantizer_of(t->ggml_id) : NULL;
    if (!fn || n_elems < 0 || n_elems % t->block_elems) return -1;
    fn(src, n_elems / t->block_elems, (uint8_t *)dst);
    return 0;
}
