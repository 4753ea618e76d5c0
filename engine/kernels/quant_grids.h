/* quant_grids.h - the lookup grids and sign patterns of ggml's IQ2 and IQ3
 * block types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S).
 *
 * Each of these types stores a group of 8 (IQ2) or 4 (IQ3) weight
 * magnitudes as one index into a fixed grid of allowed points; the grids
 * are part of the formats' definition (llama.cpp's ggml-common.h holds
 * them as iq2xxs_grid, iq2xs_grid, iq2s_grid, iq3xxs_grid, iq3s_grid).
 * quant_grids.c keeps them compactly as level codes and expands them to
 * byte grids once; docs/MODEL.md ("GGUF", IQ types) describes them. */
#ifndef K3_QUANT_GRIDS_H
#define K3_QUANT_GRIDS_H

#include <stdint.h>

/* The expanded grids: point i's magnitudes, one byte per weight, in
 * weight order. Valid after k3_iq_grids_init. */
typedef struct k3_iq_grids {
    uint8_t iq2_xxs[256][8];
    uint8_t iq2_xs[512][8];
    uint8_t iq2_s[1024][8];
    uint8_t iq3_xxs[256][4];
    uint8_t iq3_s[512][4];
    /* The signs as byte lanes for the kernels (quant_iq_lanes.h): byte j
     * of sign_lanes[b] is -1 (0xFF) where bit j of the sign byte b is
     * set, else +1; parity_sign_lanes[i] is sign_lanes[k3_iq_signs_of(i)]
     * for a 7-bit sign index i (IQ2_XXS, IQ2_XS, IQ3_XXS). */
    uint64_t sign_lanes[256];
    uint64_t parity_sign_lanes[128];
} k3_iq_grids;

/* The grids, expanded on the first call from any thread (later calls
 * return the same table). */
const k3_iq_grids *k3_iq_grids_get(void);

/* The 8 sign bits of a 7-bit sign index (IQ2_XXS, IQ2_XS, IQ3_XXS): the
 * index's own 7 bits, and bit 7 set when they hold an odd number of ones,
 * so every group has an even count of negative weights. Bit j set means
 * weight j of the 8 is negative. */
static inline uint8_t k3_iq_signs_of(unsigned index7)
{
    const unsigned v = index7 & 127;
    return (uint8_t)(v | (unsigned)__builtin_parity(v) << 7);
}

#endif
