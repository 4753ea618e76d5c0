/* kernels_generic.h - the portable back end of the kernels (plain C11).
 *
 * The same vocabulary as kernels_x86.h (see there) with an 8-lane v8f held
 * in an array: every lane operation is the IEEE operation the SIMD back ends
 * perform (fmaf is the fused multiply-add, rounded once), in the same
 * canonical order, so an ARCH=generic build gives the same bits as the
 * x86-64-v3 and aarch64 builds on any C11 machine - only slower. Decoders
 * reuse the bit-exact scalar converters of convert.c. Included only through
 * kernels_arch.h. */
#ifndef K3_KERNELS_GENERIC_H
#define K3_KERNELS_GENERIC_H

#include <math.h>
#include <stdint.h>
#include "mxfp4.h"
#include <string.h>

#define K3_KERNELS_NAME "generic (portable C)"

typedef struct {
    float lane[8];
} v8f;

/* All lanes +0. */
K3_INLINE v8f v8_zero(void)
{
    v8f v;
    for (int i = 0; i < 8; i++)
        v.lane[i] = 0.0f;
    return v;
}

/* All lanes f. */
K3_INLINE v8f v8_set1(float f)
{
    v8f v;
    for (int i = 0; i < 8; i++)
        v.lane[i] = f;
    return v;
}

/* 8 floats from any address. */
K3_INLINE v8f v8_loadu(const float *p)
{
    v8f v;
    memcpy(v.lane, p, sizeof v.lane);
    return v;
}

/* Same as v8_loadu; kept apart for the x86 back end's aligned loads. */
K3_INLINE v8f v8_load_aligned(const float *p) { return v8_loadu(p); }

/* Store 8 floats to any address. */
K3_INLINE void v8_storeu(float *p, v8f v)
{
    memcpy(p, v.lane, sizeof v.lane);
}

/* Lane-wise a + b. */
K3_INLINE v8f v8_add(v8f a, v8f b)
{
    for (int i = 0; i < 8; i++)
        a.lane[i] += b.lane[i];
    return a;
}

/* Lane-wise a * b (rounded; the build keeps the compiler from contracting a
 * product and a sum into an fma: ISO C mode, -ffp-contract=off). */
K3_INLINE v8f v8_mul(v8f a, v8f b)
{
    for (int i = 0; i < 8; i++)
        a.lane[i] *= b.lane[i];
    return a;
}

/* v unchanged (kernels_x86.h needs this to keep a broadcast a vector). */
K3_INLINE v8f v8_keep(v8f v) { return v; }

/* Lane-wise a * b + c rounded once. */
K3_INLINE v8f v8_fma(v8f a, v8f b, v8f c)
{
    for (int i = 0; i < 8; i++)
        c.lane[i] = fmaf(a.lane[i], b.lane[i], c.lane[i]);
    return c;
}

/* The canonical reduction: lane i + lane i+4, then i + i+2, then 0 + 1. */
K3_INLINE float v8_hsum(v8f v)
{
    float s[4], t[2];
    for (int i = 0; i < 4; i++)
        s[i] = v.lane[i] + v.lane[i + 4];
    for (int i = 0; i < 2; i++)
        t[i] = s[i] + s[i + 2];
    return t[0] + t[1];
}

/* A register-allocation hint for the x86 back end; nothing to do here. */
K3_INLINE void v8_pin_in_register(v8f *a, v8f *b)
{
    (void)a;
    (void)b;
}

/* 8 bf16 -> 8 fp32 (exact). */
K3_INLINE v8f v8_from_bf16(const void *p)
{
    uint16_t h[8];
    v8f v;
    memcpy(h, p, sizeof h);
    for (int i = 0; i < 8; i++)
        v.lane[i] = k3_bf16_to_f32(h[i]);
    return v;
}

/* 8 f16 -> 8 fp32 (exact). */
K3_INLINE v8f v8_from_f16(const void *p)
{
    uint16_t h[8];
    v8f v;
    memcpy(h, p, sizeof h);
    for (int i = 0; i < 8; i++)
        v.lane[i] = k3_f16_to_f32(h[i]);
    return v;
}

/* 16 e4m3 bytes -> e4m3 / 256 as fp32 (exact: a power-of-two scaling of a
 * 4-bit-mantissa value stays far inside fp32's range). NaN codes always
 * decode to NaN here, so check_nan changes nothing. */
K3_INLINE void v16_from_e4m3_div256(const void *p, int check_nan, v8f *lo, v8f *hi)
{
    const unsigned char *b = (const unsigned char *)p;
    (void)check_nan;
    for (int i = 0; i < 8; i++) {
        lo->lane[i] = k3_e4m3_to_f32(b[i]) * 0x1p-8f;
        hi->lane[i] = k3_e4m3_to_f32(b[i + 8]) * 0x1p-8f;
    }
}

/* True if any of the n_bytes fp8 codes at p is a NaN (S.1111.111). */
K3_INLINE int v16_e4m3_has_nan(const unsigned char *p, int64_t n_bytes)
{
    for (int64_t i = 0; i < n_bytes; i++)
        if ((p[i] & 0x7F) == 0x7F)
            return 1;
    return 0;
}

/* One MXFP4 group: 16 bytes of nibbles (low nibble = even column) -> four
 * vectors of doubled E2M1 values (exact small integers) for columns 0-7,
 * 8-15, 16-23, 24-31. */
K3_INLINE void v32_from_mxfp4_doubled(const uint8_t *bytes16, v8f f[4])
{
    static const float doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int c = 0; c < 32; c++) {
        uint8_t byte = bytes16[c / 2];
        f[c / 8].lane[c % 8] = doubled_e2m1[(c & 1) ? byte >> 4 : byte & 0x0F];
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
