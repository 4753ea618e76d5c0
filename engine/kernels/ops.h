/* ops.h - the small element-wise and normalisation operations of the
 * forward pass, all in fp32 (docs/MODEL.md, "KDA", docs/ARCHITECTURE.md, "Numerics"). */
#ifndef K3_OPS_H
#define K3_OPS_H

#include <math.h>
#include <stdint.h>
#include "kernels.h"

/* y = w * x / sqrt(mean(x^2) + eps). y may alias x. */
void k3_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* x /= sqrt(sum(x^2) + eps)  (FLA's l2norm, eps inside the root) */
void k3_l2norm(float *x, int n, float eps);

/* In-place softmax with max subtraction. */
void k3_softmax(float *x, int n);

static inline float k3_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float k3_silu(float x) { return x / (1.0f + expf(-x)); }
/* PyTorch softplus(beta=1, threshold=20). log1p and tanh (below) are
 * evaluated in double and rounded once to float: glibc's float log1pf and
 * tanhf are different code on x86-64 and aarch64 and disagree in the last
 * bit, while a double result within an ulp of exact rounds to the same
 * float on every machine (the portable builds' identical logits, issue 15). */
static inline float k3_softplus(float x) { return x > 20.0f ? x : (float)log1p((double)expf(x)); }

/* e^x in fp32 for the SiTU-GLU loop, from IEEE operations alone (+, *, /,
 * fmaf, compares and an exponent written into the bits) so that the loop
 * vectorises (#pragma omp simd) and every machine and vector width gives
 * the same bits: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2
 * (ln2 in two parts, Cody-Waite), e^r by its Taylor series to r^7 (the first
 * term left out is below 5e-9 relative), times 2^n. n is read from the bits
 * of the rounding sum (1.5 * 2^23 + n holds n in its low mantissa bits), so
 * no float is converted to int. Within 1 ulp of e^x for x in [-87, 88]
 * (tests/test_k3_ops.c sweeps it); x is clamped there, which keeps 2^n a
 * normal float; NaN stays NaN. */
static inline float k3_exp_f32(float x)
{
    float above = x < -87.0f ? -87.0f : x; /* NaN passes both */
    float clamped = above > 88.0f ? 88.0f : above;
    union { float f; uint32_t u; } rounded = {.f = fmaf(clamped, 1.44269504088896341f, 12582912.0f)};
    float n = rounded.f - 12582912.0f;
    float r = fmaf(n, -0.693145751953125f, clamped);   /* ln2's upper 14 bits: n * them is exact */
    r = fmaf(n, -1.42860682030941723e-6f, r);           /* and the rest */
    float p = fmaf(r, 1.0f / 5040.0f, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    union { uint32_t u; float f; } two_n = {.u = (rounded.u - 0x4B400000u + 127u) << 23};
    return p * two_n.f;
}

/* tanh in fp32, in the same operations as k3_exp_f32 and for the same
 * reasons: for |y| < 0.55, y + y^3 Q(y^2) with Q a degree-4 fit of
 * (tanh(y) - y) / y^3 (relative error of the fit below 1e-9: what is left is
 * fp32 rounding); above, 1 - 2 / (e^(2|y|) + 1) with the sign of y (|y| is
 * clamped to 10, where tanh is 1 in fp32). Within 2 ulp of tanh. */
static inline float k3_tanh_f32(float y)
{
    float a = fabsf(y), z = y * y;
    float q = fmaf(z, -0.006282472983002663f, 0.021077757701277733f);
    q = fmaf(q, z, -0.05385385826230049f);
    q = fmaf(q, z, 0.13332602381706238f);
    q = fmaf(q, z, -0.33333319425582886f);
    float small = fmaf(z * y, q, y);
    float e = k3_exp_f32(2.0f * (a < 10.0f ? a : 10.0f));
    float big = 1.0f - 2.0f / (e + 1.0f);
    return copysignf(a >= 0.55f ? big : small, y); /* NaN takes `small` (NaN); -0 stays -0 */
}

/* SiTU-GLU (docs/MODEL.md, "Latent MoE and SiTU"): [b tanh(g/b) sigmoid(g)] * [bl tanh(u/bl)];
 * the sigmoid takes the uncapped gate; |result| <= b * bl. One element;
 * k3_situ_glu runs it over the MLP's arrays (the same bits, vectorised). */
static inline float k3_situ(float g, float u, float beta, float linear_beta)
{
    float sigmoid = 1.0f / (1.0f + k3_exp_f32(-g));   /* not k3_sigmoid: libm expf does not vectorise */
    return beta * k3_tanh_f32(g / beta) * sigmoid * (linear_beta * k3_tanh_f32(u / linear_beta));
}

/* gate[i] = k3_situ(gate[i], up[i], beta, linear_beta) for i < n. */
void k3_situ_glu(float *gate, const float *up, int64_t n, float beta, float linear_beta);

/* KDA per-channel decay multiplier alpha = exp(g):
 * Kimi Linear: g = -exp(A_log) * softplus(z);
 * Kimi K3 "safe gate": g = lb * sigmoid(exp(A_log) * z), in (lb, 0).
 * A = exp(A_log[head]), z = f + dt_bias. */
static inline float k3_kda_decay_softplus(float A, float z) { return expf(-A * k3_softplus(z)); }
static inline float k3_kda_decay_safe(float lower_bound, float A, float z)
{
    return expf(lower_bound * k3_sigmoid(A * z));
}

/* Attention Residuals mix (docs/MODEL.md, "Attention Residuals"): out = sum_i softmax_i(s) v_i
 * with s_i = sum_d (v_i[d] / sqrt(mean(v_i^2) + eps)) * score[d]: keys
 * RMS-normalised, values raw. sources[i] are D-vectors; logits has n floats. */
void k3_attn_res_mix(float *out, const float *const *sources, int n, const float *score, int D, float eps,
                     float *logits);

/* Row r of a weight matrix as fp32 (applies fp8 block scales). */
void k3_weight_row_f32(const k3_weight *w, int64_t r, float *out);

#endif
