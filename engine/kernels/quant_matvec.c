/* quant_matvec.c - see quant_matvec.h: the dot products of GGUF block rows
 * with fp32 activations. Every block type has a register-decoding kernel:
 * 16 weights at a time become 16 small integers in byte lanes (v16b,
 * quant_lanes.h), then fp32 lanes, then the decoder's products, and go
 * straight into the canonical accumulators; the same walk decodes rows for
 * the batched matmul. F32/F16/BF16 rows go to the plain kernels of matvec.c.
 * Beside them the scalar reference. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
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

/* One 16-column chunk into the canonical accumulators. */
K3_INLINE void chunk_fma(v8f w_lo, v8f w_hi, const float *x, v8f *acc0, v8f *acc1)
{
    *acc0 = v8_fma(w_lo, v8_loadu(x), *acc0);
    *acc1 = v8_fma(w_hi, v8_loadu(x + 8), *acc1);
}

/* Every type's block decoder below is written once for two uses: with out
 * NULL it is the dot product (each decoded chunk goes into the
 * accumulators against x), with out set it stores the decoded weights
 * there (the batched matmul). The decoders are always inlined into the
 * row kernels (ROW_KERNELS), where out is a constant, so the test folds
 * away. Chunk c is columns c..c+15 of the row. */
K3_INLINE void emit_chunk(v8f w_lo, v8f w_hi, int64_t c, const float *x, float *out, v8f *acc0, v8f *acc1)
{
    if (out) {
        v8_storeu(out + c, w_lo);
        v8_storeu(out + c + 8, w_hi);
    } else {
        chunk_fma(w_lo, w_hi, x + c, acc0, acc1);
    }
}

/* A chunk whose weights are code * scale: the decoders' one product (which
 * operand comes first does not change an IEEE product). */
K3_INLINE void emit_scaled(v16b codes, float scale, int64_t c, const float *x, float *out, v8f *acc0, v8f *acc1)
{
    v8f lo, hi;
    const v8f s = v8_set1(scale);
    v16_from_v16b(codes, &lo, &hi);
    emit_chunk(v8_mul(lo, s), v8_mul(hi, s), c, x, out, acc0, acc1);
}

/* A chunk whose weights are scale * code - min, the product and the
 * difference each rounded as the decoders round them (no FMA in the
 * decode: a - b is a + (-b) exactly). */
K3_INLINE void emit_affine(v16b codes, float scale, float min, int64_t c, const float *x, float *out, v8f *acc0,
                           v8f *acc1)
{
    v8f lo, hi;
    const v8f s = v8_set1(scale), neg_min = v8_set1(-min);
    v16_from_v16b(codes, &lo, &hi);
    emit_chunk(v8_add(v8_mul(s, lo), neg_min), v8_add(v8_mul(s, hi), neg_min), c, x, out, acc0, acc1);
}

/* The block decoders' common parameters: the block at row, whose first
 * weight is column c of its row; x for the dot product or out for the
 * decode; the row's two accumulators. */
#define BLOCK_ARGS const uint8_t *row, int64_t c, const float *x, float *out, v8f *acc0, v8f *acc1
#define WALK_PASS x, out, acc0, acc1

/* Q8_0: 32 signed bytes times d per block. */
K3_INLINE void block_q8_0(BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
    emit_scaled(v16b_load(row + 2), d, c, WALK_PASS);
    emit_scaled(v16b_load(row + 18), d, c + 16, WALK_PASS);
}

/* Q4_0: (nibble - 8) * d; the low nibbles are weights 0-15, the high 16-31. */
K3_INLINE void block_q4_0(BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
    const v16b packed = v16b_load(row + 2);
    emit_scaled(v16b_sub_const(v16b_shr_and(packed, 0, 0x0F), 8), d, c, WALK_PASS);
    emit_scaled(v16b_sub_const(v16b_shr_and(packed, 4, 0x0F), 8), d, c + 16, WALK_PASS);
}

/* Q5_0: ((nibble | fifth bit << 4) - 16) * d; the fifth bits of weights
 * 0-15 are bytes 2-3 of the block, of 16-31 bytes 4-5. */
K3_INLINE void block_q5_0(BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
    const v16b packed = v16b_load(row + 6);
    v16b low = v16b_or_shl(v16b_shr_and(packed, 0, 0x0F), v16b_from_bits(row + 2, 0x10), 0);
    v16b high = v16b_or_shl(v16b_shr_and(packed, 4, 0x0F), v16b_from_bits(row + 4, 0x10), 0);
    emit_scaled(v16b_sub_const(low, 16), d, c, WALK_PASS);
    emit_scaled(v16b_sub_const(high, 16), d, c + 16, WALK_PASS);
}

/* The doubled E2M1 values of MXFP4 nibbles (quant_types.c's table). */
static const int8_t mxfp4_doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* MXFP4 (GGUF's 17-byte block): doubled E2M1 value * 2^(e - 128), the low
 * nibbles weights 0-15, the high 16-31. */
K3_INLINE void block_mxfp4(BLOCK_ARGS)
{
    const float d = e8m0_half_scale(row[0]);
    const v16b packed = v16b_load(row + 1);
    emit_scaled(v16b_lookup(mxfp4_doubled_e2m1, v16b_shr_and(packed, 0, 0x0F)), d, c, WALK_PASS);
    emit_scaled(v16b_lookup(mxfp4_doubled_e2m1, v16b_shr_and(packed, 4, 0x0F)), d, c + 16, WALK_PASS);
}

/* The 16 levels of IQ4_NL and IQ4_XS (quant_types.c's table). */
static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* IQ4_NL: d * level[nibble], nibbles as in Q4_0. */
K3_INLINE void block_iq4_nl(BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
    const v16b packed = v16b_load(row + 2);
    emit_scaled(v16b_lookup(iq4_levels, v16b_shr_and(packed, 0, 0x0F)), d, c, WALK_PASS);
    emit_scaled(v16b_lookup(iq4_levels, v16b_shr_and(packed, 4, 0x0F)), d, c + 16, WALK_PASS);
}

/* IQ4_XS: per 32-weight group, (d * (scale - 32)) * level[nibble]. */
K3_INLINE void block_iq4_xs(BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
    const unsigned scales_high = (unsigned)row[2] | (unsigned)row[3] << 8;
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int scale = ((row[4 + g / 2] >> (4 * (g % 2))) & 0x0F) | (int)((scales_high >> (2 * g)) & 3) << 4;
        const float dl = d * (float)(scale - 32);
        const v16b packed = v16b_load(row + 8 + 16 * g);
        emit_scaled(v16b_lookup(iq4_levels, v16b_shr_and(packed, 0, 0x0F)), dl, c + 32 * g, WALK_PASS);
        emit_scaled(v16b_lookup(iq4_levels, v16b_shr_and(packed, 4, 0x0F)), dl, c + 32 * g + 16, WALK_PASS);
    }
}

/* The 6-bit scale and min of pair j of a K-quant block's 12 scale bytes
 * (the layout of quant_types.c's decoder). */
K3_INLINE void k_scale_min(int j, const uint8_t *q, int *scale, int *min)
{
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: per 32-weight group g, (d * scale) * nibble - (dmin * min); groups
 * 2i and 2i + 1 are the low and high nibbles of bytes 32i..32i+31. */
K3_INLINE void block_q4_k(BLOCK_ARGS)
{
    const float d = f16_scale_at(row), dmin = f16_scale_at(row + 2);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int sc, m;
        k_scale_min(g, row + 4, &sc, &m);
        const float scale = d * (float)sc, min = dmin * (float)m;
        const uint8_t *q = row + 16 + 32 * (g / 2);
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++)
            emit_affine(v16b_shr_and(v16b_load(q + 16 * half), 4 * (g & 1), 0x0F), scale, min,
                        c + 32 * g + 16 * half, WALK_PASS);
    }
}

/* Q5_K: Q4_K with a fifth bit per weight: bit g of qh[l] adds 16 to
 * weight l of group g. */
K3_INLINE void block_q5_k(BLOCK_ARGS)
{
    const float d = f16_scale_at(row), dmin = f16_scale_at(row + 2);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int sc, m;
        k_scale_min(g, row + 4, &sc, &m);
        const float scale = d * (float)sc, min = dmin * (float)m;
        const uint8_t *ql = row + 48 + 32 * (g / 2);
#pragma GCC unroll 2
        for (int half = 0; half < 2; half++) {
            v16b nibbles = v16b_shr_and(v16b_load(ql + 16 * half), 4 * (g & 1), 0x0F);
            v16b fifth = v16b_shr_and(v16b_load(row + 16 + 16 * half), g, 1);
            emit_affine(v16b_or_shl(nibbles, fifth, 4), scale, min, c + 32 * g + 16 * half, WALK_PASS);
        }
    }
}

/* Q6_K: per 16 weights, (d * scale) * (q - 32) with q six bits: a nibble of
 * ql and a 2-bit pair of qh. In each 128-weight half, chunk m (0..7) is
 * weights 16m..16m+15 with scale m: sub-group k = m / 2 reads ql bytes
 * 32 (k % 2) + 16 (m % 2) onward (low nibbles for k < 2, else high) and
 * bits 2k of qh bytes 16 (m % 2) onward. */
K3_INLINE void block_q6_k(BLOCK_ARGS)
{
    const float d = f16_scale_at(row + 208);
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = row + 64 * half, *qh = row + 128 + 32 * half;
        const int8_t *scales = (const int8_t *)(row + 192 + 8 * half);
#pragma GCC unroll 8
        for (int m = 0; m < 8; m++) {
            const int k = m / 2, l0 = 16 * (m % 2);
            v16b low4 = v16b_shr_and(v16b_load(ql + 32 * (k % 2) + l0), k >= 2 ? 4 : 0, 0x0F);
            v16b high2 = v16b_shr_and(v16b_load(qh + l0), 2 * k, 3);
            emit_scaled(v16b_sub_const(v16b_or_shl(low4, high2, 4), 32), d * (float)scales[m],
                        c + 128 * half + 16 * m, WALK_PASS);
        }
    }
}

/* Q2_K: per 16 weights, (d * scale) * q - (dmin * min) with q two bits.
 * Chunk m (0..15) reads 2-bit field (m % 8) / 2 of quant bytes
 * 32 (m / 8) + 16 (m % 2) onward, with scale byte m. */
K3_INLINE void block_q2_k(BLOCK_ARGS)
{
    const float d = f16_scale_at(row + 80), dmin = f16_scale_at(row + 82);
#pragma GCC unroll 16
    for (int m = 0; m < 16; m++) {
        const uint8_t sc = row[m];
        const float scale = d * (float)(sc & 0x0F), min = dmin * (float)(sc >> 4);
        v16b q = v16b_shr_and(v16b_load(row + 16 + 32 * (m / 8) + 16 * (m % 2)), 2 * ((m % 8) / 2), 3);
        emit_affine(q, scale, min, c + 16 * m, WALK_PASS);
    }
}

/* Q3_K: per 16 weights, (d * scale) * (q - (high bit ? 0 : 4)), the 2-bit
 * fields walked as in Q2_K; chunk m's high bits are bit 4 (m / 8) +
 * (m % 8) / 2 of hmask bytes 16 (m % 2) onward. (q | bit << 2) - 4 is that
 * value. */
K3_INLINE void block_q3_k(BLOCK_ARGS)
{
    const uint8_t *packed = row + 96;
    const float d = f16_scale_at(row + 108);
#pragma GCC unroll 16
    for (int m = 0; m < 16; m++) {
        int low4 = m < 8 ? packed[m] & 0x0F : packed[m - 8] >> 4;
        int high2 = (packed[8 + m % 4] >> (2 * (m / 4))) & 3;
        const float scale = d * (float)((low4 | high2 << 4) - 32);
        const int run = 16 * (m % 2), field = (m % 8) / 2;
        v16b q = v16b_shr_and(v16b_load(row + 32 + 32 * (m / 8) + run), 2 * field, 3);
        v16b high = v16b_shr_and(v16b_load(row + run), 4 * (m / 8) + field, 1);
        emit_scaled(v16b_sub_const(v16b_or_shl(q, high, 2), 4), scale, c + 16 * m, WALK_PASS);
    }
}

/* For each type (its block decoder, weights and bytes per block): the
 * dot product of a row (the canonical accumulators and reduction) and the
 * decode of a row. (A two-row kernel, two independent chains sharing the
 * loads of x, measured no faster: the decode's integer work bounds these
 * kernels, not the FMA latency.) */
#define ROW_KERNELS(type, elems, bytes) \
    static float dot_row_##type(const uint8_t *row, int64_t cols, const float *x) \
    { \
        v8f acc0 = v8_zero(), acc1 = v8_zero(); \
        for (int64_t c = 0; c < cols; c += elems, row += bytes) \
            block_##type(row, c, x, NULL, &acc0, &acc1); \
        return v8_hsum(v8_add(acc0, acc1)); \
    } \
    static void decode_row_##type(const uint8_t *row, int64_t cols, float *out) \
    { \
        for (int64_t c = 0; c < cols; c += elems, row += bytes) \
            block_##type(row, c, NULL, out, NULL, NULL); \
    }
ROW_KERNELS(q8_0, 32, 34)
ROW_KERNELS(q4_0, 32, 18)
ROW_KERNELS(q5_0, 32, 22)
ROW_KERNELS(mxfp4, 32, 17)
ROW_KERNELS(iq4_nl, 32, 18)
ROW_KERNELS(iq4_xs, 256, 136)
ROW_KERNELS(q4_k, 256, 144)
ROW_KERNELS(q5_k, 256, 176)
ROW_KERNELS(q6_k, 256, 210)
ROW_KERNELS(q2_k, 256, 84)
ROW_KERNELS(q3_k, 256, 110)

typedef float (*dot_row_fn)(const uint8_t *row, int64_t cols, const float *x);
typedef void (*decode_row_fn)(const uint8_t *row, int64_t cols, float *out);

/* The register-decoding kernels by ggml type. */
static const struct {
    uint32_t ggml_id;
    dot_row_fn dot;
    decode_row_fn decode;
} row_kernels[] = {
    {K3_GGML_Q8_0, dot_row_q8_0, decode_row_q8_0},
    {K3_GGML_Q4_0, dot_row_q4_0, decode_row_q4_0},
    {K3_GGML_Q5_0, dot_row_q5_0, decode_row_q5_0},
    {K3_GGML_MXFP4, dot_row_mxfp4, decode_row_mxfp4},
    {K3_GGML_IQ4_NL, dot_row_iq4_nl, decode_row_iq4_nl},
    {K3_GGML_IQ4_XS, dot_row_iq4_xs, decode_row_iq4_xs},
    {K3_GGML_Q4_K, dot_row_q4_k, decode_row_q4_k},
    {K3_GGML_Q5_K, dot_row_q5_k, decode_row_q5_k},
    {K3_GGML_Q6_K, dot_row_q6_k, decode_row_q6_k},
    {K3_GGML_Q2_K, dot_row_q2_k, decode_row_q2_k},
    {K3_GGML_Q3_K, dot_row_q3_k, decode_row_q3_k},
};

/* Index of type t's kernels in row_kernels, or -1 (F32/F16/BF16). */
static int row_kernel_index(const k3_quant_type *t)
{
    for (int i = 0; i < (int)(sizeof row_kernels / sizeof row_kernels[0]); i++)
        if (row_kernels[i].ggml_id == t->ggml_id) return i;
    return -1;
}

/* The reference: decode the row, sum left to right in fp32. */
static float dot_row_scalar(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x,
                            float *scratch)
{
    k3_quant_decode_scalar(t, row, cols, scratch);
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; c++) sum += scratch[c] * x[c];
    return sum;
}

/* F32, F16 and BF16 rows (GGUF's plain types) as the k3_weight k3_matvec
 * and k3_matmul read: little-endian values, one after the other, at any
 * alignment. NULL dtype when t is a block type. */
static int plain_weight(const k3_quant_type *t, const void *data, int64_t rows, int64_t cols, k3_weight *w)
{
    k3_dtype dtype = t->ggml_id == K3_GGML_F32 ? K3_DT_F32 : t->ggml_id == K3_GGML_F16 ? K3_DT_F16
                   : t->ggml_id == K3_GGML_BF16 ? K3_DT_BF16 : (k3_dtype)-1;
    if (dtype == (k3_dtype)-1) return 0;
    memset(w, 0, sizeof *w);
    w->dtype = dtype;
    w->rows = rows;
    w->cols = cols;
    w->data = data;
    return 1;
}

int k3_quant_matvec(float *y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *x)
{
    k3_weight plain;
    if (plain_weight(t, data, rows, cols, &plain)) {   /* the plain kernels, same contract */
        k3_matvec(y, &plain, x);
        return 0;
    }
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    const int scalar = k3_kernels_scalar_forced();
    const int kernel = row_kernel_index(t);
    const dot_row_fn dot = kernel >= 0 ? row_kernels[kernel].dot : NULL;
    const int need_scratch = scalar || !dot;   /* a type without a kernel: decode, then k3_dot_f32 */
    int failed = 0;
#pragma omp parallel if (rows * cols >= QUANT_PARALLEL_MIN_WEIGHTS) reduction(| : failed)
    {
        float *scratch = need_scratch ? malloc((size_t)(cols ? cols : 1) * sizeof *scratch) : NULL;
        if (need_scratch && !scratch) failed = 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)data + (uint64_t)r * row_bytes;
            if (failed) continue;
            if (scalar) y[r] = dot_row_scalar(t, row, cols, x, scratch);
            else if (dot) y[r] = dot(row, cols, x);
            else {
                k3_quant_decode_scalar(t, row, cols, scratch);
                y[r] = k3_dot_f32(scratch, x, cols);
            }
        }
        free(scratch);
    }
    return failed ? -1 : 0;
}

/* Rows per slab of k3_quant_matmul: decoded to fp32 (32 KiB per 512
 * columns), then multiplied by every token with the F32 matmul kernel. */
#define QUANT_MATMUL_SLAB_ROWS 16

int k3_quant_matmul(float *Y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *X, int n_tokens)
{
    k3_weight plain;
    if (plain_weight(t, data, rows, cols, &plain)) {
        k3_matmul(Y, &plain, X, n_tokens);
        return 0;
    }
    if (n_tokens <= 0 || rows <= 0) return 0;
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    const int scalar = k3_kernels_scalar_forced();
    const int kernel = row_kernel_index(t);
    const decode_row_fn decode = kernel >= 0 ? row_kernels[kernel].decode : NULL;
    const int64_t n_slabs = (rows + QUANT_MATMUL_SLAB_ROWS - 1) / QUANT_MATMUL_SLAB_ROWS;
    int failed = 0;
    /* Each slab of rows is decoded once (the register decoders, or the
     * scalar decoder for the reference: the same values) into an fp32
     * matrix, and k3_matmul runs it against all tokens on this thread: its
     * F32 kernels keep the canonical order (forced scalar: the left-to-right
     * loop), so every value equals k3_quant_matvec's. */
#pragma omp parallel if (rows * cols * n_tokens >= QUANT_PARALLEL_MIN_WEIGHTS) reduction(| : failed)
    {
        const size_t slab_floats = (size_t)QUANT_MATMUL_SLAB_ROWS * (size_t)cols;
        float *slab = aligned_alloc(64, (slab_floats * sizeof(float) + 63) & ~(size_t)63);
        float *slab_out = malloc((size_t)QUANT_MATMUL_SLAB_ROWS * (size_t)n_tokens * sizeof(float));
        if (!slab || !slab_out) failed = 1;
#pragma omp for schedule(static)
        for (int64_t s = 0; s < n_slabs; s++) {
            if (failed) continue;
            const int64_t first = s * QUANT_MATMUL_SLAB_ROWS;
            const int64_t n = rows - first < QUANT_MATMUL_SLAB_ROWS ? rows - first : QUANT_MATMUL_SLAB_ROWS;
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *row = (const uint8_t *)data + (uint64_t)(first + i) * row_bytes;
                if (!scalar && decode) decode(row, cols, slab + i * cols);
                else k3_quant_decode_scalar(t, row, cols, slab + i * cols);
            }
            k3_weight w = {.dtype = K3_DT_F32, .rows = n, .cols = cols, .data = slab};
            k3_matmul(slab_out, &w, X, n_tokens);
            for (int tok = 0; tok < n_tokens; tok++)
                memcpy(Y + (int64_t)tok * rows + first, slab_out + (int64_t)tok * n, (size_t)n * sizeof(float));
        }
        free(slab);
        free(slab_out);
    }
    return failed ? -1 : 0;
}
