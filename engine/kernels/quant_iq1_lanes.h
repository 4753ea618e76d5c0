/* quant_iq1_lanes.h - IQ1_S and IQ1_M (quant_iq1.h) decoded 16 weights at a
 * time in vector registers, for the row kernels of quant_matvec.c. A
 * 16-weight chunk is two grid points: their 16 level bytes are gathered
 * into one v16b (quant_lanes.h), widened to fp32 lanes, shifted by each
 * group's delta and multiplied by the chunk's scale: the fp32 operations of
 * the scalar decoders in the same order, so every back end gives their
 * bits. Included by quant_matvec.c after quant_lanes.h. */
#ifndef K3_QUANT_IQ1_LANES_H
#define K3_QUANT_IQ1_LANES_H

#include "quant_iq1.h"
#include "quant_lanes.h"

/* Two 8-byte words as one v16b: first in lanes 0-7, second in 8-15. */
#if defined(K3_KERNELS_X86_H)
K3_INLINE v16b iq1_v16b_from_words(uint64_t first, uint64_t second)
{
    return _mm_set_epi64x((long long)second, (long long)first);
}
#elif defined(K3_KERNELS_NEON_H)
K3_INLINE v16b iq1_v16b_from_words(uint64_t first, uint64_t second)
{
    return vcombine_u8(vcreate_u8(first), vcreate_u8(second));
}
#else
K3_INLINE v16b iq1_v16b_from_words(uint64_t first, uint64_t second)
{
    v16b v;
    for (int i = 0; i < 8; i++) {
        v.lane[i] = (uint8_t)(first >> (8 * i));
        v.lane[8 + i] = (uint8_t)(second >> (8 * i));
    }
    return v;
}
#endif

/* 8 a + b in each byte lane, wrapping (the q8 codes 8 level +- 1: no lane
 * leaves -9..9). */
#if defined(K3_KERNELS_X86_H)
K3_INLINE v16b iq1_v16b_eight_times_plus(v16b a, v16b b)
{
    const __m128i twice = _mm_add_epi8(a, a), four_times = _mm_add_epi8(twice, twice);
    return _mm_add_epi8(_mm_add_epi8(four_times, four_times), b);
}
#elif defined(K3_KERNELS_NEON_H)
K3_INLINE v16b iq1_v16b_eight_times_plus(v16b a, v16b b)
{
    return vaddq_u8(vshlq_n_u8(a, 3), b);
}
#else
K3_INLINE v16b iq1_v16b_eight_times_plus(v16b a, v16b b)
{
    for (int i = 0; i < 16; i++) a.lane[i] = (uint8_t)(8 * a.lane[i] + b.lane[i]);
    return a;
}
#endif

/* One 16-weight chunk's fields: its two groups' grid indices and shift
 * signs (1: -1/8), and the 3-bit scale s of the chunk. */
typedef struct {
    unsigned first, second;
    int negative_first, negative_second;
    int scale_bits;
} iq1_chunk;

/* IQ1_S chunk k (0..15): groups 2k and 2k + 1, both under the u16 word of
 * weights 32 (k / 2) onward (its scale and shift sign, and the high index
 * bits of groups 2 (k % 2) and 2 (k % 2) + 1 within it). */
K3_INLINE iq1_chunk iq1_s_fields(const uint8_t *row, int k)
{
    const unsigned word = (unsigned)row[34 + 2 * (k / 2)] | (unsigned)row[35 + 2 * (k / 2)] << 8;
    const int l = 2 * (k % 2);
    iq1_chunk f;
    f.first = row[2 + 2 * k] | ((word >> (3 * l)) & 7) << 8;
    f.second = row[3 + 2 * k] | ((word >> (3 * l + 3)) & 7) << 8;
    f.negative_first = f.negative_second = (int)(word >> 15);
    f.scale_bits = (int)((word >> 12) & 7);
    return f;
}

/* IQ1_M chunk k (0..15): groups 2k and 2k + 1 share the 3-bit scale at bit
 * 3 (k % 4) of scale word k / 4; qh byte k holds their high index bits
 * and shift signs (low nibble the first group's, high nibble the
 * second's). */
K3_INLINE iq1_chunk iq1_m_fields(const uint8_t *row, int k)
{
    const unsigned word = (unsigned)row[48 + 2 * (k / 4)] | (unsigned)row[49 + 2 * (k / 4)] << 8;
    const unsigned qh = row[32 + k];
    iq1_chunk f;
    f.first = row[2 * k] | (qh & 7) << 8;
    f.second = row[2 * k + 1] | ((qh >> 4) & 7) << 8;
    f.negative_first = (qh >> 3) & 1;
    f.negative_second = (qh >> 7) & 1;
    f.scale_bits = (int)((word >> (3 * (k % 4))) & 7);
    return f;
}

/* IQ1_M's block scale d: the f16 whose nibbles are the top nibbles of the
 * scale words (k3_iq1_m_scale_bits, inline here: a call per block costs
 * the kernel its registers), converted as every f16 scale. */
K3_INLINE float iq1_m_scale(const uint8_t *row)
{
    const uint8_t bytes[2] = {(uint8_t)((row[49] >> 4) | (row[51] & 0xF0)), (uint8_t)((row[53] >> 4) | (row[55] & 0xF0))};
    return f16_scale_at(bytes);
}

/* A chunk's 16 weights under block scale d: (d * (2 s + 1)) * (level +
 * delta), the first group's on lanes 0-7 (*lo), the second's on 8-15.
 * The shift by its sign bit and 2 s + 1 by s come from fp32 tables:
 * loads rather than a branch on the signs (data: it would mispredict half
 * the time) or an int-to-float conversion per group (measured: IQ1_M's
 * matvec 1.7 G weights/s with the branch, 4.8 with a conversion, 6.6 with
 * the tables, in L2). */
K3_INLINE void iq1_chunk_weights(iq1_chunk f, float d, v8f *lo, v8f *hi)
{
    static const float iq1_deltas[2] = {K3_IQ1_DELTA, -K3_IQ1_DELTA};
    static const float iq1_odd_scales[8] = {1, 3, 5, 7, 9, 11, 13, 15};
    v8f level_lo, level_hi;
    const v8f scale = v8_set1(d * iq1_odd_scales[f.scale_bits]);
    v16_from_v16b(iq1_v16b_from_words(k3_iq1_grid[f.first], k3_iq1_grid[f.second]), &level_lo, &level_hi);
    *lo = v8_mul(scale, v8_add(level_lo, v8_set1(iq1_deltas[f.negative_first])));
    *hi = v8_mul(scale, v8_add(level_hi, v8_set1(iq1_deltas[f.negative_second])));
}

/* A chunk's 16 codes for the q8 path: 8 level + 1, or 8 level - 1 when
 * the group's shift is negative (the weights are these codes times d / 8
 * times the run's 2 s + 1, exactly). The signs come from a table, not a
 * branch. */
K3_INLINE v16b iq1_chunk_codes(iq1_chunk f)
{
    static const uint64_t plus_or_minus_one[2] = {0x0101010101010101ull, 0xFFFFFFFFFFFFFFFFull};
    return iq1_v16b_eight_times_plus(iq1_v16b_from_words(k3_iq1_grid[f.first], k3_iq1_grid[f.second]),
                                     iq1_v16b_from_words(plus_or_minus_one[f.negative_first],
                                                         plus_or_minus_one[f.negative_second]));
}

#endif
