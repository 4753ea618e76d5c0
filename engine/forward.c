/* forward.c - one chunk of tokens through the whole model
 * (kimi_linear_spec.md §3.2): embed, then per layer
 *   h += attn(rmsnorm(h)); h += ffn(rmsnorm(h)),
 * then the final norm and lm_head. Weights come from the provider one layer
 * at a time, so the same loop serves resident and streamed models. */
#include <string.h>
#include "forward.h"
#include "ops.h"
#include "stats.h"

int k3_forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, k3_error *err)
{
    k3_model *m = s->m;
    const k3_config *c = &m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden;
    k3_weight_provider *wp = m->weights;

    for (int t = 0; t < T; t++)
        if (wp->embed_row(wp, ids[t], sc->h + (size_t)t * D, err)) return -1;

    for (int l = 0; l < c->n_layers; l++) {
        stats_set32(&m->stats.layer, (uint32_t)l);
        const k3_layer_weights *lw = wp->acquire_layer(wp, l, err);
        if (!lw) return -1;
        for (int t = 0; t < T; t++)
            k3_rmsnorm(sc->xn + (size_t)t * D, sc->h + (size_t)t * D, lw->attn_norm, D, c->rms_eps);
        if (c->attn_kind[l] == K3_ATTN_KDA)
            k3_kda_block(s, l, lw, T);
        else
            k3_mla_block(s, l, lw, T);
        for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
        for (int t = 0; t < T; t++)
            k3_rmsnorm(sc->xn + (size_t)t * D, sc->h + (size_t)t * D, lw->ffn_norm, D, c->rms_eps);
        int rc = k3_ffn_block(s, l, lw, T, err);
        wp->release_layer(wp, l);
        if (rc) return -1;
        for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
    }

    /* Logits: for every position when asked, else only the last. */
    const float *norm = wp->final_norm(wp);
    const k3_weight *head = wp->lm_head(wp);
    int first = all_logits ? 0 : T - 1;
    for (int t = first; t < T; t++)
        k3_rmsnorm(sc->xn + (size_t)(t - first) * D, sc->h + (size_t)t * D, norm, D, c->rms_eps);
    if (all_logits) {
        k3_matmul(all_logits, head, sc->xn, T);
        memcpy(s->logits, all_logits + (size_t)(T - 1) * c->vocab_size, (size_t)c->vocab_size * sizeof(float));
    } else {
        k3_matvec(s->logits, head, sc->xn);
    }
    s->has_logits = 1;
    return 0;
}
