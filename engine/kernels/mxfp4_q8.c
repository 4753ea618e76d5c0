/* mxfp4_q8.c - the activation-quantized MXFP4 path (--activations q8).
 *
 * The exact path (matvec.c) decodes every weight to fp32 and spends one fma
 * per weight. Here, as llama.cpp computes MXFP4 and its K-quants, x is
 * quantized per 32-column group to int8 with one fp32 scale, a group's dot
 * product with the doubled E2M1 codes (small integers, -12..12) is exact in
 * int32, and one float multiply-add per group applies both scales.
 *
 * Its own contract, bit-identical across thread counts, budgets, decode and
 * prompt, and ISAs:
 *
 *   Quantization: per group g of 32 columns, amax = the largest |x| (NaN
 *   skipped), d_g = amax / 127 and q = rintf(x * (127 / amax)) clamped to
 *   [-127, 127] (NaN -> -127; all 0 when amax is 0; rintf rounds to
 *   nearest, ties to even): element-wise IEEE operations, so the scalar
 *   loop and kernels_x86.h's 8-lane version give the same codes. The int8
 *   codes are stored in the q8 position order: position p < 16 holds
 *   column 2p of the group, p >= 16 column 2(p - 16) + 1 (the order the
 *   nibbles unpack into, low nibbles then high nibbles).
 *
 *   A row keeps 8 fp32 lanes, from +0. For each group in order, lane l gets
 *   the exact integer P_l = sum over positions 4l..4l+3 of doubled E2M1 code
 *   times q, and lane l = fma((float)P_l, d_g * (scale_g / 2), lane l),
 *   where scale_g / 2 is the group's E8M0 power of two halved (the codes
 *   are doubled) and d_g * (scale_g / 2) is one fp32 multiply. The row is
 *   the canonical hsum of the 8 lanes (lane i + i+4, i + i+2, 0 + 1).
 *
 * |P_l| <= 4 * 12 * 127 and the AVX2 pair sums of (code + 12) * q stay
 * within 2 * 24 * 127, so nothing saturates and (float)P_l is exact. Every
 * back end computes the same integers and then the same fp32 operations in
 * the same order. The scalar reference (k3_mxfp4_q8_row_scalar) states the
 * contract in plain C; the tests hold the vector paths to it bit for bit. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "mxfp4.h"
#include "kernels_arch.h"
#ifdef K3_HAVE_AVX_VNNI_Q8
#include <cpuid.h>
#endif

/* Columns whose quantized x fits on the stack (Kimi K3's widest MXFP4
 * matrix has 7168); wider rows take the heap. */
#define Q8_STACK_COLS 8192

/* Matrices with fewer weights than this stay on the calling thread (as
 * k3_matvec's MATVEC_PARALLEL_MIN_ELEMS). */
#define Q8_PARALLEL_MIN_ELEMS ((int64_t)1 << 15)

/* One token's quantized x: codes in position order, group scales, and
 * the per-lane offsets of k3_mxfp4_q8_quantize. */
typedef struct {
    int8_t *q;
    float *d;
    int32_t *offsets;
} q8_x;

/* Column (within its group) of q8 position p. */
static int q8_position_column(int p)
{
    return p < 16 ? 2 * p : 2 * (p - 16) + 1;
}

/* 127 / amax, or 0 for an all-zero group: the one division per group. */
static float q8_inverse(float amax)
{
    return amax > 0.0f ? 127.0f / amax : 0.0f;
}

/* Quantize x (cols, a multiple of 32) per group: int8 codes in position
 * order into q, scales into d (the contract above), and, when offsets is
 * not NULL, per group and lane l the integer 12 * (sum of q over positions
 * 4l..4l+3): a back end that looks up codes + 12 (unsigned, for
 * vpmaddubsw) subtracts it to get the exact P_l. Scalar on purpose: its
 * bits must not depend on the ISA, and it costs one pass over x against a
 * pass over rows x cols weights. */
void k3_mxfp4_q8_quantize(const float *x, int64_t cols, int8_t *q, float *d, int32_t *offsets)
{
    for (int64_t g = 0; g < cols / 32; g++) {
        const float *xg = x + g * 32;
        int8_t *qg = q + g * 32;
#if defined(K3_HAVE_Q8_QUANTIZE_GROUP)
        if (!k3_kernels_scalar_forced()) {    /* the same codes, 8 columns at a time */
            int32_t ints[32];
            float amax = q8_quantize_group_columns(xg, q8_inverse, ints);
            d[g] = amax / 127.0f;
            for (int p = 0; p < 32; p++)
                qg[p] = (int8_t)ints[q8_position_column(p)];
        } else
#endif
        {
            float amax = 0.0f;
            for (int c = 0; c < 32; c++)
                if (fabsf(xg[c]) > amax)
                    amax = fabsf(xg[c]);
            float inverse = q8_inverse(amax);
            d[g] = amax / 127.0f;
            for (int p = 0; p < 32; p++) {
                float v = xg[q8_position_column(p)] * inverse;
                if (!(v >= -127.0f))   /* NaN too: a defined code, never UB */
                    v = -127.0f;
                if (v > 127.0f)
                    v = 127.0f;
                qg[p] = (int8_t)rintf(v);   /* ties to even; exact in int8 */
            }
        }
        for (int l = 0; offsets && l < 8; l++)
            offsets[g * 8 + l] = 12 * (qg[4 * l] + qg[4 * l + 1] + qg[4 * l + 2] + qg[4 * l + 3]);
    }
}

/* The doubled E2M1 code of q8 position p of a group's 16 nibble bytes. */
static int q8_doubled_code(const uint8_t *bytes16, int p)
{
    static const int8_t doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    return doubled[p < 16 ? bytes16[p] & 0x0F : bytes16[p - 16] >> 4];
}

/* Half the group's power of two, as the contract multiplies it. */
static float q8_half_scale(uint8_t e8m0)
{
    return 0.5f * k3_e8m0_to_f32(e8m0);
}

/* One group of the contract: lane l gets the exact integer dot of
 * positions 4l..4l+3 (doubled codes x int8 activations), times the group's
 * scales, in one fma. Both scalar rows below share it. */
static void q8_group_into_lanes(const uint8_t *bytes16, uint8_t e8m0, const int8_t *q32, float d, float lanes[8])
{
    const float group_scale = d * q8_half_scale(e8m0);
    for (int l = 0; l < 8; l++) {
        int32_t partial = 0;
        for (int p = 4 * l; p < 4 * l + 4; p++)
            partial += q8_doubled_code(bytes16, p) * q32[p];
        lanes[l] = fmaf((float)partial, group_scale, lanes[l]);
    }
}

/* The contract's final sum of the eight lanes: halves, quarters, pair. */
static float q8_lanes_sum(float lanes[8])
{
    for (int i = 0; i < 4; i++)
        lanes[i] += lanes[i + 4];
    for (int i = 0; i < 2; i++)
        lanes[i] += lanes[i + 2];
    return lanes[0] + lanes[1];
}

/* The contract in plain C for row r, from x already quantized (q, d). */
static float q8_row_from_quantized(const k3_weight *W, int64_t r, const int8_t *q, const float *d)
{
    const uint8_t *packed = (const uint8_t *)W->data + r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + r * (W->cols / 32);
    float lanes[8] = {0};
    for (int64_t g = 0; g < W->cols / 32; g++)
        q8_group_into_lanes(packed + g * 16, scale[g], q + g * 32, d[g], lanes);
    return q8_lanes_sum(lanes);
}

/* The scalar reference of one row from fp32 x: quantizes group by group
 * (no buffer: also the path when a quantized copy cannot be allocated). */
float k3_mxfp4_q8_row_scalar(const k3_weight *W, int64_t r, const float *x)
{
    const uint8_t *packed = (const uint8_t *)W->data + r * (W->cols / 2);
    const uint8_t *scale = W->mx_scale + r * (W->cols / 32);
    float lanes[8] = {0};
    for (int64_t g = 0; g < W->cols / 32; g++) {
        int8_t q[32];
        float d;
        k3_mxfp4_q8_quantize(x + g * 32, 32, q, &d, NULL);
        q8_group_into_lanes(packed + g * 16, scale[g], q, d, lanes);
    }
    return q8_lanes_sum(lanes);
}

/* Bytes ahead of the group being read that q8_dot_block prefetches in
 * each row stream. */
#ifndef Q8_PREFETCH_AHEAD_BYTES
#define Q8_PREFETCH_AHEAD_BYTES 2048
#endif

/* Tokens whose quantized x share one nibble lookup in a prompt (4 rows x
 * 4 tokens: 16 accumulators; the token loops must unroll, or the partials
 * go through memory and four run slower than two). */
#define Q8_TOKENS 4

/* N_ROWS (1..4) rows against N_TOKENS (1..Q8_TOKENS) quantized x: per
 * group, each row's nibbles are looked up once and give each token's 8
 * integer partial sums (v8_mxfp4_q8_partials_tokens), then one fma per
 * (row, token) with the group's scale product: every (row, token) sees
 * the contract's operations, whatever N_ROWS and N_TOKENS. */
K3_INLINE void q8_dot_block(int n_rows, int n_tokens, int vnni, const uint8_t *const *packed,
                            const uint8_t *const *scale, const q8_x *xq, int64_t cols,
                            float out[][Q8_TOKENS])
{
    (void)vnni;   /* 1: the AVX-VNNI instruction for the partial sums (x86 only) */
    v8f acc[4][Q8_TOKENS];
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 4
        for (int t = 0; t < n_tokens; t++)
            acc[r][t] = v8_zero();
    for (int64_t g = 0; g < cols / 32; g++) {
        const int8_t *q[Q8_TOKENS];
        const int32_t *offsets[Q8_TOKENS];
#pragma GCC unroll 4
        for (int t = 0; t < n_tokens; t++) {
            q[t] = xq[t].q + g * 32;
            offsets[t] = xq[t].offsets + g * 8;
        }
        if ((g & 3) == 0)   /* one prefetch per 64 bytes of each stream */
#pragma GCC unroll 4
            for (int r = 0; r < n_rows; r++)
                __builtin_prefetch(packed[r] + g * 16 + Q8_PREFETCH_AHEAD_BYTES, 0, 3);
        v8f d[Q8_TOKENS];   /* each token's group scale, in every lane */
#pragma GCC unroll 4
        for (int t = 0; t < n_tokens; t++)
            d[t] = v8_keep(v8_set1(xq[t].d[g]));
#pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            v8f partial[Q8_TOKENS];
#ifdef K3_HAVE_AVX_VNNI_Q8
            if (vnni)
                v8_mxfp4_q8_partials_tokens_vnni(packed[r] + g * 16, n_tokens, q, offsets, partial);
            else
#endif
                v8_mxfp4_q8_partials_tokens(packed[r] + g * 16, n_tokens, q, offsets, partial);
            /* the scale product in all lanes (the same IEEE product as the
             * scalar d * half_scale): a broadcast load and a vector
             * multiply, no broadcast shuffle per row */
            const v8f half_scale = v8_set1(k3_mxfp4_half_scales[scale[r][g]]);
#pragma GCC unroll 4
            for (int t = 0; t < n_tokens; t++)
                acc[r][t] = v8_fma(partial[t], v8_mul(d[t], half_scale), acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
#pragma GCC unroll 4
        for (int t = 0; t < n_tokens; t++)
            out[r][t] = v8_hsum(acc[r][t]);
}

/* One instantiation per token count (and x86 instruction set), so the
 * loops above unroll. */
typedef void q8_dot_rows_fn(int n_rows, const uint8_t *const *packed, const uint8_t *const *scale,
                            const q8_x *xq, int64_t cols, float out[][Q8_TOKENS]);
#define Q8_DOT_ROWS(name, n_tokens, vnni)                                                            \
    static void name(int n_rows, const uint8_t *const *packed, const uint8_t *const *scale,          \
                     const q8_x *xq, int64_t cols, float out[][Q8_TOKENS])                           \
    {                                                                                                \
        if (n_rows == 4) q8_dot_block(4, n_tokens, vnni, packed, scale, xq, cols, out);              \
        else q8_dot_block(1, n_tokens, vnni, packed, scale, xq, cols, out);                          \
    }
Q8_DOT_ROWS(q8_dot_rows_1, 1, 0)
Q8_DOT_ROWS(q8_dot_rows_2, 2, 0)
Q8_DOT_ROWS(q8_dot_rows_3, 3, 0)
Q8_DOT_ROWS(q8_dot_rows_4, 4, 0)
#ifdef K3_HAVE_AVX_VNNI_Q8
Q8_DOT_ROWS(q8_dot_rows_1_vnni, 1, 1)
Q8_DOT_ROWS(q8_dot_rows_2_vnni, 2, 1)
Q8_DOT_ROWS(q8_dot_rows_3_vnni, 3, 1)
Q8_DOT_ROWS(q8_dot_rows_4_vnni, 4, 1)
#endif

/* -1 until asked: whether the AVX-VNNI path is in use (the CPU has it and
 * tests have not turned it off). */
static int q8_vnni_state = -1;

/* Whether the CPU has AVX-VNNI: CPUID leaf 7, subleaf 1, EAX bit 4 (asked
 * directly: not every compiler's __builtin_cpu_supports knows the name).
 * CPUID traps to the hypervisor in a VM (21 us a call here), so it is
 * asked once, not per matvec. */
static int q8_vnni_cpu(void)
{
#ifdef K3_HAVE_AVX_VNNI_Q8
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax >> 4 & 1);
#else
    return 0;
#endif
}

/* See mxfp4.h. */
int k3_mxfp4_q8_vnni(int set)
{
    int state = __atomic_load_n(&q8_vnni_state, __ATOMIC_RELAXED);
    if (set >= 0 || state < 0) {
        state = (set != 0) && q8_vnni_cpu();
        __atomic_store_n(&q8_vnni_state, state, __ATOMIC_RELAXED);
    }
    return state;
}

/* The row kernel for n_tokens (1..Q8_TOKENS) on this CPU. */
static q8_dot_rows_fn *q8_dot_rows_for(int n_tokens)
{
#ifdef K3_HAVE_AVX_VNNI_Q8
    static q8_dot_rows_fn *const vnni[Q8_TOKENS] = {q8_dot_rows_1_vnni, q8_dot_rows_2_vnni, q8_dot_rows_3_vnni,
                                                    q8_dot_rows_4_vnni};
    if (k3_mxfp4_q8_vnni(-1))
        return vnni[n_tokens - 1];
#endif
    static q8_dot_rows_fn *const plain[Q8_TOKENS] = {q8_dot_rows_1, q8_dot_rows_2, q8_dot_rows_3, q8_dot_rows_4};
    return plain[n_tokens - 1];
}

/* Rows [b, e) for n_tokens (1..Q8_TOKENS) quantized x into y[t]: four
 * quarter streams per step, as matvec.c's rows_simd walks memory (one row
 * from each quarter), then the leftover rows one at a time. */
static void q8_rows(float *const *y, int n_tokens, const k3_weight *W, const q8_x *xq, int64_t b, int64_t e)
{
    const int64_t row_bytes = W->cols / 2, groups = W->cols / 32;
    const uint8_t *data = W->data;
    if (k3_kernels_scalar_forced()) {
        for (int t = 0; t < n_tokens; t++)
            for (int64_t r = b; r < e; r++)
                y[t][r] = q8_row_from_quantized(W, r, xq[t].q, xq[t].d);
        return;
    }
    q8_dot_rows_fn *dot = q8_dot_rows_for(n_tokens);
    int64_t quarter = (e - b) / 4;
    for (int64_t i = 0; i < quarter; i++) {
        int64_t r[4] = {b + i, b + i + quarter, b + i + 2 * quarter, b + i + 3 * quarter};
        const uint8_t *packed[4], *scale[4];
        for (int k = 0; k < 4; k++) {
            packed[k] = data + r[k] * row_bytes;
            scale[k] = W->mx_scale + r[k] * groups;
        }
        float out[4][Q8_TOKENS];
        dot(4, packed, scale, xq, W->cols, out);
        for (int k = 0; k < 4; k++)
            for (int t = 0; t < n_tokens; t++)
                y[t][r[k]] = out[k][t];
    }
    for (int64_t r = b + 4 * quarter; r < e; r++) {
        const uint8_t *packed = data + r * row_bytes, *scale = W->mx_scale + r * groups;
        float out[1][Q8_TOKENS];
        dot(1, &packed, &scale, xq, W->cols, out);
        for (int t = 0; t < n_tokens; t++)
            y[t][r] = out[0][t];
    }
}

/* Bytes of one token's quantized x: codes, scales, offsets. */
static size_t q8_bytes(int64_t cols)
{
    return (size_t)cols + (size_t)(cols / 32) * (sizeof(float) + 8 * sizeof(int32_t));
}

/* Lay a q8_x over `bytes` (q8_bytes(cols) of them, 4-byte aligned). */
static q8_x q8_over(void *bytes, int64_t cols)
{
    q8_x xq;
    xq.d = bytes;
    xq.offsets = (int32_t *)(xq.d + cols / 32);
    xq.q = (int8_t *)(xq.offsets + cols / 4);
    return xq;
}

/* Quantize x into xq. */
static void q8_quantize(const float *x, int64_t cols, q8_x *xq)
{
    k3_mxfp4_q8_quantize(x, cols, xq->q, xq->d, xq->offsets);
}

/* k3_matvec_rows for MXFP4 under q8 activations (single-threaded): x is
 * quantized on the stack (the heap for rows wider than Q8_STACK_COLS; if
 * that fails, the scalar reference, same bits). */
void k3_mxfp4_q8_matvec_rows(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e)
{
    _Alignas(32) char stack[Q8_STACK_COLS + Q8_STACK_COLS / 32 * (sizeof(float) + 8 * sizeof(int32_t))];
    void *bytes = W->cols <= Q8_STACK_COLS ? stack : malloc(q8_bytes(W->cols));
    if (!bytes) {
        for (int64_t r = b; r < e; r++)
            y[r] = k3_mxfp4_q8_row_scalar(W, r, x);
        return;
    }
    k3_mxfp4_tables_init();
    q8_x xq = q8_over(bytes, W->cols);
    q8_quantize(x, W->cols, &xq);
    q8_rows(&y, 1, W, &xq, b, e);
    if (bytes != stack)
        free(bytes);
}

/* k3_matmul for MXFP4 under q8 activations: each token's x is quantized
 * once, then each thread's rows run in blocks of 16 rows (8 KiB of nibbles
 * at 1024 columns, hot in L1/L2 across the tokens), Q8_TOKENS tokens per
 * pass sharing the nibble lookups. Every (row, token) gets the contract's
 * operations on the same quantized x as the matvec: decode and prompt give
 * the same bits. */
void k3_mxfp4_q8_matmul(float *Y, const k3_weight *W, const float *X, int n_tokens)
{
    const int64_t rows = W->rows, cols = W->cols;
    char *bytes = malloc(q8_bytes(cols) * (size_t)n_tokens);
    if (!bytes) {                           /* out of memory: same bits, token by token */
        for (int t = 0; t < n_tokens; t++)
            k3_mxfp4_q8_matvec_rows(Y + (int64_t)t * rows, W, X + (int64_t)t * cols, 0, rows);
        return;
    }
    k3_mxfp4_tables_init();
    for (int t = 0; t < n_tokens; t++) {
        q8_x xq = q8_over(bytes + q8_bytes(cols) * (size_t)t, cols);
        q8_quantize(X + (int64_t)t * cols, cols, &xq);
    }
    int64_t blocks = (rows + 15) / 16;
    int parallel = rows * cols >= Q8_PARALLEL_MIN_ELEMS && blocks >= 2 && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t block = 0; block < blocks; block++) {
        int64_t b = block * 16, e = b + 16 < rows ? b + 16 : rows;
        for (int t = 0; t < n_tokens; t += Q8_TOKENS) {
            int n = n_tokens - t < Q8_TOKENS ? n_tokens - t : Q8_TOKENS;
            q8_x xq[Q8_TOKENS];
            float *y[Q8_TOKENS];
            for (int k = 0; k < n; k++) {
                xq[k] = q8_over(bytes + q8_bytes(cols) * (size_t)(t + k), cols);
                y[k] = Y + (int64_t)(t + k) * rows;
            }
            q8_rows(y, n, W, xq, b, e);
        }
    }
    free(bytes);
}
