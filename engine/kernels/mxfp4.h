/* mxfp4.h - MXFP4 weights (compressed-tensors mxfp4-pack-quantized, Kimi K3
 * routed experts): decode and dot products straight from the nibbles.
 *
 * A row of `cols` weights is cols/2 bytes of E2M1 nibbles (low nibble = even
 * column) and cols/32 E8M0 scale bytes: w = E2M1[nib] * 2^(scale - 127).
 * Every decoded value is exact in fp32. The vector dot (any back end of
 * kernels_arch.h) works straight from the nibbles in one fixed order (group_step in mxfp4.c) that the matmul path
 * repeats on a row decoded once, so k3_matmul gives exactly k3_matvec's
 * numbers; the scalar path (decode, sequential sum) is the reference.
 * Scale byte 255 (NaN in OCP MX) is refused by the loaders (k3_mxfp4_check). */
#ifndef K3_MXFP4_H
#define K3_MXFP4_H

#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

/* The 16 E2M1 values. */
extern const float k3_e2m1_values[16];

/* E8M0 byte -> 2^(b-127) as float (b = 0 gives 2^-127, a subnormal). */
float k3_e8m0_to_f32(uint8_t b);

/* Decode row r (W->cols values) into out, scalar reference or vector. */
void k3_mxfp4_decode_row_scalar(const k3_weight *W, int64_t r, float *out);
void k3_mxfp4_decode_row(const k3_weight *W, int64_t r, float *out);

/* y[r] for r in [b, e): single-threaded. */
void k3_mxfp4_rows(float *y, const k3_weight *W, const float *x, int64_t b, int64_t e);

/* Y[t][r] for all tokens t and rows r in [b, e): each row decoded once. */
void k3_mxfp4_matmul_rows(float *Y, const k3_weight *W, const float *X, int n_tokens, int64_t b, int64_t e);

/* 0 if no scale byte is 255; else -1 and the first offending row in *row. */
int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row);

#endif
