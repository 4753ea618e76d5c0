/* quant_quantize.h - fp32 weights -> GGUF blocks (the other direction of
 * quant_types.h), for `k3 pack --trunk/--experts TYPE`.
 *
 * Each quantizer follows the reference algorithm of its format in
 * llama.cpp's ggml-quants.c (the quantize_row_*_ref functions, the ones
 * llama-quantize runs when it is given no importance matrix), with the same
 * fp32 operations in the same order and the same rounding functions, so a
 * row quantized here is byte for byte the row llama.cpp writes from the same
 * floats. docs/MODEL.md ("Quantizing") restates each algorithm;
 * tests/ref/quant_np.py is the independent numpy version they are tested
 * against. The input must be finite (a NaN or an infinity has no block). */
#ifndef K3_QUANT_QUANTIZE_H
#define K3_QUANT_QUANTIZE_H

#include <stdint.h>
#include "quant_types.h"

/* 1 when k3 can write type t (Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4). */
int k3_quant_can_quantize(const k3_quant_type *t);

/* Quantize n_elems floats (a multiple of t->block_elems) from src into
 * n_elems / block_elems blocks at dst. Returns 0, or -1 when t cannot be
 * written (k3_quant_can_quantize) or n_elems is not whole blocks. */
int k3_quant_quantize(const k3_quant_type *t, const float *src, int64_t n_elems, void *dst);

#endif
