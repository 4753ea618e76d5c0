/* delta_rule.c - see delta_rule.h. The vector sweep is written once on the
 * 8-lane vocabulary of kernels_arch.h; per element it performs exactly the
 * multiplies and fmas of k3_delta_rule_step (k3_axpy_f32 is one fma per
 * element on every back end), in the same row order, so only the memory
 * traffic changes: a 128 x 128 state is 64 KiB, twice the L1, and the
 * per-token reference streams it from L2 twice per token. */
#include "delta_rule.h"
#include "kernels_arch.h"

void k3_delta_rule_step(float *S, const float *q, const float *k, const float *v, const float *alpha, float beta,
                        float *o, float *u, int Dk, int Dv)
{
    for (int j = 0; j < Dv; j++) u[j] = 0.0f;
    for (int i = 0; i < Dk; i++) {              /* decay rows, then predict with the decayed state */
        float *row = S + (size_t)i * Dv;
        for (int j = 0; j < Dv; j++) row[j] *= alpha[i];
        k3_axpy_f32(u, k[i], row, Dv);
    }
    for (int j = 0; j < Dv; j++) u[j] = beta * (v[j] - u[j]);
    for (int j = 0; j < Dv; j++) o[j] = 0.0f;
    for (int i = 0; i < Dk; i++) {              /* rank-1 write, then read with the new state */
        float *row = S + (size_t)i * Dv;
        k3_axpy_f32(row, k[i], u, Dv);
        k3_axpy_f32(o, q[i], row, Dv);
    }
}

/* Columns [j0, j0 + 8 * N_VEC) of S, all rows, in one pass. With has_cur,
 * token "cur"'s second half: S_i = fma(k_i, u, S_i), o = fma(q_i, S_i, o)
 * (u_cur is its corrected u). With has_next, token "next"'s first half on
 * the result: S_i = S_i * alpha_i, u_next = fma(k_i, S_i, u_next). The
 * row order is the reference's for both, each element's operations too. */
K3_INLINE void sweep_columns(int n_vec, int has_cur, int has_next, float *S, int Dk, int Dv, int j0,
                             const float *q_cur, const float *k_cur, const float *u_cur, float *o_cur,
                             const float *alpha_next, const float *k_next, float *u_next)
{
    v8f u[4], o[4], un[4];
#pragma GCC unroll 4
    for (int c = 0; c < n_vec; c++) {
        u[c] = has_cur ? v8_loadu(u_cur + j0 + 8 * c) : v8_zero();
        o[c] = un[c] = v8_zero();
    }
    for (int i = 0; i < Dk; i++) {
        float *row = S + (size_t)i * Dv + j0;
        const v8f kc = v8_set1(has_cur ? k_cur[i] : 0.0f), qc = v8_set1(has_cur ? q_cur[i] : 0.0f);
        const v8f an = v8_set1(has_next ? alpha_next[i] : 0.0f), kn = v8_set1(has_next ? k_next[i] : 0.0f);
#pragma GCC unroll 4
        for (int c = 0; c < n_vec; c++) {
            v8f s = v8_loadu(row + 8 * c);
            if (has_cur) {
                s = v8_fma(kc, u[c], s);
                o[c] = v8_fma(qc, s, o[c]);
            }
            if (has_next) {
                s = v8_mul(s, an);
                un[c] = v8_fma(kn, s, un[c]);
            }
            v8_storeu(row + 8 * c, s);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < n_vec; c++) {
        if (has_cur) v8_storeu(o_cur + j0 + 8 * c, o[c]);
        if (has_next) v8_storeu(u_next + j0 + 8 * c, un[c]);
    }
}

/* One sweep over every column strip (32 columns, then 8 at a time). */
K3_INLINE void sweep(int has_cur, int has_next, float *S, int Dk, int Dv, const float *q_cur, const float *k_cur,
                     const float *u_cur, float *o_cur, const float *alpha_next, const float *k_next, float *u_next)
{
    int j0 = 0;
    for (; j0 + 32 <= Dv; j0 += 32)
        sweep_columns(4, has_cur, has_next, S, Dk, Dv, j0, q_cur, k_cur, u_cur, o_cur, alpha_next, k_next, u_next);
    for (; j0 < Dv; j0 += 8)
        sweep_columns(1, has_cur, has_next, S, Dk, Dv, j0, q_cur, k_cur, u_cur, o_cur, alpha_next, k_next, u_next);
}

/* The three kinds of sweep, each compiled with its flags constant. */
static void sweep_first(float *S, int Dk, int Dv, const float *alpha, const float *k, float *u_next)
{
    sweep(0, 1, S, Dk, Dv, NULL, NULL, NULL, NULL, alpha, k, u_next);
}

static void sweep_between(float *S, int Dk, int Dv, const float *q, const float *k, const float *u, float *o,
                          const float *alpha_next, const float *k_next, float *u_next)
{
    sweep(1, 1, S, Dk, Dv, q, k, u, o, alpha_next, k_next, u_next);
}

static void sweep_last(float *S, int Dk, int Dv, const float *q, const float *k, const float *u, float *o)
{
    sweep(1, 0, S, Dk, Dv, q, k, u, o, NULL, NULL, NULL);
}

/* u = beta * (v - u), the reference's correction (a subtract and a multiply). */
static void correct(float *u, const float *v, float beta, int Dv)
{
    for (int j = 0; j < Dv; j++) u[j] = beta * (v[j] - u[j]);
}

void k3_delta_rule_tokens(float *S, const k3_delta_tokens *in, int n_tokens, int Dk, int Dv, float *u)
{
    if (n_tokens <= 0)
        return;
    if (k3_kernels_scalar_forced() || Dv % 8 != 0) {
        for (int t = 0; t < n_tokens; t++)
            k3_delta_rule_step(S, in->q + t * in->stride, in->k + t * in->stride, in->v + t * in->stride,
                               in->alpha + t * in->stride, in->beta[t * in->beta_stride], in->o + t * in->o_stride,
                               u, Dk, Dv);
        return;
    }
    float *u_cur = u, *u_next = u + Dv;
    sweep_first(S, Dk, Dv, in->alpha, in->k, u_cur);
    correct(u_cur, in->v, in->beta[0], Dv);
    for (int t = 0; t < n_tokens; t++) {
        const float *q = in->q + t * in->stride, *k = in->k + t * in->stride;
        float *o = in->o + t * in->o_stride;
        if (t + 1 < n_tokens) {
            const size_t next = (size_t)(t + 1) * in->stride;
            sweep_between(S, Dk, Dv, q, k, u_cur, o, in->alpha + next, in->k + next, u_next);
            correct(u_next, in->v + next, in->beta[(t + 1) * in->beta_stride], Dv);
            float *swap = u_cur;
            u_cur = u_next;
            u_next = swap;
        } else {
            sweep_last(S, Dk, Dv, q, k, u_cur, o);
        }
    }
}
