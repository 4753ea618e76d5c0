/* quant_matvec.c - see quant_matvec.h: the dot products of GGUF block rows
 * with fp32 activations. Every block type has a register-decoding kernel:
 * 16 weights at a time become 16 small integers in byte lanes (v16b,
 * quant_lanes.h), then fp32 lanes, then the decoder's products, and go
 * straight into the canonical accumulators; the same walk decodes rows for
 * the batched matmul. F32/F16/BF16 rows go to the plain kernels of matvec.c.
 * Beside them the scalar reference, and (below) the q8 activation path
 * with its own contract and scalar reference. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "kernels_arch.h"
#include "quant_emit.h"
#include "quant_iq.h"
#include "quant_lanes.h"
#include "quant_iq_lanes.h"
#include "quant_iq1_lanes.h"
#include "quant_matvec.h"
#include "quant_mxfp4_lanes.h"

/* Below this many weights a matrix is one thread's work (as k3_matvec). */
#define QUANT_PARALLEL_MIN_WEIGHTS (1 << 18)

uint64_t k3_quant_row_bytes(const k3_quant_type *t, int64_t cols)
{
    return (uint64_t)(cols / t->block_elems) * t->block_bytes;
}

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

/* Q4_1: nibble * d + m (the product rounded, then the sum: emit_affine
 * adds -(-m), which is m exactly); the nibbles as in Q4_0. */
K3_INLINE void block_q4_1(BLOCK_ARGS)
{
    const float d = f16_scale_at(row), m = f16_scale_at(row + 2);
    const v16b packed = v16b_load(row + 4);
    emit_affine(v16b_shr_and(packed, 0, 0x0F), d, -m, c, WALK_PASS);
    emit_affine(v16b_shr_and(packed, 4, 0x0F), d, -m, c + 16, WALK_PASS);
}

/* Q5_1: (nibble | fifth bit << 4) * d + m; the fifth bits as in Q5_0,
 * after d and m. */
K3_INLINE void block_q5_1(BLOCK_ARGS)
{
    const float d = f16_scale_at(row), m = f16_scale_at(row + 2);
    const v16b packed = v16b_load(row + 8);
    v16b low = v16b_or_shl(v16b_shr_and(packed, 0, 0x0F), v16b_from_bits(row + 4, 0x10), 0);
    v16b high = v16b_or_shl(v16b_shr_and(packed, 4, 0x0F), v16b_from_bits(row + 6, 0x10), 0);
    emit_affine(low, d, -m, c, WALK_PASS);
    emit_affine(high, d, -m, c + 16, WALK_PASS);
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

/* IQ1_S / IQ1_M (is_m, a constant once inlined): 16 chunks of two grid
 * points (quant_iq1_lanes.h); IQ1_S's d is the f16 first, IQ1_M's the f16
 * spread over the scale words' top nibbles. */
K3_INLINE void block_iq1(int is_m, BLOCK_ARGS)
{
    const float d = is_m ? iq1_m_scale(row) : f16_scale_at(row);
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
        v8f lo, hi;
        iq1_chunk_weights(is_m ? iq1_m_fields(row, k) : iq1_s_fields(row, k), d, &lo, &hi);
        emit_chunk(lo, hi, c + 16 * k, WALK_PASS);
    }
}

K3_INLINE void block_iq1_s(BLOCK_ARGS) { block_iq1(0, row, c, WALK_PASS); }
K3_INLINE void block_iq1_m(BLOCK_ARGS) { block_iq1(1, row, c, WALK_PASS); }

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

/* The K-quants' 16-weight chunks as signed integer codes, one decoder for
 * the exact kernels below and the q8 path: Q6_K's chunk m of half h (its
 * scale is the i8 at 192 + 8 h + m), Q2_K's chunk m (scale and min the
 * nibbles of byte m), Q3_K's chunk m (its 6-bit scale - 32 in *scale,
 * q3_k_scale). */
K3_INLINE v16b q6_k_codes(const uint8_t *row, int half, int m)
{
    const uint8_t *ql = row + 64 * half, *qh = row + 128 + 32 * half;
    const int k = m / 2, l0 = 16 * (m % 2);
    v16b low4 = v16b_shr_and(v16b_load(ql + 32 * (k % 2) + l0), k >= 2 ? 4 : 0, 0x0F);
    v16b high2 = v16b_shr_and(v16b_load(qh + l0), 2 * k, 3);
    return v16b_sub_const(v16b_or_shl(low4, high2, 4), 32);
}

K3_INLINE v16b q2_k_codes(const uint8_t *row, int m)
{
    return v16b_shr_and(v16b_load(row + 16 + 32 * (m / 8) + 16 * (m % 2)), 2 * ((m % 8) / 2), 3);
}

K3_INLINE int q3_k_scale(const uint8_t *row, int m)
{
    const uint8_t *packed = row + 96;
    const int low4 = m < 8 ? packed[m] & 0x0F : packed[m - 8] >> 4;
    const int high2 = (packed[8 + m % 4] >> (2 * (m / 4))) & 3;
    return (low4 | high2 << 4) - 32;
}

K3_INLINE v16b q3_k_codes(const uint8_t *row, int m, int *scale)
{
    *scale = q3_k_scale(row, m);
    const int run = 16 * (m % 2), field = (m % 8) / 2;
    v16b q = v16b_shr_and(v16b_load(row + 32 + 32 * (m / 8) + run), 2 * field, 3);
    v16b high = v16b_shr_and(v16b_load(row + run), 4 * (m / 8) + field, 1);
    return v16b_sub_const(v16b_or_shl(q, high, 2), 4);
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
        const int8_t *scales = (const int8_t *)(row + 192 + 8 * half);
#pragma GCC unroll 8
        for (int m = 0; m < 8; m++)
            emit_scaled(q6_k_codes(row, half, m), d * (float)scales[m], c + 128 * half + 16 * m, WALK_PASS);
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
        emit_affine(q2_k_codes(row, m), scale, min, c + 16 * m, WALK_PASS);
    }
}

/* Q3_K: per 16 weights, (d * scale) * (q - (high bit ? 0 : 4)), the 2-bit
 * fields walked as in Q2_K; chunk m's high bits are bit 4 (m / 8) +
 * (m % 8) / 2 of hmask bytes 16 (m % 2) onward. (q | bit << 2) - 4 is that
 * value. */
K3_INLINE void block_q3_k(BLOCK_ARGS)
{
    const float d = f16_scale_at(row + 108);
#pragma GCC unroll 16
    for (int m = 0; m < 16; m++) {
        int scale;
        const v16b codes = q3_k_codes(row, m, &scale);
        emit_scaled(codes, d * (float)scale, c + 16 * m, WALK_PASS);
    }
}

ROW_KERNELS(q8_0, 32, 34)
ROW_KERNELS(q4_0, 32, 18)
ROW_KERNELS(q5_0, 32, 22)
ROW_KERNELS(q4_1, 32, 20)
ROW_KERNELS(q5_1, 32, 24)
ROW_KERNELS(mxfp4, 32, 17)
ROW_KERNELS(iq4_nl, 32, 18)
ROW_KERNELS(iq4_xs, 256, 136)
ROW_KERNELS(q4_k, 256, 144)
ROW_KERNELS(q5_k, 256, 176)
ROW_KERNELS(q6_k, 256, 210)
ROW_KERNELS(q2_k, 256, 84)
ROW_KERNELS(q3_k, 256, 110)
ROW_KERNELS(iq1_s, 256, K3_IQ1_S_BLOCK_BYTES)
ROW_KERNELS(iq1_m, 256, K3_IQ1_M_BLOCK_BYTES)

/* Bytes ahead of the block being read that the four-row kernels prefetch
 * in each row stream: matvec.c's measured distance (PREFETCH_AHEAD_BYTES). */
#define QUANT_PREFETCH_AHEAD_BYTES 2048

/* Prefetch one cache line per 64 bytes of a block, that far ahead: with
 * four streams per thread the hardware prefetcher alone leaves the read
 * bandwidth unused (matvec.c's measurements). */
K3_INLINE void prefetch_block_ahead(const uint8_t *blk, int bytes)
{
    for (int at = 0; at < bytes; at += 64) __builtin_prefetch(blk + QUANT_PREFETCH_AHEAD_BYTES + at, 0, 3);
}

/* A type's dot products of four rows at once: each row keeps its own two
 * canonical accumulators (the same fmas in the same order as its one-row
 * kernel, so the same bits), and the four rows give eight independent fma
 * chains where one row's two chains left the kernel waiting on the fma
 * latency; the blocks of the four rows are decoded one after the other,
 * sharing the loads of x. */
#define ROWS4_KERNEL(type, elems, bytes) \
    static void dot_rows4_##type(const uint8_t *const *rows, int64_t cols, const float *x, float *out) \
    { \
        v8f acc0[4], acc1[4]; \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc0[r] = acc1[r] = v8_zero(); \
        for (int64_t c = 0, at = 0; c < cols; c += elems, at += bytes) \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) { \
                prefetch_block_ahead(rows[r] + at, bytes); \
                block_##type(rows[r] + at, c, x, NULL, &acc0[r], &acc1[r]); \
            } \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) out[r] = v8_hsum(v8_add(acc0[r], acc1[r])); \
    }

ROWS4_KERNEL(q8_0, 32, 34)
ROWS4_KERNEL(q4_0, 32, 18)
ROWS4_KERNEL(q5_0, 32, 22)
ROWS4_KERNEL(q4_1, 32, 20)
ROWS4_KERNEL(q5_1, 32, 24)
ROWS4_KERNEL(mxfp4, 32, 17)
ROWS4_KERNEL(iq4_nl, 32, 18)
ROWS4_KERNEL(iq4_xs, 256, 136)
ROWS4_KERNEL(q4_k, 256, 144)
ROWS4_KERNEL(q5_k, 256, 176)
ROWS4_KERNEL(q6_k, 256, 210)
ROWS4_KERNEL(q2_k, 256, 84)
ROWS4_KERNEL(q3_k, 256, 110)

typedef void (*dot_rows4_fn)(const uint8_t *const *rows, int64_t cols, const float *x, float *out);

/* The four-row kernels by ggml type (the types not named keep one row at
 * a time). */
static const struct {
    uint32_t ggml_id;
    dot_rows4_fn dot4;
} rows4_kernels[] = {
    {K3_GGML_Q8_0, dot_rows4_q8_0},     {K3_GGML_Q4_0, dot_rows4_q4_0},   {K3_GGML_Q5_0, dot_rows4_q5_0},
    {K3_GGML_Q4_1, dot_rows4_q4_1},     {K3_GGML_Q5_1, dot_rows4_q5_1},   {K3_GGML_MXFP4, dot_rows4_mxfp4},
    {K3_GGML_IQ4_NL, dot_rows4_iq4_nl}, {K3_GGML_IQ4_XS, dot_rows4_iq4_xs}, {K3_GGML_Q4_K, dot_rows4_q4_k},
    {K3_GGML_Q5_K, dot_rows4_q5_k},     {K3_GGML_Q6_K, dot_rows4_q6_k},   {K3_GGML_Q2_K, dot_rows4_q2_k},
    {K3_GGML_Q3_K, dot_rows4_q3_k},
};

/* Type t's four-row kernel, or NULL. */
static dot_rows4_fn rows4_kernel(const k3_quant_type *t)
{
    for (int i = 0; i < (int)(sizeof rows4_kernels / sizeof rows4_kernels[0]); i++)
        if (rows4_kernels[i].ggml_id == t->ggml_id) return rows4_kernels[i].dot4;
    return NULL;
}

#if defined(K3_HAVE_MXFP4_GGUF_LANES)
/* GGUF MXFP4's weights by scale byte as bf16 bytes (quant_mxfp4_lanes.h),
 * each entry the scalar decoder's own value: block e, j, j, ... decodes to
 * the 16 nibble values at scale e. */
static k3_mxfp4_bf16_bytes mxfp4_gguf_tables[256] __attribute__((aligned(64)));

/* Fill mxfp4_gguf_tables from the scalar decoder, so that a looked-up
 * weight is the reference's value by construction (once, pthread_once). */
static void fill_mxfp4_gguf_tables(void)
{
    const k3_quant_type *t = k3_quant_type_by_id(K3_GGML_MXFP4);
    for (int e = 0; e < 256; e++) {
        uint8_t block[17];
        float values[32];
        block[0] = (uint8_t)e;
        for (int j = 0; j < 16; j++) block[1 + j] = (uint8_t)j;
        k3_quant_decode_scalar(t, block, 32, values);
        for (int j = 0; j < 32; j++) {
            uint32_t bits;
            memcpy(&bits, &values[j % 16], sizeof bits);
            mxfp4_gguf_tables[e].low[j] = (uint8_t)(bits >> 16);
            mxfp4_gguf_tables[e].high[j] = (uint8_t)(bits >> 24);
        }
    }
}

static const int mxfp4_gguf_lane_columns[16] = MXFP4_GGUF_LANE_COLUMNS;

/* The canonical end hsum(A0 + A1) of a row whose chains sit in the lane
 * order (as matvec.c's mxfp4_lanes_sum). */
K3_INLINE float mxfp4_gguf_lanes_sum(v8f acc0, v8f acc1)
{
    float lanes[16], chain[16], sums[8];
    v8_storeu(lanes, acc0);
    v8_storeu(lanes + 8, acc1);
#pragma GCC unroll 16
    for (int l = 0; l < 16; l++) chain[mxfp4_gguf_lane_columns[l]] = lanes[l];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) sums[i] = chain[i] + chain[i + 8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) sums[i] += sums[i + 4];
    return (sums[0] + sums[2]) + (sums[1] + sums[3]);
}

/* Four GGUF MXFP4 rows against x in the lane order: per block, each row's
 * 32 weights looked up (v32_from_mxfp4_gguf_lanes) and four fmas, chunk 2g
 * before chunk 2g + 1 in every chain, the packed MXFP4 kernel's walk. */
static void dot_rows4_mxfp4_lanes(const uint8_t *const *rows, int64_t cols, const float *x_lanes, float *out)
{
    v8f acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) acc0[r] = acc1[r] = v8_zero();
    for (int64_t g = 0, at = 0; g < cols / 32; g++, at += 17) {
        const float *xg = x_lanes + 32 * g;
        const v8f x0 = v8_loadu(xg), x1 = v8_loadu(xg + 8), x2 = v8_loadu(xg + 16), x3 = v8_loadu(xg + 24);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const uint8_t *blk = rows[r] + at;
            __builtin_prefetch(blk + QUANT_PREFETCH_AHEAD_BYTES, 0, 3);
            v8f w[4];
            v32_from_mxfp4_gguf_lanes(blk + 1, &mxfp4_gguf_tables[blk[0]], w);
            acc0[r] = v8_fma(w[0], x0, acc0[r]);
            acc1[r] = v8_fma(w[1], x1, acc1[r]);
            acc0[r] = v8_fma(w[2], x2, acc0[r]);
            acc1[r] = v8_fma(w[3], x3, acc1[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) out[r] = mxfp4_gguf_lanes_sum(acc0[r], acc1[r]);
}
#endif

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
    {K3_GGML_Q4_1, dot_row_q4_1, decode_row_q4_1},
    {K3_GGML_Q5_1, dot_row_q5_1, decode_row_q5_1},
    {K3_GGML_MXFP4, dot_row_mxfp4, decode_row_mxfp4},
    {K3_GGML_IQ4_NL, dot_row_iq4_nl, decode_row_iq4_nl},
    {K3_GGML_IQ4_XS, dot_row_iq4_xs, decode_row_iq4_xs},
    {K3_GGML_Q4_K, dot_row_q4_k, decode_row_q4_k},
    {K3_GGML_Q5_K, dot_row_q5_k, decode_row_q5_k},
    {K3_GGML_Q6_K, dot_row_q6_k, decode_row_q6_k},
    {K3_GGML_Q2_K, dot_row_q2_k, decode_row_q2_k},
    {K3_GGML_Q3_K, dot_row_q3_k, decode_row_q3_k},
    {K3_GGML_IQ2_XXS, k3_iq2_xxs_dot_row, k3_iq2_xxs_decode_row},
    {K3_GGML_IQ2_XS, k3_iq2_xs_dot_row, k3_iq2_xs_decode_row},
    {K3_GGML_IQ2_S, k3_iq2_s_dot_row, k3_iq2_s_decode_row},
    {K3_GGML_IQ3_XXS, k3_iq3_xxs_dot_row, k3_iq3_xxs_decode_row},
    {K3_GGML_IQ3_S, k3_iq3_s_dot_row, k3_iq3_s_decode_row},
    {K3_GGML_IQ1_S, dot_row_iq1_s, decode_row_iq1_s},
    {K3_GGML_IQ1_M, dot_row_iq1_m, decode_row_iq1_m},
};

/* Index of type t's kernels in row_kernels, or -1 (F32/F16/BF16). */
static int row_kernel_index(const k3_quant_type *t)
{
    for (int i = 0; i < (int)(sizeof row_kernels / sizeof row_kernels[0]); i++)
        if (row_kernels[i].ggml_id == t->ggml_id) return i;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* The q8 activation path (k3_kernels_set_activations_q8)                    */
/* ------------------------------------------------------------------------ */

/* As llama.cpp computes its dot products: x is quantized per block to int8
 * with one fp32 scale, a block's dot product with the weights' integer
 * codes is exact in int32, and one float multiply-add per block applies
 * the scales. Every block type has a q8 kernel: Q8_0, Q4_0, Q5_0, Q4_1,
 * Q5_1, IQ4_NL and MXFP4 take x per 32 columns (llama.cpp's Q8_0; for Q4_1
 * and Q5_1 llama.cpp's Q8_1 carries d times the code sum, here the min
 * meets the exact integer code sum instead, as the K-quants' mins do), the
 * K-quants, IQ4_XS, the IQ2/IQ3 grid types, IQ1_S and IQ1_M per 256
 * columns (llama.cpp's Q8_K); F32/F16/BF16 stay exact.
 *
 * Its own contract, bit-identical across back ends, thread counts, matvec
 * and matmul:
 *
 *   x per 32 columns: amax = the largest |x| (NaN skipped), d = amax / 127,
 *   code = rintf(x * (127 / amax)) clamped to [-127, 127] (NaN -> -127; all
 *   0 when amax is 0), as mxfp4_q8.c quantizes. x per 256 columns (Q8_K):
 *   m = the first value of largest |x|; when |m| is 0, d = 0 and codes 0;
 *   else s = -127 / m, code = rintf(x * s) clamped as above, d = 1 / s.
 *
 *   A weight block is the decoder's integer codes in 16-weight chunks, each
 *   with an integer sub-scale (1 for the 32-blocks; the group's scale for
 *   Q4_K, Q5_K and IQ4_XS (minus 32), the chunk's for Q6_K, Q3_K (minus
 *   32) and Q2_K) and, for Q4_K, Q5_K, Q2_K, Q4_1 and Q5_1, an integer
 *   sub-min (1 for Q4_1 and Q5_1; the codes are then unsigned: nibble,
 *   nibble | fifth bit, 2 bits; Q6_K's and Q3_K's carry their offsets -32
 *   and -4); d_w (and dmin_w) the block's fp32 scales as the decoder has
 *   them (MXFP4: 2^(e - 128) with the doubled E2M1 codes; Q4_1 and Q5_1:
 *   dmin_w = -m, as their weights add m; IQ1_S and IQ1_M: codes 8 level + 1
 *   or 8 level - 1 (the level shifted by +-1/8, in eighths), sub-scale
 *   2 s + 1, d_w = d / 8; IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: codes the
 *   signed grid magnitudes, sub-scale 2 s + 1 (per 32 or 16 weights),
 *   d_w = d / 8, d / 8, d / 8, d / 4, d: quant_iq_lanes.h). Per block, the
 *   int32 lanes
 *     S_l = sum over chunks m of sub_scale_m * (code[16m + 2l] q[16m + 2l]
 *                                              + code[16m + 2l + 1] q[16m + 2l + 1])
 *   and M = sum over chunks of sub_min_m * (sum of the chunk's 16 q) are
 *   exact (|S_l| <= 16 chunks x 2 x 127 x the largest |code x sub-scale|,
 *   IQ4_XS's 127 x 32 or Q6_K's 32 x 128; the grid types' 62 x 31 and
 *   IQ1's 9 x 15 are below both: below 2^24, so (float) is exact too);
 *   then 8 fp32 lanes
 *   L (from +0) take L_l = fma((float)S_l, d_w * d_x, L_l) and a scalar
 *   min sum (from +0) takes fmaf((float)M, dmin_w * d_x, mins), each
 *   product of scales one fp32 multiply. The row is hsum(L) (the canonical
 *   tree) - mins.
 *
 * q8_row_scalar states it in plain C from integer codes decoded one by one;
 * the vector rows compute the same integers (in any order: integer sums
 * are exact) and then the same fp32 operations. */

/* One token's quantized x: codes in column order, a scale per activation
 * block, and (256-column blocks) the sum of the codes of each 16 columns. */
typedef struct {
    int8_t *q;
    float *d;
    int16_t *bsums;
} q8_act;

/* x * inverse clamped to [-127, 127] (NaN -> -127) and rounded to nearest
 * even: a defined code for any input. */
static int8_t q8_code(float v)
{
    if (!(v >= -127.0f)) v = -127.0f;
    if (v > 127.0f) v = 127.0f;
    return (int8_t)rintf(v);
}

/* 127 / amax, or 0 for an all-zero block: the one division per 32 columns. */
static float q8_inverse_32(float amax)
{
    return amax > 0.0f ? 127.0f / amax : 0.0f;
}

/* x per 32 columns (the contract above; llama.cpp's Q8_0 activations),
 * with the code sums of each 16 columns (Q4_1 and Q5_1 take them); on
 * AVX2 by kernels_x86.h's group quantizer, which mxfp4_q8.c's contract
 * (the same rule) holds to the scalar loop. */
static void q8_quantize_32(const float *x, int64_t cols, q8_act *xa)
{
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *xb = x + 32 * b;
#if defined(K3_HAVE_Q8_QUANTIZE_GROUP)
        if (!k3_kernels_scalar_forced()) {   /* the same codes 8 columns at a time (mxfp4_q8.c's contract) */
            int32_t codes[32];
            xa->d[b] = q8_quantize_group_columns(xb, q8_inverse_32, codes) / 127.0f;
            for (int j = 0; j < 32; j++) xa->q[32 * b + j] = (int8_t)codes[j];
        } else
#endif
        {
            float amax = 0.0f;
            for (int j = 0; j < 32; j++)
                if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
            const float inverse = q8_inverse_32(amax);
            xa->d[b] = amax / 127.0f;
            for (int j = 0; j < 32; j++) xa->q[32 * b + j] = q8_code(xb[j] * inverse);
        }
        for (int m = 0; m < 2; m++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += xa->q[32 * b + 16 * m + j];
            xa->bsums[2 * b + m] = (int16_t)sum;
        }
    }
}

/* x per 256 columns (the contract above; llama.cpp's Q8_K), with the code
 * sums of each 16 columns; on AVX2 the largest magnitude and the codes 8
 * lanes at a time (kernels_x86.h, the same IEEE operations per element). */
static void q8_quantize_256(const float *x, int64_t cols, q8_act *xa)
{
    for (int64_t b = 0; b < cols / 256; b++) {
        const float *xb = x + 256 * b;
        int8_t *q = xa->q + 256 * b;
        float amax = 0.0f, max = 0.0f;
#if defined(K3_HAVE_Q8_SCALED_CODES)
        const int vector = !k3_kernels_scalar_forced();
        if (vector) {   /* the same amax 8 lanes at a time, then its first value */
            amax = q8_abs_max(xb, 256);
            for (int j = 0; j < 256 && amax > 0.0f; j++)
                if (fabsf(xb[j]) == amax) {
                    max = xb[j];
                    break;
                }
        } else
#endif
            for (int j = 0; j < 256; j++)
                if (fabsf(xb[j]) > amax) {
                    amax = fabsf(xb[j]);
                    max = xb[j];
                }
        if (amax == 0.0f) {
            xa->d[b] = 0.0f;
            memset(q, 0, 256);
        } else {
            const float iscale = -127.0f / max;
#if defined(K3_HAVE_Q8_SCALED_CODES)
            if (vector) q8_scaled_codes(xb, 256, iscale, q);
            else
#endif
                for (int j = 0; j < 256; j++) q[j] = q8_code(xb[j] * iscale);
            xa->d[b] = 1.0f / iscale;
        }
        for (int m = 0; m < 16; m++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += q[16 * m + j];
            xa->bsums[16 * b + m] = (int16_t)sum;
        }
    }
}

/* The q8 row kernels take 1 to Q8_TOKENS tokens' quantized x at once (a
 * prompt): each pair of 16-weight chunks is decoded and made ready
 * (q8w_prepare) once and dotted with every token's codes, and each token
 * keeps its own lanes, sums and min sum, so its value is the same
 * operations whatever the count. Instantiated for 1 and Q8_TOKENS tokens
 * (Q8_INSTANCES), where the token loops unroll. Every kernel takes a
 * block's codes 32 at a time (v32b, quant_lanes.h): on AVX2 one vpmaddubsw
 * and one vpmaddwd per 32 weights and token give the contract's int32
 * lanes, where the 16-code path needed two widenings and two vpmaddwd. */
#define Q8_TOKENS 4
#define Q8_ARGS const uint8_t *row, int64_t cols, const q8_act *const *xa, int n_tokens, float *out
#define FOR_TOKENS _Pragma("GCC unroll 4") for (int t = 0; t < n_tokens; t++)

/* For a 32-block type: its rows under q8. codes_of is a block's 32 codes
 * (at blk) as its exact block decoder has them (signed bytes when
 * is_signed, else unsigned ones), d_of the decoder's block scale; for the
 * types with a min (has_min: Q4_1, Q5_1, weights d q + m) dmin_of is -m,
 * taken times the sum of the block's 32 activation codes (the two bsums)
 * into the min sum. (Two rows per pass, sharing each token's codes, was
 * slower than one in a 2-thread decode of the Kimi Linear Q8_0 file, in 4
 * of 4 interleaved rounds: decode takes one row at a time.) */
#define Q8_ROWS_32(type, bytes, is_signed, has_min, d_of, dmin_of, codes_of) \
    K3_INLINE void q8_rows_##type(Q8_ARGS) \
    { \
        v8f lanes[Q8_TOKENS]; \
        float mins[Q8_TOKENS]; \
        FOR_TOKENS { \
            lanes[t] = v8_zero(); \
            mins[t] = 0.0f; \
        } \
        const uint8_t *blk = row; \
        for (int64_t b = 0; b < cols / 32; b++, blk += bytes) { \
            prefetch_block_ahead(blk, bytes); \
            const q8w w = q8w_prepare(codes_of, is_signed, 1, 1); \
            const float d_w = d_of; \
            FOR_TOKENS { \
                const float d_x = xa[t]->d[b]; \
                lanes[t] = v8_fma(v8f_from_v8i(v8i_dot_q8w(w, xa[t]->q + 32 * b)), v8_set1(d_w * d_x), lanes[t]); \
                if (has_min) \
                    mins[t] = fmaf((float)(xa[t]->bsums[2 * b] + xa[t]->bsums[2 * b + 1]), (dmin_of) * d_x, mins[t]); \
            } \
        } \
        FOR_TOKENS out[t] = v8_hsum(lanes[t]) - mins[t]; \
    }
Q8_ROWS_32(q8_0, 34, 1, 0, f16_scale_at(blk), 0.0f, v32b_load(blk + 2))
Q8_ROWS_32(q4_0, 18, 1, 0, f16_scale_at(blk), 0.0f, v32b_sub_const(v32b_nibbles(blk + 2), 8))
Q8_ROWS_32(q5_0, 22, 1, 0, f16_scale_at(blk), 0.0f,
           v32b_sub_const(v32b_or_shl(v32b_nibbles(blk + 6), v32b_from_bits(blk + 2, 0x10), 0), 16))
Q8_ROWS_32(iq4_nl, 18, 1, 0, f16_scale_at(blk), 0.0f, v32b_lookup(iq4_levels, v32b_nibbles(blk + 2)))
#if defined(K3_HAVE_MXFP4_GGUF_LANES)
/* MXFP4 under q8 on x86: Q8_ROWS_32's walk with the codes decoded straight
 * into the grouped order (q8w_mxfp4_gguf); no min (x - +0 is x). */
K3_INLINE void q8_rows_mxfp4(Q8_ARGS)
{
    v8f lanes[Q8_TOKENS];
    FOR_TOKENS lanes[t] = v8_zero();
    const uint8_t *blk = row;
    for (int64_t b = 0; b < cols / 32; b++, blk += 17) {
        prefetch_block_ahead(blk, 17);
        const q8w w = q8w_mxfp4_gguf(blk + 1);
        const float d_w = e8m0_half_scale(blk[0]);
        FOR_TOKENS lanes[t] = v8_fma(v8f_from_v8i(v8i_dot_q8w(w, xa[t]->q + 32 * b)), v8_set1(d_w * xa[t]->d[b]),
                                     lanes[t]);
    }
    FOR_TOKENS out[t] = v8_hsum(lanes[t]);
}
#else
Q8_ROWS_32(mxfp4, 17, 1, 0, e8m0_half_scale(blk[0]), 0.0f, v32b_lookup(mxfp4_doubled_e2m1, v32b_nibbles(blk + 1)))
#endif
Q8_ROWS_32(q4_1, 20, 0, 1, f16_scale_at(blk), -f16_scale_at(blk + 2), v32b_nibbles(blk + 4))
Q8_ROWS_32(q5_1, 24, 0, 1, f16_scale_at(blk), -f16_scale_at(blk + 2),
           v32b_or_shl(v32b_nibbles(blk + 8), v32b_from_bits(blk + 4, 0x10), 0))

/* A 256-block type's per-token state: int32 lanes within the block, fp32
 * lanes and the min sum across blocks. */
typedef struct {
    v8i sums[Q8_TOKENS];
    int min_sums[Q8_TOKENS];
    v8f lanes[Q8_TOKENS];
    float mins[Q8_TOKENS];
} q8_k_state;

/* Start the row: every token's lanes and min sum at +0. */
K3_INLINE void q8_k_begin_row(q8_k_state *st, int n_tokens)
{
    FOR_TOKENS {
        st->lanes[t] = v8_zero();
        st->mins[t] = 0.0f;
    }
}

/* Start a block: the integer sums at 0. */
K3_INLINE void q8_k_begin_block(q8_k_state *st, int n_tokens)
{
    FOR_TOKENS {
        st->sums[t] = v8i_zero();
        st->min_sums[t] = 0;
    }
}

/* Chunks m and m + 1 (m even: columns 16 m .. 16 m + 31 of block b), their
 * codes with integer sub-scales scale_a, scale_b and sub-mins min_a, min_b
 * (0 where the type has none), against each token's 32 codes: the scales
 * times the pair sums, and each min times its chunk's code sum, all exact
 * in int32. */
K3_INLINE void q8_k_pair_w(q8_k_state *st, q8w w, int min_a, int min_b, int64_t b, int m, const q8_act *const *xa,
                           int n_tokens)
{
    FOR_TOKENS {
        st->sums[t] = v8i_add(st->sums[t], v8i_dot_q8w(w, xa[t]->q + 256 * b + 16 * m));
        st->min_sums[t] += min_a * xa[t]->bsums[16 * b + m] + min_b * xa[t]->bsums[16 * b + m + 1];
    }
}

/* The same from the pair's codes (is_signed: signed bytes, else unsigned
 * ones below 128). */
K3_INLINE void q8_k_pair(q8_k_state *st, v32b codes, int is_signed, int scale_a, int scale_b, int min_a, int min_b,
                         int64_t b, int m, const q8_act *const *xa, int n_tokens)
{
    q8_k_pair_w(st, q8w_prepare(codes, is_signed, scale_a, scale_b), min_a, min_b, b, m, xa, n_tokens);
}

/* End block b: one fma per lane with d_w * d_x, one for the mins. */
K3_INLINE void q8_k_end_block(q8_k_state *st, float d_w, float dmin_w, int64_t b, const q8_act *const *xa,
                              int n_tokens)
{
    FOR_TOKENS {
        const float d_x = xa[t]->d[b];
        st->lanes[t] = v8_fma(v8f_from_v8i(st->sums[t]), v8_set1(d_w * d_x), st->lanes[t]);
        st->mins[t] = fmaf((float)st->min_sums[t], dmin_w * d_x, st->mins[t]);
    }
}

/* End the row: the canonical sum of each token's lanes, minus its mins
 * (+0 for the types without mins: x - +0 is x). */
K3_INLINE void q8_k_end_row(q8_k_state *st, int n_tokens, float *out)
{
    FOR_TOKENS out[t] = v8_hsum(st->lanes[t]) - st->mins[t];
}

/* A K-quant's q8 rows from its block body q8_block_<type> (one 256-weight
 * block of one row into the state, for 1 to Q8_TOKENS tokens): the rows
 * for the matmul and the one-token matvec (q8_rows_<type>), and four rows
 * for one token (q8_rows4x1_<type>), each row with its own state, so the
 * same operations per row, over four quarter streams in the matvec. */
#define Q8_K_ROWS(type, bytes) \
    K3_INLINE void q8_rows_##type(Q8_ARGS) \
    { \
        q8_k_state st; \
        q8_k_begin_row(&st, n_tokens); \
        for (int64_t b = 0; b < cols / 256; b++, row += bytes) { \
            prefetch_block_ahead(row, bytes); \
            q8_block_##type(&st, row, b, xa, n_tokens); \
        } \
        q8_k_end_row(&st, n_tokens, out); \
    } \
    static void q8_rows4x1_##type(const uint8_t *const *rows, int64_t cols, const q8_act *xa, float *out) \
    { \
        q8_k_state st[4]; \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) q8_k_begin_row(&st[r], 1); \
        for (int64_t b = 0; b < cols / 256; b++) \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) { \
                const uint8_t *blk = rows[r] + b * bytes; \
                prefetch_block_ahead(blk, bytes); \
                q8_block_##type(&st[r], blk, b, &xa, 1); \
            } \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) q8_k_end_row(&st[r], 1, &out[r]); \
    }

/* Q4_K under q8: group g (chunks 2g, 2g + 1) is the low or high nibbles of
 * 32 bytes, times the group scale, its min times the chunks' code sums. */
K3_INLINE void q8_block_q4_k(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int sc, m;
        k_scale_min(g, row + 4, &sc, &m);
        const v32b codes = v32b_shr_and(v32b_load(row + 16 + 32 * (g / 2)), 4 * (g & 1), 0x0F);
        q8_k_pair(st, codes, 0, sc, sc, m, m, b, 2 * g, xa, n_tokens);
    }
    q8_k_end_block(st, f16_scale_at(row), f16_scale_at(row + 2), b, xa, n_tokens);
}
Q8_K_ROWS(q4_k, 144)

/* Q5_K under q8: Q4_K with the fifth bits (bit g of the 32 bytes at 16) in
 * the codes (0..31). */
K3_INLINE void q8_block_q5_k(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int sc, m;
        k_scale_min(g, row + 4, &sc, &m);
        const v32b nibbles = v32b_shr_and(v32b_load(row + 48 + 32 * (g / 2)), 4 * (g & 1), 0x0F);
        const v32b fifth = v32b_shr_and(v32b_load(row + 16), g, 1);
        q8_k_pair(st, v32b_or_shl(nibbles, fifth, 4), 0, sc, sc, m, m, b, 2 * g, xa, n_tokens);
    }
    q8_k_end_block(st, f16_scale_at(row), f16_scale_at(row + 2), b, xa, n_tokens);
}
Q8_K_ROWS(q5_k, 176)

/* Q6_K under q8: in each 128-weight half, chunks 2k and 2k + 1 are 32
 * bytes of ql (low nibbles for k < 2, else high; q6_k_codes) and the
 * 2-bit field k of the half's 32 qh bytes; codes q - 32, each chunk its
 * own int8 scale. */
K3_INLINE void q8_block_q6_k(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 2
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = row + 64 * half, *qh = row + 128 + 32 * half;
        const int8_t *scales = (const int8_t *)(row + 192 + 8 * half);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const v32b low4 = v32b_shr_and(v32b_load(ql + 32 * (k % 2)), k >= 2 ? 4 : 0, 0x0F);
            const v32b high2 = v32b_shr_and(v32b_load(qh), 2 * k, 3);
            q8_k_pair(st, v32b_sub_const(v32b_or_shl(low4, high2, 4), 32), 1, scales[2 * k], scales[2 * k + 1], 0, 0,
                      b, 8 * half + 2 * k, xa, n_tokens);
        }
    }
    q8_k_end_block(st, f16_scale_at(row + 208), 0.0f, b, xa, n_tokens);
}
Q8_K_ROWS(q6_k, 210)

/* Q2_K under q8: chunks m and m + 1 (m even) are 2-bit field (m % 8) / 2
 * of 32 quant bytes, each times its scale nibble, its min nibble times
 * its code sum. */
K3_INLINE void q8_block_q2_k(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 8
    for (int m = 0; m < 16; m += 2) {
        const v32b codes = v32b_shr_and(v32b_load(row + 16 + 32 * (m / 8)), 2 * ((m % 8) / 2), 3);
        q8_k_pair(st, codes, 0, row[m] & 0x0F, row[m + 1] & 0x0F, row[m] >> 4, row[m + 1] >> 4, b, m, xa,
                  n_tokens);
    }
    q8_k_end_block(st, f16_scale_at(row + 80), f16_scale_at(row + 82), b, xa, n_tokens);
}
Q8_K_ROWS(q2_k, 84)

/* Q3_K under q8: chunks m and m + 1 (m even) are the 2-bit field (m % 8) / 2
 * of 32 quant bytes with high bit 4 (m / 8) + (m % 8) / 2 of the 32 hmask
 * bytes, codes (q | bit << 2) - 4, each chunk its 6-bit scale - 32. */
K3_INLINE void q8_block_q3_k(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 8
    for (int m = 0; m < 16; m += 2) {
        const int field = (m % 8) / 2;
        const v32b q = v32b_shr_and(v32b_load(row + 32 + 32 * (m / 8)), 2 * field, 3);
        const v32b high = v32b_shr_and(v32b_load(row), 4 * (m / 8) + field, 1);
        q8_k_pair(st, v32b_sub_const(v32b_or_shl(q, high, 2), 4), 1, q3_k_scale(row, m), q3_k_scale(row, m + 1),
                  0, 0, b, m, xa, n_tokens);
    }
    q8_k_end_block(st, f16_scale_at(row + 108), 0.0f, b, xa, n_tokens);
}
Q8_K_ROWS(q3_k, 110)

/* IQ4_XS under q8: group g's level codes (chunks 2g, 2g + 1: the low and
 * high nibbles of 16 bytes) times its 6-bit scale - 32. */
K3_INLINE void q8_block_iq4_xs(q8_k_state *st, const uint8_t *row, int64_t b, const q8_act *const *xa, int n_tokens)
{
    const unsigned scales_high = (unsigned)row[2] | (unsigned)row[3] << 8;
    q8_k_begin_block(st, n_tokens);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
        int scale = ((row[4 + g / 2] >> (4 * (g % 2))) & 0x0F) | (int)((scales_high >> (2 * g)) & 3) << 4;
        const v32b codes = v32b_lookup(iq4_levels, v32b_nibbles(row + 8 + 16 * g));
        q8_k_pair(st, codes, 1, scale - 32, scale - 32, 0, 0, b, 2 * g, xa, n_tokens);
    }
    q8_k_end_block(st, f16_scale_at(row), 0.0f, b, xa, n_tokens);
}
Q8_K_ROWS(iq4_xs, 136)

/* IQ1_S / IQ1_M under q8: each chunk's codes 8 level +- 1 (quant_iq1_lanes.h)
 * times its 2 s + 1, chunks k and k + 1 as one pair; the block scale d / 8
 * (exact). */
K3_INLINE void q8_rows_iq1(int is_m, Q8_ARGS)
{
    const int64_t block_bytes = is_m ? K3_IQ1_M_BLOCK_BYTES : K3_IQ1_S_BLOCK_BYTES;
    q8_k_state st;
    q8_k_begin_row(&st, n_tokens);
    for (int64_t b = 0; b < cols / 256; b++, row += block_bytes) {
        q8_k_begin_block(&st, n_tokens);
#pragma GCC unroll 8
        for (int k = 0; k < 16; k += 2) {
            const iq1_chunk f = is_m ? iq1_m_fields(row, k) : iq1_s_fields(row, k);
            const iq1_chunk g = is_m ? iq1_m_fields(row, k + 1) : iq1_s_fields(row, k + 1);
            q8_k_pair(&st, v32b_join(iq1_chunk_codes(f), iq1_chunk_codes(g)), 1, 2 * f.scale_bits + 1,
                      2 * g.scale_bits + 1, 0, 0, b, k, xa, n_tokens);
        }
        q8_k_end_block(&st, (is_m ? iq1_m_scale(row) : f16_scale_at(row)) * 0.125f, 0.0f, b, xa, n_tokens);
    }
    q8_k_end_row(&st, n_tokens, out);
}

K3_INLINE void q8_rows_iq1_s(Q8_ARGS) { q8_rows_iq1(0, row, cols, xa, n_tokens, out); }
K3_INLINE void q8_rows_iq1_m(Q8_ARGS) { q8_rows_iq1(1, row, cols, xa, n_tokens, out); }

/* The IQ2/IQ3 grid types under q8 (id a constant once inlined), as
 * llama.cpp's vec_dot of each with Q8_K: group g's two chunks are one
 * pair, their grid magnitudes and sign lanes (quant_iq_lanes.h, the exact
 * kernels' decoder; on AVX2 the signs go to x by vpsignb, no code is
 * formed) times the odd sub-scales 2 s + 1, the block scale
 * d / 8 (IQ2), d / 4 (IQ3_XXS) or d (IQ3_S), all exact (an f16 d times a
 * power of two stays a normal fp32). The sums are exact on every back end:
 * |code| <= 62 and |q| <= 127, so a vpmaddubsw word is at most
 * 2 x 62 x 127 = 15748 < 2^15 (an int16 code x sub-scale, NEON and
 * generic, at most 62 x 31 = 1922), and a lane's 8 pairs a block at most
 * 8 x 2 x 15748 x 31 < 2^23 in int32. */
K3_INLINE void q8_rows_iq(uint32_t id, Q8_ARGS)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    const int64_t block_bytes = iq_block_bytes(id);
    const float d_factor = id == K3_GGML_IQ3_S ? 1.0f : id == K3_GGML_IQ3_XXS ? 0.25f : 0.125f;
    q8_k_state st;
    q8_k_begin_row(&st, n_tokens);
    for (int64_t b = 0; b < cols / 256; b++, row += block_bytes) {
        q8_k_begin_block(&st, n_tokens);
#pragma GCC unroll 8
        for (int g = 0; g < 8; g++) {
            const iq_chunk first = iq_chunk_at(id, grids, row, g, 0), second = iq_chunk_at(id, grids, row, g, 1);
            const q8w w = q8w_prepare_signs(v32b_join(first.magnitudes, second.magnitudes),
                                            v32b_join(first.signs, second.signs),
                                            2 * iq_chunk_scale_bits(id, row, g, 0) + 1,
                                            2 * iq_chunk_scale_bits(id, row, g, 1) + 1);
            q8_k_pair_w(&st, w, 0, 0, b, 2 * g, xa, n_tokens);
        }
        q8_k_end_block(&st, f16_scale_at(row) * d_factor, 0.0f, b, xa, n_tokens);
    }
    q8_k_end_row(&st, n_tokens, out);
}

K3_INLINE void q8_rows_iq2_xxs(Q8_ARGS) { q8_rows_iq(K3_GGML_IQ2_XXS, row, cols, xa, n_tokens, out); }
K3_INLINE void q8_rows_iq2_xs(Q8_ARGS) { q8_rows_iq(K3_GGML_IQ2_XS, row, cols, xa, n_tokens, out); }
K3_INLINE void q8_rows_iq2_s(Q8_ARGS) { q8_rows_iq(K3_GGML_IQ2_S, row, cols, xa, n_tokens, out); }
K3_INLINE void q8_rows_iq3_xxs(Q8_ARGS) { q8_rows_iq(K3_GGML_IQ3_XXS, row, cols, xa, n_tokens, out); }
K3_INLINE void q8_rows_iq3_s(Q8_ARGS) { q8_rows_iq(K3_GGML_IQ3_S, row, cols, xa, n_tokens, out); }

/* Each type's q8 rows for one token and for Q8_TOKENS tokens. */
#define Q8_INSTANCES(type) \
    static void q8_rows1_##type(const uint8_t *row, int64_t cols, const q8_act *const *xa, float *out) \
    { \
        q8_rows_##type(row, cols, xa, 1, out); \
    } \
    static void q8_rows4_##type(const uint8_t *row, int64_t cols, const q8_act *const *xa, float *out) \
    { \
        q8_rows_##type(row, cols, xa, Q8_TOKENS, out); \
    }
Q8_INSTANCES(q8_0) Q8_INSTANCES(q4_0) Q8_INSTANCES(q5_0) Q8_INSTANCES(iq4_nl) Q8_INSTANCES(mxfp4)
Q8_INSTANCES(q4_1) Q8_INSTANCES(q5_1)
Q8_INSTANCES(q4_k) Q8_INSTANCES(q5_k) Q8_INSTANCES(q6_k) Q8_INSTANCES(q2_k) Q8_INSTANCES(q3_k) Q8_INSTANCES(iq4_xs)
Q8_INSTANCES(iq1_s) Q8_INSTANCES(iq1_m)
Q8_INSTANCES(iq2_xxs) Q8_INSTANCES(iq2_xs) Q8_INSTANCES(iq2_s) Q8_INSTANCES(iq3_xxs) Q8_INSTANCES(iq3_s)

/* A 32-block type's q8 rows four at a time for one token (the matvec):
 * each row keeps its own lanes and min sum and sees Q8_ROWS_32's
 * operations in the same order (the same bits), the token's codes and
 * scale are loaded once for the four rows, and the four fma chains are
 * independent. w_of is the block's q8w at blk (q8w_prepare of its codes,
 * sub-scales 1). */
#define Q8_ROWS4_32(type, bytes, has_min, d_of, dmin_of, w_of) \
    static void q8_rows4x1_##type(const uint8_t *const *rows, int64_t cols, const q8_act *xa, float *out) \
    { \
        v8f lanes[4]; \
        float mins[4]; \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) { \
            lanes[r] = v8_zero(); \
            mins[r] = 0.0f; \
        } \
        for (int64_t b = 0; b < cols / 32; b++) { \
            const float d_x = xa->d[b]; \
            const int8_t *q = xa->q + 32 * b; \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) { \
                const uint8_t *blk = rows[r] + b * bytes; \
                prefetch_block_ahead(blk, bytes); \
                const q8w w = w_of; \
                const float d_w = d_of; \
                lanes[r] = v8_fma(v8f_from_v8i(v8i_dot_q8w(w, q)), v8_set1(d_w * d_x), lanes[r]); \
                if (has_min) \
                    mins[r] = fmaf((float)(xa->bsums[2 * b] + xa->bsums[2 * b + 1]), (dmin_of) * d_x, mins[r]); \
            } \
        } \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) out[r] = v8_hsum(lanes[r]) - mins[r]; \
    }
Q8_ROWS4_32(q8_0, 34, 0, f16_scale_at(blk), 0.0f, q8w_prepare(v32b_load(blk + 2), 1, 1, 1))
Q8_ROWS4_32(q4_0, 18, 0, f16_scale_at(blk), 0.0f, q8w_prepare(v32b_sub_const(v32b_nibbles(blk + 2), 8), 1, 1, 1))
Q8_ROWS4_32(iq4_nl, 18, 0, f16_scale_at(blk), 0.0f, q8w_prepare(v32b_lookup(iq4_levels, v32b_nibbles(blk + 2)), 1, 1, 1))
Q8_ROWS4_32(q5_0, 22, 0, f16_scale_at(blk), 0.0f,
            q8w_prepare(v32b_sub_const(v32b_or_shl(v32b_nibbles(blk + 6), v32b_from_bits(blk + 2, 0x10), 0), 16), 1, 1, 1))
Q8_ROWS4_32(q4_1, 20, 1, f16_scale_at(blk), -f16_scale_at(blk + 2), q8w_prepare(v32b_nibbles(blk + 4), 0, 1, 1))
Q8_ROWS4_32(q5_1, 24, 1, f16_scale_at(blk), -f16_scale_at(blk + 2),
            q8w_prepare(v32b_or_shl(v32b_nibbles(blk + 8), v32b_from_bits(blk + 4, 0x10), 0), 0, 1, 1))
#if defined(K3_HAVE_MXFP4_GGUF_LANES)
Q8_ROWS4_32(mxfp4, 17, 0, e8m0_half_scale(blk[0]), 0.0f, q8w_mxfp4_gguf(blk + 1))
#else
Q8_ROWS4_32(mxfp4, 17, 0, e8m0_half_scale(blk[0]), 0.0f,
            q8w_prepare(v32b_lookup(mxfp4_doubled_e2m1, v32b_nibbles(blk + 1)), 1, 1, 1))
#endif

typedef void (*q8_rows4x1_fn)(const uint8_t *const *rows, int64_t cols, const q8_act *xa, float *out);

/* Type t's four-row q8 matvec kernel, or NULL (one row at a time). */
static q8_rows4x1_fn q8_rows4x1_kernel(const k3_quant_type *t)
{
    switch (t->ggml_id) {
    case K3_GGML_Q8_0: return q8_rows4x1_q8_0;
    case K3_GGML_Q4_0: return q8_rows4x1_q4_0;
    case K3_GGML_IQ4_NL: return q8_rows4x1_iq4_nl;
    case K3_GGML_MXFP4: return q8_rows4x1_mxfp4;
    case K3_GGML_Q5_0: return q8_rows4x1_q5_0;
    case K3_GGML_Q4_1: return q8_rows4x1_q4_1;
    case K3_GGML_Q5_1: return q8_rows4x1_q5_1;
    case K3_GGML_Q4_K: return q8_rows4x1_q4_k;
    case K3_GGML_Q6_K: return q8_rows4x1_q6_k;
    case K3_GGML_Q5_K: return q8_rows4x1_q5_k;
    case K3_GGML_Q2_K: return q8_rows4x1_q2_k;
    case K3_GGML_Q3_K: return q8_rows4x1_q3_k;
    case K3_GGML_IQ4_XS: return q8_rows4x1_iq4_xs;
    default: return NULL;
    }
}

/* One block's integer codes, the sub-scale and sub-min of each 16-weight
 * chunk, and its fp32 scales, decoded one weight at a time from the block
 * layouts (quant_types.h): the scalar reference's input. Returns 1 when
 * the type has mins. */
static int q8_block_ints_scalar(const k3_quant_type *t, const uint8_t *blk, int *codes, int *sub_scale,
                                int *sub_min, float *d, float *dmin)
{
    static const int8_t doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const int n = (int)t->block_elems;
    for (int m = 0; m < n / 16; m++) {
        sub_scale[m] = 1;
        sub_min[m] = 0;
    }
    *dmin = 0.0f;
    switch (t->ggml_id) {
    case K3_GGML_MXFP4:
        *d = k3_e8m0_half_to_f32(blk[0]);
        for (int j = 0; j < 32; j++) codes[j] = doubled_e2m1[(blk[1 + j % 16] >> (4 * (j / 16))) & 15];
        return 0;
    case K3_GGML_Q4_K:
        *d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        *dmin = k3_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
        for (int g = 0; g < 8; g++) {
            int sc, m;
            k_scale_min(g, blk + 4, &sc, &m);
            sub_scale[2 * g] = sub_scale[2 * g + 1] = sc;
            sub_min[2 * g] = sub_min[2 * g + 1] = m;
            for (int l = 0; l < 32; l++) codes[32 * g + l] = (blk[16 + 32 * (g / 2) + l] >> (4 * (g % 2))) & 15;
        }
        return 1;
    case K3_GGML_Q6_K:
        *d = k3_f16_to_f32((uint16_t)(blk[208] | blk[209] << 8));
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
            for (int m = 0; m < 8; m++) sub_scale[8 * half + m] = (int8_t)blk[192 + 8 * half + m];
            for (int l = 0; l < 32; l++) {
                codes[128 * half + l] = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
                codes[128 * half + l + 32] = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
                codes[128 * half + l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                codes[128 * half + l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            }
        }
        return 0;
    case K3_GGML_Q5_K:
        *d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        *dmin = k3_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
        for (int g = 0; g < 8; g++) {
            int sc, m;
            k_scale_min(g, blk + 4, &sc, &m);
            sub_scale[2 * g] = sub_scale[2 * g + 1] = sc;
            sub_min[2 * g] = sub_min[2 * g + 1] = m;
            for (int l = 0; l < 32; l++)
                codes[32 * g + l] = ((blk[48 + 32 * (g / 2) + l] >> (4 * (g % 2))) & 15) | ((blk[16 + l] >> g) & 1) << 4;
        }
        return 1;
    case K3_GGML_Q2_K:
        *d = k3_f16_to_f32((uint16_t)(blk[80] | blk[81] << 8));
        *dmin = k3_f16_to_f32((uint16_t)(blk[82] | blk[83] << 8));
        for (int m = 0; m < 16; m++) {
            sub_scale[m] = blk[m] & 15;
            sub_min[m] = blk[m] >> 4;
            for (int l = 0; l < 16; l++)
                codes[16 * m + l] = (blk[16 + 32 * (m / 8) + 16 * (m % 2) + l] >> (2 * ((m % 8) / 2))) & 3;
        }
        return 1;
    case K3_GGML_Q3_K:
        *d = k3_f16_to_f32((uint16_t)(blk[108] | blk[109] << 8));
        for (int m = 0; m < 16; m++) {
            int low4 = m < 8 ? blk[96 + m] & 15 : blk[96 + m - 8] >> 4;
            int high2 = (blk[104 + m % 4] >> (2 * (m / 4))) & 3;
            sub_scale[m] = (low4 | high2 << 4) - 32;
            for (int l = 0; l < 16; l++) {
                const int at = 16 * (m % 2) + l, pass = 4 * (m / 8) + (m % 8) / 2;
                int q = (blk[32 + 32 * (m / 8) + at] >> (2 * ((m % 8) / 2))) & 3;
                codes[16 * m + l] = q - ((blk[at] >> pass) & 1 ? 0 : 4);
            }
        }
        return 0;
    case K3_GGML_IQ1_S:
    case K3_GGML_IQ1_M:   /* quant_iq1.c, from the layouts */
        k3_iq1_block_ints(t->ggml_id == K3_GGML_IQ1_M, blk, codes, sub_scale, d);
        return 0;
    case K3_GGML_IQ2_XXS:
    case K3_GGML_IQ2_XS:
    case K3_GGML_IQ2_S:
    case K3_GGML_IQ3_XXS:
    case K3_GGML_IQ3_S:   /* quant_iq.c, from the layouts */
        k3_iq_block_ints(t->ggml_id, blk, codes, sub_scale, d);
        return 0;
    case K3_GGML_IQ4_XS: {
        *d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        const unsigned scales_high = (unsigned)blk[2] | (unsigned)blk[3] << 8;
        for (int g = 0; g < 8; g++) {
            int scale = ((blk[4 + g / 2] >> (4 * (g % 2))) & 15) | (int)((scales_high >> (2 * g)) & 3) << 4;
            sub_scale[2 * g] = sub_scale[2 * g + 1] = scale - 32;
            for (int j = 0; j < 32; j++) codes[32 * g + j] = iq4_levels[(blk[8 + 16 * g + j % 16] >> (4 * (j / 16))) & 15];
        }
        return 0;
    }
    case K3_GGML_Q4_1:
    case K3_GGML_Q5_1: {   /* d, m, (Q5_1: 32 fifth bits,) nibbles; weight d q + m, so dmin = -m */
        *d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        *dmin = -k3_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
        const int q5 = t->ggml_id == K3_GGML_Q5_1;
        const uint32_t high_bits = q5 ? (uint32_t)blk[4] | (uint32_t)blk[5] << 8 | (uint32_t)blk[6] << 16 |
                                            (uint32_t)blk[7] << 24 : 0;
        for (int j = 0; j < 32; j++)
            codes[j] = ((blk[(q5 ? 8 : 4) + j % 16] >> (4 * (j / 16))) & 15) | (int)((high_bits >> j) & 1) << 4;
        sub_min[0] = sub_min[1] = 1;
        return 1;
    }
    default:   /* Q8_0, Q4_0, Q5_0, IQ4_NL: f16 d first */
        *d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        for (int j = 0; j < 32; j++) {
            const int nibble = (blk[2 + j % 16] >> (4 * (j / 16))) & 15;
            if (t->ggml_id == K3_GGML_Q8_0) codes[j] = (int8_t)blk[2 + j];
            else if (t->ggml_id == K3_GGML_Q4_0) codes[j] = nibble - 8;
            else if (t->ggml_id == K3_GGML_IQ4_NL) codes[j] = iq4_levels[nibble];
            else {   /* Q5_0: nibbles after the 32 fifth bits */
                const uint32_t high_bits = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 |
                                           (uint32_t)blk[5] << 24;
                codes[j] = (((blk[6 + j % 16] >> (4 * (j / 16))) & 15) | (int)((high_bits >> j) & 1) << 4) - 16;
            }
        }
        return 0;
    }
}

/* The q8 contract in plain C for one row, from fp32 x: each block's x is
 * quantized on its own (the quantization is per block, so these are the
 * codes of the whole row's), which needs no buffer. */
static float q8_row_scalar(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x)
{
    const int n = (int)t->block_elems;
    float lanes[8] = {0}, mins = 0.0f;
    for (int64_t b = 0; b < cols / n; b++, row += t->block_bytes) {
        int codes[256], sub_scale[16], sub_min[16];
        float d, dmin;
        const int has_min = q8_block_ints_scalar(t, row, codes, sub_scale, sub_min, &d, &dmin);
        int8_t q[256];
        float d_block;
        int16_t bsums[16];
        q8_act block_x = {q, &d_block, bsums};
        if (n == 32) q8_quantize_32(x + 32 * b, 32, &block_x);
        else q8_quantize_256(x + 256 * b, 256, &block_x);
        int32_t sums[8] = {0}, min_sum = 0;
        for (int m = 0; m < n / 16; m++) {
            for (int l = 0; l < 8; l++) {
                const int j = 16 * m + 2 * l;
                sums[l] += sub_scale[m] * (codes[j] * q[j] + codes[j + 1] * q[j + 1]);
            }
            int q_sum = 0;
            for (int j = 0; j < 16; j++) q_sum += q[16 * m + j];
            min_sum += sub_min[m] * q_sum;
        }
        const float d_x = d_block;
        for (int l = 0; l < 8; l++) lanes[l] = fmaf((float)sums[l], d * d_x, lanes[l]);
        if (has_min) mins = fmaf((float)min_sum, dmin * d_x, mins);
    }
    for (int i = 0; i < 4; i++) lanes[i] += lanes[i + 4];
    for (int i = 0; i < 2; i++) lanes[i] += lanes[i + 2];
    return (lanes[0] + lanes[1]) - mins;
}

typedef void (*q8_rows_fn)(const uint8_t *row, int64_t cols, const q8_act *const *xa, float *out);

/* A type's q8 kernels: one token, and Q8_TOKENS tokens. */
typedef struct {
    q8_rows_fn one, four;
} q8_kernels;

/* The q8 kernels of type t; both NULL when the type keeps the exact path. */
static q8_kernels q8_kernel(const k3_quant_type *t)
{
#define Q8_CASE(ID, type) case ID: return (q8_kernels){q8_rows1_##type, q8_rows4_##type};
    switch (t->ggml_id) {
    Q8_CASE(K3_GGML_Q8_0, q8_0) Q8_CASE(K3_GGML_Q4_0, q4_0) Q8_CASE(K3_GGML_Q5_0, q5_0)
    Q8_CASE(K3_GGML_IQ4_NL, iq4_nl) Q8_CASE(K3_GGML_MXFP4, mxfp4) Q8_CASE(K3_GGML_Q4_K, q4_k)
    Q8_CASE(K3_GGML_Q5_K, q5_k) Q8_CASE(K3_GGML_Q6_K, q6_k) Q8_CASE(K3_GGML_Q2_K, q2_k)
    Q8_CASE(K3_GGML_Q3_K, q3_k) Q8_CASE(K3_GGML_IQ4_XS, iq4_xs) Q8_CASE(K3_GGML_Q4_1, q4_1)
    Q8_CASE(K3_GGML_Q5_1, q5_1) Q8_CASE(K3_GGML_IQ1_S, iq1_s) Q8_CASE(K3_GGML_IQ1_M, iq1_m)
    Q8_CASE(K3_GGML_IQ2_XXS, iq2_xxs) Q8_CASE(K3_GGML_IQ2_XS, iq2_xs) Q8_CASE(K3_GGML_IQ2_S, iq2_s)
    Q8_CASE(K3_GGML_IQ3_XXS, iq3_xxs) Q8_CASE(K3_GGML_IQ3_S, iq3_s)
    default: return (q8_kernels){NULL, NULL};
    }
#undef Q8_CASE
}

int k3_quant_q8_available(const k3_quant_type *t)
{
    return q8_kernel(t).one != NULL;
}

/* Bytes of one token's q8_act at cols columns of type t's blocks. */
static size_t q8_act_bytes(const k3_quant_type *t, int64_t cols)
{
    return (size_t)(cols / t->block_elems) * sizeof(float) + (size_t)(cols / 16) * sizeof(int16_t) + (size_t)cols;
}

/* Column order to the grouped order of quant_lanes.h (Q8_GROUPED_ORDER),
 * in place, for each 32 columns: position 4l + i holds column 2l + i
 * (i < 2) or 16 + 2l + i - 2. */
static void q8_act_group(int8_t *q, int64_t cols)
{
    for (int64_t c = 0; c < cols; c += 32) {
        int8_t columns[32];
        memcpy(columns, q + c, 32);
        for (int l = 0; l < 8; l++)
            for (int i = 0; i < 4; i++) q[c + 4 * l + i] = columns[(i < 2 ? 2 * l : 16 + 2 * l - 2) + i];
    }
}

/* Lay a q8_act over bytes (q8_act_bytes of them, 4-byte aligned) and
 * quantize x into it, its codes in the back end's order. */
static q8_act q8_act_quantize(const k3_quant_type *t, const float *x, int64_t cols, char *bytes)
{
    q8_act xa;
    xa.d = (float *)bytes;
    xa.bsums = (int16_t *)(xa.d + cols / t->block_elems);
    xa.q = (int8_t *)(xa.bsums + cols / 16);
    if (t->block_elems == 32) q8_quantize_32(x, cols, &xa);
    else q8_quantize_256(x, cols, &xa);
    if (Q8_GROUPED_ORDER) q8_act_group(xa.q, cols);
    return xa;
}

/* Y[tok][r] for n_tokens tokens under q8: every token's x quantized once,
 * then each row against Q8_TOKENS tokens at a time (its codes decoded once
 * for them), the last few one by one.
 * Returns -1 when the quantized x cannot be allocated. */
static int q8_matmul(float *Y, const k3_quant_type *t, q8_kernels kernels, const uint8_t *data, int64_t rows,
                     int64_t cols, const float *X, int n_tokens)
{
    const size_t act_bytes = (q8_act_bytes(t, cols) + 15) & ~(size_t)15;
    char *bytes = malloc(act_bytes * (size_t)n_tokens);
    q8_act *acts = malloc((size_t)n_tokens * sizeof *acts);
    const q8_act **act_of = malloc((size_t)n_tokens * sizeof *act_of);
    if (!bytes || !acts || !act_of) {
        free(bytes);
        free(acts);
        free(act_of);
        return -1;
    }
    for (int tok = 0; tok < n_tokens; tok++) {
        acts[tok] = q8_act_quantize(t, X + (int64_t)tok * cols, cols, bytes + act_bytes * (size_t)tok);
        act_of[tok] = &acts[tok];
    }
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    const int scalar = k3_kernels_scalar_forced();
#pragma omp parallel for schedule(static) if (rows * cols * n_tokens >= QUANT_PARALLEL_MIN_WEIGHTS)
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = data + (uint64_t)r * row_bytes;
        int tok = 0;
        float out[Q8_TOKENS];
        if (scalar)
            for (; tok < n_tokens; tok++) Y[(int64_t)tok * rows + r] = q8_row_scalar(t, row, cols, X + (int64_t)tok * cols);
        while (tok < n_tokens) {
            const int n = n_tokens - tok >= Q8_TOKENS ? Q8_TOKENS : 1;
            (n == 1 ? kernels.one : kernels.four)(row, cols, act_of + tok, out);
            for (int k = 0; k < n; k++) Y[(int64_t)(tok + k) * rows + r] = out[k];
            tok += n;
        }
    }
    free(bytes);
    free(acts);
    free(act_of);
    return 0;
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

/* F32, F16 and BF16 rows (GGUF's plain types) as the k3_weight k3_matvec
 * and k3_matmul read: little-endian values, one after the other, at any
 * alignment. Returns 0 when t is a block type. */
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

/* A type without a register kernel: decode a piece into the stack, run the
 * canonical chunks over it with the accumulators carried from piece to
 * piece, reduce once at the end: the bits of k3_dot_f32(decoded row, x),
 * with no allocation. cols is a whole number of blocks, so of 32 columns:
 * no tail. */
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

/* Columns whose quantized x fits on the stack in the q8 matvec (Kimi K3's
 * widest matrix has 7168); wider rows take the heap. */
#define Q8_STACK_COLS 8192

/* Rows [row_begin, row_end) under q8 on the calling thread: x quantized
 * on the stack (the heap past Q8_STACK_COLS columns; when that fails, the
 * scalar reference, which quantizes block by block: the same bits). */
static void q8_matvec_rows(float *y, const k3_quant_type *t, q8_kernels kernels, const uint8_t *data, int64_t cols,
                           const float *x, int64_t row_begin, int64_t row_end)
{
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    _Alignas(16) char stack[Q8_STACK_COLS + Q8_STACK_COLS / 8 + Q8_STACK_COLS / 8];
    char *bytes = k3_kernels_scalar_forced() ? NULL : cols <= Q8_STACK_COLS ? stack : malloc(q8_act_bytes(t, cols));
    if (!bytes) {
        for (int64_t r = row_begin; r < row_end; r++) y[r] = q8_row_scalar(t, data + (uint64_t)r * row_bytes, cols, x);
        return;
    }
    const q8_act xa = q8_act_quantize(t, x, cols, bytes), *act = &xa;
    const q8_rows4x1_fn four = q8_rows4x1_kernel(t);
    int64_t r = row_begin;
    if (four) {   /* quarter streams, as rows4_quarters */
        const int64_t quarter = (row_end - row_begin) / 4;
        for (int64_t i = 0; i < quarter; i++) {
            const int64_t at[4] = {row_begin + i, row_begin + i + quarter, row_begin + i + 2 * quarter,
                                   row_begin + i + 3 * quarter};
            const uint8_t *rows[4] = {data + (uint64_t)at[0] * row_bytes, data + (uint64_t)at[1] * row_bytes,
                                      data + (uint64_t)at[2] * row_bytes, data + (uint64_t)at[3] * row_bytes};
            float out[4];
            four(rows, cols, &xa, out);
            for (int k = 0; k < 4; k++) y[at[k]] = out[k];
        }
        r = row_begin + 4 * quarter;
    }
    for (; r < row_end; r++) kernels.one(data + (uint64_t)r * row_bytes, cols, &act, &y[r]);
    if (bytes != stack) free(bytes);
}

/* One row's exact dot product by the fastest kernel the type has. */
static float dot_row(const k3_quant_type *t, const uint8_t *row, int64_t cols, const float *x)
{
    if (k3_kernels_scalar_forced()) return dot_row_scalar(t, row, cols, x);
    const int kernel = row_kernel_index(t);
    if (kernel >= 0) return row_kernels[kernel].dot(row, cols, x);
    return dot_row_decoded(t, row, cols, x);
}

/* Columns of x in the GGUF MXFP4 lane order that fit on the stack (Kimi
 * K3's widest MXFP4 matrix has 7168); wider rows take the heap. */
#define MXFP4_LANES_STACK_COLS 8192

/* Rows [b, e) by a four-row kernel (dot4, with x as it takes it): the
 * range cut in four quarters and each step taking the next row of every
 * quarter, as matvec.c's rows_simd, so that each quarter is one long
 * sequential stream; the last (e - b) % 4 rows by the one-row kernel,
 * which gives the same bits. */
static void rows4_quarters(float *y, const k3_quant_type *t, dot_rows4_fn dot4, const uint8_t *data, int64_t cols,
                           const float *x_dot4, const float *x, int64_t b, int64_t e)
{
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    const int64_t quarter = (e - b) / 4;
    for (int64_t i = 0; i < quarter; i++) {
        const int64_t r[4] = {b + i, b + i + quarter, b + i + 2 * quarter, b + i + 3 * quarter};
        const uint8_t *rows[4] = {data + (uint64_t)r[0] * row_bytes, data + (uint64_t)r[1] * row_bytes,
                                  data + (uint64_t)r[2] * row_bytes, data + (uint64_t)r[3] * row_bytes};
        float out[4];
        dot4(rows, cols, x_dot4, out);
        for (int k = 0; k < 4; k++) y[r[k]] = out[k];
    }
    for (int64_t r = b + 4 * quarter; r < e; r++) y[r] = dot_row(t, data + (uint64_t)r * row_bytes, cols, x);
}

/* The exact path's rows [b, e) for a type with a four-row kernel. GGUF
 * MXFP4 on x86 takes the table-lookup kernel, x put once in its lane order
 * (on the stack; the heap past MXFP4_LANES_STACK_COLS; if that fails, the
 * 16-weight kernel: the same bits). */
static void quant_rows4(float *y, const k3_quant_type *t, const void *data, int64_t cols, const float *x, int64_t b,
                        int64_t e)
{
#if defined(K3_HAVE_MXFP4_GGUF_LANES)
    if (t->ggml_id == K3_GGML_MXFP4) {
        static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
        float stack_lanes[MXFP4_LANES_STACK_COLS] __attribute__((aligned(32)));
        float *x_lanes = cols <= MXFP4_LANES_STACK_COLS ? stack_lanes : malloc((size_t)cols * sizeof(float));
        if (x_lanes) {
            pthread_once(&tables_once, fill_mxfp4_gguf_tables);
            for (int64_t c = 0; c < cols; c += 16) v16_to_mxfp4_gguf_lanes(x + c, x_lanes + c);
            rows4_quarters(y, t, dot_rows4_mxfp4_lanes, data, cols, x_lanes, x, b, e);
            if (x_lanes != stack_lanes) free(x_lanes);
            return;
        }
    }
#endif
    rows4_quarters(y, t, rows4_kernel(t), data, cols, x, x, b, e);
}

void k3_quant_matvec_rows(float *y, const k3_quant_type *t, const void *data, int64_t cols, const float *x,
                          int64_t row_begin, int64_t row_end)
{
    k3_weight plain;
    if (plain_weight(t, data, row_end, cols, &plain)) {   /* the plain kernels, same contract */
        k3_matvec_rows(y, &plain, x, row_begin, row_end);
        return;
    }
    const q8_kernels q8 = k3_kernels_activations_q8() ? q8_kernel(t) : (q8_kernels){NULL, NULL};
    if (q8.one) {
        q8_matvec_rows(y, t, q8, data, cols, x, row_begin, row_end);
        return;
    }
    if (!k3_kernels_scalar_forced() && rows4_kernel(t)) {
        quant_rows4(y, t, data, cols, x, row_begin, row_end);
        return;
    }
    const uint64_t row_bytes = k3_quant_row_bytes(t, cols);
    for (int64_t r = row_begin; r < row_end; r++)
        y[r] = dot_row(t, (const uint8_t *)data + (uint64_t)r * row_bytes, cols, x);
}

int k3_quant_matvec(float *y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *x)
{
    k3_weight plain;
    if (plain_weight(t, data, rows, cols, &plain)) {
        k3_matvec(y, &plain, x);
        return 0;
    }
#pragma omp parallel if (rows * cols >= QUANT_PARALLEL_MIN_WEIGHTS)
    {
        const int64_t n = omp_get_num_threads(), i = omp_get_thread_num();
        k3_quant_matvec_rows(y, t, data, cols, x, rows * i / n, rows * (i + 1) / n);
    }
    return 0;
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
    const q8_kernels q8 = k3_kernels_activations_q8() ? q8_kernel(t) : (q8_kernels){NULL, NULL};
    if (q8.one) return q8_matmul(Y, t, q8, data, rows, cols, X, n_tokens);
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
