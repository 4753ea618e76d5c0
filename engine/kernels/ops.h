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

/* SiTU-GLU (docs/MODEL.md, "Latent MoE and SiTU"): [b tanh(g/b) sigmoid(g)] * [bl tanh(u/bl)];
 * the sigmoid takes the uncapped gate; |result| <= b * bl. */
static inline float k3_situ(float g, float u, float beta, float linear_beta)
{
    return beta * (float)tanh((double)(g / beta)) * k3_sigmoid(g) *
           (linear_beta * (float)tanh((double)(u / linear_beta)));
}

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
