/* delta_rule.h - the KDA delta-rule recurrence of one head (docs/MODEL.md,
 * "KDA"): per token, decay the state's rows, predict with the decayed state,
 * write the rank-1 correction, read the output with the new state.
 *
 * State S is Dk x Dv (key-major), fp32. Every element of S, u and o follows
 * one fixed sequence of IEEE operations (k3_delta_rule_step states it), so a
 * prompt walked token by token, a chunk, a draft replay and the vector sweep
 * of k3_delta_rule_tokens give the same bits. */
#ifndef K3_DELTA_RULE_H
#define K3_DELTA_RULE_H

#include <stddef.h>

/* Where token t's inputs and output live: q, k, alpha (Dk floats), v (Dv)
 * at + t * stride; beta (already through the sigmoid) at beta[t *
 * beta_stride]; the output o (Dv) at + t * o_stride (0: every token writes
 * the same buffer, for a replay that only needs the state). */
typedef struct {
    const float *q, *k, *v, *alpha;
    size_t stride;
    const float *beta;
    size_t beta_stride;
    float *o;
    size_t o_stride;
} k3_delta_tokens;

/* The reference of one token, the order every path keeps: u = 0; for each
 * row i in order: S_i = S_i * alpha_i, u = fma(k_i, S_i, u); then
 * u = beta * (v - u); o = 0; for each row i in order: S_i = fma(k_i, u, S_i),
 * o = fma(q_i, S_i, o) (k3_axpy_f32, so the scalar build of the kernels
 * applies here too). u is Dv floats of scratch. */
void k3_delta_rule_step(float *S, const float *q, const float *k, const float *v, const float *alpha, float beta,
                        float *o, float *u, int Dk, int Dv);

/* n_tokens tokens in order, equal bit for bit to k3_delta_rule_step on each.
 * The vector path (Dv a multiple of 8, SIMD allowed) walks S once per token
 * instead of twice: the rank-1 write and read of token t and the decay and
 * prediction of token t + 1 touch each element of S in the same sweep, a
 * strip of columns at a time with u and o in registers. u is 2 * Dv floats
 * of scratch. */
void k3_delta_rule_tokens(float *S, const k3_delta_tokens *in, int n_tokens, int Dk, int Dv, float *u);

#endif
