/* matvec.c - dot products of stored-format weight rows with fp32 activations.
 *
 * Canonical summation order (the contract that makes results bit-identical
 * across k3_matvec, k3_matvec_rows, k3_matmul, k3_dot_f32 and any thread
 * count on the SIMD path):
 *
 *   Each weight is first decoded to the exact fp32 value (bf16/f16/f32 are
 *   exact; fp8 is w = e4m3 * block_scale rounded once to fp32). A row of
 *   `cols` values is cut into 16-column chunks; the last one is zero-padded
 *   (weight and x) to 16. Two 8-lane accumulators A0, A1 start at +0 and, for
 *   each chunk in column order, A0 = fma(w[c..c+8), x[c..c+8), A0) and
 *   A1 = fma(w[c+8..c+16), x[c+8..c+16), A1). The row result is
 *   hsum(A0 + A1), where hsum adds lane i to lane i+4, then lane i to i+2,
 *   then lane 0 to lane 1 (hsum_canonical below).
 *
 * Every SIMD kernel - one row or four rows at once straight from bf16/f16/
 * fp8/f32 memory, or 2x2 (rows x tokens) blocks from a decoded fp32 scratch
 * in k3_matmul - performs exactly this sequence of operations per row, so a
 * row's value never depends on which kernel or thread computed it.
 *
 * The scalar reference (k3_kernels_force_scalar(1)) is a plain left-to-right
 * fp32 loop; it differs from the SIMD result only by summation order and FMA
 * rounding. */
#include <immintrin.h>
#include <omp.h>
#include "mxfp4.h"
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "kernels.h"

#define K3_INLINE static inline __attribute__((always_inline))

/* Matrices with fewer elements than this are done on the calling thread:
 * waking the OpenMP team costs a few microseconds, more than the work. */
#define MATVEC_PARALLEL_MIN_ELEMS ((int64_t)1 << 15)

/* Software prefetch distance (bytes ahead in each weight row) and hint. */
#ifndef PF_DIST
#define PF_DIST 2048
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif

/* fp8 block scales cover 128 x 128 weights. */
#define FP8_BLOCK 128

static int kernels_scalar_forced;

/* Tests flip this to compare SIMD kernels against the scalar references. */
void k3_kernels_force_scalar(int on)
{
    kernels_scalar_forced = on != 0;
}

/* So callers (and tests) can report which path ran. */
int k3_kernels_scalar_forced(void)
{
    return kernels_scalar_forced;
}

/* ------------------------------------------------------------------------ */
/* Scalar references                                                         */
/* ------------------------------------------------------------------------ */

/* Decode weight (r, c) of W to fp32 exactly as the SIMD kernels see it.
 * Unaligned-safe (memcpy) because rows point into mmap'd files. */
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

/* ------------------------------------------------------------------------ */
/* SIMD building blocks                                                      */
/* ------------------------------------------------------------------------ */

/* The fixed final reduction of the canonical order (see top of file). */
K3_INLINE float hsum_canonical(__m256 acc0, __m256 acc1)
{
    __m256 v = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* 8 bf16 -> 8 fp32: zero-extend to 32 bits and shift into the high half. */
K3_INLINE __m256 bf16x8_to_f32(const void *p)
{
    __m256i u32 = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u32, 16));
}

/* 16 e4m3 bytes -> 16 f16 values equal to e4m3 / 256. The e4m3 bit pattern
 * s.eeee.mmm placed at f16 bits 15 | 13..7 is the same number with exponent
 * bias 15 instead of 7 (subnormals included), i.e. scaled by 2^-8; the caller
 * folds the 2^8 back into the block scale (exact: power of two). The NaN code
 * S.1111.111 becomes f16 0xFFFF (NaN). */
K3_INLINE __m256i e4m3x16_to_f16_div256(const void *p)
{
    __m256i b16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
    __m256i mag = _mm256_and_si256(b16, _mm256_set1_epi16(0x7F));
    __m256i sign = _mm256_and_si256(b16, _mm256_set1_epi16(0x80));
    __m256i is_nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7F));
    __m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7), _mm256_slli_epi16(sign, 8));
    return _mm256_or_si256(h, is_nan);
}

/* Decode the 16 weights at p (column chunk) to two fp32 vectors.
 * scale256 is only used for fp8: block scale * 256 (see above). With dtype a
 * compile-time constant after inlining, the switch disappears. */
K3_INLINE void decode16(k3_dtype dtype, const unsigned char *p, __m256 scale256,
                        __m256 *w_lo, __m256 *w_hi)
{
    switch (dtype) {
    case K3_DT_F32:
        *w_lo = _mm256_loadu_ps((const float *)p);
        *w_hi = _mm256_loadu_ps((const float *)p + 8);
        break;
    case K3_DT_BF16:
        *w_lo = bf16x8_to_f32(p);
        *w_hi = bf16x8_to_f32(p + 16);
        break;
    case K3_DT_F16:
        *w_lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        *w_hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 16)));
        break;
    case K3_DT_F8_E4M3: {
        __m256i h = e4m3x16_to_f16_div256(p);
        *w_lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), scale256);
        *w_hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), scale256);
        break;
    }
    default:
        *w_lo = *w_hi = _mm256_setzero_ps();
        break;
    }
}

/* Bytes per element of the dtypes with SIMD kernels (constant-folded). */
K3_INLINE int64_t simd_elem_bytes(k3_dtype dtype)
{
    return dtype == K3_DT_F32 ? 4 : dtype == K3_DT_F8_E4M3 ? 1 : 2;
}

/* fp32 scale vector for fp8 column block `block` of one row's scale row:
 * scale * 256 (the f16 trick's 2^8), or plain 256 when unscaled. */
K3_INLINE __m256 fp8_scale256(const float *scale_row, int64_t block)
{
    float s = scale_row ? scale_row[block] : 1.0f;
    return _mm256_set1_ps(s * 256.0f);
}

/* Everything a row kernel needs to know about one weight row. */
typedef struct {
    const unsigned char *data;  /* first element of the row */
    const float *scale_row;     /* fp8: this row's block scales, or NULL */
} row_ref;

/* Describe row r of W (whose dtype is `dtype`, passed as a constant so the
 * element size folds) for the kernels. */
K3_INLINE row_ref row_of(k3_dtype dtype, const k3_weight *W, int64_t r)
{
    row_ref ref;
    ref.data = (const unsigned char *)W->data + r * W->cols * simd_elem_bytes(dtype);
    ref.scale_row = NULL;
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

/* The canonical-order dot products of N_ROWS (1..4) rows with one x, reading
 * each row once and sharing the x loads: with 4 rows there are 8 independent
 * FMA chains, enough to hide FMA latency, and 4 concurrent memory streams.
 * fp8 iterates per 128-column block so its scale is fetched once per block. */
K3_INLINE void dot_rows_simd(k3_dtype dtype, int n_rows, const row_ref *rows,
                             const float *x, int64_t cols, float *out)
{
    const int64_t esize = simd_elem_bytes(dtype);
    const int64_t full_cols = cols & ~(int64_t)15;
    __m256 acc0[4], acc1[4], scale256[4];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++) {
        acc0[r] = _mm256_setzero_ps();
        acc1[r] = _mm256_setzero_ps();
        scale256[r] = _mm256_setzero_ps();
    }
    const int64_t block_cols = dtype == K3_DT_F8_E4M3 ? FP8_BLOCK : full_cols;
    for (int64_t block_begin = 0; block_begin < full_cols; block_begin += block_cols) {
        int64_t block_end = block_begin + block_cols;
        if (block_end > full_cols)
            block_end = full_cols;
        if (dtype == K3_DT_F8_E4M3) {
#pragma GCC unroll 4
            for (int r = 0; r < n_rows; r++)
                scale256[r] = fp8_scale256(rows[r].scale_row, block_begin / FP8_BLOCK);
        }
        for (int64_t c = block_begin; c < block_end; c += 16) {
            __m256 x_lo = _mm256_loadu_ps(x + c);
            __m256 x_hi = _mm256_loadu_ps(x + c + 8);
#pragma GCC unroll 4
            for (int r = 0; r < n_rows; r++) {
                __m256 w_lo, w_hi;
                if (PF_DIST)
                    _mm_prefetch((const char *)rows[r].data + c * esize + PF_DIST, PF_HINT);
                decode16(dtype, rows[r].data + c * esize, scale256[r], &w_lo, &w_hi);
                acc0[r] = _mm256_fmadd_ps(w_lo, x_lo, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(w_hi, x_hi, acc1[r]);
            }
        }
    }
    if (full_cols < cols) {
        float x_pad[16] = {0};
        memcpy(x_pad, x + full_cols, (size_t)(cols - full_cols) * sizeof(float));
        __m256 x_lo = _mm256_loadu_ps(x_pad);
        __m256 x_hi = _mm256_loadu_ps(x_pad + 8);
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            unsigned char w_pad[64];
            __m256 w_lo, w_hi;
            tail_padded_copy(dtype, rows[r].data, full_cols, cols, w_pad);
            if (dtype == K3_DT_F8_E4M3)
                scale256[r] = fp8_scale256(rows[r].scale_row, full_cols / FP8_BLOCK);
            decode16(dtype, w_pad, scale256[r], &w_lo, &w_hi);
            acc0[r] = _mm256_fmadd_ps(w_lo, x_lo, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(w_hi, x_hi, acc1[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        out[r] = hsum_canonical(acc0[r], acc1[r]);
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
        dot_rows_simd(dtype, 4, rows, x, W->cols, out);
        y[r0] = out[0];
        y[r0 + quarter] = out[1];
        y[r0 + 2 * quarter] = out[2];
        y[r0 + 3 * quarter] = out[3];
    }
    for (int64_t r = row_begin + 4 * quarter; r < row_end; r++) {
        row_ref row = row_of(dtype, W, r);
        dot_rows_simd(dtype, 1, &row, x, W->cols, y + r);
    }
}

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

/* True when W's dtype has SIMD kernels and SIMD is allowed. */
static int simd_usable(const k3_weight *W)
{
    if (kernels_scalar_forced)
        return 0;
    return W->dtype == K3_DT_F32 || W->dtype == K3_DT_BF16 || W->dtype == K3_DT_F16 ||
           W->dtype == K3_DT_F8_E4M3;
}

/* Single-threaded building block of k3_matvec (also used by callers that
 * parallelise at a coarser level, e.g. over experts). */
void k3_matvec_rows(float *y, const k3_weight *W, const float *x,
                    int64_t row_begin, int64_t row_end)
{
    if (row_begin >= row_end)
        return;
    if (W->dtype == K3_DT_MXFP4) {          /* Kimi K3 experts: engine/mxfp4.c */
        k3_mxfp4_rows(y, W, x, row_begin, row_end);
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
    default: break;
    }
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
    int64_t row_quads = (rows + 3) / 4;
#pragma omp parallel
    {
        int64_t n_threads = omp_get_num_threads(), thread = omp_get_thread_num();
        int64_t begin = row_quads * thread / n_threads * 4;
        int64_t end = row_quads * (thread + 1) / n_threads * 4;
        if (end > rows)
            end = rows;
        k3_matvec_rows(y, W, x, begin, end);
    }
}

/* ------------------------------------------------------------------------ */
/* k3_matmul: several tokens per pass over the weights                       */
/* ------------------------------------------------------------------------ */

/* Rows decoded per block; the decoded fp32 block is reused by all tokens. */
#define MATMUL_ROW_BLOCK 16

/* Canonical-order dot products of N_ROWS x N_TOKENS (each 1..2) pairs from
 * fp32 rows/vectors that are zero-padded to cols_padded (a multiple of 16).
 * 2x2 blocking loads 4 vectors per 4 FMAs, which keeps the FMA units busy. */
K3_INLINE void dot_block_f32(int n_rows, int n_tokens, const float *const *w,
                             const float *const *x, int64_t cols_padded,
                             float *y, int64_t y_token_stride)
{
    __m256 acc0[2][2], acc1[2][2];
    for (int r = 0; r < n_rows; r++)
        for (int t = 0; t < n_tokens; t++)
            acc0[r][t] = acc1[r][t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < cols_padded; c += 16) {
        __m256 x_lo[2], x_hi[2];
        for (int t = 0; t < n_tokens; t++) {
            x_lo[t] = _mm256_load_ps(x[t] + c);
            x_hi[t] = _mm256_load_ps(x[t] + c + 8);
        }
        for (int r = 0; r < n_rows; r++) {
            __m256 w_lo = _mm256_load_ps(w[r] + c);
            __m256 w_hi = _mm256_load_ps(w[r] + c + 8);
            for (int t = 0; t < n_tokens; t++) {
                acc0[r][t] = _mm256_fmadd_ps(w_lo, x_lo[t], acc0[r][t]);
                acc1[r][t] = _mm256_fmadd_ps(w_hi, x_hi[t], acc1[r][t]);
            }
        }
    }
    for (int r = 0; r < n_rows; r++)
        for (int t = 0; t < n_tokens; t++)
            y[t * y_token_stride + r] = hsum_canonical(acc0[r][t], acc1[r][t]);
}

/* Decode one weight row to fp32, zero-padded to cols_padded, with the very
 * same decoder calls the matvec kernels make (so values match bit for bit). */
K3_INLINE void decode_row_padded(k3_dtype dtype, row_ref row, int64_t cols,
                                 int64_t cols_padded, float *dst)
{
    const int64_t esize = simd_elem_bytes(dtype);
    const int64_t full_cols = cols & ~(int64_t)15;
    __m256 scale256 = _mm256_setzero_ps();
    for (int64_t c = 0; c < full_cols; c += 16) {
        __m256 w_lo, w_hi;
        if (dtype == K3_DT_F8_E4M3 && c % FP8_BLOCK == 0)
            scale256 = fp8_scale256(row.scale_row, c / FP8_BLOCK);
        decode16(dtype, row.data + c * esize, scale256, &w_lo, &w_hi);
        _mm256_store_ps(dst + c, w_lo);
        _mm256_store_ps(dst + c + 8, w_hi);
    }
    if (full_cols < cols) {
        unsigned char w_pad[64];
        __m256 w_lo, w_hi;
        tail_padded_copy(dtype, row.data, full_cols, cols, w_pad);
        if (dtype == K3_DT_F8_E4M3)
            scale256 = fp8_scale256(row.scale_row, full_cols / FP8_BLOCK);
        decode16(dtype, w_pad, scale256, &w_lo, &w_hi);
        _mm256_store_ps(dst + full_cols, w_lo);
        _mm256_store_ps(dst + full_cols + 8, w_hi);
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
    default: break;
    }
}

/* The 2x2, 2x1, 1x2, 1x1 variants, so the compiler keeps accumulators in
 * registers with fully unrolled inner loops. */
static void dot_block_2x2(const float *const *w, const float *const *x, int64_t n, float *y, int64_t s)
{
    dot_block_f32(2, 2, w, x, n, y, s);
}

static void dot_block_2x1(const float *const *w, const float *const *x, int64_t n, float *y, int64_t s)
{
    dot_block_f32(2, 1, w, x, n, y, s);
}

static void dot_block_1x2(const float *const *w, const float *const *x, int64_t n, float *y, int64_t s)
{
    dot_block_f32(1, 2, w, x, n, y, s);
}

static void dot_block_1x1(const float *const *w, const float *const *x, int64_t n, float *y, int64_t s)
{
    dot_block_f32(1, 1, w, x, n, y, s);
}

/* Rows [row_begin, row_end) for all tokens: decode MATMUL_ROW_BLOCK rows at a
 * time into scratch (cache-resident), then run every token against them. */
static void matmul_rows(float *Y, const k3_weight *W, const float *X_padded, int n_tokens,
                        int64_t cols_padded, int64_t row_begin, int64_t row_end, float *scratch)
{
    int64_t rows = W->rows;
    for (int64_t block = row_begin; block < row_end; block += MATMUL_ROW_BLOCK) {
        int64_t block_rows = row_end - block < MATMUL_ROW_BLOCK ? row_end - block : MATMUL_ROW_BLOCK;
        for (int64_t i = 0; i < block_rows; i++)
            decode_row_any(W, block + i, cols_padded, scratch + i * cols_padded);
        int t = 0;
        for (; t < n_tokens; t += 2) {
            int token_pair = n_tokens - t >= 2;
            const float *x[2] = {X_padded + t * cols_padded,
                                 X_padded + (t + token_pair) * cols_padded};
            int64_t i = 0;
            for (; i + 2 <= block_rows; i += 2) {
                const float *w[2] = {scratch + i * cols_padded, scratch + (i + 1) * cols_padded};
                float *y = Y + (int64_t)t * rows + block + i;
                if (token_pair)
                    dot_block_2x2(w, x, cols_padded, y, rows);
                else
                    dot_block_2x1(w, x, cols_padded, y, rows);
            }
            if (i < block_rows) {
                const float *w[1] = {scratch + i * cols_padded};
                float *y = Y + (int64_t)t * rows + block + i;
                if (token_pair)
                    dot_block_1x2(w, x, cols_padded, y, rows);
                else
                    dot_block_1x1(w, x, cols_padded, y, rows);
            }
        }
    }
}

/* Prompt processing: each weight row is read from memory once and decoded
 * once for all tokens. Results equal k3_matvec per token bit for bit (the
 * canonical order above); X is copied only when cols is not a multiple of 16
 * (zero padding) or is misaligned for aligned loads. */
void k3_matmul(float *Y, const k3_weight *W, const float *X, int n_tokens)
{
    int64_t rows = W->rows, cols = W->cols;
    if (n_tokens <= 0 || rows <= 0)
        return;
    if (n_tokens == 1) {
        k3_matvec(Y, W, X);
        return;
    }
    if (W->dtype == K3_DT_MXFP4) {          /* each row decoded once for all tokens */
#pragma omp parallel for schedule(static) if (rows * cols * n_tokens >= MATVEC_PARALLEL_MIN_ELEMS)
        for (int64_t r = 0; r < rows; r += 16)
            k3_mxfp4_matmul_rows(Y, W, X, n_tokens, r, r + 16 < rows ? r + 16 : rows);
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
        if (!X_copy)
            abort();
        for (int t = 0; t < n_tokens; t++) {
            memcpy(X_copy + t * cols_padded, X + (int64_t)t * cols, (size_t)cols * sizeof(float));
            memset(X_copy + t * cols_padded + cols, 0, (size_t)(cols_padded - cols) * sizeof(float));
        }
        X_padded = X_copy;
    }
    size_t scratch_bytes = (size_t)(MATMUL_ROW_BLOCK * cols_padded * sizeof(float));
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
            if (!scratch)
                abort();
            matmul_rows(Y, W, X_padded, n_tokens, cols_padded, begin, end, scratch);
            free(scratch);
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
    row_ref row = {(const unsigned char *)a, NULL};
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
    __m256 a_vec = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 y0 = _mm256_fmadd_ps(a_vec, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
        __m256 y1 = _mm256_fmadd_ps(a_vec, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8));
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + 8, y1);
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a_vec, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}
