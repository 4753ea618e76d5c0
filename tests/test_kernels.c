/* test_kernels.c - dtype table, scalar decoders, and every SIMD kernel
 * against its scalar reference; bit-exactness of k3_matmul vs k3_matvec and
 * of multithreaded vs single-threaded k3_matvec. */
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include "test.h"
#include "k3.h"
#include "k3_util.h"
#include "kernels.h"

/* Deterministic xorshift so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* Next 32 random bits. */
static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Uniform in [-1, 1). */
static float rng_float(void)
{
    return (float)((double)rng_u32() / 2147483648.0 - 1.0);
}

/* Float <-> bits, for bit-exact checks and hand-built values. */
static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The float with these bits. */
static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Same value or both NaN: the decoder contract is about numbers, and NaN
 * payloads may legitimately differ between paths. */
static int same_float(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return bits_of(a) == bits_of(b);
}

/* Every enum value has a size and a name that parses back to it. */
static void test_dtype_table(void)
{
    TEST_BEGIN("dtype_table");
    static const struct { k3_dtype dt; const char *name; size_t size; } expect[] = {
        {K3_DT_F32, "F32", 4}, {K3_DT_F16, "F16", 2}, {K3_DT_BF16, "BF16", 2},
        {K3_DT_F8_E4M3, "F8_E4M3", 1}, {K3_DT_U8, "U8", 1}, {K3_DT_I8, "I8", 1},
        {K3_DT_I32, "I32", 4}, {K3_DT_I64, "I64", 8}, {K3_DT_F64, "F64", 8},
        {K3_DT_F8_E5M2, "F8_E5M2", 1}, {K3_DT_F8_E8M0, "F8_E8M0", 1}, {K3_DT_I16, "I16", 2},
        {K3_DT_U16, "U16", 2}, {K3_DT_U32, "U32", 4}, {K3_DT_U64, "U64", 8}, {K3_DT_BOOL, "BOOL", 1},
    };
    CHECK(sizeof expect / sizeof expect[0] == K3_DT_COUNT, "table covers the enum");
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        k3_dtype parsed = K3_DT_COUNT;
        CHECK(k3_dtype_size(expect[i].dt) == expect[i].size, "size of %s", expect[i].name);
        CHECK(!strcmp(k3_dtype_name(expect[i].dt), expect[i].name), "name of %s", expect[i].name);
        CHECK(k3_dtype_parse(expect[i].name, &parsed) == 0 && parsed == expect[i].dt,
              "parse %s", expect[i].name);
    }
    k3_dtype unused;
    CHECK(k3_dtype_parse("F4_E2M1", &unused) == -1, "unknown name rejected");
    CHECK(k3_dtype_parse("bf16", &unused) == -1, "names are case-sensitive");
    CHECK(k3_dtype_parse("", &unused) == -1, "empty name rejected");
    TEST_END();
}

/* Hand-computed bf16 values and round-to-nearest-even ties. */
static void test_bf16(void)
{
    TEST_BEGIN("bf16_decode_encode");
    CHECK(k3_bf16_to_f32(0x3F80) == 1.0f, "0x3F80 = 1");
    CHECK(k3_bf16_to_f32(0xC000) == -2.0f, "0xC000 = -2");
    CHECK(isinf(k3_bf16_to_f32(0x7F80)) && k3_bf16_to_f32(0x7F80) > 0, "0x7F80 = inf");
    CHECK(isnan(k3_bf16_to_f32(0x7FC0)), "0x7FC0 = NaN");
    CHECK(k3_bf16_to_f32(0x0001) == 0x1p-133f, "0x0001 = smallest subnormal");
    CHECK(k3_f32_to_bf16(1.0f) == 0x3F80, "1 -> 0x3F80");
    /* 1 + 2^-8 is exactly halfway between 0x3F80 and 0x3F81: even wins. */
    CHECK(k3_f32_to_bf16(float_of(0x3F808000)) == 0x3F80, "tie rounds down to even");
    CHECK(k3_f32_to_bf16(float_of(0x3F818000)) == 0x3F82, "tie rounds up to even");
    CHECK(k3_f32_to_bf16(float_of(0x3F808001)) == 0x3F81, "above half rounds up");
    CHECK(k3_f32_to_bf16(float_of(0x3F807FFF)) == 0x3F80, "below half rounds down");
    CHECK(k3_f32_to_bf16(float_of(0xBF818000)) == 0xBF82, "negative tie");
    CHECK(k3_f32_to_bf16(float_of(0x7F7FFFFF)) == 0x7F80, "max float rounds to inf");
    CHECK(k3_f32_to_bf16(INFINITY) == 0x7F80, "inf stays inf");
    uint16_t nan_bits = k3_f32_to_bf16(float_of(0x7F800001));   /* payload only in low bits */
    CHECK(isnan(k3_bf16_to_f32(nan_bits)), "signalling NaN with low payload stays NaN (0x%04x)", nan_bits);
    CHECK(isnan(k3_bf16_to_f32(k3_f32_to_bf16(float_of(0xFFFFFFFF)))), "all-ones NaN stays NaN");
    for (uint32_t h = 0; h < 0x10000; h++) {   /* every bf16 survives a round trip */
        float f = k3_bf16_to_f32((uint16_t)h);
        if (!isnan(f))
            CHECK(k3_f32_to_bf16(f) == h, "round trip 0x%04x", h);
    }
    TEST_END();
}

/* The compiler's own binary16 conversions (_Float16): F16C instructions on
 * x86-64-v3, fcvt on aarch64, libgcc's soft-float otherwise - in every case
 * an implementation independent of convert.c to check it against. */
static float compiler_f16_to_f32(uint16_t h)
{
    _Float16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}

/* ... and the other direction (round to nearest even, the default mode). */
static uint16_t compiler_f32_to_f16(float f)
{
    _Float16 v = (_Float16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}

/* Hand-computed f16 values; then both directions against the compiler's
 * conversion, exhaustively (decode) and on edge plus random floats (encode). */
static void test_f16(void)
{
    TEST_BEGIN("f16_decode_encode");
    CHECK(k3_f16_to_f32(0x3C00) == 1.0f, "0x3C00 = 1");
    CHECK(k3_f16_to_f32(0xC000) == -2.0f, "0xC000 = -2");
    CHECK(k3_f16_to_f32(0x0001) == 0x1p-24f, "0x0001 = 2^-24");
    CHECK(k3_f16_to_f32(0x03FF) == 1023 * 0x1p-24f, "0x03FF = largest subnormal");
    CHECK(k3_f16_to_f32(0x0400) == 0x1p-14f, "0x0400 = 2^-14");
    CHECK(k3_f16_to_f32(0x7BFF) == 65504.0f, "0x7BFF = 65504");
    CHECK(isinf(k3_f16_to_f32(0x7C00)) && k3_f16_to_f32(0x7C00) > 0, "0x7C00 = inf");
    CHECK(isinf(k3_f16_to_f32(0xFC00)) && k3_f16_to_f32(0xFC00) < 0, "0xFC00 = -inf");
    CHECK(isnan(k3_f16_to_f32(0x7E00)) && isnan(k3_f16_to_f32(0x7C01)), "NaNs");
    CHECK(bits_of(k3_f16_to_f32(0x8000)) == 0x80000000u, "0x8000 = -0");
    CHECK(k3_f32_to_f16(65520.0f) == 0x7C00, "65520 (tie past max) -> inf");
    CHECK(k3_f32_to_f16(65519.0f) == 0x7BFF, "65519 -> 65504");
    CHECK(k3_f32_to_f16(0x1p-25f) == 0x0000, "2^-25 tie -> 0");
    CHECK(k3_f32_to_f16(float_of(0x33000001)) == 0x0001, "just above 2^-25 -> 2^-24");
    CHECK(k3_f32_to_f16(1.5f * 0x1p-24f) == 0x0002, "1.5 ulp subnormal tie -> even 2");
    CHECK(k3_f32_to_f16(2.5f * 0x1p-24f) == 0x0002, "2.5 ulp subnormal tie -> even 2");
    CHECK(k3_f32_to_f16(-0.0f) == 0x8000, "-0 keeps sign");
    CHECK(isnan(k3_f16_to_f32(k3_f32_to_f16(float_of(0x7F800001)))), "NaN stays NaN");

    for (uint32_t h = 0; h < 0x10000; h++) {
        float hw = compiler_f16_to_f32((uint16_t)h);
        float sw = k3_f16_to_f32((uint16_t)h);
        CHECK(same_float(sw, hw), "decode 0x%04x: %a vs compiler %a", h, sw, hw);
        if (!isnan(sw))
            CHECK(k3_f32_to_f16(sw) == h, "round trip 0x%04x", h);
    }
    for (int i = 0; i < 400000; i++) {
        float f;
        if (i < 200000) {            /* every exponent of interest, random mantissa */
            uint32_t exp_field = 90 + rng_u32() % 60;
            f = float_of((rng_u32() & 0x807FFFFFu) | (exp_field << 23));
        } else if (i < 300000) {     /* exact ties: low 13 (or more) bits = 1000..0 */
            uint32_t exp_field = 100 + rng_u32() % 45;
            uint32_t u = (rng_u32() & 0x807FE000u) | (exp_field << 23) | 0x1000u;
            f = float_of(u);
        } else {
            f = float_of(rng_u32());
        }
        uint16_t hw = compiler_f32_to_f16(f);
        uint16_t sw = k3_f32_to_f16(f);
        if (isnan(f))
            CHECK(isnan(k3_f16_to_f32(sw)), "encode NaN %08x", bits_of(f));
        else
            CHECK(sw == hw, "encode %a (%08x): 0x%04x vs compiler 0x%04x", f, bits_of(f), sw, hw);
    }
    TEST_END();
}

/* The e4m3 spec values, and the full table against the formula. */
static void test_e4m3(void)
{
    TEST_BEGIN("e4m3_decode");
    CHECK(k3_e4m3_to_f32(0x38) == 1.0f, "0x38 = 1");
    CHECK(k3_e4m3_to_f32(0x7E) == 448.0f, "0x7E = 448");
    CHECK(k3_e4m3_to_f32(0xFE) == -448.0f, "0xFE = -448");
    CHECK(k3_e4m3_to_f32(0x01) == 0x1p-9f, "0x01 = 2^-9");
    CHECK(k3_e4m3_to_f32(0x07) == 7 * 0x1p-9f, "0x07 = 7/8 * 2^-6");
    CHECK(k3_e4m3_to_f32(0x08) == 0x1p-6f, "0x08 = 2^-6");
    CHECK(k3_e4m3_to_f32(0x40) == 2.0f, "0x40 = 2");
    CHECK(k3_e4m3_to_f32(0x30) == 0.5f, "0x30 = 0.5");
    CHECK(k3_e4m3_to_f32(0x3C) == 1.5f, "0x3C = 1.5");
    CHECK(k3_e4m3_to_f32(0x78) == 256.0f, "0x78 = 256 (e=15 is finite)");
    CHECK(isnan(k3_e4m3_to_f32(0x7F)) && isnan(k3_e4m3_to_f32(0xFF)), "0x7F/0xFF NaN");
    CHECK(k3_e4m3_to_f32(0x80) == 0.0f && signbit(k3_e4m3_to_f32(0x80)), "0x80 = -0");
    CHECK(k3_e4m3_to_f32(0x00) == 0.0f && !signbit(k3_e4m3_to_f32(0x00)), "0x00 = +0");
    for (int b = 0; b < 256; b++) {
        int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
        double expect = e == 0 ? m / 8.0 * ldexp(1, -6) : (1 + m / 8.0) * ldexp(1, e - 7);
        if (s)
            expect = -expect;
        if (e == 15 && m == 7)
            CHECK(isnan(k3_e4m3_to_f32((uint8_t)b)), "NaN 0x%02x", b);
        else
            CHECK(k3_e4m3_to_f32((uint8_t)b) == (float)expect, "0x%02x", b);
    }
    TEST_END();
}

/* Bulk conversion of every supported dtype, from a deliberately unaligned
 * source. */
static void test_convert(void)
{
    TEST_BEGIN("convert_to_f32");
    unsigned char buf[64 + 1];
    unsigned char *src = buf + 1;
    float out[4];

    float f32_in[3] = {1.5f, -2.0f, 0x1p-20f};
    memcpy(src, f32_in, sizeof f32_in);
    k3_convert_to_f32(out, src, K3_DT_F32, 3);
    CHECK(out[0] == 1.5f && out[1] == -2.0f && out[2] == 0x1p-20f, "F32");

    uint16_t bf16_in[3] = {0x3F80, 0xC000, 0x3FC0};
    memcpy(src, bf16_in, sizeof bf16_in);
    k3_convert_to_f32(out, src, K3_DT_BF16, 3);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 1.5f, "BF16");

    uint16_t f16_in[3] = {0x3C00, 0xC000, 0x0001};
    memcpy(src, f16_in, sizeof f16_in);
    k3_convert_to_f32(out, src, K3_DT_F16, 3);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0x1p-24f, "F16");

    uint8_t e4m3_in[3] = {0x38, 0x7E, 0xC0};
    memcpy(src, e4m3_in, sizeof e4m3_in);
    k3_convert_to_f32(out, src, K3_DT_F8_E4M3, 3);
    CHECK(out[0] == 1.0f && out[1] == 448.0f && out[2] == -2.0f, "F8_E4M3");

    double f64_in[2] = {0.25, -1e10};
    memcpy(src, f64_in, sizeof f64_in);
    k3_convert_to_f32(out, src, K3_DT_F64, 2);
    CHECK(out[0] == 0.25f && out[1] == -1e10f, "F64");

    int32_t i32_in[2] = {-7, 123456};
    memcpy(src, i32_in, sizeof i32_in);
    k3_convert_to_f32(out, src, K3_DT_I32, 2);
    CHECK(out[0] == -7.0f && out[1] == 123456.0f, "I32");

    int64_t i64_in[2] = {-3, 1ll << 40};
    memcpy(src, i64_in, sizeof i64_in);
    k3_convert_to_f32(out, src, K3_DT_I64, 2);
    CHECK(out[0] == -3.0f && out[1] == 0x1p40f, "I64");

    uint8_t u8_in[2] = {0, 255};
    memcpy(src, u8_in, sizeof u8_in);
    k3_convert_to_f32(out, src, K3_DT_U8, 2);
    CHECK(out[0] == 0.0f && out[1] == 255.0f, "U8");
    k3_convert_to_f32(out, src, K3_DT_I8, 2);
    CHECK(out[0] == 0.0f && out[1] == -1.0f, "I8");
    k3_convert_to_f32(out, src, K3_DT_BOOL, 2);
    CHECK(out[0] == 0.0f && out[1] == 255.0f, "BOOL (raw byte)");

    uint8_t e5m2_in[4] = {0x3C, 0xC0, 0x7C, 0x01};   /* 1, -2, inf, 2^-16 */
    memcpy(src, e5m2_in, sizeof e5m2_in);
    k3_convert_to_f32(out, src, K3_DT_F8_E5M2, 4);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && isinf(out[2]) && out[3] == 0x1p-16f, "F8_E5M2");

    uint8_t e8m0_in[4] = {127, 130, 0, 255};          /* 1, 8, 2^-127, NaN */
    memcpy(src, e8m0_in, sizeof e8m0_in);
    k3_convert_to_f32(out, src, K3_DT_F8_E8M0, 4);
    CHECK(out[0] == 1.0f && out[1] == 8.0f && out[2] == 0x1p-127f && isnan(out[3]), "F8_E8M0");

    int16_t i16_in[2] = {-300, 32767};
    memcpy(src, i16_in, sizeof i16_in);
    k3_convert_to_f32(out, src, K3_DT_I16, 2);
    CHECK(out[0] == -300.0f && out[1] == 32767.0f, "I16");
    uint16_t u16_in[2] = {0, 65535};
    memcpy(src, u16_in, sizeof u16_in);
    k3_convert_to_f32(out, src, K3_DT_U16, 2);
    CHECK(out[0] == 0.0f && out[1] == 65535.0f, "U16");
    uint32_t u32_in[2] = {7, 4000000000u};
    memcpy(src, u32_in, sizeof u32_in);
    k3_convert_to_f32(out, src, K3_DT_U32, 2);
    CHECK(out[0] == 7.0f && out[1] == 4e9f, "U32");
    uint64_t u64_in[2] = {1, 1ull << 63};
    memcpy(src, u64_in, sizeof u64_in);
    k3_convert_to_f32(out, src, K3_DT_U64, 2);
    CHECK(out[0] == 1.0f && out[1] == 0x1p63f, "U64");
    k3_convert_to_f32(out, src, K3_DT_MXFP4, 1);
    CHECK(isnan(out[0]), "MXFP4 needs its scales: NaN, not garbage");
    TEST_END();
}

/* ------------------------------------------------------------------------ */
/* Matrices for the kernel tests                                             */
/* ------------------------------------------------------------------------ */

static const k3_dtype kernel_dtypes[] = {K3_DT_F32, K3_DT_BF16, K3_DT_F16, K3_DT_F8_E4M3};
#define N_KERNEL_DTYPES ((int)(sizeof kernel_dtypes / sizeof kernel_dtypes[0]))

/* A random matrix of the given dtype whose data starts `misalign` bytes past
 * a malloc'd address (rows inside read buffers need not be aligned). Values are
 * spread over several binades. fp8 never gets the NaN code; with_scale adds
 * 128x128 block scales. */
typedef struct {
    k3_weight w;
    unsigned char *alloc;
    float *scales;
} test_matrix;

/* Build one such matrix (see test_matrix). */
static test_matrix matrix_random(k3_dtype dt, int64_t rows, int64_t cols, int misalign, int with_scale)
{
    test_matrix m;
    size_t esize = k3_dtype_size(dt);
    m.alloc = malloc((size_t)(rows * cols) * esize + 16);
    unsigned char *data = m.alloc + misalign;
    for (int64_t i = 0; i < rows * cols; i++) {
        float v = rng_float() * ldexpf(1.0f, (int)(rng_u32() % 6) - 3);
        switch (dt) {
        case K3_DT_F32: memcpy(data + 4 * i, &v, 4); break;
        case K3_DT_BF16: { uint16_t h = k3_f32_to_bf16(v); memcpy(data + 2 * i, &h, 2); break; }
        case K3_DT_F16:  { uint16_t h = k3_f32_to_f16(v); memcpy(data + 2 * i, &h, 2); break; }
        default: {
            uint8_t b;
            do b = (uint8_t)rng_u32(); while ((b & 0x7F) == 0x7F);
            data[i] = b;
        }
        }
    }
    m.scales = NULL;
    if (with_scale) {
        int64_t n_scales = ((rows + 127) / 128) * ((cols + 127) / 128);
        m.scales = malloc((size_t)n_scales * sizeof(float));
        for (int64_t i = 0; i < n_scales; i++)
            m.scales[i] = (0.5f + (float)(rng_u32() % 1000) / 1000.0f) * 0x1p-8f;
    }
    m.w.dtype = dt;
    m.w.rows = rows;
    m.w.cols = cols;
    m.w.data = data;
    m.w.block_scale = m.scales;
    return m;
}

/* Release a matrix_random() matrix. */
static void matrix_free(test_matrix *m)
{
    free(m->alloc);
    free(m->scales);
}

/* n activations uniform in [-1, 1) (malloc'd, at least one element). */
static float *vector_random(int64_t n)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = rng_float();
    return v;
}

/* Decoded weight, independently of the library's kernels. */
static float matrix_weight(const test_matrix *m, int64_t r, int64_t c)
{
    float v;
    size_t esize = k3_dtype_size(m->w.dtype);
    k3_convert_to_f32(&v, (const unsigned char *)m->w.data + (size_t)(r * m->w.cols + c) * esize,
                      m->w.dtype, 1);
    if (m->scales)
        v *= m->scales[(r / 128) * ((m->w.cols + 127) / 128) + c / 128];
    return v;
}

/* Both paths compute sum_i w_i x_i with fp32 rounding in a different order
 * (and FMA vs mul+add). Each result is within gamma_n * sum|w_i x_i| of the
 * exact sum, gamma_n = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and
 * Stability, 3.1), so |simd - scalar| <= 2 gamma_n sum|w_i x_i|. We allow
 * 2 (n + 2) 2^-24 sum|w_i x_i|, computed in double. */
static double dot_tolerance(const test_matrix *m, int64_t r, const float *x)
{
    double abs_sum = 0;
    int64_t n = m->w.cols;
    for (int64_t c = 0; c < n; c++)
        abs_sum += fabs((double)matrix_weight(m, r, c) * x[c]);
    return 2.0 * (double)(n + 2) * 0x1p-24 * abs_sum;
}

/* SIMD matvec vs scalar reference across awkward shapes, all dtypes. */
static void test_matvec_vs_scalar(void)
{
    static const int64_t cols_list[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 129, 1000};
    char name[64];
    for (int d = 0; d < N_KERNEL_DTYPES; d++) {
        for (int scaled = 0; scaled <= (kernel_dtypes[d] == K3_DT_F8_E4M3); scaled++) {
            snprintf(name, sizeof name, "matvec_simd_vs_scalar_%s%s", k3_dtype_name(kernel_dtypes[d]),
                     scaled ? "_scaled" : "");
            TEST_BEGIN(name);
            for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++) {
                for (int64_t rows = 1; rows <= 70; rows++) {
                    int64_t cols = cols_list[ci];
                    test_matrix m = matrix_random(kernel_dtypes[d], rows, cols, (int)(rows % 3), scaled);
                    int x_misalign = (int)(rows & 1);   /* activations need not be aligned either */
                    float *x = vector_random(cols + 1) + x_misalign;
                    float *y_simd = malloc((size_t)rows * sizeof(float));
                    float *y_ref = malloc((size_t)rows * sizeof(float));
                    k3_kernels_force_scalar(0);
                    k3_matvec(y_simd, &m.w, x);
                    k3_kernels_force_scalar(1);
                    k3_matvec(y_ref, &m.w, x);
                    k3_kernels_force_scalar(0);
                    for (int64_t r = 0; r < rows; r++) {
                        double tol = dot_tolerance(&m, r, x);
                        CHECK(fabs((double)y_simd[r] - y_ref[r]) <= tol,
                              "rows %lld cols %lld row %lld: simd %.9g scalar %.9g tol %.3g",
                              (long long)rows, (long long)cols, (long long)r, y_simd[r], y_ref[r], tol);
                    }
                    free(x - x_misalign);
                    free(y_simd);
                    free(y_ref);
                    matrix_free(&m);
                }
            }
            TEST_END();
        }
    }
}

/* Every weight reaches the dot product with exactly its decoded value, on
 * both paths: x = one-hot column c makes y[r] = W[r][c] exactly. With fp8
 * block scales and a 300 x 260 matrix (3 x 3 blocks, partial last blocks)
 * this also pins each scale to its 128 x 128 block. */
static void test_matvec_exact_decode(void)
{
    for (int d = 0; d < N_KERNEL_DTYPES + 1; d++) {
        k3_dtype dt = d < N_KERNEL_DTYPES ? kernel_dtypes[d] : K3_DT_F8_E4M3;
        int scaled = d == N_KERNEL_DTYPES;
        char name[64];
        snprintf(name, sizeof name, "matvec_exact_decode_%s%s", k3_dtype_name(dt),
                 scaled ? "_block_scales" : "");
        TEST_BEGIN(name);
        int64_t rows = 300, cols = 260;
        test_matrix m = matrix_random(dt, rows, cols, 1, scaled);
        if (scaled)   /* distinct powers of two per block: a wrong block is obvious */
            for (int i = 0; i < 9; i++)
                m.scales[i] = ldexpf(1.0f, i - 4);
        float *x = calloc((size_t)cols, sizeof(float));
        float *y = malloc((size_t)rows * sizeof(float));
        for (int scalar = 0; scalar <= 1; scalar++) {
            k3_kernels_force_scalar(scalar);
            for (int64_t c = 0; c < cols; c++) {
                x[c] = 1.0f;
                k3_matvec(y, &m.w, x);
                x[c] = 0.0f;
                for (int64_t r = 0; r < rows; r++) {
                    float expect = matrix_weight(&m, r, c);
                    if (scaled) {   /* independent of the library's indexing */
                        float raw = k3_e4m3_to_f32(((const uint8_t *)m.w.data)[r * cols + c]);
                        expect = raw * ldexpf(1.0f, (int)((r / 128) * 3 + c / 128) - 4);
                    }
                    CHECK(y[r] == expect, "%s r %lld c %lld: %a vs %a", scalar ? "scalar" : "simd",
                          (long long)r, (long long)c, y[r], expect);
                }
            }
        }
        k3_kernels_force_scalar(0);
        free(x);
        free(y);
        matrix_free(&m);
        TEST_END();
    }
}

/* All 254 finite fp8 codes through the SIMD decoder (16 per row), plus the
 * NaN codes poisoning only their own row. */
static void test_e4m3_simd_table(void)
{
    TEST_BEGIN("e4m3_simd_all_codes");
    uint8_t codes[16 * 16];
    for (int i = 0; i < 256; i++)
        codes[i] = (uint8_t)i;
    codes[0x7F] = 0x00;
    codes[0xFF] = 0x00;
    k3_weight w = {.dtype = K3_DT_F8_E4M3, .rows = 16, .cols = 16, .data = codes};
    float x[16] = {0}, y[16];
    for (int c = 0; c < 16; c++) {
        x[c] = 1.0f;
        k3_matvec(y, &w, x);
        x[c] = 0.0f;
        for (int r = 0; r < 16; r++)
            CHECK(y[r] == k3_e4m3_to_f32(codes[r * 16 + c]), "code 0x%02x: %a",   /* -0 + 0 = +0 */
                  codes[r * 16 + c], y[r]);
    }
    codes[3 * 16 + 5] = 0x7F;
    codes[9 * 16 + 15] = 0xFF;
    for (int c = 0; c < 16; c++)
        x[c] = 1.0f;
    k3_matvec(y, &w, x);
    for (int r = 0; r < 16; r++)
        CHECK(isnan(y[r]) == (r == 3 || r == 9), "NaN row %d", r);
    TEST_END();
}

/* k3_matmul gives the very bits of k3_matvec per token, SIMD and scalar,
 * with token counts that exercise the 2x2/2x1/1x2/1x1 blocks (fp8) and the
 * 4x3 ... 1x1 half-chain blocks and several 24-token blocks (unscaled), odd
 * row block tails, unpadded cols, rows longer than one 1024-column segment
 * and matrices big enough to go parallel. */
static void test_matmul_bitexact(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {17, 33}, {70, 100}, {33, 16}, {300, 129},
                                        {130, 300}, {1000, 64}, {37, 1000}, {23, 2100}, {9, 4100}};
    static const int token_counts[] = {1, 2, 3, 5, 8, 17, 70};   /* 70: two token blocks */
    for (int d = 0; d < N_KERNEL_DTYPES; d++) {
        char name[64];
        snprintf(name, sizeof name, "matmul_bitexact_vs_matvec_%s", k3_dtype_name(kernel_dtypes[d]));
        TEST_BEGIN(name);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            test_matrix m = matrix_random(kernel_dtypes[d], rows, cols, (int)(s & 1),
                                          kernel_dtypes[d] == K3_DT_F8_E4M3 && (s & 1));
            for (size_t ti = 0; ti < sizeof token_counts / sizeof token_counts[0]; ti++) {
                int n_tokens = token_counts[ti];
                float *X = vector_random(n_tokens * cols + 1) + (s & 1);   /* odd: unaligned X */
                float *Y = malloc((size_t)(n_tokens * rows) * sizeof(float));
                float *y = malloc((size_t)rows * sizeof(float));
                for (int scalar = 0; scalar <= 1; scalar++) {
                    k3_kernels_force_scalar(scalar);
                    k3_matmul(Y, &m.w, X, n_tokens);
                    for (int t = 0; t < n_tokens; t++) {
                        k3_matvec(y, &m.w, X + t * cols);
                        CHECK(!memcmp(y, Y + t * rows, (size_t)rows * sizeof(float)),
                              "%s shape %lldx%lld T=%d token %d differs", scalar ? "scalar" : "simd",
                              (long long)rows, (long long)cols, n_tokens, t);
                    }
                }
                k3_kernels_force_scalar(0);
                free(X - (s & 1));
                free(Y);
                free(y);
            }
            matrix_free(&m);
        }
        TEST_END();
    }
}

/* k3_matmul's unscaled path runs a long prompt in groups of tokens whose
 * activations fit L2 (1 MiB: 72 tokens of 3072 columns), each group
 * decoding the rows again: every token of every group, the last one
 * partial, still equals k3_matvec bit for bit, at 1 and 2 threads. */
static void test_matmul_token_groups(void)
{
    TEST_BEGIN("matmul_token_groups_bitexact");
    static const k3_dtype dtypes[] = {K3_DT_BF16, K3_DT_F32};
    const int64_t rows = 40, cols = 3072;
    const int n_tokens = 100;   /* two groups of 72 tokens: 72 + 28 */
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        test_matrix m = matrix_random(dtypes[d], rows, cols, 0, 0);
        float *X = vector_random(n_tokens * cols);
        float *Y = malloc((size_t)(n_tokens * rows) * sizeof(float));
        float *y = malloc((size_t)rows * sizeof(float));
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            memset(Y, 0, (size_t)(n_tokens * rows) * sizeof(float));
            k3_matmul(Y, &m.w, X, n_tokens);
            for (int t = 0; t < n_tokens; t++) {
                k3_matvec(y, &m.w, X + (int64_t)t * cols);
                CHECK(!memcmp(y, Y + (int64_t)t * rows, (size_t)rows * sizeof(float)),
                      "%s %lldx%lld T=%d, %d thread(s): token %d differs from matvec", k3_dtype_name(dtypes[d]),
                      (long long)rows, (long long)cols, n_tokens, threads, t);
            }
        }
        free(X);
        free(Y);
        free(y);
        matrix_free(&m);
    }
    omp_set_num_threads(omp_get_num_procs());
    TEST_END();
}

/* The result of a row never depends on the thread count or on the row range
 * k3_matvec_rows was given (4-row blocks start wherever the range starts). */
static void test_matvec_threads_bitexact(void)
{
    TEST_BEGIN("matvec_threads_and_ranges_bitexact");
    int max_threads = omp_get_max_threads();
    for (int d = 0; d < N_KERNEL_DTYPES; d++) {
        int64_t rows = 1001, cols = 333;
        test_matrix m = matrix_random(kernel_dtypes[d], rows, cols, 1, kernel_dtypes[d] == K3_DT_F8_E4M3);
        float *x = vector_random(cols);
        float *y1 = malloc((size_t)rows * sizeof(float));
        float *yn = malloc((size_t)rows * sizeof(float));
        omp_set_num_threads(1);
        k3_matvec(y1, &m.w, x);
        for (int threads = 2; threads <= 5; threads++) {
            omp_set_num_threads(threads);
            memset(yn, 0, (size_t)rows * sizeof(float));
            k3_matvec(yn, &m.w, x);
            CHECK(!memcmp(y1, yn, (size_t)rows * sizeof(float)), "%s: %d threads differ from 1",
                  k3_dtype_name(kernel_dtypes[d]), threads);
        }
        omp_set_num_threads(max_threads);
        for (int trial = 0; trial < 20; trial++) {
            int64_t begin = rng_u32() % rows, end = begin + rng_u32() % (rows - begin + 1);
            memset(yn, 0, (size_t)rows * sizeof(float));
            k3_matvec_rows(yn, &m.w, x, begin, end);
            CHECK(!memcmp(y1 + begin, yn + begin, (size_t)(end - begin) * sizeof(float)),
                  "%s: rows [%lld, %lld) differ", k3_dtype_name(kernel_dtypes[d]),
                  (long long)begin, (long long)end);
        }
        free(x);
        free(y1);
        free(yn);
        matrix_free(&m);
    }
    TEST_END();
}

/* k3_matvec_group (several matrices in one parallel region, each thread
 * its rows of every one) gives each job the bits of its own k3_matvec at 1
 * to 5 threads and inside a parallel region (job by job there): every
 * dtype, MXFP4 on both activation paths, matrices too small to be split
 * alone beside a large one, jobs with their own x. k3_matmul_group over 3
 * tokens gives the bits of k3_matmul on each job. */
static void test_matvec_group_bitexact(void)
{
    TEST_BEGIN("matvec_group_equals_matvec_per_job");
    enum { N_JOBS = 7, TOKENS = 3 };
    static const k3_dtype dtypes[N_JOBS] = {K3_DT_F32, K3_DT_BF16, K3_DT_F16, K3_DT_F8_E4M3, K3_DT_MXFP4,
                                            K3_DT_MXFP4, K3_DT_BF16};
    static const int64_t shapes[N_JOBS][2] = {{1001, 333}, {5, 64}, {24, 3072}, {130, 300},
                                              {517, 1024}, {3, 64}, {2, 7}};
    test_matrix m[N_JOBS];
    uint8_t *mx_packed[N_JOBS] = {0}, *mx_scale[N_JOBS] = {0};
    float *x[N_JOBS], *y_ref[N_JOBS], *y[N_JOBS];
    k3_matvec_job jobs[N_JOBS];
    int max_threads = omp_get_max_threads();
    for (int j = 0; j < N_JOBS; j++) {
        int64_t rows = shapes[j][0], cols = shapes[j][1];
        if (dtypes[j] == K3_DT_MXFP4) {     /* nibbles and E8M0 scales around 1 */
            memset(&m[j], 0, sizeof m[j]);
            mx_packed[j] = malloc((size_t)(rows * cols / 2));
            mx_scale[j] = malloc((size_t)(rows * cols / 32));
            for (int64_t i = 0; i < rows * cols / 2; i++) mx_packed[j][i] = (uint8_t)rng_u32();
            for (int64_t i = 0; i < rows * cols / 32; i++) mx_scale[j][i] = (uint8_t)(120 + rng_u32() % 14);
            m[j].w = (k3_weight){.dtype = K3_DT_MXFP4, .rows = rows, .cols = cols, .data = mx_packed[j],
                                 .mx_scale = mx_scale[j]};
        } else {
            m[j] = matrix_random(dtypes[j], rows, cols, j & 1, dtypes[j] == K3_DT_F8_E4M3);
        }
        x[j] = vector_random(cols * TOKENS);
        y_ref[j] = malloc((size_t)(rows * TOKENS) * sizeof(float));
        y[j] = malloc((size_t)(rows * TOKENS) * sizeof(float));
        jobs[j] = (k3_matvec_job){y[j], &m[j].w, x[j]};
    }
    for (int q8 = 0; q8 <= 1; q8++) {
        k3_kernels_set_activations_q8(q8);
        omp_set_num_threads(1);
        for (int j = 0; j < N_JOBS; j++)
            k3_matvec(y_ref[j], &m[j].w, x[j]);
        for (int threads = 1; threads <= 6; threads++) {   /* 6: inside a region of 2 */
            omp_set_num_threads(threads <= 5 ? threads : 2);
            for (int j = 0; j < N_JOBS; j++)
                memset(y[j], 0xFF, (size_t)shapes[j][0] * sizeof(float));
            if (threads <= 5) {
                k3_matvec_group(jobs, N_JOBS);
            } else {
#pragma omp parallel
#pragma omp single
                k3_matvec_group(jobs, N_JOBS);
            }
            for (int j = 0; j < N_JOBS; j++)
                CHECK(!memcmp(y[j], y_ref[j], (size_t)shapes[j][0] * sizeof(float)),
                      "q8 %d, job %d (%s %lldx%lld): %d threads%s differ from its own matvec", q8, j,
                      k3_dtype_name(dtypes[j]), (long long)shapes[j][0], (long long)shapes[j][1],
                      threads <= 5 ? threads : 2, threads <= 5 ? "" : " (inside a region)");
        }
        omp_set_num_threads(max_threads);
        for (int j = 0; j < N_JOBS; j++)
            k3_matmul(y_ref[j], &m[j].w, x[j], TOKENS);
        k3_matmul_group(jobs, N_JOBS, TOKENS);
        for (int j = 0; j < N_JOBS; j++)
            CHECK(!memcmp(y[j], y_ref[j], (size_t)(shapes[j][0] * TOKENS) * sizeof(float)),
                  "q8 %d, job %d: the group's %d-token matmul differs from k3_matmul", q8, j, TOKENS);
    }
    k3_kernels_set_activations_q8(0);
    for (int j = 0; j < N_JOBS; j++) {
        if (dtypes[j] == K3_DT_MXFP4) {
            free(mx_packed[j]);
            free(mx_scale[j]);
        } else {
            matrix_free(&m[j]);
        }
        free(x[j]);
        free(y_ref[j]);
        free(y[j]);
    }
    TEST_END();
}

/* k3_decode_row_f32 (the 8-lane bf16 / f16 row decode) gives the values
 * of the scalar k3_convert_to_f32 for every one of the 65536 codes (NaN
 * as NaN), in rows whose length leaves a tail, at odd addresses; it
 * declines other dtypes and the forced scalar mode. */
static void test_decode_row_f32(void)
{
    TEST_BEGIN("decode_row_f32_equals_convert_every_code");
    enum { COLS = 1027, ROWS = 65536 / COLS + 1 };
    unsigned char *alloc = malloc((size_t)ROWS * COLS * 2 + 1), *data = alloc + 1;
    float *fast = malloc(COLS * sizeof(float)), *slow = malloc(COLS * sizeof(float));
    for (int64_t i = 0; i < (int64_t)ROWS * COLS; i++) {
        uint16_t code = (uint16_t)(i & 0xFFFF);
        memcpy(data + 2 * i, &code, 2);
    }
    const k3_dtype dtypes[2] = {K3_DT_BF16, K3_DT_F16};
    for (int d = 0; d < 2; d++) {
        k3_weight w = {.dtype = dtypes[d], .rows = ROWS, .cols = COLS, .data = data};
        for (int64_t r = 0; r < ROWS; r++) {
            CHECK(k3_decode_row_f32(&w, r, fast) == 1, "%s: declined", k3_dtype_name(dtypes[d]));
            k3_convert_to_f32(slow, data + (size_t)(r * COLS) * 2, dtypes[d], COLS);
            for (int c = 0; c < COLS; c++)
                CHECK(isnan(slow[c]) ? isnan(fast[c]) : !memcmp(&fast[c], &slow[c], 4),
                      "%s code 0x%04llx: %a vs %a", k3_dtype_name(dtypes[d]),
                      (unsigned long long)((r * COLS + c) & 0xFFFF), fast[c], slow[c]);
        }
        k3_kernels_force_scalar(1);
        CHECK(k3_decode_row_f32(&w, 0, fast) == 0, "%s: not declined when scalar is forced",
              k3_dtype_name(dtypes[d]));
        k3_kernels_force_scalar(0);
    }
    k3_weight f32 = {.dtype = K3_DT_F32, .rows = 1, .cols = 8, .data = fast};
    CHECK(k3_decode_row_f32(&f32, 0, slow) == 0, "F32 not declined");
    free(alloc);
    free(fast);
    free(slow);
    TEST_END();
}

/* k3_dot_f32: within tolerance of the scalar loop, and bit-equal to a
 * one-row F32 matvec (same canonical order). k3_axpy_f32: SIMD is one fma
 * per element; scalar is mul then add. */
static void test_dot_axpy(void)
{
    TEST_BEGIN("dot_f32_and_axpy");
    for (int64_t n = 0; n <= 300; n += (n < 40 ? 1 : 37)) {
        float *a = vector_random(n + 1) + 1, *b = vector_random(n);
        k3_weight w = {.dtype = K3_DT_F32, .rows = 1, .cols = n, .data = a};
        float simd = k3_dot_f32(a, b, n), row = 0;
        if (n > 0)
            k3_matvec(&row, &w, b);
        k3_kernels_force_scalar(1);
        float scalar = k3_dot_f32(a, b, n);
        k3_kernels_force_scalar(0);
        double abs_sum = 0;
        for (int64_t i = 0; i < n; i++)
            abs_sum += fabs((double)a[i] * b[i]);
        CHECK(fabs((double)simd - scalar) <= 2.0 * (n + 2) * 0x1p-24 * abs_sum, "dot n=%lld", (long long)n);
        CHECK(n == 0 ? simd == 0 : bits_of(simd) == bits_of(row), "dot == matvec row, n=%lld", (long long)n);

        float *y_simd = vector_random(n), *y_scalar = malloc((size_t)(n + 1) * sizeof(float));
        memcpy(y_scalar, y_simd, (size_t)n * sizeof(float));
        float *y_orig = malloc((size_t)(n + 1) * sizeof(float));
        memcpy(y_orig, y_simd, (size_t)n * sizeof(float));
        k3_axpy_f32(y_simd, 0.375f, a, n);
        k3_kernels_force_scalar(1);
        k3_axpy_f32(y_scalar, 0.375f, a, n);
        k3_kernels_force_scalar(0);
        for (int64_t i = 0; i < n; i++) {
            CHECK(y_simd[i] == fmaf(0.375f, a[i], y_orig[i]), "axpy simd n=%lld i=%lld",
                  (long long)n, (long long)i);
            CHECK(y_scalar[i] == y_orig[i] + 0.375f * a[i], "axpy scalar n=%lld i=%lld",
                  (long long)n, (long long)i);
        }
        free(a - 1);
        free(b);
        free(y_simd);
        free(y_scalar);
        free(y_orig);
    }
    TEST_END();
}

/* A NaN or inf weight poisons its own row only; the 4-row kernels must not
 * leak it into the neighbours sharing the x loads. */
static void test_nonfinite_rows(void)
{
    TEST_BEGIN("nonfinite_weights_stay_in_their_row");
    int64_t rows = 8, cols = 40;
    uint16_t *data = calloc((size_t)(rows * cols), 2);
    for (int64_t i = 0; i < rows * cols; i++)
        data[i] = 0x3F80;
    data[1 * cols + 5] = 0x7FC0;    /* NaN */
    data[6 * cols + 39] = 0x7F80;   /* +inf in the tail chunk */
    k3_weight w = {.dtype = K3_DT_BF16, .rows = rows, .cols = cols, .data = data};
    float x[40], y[8];
    for (int i = 0; i < 40; i++)
        x[i] = 1.0f;
    for (int scalar = 0; scalar <= 1; scalar++) {
        k3_kernels_force_scalar(scalar);
        k3_matvec(y, &w, x);
        for (int r = 0; r < rows; r++) {
            if (r == 1)
                CHECK(isnan(y[r]), "row 1 NaN");
            else if (r == 6)
                CHECK(isinf(y[r]) && y[r] > 0, "row 6 inf");
            else
                CHECK(y[r] == 40.0f, "row %d = 40, got %g", r, y[r]);
        }
    }
    k3_kernels_force_scalar(0);
    free(data);
    TEST_END();
}

/* fp8 NaN codes, which the fast kernel handles by scanning each 128-column
 * block first: a NaN in a later block or in the padded tail chunk must
 * poison exactly its row, on every path, with matmul still equal to matvec
 * bit for bit. */
static void test_e4m3_nan_blocks(void)
{
    TEST_BEGIN("e4m3_nan_codes_in_blocks_and_tail");
    /* 300 cols = 2 full blocks + 44 (12 of them in the tail chunk); 120 x 300
     * is big enough for k3_matmul's decoded-scratch path. */
    int64_t rows = 120, cols = 300;
    test_matrix m = matrix_random(K3_DT_F8_E4M3, rows, cols, 0, 1);
    uint8_t *codes = (uint8_t *)m.w.data;
    codes[2 * cols + 130] = 0x7F;
    codes[7 * cols + 299] = 0xFF;
    codes[8 * cols + 0] = 0x7F;
    float *X = vector_random(3 * cols);
    float *Y = malloc((size_t)(3 * rows) * sizeof(float));
    float y[120], y_ref[120];
    for (int scalar = 0; scalar <= 1; scalar++) {
        k3_kernels_force_scalar(scalar);
        k3_matmul(Y, &m.w, X, 3);
        for (int t = 0; t < 3; t++) {
            k3_matvec(y, &m.w, X + t * cols);
            CHECK(!memcmp(y, Y + t * rows, sizeof y), "%s: matmul token %d differs",
                  scalar ? "scalar" : "simd", t);
            for (int r = 0; r < rows; r++)
                CHECK(isnan(y[r]) == (r == 2 || r == 7 || r == 8), "%s: row %d NaN-ness",
                      scalar ? "scalar" : "simd", r);
        }
    }
    k3_kernels_force_scalar(1);
    k3_matvec(y_ref, &m.w, X);
    k3_kernels_force_scalar(0);
    k3_matvec(y, &m.w, X);
    for (int r = 0; r < rows; r++)   /* NaN-free rows of a NaN-containing quad stay exact-ish */
        if (!isnan(y_ref[r]))
            CHECK(fabs((double)y[r] - y_ref[r]) <= dot_tolerance(&m, r, X), "row %d value", r);
    free(X);
    free(Y);
    matrix_free(&m);
    TEST_END();
}

/* ------------------------------------------------------------------------ */
/* The canonical order, written out independently of every back end          */
/* ------------------------------------------------------------------------ */

/* Row r of m by the canonical order of engine/kernels/matvec.c, one lane at a time
 * in plain C: 16-column chunks (the tail zero-padded), lanes c % 8 of two
 * 8-lane fma accumulators (A0 for chunk columns 0-7, A1 for 8-15); fp8 sums
 * each 128-column block apart on weights e4m3 / 256 and folds the block in
 * with one fma by scale * 256; the row is the tree (A0 + A1) lane i + i+4,
 * then i + i+2, then 0 + 1. A back end that reorders, drops a rounding or
 * adds one (e.g. multiply then add instead of fma) fails the comparison. */
static float canonical_row(const test_matrix *m, int64_t r, const float *x)
{
    int64_t cols = m->w.cols, padded = (cols + 15) & ~(int64_t)15;
    int fp8 = m->w.dtype == K3_DT_F8_E4M3;
    float acc[16] = {0}, block[16] = {0};
    for (int64_t c = 0; c < padded; c++) {
        float w = 0.0f, xv = c < cols ? x[c] : 0.0f;
        if (c < cols) {
            size_t esize = k3_dtype_size(m->w.dtype);
            k3_convert_to_f32(&w, (const unsigned char *)m->w.data + (size_t)(r * cols + c) * esize,
                              m->w.dtype, 1);
            if (fp8)
                w *= 0x1p-8f;   /* exact */
        }
        int lane = (int)(c % 16);
        if (!fp8) {
            acc[lane] = fmaf(w, xv, acc[lane]);
            continue;
        }
        block[lane] = fmaf(w, xv, block[lane]);
        if (c % 128 == 127 || c == padded - 1) {   /* end of a scale block */
            float s = m->scales ? m->scales[(r / 128) * ((cols + 127) / 128) + c / 128] : 1.0f;
            for (int i = 0; i < 16; i++) {
                acc[i] = fmaf(block[i], s * 256.0f, acc[i]);
                block[i] = 0.0f;
            }
        }
    }
    float v[8], s4[4], s2[2];
    for (int i = 0; i < 8; i++)
        v[i] = acc[i] + acc[i + 8];
    for (int i = 0; i < 4; i++)
        s4[i] = v[i] + v[i + 4];
    for (int i = 0; i < 2; i++)
        s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}

/* Every back end (x86-64-v3, aarch64 NEON, generic C) must give exactly the
 * canonical order's bits - that is what makes logits identical across
 * machines. k3_matvec (1-row and 4-row kernels, one and several threads)
 * and k3_matmul (decoded 4x3 half-chain blocks, fp8 2x2) against canonical_row, for every
 * dtype, with tails, misaligned rows and several fp8 scale blocks. */
static void test_canonical_order(void)
{
    static const int64_t shapes[][2] = {{7, 16}, {9, 37}, {33, 300}, {130, 515}, {64, 1024}, {19, 2085}};
    for (int d = 0; d < N_KERNEL_DTYPES; d++) {
        for (int scaled = 0; scaled < (kernel_dtypes[d] == K3_DT_F8_E4M3 ? 2 : 1); scaled++) {
            char name[96];
            snprintf(name, sizeof name, "canonical_order_%s%s [%s]", k3_dtype_name(kernel_dtypes[d]),
                     scaled ? "_scaled" : "", k3_kernels_name());
            TEST_BEGIN(name);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                int64_t rows = shapes[s][0], cols = shapes[s][1];
                const int n_tokens = 5;
                test_matrix m = matrix_random(kernel_dtypes[d], rows, cols, (int)(s % 3) * 2, scaled);
                float *X = vector_random(n_tokens * cols);
                float *Y = malloc((size_t)(n_tokens * rows) * sizeof(float));
                float *y = malloc((size_t)rows * sizeof(float));
                k3_matmul(Y, &m.w, X, n_tokens);
                for (int t = 0; t < n_tokens; t++) {
                    k3_matvec(y, &m.w, X + t * cols);
                    for (int64_t r = 0; r < rows; r++) {
                        float want = canonical_row(&m, r, X + t * cols);
                        CHECK(bits_of(y[r]) == bits_of(want), "matvec %lldx%lld row %lld token %d: %a vs canonical %a",
                              (long long)rows, (long long)cols, (long long)r, t, y[r], want);
                        CHECK(bits_of(Y[t * rows + r]) == bits_of(want),
                              "matmul %lldx%lld row %lld token %d: %a vs canonical %a", (long long)rows,
                              (long long)cols, (long long)r, t, Y[t * rows + r], want);
                    }
                }
                free(X);
                free(Y);
                free(y);
                matrix_free(&m);
            }
            TEST_END();
        }
    }
}

/* Which back end this binary runs, and - when the caller says which one it
 * built (K3_EXPECT_KERNELS, set by tests/t_arch.sh) - that it is that one,
 * so an aarch64 build that silently fell back to generic C fails. */
static void test_kernels_in_use(void)
{
    char name[96];
    const char *expect = getenv("K3_EXPECT_KERNELS");
    snprintf(name, sizeof name, "kernels_in_use [%s]", k3_kernels_name());
    TEST_BEGIN(name);
    if (expect && *expect)
        CHECK(!strncmp(k3_kernels_name(), expect, strlen(expect)), "built %s, expected %s",
              k3_kernels_name(), expect);
    TEST_END();
}

/* Decoders first (the kernels' tests rely on them), then the kernels. */
int main(void)
{
    test_kernels_in_use();
    test_dtype_table();
    test_bf16();
    test_f16();
    test_e4m3();
    test_convert();
    test_matvec_vs_scalar();
    test_matvec_exact_decode();
    test_e4m3_simd_table();
    test_matmul_bitexact();
    test_matmul_token_groups();
    test_matvec_threads_bitexact();
    test_matvec_group_bitexact();
    test_decode_row_f32();
    test_dot_axpy();
    test_nonfinite_rows();
    test_e4m3_nan_blocks();
    test_canonical_order();
    TEST_EXIT();
}
