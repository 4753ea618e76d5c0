/* mxfp4.h - MXFP4 weights (compressed-tensors mxfp4-pack-quantized, Kimi K3
 * routed experts): the value tables, the row decoders and the loaders' check.
 *
 * A row of `cols` weights is cols/2 bytes of E2M1 nibbles (low nibble = even
 * column) and cols/32 E8M0 scale bytes: w = E2M1[nib] * 2^(scale - 127).
 * Every decoded value is exact in fp32, so the dot products are those of
 * engine/kernels/matvec.c in its canonical order (k3_matvec straight from the
 * nibbles, k3_matmul on rows decoded once), the same bits either way.
 * Scale byte 255 (NaN in OCP MX) is refused by the loaders (k3_mxfp4_check). */
#ifndef K3_MXFP4_H
#define K3_MXFP4_H

#include <stddef.h>
#include <stdint.h>
#include "kernels.h"

/* The 16 E2M1 values. */
extern const float k3_e2m1_values[16];

/* E8M0 byte -> 2^(b-127) as float, by building the float bits (exact; b = 0
 * gives 2^-127, the one subnormal). Inline: the matvec kernel calls it once
 * per 32-weight group, where a call would cost more than the group. */
static inline float k3_e8m0_to_f32(uint8_t b)
{
    union { uint32_t u; float f; } v = {b ? (uint32_t)b << 23 : 0x00400000u};
    return v.f;
}

/* Every E2M1 value times every E8M0 scale, as bf16 bit patterns split in
 * bytes: for scale byte e, low[i] and high[i] (i < 16, repeated at i + 16 so
 * one 32-byte register holds a lookup table per 128-bit half) are the low
 * and high byte of the top 16 bits of the fp32 product e2m1[i] * 2^(e-127).
 * That product is exact and its low 16 bits are zero (at most two
 * significant bits, subnormals included; overflow gives inf), so the two
 * bytes are the exact weight: a vector decoder looks a weight up, scale
 * applied, with two byte shuffles instead of a convert and a multiply. */
typedef struct {
    uint8_t low[32];
    uint8_t high[32];
} k3_mxfp4_bf16_bytes;

/* The 256 tables (16 KiB), filled once by k3_mxfp4_tables_init(). */
extern k3_mxfp4_bf16_bytes k3_mxfp4_bf16_tables[256];

/* Half of every E8M0 scale (0.5 * 2^(e-127), exact), filled with the
 * tables: the q8 path multiplies it by the activation group's scale. */
extern float k3_mxfp4_half_scales[256];

/* Fill k3_mxfp4_bf16_tables and k3_mxfp4_half_scales (thread-safe, once; later calls are an atomic
 * load). Called by the MXFP4 matvec before its first table lookup. */
void k3_mxfp4_tables_init(void);

/* The q8 MXFP4 kernel's AVX-VNNI path (x86: vpdpbusd, used when the CPU
 * has it; mxfp4_q8.c). set -1 asks; 0 turns it off, 1 back on if the CPU
 * has it (tests check both paths against the scalar contract). Returns
 * whether it is in use. */
int k3_mxfp4_q8_vnni(int set);

/* Decode row r (W->cols values) into out: the scalar reference (mxfp4.c),
 * or the vector decoder (matvec.c; the scalar one when scalar is forced). */
void k3_mxfp4_decode_row_scalar(const k3_weight *W, int64_t r, float *out);
void k3_mxfp4_decode_row(const k3_weight *W, int64_t r, float *out);

/* 0 if no scale byte is 255; else -1 and the first offending row in *row. */
int k3_mxfp4_check(const uint8_t *scales, int64_t rows, int64_t cols, int64_t *row);

/* The activation-quantized path (mxfp4_q8.c, --activations q8): x
 * quantized per 32-column group to int8 (q in position order, d the group
 * scales), integer dot products with the doubled E2M1 codes, one fma per
 * group. Its contract is at the top of mxfp4_q8.c. */
void k3_mxfp4_q8_quantize(const float *x, int64_t cols, int8_t *q, float *d, int32_t *offsets);
float k3_mxfp4_q8_row_scalar(const k3_weight *W, int64_t r, const float *x);
void k3_mxfp4_q8_matvec_rows(float *y, const k3_weight *W, const float *x, int64_t row_begin, int64_t row_end);
void k3_mxfp4_q8_matmul(float *Y, const k3_weight *W, const float *X, int n_tokens);

#endif
