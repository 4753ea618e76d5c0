/* mxfp4.c - see mxfp4.h: the value table, the scalar reference decoder and
 * the loaders' scale check. The vector decoder (k3_mxfp4_decode_row) and the
 * dot products live in matvec.c beside the other dtypes' SIMD decoders. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "mxfp4.h"

const float k3_e2m1_values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

k3_mxfp4_bf16_bytes k3_mxfp4_bf16_tables[256] __attribute__((aligned(64)));
float k3_mxfp4_half_scales[256];

/* The tables' contents (mxfp4.h): the same float product as the scalar
 * reference decoder, so a looked-up weight equals the reference's bits. */
static void fill_bf16_tables(void)
{
    for (int e = 0; e < 256; e++)
        k3_mxfp4_half_scales[e] = 0.5f * k3_e8m0_to_f32((uint8_t)e);
    for (int e = 0; e < 256; e++)
        for (int i = 0; i < 16; i++) {
            float value = k3_e2m1_values[i] * k3_e8m0_to_f32((uint8_t)e);
            uint32_t bits;
            memcpy(&bits, &value, 4);
            for (int half = 0; half < 2; half++) {
                k3_mxfp4_bf16_tables[e].low[i + 16 * half] = (uint8_t)(bits >> 16);
                k3_mxfp4_bf16_tables[e].high[i + 16 * half] = (uint8_t)(bits >> 24);
            }
        }
}

/* Once per process, from any thread. */
void k3_mxfp4_tables_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_bf16_tables);
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

/* Loaders refuse scale byte 255 (NaN in OCP MX): found with one memchr. */
int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row)
{
    const size_t n = (size_t)rows * (cols / 32);
    const uint8_t *bad = memchr(scales, 0xFF, n);
    if (!bad) return 0;
    if (row) *row = (int64_t)((size_t)(bad - scales) / (size_t)(cols / 32));
    return -1;
}
