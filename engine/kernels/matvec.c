/* matvec.c - dot products of stored-format weight rows with fp32 activations.
 *
 * Canonical summation order (the contract that makes results bit-identical
 * across k3_matvec, k3_matvec_rows, k3_matmul, k3_dot_f32 and any thread
 * count on the SIMD path):
 *
 *   Each weight is first decoded to its exact fp32 value (bf16/f16/f32; fp8
 *   decodes to e4m3 / 256, also exact, see fp8 below). A row of
 *   `cols` values is cut into 16-column chunks; the last one is zero-padded
 *   (weight and x) to 16. Two 8-lane accumulators A0, A1 start at +0 and, for
 *   each chunk in column order, A0 = fma(w[c..c+8), x[c..c+8), A0) and
 *   A1 = fma(w[c+8..c+16), x[c+8..c+16), A1). The row result is
 *   hsum(A0 + A1), where hsum adds lane i to lane i+4, then lane i to i+2,
 *   then lane 0 to lane 1 (hsum_canonical below).
 *
 *   fp8 adds one level: the chunks are grouped by 128-column scale block
 *   (chunk k is in block k / 8, the padded tail chunk included). Per block,
 *   two block accumulators B0, B1 start at +0 and take the chunks as above
 *   with w = e4m3 / 256; then A0 = fma(B0, s, A0), A1 = fma(B1, s, A1) with
 *   s = block_scale * 256 (256 alone when there are no scales). Applying
 *   the scale once per block instead of once per weight saves a multiply
 *   per 8 weights in the compute-bound fp8 kernel.
 *
 * Every SIMD kernel - one row or four rows at once straight from bf16/f16/
 * fp8/f32 memory, or blocks of rows x tokens from a decoded fp32 scratch in
 * k3_matmul (2x2 for fp8; 4x3 for the others, which run the A0 chain and
 * then the A1 chain, independent until the end) - performs exactly this
 * sequence of operations per row, so a
 * row's value never depends on which kernel or thread computed it. The
 * kernels are written once on v8f, an 8-lane fp32 vector whose operations
 * (load, fma, the hsum tree, the decoders) each back end of kernels_arch.h
 * implements with the same IEEE operations - AVX2 registers, NEON register
 * pairs, or plain C lanes with fmaf - so the bits are also the same on every
 * machine (tests/test_kernels.c checks each kernel against a lane-by-lane
 * statement of this order).
 *
 * The scalar reference (k3_kernels_force_scalar(1)) is a plain left-to-right
 * fp32 loop over W[r][c] = decoded weight (fp8: e4m3 * scale, rounded once);
 * it differs from the SIMD result only by summation order and rounding.
 *
 * Memory: a matvec over weights far larger than the caches is bound by the
 * read bandwidth, and reaching it takes enough reads in flight. A thread's
 * rows are cut in four quarters and the 4-row kernel takes one row from each:
 * four long sequential streams (row i+1 follows row i in memory), each also
 * prefetched PREFETCH_AHEAD_BYTES ahead. Measured on the 2-core EPYC VM
 * (bf16, 256 MiB): consecutive 4-row blocks without prefetch reached ~58% of
 * the 1-thread read bandwidth, with prefetch ~85%, quarter streams with
 * prefetch ~100% (2 threads: 76% -> 84% -> 100%). tools/bench_kernels.c
 * measures this.
 *
 * MXFP4 (Kimi K3's routed experts) follows the unscaled order above too:
 * each weight decodes to its exact fp32 value (a doubled E2M1 integer times
 * half the group's power-of-two scale: a product with no rounding), and a
 * 32-column group is two 16-column chunks. The matvec kernel decodes straight
 * from the nibbles into registers; k3_matmul decodes a row quad once into
 * its scratch and runs the same 4x3 blocks as bf16, so a prompt token costs
 * one fma per weight instead of a per-group multiply, add and scale fold. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "k3.h"
#include "k3_util.h"
#include "kernels.h"
#include "mxfp4.h"
#include "kernels_arch.h"
#include "quant_matvec.h"

/* Matrices with fewer elements than this are done on the calling thread:
 * waking the OpenMP team costs a few microseconds, more than the work. */
#define MATVEC_PARALLEL_MIN_ELEMS ((int64_t)1 << 15)

/* Software prefetch distance in each weight row stream, and its hint. 2 KiB
 * (x 4 streams x 2 threads in flight) measured best of 0.5/1/2/4 KiB; T0
 * (into L1) beat T1/T2/NTA on this machine. */
#ifndef PREFETCH_AHEAD_BYTES
#define PREFETCH_AHEAD_BYTES 2048
#endif
#ifndef PREFETCH_LOCALITY
#define PREFETCH_LOCALITY 3   /* __builtin_prefetch's 3 = x86 T0 */
#endif

/* fp8 block scales cover 128 x 128 weights. */
#define FP8_BLOCK 128

/* Columns per k3_matmul segment: MATMUL_ROW_BLOCK decoded rows of this many
 * floats (32 KiB) plus a token pair's activations stay in the 48 KiB L1.
 * A multiple of FP8_BLOCK so fp8 scale blocks never straddle segments. */
#define MATMUL_COL_SEGMENT 512
_Static_assert(MATMUL_COL_SEGMENT % FP8_BLOCK == 0, "segments must hold whole fp8 blocks");

/* The blocking of matmul_rows_unscaled: columns per segment (a row quad's
 * segment of decoded rows is 16 KiB) and tokens per block (their
 * accumulators, 4 x 24 x 64 B = 6 KiB), so both stay in a 32 KiB L1 while
 * the activations stream past. Measured on the 2-core EPYC VM (bf16, 1
 * thread, CPU time, best of 15) against 256/512-column segments and 12-48
 * token blocks: 1024 x 24 was best or within noise of it on every shape
 * tried (768 to 3072 columns, 32 to 256 tokens). */
#ifndef UNSCALED_SEGMENT
#define UNSCALED_SEGMENT 1024
#endif
#ifndef UNSCALED_TOKENS
#define UNSCALED_TOKENS 24
#endif
_Static_assert(UNSCALED_TOKENS <= 64 && UNSCALED_TOKENS % 3 == 0, "the state holds 4 rows x 64 tokens");

static int kernels_scalar_forced;

/* Tests flip this to compare SIMD kernels against the scalar references. */
void k3_kernels_force_scalar(int on)
{
    kernels_scalar_forced = on != 0;
}

static int kernels_activations_q8;

/* --activations: which MXFP4 path k3_matvec and k3_matmul take (kernels.h). */
void k3_kernels_set_activations_q8(int on)
{
    kernels_activations_q8 = on != 0;
}

/* The MXFP4 activation path in force (1 = q8). */
int k3_kernels_activations_q8(void)
{
    return kernels_activations_q8;
}

/* So callers (and tests) can report which path ran. */
int k3_kernels_scalar_forced(void)
{
    return kernels_scalar_forced;
}

/* Which vector back end kernels_arch.h compiled in (k3 --version, bench),
 * and whether the q8 MXFP4 kernel found AVX-VNNI on this CPU. */
const char *k3_kernels_name(void)
{
#ifdef K3_HAVE_AVX_VNNI_Q8
    if (k3_mxfp4_q8_vnni(-1))
        return K3_KERNELS_NAME " + AVX-VNNI (q8 MXFP4)";
#endif
    return K3_KERNELS_NAME;
}

/* ------------------------------------------------------------------------ */
/* Scalar references                                                         */
/* ------------------------------------------------------------------------ */

/* The reference value of weight (r, c) (fp8: e4m3 * block scale, rounded
 * once). Unaligned-safe (memcpy): rows sit at any offset inside a unit's buffer. */
static float weight_scalar(const k3_weight *W, int64_t r, int64_t c)
{
    const unsigned char *base = (const unsigned char *)W->data;
    int64_t idx = r * W->cols + c;
    switch (W->dtype) {
    case K3_DT_F32: {
        float v;
        memcpy(&v, base + 4 * idx, 4);
        return v;
    }
    case K3_DT_BF16: {
        uint16_t v;
        memcpy(&v, base + 2 * idx, 2);
        return k3_bf16_to_f32(v);
    }
    case K3_DT_F16: {
        uint16_t v;
        memcpy(&v, base + 2 * idx, 2);
        return k3_f16_to_f32(v);
    }
    case K3_DT_MXFP4: {
        uint8_t byte = base[idx / 2];
        return k3_e2m1_values[(idx & 1) ? byte >> 4 : byte & 0x0F] *
               k3_e8m0_to_f32(W->mx_scale[idx / 32]);
    }
    case K3_DT_F8_E4M3: {
        float v = k3_e4m3_to_f32(base[idx]);
        if (W->block_scale) {
            int64_t scale_cols = (W->cols + FP8_BLOCK - 1) / FP8_BLOCK;
            v *= W->block_scale[(r / FP8_BLOCK) * scale_cols + c / FP8_BLOCK];
        }
        return v;
    }
    default: {
        float v;
        size_t esize = k3_dtype_size(W->dtype);
        k3_convert_to_f32(&v, base + (size_t)idx * esize, W->dtype, 1);
        return v;
    }
    }
}

/* The reference dot product of row r: decode, multiply, add left to right. */
static float dot_row_scalar(const k3_weight *W, int64_t r, const float *x)
{
    float sum = 0.0f;
    for (int64_t c = 0; c < W->cols; c++)
        sum += weight_scalar(W, r, c) * x[c];
    return sum;
}

/* The MXFP4 canonical order of one row in plain C (16 scalar chains with
 * fmaf, the hsum tree at the end): the SIMD kernels' bits without their
 * lane-ordered copy of x, for when that copy cannot be allocated. */
static float mxfp4_canonical_row_slow(const k3_weight *W, int64_t r, const float *x)
{
    float chains[16] = {0}, sums[8];
    for (int64_t c = 0; c < W->cols; c++)
        chains[c % 16] = fmaf(weight_scalar(W, r, c), x[c], chains[c % 16]);
    for (int i = 0; i < 8; i++)
        sums[i] = chains[i] + chains[i + 8];
    for (int i = 0; i < 4; i++)
        sums[i] += sums[i + 4];
    for (int i = 0; i < 2; i++)
        sums[i] += sums[i + 2];
    return sums[0] + sums[1];
}

/* ------------------------------------------------------------------------ */
/* SIMD building blocks                                                      */
/* ------------------------------------------------------------------------ */

/* The fixed final reduction of the canonical order (see top of file). */
K3_INLINE float hsum_canonical(v8f acc0, v8f acc1)
{
    return v8_hsum(v8_add(acc0, acc1));
}

/* Decode the 16 weights at p (column chunk) to two fp32 vectors, exactly
 * (fp8: e4m3 / 256, NaN codes checked). With dtype a compile-time constant
 * after inlining, the switch disappears. */
K3_INLINE void decode16(k3_dtype dtype, const unsigned char *p, v8f *w_lo, v8f *w_hi)
{
    switch (dtype) {
    case K3_DT_F32:
        *w_lo = v8_loadu((const float *)p);
        *w_hi = v8_loadu((const float *)p + 8);
        break;
    case K3_DT_BF16:
        *w_lo = v8_from_bf16(p);
        *w_hi = v8_from_bf16(p + 16);
        break;
    case K3_DT_F16:
        *w_lo = v8_from_f16(p);
        *w_hi = v8_from_f16(p + 16);
        break;
    case K3_DT_F8_E4M3:     /* e4m3 / 256; the scale is applied per block */
        v16_from_e4m3_div256(p, 1, w_lo, w_hi);
        break;
    default:
        *w_lo = *w_hi = v8_zero();
        break;
    }
}

/* Bytes per element of the dtypes with SIMD kernels (constant-folded;
 * MXFP4's half byte is handled by row_bytes). */
K3_INLINE int64_t simd_elem_bytes(k3_dtype dtype)
{
    return dtype == K3_DT_F32 ? 4 : dtype == K3_DT_F8_E4M3 ? 1 : 2;
}

/* Bytes of one stored row of `cols` weights (MXFP4: the nibbles only; its
 * scales are a separate array). */
K3_INLINE int64_t row_bytes(k3_dtype dtype, int64_t cols)
{
    return dtype == K3_DT_MXFP4 ? cols / 2 : cols * simd_elem_bytes(dtype);
}

/* fp32 scale vector for fp8 column block `block` of one row's scale row:
 * scale * 256 (the f16 trick's 2^8), or plain 256 when unscaled. */
K3_INLINE v8f fp8_scale256(const float *scale_row, int64_t block)
{
    float s = scale_row ? scale_row[block] : 1.0f;
    return v8_set1(s * 256.0f);
}

/* Everything a row kernel needs to know about one weight row. */
typedef struct {
    const unsigned char *data;  /* first element of the row */
    const float *scale_row;     /* fp8: this row's block scales, or NULL */
    const uint8_t *mx_scale;    /* MXFP4: this row's E8M0 group scales */
} row_ref;

/* Describe row r of W (whose dtype is `dtype`, passed as a constant so the
 * element size folds) for the kernels. */
K3_INLINE row_ref row_of(k3_dtype dtype, const k3_weight *W, int64_t r)
{
    row_ref ref;
    ref.data = (const unsigned char *)W->data + r * row_bytes(dtype, W->cols);
    ref.scale_row = NULL;
    ref.mx_scale = dtype == K3_DT_MXFP4 ? W->mx_scale + r * (W->cols / 32) : NULL;
    if (dtype == K3_DT_F8_E4M3 && W->block_scale) {
        int64_t scale_cols = (W->cols + FP8_BLOCK - 1) / FP8_BLOCK;
        ref.scale_row = W->block_scale + (r / FP8_BLOCK) * scale_cols;
    }
    return ref;
}

/* Copy the last (cols % 16) weights of a row into a zeroed 16-element buffer
 * so the tail chunk goes through the same decoder as the full chunks (fp8
 * zero bytes decode to +0, exactly like the zero padding of the order). */
K3_INLINE void tail_padded_copy(k3_dtype dtype, const unsigned char *row, int64_t full_cols,
                                int64_t cols, unsigned char buf[64])
{
    int64_t esize = simd_elem_bytes(dtype);
    memset(buf, 0, 64);
    memcpy(buf, row + full_cols * esize, (size_t)((cols - full_cols) * esize));
}

/* The tail chunk (the last cols % 16 columns, zero padded) of N_ROWS rows,
 * accumulated into acc0/acc1 exactly as a full chunk would be. */
K3_INLINE void tail_chunk_fma(k3_dtype dtype, int n_rows, const row_ref *rows, const float *x,
                              int64_t full_cols, int64_t cols, v8f *acc0, v8f *acc1)
{
    float x_pad[16] = {0};
    memcpy(x_pad, x + full_cols, (size_t)(cols - full_cols) * sizeof(float));
    v8f x_lo = v8_loadu(x_pad);
    v8f x_hi = v8_loadu(x_pad + 8);
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++) {
        unsigned char w_pad[64];
        v8f w_lo, w_hi;
        tail_padded_copy(dtype, rows[r].data, full_cols, cols, w_pad);
        decode16(dtype, w_pad, &w_lo, &w_hi);
        acc0[r] = v8_fma(w_lo, x_lo, acc0[r]);
        acc1[r] = v8_fma(w_hi, x_hi, acc1[r]);
    }
}

/* The canonical-order dot products of N_ROWS (1..4) rows with one x, reading
 * each row once and sharing the x loads: with 4 rows there are 8 independent
 * FMA chains, enough to hide FMA latency, and 4 concurrent memory streams,
 * each prefetched PREFETCH_AHEAD_BYTES bytes ahead. For F32, BF16 and F16. */
K3_INLINE void dot_rows_simd(k3_dtype dtype, int n_rows, const row_ref *rows,
                             const float *x, int64_t cols, float *out)
{
    const int64_t esize = simd_elem_bytes(dtype);
    const int64_t full_cols = cols & ~(int64_t)15;
    v8f acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        acc0[r] = acc1[r] = v8_zero();
    for (int64_t c = 0; c < full_cols; c += 16) {
        v8f x_lo = v8_loadu(x + c);
        v8f x_hi = v8_loadu(x + c + 8);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            v8f w_lo, w_hi;
            const unsigned char *w_bytes = rows[r].data + c * esize;
            if (PREFETCH_AHEAD_BYTES)
                __builtin_prefetch(w_bytes + PREFETCH_AHEAD_BYTES, 0, PREFETCH_LOCALITY);
            decode16(dtype, w_bytes, &w_lo, &w_hi);
            acc0[r] = v8_fma(w_lo, x_lo, acc0[r]);
            acc1[r] = v8_fma(w_hi, x_hi, acc1[r]);
        }
    }
    if (full_cols < cols)
        tail_chunk_fma(dtype, n_rows, rows, x, full_cols, cols, acc0, acc1);
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        out[r] = hsum_canonical(acc0[r], acc1[r]);
}

/* fp8 chunks [c_begin, c_end) of N_ROWS rows into the block accumulators
 * (canonical order, w = e4m3 / 256). check_nan selects the NaN-merging
 * decoder; both give identical values for every other code. */
K3_INLINE void e4m3_chunks(int n_rows, const row_ref *rows, const float *x, int64_t c_begin,
                           int64_t c_end, int check_nan, v8f *block0, v8f *block1)
{
    for (int64_t c = c_begin; c < c_end; c += 16) {
        v8f x_lo = v8_loadu(x + c);
        v8f x_hi = v8_loadu(x + c + 8);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            if (PREFETCH_AHEAD_BYTES && (c & 63) == 0)   /* one prefetch per cache line */
                __builtin_prefetch(rows[r].data + c + PREFETCH_AHEAD_BYTES, 0, PREFETCH_LOCALITY);
            v8f w_lo, w_hi;
            v16_from_e4m3_div256(rows[r].data + c, check_nan, &w_lo, &w_hi);
            block0[r] = v8_fma(w_lo, x_lo, block0[r]);
            block1[r] = v8_fma(w_hi, x_hi, block1[r]);
        }
    }
}

/* The fp8 counterpart of dot_rows_simd: per 128-column block, a NaN scan of
 * the block (cheap), the chunks into block accumulators with the fast
 * decoder when the block is NaN-free, then one fma per accumulator with the
 * block scale (see the canonical order at the top). */
K3_INLINE void dot_rows_e4m3(int n_rows, const row_ref *rows, const float *x, int64_t cols,
                             float *out)
{
    const int64_t full_cols = cols & ~(int64_t)15;
    const int64_t tail_block = full_cols / FP8_BLOCK;   /* block of the padded tail chunk */
    v8f acc0[4], acc1[4], block0[4], block1[4];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        acc0[r] = acc1[r] = v8_zero();
    for (int64_t block_begin = 0; block_begin < cols; block_begin += FP8_BLOCK) {
        int64_t block_end = block_begin + FP8_BLOCK < full_cols ? block_begin + FP8_BLOCK : full_cols;
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++)
            block0[r] = block1[r] = v8_zero();
        if (block_begin < block_end) {
            int has_nan = 0;
#pragma GCC unroll 4
            for (int r = 0; r < n_rows; r++)
                has_nan |= v16_e4m3_has_nan(rows[r].data + block_begin, block_end - block_begin);
            if (has_nan)
                e4m3_chunks(n_rows, rows, x, block_begin, block_end, 1, block0, block1);
            else
                e4m3_chunks(n_rows, rows, x, block_begin, block_end, 0, block0, block1);
        }
        if (full_cols < cols && block_begin / FP8_BLOCK == tail_block)
            tail_chunk_fma(K3_DT_F8_E4M3, n_rows, rows, x, full_cols, cols, block0, block1);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            v8f scale256 = fp8_scale256(rows[r].scale_row, block_begin / FP8_BLOCK);
            acc0[r] = v8_fma(block0[r], scale256, acc0[r]);
            acc1[r] = v8_fma(block1[r], scale256, acc1[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        out[r] = hsum_canonical(acc0[r], acc1[r]);
}

/* The 32 weights of MXFP4 group g of a row, decoded to their exact fp32
 * values: columns 0-7, 8-15, 16-23, 24-31 of the group in w[0..3]. */
K3_INLINE void mxfp4_group_decode(row_ref row, int64_t g, v8f w[4])
{
    v32_from_mxfp4_doubled(row.data + g * 16, w);
    const v8f half_scale = v8_set1(0.5f * k3_e8m0_to_f32(row.mx_scale[g]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        w[i] = v8_mul(w[i], half_scale);   /* doubled integer x 2^(e-128): exact */
}

/* The vector decoder of a whole row (mxfp4.h): the same exact values as
 * k3_mxfp4_decode_row_scalar (products of small integers and powers of two).
 * The vector back end (v32_from_mxfp4_doubled: pshufb on x86, tbl on NEON,
 * a table in plain C) looks up all 32 nibbles of a group at once. */
void k3_mxfp4_decode_row(const k3_weight *W, int64_t r, float *out)
{
    if (kernels_scalar_forced) {
        k3_mxfp4_decode_row_scalar(W, r, out);
        return;
    }
    const row_ref row = row_of(K3_DT_MXFP4, W, r);
    for (int64_t g = 0; g < W->cols / 32; g++) {
        v8f w[4];
        mxfp4_group_decode(row, g, w);
        for (int i = 0; i < 4; i++)
            v8_storeu(out + g * 32 + 8 * i, w[i]);
    }
}

/* Column of lane l (0-15) of a 16-column chunk in the MXFP4 matvec's
 * vectors (the back end's MXFP4_LANE_COLUMNS: identity, or the order its
 * decoder yields without moving floats). Accumulator lane l then always
 * holds the canonical chain of column mxfp4_lane_columns[l]: the same
 * fmas in the same order, only in other lanes. */
static const int mxfp4_lane_columns[16] = MXFP4_LANE_COLUMNS;

/* x in the MXFP4 lane order: xl[16k + l] = x[16k + mxfp4_lane_columns[l]]
 * (a copy, exact), made once per k3_matvec_rows call for all its rows. */
static void mxfp4_x_to_lanes(const float *x, int64_t cols, float *xl)
{
    for (int64_t c = 0; c < cols; c += 16)
        v16_to_mxfp4_lanes(x + c, xl + c);
}

/* The row's value from its two accumulators in lane order: the canonical
 * end hsum(A0 + A1) (chain i plus chain i + 8, then lane i + i+4, i + i+2,
 * 0 + 1), read from the lanes where each chain sits. Scalar adds from one
 * store: cheaper than moving the floats back into canonical vectors. */
K3_INLINE float mxfp4_lanes_sum(v8f acc0, v8f acc1)
{
    float lanes[16], chain[16], sums[8];
    v8_storeu(lanes, acc0);
    v8_storeu(lanes + 8, acc1);
#pragma GCC unroll 16
    for (int l = 0; l < 16; l++)
        chain[mxfp4_lane_columns[l]] = lanes[l];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        sums[i] = chain[i] + chain[i + 8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        sums[i] += sums[i + 4];
    return (sums[0] + sums[2]) + (sums[1] + sums[3]);
}

/* dot_rows_simd for MXFP4, straight from the nibbles: a group is the two
 * 16-column chunks 2g and 2g + 1 of the canonical order (cols is a multiple
 * of 32, checked by the loaders, so there is no tail). x_lanes is x in the
 * back end's lane order (mxfp4_x_to_lanes), which its decoder's weights
 * share; the final sum reads each chain from its lane. Four rows share the x loads and give eight independent FMA chains. */
K3_INLINE void dot_rows_mxfp4(int n_rows, const row_ref *rows, const float *x_lanes, int64_t cols, float *out)
{
    v8f acc0[4], acc1[4];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        acc0[r] = acc1[r] = v8_zero();
    for (int64_t g = 0; g < cols / 32; g++) {
        const float *xg = x_lanes + g * 32;
        v8f x0 = v8_loadu(xg), x1 = v8_loadu(xg + 8), x2 = v8_loadu(xg + 16), x3 = v8_loadu(xg + 24);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            if (PREFETCH_AHEAD_BYTES)   /* every group: cheaper than a branch per row */
                __builtin_prefetch(rows[r].data + g * 16 + PREFETCH_AHEAD_BYTES, 0, PREFETCH_LOCALITY);
            v8f w[4];
            v32_from_mxfp4_lanes(rows[r].data + g * 16, rows[r].mx_scale[g], w);
            acc0[r] = v8_fma(w[0], x0, acc0[r]);
            acc1[r] = v8_fma(w[1], x1, acc1[r]);
            acc0[r] = v8_fma(w[2], x2, acc0[r]);
            acc1[r] = v8_fma(w[3], x3, acc1[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        out[r] = mxfp4_lanes_sum(acc0[r], acc1[r]);
}

/* Dispatch of the row kernels on a constant dtype. */
K3_INLINE void dot_rows_any(k3_dtype dtype, int n_rows, const row_ref *rows, const float *x,
                            int64_t cols, float *out)
{
    if (dtype == K3_DT_F8_E4M3)
        dot_rows_e4m3(n_rows, rows, x, cols, out);
    else if (dtype == K3_DT_MXFP4)
        dot_rows_mxfp4(n_rows, rows, x, cols, out);
    else
        dot_rows_simd(dtype, n_rows, rows, x, cols, out);
}

/* y[r] for r in [row_begin, row_end). The range is cut into four equal
 * quarters and each 4-row step takes the next row of every quarter: each
 * quarter is then one long contiguous stream (row i+1 follows row i in
 * memory), which hardware and software prefetch follow across row ends,
 * instead of four 1-row streams restarting every step. The leftover
 * (n % 4) rows go one at a time. */
K3_INLINE void rows_simd(k3_dtype dtype, float *y, const k3_weight *W, const float *x,
                         int64_t row_begin, int64_t row_end)
{
    int64_t quarter = (row_end - row_begin) / 4;
    for (int64_t i = 0; i < quarter; i++) {
        int64_t r0 = row_begin + i;
        row_ref rows[4] = {row_of(dtype, W, r0), row_of(dtype, W, r0 + quarter),
                           row_of(dtype, W, r0 + 2 * quarter), row_of(dtype, W, r0 + 3 * quarter)};
        float out[4];
        dot_rows_any(dtype, 4, rows, x, W->cols, out);
        y[r0] = out[0];
        y[r0 + quarter] = out[1];
        y[r0 + 2 * quarter] = out[2];
        y[r0 + 3 * quarter] = out[3];
    }
    for (int64_t r = row_begin + 4 * quarter; r < row_end; r++) {
        row_ref row = row_of(dtype, W, r);
        dot_rows_any(dtype, 1, &row, x, W->cols, y + r);
    }
}

/* One out-of-line instantiation of rows_simd per dtype, so each inner loop
 * is compiled for a constant element type. */
static void rows_f32(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    rows_simd(K3_DT_F32, y, W, x, b, e);
}

static void rows_bf16(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    rows_simd(K3_DT_BF16, y, W, x, b, e);
}

static void rows_f16(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    rows_simd(K3_DT_F16, y, W, x, b, e);
}

static void rows_e4m3(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    rows_simd(K3_DT_F8_E4M3, y, W, x, b, e);
}

/* Columns whose lane-ordered x fits the stack buffer of rows_mxfp4 (Kimi
 * K3's widest MXFP4 matrix has 7168); wider ones take a heap copy. */
#define MXFP4_STACK_COLS 8192

/* MXFP4 rows: x is put in the decoder's lane order once for all rows (a
 * stack copy; the heap for very wide rows; on allocation failure the rows
 * go one at a time through the reference order, the same bits). */
static void rows_mxfp4(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    float stack_lanes[MXFP4_STACK_COLS] __attribute__((aligned(32)));
    float *x_lanes = W->cols <= MXFP4_STACK_COLS ? stack_lanes : malloc((size_t)W->cols * sizeof(float));
    if (!x_lanes) {
        for (int64_t r = b; r < e; r++)
            y[r] = mxfp4_canonical_row_slow(W, r, x);
        return;
    }
    k3_mxfp4_tables_init();
    mxfp4_x_to_lanes(x, W->cols, x_lanes);
    rows_simd(K3_DT_MXFP4, y, W, x_lanes, b, e);
    if (x_lanes != stack_lanes)
        free(x_lanes);
}

/* Row r of a bf16 or f16 matrix as fp32 with the back end's 8-lane
 * decoders (the MLA decodes its absorbed kv_b rows, 22 M weights a k3-16g
 * token, this way: the scalar loop of k3_convert_to_f32 cost ~5 ms of
 * it). Both decodes are exact, so the values are k3_convert_to_f32's.
 * Returns 0, doing nothing, for other dtypes or when the scalar kernels
 * are forced. */
int k3_decode_row_f32(const k3_weight *W, int64_t r, float *out)
{
    if (kernels_scalar_forced || (W->dtype != K3_DT_BF16 && W->dtype != K3_DT_F16))
        return 0;
    const unsigned char *row = (const unsigned char *)W->data + (size_t)(r * W->cols) * 2;
    int64_t c = 0;
    if (W->dtype == K3_DT_BF16)
        for (; c + 8 <= W->cols; c += 8)
            v8_storeu(out + c, v8_from_bf16(row + 2 * c));
    else
        for (; c + 8 <= W->cols; c += 8)
            v8_storeu(out + c, v8_from_f16(row + 2 * c));
    k3_convert_to_f32(out + c, row + 2 * c, W->dtype, W->cols - c);
    return 1;
}

/* True when W's dtype has SIMD kernels and SIMD is allowed. */
static int simd_usable(const k3_weight *W)
{
    if (kernels_scalar_forced)
        return 0;
    return W->dtype == K3_DT_F32 || W->dtype == K3_DT_BF16 || W->dtype == K3_DT_F16 ||
           W->dtype == K3_DT_F8_E4M3 || W->dtype == K3_DT_MXFP4;
}

/* Single-threaded building block of k3_matvec (also used by callers that
 * parallelise at a coarser level, e.g. over experts). */
void k3_matvec_rows(float *y, const k3_weight *W, const float *x,
                    int64_t row_begin, int64_t row_end)
{
    if (row_begin >= row_end)
        return;
    if (W->dtype == K3_DT_GGML) {           /* GGUF block types: quant_matvec.c */
        k3_quant_matvec_rows(y, W->qtype, W->data, W->cols, x, row_begin, row_end);
        return;
    }
    if (W->dtype == K3_DT_MXFP4 && kernels_activations_q8) {
        k3_mxfp4_q8_matvec_rows(y, W, x, row_begin, row_end);
        return;
    }
    if (!simd_usable(W)) {
        for (int64_t r = row_begin; r < row_end; r++)
            y[r] = dot_row_scalar(W, r, x);
        return;
    }
    switch (W->dtype) {
    case K3_DT_F32:     rows_f32(y, W, x, row_begin, row_end); break;
    case K3_DT_BF16:    rows_bf16(y, W, x, row_begin, row_end); break;
    case K3_DT_F16:     rows_f16(y, W, x, row_begin, row_end); break;
    case K3_DT_F8_E4M3: rows_e4m3(y, W, x, row_begin, row_end); break;
    case K3_DT_MXFP4:   rows_mxfp4(y, W, x, row_begin, row_end); break;
    default: break;
    }
}

/* Rows [begin, end) of a matrix of `rows` rows that thread `thread` of
 * n_threads takes: contiguous ranges of whole 4-row quads, as k3_matvec
 * splits them. */
static void thread_rows(int64_t rows, int64_t thread, int64_t n_threads, int64_t *begin, int64_t *end)
{
    int64_t row_quads = (rows + 3) / 4;
    *begin = row_quads * thread / n_threads * 4;
    *end = row_quads * (thread + 1) / n_threads * 4;
    if (*end > rows)
        *end = rows;
    if (*begin > rows)
        *begin = rows;
}

/* Split rows into one contiguous range per thread (in 4-row units, so every
 * thread runs full 4-row blocks); small matrices stay on this thread. */
void k3_matvec(float *y, const k3_weight *W, const float *x)
{
    int64_t rows = W->rows;
    if (rows <= 0)
        return;
    if (rows * W->cols < MATVEC_PARALLEL_MIN_ELEMS || rows < 8 || omp_in_parallel() ||
        omp_get_max_threads() == 1) {
        k3_matvec_rows(y, W, x, 0, rows);
        return;
    }
#pragma omp parallel
    {
        int64_t begin, end;
        thread_rows(rows, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
        k3_matvec_rows(y, W, x, begin, end);
    }
}

/* A group of matvecs in one parallel region (kernels.h): each thread walks
 * the jobs in order and computes its row range of each, so there is no
 * barrier between jobs, only the region's end. A group too small to pay
 * for the team, or called inside a parallel region, runs job by job. */
void k3_matvec_group(const k3_matvec_job *jobs, int n_jobs)
{
    int64_t elems = 0;
    for (int j = 0; j < n_jobs; j++)
        elems += jobs[j].W->rows * jobs[j].W->cols;
    if (n_jobs == 1 || elems < MATVEC_PARALLEL_MIN_ELEMS || omp_in_parallel() || omp_get_max_threads() == 1) {
        for (int j = 0; j < n_jobs; j++)
            k3_matvec(jobs[j].y, jobs[j].W, jobs[j].x);
        return;
    }
#pragma omp parallel
    {
        int64_t n_threads = omp_get_num_threads(), thread = omp_get_thread_num();
        for (int j = 0; j < n_jobs; j++) {
            int64_t begin, end;
            thread_rows(jobs[j].W->rows, thread, n_threads, &begin, &end);
            k3_matvec_rows(jobs[j].y, jobs[j].W, jobs[j].x, begin, end);
        }
    }
}

/* One token: the group in one region; more: each job's k3_matmul (each
 * already one region with its tokens sharing every weight read). */
void k3_matmul_group(const k3_matvec_job *jobs, int n_jobs, int n_tokens)
{
    if (n_tokens == 1) {
        k3_matvec_group(jobs, n_jobs);
        return;
    }
    for (int j = 0; j < n_jobs; j++)
        k3_matmul(jobs[j].y, jobs[j].W, jobs[j].x, n_tokens);
}

/* ------------------------------------------------------------------------ */
/* k3_matmul: several tokens per pass over the weights                       */
/* ------------------------------------------------------------------------ */

/* Rows decoded per block; the decoded fp32 block is reused by all tokens. */
#define MATMUL_ROW_BLOCK 16

/* The two canonical accumulators of one (row, token) pair, parked in memory
 * between column segments (storing and reloading is exact). */
typedef struct {
    v8f acc0, acc1;
} acc_pair;

/* The chunk loop of dot_block_f32: columns [c_begin, c_end) of N_ROWS x
 * N_TOKENS (each 1..2) pairs into accumulators acc0/acc1[r][t]. */
K3_INLINE void block_chunks(int n_rows, int n_tokens, const float *const *w, const float *const *x,
                            int64_t c_begin, int64_t c_end, v8f acc0[2][2], v8f acc1[2][2])
{
    for (int64_t c = c_begin; c < c_end; c += 16) {
        v8f x_lo[2], x_hi[2];
#pragma GCC unroll 2
        for (int t = 0; t < n_tokens; t++) {
            x_lo[t] = v8_load_aligned(x[t] + c);
            x_hi[t] = v8_load_aligned(x[t] + c + 8);
            v8_pin_in_register(&x_lo[t], &x_hi[t]);
        }
#pragma GCC unroll 2
        for (int r = 0; r < n_rows; r++) {
            v8f w_lo = v8_load_aligned(w[r] + c);
            v8f w_hi = v8_load_aligned(w[r] + c + 8);
            v8_pin_in_register(&w_lo, &w_hi);
#pragma GCC unroll 2
            for (int t = 0; t < n_tokens; t++) {
                acc0[r][t] = v8_fma(w_lo, x_lo[t], acc0[r][t]);
                acc1[r][t] = v8_fma(w_hi, x_hi[t], acc1[r][t]);
            }
        }
    }
}

/* Canonical-order partial dot products over columns [col_begin, col_end) of
 * N_ROWS x N_TOKENS (each 1..2) pairs, from fp32 rows/vectors zero-padded to
 * a multiple of 16. 2x2 blocking loads 4 vectors per 4 FMAs. The pair
 * (r, t) accumulates into state[r * state_row_stride + t] (zeroed first when
 * `first`); when y is not NULL the pair is finished into
 * y[t * y_token_stride + r]. Column segments let the caller keep a slab of
 * weights and activations in L1 across all row and token pairs.
 * scale_rows != NULL selects the fp8 order: rows hold e4m3 / 256 and each
 * 128-column block is summed apart, then folded in with scale_rows[r]'s
 * block scale (col_begin must then be a multiple of 128). */
K3_INLINE void dot_block_f32(int n_rows, int n_tokens, const float *const *w,
                             const float *const *x, int64_t col_begin, int64_t col_end,
                             const float *const *scale_rows, acc_pair *state,
                             int64_t state_row_stride, int first, float *y, int64_t y_token_stride)
{
    v8f acc0[2][2], acc1[2][2];
    if (!scale_rows) {
#pragma GCC unroll 2
        for (int r = 0; r < n_rows; r++) {
#pragma GCC unroll 2
            for (int t = 0; t < n_tokens; t++) {
                acc0[r][t] = first ? v8_zero() : state[r * state_row_stride + t].acc0;
                acc1[r][t] = first ? v8_zero() : state[r * state_row_stride + t].acc1;
            }
        }
        block_chunks(n_rows, n_tokens, w, x, col_begin, col_end, acc0, acc1);
    } else {
        /* The outer accumulators live in state (touched once per block), so
         * the block accumulators get the registers. */
        if (first) {
#pragma GCC unroll 2
            for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 2
                for (int t = 0; t < n_tokens; t++)
                    state[r * state_row_stride + t].acc0 = state[r * state_row_stride + t].acc1 =
                        v8_zero();
        }
        for (int64_t block = col_begin; block < col_end; block += FP8_BLOCK) {
            int64_t block_end = col_end - block < FP8_BLOCK ? col_end : block + FP8_BLOCK;
            v8f block0[2][2], block1[2][2];
            /* Compiler barrier: keeps the outer accumulators in memory instead
             * of registers during the chunk loop (else the 2x2 block spills
             * its weight vectors and loads each twice). */
            __asm__ volatile("" ::: "memory");
#pragma GCC unroll 2
            for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 2
                for (int t = 0; t < n_tokens; t++)
                    block0[r][t] = block1[r][t] = v8_zero();
            block_chunks(n_rows, n_tokens, w, x, block, block_end, block0, block1);
#pragma GCC unroll 2
            for (int r = 0; r < n_rows; r++) {
                v8f scale256 = fp8_scale256(scale_rows[r], block / FP8_BLOCK);
#pragma GCC unroll 2
                for (int t = 0; t < n_tokens; t++) {
                    acc_pair *st = &state[r * state_row_stride + t];
                    st->acc0 = v8_fma(block0[r][t], scale256, st->acc0);
                    st->acc1 = v8_fma(block1[r][t], scale256, st->acc1);
                }
            }
        }
#pragma GCC unroll 2
        for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 2
            for (int t = 0; t < n_tokens; t++) {
                acc0[r][t] = state[r * state_row_stride + t].acc0;
                acc1[r][t] = state[r * state_row_stride + t].acc1;
            }
    }
#pragma GCC unroll 2
    for (int r = 0; r < n_rows; r++) {
#pragma GCC unroll 2
        for (int t = 0; t < n_tokens; t++) {
            if (y) {
                y[t * y_token_stride + r] = hsum_canonical(acc0[r][t], acc1[r][t]);
            } else {
                state[r * state_row_stride + t].acc0 = acc0[r][t];
                state[r * state_row_stride + t].acc1 = acc1[r][t];
            }
        }
    }
}

/* Decode one weight row to fp32 (fp8: e4m3 / 256, scales applied later),
 * zero-padded to cols_padded, with the same decoders as the matvec kernels
 * (so values match bit for bit). */
K3_INLINE void decode_row_padded(k3_dtype dtype, row_ref row, int64_t cols,
                                 int64_t cols_padded, float *dst)
{
    const int64_t esize = simd_elem_bytes(dtype);
    const int64_t full_cols = cols & ~(int64_t)15;
    for (int64_t c = 0; c < full_cols; c += 16) {
        v8f w_lo, w_hi;
        decode16(dtype, row.data + c * esize, &w_lo, &w_hi);
        v8_storeu(dst + c, w_lo);
        v8_storeu(dst + c + 8, w_hi);
    }
    if (full_cols < cols) {
        unsigned char w_pad[64];
        v8f w_lo, w_hi;
        tail_padded_copy(dtype, row.data, full_cols, cols, w_pad);
        decode16(dtype, w_pad, &w_lo, &w_hi);
        v8_storeu(dst + full_cols, w_lo);
        v8_storeu(dst + full_cols + 8, w_hi);
    }
    (void)cols_padded;
}

/* One instantiation per dtype of the row decoder. */
static void decode_row_any(const k3_weight *W, int64_t r, int64_t cols_padded, float *dst)
{
    switch (W->dtype) {
    case K3_DT_F32:
        decode_row_padded(K3_DT_F32, row_of(K3_DT_F32, W, r), W->cols, cols_padded, dst);
        break;
    case K3_DT_BF16:
        decode_row_padded(K3_DT_BF16, row_of(K3_DT_BF16, W, r), W->cols, cols_padded, dst);
        break;
    case K3_DT_F16:
        decode_row_padded(K3_DT_F16, row_of(K3_DT_F16, W, r), W->cols, cols_padded, dst);
        break;
    case K3_DT_F8_E4M3:
        decode_row_padded(K3_DT_F8_E4M3, row_of(K3_DT_F8_E4M3, W, r), W->cols, cols_padded, dst);
        break;
    case K3_DT_MXFP4:                       /* cols is a multiple of 32: nothing to pad */
        k3_mxfp4_decode_row(W, r, dst);
        break;
    default: break;
    }
}

/* The 2x2, 2x1, 1x2, 1x1 instantiations (fully unrolled, accumulators in
 * registers), selected by row and token count. */
#define DOT_BLOCK_ARGS const float *const *w, const float *const *x, int64_t col_begin, \
    int64_t col_end, const float *const *scale_rows, acc_pair *state, int64_t stride, int first, \
    float *y, int64_t y_stride
#define DOT_BLOCK_PASS w, x, col_begin, col_end, scale_rows, state, stride, first, y, y_stride

static void dot_block_2x2(DOT_BLOCK_ARGS) { dot_block_f32(2, 2, DOT_BLOCK_PASS); }
static void dot_block_2x1(DOT_BLOCK_ARGS) { dot_block_f32(2, 1, DOT_BLOCK_PASS); }
static void dot_block_1x2(DOT_BLOCK_ARGS) { dot_block_f32(1, 2, DOT_BLOCK_PASS); }
static void dot_block_1x1(DOT_BLOCK_ARGS) { dot_block_f32(1, 1, DOT_BLOCK_PASS); }

/* Tokens whose accumulators are parked at once (state = 16 x 64 x 64 B). */
#define MATMUL_TOKEN_BLOCK 64

/* Floats between decoded rows in the scratch: one cache line more than the
 * row, so the rows of a column segment fall in different L1 sets (a stride
 * of a multiple of 4 KiB would put all 16 in the same 12-way set). */
static int64_t matmul_scratch_stride(int64_t cols_padded)
{
    return cols_padded + 16;
}

/* One half of the canonical order over columns [col_begin, col_end) for
 * N_ROWS x N_TOKENS (1..4 x 1..3) (row, token) pairs: half 0 is the A0
 * chain (columns c..c+8 of every 16-column chunk), half 1 the A1 chain
 * (c+8..c+16). The two chains never meet before the final reduction, so
 * running them one after the other, each (row, token) with one accumulator,
 * performs exactly the canonical sequence. With one register per pair a
 * 4x3 block fits the 16 vector registers (12 accumulators, 3 activations,
 * 1 weight) and loads 7 vectors per 12 FMAs, where the 2x2 block of both
 * chains loads 8 per 8. For unscaled rows (F32, BF16, F16, from the decoded
 * scratch); the pair (r, t) accumulates in state[r * state_row_stride + t],
 * from +0 when `first`; when y is not NULL, the A1 pass finishes the pair
 * into y[t * y_token_stride + r] instead of parking it. */
K3_INLINE void half_block(int n_rows, int n_tokens, int half, const float *const *w, const float *const *x,
                          int64_t col_begin, int64_t col_end, acc_pair *state, int64_t state_row_stride, int first,
                          float *y, int64_t y_token_stride)
{
    v8f acc[4][3];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 3
        for (int t = 0; t < n_tokens; t++)
            acc[r][t] = first ? v8_zero()
                              : half ? state[r * state_row_stride + t].acc1 : state[r * state_row_stride + t].acc0;
    for (int64_t c = col_begin + 8 * half; c < col_end; c += 16) {
        v8f xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < n_tokens; t++)
            xv[t] = v8_load_aligned(x[t] + c);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            v8f wv = v8_load_aligned(w[r] + c);
#pragma GCC unroll 3
            for (int t = 0; t < n_tokens; t++)
                acc[r][t] = v8_fma(wv, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 3
        for (int t = 0; t < n_tokens; t++) {
            acc_pair *st = &state[r * state_row_stride + t];
            if (!half) st->acc0 = acc[r][t];
            else if (y) y[t * y_token_stride + r] = hsum_canonical(st->acc0, acc[r][t]);
            else st->acc1 = acc[r][t];
        }
}

/* Both halves of a block, each instantiated for constant sizes. */
#define HALF_BLOCK_ARGS const float *const *w, const float *const *x, int64_t col_begin, int64_t col_end, \
    acc_pair *state, int64_t stride, int first, float *y, int64_t y_stride
#define HALF_BLOCK_FN(R, T) \
    static void half_block_##R##x##T(HALF_BLOCK_ARGS) \
    { \
        half_block(R, T, 0, w, x, col_begin, col_end, state, stride, first, y, y_stride); \
        half_block(R, T, 1, w, x, col_begin, col_end, state, stride, first, y, y_stride); \
    }
HALF_BLOCK_FN(4, 3) HALF_BLOCK_FN(4, 2) HALF_BLOCK_FN(4, 1)
HALF_BLOCK_FN(3, 3) HALF_BLOCK_FN(3, 2) HALF_BLOCK_FN(3, 1)
HALF_BLOCK_FN(2, 3) HALF_BLOCK_FN(2, 2) HALF_BLOCK_FN(2, 1)
HALF_BLOCK_FN(1, 3) HALF_BLOCK_FN(1, 2) HALF_BLOCK_FN(1, 1)

typedef void (*half_block_fn)(HALF_BLOCK_ARGS);
/* [rows - 1][tokens - 1] */
static const half_block_fn half_blocks[4][3] = {
    {half_block_1x1, half_block_1x2, half_block_1x3},
    {half_block_2x1, half_block_2x2, half_block_2x3},
    {half_block_3x1, half_block_3x2, half_block_3x3},
    {half_block_4x1, half_block_4x2, half_block_4x3},
};

/* Activation bytes one pass of matmul_rows_unscaled keeps in L2 (a group
 * of tokens' whole rows): every row quad streams its group's activations
 * once, so the group must stay cached from quad to quad; each further
 * group reads and decodes the thread's rows again. Measured on the 2-core
 * Xeon VM (2 MiB L2 per core; bf16 1024 x 3072, 256 tokens, 2 threads, G
 * multiply-adds per CPU second, `bench_kernels --prompt`): all 256 tokens'
 * 3 MiB in one group 46-54% of the fma peak, groups of 256 or 512 KiB
 * 52-54% (the weights read 11 times), 1 MiB 71%, as the 1024-column
 * shapes whose activations fit. */
#ifndef UNSCALED_GROUP_BYTES
#define UNSCALED_GROUP_BYTES (1024 * 1024)
#endif

/* Tokens per group of matmul_rows_unscaled: as many whole blocks of
 * UNSCALED_TOKENS as fit UNSCALED_GROUP_BYTES of activations, at least one. */
static int unscaled_group_tokens(int64_t cols_padded)
{
    int64_t blocks = UNSCALED_GROUP_BYTES / (UNSCALED_TOKENS * cols_padded * (int64_t)sizeof(float));
    return (int)(blocks > 1 ? blocks : 1) * UNSCALED_TOKENS;
}

/* matmul_rows for unscaled dtypes. Tokens go in groups whose activations
 * stay in L2 (unscaled_group_tokens); per group, a quad of rows is decoded,
 * then for each block of UNSCALED_TOKENS tokens, segment by segment of
 * columns, every token triple runs against the quad: the quad's segment and
 * the block's accumulators stay in L1 while the activations stream from L2
 * once per quad (the 2x2 path of matmul_rows streamed its 16 decoded rows
 * from L2 once per token pair, and parked 64 KiB of accumulators). A row
 * quad is decoded again for each group (cheap next to its group's fmas).
 * The accumulators start at +0 in the first segment and are reduced in the
 * last (hsum(A0 + A1), the canonical end), inside the block kernel; which
 * group or block a token is in changes no operation of its sums. */
static void matmul_rows_unscaled(float *Y, const k3_weight *W, const float *X_padded, int n_tokens,
                                 int64_t cols_padded, int64_t row_begin, int64_t row_end, float *scratch,
                                 acc_pair *state)
{
    int64_t rows = W->rows;
    int64_t scratch_stride = matmul_scratch_stride(cols_padded);
    const int group_tokens = unscaled_group_tokens(cols_padded);
    for (int group = 0; group < n_tokens; group += group_tokens) {
        const int group_end = n_tokens - group < group_tokens ? n_tokens : group + group_tokens;
        for (int64_t quad = row_begin; quad < row_end; quad += 4) {
            int n_row = row_end - quad < 4 ? (int)(row_end - quad) : 4;
            const float *w[4];
            for (int i = 0; i < n_row; i++)
                decode_row_any(W, quad + i, cols_padded, scratch + i * scratch_stride);
            for (int j = 0; j < 4; j++)
                w[j] = scratch + (j < n_row ? j : 0) * scratch_stride;
            /* the next quad's stored rows are one contiguous run: ask for
             * them now, so they come from memory while this quad computes
             * and its decode finds them in L2 */
            if (quad + 4 < row_end) {
                const unsigned char *next = (const unsigned char *)W->data + (quad + 4) * row_bytes(W->dtype, W->cols);
                int64_t next_bytes = (row_end - quad - 4 < 4 ? row_end - quad - 4 : 4) * row_bytes(W->dtype, W->cols);
                for (int64_t off = 0; off < next_bytes; off += 64)
                    __builtin_prefetch(next + off, 0, 2);
            }
            for (int token_block = group; token_block < group_end; token_block += UNSCALED_TOKENS) {
                int token_end = group_end - token_block < UNSCALED_TOKENS ? group_end : token_block + UNSCALED_TOKENS;
                for (int64_t seg = 0; seg < cols_padded; seg += UNSCALED_SEGMENT) {
                    int64_t seg_end = cols_padded - seg < UNSCALED_SEGMENT ? cols_padded : seg + UNSCALED_SEGMENT;
                    int first = seg == 0, last = seg_end == cols_padded;
                    for (int t = token_block; t < token_end; t += 3) {
                        int n_tok = token_end - t < 3 ? token_end - t : 3;
                        const float *x[3];
                        for (int j = 0; j < 3; j++)
                            x[j] = X_padded + (int64_t)(t + (j < n_tok ? j : 0)) * cols_padded;
                        half_blocks[n_row - 1][n_tok - 1](w, x, seg, seg_end, state + (t - token_block),
                                                          UNSCALED_TOKENS, first,
                                                          last ? Y + (int64_t)t * rows + quad : NULL, rows);
                    }
                }
            }
        }
    }
}

/* Rows [row_begin, row_end) for all tokens: decode MATMUL_ROW_BLOCK rows at a
 * time into scratch, then, segment by segment of columns, run every token
 * pair against every row pair. Each (row, token) still sees its chunks in
 * column order with the same two accumulators, i.e. the canonical order. */
static void matmul_rows(float *Y, const k3_weight *W, const float *X_padded, int n_tokens,
                        int64_t cols_padded, int64_t row_begin, int64_t row_end, float *scratch,
                        acc_pair *state)
{
    int64_t rows = W->rows;
    int64_t scratch_stride = matmul_scratch_stride(cols_padded);
    for (int64_t block = row_begin; block < row_end; block += MATMUL_ROW_BLOCK) {
        int64_t block_rows = row_end - block < MATMUL_ROW_BLOCK ? row_end - block : MATMUL_ROW_BLOCK;
        for (int64_t i = 0; i < block_rows; i++)
            decode_row_any(W, block + i, cols_padded, scratch + i * scratch_stride);
        for (int token_block = 0; token_block < n_tokens; token_block += MATMUL_TOKEN_BLOCK) {
            int token_end = n_tokens - token_block < MATMUL_TOKEN_BLOCK
                            ? n_tokens : token_block + MATMUL_TOKEN_BLOCK;
            for (int64_t seg = 0; seg < cols_padded; seg += MATMUL_COL_SEGMENT) {
                int64_t seg_end = cols_padded - seg < MATMUL_COL_SEGMENT
                                  ? cols_padded : seg + MATMUL_COL_SEGMENT;
                int first = seg == 0, last = seg_end == cols_padded;
                for (int t = token_block; t < token_end; t += 2) {
                    int token_pair = token_end - t >= 2;
                    const float *x[2] = {X_padded + t * cols_padded,
                                         X_padded + (t + token_pair) * cols_padded};
                    for (int64_t i = 0; i < block_rows; i += 2) {
                        int row_pair = block_rows - i >= 2;
                        const float *w[2] = {scratch + i * scratch_stride,
                                             scratch + (i + row_pair) * scratch_stride};
                        acc_pair *st = state + i * MATMUL_TOKEN_BLOCK + (t - token_block);
                        float *y = last ? Y + (int64_t)t * rows + block + i : NULL;
                        const float *scales[2] = {NULL, NULL};
                        const float *const *sc = NULL;
                        if (W->dtype == K3_DT_F8_E4M3) {
                            scales[0] = row_of(K3_DT_F8_E4M3, W, block + i).scale_row;
                            scales[1] = row_of(K3_DT_F8_E4M3, W, block + i + row_pair).scale_row;
                            sc = scales;
                        }
                        if (row_pair && token_pair)
                            dot_block_2x2(w, x, seg, seg_end, sc, st, MATMUL_TOKEN_BLOCK, first, y, rows);
                        else if (row_pair)
                            dot_block_2x1(w, x, seg, seg_end, sc, st, MATMUL_TOKEN_BLOCK, first, y, rows);
                        else if (token_pair)
                            dot_block_1x2(w, x, seg, seg_end, sc, st, MATMUL_TOKEN_BLOCK, first, y, rows);
                        else
                            dot_block_1x1(w, x, seg, seg_end, sc, st, MATMUL_TOKEN_BLOCK, first, y, rows);
                    }
                }
            }
        }
    }
}

/* Prompt processing: each weight row is read from memory once and decoded
 * once for all tokens. Results equal k3_matvec per token bit for bit (the
 * canonical order above); X is copied only when cols is not a multiple of 16
 * (zero padding) or is misaligned for aligned loads. When the copy or a
 * thread's scratch cannot be allocated, the rows are computed token by token
 * with k3_matvec_rows, which needs no memory and gives the same bits: an
 * allocation failure costs speed, never the process (tests/test_alloc_fail.c). */
void k3_matmul(float *Y, const k3_weight *W, const float *X, int n_tokens)
{
    int64_t rows = W->rows, cols = W->cols;
    if (n_tokens <= 0 || rows <= 0)
        return;
    if (n_tokens == 1) {
        k3_matvec(Y, W, X);
        return;
    }
    if (W->dtype == K3_DT_GGML) {           /* each row decoded once for all tokens */
        if (k3_quant_matmul(Y, W->qtype, W->data, rows, cols, X, n_tokens))
            for (int t = 0; t < n_tokens; t++)   /* no scratch: the same bits, slower */
                k3_matvec(Y + (int64_t)t * rows, W, X + (int64_t)t * cols);
        return;
    }
    if (W->dtype == K3_DT_MXFP4 && kernels_activations_q8) {
        k3_mxfp4_q8_matmul(Y, W, X, n_tokens);
        return;
    }
    if (simd_usable(W) && rows * cols < MATVEC_PARALLEL_MIN_ELEMS) {
        /* Tiny, cache-resident matrix: scratch setup would cost more than it
         * saves; per-token matvecs give the same bits (canonical order). */
        for (int t = 0; t < n_tokens; t++)
            k3_matvec_rows(Y + (int64_t)t * rows, W, X + (int64_t)t * cols, 0, rows);
        return;
    }
    if (!simd_usable(W)) {
#pragma omp parallel for schedule(static) if (rows * cols * n_tokens >= MATVEC_PARALLEL_MIN_ELEMS)
        for (int64_t r = 0; r < rows; r++)
            for (int t = 0; t < n_tokens; t++)
                Y[(int64_t)t * rows + r] = dot_row_scalar(W, r, X + (int64_t)t * cols);
        return;
    }
    int64_t cols_padded = (cols + 15) & ~(int64_t)15;
    float *X_copy = NULL;
    const float *X_padded = X;
    if (cols_padded != cols || ((uintptr_t)X & 31)) {
        X_copy = aligned_alloc(64, (size_t)(n_tokens * cols_padded * sizeof(float) + 63) & ~(size_t)63);
        if (!X_copy) {                      /* out of memory: same bits without the copy */
            for (int t = 0; t < n_tokens; t++)
                k3_matvec(Y + (int64_t)t * rows, W, X + (int64_t)t * cols);
            return;
        }
        for (int t = 0; t < n_tokens; t++) {
            memcpy(X_copy + t * cols_padded, X + (int64_t)t * cols, (size_t)cols * sizeof(float));
            memset(X_copy + t * cols_padded + cols, 0, (size_t)(cols_padded - cols) * sizeof(float));
        }
        X_padded = X_copy;
    }
    size_t scratch_bytes = (size_t)(MATMUL_ROW_BLOCK * matmul_scratch_stride(cols_padded) * sizeof(float));
    int64_t row_blocks = (rows + MATMUL_ROW_BLOCK - 1) / MATMUL_ROW_BLOCK;
    int parallel = rows * cols >= MATVEC_PARALLEL_MIN_ELEMS && row_blocks >= 2 &&
                   !omp_in_parallel() && omp_get_max_threads() > 1;
#pragma omp parallel if (parallel)
    {
        int64_t n_threads = omp_get_num_threads(), thread = omp_get_thread_num();
        int64_t begin = row_blocks * thread / n_threads * MATMUL_ROW_BLOCK;
        int64_t end = row_blocks * (thread + 1) / n_threads * MATMUL_ROW_BLOCK;
        if (end > rows)
            end = rows;
        if (begin < end) {
            float *scratch = aligned_alloc(64, scratch_bytes);
            acc_pair *state = aligned_alloc(64, MATMUL_ROW_BLOCK * MATMUL_TOKEN_BLOCK * sizeof(acc_pair));
            if (scratch && state && W->dtype != K3_DT_F8_E4M3)
                matmul_rows_unscaled(Y, W, X_padded, n_tokens, cols_padded, begin, end, scratch, state);
            else if (scratch && state)
                matmul_rows(Y, W, X_padded, n_tokens, cols_padded, begin, end, scratch, state);
            else                            /* out of memory: same bits, one token at a time */
                for (int t = 0; t < n_tokens; t++)
                    k3_matvec_rows(Y + (int64_t)t * rows, W, X + (int64_t)t * cols, begin, end);
            free(scratch);
            free(state);
        }
    }
    free(X_copy);
}

/* ------------------------------------------------------------------------ */
/* fp32 vector helpers                                                       */
/* ------------------------------------------------------------------------ */

/* Dot product of two fp32 vectors in the canonical order, so it equals a
 * one-row F32 k3_matvec bit for bit. */
float k3_dot_f32(const float *a, const float *b, int64_t n)
{
    if (n <= 0)
        return 0.0f;
    if (kernels_scalar_forced) {
        float sum = 0.0f;
        for (int64_t i = 0; i < n; i++)
            sum += a[i] * b[i];
        return sum;
    }
    row_ref row = {(const unsigned char *)a, NULL, NULL};
    float out;
    dot_rows_simd(K3_DT_F32, 1, &row, b, n, &out);
    return out;
}

/* y += a * x. The SIMD path rounds once per element (fma) everywhere,
 * tail included, so an element's result does not depend on n or position. */
void k3_axpy_f32(float *y, float a, const float *x, int64_t n)
{
    if (kernels_scalar_forced) {
        for (int64_t i = 0; i < n; i++)
            y[i] += a * x[i];
        return;
    }
    v8f a_vec = v8_set1(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8f y0 = v8_fma(a_vec, v8_loadu(x + i), v8_loadu(y + i));
        v8f y1 = v8_fma(a_vec, v8_loadu(x + i + 8), v8_loadu(y + i + 8));
        v8_storeu(y + i, y0);
        v8_storeu(y + i + 8, y1);
    }
    for (; i + 8 <= n; i += 8)
        v8_storeu(y + i, v8_fma(a_vec, v8_loadu(x + i), v8_loadu(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}
