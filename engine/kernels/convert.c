/* convert.c - scalar decoders/encoders of the stored number formats, and bulk
 * conversion of small tensors to fp32.
 *
 * These are the bit-exact references: the SIMD dot products in matvec.c must
 * decode every weight to exactly the value these functions return. */
#include <math.h>
#include <string.h>
#include "kernels.h"

/* Reinterpret float bits without violating aliasing rules. */
static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ... and back. */
static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an fp32, so decoding is a shift (exact). */
float k3_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest, ties to even, on the dropped 16 bits. NaN is handled
 * first: adding the rounding bias could carry a NaN payload into infinity,
 * so we keep sign and top payload bits and force the quiet bit. */
uint16_t k3_f32_to_bf16(float f)
{
    uint32_t bits = f32_bits(f);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    uint32_t lsb_of_result = (bits >> 16) & 1u;
    bits += 0x7FFFu + lsb_of_result;
    return (uint16_t)(bits >> 16);
}

/* IEEE binary16 -> fp32 (exact). Subnormal halves become normal floats:
 * value = mantissa * 2^-24, computed in float which is exact for 10 bits. */
float k3_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp_field = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp_field == 0x1F)          /* inf / NaN (payload kept, shifted up) */
        return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp_field == 0) {           /* zero / subnormal */
        float mag = (float)mant * 0x1p-24f;
        return sign ? -mag : mag;
    }
    return f32_from_bits(sign | ((exp_field + 127 - 15) << 23) | (mant << 13));
}

/* fp32 -> binary16, round to nearest even, overflow to inf, subnormals and
 * NaN kept (quiet). Must agree with F16C _mm_cvtps_ph(x, RNE); tests check. */
uint16_t k3_f32_to_f16(float f)
{
    uint32_t bits = f32_bits(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7FFFFFFFu;

    if (abs_bits > 0x7F800000u)                    /* NaN: quiet, keep payload top */
        return (uint16_t)(sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu));
    if (abs_bits >= 0x477FF000u)                   /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7C00u);
    if (abs_bits >= 0x38800000u) {                 /* normal half (>= 2^-14) */
        uint32_t rebased = abs_bits - ((uint32_t)(127 - 15) << 23);
        rebased += 0x0FFFu + ((rebased >> 13) & 1u);
        return (uint16_t)(sign | (rebased >> 13)); /* carry may bump exponent: correct */
    }
    if (abs_bits <= 0x33000000u)                   /* <= 2^-25: ties to even give 0 */
        return sign;
    /* Subnormal half: result = round(value * 2^24) as an integer 1..1024. */
    uint32_t exp_field = abs_bits >> 23;
    uint32_t mant = (abs_bits & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - exp_field;              /* 14..24 */
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (result & 1u)))
        result++;
    return (uint16_t)(sign | result);
}

/* OCP FP8 E4M3 (the "fn" variant: no infinities, only S.1111.111 is NaN).
 * s=b>>7, e=(b>>3)&15, m=b&7; e==0: m/8 * 2^-6; else (1+m/8) * 2^(e-7). */
float k3_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp_field = (b >> 3) & 0xFu;
    uint32_t mant = b & 0x7u;
    if (exp_field == 0xF && mant == 0x7)
        return f32_from_bits(sign | 0x7FC00000u);
    if (exp_field == 0) {
        float mag = (float)mant * 0x1p-9f;
        return sign ? -mag : mag;
    }
    return f32_from_bits(sign | ((exp_field - 7 + 127) << 23) | (mant << 20));
}

/* Bulk conversion for small tensors (norm weights, biases, embedding rows);
 * every safetensors element type is accepted, unknown values (OPAQUE, MXFP4,
 * which need their scales) give NaN. src may be unaligned (a row inside a read buffer), so every
 * element is fetched with memcpy, which compiles to a plain load. */
void k3_convert_to_f32(float *dst, const void *src, k3_dtype dt, int64_t n)
{
    const unsigned char *p = (const unsigned char *)src;
    switch (dt) {
    case K3_DT_F32:
        memmove(dst, src, (size_t)n * sizeof(float));
        return;
    case K3_DT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            dst[i] = k3_bf16_to_f32(v);
        }
        return;
    case K3_DT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            dst[i] = k3_f16_to_f32(v);
        }
        return;
    case K3_DT_F8_E4M3:
        for (int64_t i = 0; i < n; i++)
            dst[i] = k3_e4m3_to_f32(p[i]);
        return;
    case K3_DT_F64:
        for (int64_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, p + 8 * i, 8);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_U8:
    case K3_DT_BOOL:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)p[i];
        return;
    case K3_DT_F8_E5M2:   /* the top byte of a binary16: exact through f16 */
        for (int64_t i = 0; i < n; i++)
            dst[i] = k3_f16_to_f32((uint16_t)(p[i] << 8));
        return;
    case K3_DT_F8_E8M0:   /* OCP MX scale: 2^(b - 127), 0xFF is NaN */
        for (int64_t i = 0; i < n; i++)
            dst[i] = p[i] == 0xFF ? NAN : ldexpf(1.0f, (int)p[i] - 127);
        return;
    case K3_DT_I16:
        for (int64_t i = 0; i < n; i++) {
            int16_t v;
            memcpy(&v, p + 2 * i, 2);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_U16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_U32:
        for (int64_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_U64:
        for (int64_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, p + 8 * i, 8);
            dst[i] = (float)v;
        }
        return;
    case K3_DT_I8:
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)(int8_t)p[i];
        return;
    default:
        for (int64_t i = 0; i < n; i++)   /* unknown type: defined output, not garbage */
            dst[i] = NAN;
        return;
    }
}
