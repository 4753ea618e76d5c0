/* quant_matvec.c - see quant_matvec.h: the dot products of GGUF block rows
 * with fp32 activations, a register-decoding kernel for Q8_0 and Q4_K, a
 * decode-then-dot kernel for every other type, and the scalar reference. */
#include <omp.h>
#include <stdlib.h>
#include "kernels.h"
#include "kernels_arch.h"
#include "quant_lanes.h"
#include "quant_matvec.h"

/* Below this many weights a matrix is one thread's work (as k3_matvec). */
#define QUANT_PARALLEL_MIN_WEIGHTS (1 << 18)

uint64_t k3_quant_row_bytes(const k3_quant_type *t, int64_t cols)
{
    return (uint64_t)(cols / t->block_elems) * t->block_bytes;
}

/* A little-endian f16 at p, as fp32. */
static float f16_at(const uint8_t *p)
{
    return k3_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

/* One 16-column chunk into the canonical accumulators. */
K3_INLINE void chunk_fma(v8f w_lo, v8f w_hi, const float *x, v8f *acc0, v8f *acc1)
{
    *acc0 = v8_fma(w_lo, v8_loadu(x), *acc0);
    *acc1 = v8_fma(w_hi, v8_loadu(x + 8), *acc1);
}

/* Q8_0 row: each 32-weight block is two chunks of q * d, decoded in registers
 * with the decoder's one rounding (the product). */
static float dot_row_q8_0(const uint8_t *row, int64_t cols, const float *x)
{
    v8f acc0 = v8_zero(), acc1 = v8_zero();
    for (int64_t c = 0; c < cols; c += 32, row += 34) {
        const v8f d = v8_set1(f16_at(row));
        for (int half = 0; half < 2; half++) {
            v8f q_lo, q_hi;
            v16_from_i8((const int8_t *)row + 2 + 16 * half, &q_lo, &q_hi);
            chunk_fma(v8_mul(q_lo, d), v8_mul(q_hi, d), x + c + 16 * half, &acc0, &acc1);
        }
    }
    return v8_hsum(v8_add(acc0, acc1));
}

/* The 6-bit scale and min of pair j of a K-quant block's 12 scale bytes
 * (the layout of quant_types.c's decoder). */
static void k_scale_min(int j, const uint8_t *q, int *scale, int *min)
{
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K row: per 32-weight group, w = (d * scale) * nibble - (dmin * min),
 * the product and the difference each rounded as the decoder rounds them
 * (no FMA in the decode: a - b is a + (-b) exactly). */
static float dot_row_q4_k(const uint8_t *row, int64_t cols, const float *x)
{
    v8f acc0 = v8_zero(), acc1 = v8_zero();
    for (int64_t c = 0; c < cols; c += 256, row += 144) {
        const float d = f16_at(row), dmin = f16_at(row + 2);
        const uint8_t *scales = row + 4, *q = row + 16;
        for (int group = 0; group < 8; group++) {
            int sc, m;
            k_scale_min(group, scales, &sc, &m);
            const v8f scale = v8_set1(d * (float)sc), neg_min = v8_set1(-(dmin * (float)m));
            const uint8_t *bytes = q + 32 * (group / 2);
            const float *xg = x + c + 32 * group;
            for (int half = 0; half < 2; half++) {
                v8f n_lo, n_hi;
                v16_from_nibbles(bytes + 16 * half, group & 1, &n_lo, &n_hi);
                chunk_fma(v8_add(v8_mul(scale, n_lo), neg_min), v8_add(v8_mul(scale, n_hi), neg_min),
                          xg + 16 * half, &acc0, &acc1);
            }
        }
    }
    return v8_hsum(v8_add(acc0, acc1));
}

/* Columns decoded at a time by the row kernels below: a multiple of every
 * block size (32, 256) and of the 16-column chunk, small enough for the
 * stack of any thread. */
#define QUANT_PIECE_COLS 1024

/* The reference: the row decoded piece by piece, summed left to right in
 * fp32 (the same sum as decoding the whole row first). */
static float dot_row_scalar(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x)
{
    float piece[QUANT_PIECE_COLS];
    const uint64_t piece_bytes = k3_quant_row_bytes(t, QUANT_PIECE_COLS);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; c += QUANT_PIECE_COLS, row += piece_bytes) {
        const int64_t n = cols - c < QUANT_PIECE_COLS ? cols - c : QUANT_PIECE_COLS;
        k3_quant_decode_scalar(t, row, n, piece);
        for (int64_t i = 0; i < n; i++) sum += piece[i] * x[c + i];
    }
    return sum;
}

/* Any type: decode a piece into the stack, run the canonical chunks over it
 * with the accumulators carried from piece to piece, reduce once at the
 * end: the bits of k3_dot_f32(decoded row, x), with no allocation. cols is
 * a whole number of blocks, so of 32 columns: no tail. */
static float dot_row_decoded(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x)
{
    float piece[QUANT_PIECE_COLS];
    const uint64_t piece_bytes = k3_quant_row_bytes(t, QUANT_PIECE_COLS);
    v8f acc0 = v8_zero(), acc1 = v8_zero();
    for (int64_t c = 0; c < cols; c += QUANT_PIECE_COLS, row += piece_bytes) {
        const int64_t n = cols - c < QUANT_PIECE_COLS ? cols - c : QUANT_PIECE_COLS;
        k3_quant_decode_scalar(t, row, n, piece);
        for (int64_t i = 0; i < n; i += 16)
            chunk_fma(v8_loadu(piece + i), v8_loadu(piece + i + 8), x + c + i, &acc0, &acc1);
    }
    return v8_hsum(v8_add(acc0, acc1));
}

/* One row's dot product by the fastest kernel the type has. */
static float dot_row(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x)
{
    if (k3_kernels_scalar_forced()) return dot_row_scalar(t, row, cols, x);
    if (t->ggml_id == K3_GGML_Q8_0) return dot_row_q8_0(row, cols, x);
    if (t->ggml_id == K3_GGML_Q4_K) return dot_row_q4_k(row, cols, x);
    return dot_row_decoded(t, row, cols, x);
}

void k3_quant_matvec_rows(float *y, const k3_quant_type *t, const void *data, int64_t cols, const float *x,
                          int64_t row_begin, int64_t row_end)
{
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    for (int64_t r = row_begin; r < row_end; r++)
        y[r] = dot_row(t, (const uint8_t *)data + (uint64_t)r * row_bytes, cols, x);
}

int k3_quant_matvec(float *y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *x)
{
#pragma omp parallel if (rows * cols >= QUANT_PARALLEL_MIN_WEIGHTS)
    {
        const int64_t n = omp_get_num_threads(), i = omp_get_thread_num();
        k3_quant_matvec_rows(y, t, data, cols, x, rows * i / n, rows * (i + 1) / n);
    }
    return 0;
}

int k3_quant_matmul(float *Y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *X, int n_tokens)
{
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    const int scalar = k3_kernels_scalar_forced();
    int failed = 0;
#pragma omp parallel if (rows * cols * n_tokens >= QUANT_PARALLEL_MIN_WEIGHTS) reduction(| : failed)
    {
        float *w = malloc((size_t)(cols ? cols : 1) * sizeof *w);
        if (!w) failed = 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (failed) continue;
            k3_quant_decode_scalar(t, (const uint8_t *)data + (uint64_t)r * row_bytes, cols, w);
            for (int tok = 0; tok < n_tokens; tok++) {
                const float *x = X + (int64_t)tok * cols;
                float sum = 0.0f;
                if (scalar)
                    for (int64_t c = 0; c < cols; c++) sum += w[c] * x[c];
                else
                    sum = k3_dot_f32(w, x, cols);   /* the canonical order: = the matvec kernels */
                Y[(int64_t)tok * rows + r] = sum;
            }
        }
        free(w);
    }
    return failed ? -1 : 0;
}
