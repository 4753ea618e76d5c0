/* test_k3_ops.c - the Kimi K3 numeric pieces against plain scalar references
 * written here from docs/MODEL.md, "Kimi K3", with adversarial inputs: SiTU with both
 * caps saturated, the AttnRes mix, the lower-bounded KDA decay, and MXFP4
 * decode / dot products (the spec's test vector, a swapped-nibble negative,
 * E8M0 edge bytes, SIMD vs scalar, matmul vs matvec), and the KDA delta rule
 * over a chunk against its per-token reference. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "mxfp4.h"
#include "delta_rule.h"
#include "k3.h"
#include "k3_util.h"
#include "ops.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}

/* docs/MODEL.md, "Latent MoE and SiTU" in double precision. */
static double situ_ref(double g, double u, double b, double bl)
{
    return b * tanh(g / b) * (1.0 / (1.0 + exp(-g))) * (bl * tanh(u / bl));
}

static void test_situ(void)
{
    TEST_BEGIN("situ_against_double_reference_and_caps");
    const double vals[] = {-1000, -200, -30, -4, -1, -1e-3, 0, 1e-3, 0.5, 1, 3.9, 4, 25, 60, 200, 1000};
    const int nv = sizeof vals / sizeof vals[0];
    for (int i = 0; i < nv; i++)
        for (int j = 0; j < nv; j++) {
            float got = k3_situ((float)vals[i], (float)vals[j], 4.0f, 25.0f);
            double want = situ_ref(vals[i], vals[j], 4.0, 25.0);
            CHECK(fabs(got - want) <= 1e-5 * fmax(1.0, fabs(want)), "situ(%g, %g) = %g, want %g", vals[i], vals[j], got, want);
            CHECK(fabsf(got) <= 100.0f + 1e-3f, "situ(%g, %g) = %g exceeds the cap 100", vals[i], vals[j], got);
        }
    /* both caps saturate: 4 * 1 * sigmoid(1000) * 25 = 100 */
    CHECK(fabsf(k3_situ(1000, 1000, 4, 25) - 100.0f) < 1e-4f, "situ(1000,1000) = %g", k3_situ(1000, 1000, 4, 25));
    /* the sigmoid takes the uncapped gate: at g = -1000 the product is ~0 */
    CHECK(fabsf(k3_situ(-1000, 1000, 4, 25)) < 1e-6f, "situ(-1000,1000) = %g", k3_situ(-1000, 1000, 4, 25));
    /* the up cap matters: u = 1000 gives 25, not 1000 */
    float g = 2.0f, got = k3_situ(g, 1000, 4, 25);
    CHECK(fabsf(got - 4 * tanhf(0.5f) / (1 + expf(-2)) * 25) < 1e-4f, "up cap missing: %g", got);
    TEST_END();
}

/* Distance from got to want in units of the fp32 spacing at want. */
static double ulps_from(float got, double want)
{
    float w = fabsf((float)want);
    double spacing = w == 0.0f ? 1e-45 : (double)nextafterf(w, INFINITY) - w;
    return fabs((double)got - want) / spacing;
}

/* SiTU's own fp32 exp and tanh (ops.h) against double-precision libm over a
 * sweep of every 61st float in their working ranges: the claimed bounds
 * (exp 1 ulp, tanh 2 ulp; measured 0.92 and 1.53), the saturation ends, NaN
 * kept; and k3_situ_glu's vectorised loop equal bit for bit to the scalar
 * element function (the contract that makes every build's logits agree). */
static void test_situ_exp_tanh(void)
{
    TEST_BEGIN("situ_exp_tanh_ulp_sweep_and_vector_equals_scalar");
    double worst_exp = 0, worst_tanh = 0;
    float worst_exp_at = 0, worst_tanh_at = 0;
    for (uint32_t bits = 0; bits < 0x42B00000u; bits += 61) {      /* 0 .. 88 */
        float v;
        memcpy(&v, &bits, sizeof v);
        for (int sign = 0; sign < 2; sign++) {
            float x = sign ? -v : v;
            if (x >= -87.0f) {
                double u = ulps_from(k3_exp_f32(x), exp((double)x));
                if (u > worst_exp) worst_exp = u, worst_exp_at = x;
            }
            if (v <= 20.0f) {
                double u = ulps_from(k3_tanh_f32(x), tanh((double)x));
                if (u > worst_tanh) worst_tanh = u, worst_tanh_at = x;
            }
        }
    }
    CHECK(worst_exp <= 1.0, "exp: %.3f ulp at %g", worst_exp, worst_exp_at);
    CHECK(worst_tanh <= 2.0, "tanh: %.3f ulp at %g", worst_tanh, worst_tanh_at);
    CHECK(k3_tanh_f32(10.0f) == 1.0f && k3_tanh_f32(-1e30f) == -1.0f && k3_tanh_f32(INFINITY) == 1.0f,
          "tanh does not saturate to +-1");
    CHECK(k3_tanh_f32(0.0f) == 0.0f && signbit(k3_tanh_f32(-0.0f)), "tanh(+-0) is not +-0");
    CHECK(k3_exp_f32(-1000.0f) < 1e-37f && k3_exp_f32(-1000.0f) >= 0.0f && isfinite(k3_exp_f32(1000.0f)),
          "exp's clamped ends: %g %g", k3_exp_f32(-1000.0f), k3_exp_f32(1000.0f));
    CHECK(isnan(k3_exp_f32(NAN)) && isnan(k3_tanh_f32(NAN)) && isnan(k3_situ(NAN, 1.0f, 4.0f, 25.0f)),
          "NaN is not kept");

    enum { N = 1003 };                       /* not a multiple of any vector width */
    float *gate = malloc(N * sizeof(float)), *up = malloc(N * sizeof(float));
    float *want = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        double mag = pow(10, (urand() - 0.5) * 8);
        gate[i] = (float)((urand() - 0.5) * mag);
        up[i] = (float)((urand() - 0.5) * mag * 10);
    }
    gate[0] = 0.55f, up[0] = -13.75f;                     /* the tanh switch point, g / 4 and u / 25 */
    for (int i = 0; i < N; i++) want[i] = k3_situ(gate[i], up[i], 4.0f, 25.0f);
    int differ = 0;
    for (int off = 0; off < 8; off++) {     /* every alignment of the vector loop */
        float g2[N];
        memcpy(g2, gate, sizeof g2);
        k3_situ_glu(g2 + off, up + off, N - off, 4.0f, 25.0f);
        differ += memcmp(g2 + off, want + off, (size_t)(N - off) * sizeof(float)) != 0;
    }
    CHECK(differ == 0, "k3_situ_glu differs from k3_situ in %d of 8 alignments", differ);
    free(gate); free(up); free(want);
    TEST_END();
}

static void test_safe_gate(void)
{
    TEST_BEGIN("kda_safe_gate_decay");
    for (int i = 0; i < 2000; i++) {
        double A = exp(urand() * 4 - 1), z = (urand() - 0.5) * 400;
        double want = exp(-5.0 * (1.0 / (1.0 + exp(-A * z))));
        float got = k3_kda_decay_safe(-5.0f, (float)A, (float)z);
        CHECK(fabs(got - want) <= 2e-6 * want + 1e-9, "A=%g z=%g: %g want %g", A, z, got, want);
        CHECK(got >= expf(-5.0f) * (1 - 1e-6f) && got <= 1.0f, "alpha %g outside (e^-5, 1]", got);
    }
    CHECK(fabsf(k3_kda_decay_safe(-5, 1, 1e6f) - expf(-5)) < 1e-7f, "saturated decay");
    CHECK(k3_kda_decay_safe(-5, 1, -1e6f) == 1.0f, "no decay at -inf");
    /* the Kimi Linear form stays softplus */
    CHECK(fabsf(k3_kda_decay_softplus(2.0f, 0.0f) - expf(-2.0f * logf(2.0f))) < 1e-6f, "softplus decay");
    CHECK(fabsf(k3_kda_decay_softplus(1.0f, 30.0f) - expf(-30.0f)) < 1e-12f, "softplus threshold 20");
    TEST_END();
}

static void test_attn_res(void)
{
    TEST_BEGIN("attn_res_mix_against_double_reference");
    enum { D = 96, N = 9 };
    float src[N][D], score[D], out[D], logits[N];
    const float *ptr[N];
    for (int trial = 0; trial < 50; trial++) {
        int n = 1 + trial % N;
        for (int i = 0; i < n; i++) {
            double mag = trial % 3 == 0 ? pow(10, (urand() - 0.5) * 6) : 1;   /* wildly different norms */
            for (int d = 0; d < D; d++) src[i][d] = (float)((urand() - 0.5) * mag);
            ptr[i] = src[i];
        }
        for (int d = 0; d < D; d++) score[d] = (float)((urand() - 0.5) * 0.5);
        k3_attn_res_mix(out, ptr, n, score, D, 1e-5f, logits);
        double s[N], mx = -1e300, sum = 0;
        for (int i = 0; i < n; i++) {
            double ss = 0, dot = 0;
            for (int d = 0; d < D; d++) ss += (double)src[i][d] * src[i][d];
            double r = 1 / sqrt(ss / D + 1e-5);
            for (int d = 0; d < D; d++) dot += src[i][d] * r * score[d];
            s[i] = dot;
            if (dot > mx) mx = dot;
        }
        for (int i = 0; i < n; i++) sum += exp(s[i] - mx);
        for (int d = 0; d < D; d++) {
            double want = 0, scale = 0;
            for (int i = 0; i < n; i++) {
                want += exp(s[i] - mx) / sum * src[i][d];
                scale += fabs(src[i][d]);
            }
            CHECK(fabs(out[d] - want) <= 1e-5 * scale + 1e-30, "trial %d d %d: %g want %g", trial, d, out[d], want);
        }
    }
    /* hand case: identical keys -> plain average of the raw values */
    for (int d = 0; d < D; d++) { src[0][d] = 1; src[1][d] = 3; score[d] = 0.25f; }
    ptr[0] = src[0];
    ptr[1] = src[1];
    k3_attn_res_mix(out, ptr, 2, score, D, 0, logits);
    CHECK(fabsf(out[0] - 2.0f) < 1e-6f && fabsf(logits[0] - 0.5f) < 1e-6f, "equal keys: %g (weights %g)", out[0], logits[0]);
    TEST_END();
}

static void test_mxfp4_vector(void)
{
    TEST_BEGIN("mxfp4_spec_test_vector_and_swapped_nibbles");
    uint8_t packed[16] = {0x01, 0x29, 0x93, 0xF4};
    uint8_t scale[1] = {127};
    k3_weight w = {.dtype = K3_DT_MXFP4, .rows = 1, .cols = 32, .data = packed, .mx_scale = scale};
    float out[32], outs[32];
    k3_mxfp4_decode_row(&w, 0, out);
    k3_mxfp4_decode_row_scalar(&w, 0, outs);
    const float want[8] = {0.5f, 0.0f, -0.5f, 1.0f, 1.5f, -0.5f, 2.0f, -6.0f};
    for (int i = 0; i < 8; i++) {
        CHECK(out[i] == want[i], "simd column %d: %g want %g", i, out[i], want[i]);
        CHECK(outs[i] == want[i], "scalar column %d: %g want %g", i, outs[i], want[i]);
    }
    for (int i = 8; i < 32; i++) CHECK(out[i] == 0.0f, "column %d not zero", i);
    /* a decoder that took the high nibble first would give these: must differ */
    const float swapped[4] = {0.0f, 0.5f, 1.0f, -0.5f};
    int same = 1;
    for (int i = 0; i < 4; i++) same &= out[i] == swapped[i];
    CHECK(!same, "decode matches the swapped-nibble order");
    /* E8M0 edges: 0 -> 2^-127, 254 -> 2^127, scale applies per group of 32 */
    CHECK(k3_e8m0_to_f32(0) == 0x1p-127f && k3_e8m0_to_f32(254) == 0x1p127f && k3_e8m0_to_f32(127) == 1.0f, "e8m0");
    uint8_t packed2[32] = {0x77}, scale2[2] = {130, 120};   /* 6.0 at column 0; 2^3 and 2^-7 */
    packed2[16] = 0x0F;                                      /* column 32: low nibble 15 = -6 */
    k3_weight w2 = {.dtype = K3_DT_MXFP4, .rows = 1, .cols = 64, .data = packed2, .mx_scale = scale2};
    float o2[64];
    k3_mxfp4_decode_row(&w2, 0, o2);
    CHECK(o2[0] == 48.0f && o2[1] == 48.0f && o2[32] == -6.0f / 128 && o2[33] == 0.0f, "group scales: %g %g %g %g",
          o2[0], o2[1], o2[32], o2[33]);
    int64_t bad = -1;
    uint8_t scales[3 * 4] = {127, 127, 127, 127, 127, 127, 255, 127, 1, 2, 3, 4};
    CHECK(k3_mxfp4_check(scales, 3, 128, &bad) == -1 && bad == 1, "scale 255 found in row 1 (got %lld)", (long long)bad);
    CHECK(k3_mxfp4_check(scales + 8, 1, 128, &bad) == 0, "no 255");
    TEST_END();
}

static void test_mxfp4_dot(void)
{
    TEST_BEGIN("mxfp4_simd_vs_scalar_and_matmul_bit_identical");
    const int64_t shapes[][2] = {{1, 32}, {3, 64}, {17, 96}, {64, 3584 / 4}, {70, 512}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t rows = shapes[k][0], cols = shapes[k][1];
        uint8_t *packed = malloc((size_t)(rows * cols / 2)), *scale = malloc((size_t)(rows * cols / 32));
        float *x = malloc((size_t)(cols * 4) * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
        float *ys = malloc((size_t)rows * sizeof(float)), *Y = malloc((size_t)(rows * 4) * sizeof(float));
        for (int64_t i = 0; i < rows * cols / 2; i++) packed[i] = (uint8_t)(urand() * 256);
        for (int64_t i = 0; i < rows * cols / 32; i++) scale[i] = (uint8_t)(110 + urand() * 30);
        for (int64_t i = 0; i < cols * 4; i++) x[i] = (float)((urand() - 0.5) * 4);
        k3_weight w = {.dtype = K3_DT_MXFP4, .rows = rows, .cols = cols, .data = packed, .mx_scale = scale};
        k3_matvec(y, &w, x);
        k3_kernels_force_scalar(1);
        k3_matvec(ys, &w, x);
        k3_kernels_force_scalar(0);
        float row[4096];
        for (int64_t r = 0; r < rows; r++) {
            /* scalar reference: decode with the scalar decoder, sum in double */
            k3_mxfp4_decode_row_scalar(&w, r, row);
            double ref = 0, mag = 0;
            for (int64_t c = 0; c < cols; c++) { ref += (double)row[c] * x[c]; mag += fabs((double)row[c] * x[c]); }
            CHECK(fabs(y[r] - ref) <= 1e-6 * mag + 1e-30, "[%lld x %lld] row %lld: %g want %g", (long long)rows,
                  (long long)cols, (long long)r, y[r], ref);
            CHECK(fabs(ys[r] - ref) <= 1e-6 * mag + 1e-30, "scalar row %lld: %g want %g", (long long)r, ys[r], ref);
        }
        k3_matmul(Y, &w, x, 4);
        for (int t = 0; t < 4; t++) {
            k3_matvec(y, &w, x + t * cols);
            CHECK(!memcmp(y, Y + (size_t)t * rows, (size_t)rows * sizeof(float)), "matmul token %d differs", t);
        }
        free(packed); free(scale); free(x); free(y); free(ys); free(Y);
    }
    TEST_END();
}

/* The MXFP4 order, written out lane by lane in plain C: the canonical order
 * of engine/kernels/matvec.c on the exact weights w = doubled E2M1 integer x
 * (scale / 2), i.e. lane c % 16 of 16 fma accumulators (A0 = lanes 0-7, A1 =
 * 8-15) takes column c in order; the row is (A0 + A1) summed lane i + i+4,
 * i + i+2, 0 + 1. Independent of every back end. */
static float mxfp4_canonical_row(const k3_weight *w, int64_t r, const float *x)
{
    static const float doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint8_t *packed = (const uint8_t *)w->data + (size_t)r * (w->cols / 2);
    const uint8_t *scale = w->mx_scale + (size_t)r * (w->cols / 32);
    float acc[16] = {0};
    for (int64_t c = 0; c < w->cols; c++) {
        uint8_t byte = packed[c / 2];
        float weight = doubled[(c & 1) ? byte >> 4 : byte & 0x0F] * (0.5f * k3_e8m0_to_f32(scale[c / 32]));
        acc[c % 16] = fmaf(weight, x[c], acc[c % 16]);
    }
    float v[8], s4[4], s2[2];
    for (int i = 0; i < 8; i++) v[i] = acc[i] + acc[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = v[i] + v[i + 4];
    for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}

/* Every back end's MXFP4 matvec (straight from the nibbles, 1 and 4 rows)
 * and decoded-row matmul (4x3 blocks, with leftover rows and tokens) give
 * the bits of mxfp4_canonical_row: the cross-machine identity of K3 logits. */
static void test_mxfp4_canonical(void)
{
    char name[96];
    snprintf(name, sizeof name, "mxfp4_canonical_order [%s]", k3_kernels_name());
    TEST_BEGIN(name);
    /* {rows, cols, tokens}: the last three are big enough for k3_matmul's
     * blocked path (>= 2^15 weights), with rows and tokens that leave partial
     * 4x3 blocks, two 1024-column segments, and a second 24-token block */
    const int64_t shapes[][3] = {{1, 32, 3}, {5, 96, 3}, {33, 512, 3}, {8, 1024, 3},
                                 {70, 1536, 26}, {13, 3072, 5}, {64, 2048, 7}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int64_t rows = shapes[k][0], cols = shapes[k][1];
        const int n_tokens = (int)shapes[k][2];
        uint8_t *packed = malloc((size_t)(rows * cols / 2)), *scale = malloc((size_t)(rows * cols / 32));
        float *x = malloc((size_t)(cols * n_tokens) * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
        float *Y = malloc((size_t)(rows * n_tokens) * sizeof(float));
        for (int64_t i = 0; i < rows * cols / 2; i++) packed[i] = (uint8_t)(urand() * 256);
        /* one shape with the smallest scales (2^-127..2^-108: subnormal weights) */
        for (int64_t i = 0; i < rows * cols / 32; i++) scale[i] = (uint8_t)((k == 1 ? 0 : 100) + urand() * 20);
        for (int64_t i = 0; i < cols * n_tokens; i++) x[i] = (float)((urand() - 0.5) * 4);
        k3_weight w = {.dtype = K3_DT_MXFP4, .rows = rows, .cols = cols, .data = packed, .mx_scale = scale};
        k3_matmul(Y, &w, x, n_tokens);
        for (int t = 0; t < n_tokens; t++) {
            k3_matvec(y, &w, x + t * cols);
            for (int64_t r = 0; r < rows; r++) {
                float want = mxfp4_canonical_row(&w, r, x + t * cols);
                CHECK(!memcmp(&y[r], &want, 4), "matvec %lldx%lld row %lld: %a vs canonical %a", (long long)rows,
                      (long long)cols, (long long)r, y[r], want);
                CHECK(!memcmp(&Y[t * rows + r], &want, 4), "matmul %lldx%lld row %lld token %d: %a vs canonical %a",
                      (long long)rows, (long long)cols, (long long)r, t, Y[t * rows + r], want);
            }
        }
        free(packed); free(scale); free(x); free(y); free(Y);
    }
    TEST_END();
}

/* Every scale byte a loader accepts (0-254: subnormal weights at the bottom,
 * products that overflow to inf at the top) gives the canonical bits: the
 * vector decoders' per-scale tables and multiplies agree with the plain C
 * statement of the order on every one of them, 1 and 4 rows at a time. */
static void test_mxfp4_every_scale(void)
{
    char name[96];
    snprintf(name, sizeof name, "mxfp4_matvec_every_scale_byte [%s]", k3_kernels_name());
    TEST_BEGIN(name);
    enum { ROWS = 9, COLS = 928 };          /* 9 x 29 groups = 261 scale bytes */
    static uint8_t packed[ROWS * COLS / 2], scale[ROWS * COLS / 32];
    static float x[COLS], y[ROWS];
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(urand() * 256);
    for (size_t i = 0; i < sizeof scale; i++) scale[i] = (uint8_t)(i % 255);
    for (int c = 0; c < COLS; c++) x[c] = (float)((urand() - 0.5) * 4);
    k3_weight w = {.dtype = K3_DT_MXFP4, .rows = ROWS, .cols = COLS, .data = packed, .mx_scale = scale};
    k3_matvec(y, &w, x);
    for (int64_t r = 0; r < ROWS; r++) {
        float want = mxfp4_canonical_row(&w, r, x);
        CHECK(!memcmp(&y[r], &want, 4), "row %lld (scales %d..%d): %a vs canonical %a", (long long)r,
              (int)scale[r * (COLS / 32)], (int)scale[r * (COLS / 32) + COLS / 32 - 1], y[r], want);
    }
    TEST_END();
}

/* The q8 path (--activations q8, mxfp4_q8.c) holds its own contract: the
 * vector matvec (4-row and 1-row kernels), the matmul (prompt) and 1 or 2
 * threads all give the bits of the plain C reference k3_mxfp4_q8_row_scalar,
 * on shapes with leftover rows, an all-zero activation group, a NaN-free
 * spread of magnitudes, and scales from subnormal to large. */
static void test_mxfp4_q8_contract(void)
{
    /* x86: the AVX2 kernel, and the AVX-VNNI one too where the CPU has it */
    const int vnni_paths = k3_mxfp4_q8_vnni(1) ? 2 : 1;
    char name[160];
    k3_mxfp4_q8_vnni(0);   /* the back end's name alone */
    snprintf(name, sizeof name, "mxfp4_q8_matvec_matmul_threads_equal_scalar_reference [%s%s]", k3_kernels_name(),
             vnni_paths == 2 ? ", with and without AVX-VNNI" : "");
    TEST_BEGIN(name);
    const int64_t shapes[][3] = {{1, 32, 2}, {7, 96, 3}, {70, 1024, 5}, {33, 3584, 4}, {9, 9216, 2}};
    k3_kernels_set_activations_q8(1);
    for (int path = 0; path < vnni_paths; path++)
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        k3_mxfp4_q8_vnni(path == vnni_paths - 1);   /* the CPU's own path last, and left on */
        CHECK(k3_mxfp4_q8_vnni(-1) == (vnni_paths == 2 && path == 1), "the AVX-VNNI switch did not take");
        int64_t rows = shapes[k][0], cols = shapes[k][1];
        int n_tokens = (int)shapes[k][2];
        uint8_t *packed = malloc((size_t)(rows * cols / 2)), *scale = malloc((size_t)(rows * cols / 32));
        float *x = malloc((size_t)(cols * n_tokens) * sizeof(float)), *y = malloc((size_t)rows * sizeof(float));
        float *y2 = malloc((size_t)rows * sizeof(float)), *Y = malloc((size_t)(rows * n_tokens) * sizeof(float));
        for (int64_t i = 0; i < rows * cols / 2; i++) packed[i] = (uint8_t)(urand() * 256);
        for (int64_t i = 0; i < rows * cols / 32; i++) scale[i] = (uint8_t)(k == 1 ? urand() * 40 : 100 + urand() * 40);
        for (int64_t i = 0; i < cols * n_tokens; i++) x[i] = (float)((urand() - 0.5) * pow(10, (urand() - 0.5) * 4));
        for (int c = 0; c < 32 && cols >= 64; c++) x[32 + c] = 0.0f;   /* an all-zero group */
        k3_weight w = {.dtype = K3_DT_MXFP4, .rows = rows, .cols = cols, .data = packed, .mx_scale = scale};
        k3_matmul(Y, &w, x, n_tokens);
        for (int t = 0; t < n_tokens; t++) {
            const float *xt = x + (int64_t)t * cols;
            omp_set_num_threads(1);
            k3_matvec(y, &w, xt);
            omp_set_num_threads(2);
            k3_matvec(y2, &w, xt);
            for (int64_t r = 0; r < rows; r++) {
                float want = k3_mxfp4_q8_row_scalar(&w, r, xt);
                CHECK(!memcmp(&y[r], &want, 4), "%lldx%lld row %lld token %d: matvec %a vs reference %a",
                      (long long)rows, (long long)cols, (long long)r, t, y[r], want);
                CHECK(!memcmp(&y2[r], &want, 4), "%lldx%lld row %lld: 2 threads %a vs reference %a",
                      (long long)rows, (long long)cols, (long long)r, y2[r], want);
                CHECK(!memcmp(&Y[(int64_t)t * rows + r], &want, 4), "%lldx%lld row %lld token %d: matmul %a vs %a",
                      (long long)rows, (long long)cols, (long long)r, t, Y[(int64_t)t * rows + r], want);
            }
        }
        k3_kernels_force_scalar(1);
        k3_matvec(y2, &w, x);
        k3_kernels_force_scalar(0);
        k3_matvec(y, &w, x);
        CHECK(!memcmp(y, y2, (size_t)rows * sizeof(float)), "%lldx%lld: scalar-forced q8 differs from vector q8",
              (long long)rows, (long long)cols);
        free(packed); free(scale); free(x); free(y); free(y2); free(Y);
    }
    k3_kernels_set_activations_q8(0);
    TEST_END();
}

/* The q8 result is the exact dot product of the weights with x rounded to
 * its int8 grid: each column moves x by at most half a step (d_g / 2), so
 * |q8 - exact| <= sum over columns of |w| d_g / 2 (plus fp32 rounding).
 * Also the quantizer itself: ties go to even, the largest |x| of a group
 * maps to +-127, an all-zero group to codes 0 and scale 0. */
static void test_mxfp4_q8_error_bound(void)
{
    TEST_BEGIN("mxfp4_q8_within_half_a_step_of_exact_and_quantizer_rules");
    enum { ROWS = 40, COLS = 1024 };
    static uint8_t packed[ROWS * COLS / 2], scale[ROWS * COLS / 32];
    static float x[COLS], y_exact[ROWS], y_q8[ROWS], row[COLS];
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(urand() * 256);
    for (size_t i = 0; i < sizeof scale; i++) scale[i] = (uint8_t)(118 + urand() * 12);
    for (int c = 0; c < COLS; c++) x[c] = (float)((urand() - 0.5) * pow(10, (urand() - 0.5) * 3));
    k3_weight w = {.dtype = K3_DT_MXFP4, .rows = ROWS, .cols = COLS, .data = packed, .mx_scale = scale};
    k3_matvec(y_exact, &w, x);
    k3_kernels_set_activations_q8(1);
    k3_matvec(y_q8, &w, x);
    k3_kernels_set_activations_q8(0);
    int8_t q[COLS];
    float d[COLS / 32];
    k3_mxfp4_q8_quantize(x, COLS, q, d, NULL);
    double worst_ratio = 0;
    for (int r = 0; r < ROWS; r++) {
        k3_mxfp4_decode_row_scalar(&w, r, row);
        double bound = 0, magnitude = 0;
        for (int c = 0; c < COLS; c++) {
            bound += fabs(row[c]) * d[c / 32] * 0.5;
            magnitude += fabs((double)row[c] * x[c]);
        }
        double err = fabs((double)y_q8[r] - y_exact[r]);
        CHECK(err <= bound * (1 + 1e-5) + 1e-6 * magnitude, "row %d: |q8 - exact| %g above the bound %g", r, err,
              bound);
        if (bound > 0 && err / bound > worst_ratio) worst_ratio = err / bound;
    }
    CHECK(worst_ratio > 0, "q8 equals exact on every row: quantization not applied");
    float group[64] = {0};
    group[0] = 127.0f; group[1] = -2.5f; group[2] = 3.5f; group[3] = -127.0f; group[5] = 0.5f;
    k3_mxfp4_q8_quantize(group, 64, q, d, NULL);
    /* positions: p < 16 is column 2p, p >= 16 column 2(p - 16) + 1 */
    CHECK(q[0] == 127 && q[16] == -2 && q[1] == 4 && q[17] == -127 && q[18] == 0, "codes %d %d %d %d %d "
          "(want 127 -2 4 -127 0: ties to even)", q[0], q[16], q[1], q[17], q[18]);
    CHECK(d[0] == 1.0f && d[1] == 0.0f && q[32] == 0 && q[63] == 0, "scales %g %g, zero group codes %d %d",
          d[0], d[1], q[32], q[63]);
    TEST_END();
}

/* k3_delta_rule_tokens (one sweep of the state per token, strips of columns
 * in registers) leaves the state and writes every output bit for bit as
 * k3_delta_rule_step token after token - the decode path and the old chunk
 * loop - for strided inputs, head sizes that use the 32-column strips, the
 * 8-column strips and the per-token fallback (Dv not a multiple of 8), and
 * a replay that keeps no outputs (o_stride 0). The scalar build of the
 * kernels (plain multiply and add) stays within rounding of it. */
static void test_delta_rule_tokens(void)
{
    TEST_BEGIN("kda_delta_rule_chunk_bit_identical_to_per_token_steps");
    static const int dims[][2] = {{8, 8}, {16, 40}, {128, 128}, {64, 96}, {12, 12}, {24, 20}};
    static const int token_counts[] = {1, 2, 5, 17};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t n = 0; n < sizeof token_counts / sizeof token_counts[0]; n++) {
            const int Dk = dims[d][0], Dv = dims[d][1], T = token_counts[n];
            const size_t stride = (size_t)(Dk > Dv ? Dk : Dv) + 3, o_stride = (size_t)Dv + 5;
            const size_t ns = (size_t)Dk * Dv;
            float *S0 = malloc(ns * sizeof(float)), *S_ref = malloc(ns * sizeof(float));
            float *S_new = malloc(ns * sizeof(float)), *S_scalar = malloc(ns * sizeof(float));
            float *q = malloc(T * stride * sizeof(float)), *k = malloc(T * stride * sizeof(float));
            float *v = malloc(T * stride * sizeof(float)), *alpha = malloc(T * stride * sizeof(float));
            float *beta = malloc((size_t)T * 3 * sizeof(float));
            float *o_ref = calloc(T * o_stride, sizeof(float)), *o_new = calloc(T * o_stride, sizeof(float));
            float *o_scalar = calloc(T * o_stride, sizeof(float)), *u = malloc(2 * (size_t)Dv * sizeof(float));
            float o_last[128];
            for (size_t i = 0; i < ns; i++) S0[i] = (float)(urand() - 0.5);
            for (size_t i = 0; i < T * stride; i++) {
                q[i] = (float)(urand() - 0.5) * 0.3f;
                k[i] = (float)(urand() - 0.5) * 0.3f;
                v[i] = (float)(urand() - 0.5) * 2.0f;
                alpha[i] = (float)(0.5 + 0.5 * urand());
            }
            for (int t = 0; t < 3 * T; t++) beta[t] = (float)urand();
            memcpy(S_ref, S0, ns * sizeof(float));
            for (int t = 0; t < T; t++)
                k3_delta_rule_step(S_ref, q + t * stride, k + t * stride, v + t * stride, alpha + t * stride,
                                   beta[3 * t], o_ref + t * o_stride, u, Dk, Dv);
            memcpy(S_new, S0, ns * sizeof(float));
            k3_delta_tokens in = {.q = q, .k = k, .v = v, .alpha = alpha, .stride = stride, .beta = beta, .beta_stride = 3, .o = o_new, .o_stride = o_stride};
            k3_delta_rule_tokens(S_new, &in, T, Dk, Dv, u);
            CHECK(!memcmp(S_new, S_ref, ns * sizeof(float)), "Dk %d Dv %d T %d: state differs", Dk, Dv, T);
            CHECK(!memcmp(o_new, o_ref, T * o_stride * sizeof(float)), "Dk %d Dv %d T %d: outputs differ", Dk, Dv, T);
            if (Dv <= 128) {                      /* the replay's form: one output buffer */
                memcpy(S_new, S0, ns * sizeof(float));
                k3_delta_tokens replay = {.q = q, .k = k, .v = v, .alpha = alpha, .stride = stride, .beta = beta, .beta_stride = 3, .o = o_last, .o_stride = 0};
                k3_delta_rule_tokens(S_new, &replay, T, Dk, Dv, u);
                CHECK(!memcmp(S_new, S_ref, ns * sizeof(float)), "Dk %d Dv %d T %d: replay state differs", Dk, Dv, T);
                CHECK(!memcmp(o_last, o_ref + (T - 1) * o_stride, (size_t)Dv * sizeof(float)),
                      "Dk %d Dv %d T %d: replay's last output differs", Dk, Dv, T);
            }
            memcpy(S_scalar, S0, ns * sizeof(float));
            k3_kernels_force_scalar(1);
            k3_delta_tokens scalar_in = {.q = q, .k = k, .v = v, .alpha = alpha, .stride = stride, .beta = beta, .beta_stride = 3, .o = o_scalar, .o_stride = o_stride};
            k3_delta_rule_tokens(S_scalar, &scalar_in, T, Dk, Dv, u);
            k3_kernels_force_scalar(0);
            for (size_t i = 0; i < ns; i++)
                CHECK(fabsf(S_scalar[i] - S_ref[i]) <= 1e-4f * (1.0f + fabsf(S_ref[i])), "Dk %d Dv %d T %d: scalar state [%zu] %g vs %g",
                      Dk, Dv, T, i, S_scalar[i], S_ref[i]);
            for (size_t i = 0; i < T * o_stride; i++)
                CHECK(fabsf(o_scalar[i] - o_ref[i]) <= 1e-4f * (1.0f + fabsf(o_ref[i])), "Dk %d Dv %d T %d: scalar output [%zu] %g vs %g",
                      Dk, Dv, T, i, o_scalar[i], o_ref[i]);
            free(S0); free(S_ref); free(S_new); free(S_scalar); free(q); free(k); free(v); free(alpha); free(beta);
            free(o_ref); free(o_new); free(o_scalar); free(u);
        }
    TEST_END();
}

int main(void)
{
    test_situ();
    test_situ_exp_tanh();
    test_safe_gate();
    test_attn_res();
    test_mxfp4_vector();
    test_mxfp4_dot();
    test_mxfp4_canonical();
    test_mxfp4_every_scale();
    test_mxfp4_q8_contract();
    test_mxfp4_q8_error_bound();
    test_delta_rule_tokens();
    TEST_EXIT();
}
