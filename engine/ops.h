/* ops.h - the small element-wise and normalisation operations of the
 * forward pass, all in fp32 (kimi_linear_spec.md §3.1, §4.1, DESIGN §4). */
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
/* PyTorch softplus(beta=1, threshold=20). */
static inline float k3_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Row r of a weight matrix as fp32 (applies fp8 block scales). */
void k3_weight_row_f32(const k3_weight *w, int64_t r, float *out);

#endif
