/* quant_iq.c - see quant_iq.h: the IQ2/IQ3 row kernels. Each 16 weights
 * are two (IQ2) or four (IQ3) grid points gathered from the byte grids of
 * quant_grids.h into one 16-byte register and signed by their +1/-1 sign
 * lanes (quant_iq_lanes.h, shared with the q8 kernels), then multiplied
 * by the chunk's scale and summed (or stored) by the shared emit helpers
 * of quant_emit.h, exactly as the other block types are: the scalar
 * decoders (quant_types.c) round scale * magnitude once and flip the sign,
 * and (-m) * s is -(m * s) in IEEE arithmetic, so the bits agree. Beside
 * them the q8 path's scalar reference view of a block. */
#include <string.h>
#include "kernels.h"
#include "kernels_arch.h"
#include "quant_emit.h"
#include "quant_grids.h"
#include "quant_iq.h"
#include "quant_iq_lanes.h"
#include "quant_lanes.h"

/* A chunk's fp32 scale from the block's d and its 4-bit field s, in the
 * scalar decoders' order (quant_iq_lanes.h's table). */
K3_INLINE float iq_chunk_scale(uint32_t id, float d, int s)
{
    switch (id) {
    case K3_GGML_IQ3_XXS: return d * (0.5f + (float)s) * 0.5f;
    case K3_GGML_IQ3_S: return d * (float)(1 + 2 * s);
    default: return d * (0.5f + (float)s) * 0.25f;   /* the IQ2 types */
    }
}

/* One block of grid type id (a constant once inlined): its 16 chunks, each
 * its signed magnitudes times its scale. The grids are fetched once per
 * row and passed in beside quant_emit.h's BLOCK_ARGS. */
K3_INLINE void block_iq(uint32_t id, const k3_iq_grids *grids, BLOCK_ARGS)
{
    const float d = f16_scale_at(row);
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const float scale = iq_chunk_scale(id, d, iq_chunk_scale_bits(id, row, g, h));
            emit_scaled(iq_chunk_codes(id, grids, row, g, h), scale, c + 32 * g + 16 * h, WALK_PASS);
        }
    }
}

/* ROW_KERNELS (quant_emit.h) with the grids fetched once per row and
 * passed to every block: the dot product and the decode of a row of
 * 256-weight blocks of grid type ID, under the names quant_iq.h exports. */
#define IQ_ROW_KERNELS(type, ID) \
    float k3_##type##_dot_row(const uint8_t *row, int64_t cols, const float *x) \
    { \
        const k3_iq_grids *grids = k3_iq_grids_get(); \
        v8f acc0 = v8_zero(), acc1 = v8_zero(); \
        for (int64_t c = 0; c < cols; c += 256, row += iq_block_bytes(ID)) \
            block_iq(ID, grids, row, c, x, NULL, &acc0, &acc1); \
        return v8_hsum(v8_add(acc0, acc1)); \
    } \
    void k3_##type##_decode_row(const uint8_t *row, int64_t cols, float *out) \
    { \
        const k3_iq_grids *grids = k3_iq_grids_get(); \
        for (int64_t c = 0; c < cols; c += 256, row += iq_block_bytes(ID)) \
            block_iq(ID, grids, row, c, NULL, out, NULL, NULL); \
    }
IQ_ROW_KERNELS(iq2_xxs, K3_GGML_IQ2_XXS)
IQ_ROW_KERNELS(iq2_xs, K3_GGML_IQ2_XS)
IQ_ROW_KERNELS(iq2_s, K3_GGML_IQ2_S)
IQ_ROW_KERNELS(iq3_xxs, K3_GGML_IQ3_XXS)
IQ_ROW_KERNELS(iq3_s, K3_GGML_IQ3_S)

/* The q8 path's scalar reference (quant_matvec.c's q8_row_scalar) reads a
 * block here, one weight at a time from the layouts of docs/MODEL.md
 * ("GGUF") and not through the register decoders above, so that a slip
 * in either shows: weight i is in group g = i / 32, 8-weight run
 * l = (i % 32) / 8, position j = i % 8 of the run's sign byte. */
void k3_iq_block_ints(uint32_t id, const uint8_t *blk, int codes[256], int sub_scale[16], float *d_w)
{
    const k3_iq_grids *grids = k3_iq_grids_get();
    const float d = k3_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    *d_w = id == K3_GGML_IQ3_S ? d : id == K3_GGML_IQ3_XXS ? d * 0.25f : d * 0.125f;   /* exact: d is an f16 */
    for (int i = 0; i < 256; i++) {
        const int g = i / 32, l = (i % 32) / 8, j = i % 8, point = (i % 32) / 4;
        int magnitude, s;
        unsigned signs;
        switch (id) {
        case K3_GGML_IQ2_XXS: {   /* 4 index bytes, then the u32 of sign indices and scale */
            const uint32_t word = u32_le(blk + 6 + 8 * g);
            magnitude = grids->iq2_xxs[blk[2 + 8 * g + l]][j];
            signs = k3_iq_signs_of(word >> (7 * l));
            s = (int)(word >> 28);
        } break;
        case K3_GGML_IQ2_XS: {   /* u16 per run: 9-bit index, 7-bit sign index */
            const unsigned word = (unsigned)blk[2 + 8 * g + 2 * l] | (unsigned)blk[3 + 8 * g + 2 * l] << 8;
            magnitude = grids->iq2_xs[word & 511][j];
            signs = k3_iq_signs_of(word >> 9);
            s = (blk[66 + g] >> (4 * (l / 2))) & 15;
        } break;
        case K3_GGML_IQ2_S:   /* low index byte, 2 high bits per run, a sign byte per run */
            magnitude = grids->iq2_s[blk[2 + 4 * g + l] | ((blk[66 + g] >> (2 * l)) & 3) << 8][j];
            signs = blk[34 + 4 * g + l];
            s = (blk[74 + g] >> (4 * (l / 2))) & 15;
            break;
        case K3_GGML_IQ3_XXS: {   /* an index byte per 4 weights; the group's u32 at 66 + 4g */
            const uint32_t word = u32_le(blk + 66 + 4 * g);
            magnitude = grids->iq3_xxs[blk[2 + 8 * g + point]][i % 4];
            signs = k3_iq_signs_of(word >> (7 * l));
            s = (int)(word >> 28);
        } break;
        default:   /* IQ3_S: low index byte per 4 weights, bit 8 in byte 66 + g, a sign byte per run */
            magnitude = grids->iq3_s[blk[2 + 8 * g + point] | ((blk[66 + g] >> point) & 1) << 8][i % 4];
            signs = blk[74 + 4 * g + l];
            s = (blk[106 + g / 2] >> (4 * (g % 2))) & 15;
            break;
        }
        codes[i] = (signs >> j) & 1 ? -magnitude : magnitude;
        sub_scale[i / 16] = 2 * s + 1;
    }
}
