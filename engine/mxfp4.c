/* mxfp4.c - see mxfp4.h. The AVX2 decoder looks up all 32 nibbles of a group
 * with one pshufb on a table of doubled E2M1 values (integers -12..12), then
 * converts to float and multiplies by half the group's scale. */
#include <immintrin.h>
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

/* The fixed-order dot product every MXFP4 row uses: k3_dot_f32 (whose order
 * does not depend on the caller), on the decoded row. */
static float row_dot(const float *row, const float *x, int64_t n) { return k3_dot_f32(row, x, n); }

void k3_mxfp4_rows(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    float row[W->cols];
    for (int64_t r = b; r < e; r++) {
        k3_mxfp4_decode_row(W, r, row);
        y[r] = row_dot(row, x, W->cols);
    }
}

void k3_mxfp4_matmul_rows(float *Y, const k3_weight *W, const float *X, int n_tokens, int64_t b, int64_t e)
{
    float row[W->cols];
    for (int64_t r = b; r < e; r++) {
        k3_mxfp4_decode_row(W, r, row);
        for (int t = 0; t < n_tokens; t++)
            Y[(size_t)t * W->rows + r] = row_dot(row, X + (size_t)t * W->cols, W->cols);
    }
}

int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row)
{
    const size_t n = (size_t)rows * (cols / 32);
    const uint8_t *bad = memchr(scales, 0xFF, n);
    if (!bad) return 0;
    if (row) *row = (int64_t)((size_t)(bad - scales) / (size_t)(cols / 32));
    return -1;
}
