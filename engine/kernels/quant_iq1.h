/* quant_iq1.h - the 1-bit importance-matrix types of GGUF files, IQ1_S and
 * IQ1_M (llama.cpp's ggml types 19 and 29): the grid their weights select
 * and a scalar reference decoder of each, rows of quant_types.c's table.
 * docs/MODEL.md ("GGUF") restates both layouts.
 *
 * Both types code 256 weights per block as 32 groups of 8; each group is
 * one of the 2048 points of the IQ1 grid (8 levels of -1, 0 or +1) plus a
 * shift of +-1/8, times a scale per 16 or 32 weights:
 *   w = (d * (2 s + 1)) * (level + delta),  delta = +-0.125,
 * the product and the sum each rounded to fp32 as llama.cpp's reference
 * dequantization rounds them (the sum is exact). quant_iq1_lanes.h decodes
 * the same blocks in vector registers for quant_matvec.c. */
#ifndef K3_QUANT_IQ1_H
#define K3_QUANT_IQ1_H

#include <stdint.h>

/* Bytes per 256-weight block: IQ1_S is an f16 d, 32 bytes of low grid
 * index bits and 8 little-endian u16 words (one per 32 weights); IQ1_M is
 * 32 bytes of low index bits, 16 bytes of high index bits and shift signs,
 * 8 bytes of 3-bit scales whose top nibbles are its f16 d. */
#define K3_IQ1_S_BLOCK_BYTES 50
#define K3_IQ1_M_BLOCK_BYTES 56

/* The IQ1 grid: point i, byte j is the level (-1, 0, +1, as a signed
 * byte) of the group's weight j. */
extern const uint64_t k3_iq1_grid[2048];

/* The shift every group's levels take, + or - this (IQ1S_DELTA and
 * IQ1M_DELTA of llama.cpp, both 1/8). */
#define K3_IQ1_DELTA 0.125f

/* Decode n_blocks IQ1_S / IQ1_M blocks into 256 floats each (the
 * k3_quant_decode_fn of quant_types.h). */
void k3_decode_iq1_s(const uint8_t *blocks, int64_t n_blocks, float *out);
void k3_decode_iq1_m(const uint8_t *blocks, int64_t n_blocks, float *out);

/* IQ1_M's block scale: the f16 whose four nibbles, low first, are the top
 * nibbles of the block's four little-endian u16 scale words (bytes 48..55). */
uint16_t k3_iq1_m_scale_bits(const uint8_t *block);

/* The q8 activation path's view of a block (is_m: IQ1_M, else IQ1_S):
 * weight i = codes[i] * sub_scale[i / 16] * *d_eighth exactly, codes
 * 8 level +- 1 (-9..9), sub-scales 2 s + 1 (1..15), *d_eighth = d / 8. */
void k3_iq1_block_ints(int is_m, const uint8_t *block, int codes[256], int sub_scale[16], float *d_eighth);

#endif
