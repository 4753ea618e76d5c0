/* quant_iq_lanes.h - the IQ2/IQ3 grid types (IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S; quant_grids.h) decoded 16 weights at a time in vector
 * registers, for both paths: the exact row kernels of quant_iq.c multiply
 * each chunk's signed grid magnitudes by the chunk's fp32 scale, the q8
 * kernels of quant_matvec.c meet the same magnitudes and sign lanes with
 * int8 activations and the chunk's integer sub-scale. One chunk decoder per type, so the two
 * paths cannot read a layout differently. Included after quant_lanes.h.
 *
 * Every block is 256 weights: 8 groups g of 32, each two 16-weight chunks
 * h = 0, 1, each chunk two IQ2 points of 8 weights or four IQ3 points of
 * 4. A chunk's weights are sign * magnitude * scale(s), with s the 4-bit
 * field iq_chunk_scale_bits gives:
 *   IQ2_XXS, IQ2_XS, IQ2_S   (d * (0.5 + s)) * 0.25 = (d / 8) * (2 s + 1)
 *   IQ3_XXS                  (d * (0.5 + s)) * 0.5  = (d / 4) * (2 s + 1)
 *   IQ3_S                     d * (1 + 2 s)
 * (the left column is the decoders' fp32 order; the right one the q8
 * path's integer sub-scale 2 s + 1 and block scale). */
#ifndef K3_QUANT_IQ_LANES_H
#define K3_QUANT_IQ_LANES_H

#include <string.h>
#include "quant_grids.h"
#include "quant_lanes.h"
#include "quant_types.h"

/* Two lane operations only these types need, one version per back end:
 *   v16b_from_u64x2(lo, hi)       bytes 0-7 of lo (little-endian) in lanes
 *                                 0-7, of hi in lanes 8-15
 *   v16b_from_u32x4(p0, .., p3)   the 4 bytes at p0 in lanes 0-3, at p1 in
 *                                 4-7, at p2 in 8-11, at p3 in 12-15 */
#if defined(K3_KERNELS_X86_H)

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    return _mm_set_epi64x((long long)hi, (long long)lo);
}

/* One 32-bit load and three inserts (assembling two u64 first measured
 * slower: the compiler widens and shifts them). */
K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    int32_t a, b, c, d;
    memcpy(&a, p0, 4);
    memcpy(&b, p1, 4);
    memcpy(&c, p2, 4);
    memcpy(&d, p3, 4);
    return _mm_setr_epi32(a, b, c, d);
}

#elif defined(K3_KERNELS_NEON_H)

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    return vcombine_u8(vcreate_u8(lo), vcreate_u8(hi));
}

K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    uint32_t words[4];
    memcpy(&words[0], p0, 4);
    memcpy(&words[1], p1, 4);
    memcpy(&words[2], p2, 4);
    memcpy(&words[3], p3, 4);
    return vreinterpretq_u8_u32(vld1q_u32(words));
}

#else

K3_INLINE v16b v16b_from_u64x2(uint64_t lo, uint64_t hi)
{
    v16b v;
    memcpy(v.lane, &lo, 8);
    memcpy(v.lane + 8, &hi, 8);
    return v;
}

K3_INLINE v16b v16b_from_u32x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3)
{
    v16b v;
    memcpy(v.lane, p0, 4);
    memcpy(v.lane + 4, p1, 4);
    memcpy(v.lane + 8, p2, 4);
    memcpy(v.lane + 12, p3, 4);
    return v;
}

#endif

/* An IQ2 grid point's 8 bytes as one little-endian word (a memcpy, so any
 * alignment). */
K3_INLINE uint64_t point8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The little-endian u32 at p: IQ2_XXS's and IQ3_XXS's sign-and-scale words. */
K3_INLINE uint32_t u32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes per block of grid type id. */
K3_INLINE int64_t iq_block_bytes(uint32_t id)
{
    switch (id) {
    case K3_GGML_IQ2_XXS: return 66;
    case K3_GGML_IQ2_XS: return 74;
    case K3_GGML_IQ2_S: return 82;
    case K3_GGML_IQ3_XXS: return 98;
    default: return 110;   /* IQ3_S */
    }
}

/* The 4-bit scale field s of chunk h of group g:
 *   IQ2_XXS, IQ3_XXS  bits 28-31 of the group's sign-and-scale u32 (at
 *                     2 + 8g + 4, resp. 66 + 4g), both chunks
 *   IQ2_XS, IQ2_S     nibble h of the group's scale byte (66 + g, 74 + g)
 *   IQ3_S             nibble g % 2 of scale byte 106 + g / 2, both chunks */
K3_INLINE int iq_chunk_scale_bits(uint32_t id, const uint8_t *row, int g, int h)
{
    switch (id) {
    case K3_GGML_IQ2_XXS: return (int)(u32_le(row + 6 + 8 * g) >> 28);
    case K3_GGML_IQ2_XS: return (row[66 + g] >> (4 * h)) & 0x0F;
    case K3_GGML_IQ2_S: return (row[74 + g] >> (4 * h)) & 0x0F;
    case K3_GGML_IQ3_XXS: return (int)(u32_le(row + 66 + 4 * g) >> 28);
    default: return (row[106 + g / 2] >> (4 * (g % 2))) & 0x0F;   /* IQ3_S */
    }
}

/* A chunk's 16 grid magnitudes (unsigned bytes, at most 62: IQ2 levels 8,
 * 25, 43; IQ3_XXS 4..62; IQ3_S 1..15) and their signs as +1 / -1 byte
 * lanes, looked up per 8 weights in the grids' sign tables (no sign bit is
 * tested one by one):
 *   IQ2_XXS  points 2h, 2h + 1 of the group's 4 index bytes at 2 + 8g,
 *            signed by 7-bit sign indices 2h, 2h + 1 of the u32 after them
 *   IQ2_XS   u16 words 4g + 2h and 4g + 2h + 1 at 2 (9-bit point index,
 *            7-bit sign index)
 *   IQ2_S    points 4g + 2h, +1: low index byte at 2 + that, bits 8-9
 *            from byte 66 + g (bits 4h.., 4h + 2..), sign bytes at 34 +
 *            that
 *   IQ3_XXS  the 4-weight points at index bytes 2 + 8g + 4h .. +3, signed
 *            by sign indices 2h, 2h + 1 of the group's u32 at 66 + 4g
 *   IQ3_S    the 4-weight points at low index bytes 2 + 8g + 4h .. +3, bit
 *            8 of point k's index bit 4h + k of byte 66 + g, signed by the
 *            bytes 74 + 4g + 2h and the next */
typedef struct {
    v16b magnitudes, signs;
} iq_chunk;

K3_INLINE iq_chunk iq_chunk_at(uint32_t id, const k3_iq_grids *grids, const uint8_t *row, int g, int h)
{
    iq_chunk c;
    switch (id) {
    case K3_GGML_IQ2_XXS: {
        const uint8_t *indices = row + 2 + 8 * g;
        const uint32_t signs_scale = u32_le(indices + 4);
        c.magnitudes = v16b_from_u64x2(point8(grids->iq2_xxs[indices[2 * h]]), point8(grids->iq2_xxs[indices[2 * h + 1]]));
        c.signs = v16b_from_u64x2(grids->parity_sign_lanes[(signs_scale >> (14 * h)) & 127],
                                  grids->parity_sign_lanes[(signs_scale >> (14 * h + 7)) & 127]);
    } break;
    case K3_GGML_IQ2_XS: {
        const uint8_t *words = row + 2 + 8 * g + 4 * h;
        const unsigned w0 = (unsigned)words[0] | (unsigned)words[1] << 8;
        const unsigned w1 = (unsigned)words[2] | (unsigned)words[3] << 8;
        c.magnitudes = v16b_from_u64x2(point8(grids->iq2_xs[w0 & 511]), point8(grids->iq2_xs[w1 & 511]));
        c.signs = v16b_from_u64x2(grids->parity_sign_lanes[w0 >> 9], grids->parity_sign_lanes[w1 >> 9]);
    } break;
    case K3_GGML_IQ2_S: {
        const unsigned high = row[66 + g];
        const int p = 4 * g + 2 * h;
        const unsigned i0 = row[2 + p] | ((high >> (4 * h)) & 3) << 8;
        const unsigned i1 = row[3 + p] | ((high >> (4 * h + 2)) & 3) << 8;
        c.magnitudes = v16b_from_u64x2(point8(grids->iq2_s[i0]), point8(grids->iq2_s[i1]));
        c.signs = v16b_from_u64x2(grids->sign_lanes[row[34 + p]], grids->sign_lanes[row[35 + p]]);
    } break;
    case K3_GGML_IQ3_XXS: {
        const uint8_t *indices = row + 2 + 8 * g + 4 * h;
        const uint32_t signs_scale = u32_le(row + 66 + 4 * g);
        c.magnitudes = v16b_from_u32x4(grids->iq3_xxs[indices[0]], grids->iq3_xxs[indices[1]],
                                       grids->iq3_xxs[indices[2]], grids->iq3_xxs[indices[3]]);
        c.signs = v16b_from_u64x2(grids->parity_sign_lanes[(signs_scale >> (14 * h)) & 127],
                                  grids->parity_sign_lanes[(signs_scale >> (14 * h + 7)) & 127]);
    } break;
    default: {   /* IQ3_S */
        const uint8_t *low = row + 2 + 8 * g + 4 * h;
        const unsigned high = row[66 + g];
        const unsigned i0 = low[0] | ((high >> (4 * h)) & 1) << 8;
        const unsigned i1 = low[1] | ((high >> (4 * h + 1)) & 1) << 8;
        const unsigned i2 = low[2] | ((high >> (4 * h + 2)) & 1) << 8;
        const unsigned i3 = low[3] | ((high >> (4 * h + 3)) & 1) << 8;
        c.magnitudes = v16b_from_u32x4(grids->iq3_s[i0], grids->iq3_s[i1], grids->iq3_s[i2], grids->iq3_s[i3]);
        c.signs = v16b_from_u64x2(grids->sign_lanes[row[74 + 4 * g + 2 * h]], grids->sign_lanes[row[75 + 4 * g + 2 * h]]);
    } break;
    }
    return c;
}

/* The chunk's 16 signed codes (the exact kernels' weights before their
 * scale). */
K3_INLINE v16b iq_chunk_codes(uint32_t id, const k3_iq_grids *grids, const uint8_t *row, int g, int h)
{
    const iq_chunk c = iq_chunk_at(id, grids, row, g, h);
    return v16b_sign_by(c.magnitudes, c.signs);
}

#endif
