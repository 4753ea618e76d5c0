/* quant_iq.h - the register-decoding row kernels of the IQ2 and IQ3 GGUF
 * types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) for quant_matvec.c's
 * exact path: each row's dot product with fp32 x equals k3_dot_f32 over
 * the scalar decoder's weights (quant_types.c) bit for bit, and each row
 * decoder gives those weights. cols is a multiple of 256. */
#ifndef K3_QUANT_IQ_H
#define K3_QUANT_IQ_H

#include <stdint.h>

float k3_iq2_xxs_dot_row(const uint8_t *row, int64_t cols, const float *x);
void k3_iq2_xxs_decode_row(const uint8_t *row, int64_t cols, float *out);
float k3_iq2_xs_dot_row(const uint8_t *row, int64_t cols, const float *x);
void k3_iq2_xs_decode_row(const uint8_t *row, int64_t cols, float *out);
float k3_iq2_s_dot_row(const uint8_t *row, int64_t cols, const float *x);
void k3_iq2_s_decode_row(const uint8_t *row, int64_t cols, float *out);
float k3_iq3_xxs_dot_row(const uint8_t *row, int64_t cols, const float *x);
void k3_iq3_xxs_decode_row(const uint8_t *row, int64_t cols, float *out);
float k3_iq3_s_dot_row(const uint8_t *row, int64_t cols, const float *x);
void k3_iq3_s_decode_row(const uint8_t *row, int64_t cols, float *out);

/* The q8 activation path's reference view of a block of grid type id
 * (K3_GGML_IQ2_XXS .. K3_GGML_IQ3_S), read weight by weight from the
 * layout: weight i = codes[i] * sub_scale[i / 16] * *d_w exactly, codes the
 * signed grid magnitudes (|code| <= 62), sub-scales 2 s + 1 (1..31), *d_w
 * d / 8 (IQ2), d / 4 (IQ3_XXS) or d (IQ3_S). */
void k3_iq_block_ints(uint32_t id, const uint8_t *block, int codes[256], int sub_scale[16], float *d_w);

#endif
