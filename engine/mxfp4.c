/* mxfp4.c - see mxfp4.h. The AVX2 decoder looks up all 32 nibbles of a group
 * with one pshufb on a table of doubled E2M1 values (integers -12..12), then
 * converts to float and multiplies by half the group's scale. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include "mxfp4.h"

const float k3_e2m1_values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float k3_e8m0_to_f32(uint8_t b)
{
    if (b == 0) return 0x1p-127f;
    union { uint32_t u; float f; } v = {(uint32_t)b << 23};
    return v.f;
}

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

void k3_mxfp4_decode_row(const k3_weight *W, int64_t r, float *out)
{
    if (k3_kernels_scalar_forced()) {
        k3_mxfp4_decode_row_scalar(W, r, out);
        return;
    }
    const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
    /* doubled E2M1 values: exact small integers */
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    const int64_t groups = W->cols / 32;
    for (int64_t g = 0; g < groups; g++) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(packed + g * 16));
        __m128i lo = _mm_and_si128(bytes, low_mask);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_mask);
        __m128i first = _mm_unpacklo_epi8(lo, hi);    /* columns 0..15, even = low nibble */
        __m128i second = _mm_unpackhi_epi8(lo, hi);   /* columns 16..31 */
        first = _mm_shuffle_epi8(lut, first);
        second = _mm_shuffle_epi8(lut, second);
        const __m256 half_scale = _mm256_set1_ps(0.5f * k3_e8m0_to_f32(scale[g]));
        float *o = out + g * 32;
        _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first)), half_scale));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8))), half_scale));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second)), half_scale));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8))), half_scale));
    }
}

/* Decode one group of 32 nibbles into four vectors of doubled E2M1 values
 * (exact small integers as floats): columns 0-7, 8-15, 16-23, 24-31. */
static inline void decode_group(const uint8_t *bytes16, __m256 f[4])
{
    const __m128i lut = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i low_mask = _mm_set1_epi8(0x0F);
    __m128i b = _mm_loadu_si128((const __m128i *)bytes16);
    __m128i lo = _mm_and_si128(b, low_mask);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), low_mask);
    __m128i first = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi));
    __m128i second = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi));
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8)));
}

/* The one SIMD order every MXFP4 dot product follows, whether the weights
 * come straight from the nibbles (matvec) or from a row decoded once for
 * several tokens (matmul): per group, t = (f0 x0 + f2 x2) + (f1 x1 + f3 x3)
 * on the doubled integer values, then acc += t * (scale / 2); at the end the
 * 8 lanes of acc are summed in a fixed tree. Same inputs, same bits. */
static inline __m256 group_step(const __m256 f[4], const float *x, float half_scale, __m256 acc)
{
    __m256 ta = _mm256_mul_ps(f[0], _mm256_loadu_ps(x));
    __m256 tb = _mm256_mul_ps(f[1], _mm256_loadu_ps(x + 8));
    ta = _mm256_fmadd_ps(f[2], _mm256_loadu_ps(x + 16), ta);
    tb = _mm256_fmadd_ps(f[3], _mm256_loadu_ps(x + 24), tb);
    return _mm256_fmadd_ps(_mm256_add_ps(ta, tb), _mm256_set1_ps(half_scale), acc);
}

static inline float lanes_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
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
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), f[4];
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
        decode_group(packed + g * 16, f);
        acc0 = group_step(f, x + g * 32, 0.5f * k3_e8m0_to_f32(scale[g]), acc0);
        decode_group(packed + (g + 1) * 16, f);
        acc1 = group_step(f, x + (g + 1) * 32, 0.5f * k3_e8m0_to_f32(scale[g + 1]), acc1);
    }
    if (g < groups) {
        decode_group(packed + g * 16, f);
        acc0 = group_step(f, x + g * 32, 0.5f * k3_e8m0_to_f32(scale[g]), acc0);
    }
    return lanes_sum(_mm256_add_ps(acc0, acc1));
}

/* A row decoded once (doubled integer values + half scales) for matmul. */
static float row_dot_decoded(const __m256 *fv, const float *half_scales, int64_t groups, const float *x)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
        acc0 = group_step(fv + g * 4, x + g * 32, half_scales[g], acc0);
        acc1 = group_step(fv + (g + 1) * 4, x + (g + 1) * 32, half_scales[g + 1], acc1);
    }
    if (g < groups) acc0 = group_step(fv + g * 4, x + g * 32, half_scales[g], acc0);
    return lanes_sum(_mm256_add_ps(acc0, acc1));
}

void k3_mxfp4_rows(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    if (k3_kernels_scalar_forced()) {
        float row[W->cols];
        for (int64_t r = b; r < e; r++) y[r] = row_dot_scalar(W, r, x, row);
        return;
    }
    for (int64_t r = b; r < e; r++) y[r] = row_dot_simd(W, r, x);
}

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
    __m256 *fv = aligned_alloc(32, (size_t)(groups > 0 ? groups * 4 : 1) * sizeof(__m256));
    float *hs = malloc((size_t)(groups ? groups : 1) * sizeof(float));
    if (!fv || !hs) abort();
    for (int64_t r = b; r < e; r++) {
        const uint8_t *packed = (const uint8_t *)W->data + (size_t)r * (W->cols / 2);
        const uint8_t *scale = W->mx_scale + (size_t)r * (W->cols / 32);
        for (int64_t g = 0; g < groups; g++) {
            decode_group(packed + g * 16, fv + g * 4);
            hs[g] = 0.5f * k3_e8m0_to_f32(scale[g]);
        }
        for (int t = 0; t < n_tokens; t++)
            Y[(size_t)t * W->rows + r] = row_dot_decoded(fv, hs, groups, X + (size_t)t * W->cols);
    }
    free(fv);
    free(hs);
}

int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row)
{
    const size_t n = (size_t)rows * (cols / 32);
    const uint8_t *bad = memchr(scales, 0xFF, n);
    if (!bad) return 0;
    if (row) *row = (int64_t)((size_t)(bad - scales) / (size_t)(cols / 32));
    return -1;
}
