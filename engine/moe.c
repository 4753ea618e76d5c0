/* moe.c - the feed-forward block: a dense SwiGLU MLP on the first layers,
 * Mixture-of-Experts elsewhere (kimi_linear_spec.md §6).
 *
 * Router: sigmoid scores s in fp32; experts chosen by the top-k of
 * s + e_score_correction_bias (lowest id wins a tie); mixing weights from
 * the UNBIASED s, renormalised (+1e-20) and scaled by routed_scaling_factor
 * (DESIGN §4). For a chunk, each distinct expert is fetched once and run on
 * all the chunk's tokens routed to it; every token still sums its experts in
 * ascending expert id, so a chunk equals token-by-token exactly. */
#include <string.h>
#include "forward.h"
#include "ops.h"

/* out[t] = down(silu(gate x_t) * up x_t) for t < T; x, out are [T][D]. */
static void swiglu_mlp(k3_scratch *sc, const k3_mlp_weights *w, const float *x, float *out, int T)
{
    const int64_t inter = w->gate.rows;
    k3_matmul(sc->inter_gate, &w->gate, x, T);
    k3_matmul(sc->inter_up, &w->up, x, T);
    for (int64_t i = 0; i < (int64_t)T * inter; i++)
        sc->inter_gate[i] = k3_silu(sc->inter_gate[i]) * sc->inter_up[i];
    k3_matmul(out, &w->down, sc->inter_gate, T);
}

/* Choose top_k experts for one token; writes ids (ascending) and weights. */
static void route_token(const k3_config *c, const float *logits, const float *bias, int *ids,
                        float *weights)
{
    int chosen = 0;
    /* selection by score + bias, ties to the lower id: repeated max scan (k is small) */
    for (int k = 0; k < c->top_k; k++) {
        int best = -1;
        float best_score = 0.0f;
        for (int e = 0; e < c->n_experts; e++) {
            int taken = 0;
            for (int j = 0; j < chosen; j++) taken |= ids[j] == e;
            if (taken) continue;
            float sc = k3_sigmoid(logits[e]) + bias[e];
            if (best < 0 || sc > best_score) { best = e; best_score = sc; }
        }
        ids[chosen++] = best;
    }
    /* ascending ids: a fixed summation order independent of chunking */
    for (int i = 1; i < chosen; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) { int t = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = t; }
    double sum = 0.0;
    for (int k = 0; k < chosen; k++) { weights[k] = k3_sigmoid(logits[ids[k]]); sum += weights[k]; }
    for (int k = 0; k < chosen; k++) {
        float wk = weights[k];
        if (c->moe_renormalize) wk = (float)(wk / (sum + 1e-20));
        weights[k] = wk * c->routed_scaling;
    }
}

int k3_ffn_block(k3_session *s, int layer, const k3_layer_weights *lw, int T, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, K = c->top_k;
    if (!c->is_moe[layer]) {
        swiglu_mlp(sc, &lw->dense, sc->xn, sc->out, T);
        return 0;
    }
    k3_matmul(sc->router, &lw->router, sc->xn, T);
    for (int t = 0; t < T; t++)
        route_token(c, sc->router + (size_t)t * c->n_experts, lw->router_bias, sc->topk + (size_t)t * K,
                    sc->topw + (size_t)t * K);
    memset(sc->out, 0, (size_t)T * D * sizeof(float));
    /* Visit the experts in ascending id; each token meets its experts in that order. */
    for (int e = 0; e < c->n_experts; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                if (sc->topk[(size_t)t * K + k] == e) {
                    sc->token_list[n] = t;
                    sc->token_weight[n] = sc->topw[(size_t)t * K + k];
                    memcpy(sc->gathered + (size_t)n * D, sc->xn + (size_t)t * D, (size_t)D * sizeof(float));
                    n++;
                }
        if (!n) continue;
        k3_mlp_weights ew;
        if (s->m->weights->acquire_expert(s->m->weights, layer, e, &ew, err)) return -1;
        swiglu_mlp(sc, &ew, sc->gathered, sc->expert_out, n);
        s->m->weights->release_expert(s->m->weights, layer, e);
        for (int i = 0; i < n; i++)
            k3_axpy_f32(sc->out + (size_t)sc->token_list[i] * D, sc->token_weight[i],
                        sc->expert_out + (size_t)i * D, D);
    }
    if (lw->has_shared) {
        swiglu_mlp(sc, &lw->shared, sc->xn, sc->expert_out, T);
        for (int t = 0; t < T; t++)
            k3_axpy_f32(sc->out + (size_t)t * D, 1.0f, sc->expert_out + (size_t)t * D, D);
    }
    return 0;
}
