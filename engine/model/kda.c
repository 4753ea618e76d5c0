/* kda.c - Kimi Delta Attention for a chunk of tokens (docs/MODEL.md, "KDA").
 *
 * Projections run over the whole chunk (each weight read once); the short
 * convolution and the delta-rule recurrence then walk the tokens in order,
 * so a chunk gives exactly the same numbers as feeding tokens one by one.
 * The two model generations differ only in the decay function (softplus vs
 * K3's lower-bounded sigmoid) and the output gate (low rank vs full rank).
 * State S[h] is Dk x Dv (key-major, as FLA), fp32. */
#include <string.h>
#include "forward.h"
#include "ops.h"
#include "delta_rule.h"

/* The conv history keeps the last W-1 raw projections, oldest first: drop
 * the oldest, append x (one place, so a draft replay moves the same bytes). */
static void conv_history_push(float *hist, const float *x, int P, int W)
{
    if (W > 1) {
        memmove(hist, hist + P, (size_t)(W - 2) * P * sizeof(float));
        memcpy(hist + (size_t)(W - 2) * P, x, (size_t)P * sizeof(float));
    }
}

/* Causal depthwise conv over the raw projections + SiLU, updating the
 * history (the last W-1 raw projections, oldest first). */
static void short_conv(float *hist, const float *taps, const float *raw, float *out, int T, int P,
                       int W)
{
    for (int t = 0; t < T; t++) {
        const float *x = raw + (size_t)t * P;
        float *y = out + (size_t)t * P;
        for (int c = 0; c < P; c++) {
            const float *w = taps + (size_t)c * W;
            float acc = 0.0f;
            for (int j = 0; j < W - 1; j++) acc += w[j] * hist[(size_t)j * P + c];
            acc += w[W - 1] * x[c];
            y[c] = k3_silu(acc);
        }
        conv_history_push(hist, x, P, W);
    }
}

void k3_kda_block(k3_session *s, int layer, const k3_layer_weights *lw, int T, int keep_state)
{
    const k3_config *c = &s->m->cfg;
    const k3_kda_weights *w = &lw->kda;
    k3_scratch *sc = &s->sc;
    const int H = c->kda_heads, Dk = c->kda_head_dim, Dv = c->kda_head_dim;
    const int P = H * Dk, W = c->conv_kernel;
    const int slot = s->m->layer_slot[layer];
    float *conv = s->kda_conv + (size_t)slot * 3 * (W - 1) * P;
    float *S_all = s->kda_state + (size_t)slot * H * Dk * Dv;

    const k3_weight *proj_w[3] = {&w->q, &w->k, &w->v};
    /* a draft pass keeps each token's recurrence inputs (speculate.c) */
    k3_draft_state *draft = s->draft && s->draft->capturing ? s->draft : NULL;
    const size_t dstride = draft ? draft->kda_token_floats : 0;
    float *dkeep = draft ? draft->kda_inputs + (size_t)slot * draft->max_tokens * dstride : NULL;
    /* every projection of the normalised input in one group (one parallel
     * region a decode step); with the full-rank output gate the forget
     * gate's second factor runs per head inside the head loop (decode) */
    const int forget_in_heads = c->kda_full_rank_gate && T == 1;
    k3_matvec_job jobs[6];
    int n_jobs = 0;
    for (int i = 0; i < 3; i++) jobs[n_jobs++] = (k3_matvec_job){sc->proj[i], proj_w[i], sc->xn};
    jobs[n_jobs++] = (k3_matvec_job){sc->gate_low, &w->f_a, sc->xn};
    jobs[n_jobs++] = (k3_matvec_job){sc->beta, &w->b, sc->xn};
    if (c->kda_full_rank_gate) jobs[n_jobs++] = (k3_matvec_job){sc->out_gate, &w->g_full, sc->xn};
    k3_matmul_group(jobs, n_jobs, T);
    for (int i = 0; i < 3; i++) {
        if (draft)
            for (int t = 0; t < T; t++)
                memcpy(dkeep + t * dstride + (size_t)(4 + i) * P, sc->proj[i] + (size_t)t * P, (size_t)P * sizeof(float));
        short_conv(conv + (size_t)i * (W - 1) * P, w->conv[i], sc->proj[i], sc->qkv[i], T, P, W);
    }
    if (!forget_in_heads) k3_matmul(sc->forget, &w->f_b, sc->gate_low, T);
    if (!c->kda_full_rank_gate) {         /* gate_low is free again once f_b has read it */
        k3_matmul(sc->gate_low, &w->g_a, sc->xn, T);
        k3_matmul(sc->out_gate, &w->g_b, sc->gate_low, T);
    }

    const float q_scale = 1.0f / sqrtf((float)Dk);
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) \
        if ((int64_t)T * H * Dk * Dv * 4 >= K3_PARALLEL_MIN_MACS)
    for (int h = 0; h < H; h++) {
        float u[2 * 1024];                        /* head dims are bounded at load (<= 1024) */
        float *S = S_all + (size_t)h * Dk * Dv;
        if (keep_state)   /* by the thread that updates it next: the copy leaves S warm in its cache */
            memcpy(s->kda_state_saved + ((size_t)slot * H + h) * Dk * Dv, S, (size_t)Dk * Dv * sizeof(float));
        const float A = w->decay_rate[h];
        if (forget_in_heads)                      /* this head's rows of the forget gate */
            k3_matvec_rows(sc->forget, &w->f_b, sc->gate_low, (int64_t)h * Dk, (int64_t)(h + 1) * Dk);
        /* every token's recurrence inputs first (in place: q, k normalised,
         * the forget projection becomes the decay, beta its sigmoid), then
         * the recurrence over the chunk in one call */
        for (int t = 0; t < T; t++) {
            float *q = sc->qkv[0] + (size_t)t * P + (size_t)h * Dk;
            float *k = sc->qkv[1] + (size_t)t * P + (size_t)h * Dk;
            const float *v = sc->qkv[2] + (size_t)t * P + (size_t)h * Dv;
            k3_l2norm(q, Dk, 1e-6f);
            for (int i = 0; i < Dk; i++) q[i] *= q_scale;
            k3_l2norm(k, Dk, 1e-6f);
            float *alpha = sc->forget + (size_t)t * P + (size_t)h * Dk;
            const float *dt = w->dt_bias + (size_t)h * Dk;
            if (c->kda_lower_bound_gate)          /* K3 "safe gate": decay in (lb, 0) */
                for (int i = 0; i < Dk; i++) alpha[i] = k3_kda_decay_safe(c->kda_gate_lower_bound, A, alpha[i] + dt[i]);
            else                                  /* Kimi Linear: -exp(A_log) * softplus */
                for (int i = 0; i < Dk; i++) alpha[i] = k3_kda_decay_softplus(A, alpha[i] + dt[i]);
            float *beta = &sc->beta[(size_t)t * H + h];
            *beta = k3_sigmoid(*beta);
            if (draft) {
                float *keep = dkeep + t * dstride;
                memcpy(keep + (size_t)h * Dk, q, (size_t)Dk * sizeof(float));
                memcpy(keep + P + (size_t)h * Dk, k, (size_t)Dk * sizeof(float));
                memcpy(keep + 2 * (size_t)P + (size_t)h * Dv, v, (size_t)Dv * sizeof(float));
                memcpy(keep + 3 * (size_t)P + (size_t)h * Dk, alpha, (size_t)Dk * sizeof(float));
                keep[7 * (size_t)P + h] = *beta;
            }
        }
        const k3_delta_tokens in = {sc->qkv[0] + (size_t)h * Dk, sc->qkv[1] + (size_t)h * Dk,
                                    sc->qkv[2] + (size_t)h * Dv, sc->forget + (size_t)h * Dk, (size_t)P,
                                    sc->beta + h, (size_t)H, sc->attn + (size_t)h * Dv, (size_t)P};
        k3_delta_rule_tokens(S, &in, T, Dk, Dv, u);
        for (int t = 0; t < T; t++) {
            /* gated RMSNorm: per head, eps on the mean of squares, sigmoid gate */
            float *o = sc->attn + (size_t)t * P + (size_t)h * Dv;
            const float *g = sc->out_gate + (size_t)t * P + (size_t)h * Dv;
            double ss = 0.0;
            for (int j = 0; j < Dv; j++) ss += (double)o[j] * o[j];
            const float r = (float)(1.0 / sqrt(ss / Dv + c->rms_eps));
            for (int j = 0; j < Dv; j++) o[j] = o[j] * r * w->o_norm[j] * k3_sigmoid(g[j]);
        }
    }
    k3_matmul(sc->out, &w->o, sc->attn, T);
}

/* See forward.h: q, k, v, alpha, raw q, k, v (P floats each), beta (H). */
size_t k3_kda_draft_floats(const k3_config *c)
{
    return (size_t)7 * c->kda_heads * c->kda_head_dim + (size_t)c->kda_heads;
}

/* Taking back a draft pass's rejected tokens: the KDA state cannot be
 * truncated, so start again from the state before the pass and run the
 * recurrence of the kept tokens with the very inputs the pass computed
 * (the same delta_rule_step on the same floats, so the same bits), and
 * push their raw projections through the conv history. No weight is read. */
void k3_kda_replay(k3_session *s, int slot, int n_keep)
{
    const k3_config *c = &s->m->cfg;
    const int H = c->kda_heads, Dk = c->kda_head_dim, Dv = c->kda_head_dim;
    const int P = H * Dk, W = c->conv_kernel;
    const size_t nc = (size_t)3 * (W - 1) * P, ns = (size_t)H * Dk * Dv;
    float *conv = s->kda_conv + (size_t)slot * nc;
    float *S_all = s->kda_state + (size_t)slot * ns;
    memcpy(conv, s->kda_conv_saved + (size_t)slot * nc, nc * sizeof(float));
    memcpy(S_all, s->kda_state_saved + (size_t)slot * ns, ns * sizeof(float));
    const k3_draft_state *d = s->draft;
    const size_t stride = d->kda_token_floats;
    const float *kept = d->kda_inputs + (size_t)slot * d->max_tokens * stride;
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < n_keep; t++)
            conv_history_push(conv + (size_t)i * (W - 1) * P, kept + t * stride + (size_t)(4 + i) * P, P, W);
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) \
        if ((int64_t)n_keep * H * Dk * Dv * 4 >= K3_PARALLEL_MIN_MACS)
    for (int h = 0; h < H; h++) {
        float o[1024], u[2 * 1024];               /* head dims are bounded at load (<= 1024) */
        const k3_delta_tokens in = {kept + (size_t)h * Dk, kept + P + (size_t)h * Dk,
                                    kept + 2 * (size_t)P + (size_t)h * Dv, kept + 3 * (size_t)P + (size_t)h * Dk,
                                    stride, kept + 7 * (size_t)P + h, stride, o, 0};
        k3_delta_rule_tokens(S_all + (size_t)h * Dk * Dv, &in, n_keep, Dk, Dv, u);
    }
}
