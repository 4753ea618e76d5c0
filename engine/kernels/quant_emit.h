/* quant_emit.h - the tail every register-decoding block kernel shares
 * (quant_matvec.c, quant_iq.c): 16 decoded weights at a time either go
 * into the canonical accumulators against x (the dot product) or are
 * stored (the batched matmul's decode), and ROW_KERNELS makes a type's row
 * dot product and row decoder from its block decoder. Internal to the
 * kernel files. */
#ifndef K3_QUANT_EMIT_H
#define K3_QUANT_EMIT_H

#include <stdint.h>
#include "kernels_arch.h"
#include "quant_lanes.h"

/* One 16-column chunk into the canonical accumulators. */
K3_INLINE void chunk_fma(v8f w_lo, v8f w_hi, const float *x, v8f *acc0, v8f *acc1)
{
    *acc0 = v8_fma(w_lo, v8_loadu(x), *acc0);
    *acc1 = v8_fma(w_hi, v8_loadu(x + 8), *acc1);
}

/* Every type's block decoder (quant_matvec.c, quant_iq.c) is written once for two uses: with out
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

/* A chunk whose weights are scale * code - min, as the decoders round
 * them: the product, then the difference (a - b is a + (-b) exactly). For
 * every caller the product is exact in fp32 (an f16 times a sub-scale of
 * at most 6 bits times a code of at most 5: 22 significant bits or fewer),
 * so one fma, rounding the exact scale * code - min once, gives the same
 * value with one operation fewer per 8 weights. */
K3_INLINE void emit_affine(v16b codes, float scale, float min, int64_t c, const float *x, float *out, v8f *acc0,
                           v8f *acc1)
{
    v8f lo, hi;
    const v8f s = v8_set1(scale), neg_min = v8_set1(-min);
    v16_from_v16b(codes, &lo, &hi);
    emit_chunk(v8_fma(s, lo, neg_min), v8_fma(s, hi, neg_min), c, x, out, acc0, acc1);
}

/* The block decoders' common parameters: the block at row, whose first
 * weight is column c of its row; x for the dot product or out for the
 * decode; the row's two accumulators. */
#define BLOCK_ARGS const uint8_t *row, int64_t c, const float *x, float *out, v8f *acc0, v8f *acc1
#define WALK_PASS x, out, acc0, acc1

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

#endif
