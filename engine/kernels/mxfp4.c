/* mxfp4.c - see mxfp4.h. The vector decoder (v32_from_mxfp4_doubled in the
 * back end chosen by kernels_arch.h: pshufb on x86, tbl on NEON, a table in
 * plain C) looks up all 32 nibbles of a group as doubled E2M1 values
 * (integers -12..12), then converts to float; the group's dot product is
 * scaled by half the group's scale. */
#include <stdlib.h>
#include <string.h>
#include "mxfp4.h"
#include "kernels_arch.h"

const float k3_e2m1_values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* E8M0 scale byte -> 2^(b-127) by building the float bits (exact; b = 0 is
 * the one subnormal). */
float k3_e8m0_to_f32(uint8_t b)
{
    if (b == 0) return 0x1p-127f;
    union { uint32_t u; float f; } v = {(uint32_t)b << 23};
    return v.f;
}

/* The reference decoder: one nibble and one table lookup per column. */
void k3_mxfp4_decode_row_scalar(const k3_weight *W, int64_t r, float *out)
{
    const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
    for (int64_t c = 0; c < W->cols; c++) {
        uint8_t byte = packed[c / 2];
        uint8_t nib = (c & 1) ? byte >> 4 : byte & 0x0F;
        out[c] = k3_e2m1_values[nib] * k3_e8m0_to_f32(scale[c / 32]);
    }
}

/* The vector decoder (same values as the reference: products of exact
 * small integers and powers of two). */
void k3_mxfp4_decode_row(const k3_weight *W, int64_t r, float *out)
{
    if (k3_kernels_scalar_forced()) {
        k3_mxfp4_decode_row_scalar(W, r, out);
        return;
    }
    const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
    const int64_t groups = W->cols / 32;
    for (int64_t g = 0; g < groups; g++) {
        v8f f[4];
        v32_from_mxfp4_doubled(packed + g * 16, f);
        const v8f half_scale = v8_set1(0.5f * k3_e8m0_to_f32(scale[g]));
        for (int i = 0; i < 4; i++)
            v8_storeu(out + g * 32 + 8 * i, v8_mul(f[i], half_scale));
    }
}

/* The one SIMD order every MXFP4 dot product follows, whether the weights
 * come straight from the nibbles (matvec) or from a row decoded once for
 * several tokens (matmul): per group, t = (f0 x0 + f2 x2) + (f1 x1 + f3 x3)
 * on the doubled integer values, then acc += t * (scale / 2); at the end the
 * 8 lanes of acc are summed in a fixed tree. Same inputs, same bits. */
static inline v8f group_step(const v8f f[4], const float *x, float half_scale, v8f acc)
{
    v8f ta = v8_mul(f[0], v8_loadu(x));
    v8f tb = v8_mul(f[1], v8_loadu(x + 8));
    ta = v8_fma(f[2], v8_loadu(x + 16), ta);
    tb = v8_fma(f[3], v8_loadu(x + 24), tb);
    return v8_fma(v8_add(ta, tb), v8_set1(half_scale), acc);
}

/* Scalar reference dot of one row: decode, then a plain sequential sum. */
static float row_dot_scalar(const k3_weight *W, int64_t r, const float *x, float *row)
{
    k3_mxfp4_decode_row_scalar(W, r, row);
    float acc = 0.0f;
    for (int64_t c = 0; c < W->cols; c++) acc += row[c] * x[c];
    return acc;
}

/* Fused: nibbles to registers to accumulators, no decoded copy. Two
 * independent accumulators over even/odd groups hide the FMA latency. */
static float row_dot_simd(const k3_weight *W, int64_t r, const float *x)
{
    const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
    const int64_t groups = W->cols / 32;
    v8f acc0 = v8_zero(), acc1 = v8_zero(), f[4];
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
        v32_from_mxfp4_doubled(packed + g * 16, f);
        acc0 = group_step(f, x + g * 32, 0.5f * k3_e8m0_to_f32(scale[g]), acc0);
        v32_from_mxfp4_doubled(packed + (g + 1) * 16, f);
        acc1 = group_step(f, x + (g + 1) * 32, 0.5f * k3_e8m0_to_f32(scale[g + 1]), acc1);
    }
    if (g < groups) {
        v32_from_mxfp4_doubled(packed + g * 16, f);
        acc0 = group_step(f, x + g * 32, 0.5f * k3_e8m0_to_f32(scale[g]), acc0);
    }
    return v8_hsum(v8_add(acc0, acc1));
}

/* A row decoded once (doubled integer values + half scales) for matmul. */
static float row_dot_decoded(const v8f *fv, const float *half_scales, int64_t groups, const float *x)
{
    v8f acc0 = v8_zero(), acc1 = v8_zero();
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
        acc0 = group_step(fv + g * 4, x + g * 32, half_scales[g], acc0);
        acc1 = group_step(fv + (g + 1) * 4, x + (g + 1) * 32, half_scales[g + 1], acc1);
    }
    if (g < groups) acc0 = group_step(fv + g * 4, x + g * 32, half_scales[g], acc0);
    return v8_hsum(v8_add(acc0, acc1));
}

/* The same for two tokens at once: each group's decoded values are loaded
 * once for both (a prompt's matmul is bound by these loads), and each token
 * gets exactly the operations of row_dot_decoded, so the bits are the same. */
static void row_dot_decoded_pair(const v8f *fv, const float *half_scales, int64_t groups, const float *x0,
                                 const float *x1, float *y0, float *y1)
{
    v8f a0 = v8_zero(), a1 = v8_zero(), b0 = v8_zero(), b1 = v8_zero();
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
        const v8f *f = fv + g * 4, *f_next = fv + (g + 1) * 4;
        a0 = group_step(f, x0 + g * 32, half_scales[g], a0);
        b0 = group_step(f, x1 + g * 32, half_scales[g], b0);
        a1 = group_step(f_next, x0 + (g + 1) * 32, half_scales[g + 1], a1);
        b1 = group_step(f_next, x1 + (g + 1) * 32, half_scales[g + 1], b1);
    }
    if (g < groups) {
        a0 = group_step(fv + g * 4, x0 + g * 32, half_scales[g], a0);
        b0 = group_step(fv + g * 4, x1 + g * 32, half_scales[g], b0);
    }
    *y0 = v8_hsum(v8_add(a0, a1));
    *y1 = v8_hsum(v8_add(b0, b1));
}

/* Rows [b, e) for one activation vector (k3_matvec_rows on MXFP4). */
void k3_mxfp4_rows(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    if (k3_kernels_scalar_forced()) {
        float row[W->cols];
        for (int64_t r = b; r < e; r++) y[r] = row_dot_scalar(W, r, x, row);
        return;
    }
    for (int64_t r = b; r < e; r++) y[r] = row_dot_simd(W, r, x);
}

/* Rows [b, e) for n_tokens vectors: each row decoded once, then the same
 * group order as the fused dot, so results equal k3_mxfp4_rows per token
 * (which is also the way out when the decode scratch cannot be allocated). */
void k3_mxfp4_matmul_rows(float *Y, const k3_weight *W, const float *X, int n_tokens, int64_t b, int64_t e)
{
    if (k3_kernels_scalar_forced()) {
        float row[W->cols];
        for (int64_t r = b; r < e; r++)
            for (int t = 0; t < n_tokens; t++)
                Y[(size_t)t * W->rows + r] = row_dot_scalar(W, r, X + (size_t)t * W->cols, row);
        return;
    }
    const int64_t groups = W->cols / 32;
    v8f *fv = aligned_alloc(32, (size_t)(groups > 0 ? groups * 4 : 1) * sizeof(v8f));
    float *hs = malloc((size_t)(groups ? groups : 1) * sizeof(float));
    if (!fv || !hs) {                       /* out of memory: the same bits per token, no scratch */
        free(fv);
        free(hs);
        for (int t = 0; t < n_tokens; t++) k3_mxfp4_rows(Y + (size_t)t * W->rows, W, X + (size_t)t * W->cols, b, e);
        return;
    }
    for (int64_t r = b; r < e; r++) {
        const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
        const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
        for (int64_t g = 0; g < groups; g++) {
            v32_from_mxfp4_doubled(packed + g * 16, fv + g * 4);
            hs[g] = 0.5f * k3_e8m0_to_f32(scale[g]);
        }
        int t = 0;
        for (; t + 1 < n_tokens; t += 2)
            row_dot_decoded_pair(fv, hs, groups, X + (size_t)t * W->cols, X + (size_t)(t + 1) * W->cols,
                                 &Y[(size_t)t * W->rows + r], &Y[(size_t)(t + 1) * W->rows + r]);
        if (t < n_tokens) Y[(size_t)t * W->rows + r] = row_dot_decoded(fv, hs, groups, X + (size_t)t * W->cols);
    }
    free(fv);
    free(hs);
}

/* Loaders refuse scale byte 255 (NaN in OCP MX): found with one memchr. */
int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row)
{
    const size_t n = (size_t)rows * (cols / 32);
    const uint8_t *bad = memchr(scales, 0xFF, n);
    if (!bad) return 0;
    if (row) *row = (int64_t)((size_t)(bad - scales) / (size_t)(cols / 32));
    return -1;
}
