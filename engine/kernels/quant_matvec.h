/* quant_matvec.h - matrix-vector products of GGUF block-type weights with
 * fp32 activations (the exact path of issue 27: no activation is
 * quantized), and the q8 activation path beside it.
 *
 * A matrix is `rows` rows of `cols` weights, each row cols / block_elems
 * blocks (quant_types.h). Row r's result is the dot product of its weights,
 * decoded exactly as llama.cpp decodes them, with x, summed in the canonical
 * order of matvec.c (16-column chunks, two 8-lane FMA accumulators, the fixed
 * reduction): it equals k3_dot_f32(decoded row, x) bit for bit on every back
 * end and thread count. Every block type decodes 16 weights at a time in
 * vector registers inside the dot product; F32, F16 and BF16 rows go to the
 * plain kernels of matvec.c (the same contract). Forcing the scalar kernels
 * (k3_kernels_force_scalar) gives the plain reference: the decoded row
 * summed left to right. Under k3_kernels_set_activations_q8(1) the types
 * with a q8 kernel take that path instead (k3_quant_q8_available). */
#ifndef K3_QUANT_MATVEC_H
#define K3_QUANT_MATVEC_H

#include <stdint.h>
#include "quant_types.h"

/* Bytes of one row of cols weights of type t. */
uint64_t k3_quant_row_bytes(const k3_quant_type *t, int64_t cols);

/* y[r] = row r . x for r in [0, rows); rows split across OpenMP threads
 * when the matrix is large. cols must be a multiple of t->block_elems.
 * Needs no memory except under q8 activations past 8192 columns (then the
 * quantized x takes the heap, or, failing that, the scalar reference
 * gives the same bits); returns 0. */
int k3_quant_matvec(float *y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *x);

/* The same for rows [row_begin, row_end) on the calling thread, with no
 * allocation but the one above (k3_matvec_rows's building block for
 * K3_DT_GGML weights). */
void k3_quant_matvec_rows(float *y, const k3_quant_type *t, const void *data, int64_t cols, const float *x,
                          int64_t row_begin, int64_t row_end);

/* Y[t][r] = row r . X[t] for t < n_tokens (X is [n_tokens][cols], Y is
 * [n_tokens][rows]): each row is decoded once (in registers, into a slab
 * of fp32 rows) and the slab multiplied by every token with the F32
 * matmul kernel, so a prompt pays the decode once per row, not once per
 * token. Each value equals k3_quant_matvec on that token bit for bit
 * (forced scalar: its reference). Returns 0, or -1 when scratch memory
 * cannot be had. */
int k3_quant_matmul(float *Y, const k3_quant_type *t, const void *data, int64_t rows, int64_t cols,
                    const float *X, int n_tokens);

/* Whether type t has a kernel of the q8 activation path, which
 * k3_kernels_set_activations_q8(1) selects for k3_quant_matvec and
 * k3_quant_matmul (quant_matvec.c states its contract: x quantized per
 * block to int8, integer dot products, one fp32 multiply-add per block,
 * bit-identical across back ends and thread counts). The other types keep
 * the exact path under the switch. */
int k3_quant_q8_available(const k3_quant_type *t);

#endif
