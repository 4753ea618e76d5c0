/* quant_mxfp4_lanes.h - the exact GGUF MXFP4 decoder of quant_matvec.c's
 * four-row kernel, as the packed MXFP4 kernel of matvec.c decodes: a weight
 * is looked up, scale applied, as the two high bytes of its fp32 pattern
 * (a bf16 number), instead of widened, converted and multiplied.
 *
 * GGUF's 17-byte block is one E8M0 byte e and 16 bytes of nibbles, the low
 * nibble of byte i column i, the high nibble column 16 + i, and the weight
 * is (doubled E2M1 code) * 2^(e - 128). That product is exact with at most
 * two significant bits (its low 16 bits are zero, subnormals and the
 * overflow to inf included), so for each of the 256 scale bytes a 16-entry
 * table of its low and high bf16 bytes (quant_matvec.c fills them from the
 * scalar decoder's own values) gives the weight bit for bit.
 *
 * The decoder yields the 32 weights of a block in the lane order
 * MXFP4_GGUF_LANE_COLUMNS: lane l (0-15) of a 16-column chunk's two vectors
 * holds column MXFP4_GGUF_LANE_COLUMNS[l] of the chunk, the same for both
 * chunks of the block, so accumulator lane l carries the canonical chain of
 * that column (x is put in the same order once per call). Internal to
 * quant_matvec.c; only the x86 back end has it (K3_HAVE_MXFP4_GGUF_LANES),
 * the others keep the 16-weight block decoder. */
#ifndef K3_QUANT_MXFP4_LANES_H
#define K3_QUANT_MXFP4_LANES_H

#include <stdint.h>
#include <string.h>
#include "kernels_arch.h"
#include "mxfp4.h"
#include "quant_lanes.h"

#if defined(K3_KERNELS_X86_H)
#define K3_HAVE_MXFP4_GGUF_LANES 1

/* Even columns of the chunk in the first vector, odd in the second. */
#define MXFP4_GGUF_LANE_COLUMNS {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15}

/* 16 floats of x (one chunk) in the lane order above. */
K3_INLINE void v16_to_mxfp4_gguf_lanes(const float *x16, float *lanes16)
{
    const __m256i even_then_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256 first = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x16), even_then_odd);
    __m256 second = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x16 + 8), even_then_odd);
    /* first = c0 c2 c4 c6 | c1 c3 c5 c7, second = c8 .. c14 | c9 .. c15 */
    _mm256_storeu_ps(lanes16, _mm256_permute2f128_ps(first, second, 0x20));
    _mm256_storeu_ps(lanes16 + 8, _mm256_permute2f128_ps(first, second, 0x31));
}

/* One block's 16 nibble bytes and its scale's table -> w[0], w[1] columns
 * 0-15 and w[2], w[3] columns 16-31, in the lane order above. Bytes 0-7
 * and 8-15 are broadcast and blended into [b0-7 b0-7 | b8-15 b8-15] (load
 * ports and one blend, no cross-lane shuffle), a 64-bit shift of 0 or 4
 * and a mask give the nibbles of columns [0-7 16-23 | 8-15 24-31], two
 * byte shuffles look up the low and high byte of each weight, the unpacks
 * pair them into columns 0-15 and 16-31 as bf16 words, and a shift or a
 * mask turns the even and odd words into floats. */
K3_INLINE void v32_from_mxfp4_gguf_lanes(const uint8_t *bytes16, const k3_mxfp4_bf16_bytes *table, v8f w[4])
{
    long long first8, second8;
    memcpy(&first8, bytes16, 8);
    memcpy(&second8, bytes16 + 8, 8);
    __m256i halves = _mm256_blend_epi32(_mm256_set1_epi64x(first8), _mm256_set1_epi64x(second8), 0xF0);
    __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi64(halves, _mm256_setr_epi64x(0, 4, 0, 4)),
                                       _mm256_set1_epi8(0x0F));
    v32_from_bf16_table(table, nibbles, w);
}

/* The q8 path's chunk pair of one block (quant_lanes.h's q8w, sub-scales
 * 1): its nibbles are put straight in the grouped order, where lane l
 * takes columns 2l, 2l + 1, 16 + 2l, 17 + 2l, which are the low and the
 * high nibbles of bytes 2l and 2l + 1. Widening byte pair l to 32-bit lane
 * l (vpmovzxwd) and or-ing in a copy shifted left by 12 puts the two high
 * nibbles in bytes 2 and 3, a mask keeps the four nibbles: four
 * instructions where q8w_prepare's column-order codes needed a cross-lane
 * permute and a byte shuffle more. Then the doubled E2M1 lookup. */
K3_INLINE q8w q8w_mxfp4_gguf(const uint8_t *bytes16)
{
    const __m256i doubled_e2m1 = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4,
                                                  6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    __m256i pairs = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)bytes16));
    __m256i nibbles = _mm256_and_si256(_mm256_or_si256(pairs, _mm256_slli_epi32(pairs, 12)), _mm256_set1_epi8(0x0F));
    q8w w;
    w.signs = _mm256_shuffle_epi8(doubled_e2m1, nibbles);
    w.magnitudes = _mm256_abs_epi8(w.signs);
    w.scales = _mm256_set1_epi32(0x00010001);
    w.is_signed = 1;
    return w;
}

#endif

#endif
