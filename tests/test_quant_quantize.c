/* test_quant_quantize.c - the quantizers (engine/kernels/quant_quantize.c)
 * on hand-computed rows: each block's bytes worked out on paper from
 * docs/MODEL.md, "Quantizing" (the roundings: roundf's half away from zero
 * for Q8_0, truncation for Q4_0, the first nearest level for MXFP4), zero
 * rows of the K-quants, exact round trips through the scalar decoder, and
 * the refusals. tests/t_quant.sh compares every type with the numpy
 * reference on random and edge-case rows. */
#include <string.h>
#include "kernels.h"
#include "quant_quantize.h"
#include "quant_types.h"
#include "test.h"

/* Quantize n floats as type name into out; 0 on success. */
static int quantize(const char *name, const float *x, int64_t n, uint8_t *out)
{
    return k3_quant_quantize(k3_quant_type_by_name(name), x, n, out);
}

int main(void)
{
    uint8_t out[2 * 210];
    float x[512], back[512];

    TEST_BEGIN("quantize: Q8_0 of a row whose extreme is 127 (d = 1, ties away from zero)");
    {
        for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) + 0.5f;   /* -15.5 .. 15.5 */
        x[0] = -127.0f;                                                 /* d = 127 / 127 = 1 */
        CHECK(quantize("Q8_0", x, 32, out) == 0, "refused");
        CHECK(out[0] == 0x00 && out[1] == 0x3C, "d bytes %02x %02x, expected fp16 1.0 (00 3c)", out[0], out[1]);
        CHECK((int8_t)out[2] == -127, "q[0] = %d", (int8_t)out[2]);
        CHECK((int8_t)out[2 + 1] == -15 && (int8_t)out[2 + 16] == 1 && (int8_t)out[2 + 15] == -1 &&
              (int8_t)out[2 + 31] == 16, "roundf: -14.5 -> %d (-15), 0.5 -> %d (1), -0.5 -> %d (-1), 15.5 -> %d (16)",
              (int8_t)out[3], (int8_t)out[18], (int8_t)out[17], (int8_t)out[33]);
    }
    TEST_END();

    TEST_BEGIN("quantize: Q4_0 of the integers -8..7 (d = -8 / -8 = 1) round-trips exactly");
    {
        for (int j = 0; j < 32; j++) x[j] = (float)((j * 5) % 16 - 8);
        x[3] = -8.0f;
        CHECK(quantize("Q4_0", x, 32, out) == 0, "refused");
        /* the first weight of largest magnitude is -8: d = -8 / -8 = +1 */
        CHECK(out[0] == 0x00 && out[1] == 0x3C, "d bytes %02x %02x", out[0], out[1]);
        /* q = x + 8: weights 0 and 16 are -8 (byte 0x00), weights 1 and 17 are -3 (0x55) */
        CHECK(out[2] == 0x00 && out[3] == 0x55, "bytes 0, 1 = %02x %02x", out[2], out[3]);
        k3_quant_decode_scalar(k3_quant_type_by_name("Q4_0"), out, 32, back);
        CHECK(!memcmp(back, x, 32 * sizeof(float)), "decoded row differs");
    }
    TEST_END();

    TEST_BEGIN("quantize: MXFP4 with amax 6 (e = 127, scale 1/2): nearest level, the first on a tie");
    {
        memset(x, 0, 32 * sizeof(float));
        x[0] = 6.0f;     /* level 7 (doubled 12) */
        x[1] = -0.5f;    /* level 9 (doubled -1) */
        x[2] = 0.75f;    /* 0.5 and 1.0 are as near: level 1 (doubled 1) */
        x[16] = -4.0f;   /* level 14 (doubled -8), high nibble of byte 0 */
        CHECK(quantize("MXFP4", x, 32, out) == 0, "refused");
        CHECK(out[0] == 127, "e = %u", out[0]);
        CHECK(out[1] == (7 | 14 << 4) && out[2] == 9 && out[3] == 1 && out[4] == 0, "bytes %02x %02x %02x %02x",
              out[1], out[2], out[3], out[4]);
    }
    TEST_END();

    TEST_BEGIN("quantize: a zero row is all zero bytes in Q4_K, Q5_K and Q6_K; Q8_0 and Q4_0 decode it to zeros");
    {
        memset(x, 0, sizeof x);
        static const char *const k_types[] = {"Q4_K", "Q5_K", "Q6_K"};
        for (int k = 0; k < 3; k++) {
            const k3_quant_type *t = k3_quant_type_by_name(k_types[k]);
            memset(out, 0xAB, sizeof out);
            CHECK(quantize(k_types[k], x, 512, out) == 0, "%s refused", k_types[k]);
            int nonzero = 0;
            for (uint32_t i = 0; i < 2 * t->block_bytes; i++) nonzero += out[i] != 0;
            CHECK(nonzero == 0, "%s: %d nonzero bytes", k_types[k], nonzero);
        }
        static const char *const small_types[] = {"Q8_0", "Q4_0", "Q5_0", "MXFP4"};
        for (int k = 0; k < 4; k++) {
            CHECK(quantize(small_types[k], x, 32, out) == 0, "%s refused", small_types[k]);
            k3_quant_decode_scalar(k3_quant_type_by_name(small_types[k]), out, 32, back);
            int nonzero = 0;
            for (int j = 0; j < 32; j++) nonzero += back[j] != 0.0f;
            CHECK(nonzero == 0, "%s decodes a zero row to %d nonzero weights", small_types[k], nonzero);
        }
    }
    TEST_END();

    TEST_BEGIN("quantize: Q8_0 and Q6_K round-trip rows of their own levels exactly");
    {
        for (int j = 0; j < 32; j++) x[j] = (float)((j * 37) % 255 - 127) * 0.25f;
        x[5] = 127 * 0.25f;                             /* d = 0.25, exact in fp16 */
        CHECK(quantize("Q8_0", x, 32, out) == 0, "Q8_0 refused");
        k3_quant_decode_scalar(k3_quant_type_by_name("Q8_0"), out, 32, back);
        CHECK(!memcmp(back, x, 32 * sizeof(float)), "Q8_0 decoded row differs");
        /* Q6_K: every group of 16 holds -32 (its extreme), so each group's
         * scale and d x scale are exact, and the levels -32..31 come back */
        for (int j = 0; j < 256; j++) x[j] = (float)((j * 7) % 64 - 32);
        for (int g = 0; g < 16; g++) x[16 * g] = -32.0f;
        CHECK(quantize("Q6_K", x, 256, out) == 0, "Q6_K refused");
        k3_quant_decode_scalar(k3_quant_type_by_name("Q6_K"), out, 256, back);
        int differ = 0;
        for (int j = 0; j < 256; j++) differ += back[j] != x[j];
        CHECK(differ == 0, "Q6_K: %d of 256 weights differ (weight 1: %g for %g)", differ, back[1], x[1]);
    }
    TEST_END();

    TEST_BEGIN("quantize: refuses a type it does not write and a row that is not whole blocks");
    {
        CHECK(k3_quant_can_quantize(k3_quant_type_by_name("Q2_K")) == 0, "Q2_K writable");
        CHECK(k3_quant_can_quantize(k3_quant_type_by_name("IQ4_XS")) == 0, "IQ4_XS writable");
        CHECK(k3_quant_can_quantize(k3_quant_type_by_name("Q4_K")) == 1, "Q4_K not writable");
        CHECK(quantize("Q2_K", x, 256, out) == -1, "Q2_K quantized");
        CHECK(quantize("Q4_K", x, 288, out) == -1, "288 weights as Q4_K blocks");
        CHECK(quantize("Q8_0", x, 33, out) == -1, "33 weights as Q8_0 blocks");
        CHECK(k3_quant_quantize(NULL, x, 32, out) == -1, "no type");
    }
    TEST_END();

    TEST_EXIT();
}
