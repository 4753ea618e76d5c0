/* forward.c - one chunk of tokens through the whole model
 * (docs/MODEL.md, "The decoder stack"): embed, then per layer
 *   h += attn(rmsnorm(h)); h += ffn(rmsnorm(h)),
 * then the final norm and lm_head. Kimi K3 replaces the plain residual with
 * Attention Residuals (docs/MODEL.md, "Attention Residuals"): softmax mixes over block
 * snapshots before attention, before the FFN and at the output. Weights come from the provider one layer
 * at a time, so the same loop serves resident and streamed models. */
#include <assert.h>
#include <string.h>
#include "forward.h"
#include "ops.h"
#include "stats.h"

/* The AttnRes mix of every token of the chunk over its snapshots and the
 * current stream (k3_attn_res_mix). */
static void attn_res_mix(k3_session *s, const float *score, const float *current, float *out, int T, int n_snap)
{
    const k3_config *c = &s->m->cfg;
    const int D = c->hidden, max_snap = (c->n_layers + c->attn_res_block - 1) / c->attn_res_block;
    const float *sources[K3_MAX_LAYERS + 1];
    for (int t = 0; t < T; t++) {
        const float *snap = s->sc.snapshots + (size_t)t * max_snap * D;
        for (int i = 0; i < n_snap; i++) sources[i] = snap + (size_t)i * D;
        sources[n_snap] = current + (size_t)t * D;
        k3_attn_res_mix(out + (size_t)t * D, sources, n_snap + 1, score, D, c->rms_eps, s->sc.mix_scores);
    }
}

/* Floats of one KDA layer's conv history and recurrent state. */
static size_t kda_conv_floats_per_layer(const k3_config *c)
{
    return (size_t)3 * (c->conv_kernel - 1) * c->kda_heads * c->kda_head_dim;
}
static size_t kda_state_floats_per_layer(const k3_config *c)
{
    return (size_t)c->kda_heads * c->kda_head_dim * c->kda_head_dim;
}

/* Before a KDA layer updates its state in place: keep a copy, so a chunk
 * that fails later (a read error in this or a later layer) can be undone. */
static void kda_save_layer(k3_session *s, int slot)
{
    const k3_config *c = &s->m->cfg;
    const size_t nc = kda_conv_floats_per_layer(c), ns = kda_state_floats_per_layer(c);
    memcpy(s->kda_conv_saved + (size_t)slot * nc, s->kda_conv + (size_t)slot * nc, nc * sizeof(float));
    memcpy(s->kda_state_saved + (size_t)slot * ns, s->kda_state + (size_t)slot * ns, ns * sizeof(float));
}

/* Undo a failed chunk: KDA layers [0, n_saved) get their saved state back.
 * Nothing else needs it: the MLA cache rows past n_tokens are not read
 * before they are written again, and the token count and the logits only
 * change when a chunk completes. */
static void kda_restore(k3_session *s, int n_saved)
{
    const k3_config *c = &s->m->cfg;
    const size_t nc = kda_conv_floats_per_layer(c), ns = kda_state_floats_per_layer(c);
    memcpy(s->kda_conv, s->kda_conv_saved, (size_t)n_saved * nc * sizeof(float));
    memcpy(s->kda_state, s->kda_state_saved, (size_t)n_saved * ns * sizeof(float));
}

static int forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, int *n_saved, k3_error *err);

/* A chunk either completes or leaves the session as it was (k3.h): on a
 * read error (-1), or on an interrupt between layers of a chunk larger than
 * K3_CHUNK_TOKENS (K3_EVAL_INTERRUPTED). */
int k3_forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, k3_error *err)
{
    assert(T >= 1);
    if (T > s->sc.chunk_tokens)   /* the scratch holds chunk_tokens (k3_session_eval splits a prompt) */
        return k3_err(err, "a pass of %d tokens exceeds this session's chunk of %d (--chunk-tokens)", T,
                      s->sc.chunk_tokens);
    int n_saved = 0;
    int rc = forward_chunk(s, ids, T, all_logits, &n_saved, err);
    if (rc) kda_restore(s, n_saved);
    return rc;
}

static int forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, int *n_saved, k3_error *err)
{
    k3_model *m = s->m;
    const k3_config *c = &m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden;
    k3_weights *wp = m->weights;
    /* AttnRes (K3): block snapshots of the raw entering stream */
    const int res_block = c->attn_res_block;
    const int max_snap = res_block ? (c->n_layers + res_block - 1) / res_block : 0;
    int n_snap = 0;

    if (k3_weights_embed_rows(wp, ids, T, sc->h, err)) return -1;

    for (int l = 0; l < c->n_layers; l++) {
        /* a chunk larger than K3_CHUNK_TOKENS can take long: an interrupt
         * stops it between layers and the caller undoes it (a smaller chunk
         * completes, as before) */
        if (T > K3_CHUNK_TOKENS && l > 0 && s->interrupt && __atomic_load_n(s->interrupt, __ATOMIC_RELAXED)) return K3_EVAL_INTERRUPTED;
        stats_set32(&m->stats.layer, (uint32_t)l);
        const k3_layer_weights *lw = k3_weights_acquire_layer(wp, l, err);
        if (!lw) return -1;
        int restart = 0;
        const float *attn_in = sc->h;
        if (res_block) {                  /* mix #1 (none before the first snapshot) */
            if (n_snap > 0) {
                attn_res_mix(s, lw->attn_res_score, sc->h, sc->xn, T, n_snap);
                attn_in = sc->xn;
            }
            if (l % res_block == 0) {     /* boundary: snapshot the raw stream, restart it */
                for (int t = 0; t < T; t++)
                    memcpy(sc->snapshots + ((size_t)t * max_snap + n_snap) * D, sc->h + (size_t)t * D,
                           (size_t)D * sizeof(float));
                n_snap++;
                restart = 1;
            }
        }
        for (int t = 0; t < T; t++)
            k3_rmsnorm(sc->xn + (size_t)t * D, attn_in + (size_t)t * D, lw->attn_norm, D, c->rms_eps);
        if (c->attn_kind[l] == K3_ATTN_KDA) {
            kda_save_layer(s, m->layer_slot[l]);   /* KDA slots follow layer order */
            *n_saved = m->layer_slot[l] + 1;
            k3_kda_block(s, l, lw, T);
        } else {
            k3_mla_block(s, l, lw, T);
        }
        if (restart)
            memcpy(sc->h, sc->out, (size_t)T * D * sizeof(float));
        else
            for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
        const float *ffn_in = sc->h;
        if (res_block) {                  /* mix #2 (always: a snapshot exists) */
            assert(n_snap > 0);
            attn_res_mix(s, lw->mlp_res_score, sc->h, sc->xn, T, n_snap);
            ffn_in = sc->xn;
        }
        for (int t = 0; t < T; t++)
            k3_rmsnorm(sc->xn + (size_t)t * D, ffn_in + (size_t)t * D, lw->ffn_norm, D, c->rms_eps);
        int rc = k3_ffn_block(s, l, lw, T, err);
        k3_weights_release_layer(wp, l);
        if (rc) return -1;
        for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
    }

    /* Logits: for every position when asked, else only the last. */
    const float *norm = k3_weights_final_norm(wp);
    int first = all_logits ? 0 : T - 1;
    const float *final_in = sc->h;
    if (res_block) {                      /* the model-level mix */
        attn_res_mix(s, k3_weights_output_res_score(wp), sc->h, sc->out, T, n_snap);
        final_in = sc->out;
    }
    for (int t = first; t < T; t++)
        k3_rmsnorm(sc->xn + (size_t)(t - first) * D, final_in + (size_t)t * D, norm, D, c->rms_eps);
    const k3_weight *head = k3_weights_acquire_head(wp, err);
    if (!head) return -1;
    if (all_logits) {
        k3_matmul(all_logits, head, sc->xn, T);
        memcpy(s->logits, all_logits + (size_t)(T - 1) * c->vocab_size, (size_t)c->vocab_size * sizeof(float));
    } else {
        k3_matvec(s->logits, head, sc->xn);
    }
    k3_weights_release_head(wp);
    s->has_logits = 1;
    return 0;
}
