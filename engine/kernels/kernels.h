/* kernels.h - the numeric inner loops: weight decode and dot products.
 *
 * Weights stay in their stored format (bf16, f16, f32, fp8 e4m3 with 128x128
 * block scales); they are decoded inside the dot product, never copied out as
 * fp32. Every kernel has a plain scalar reference beside its vector path; the
 * scalar path is selected with k3_kernels_force_scalar(1) (tests use it to
 * compare the two). The vector path is written once (matvec.c, mxfp4.c) on
 * the 8-lane vocabulary of the back end kernels_arch.h picks at compile time
 * (x86-64-v3 AVX2, aarch64 NEON or portable C): all three give the same
 * bits. Activations and accumulation are fp32. */
#ifndef K3_KERNELS_H
#define K3_KERNELS_H

#include <stdint.h>
#include "dtype.h"

/* A row-major weight matrix [rows x cols] as stored on disk or in memory.
 * For K3_DT_F8_E4M3, block_scale points at fp32 [ceil(rows/128)][ceil(cols/128)]
 * multipliers (DeepSeek-V3 "weight_scale_inv" convention: W = fp8 * scale),
 * or is NULL for an unscaled fp8 matrix. */
typedef struct k3_weight {
    k3_dtype dtype;
    int64_t rows, cols;
    const void *data;
    const float *block_scale;
    /* K3_DT_MXFP4 only: data is packed nibbles [rows][cols/2] (low nibble =
     * even column), mx_scale the E8M0 exponents [rows][cols/32]. */
    const uint8_t *mx_scale;
    /* K3_DT_GGML only: the GGUF block type of data, rows of cols /
     * qtype->block_elems blocks (quant_types.h, quant_matvec.h). */
    const struct k3_quant_type *qtype;
} k3_weight;

/* Scalar decoders of single values (bit-exact, used by loaders and tests). */
float k3_bf16_to_f32(uint16_t h);
uint16_t k3_f32_to_bf16(float f);   /* round to nearest even; NaN stays NaN */
float k3_f16_to_f32(uint16_t h);
uint16_t k3_f32_to_f16(float f);    /* round to nearest even */
float k3_e4m3_to_f32(uint8_t b);

/* Convert n elements of dtype dt to fp32 (for small tensors at load, and for
 * embedding rows). Supports F32, F16, BF16, F8_E4M3 (unscaled), F64, I32, I64,
 * U8, I8. */
void k3_convert_to_f32(float *dst, const void *src, k3_dtype dt, int64_t n);

/* Row r of a bf16 or f16 matrix as fp32, 8 values at a time (exact: the
 * values of k3_convert_to_f32); 0 for other dtypes or under
 * k3_kernels_force_scalar (the caller then converts). */
int k3_decode_row_f32(const k3_weight *W, int64_t r, float *out);

/* Force the scalar reference kernels (1) or allow SIMD (0, default). */
void k3_kernels_force_scalar(int on);
int  k3_kernels_scalar_forced(void);

/* Activations of the MXFP4 matvec and matmul (Kimi K3's routed experts)
 * and of the GGUF block types: 0 = fp32, exact (the default: the canonical
 * order of matvec.c); 1 = q8, quantized per block to int8 with integer dot
 * products (mxfp4_q8.c; quant_matvec.c per 32 or 256 columns as llama.cpp
 * does; each its own bit-identical contract). Process-wide: k3_model_open
 * sets it from k3_options.activations_q8. F32, F16, BF16, F8 and the GGUF
 * types Q4_1 and Q5_1 are unaffected. */
void k3_kernels_set_activations_q8(int on);
int  k3_kernels_activations_q8(void);

/* y[r] = sum_c W[r][c] * x[c] for r in [row_begin, row_end). Single-threaded. */
void k3_matvec_rows(float *y, const k3_weight *W, const float *x,
                    int64_t row_begin, int64_t row_end);

/* y = W x, all rows; splits rows across OpenMP threads when the matrix is
 * large enough to pay for it. y has W->rows floats, x has W->cols floats. */
void k3_matvec(float *y, const k3_weight *W, const float *x);

/* One product of a group run together: y = W x (k3_matvec), or for
 * k3_matmul_group y[t] = W x[t] over the group's tokens. */
typedef struct k3_matvec_job {
    float *y;
    const k3_weight *W;
    const float *x;
} k3_matvec_job;

/* Every job of the group in ONE parallel region: each thread takes its
 * share of every matrix's rows, one matrix after the other, with no
 * barrier between them. A decode step has dozens of small matvecs a layer;
 * waking the team once for several of them instead of once each is what
 * this saves (a wake-up under OMP_WAIT_POLICY=passive costs tens of
 * microseconds). A row's value does not depend on the thread or the range
 * that computes it, so the bits equal k3_matvec on each job. */
void k3_matvec_group(const k3_matvec_job *jobs, int n_jobs);

/* k3_matvec_group for one token; for n_tokens > 1, k3_matmul on each job
 * (x [n_tokens][cols], y [n_tokens][rows]): the same bits either way. */
void k3_matmul_group(const k3_matvec_job *jobs, int n_jobs, int n_tokens);

/* Y[t][r] = W[r] . X[t] for t < n_tokens: one pass over W for several
 * activation vectors (prompt processing). X is [n_tokens][cols],
 * Y is [n_tokens][rows]. Results equal k3_matvec on each row of X exactly
 * (same summation order). */
void k3_matmul(float *Y, const k3_weight *W, const float *X, int n_tokens);

/* Plain fp32 dot product (SIMD when allowed). */
float k3_dot_f32(const float *a, const float *b, int64_t n);

/* y += a * x */
void k3_axpy_f32(float *y, float a, const float *x, int64_t n);

#endif
