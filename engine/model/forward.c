/* forward.c - one chunk of tokens through the whole model
 * (docs/MODEL.md, "The decoder stack"): embed, then per layer
 *   h += attn(rmsnorm(h)); h += ffn(rmsnorm(h)),
 * then the final norm and lm_head. Kimi K3 replaces the plain residual with
 * Attention Residuals (docs/MODEL.md, "Attention Residuals"): softmax mixes over block
 * snapshots before attention, before the FFN and at the output. Weights come from the provider one layer
 * at a time, so the same loop serves resident and streamed models. */
#include <assert.h>
#include <omp.h>
#include <string.h>
#include "forward.h"
#include "ops.h"
#include "stats.h"

/* Element operations (tokens x width x passes) below which the per-token
 * norms and mixes stay on the calling thread: a parallel region costs a
 * few microseconds on a quiet machine and, on a loaded one, a wait for
 * whichever thread was preempted; 2^18 float operations cost ~0.1 ms. */
#define TOKENS_PARALLEL_MIN_OPS ((int64_t)1 << 18)

/* The AttnRes mix of every token of the chunk over its snapshots and the
 * current stream (k3_attn_res_mix). Tokens are independent (each thread
 * its own row of mix scores), so they run in parallel. */
static void attn_res_mix(k3_session *s, const float *score, const float *current, float *out, int T, int n_snap)
{
    const k3_config *c = &s->m->cfg;
    const int D = c->hidden, max_snap = (c->n_layers + c->attn_res_block - 1) / c->attn_res_block;
    const int64_t ops = (int64_t)T * (n_snap + 1) * D * 2;   /* two passes over each source */
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) if (ops >= TOKENS_PARALLEL_MIN_OPS)
    for (int t = 0; t < T; t++) {
        const float *sources[K3_MAX_LAYERS + 1];
        const float *snap = s->sc.snapshots + (size_t)t * max_snap * D;
        for (int i = 0; i < n_snap; i++) sources[i] = snap + (size_t)i * D;
        sources[n_snap] = current + (size_t)t * D;
        k3_attn_res_mix(out + (size_t)t * D, sources, n_snap + 1, score, D, c->rms_eps,
                        s->sc.mix_scores + (size_t)omp_get_thread_num() * (max_snap + 1));
    }
}

/* RMSNorm of each of the chunk's T rows of width D (k3_rmsnorm), the rows
 * in parallel: each row's sum is its own, so the bits do not change. */
static void rmsnorm_rows(const k3_session *s, float *out, const float *in, const float *weight, int T)
{
    const k3_config *c = &s->m->cfg;
    const int D = c->hidden;
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) if ((int64_t)T * D >= TOKENS_PARALLEL_MIN_OPS)
    for (int t = 0; t < T; t++)
        k3_rmsnorm(out + (size_t)t * D, in + (size_t)t * D, weight, D, c->rms_eps);
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
 * that fails later (a read error in this or a later layer) can be undone.
 * with_state 0 copies the conv history only: the caller has k3_kda_block
 * copy the state, head by head in its parallel loop (a decode step's
 * 1.5 MiB a layer on K3 cost 5 ms a token on one thread here). */
static void kda_save_layer(k3_session *s, int slot, int with_state)
{
    const k3_config *c = &s->m->cfg;
    const size_t nc = kda_conv_floats_per_layer(c), ns = kda_state_floats_per_layer(c);
    memcpy(s->kda_conv_saved + (size_t)slot * nc, s->kda_conv + (size_t)slot * nc, nc * sizeof(float));
    if (with_state)
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

/* The attention half of layer l over the chunk's T tokens (sc->h, and
 * sc->snapshots for AttnRes): mix, norm, the KDA or MLA block, the residual;
 * then the FFN input, normalised, in sc->xn. n_snap counts the snapshots
 * before this layer; the caller moves it past a boundary (at_boundary). One
 * body for a chunk and for each chunk of a span; keep_state: a KDA block
 * copies its state for the chunk's undo first (kda_save_layer). */
static void layer_attention(k3_session *s, int l, const k3_layer_weights *lw, int T, int n_snap, int keep_state)
{
    k3_model *m = s->m;
    const k3_config *c = &m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, res_block = c->attn_res_block;
    const int max_snap = res_block ? (c->n_layers + res_block - 1) / res_block : 0;
    int restart = 0;
    const float *attn_in = sc->h;
    if (res_block) {                      /* mix #1 (none before the first snapshot) */
        if (n_snap > 0) {
            attn_res_mix(s, lw->attn_res_score, sc->h, sc->xn, T, n_snap);
            attn_in = sc->xn;
        }
        if (l % res_block == 0) {         /* boundary: snapshot the raw stream, restart it */
            for (int t = 0; t < T; t++)
                memcpy(sc->snapshots + ((size_t)t * max_snap + n_snap) * D, sc->h + (size_t)t * D,
                       (size_t)D * sizeof(float));
            n_snap++;
            restart = 1;
        }
    }
    rmsnorm_rows(s, sc->xn, attn_in, lw->attn_norm, T);
    if (c->attn_kind[l] == K3_ATTN_KDA)
        k3_kda_block(s, l, lw, T, keep_state);
    else
        k3_mla_block(s, l, lw, T);
    if (restart)
        memcpy(sc->h, sc->out, (size_t)T * D * sizeof(float));
    else
        for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
    const float *ffn_in = sc->h;
    if (res_block) {                      /* mix #2 (always: a snapshot exists) */
        assert(n_snap > 0);
        attn_res_mix(s, lw->mlp_res_score, sc->h, sc->xn, T, n_snap);
        ffn_in = sc->xn;
    }
    rmsnorm_rows(s, sc->xn, ffn_in, lw->ffn_norm, T);
}

/* Whether layer l starts an AttnRes block (takes a snapshot). */
static int at_boundary(const k3_config *c, int l) { return c->attn_res_block && l % c->attn_res_block == 0; }

/* Logits after the chunk's T tokens (sc->h, sc->snapshots): for every
 * position into all_logits when asked, always the last into s->logits. */
static int chunk_logits(k3_session *s, int T, int n_snap, float *all_logits, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    k3_weights *wp = s->m->weights;
    const int D = c->hidden;
    const float *norm = k3_weights_final_norm(wp);
    int first = all_logits ? 0 : T - 1;
    const float *final_in = sc->h;
    if (c->attn_res_block) {              /* the model-level mix */
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

static int forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, int *n_saved, k3_error *err);
static int forward_span(k3_session *s, const int *ids, int n, int *n_saved, k3_error *err);

/* A chunk either completes or leaves the session as it was (k3.h): on a
 * read error (-1), or on an interrupt between layers of a chunk larger than
 * K3_CHUNK_TOKENS (K3_EVAL_INTERRUPTED). More tokens than the scratch's
 * chunk run as a span (no logits of every position, no draft pass). */
int k3_forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, k3_error *err)
{
    assert(T >= 1);
    const int as_span = T > s->sc.chunk_tokens && T <= s->sc.span_tokens && !all_logits &&
                        !(s->draft && s->draft->capturing);
    if (T > s->sc.chunk_tokens && !as_span)   /* the scratch holds chunk_tokens (k3_session_eval splits a prompt) */
        return k3_err(err, "a pass of %d tokens exceeds this session's chunk of %d (--chunk-tokens)", T,
                      s->sc.chunk_tokens);
    int n_saved = 0;
    int rc = as_span ? forward_span(s, ids, T, &n_saved, err) : forward_chunk(s, ids, T, all_logits, &n_saved, err);
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
    int n_snap = 0;   /* AttnRes (K3): block snapshots of the raw entering stream */

    if (k3_weights_embed_rows(wp, ids, T, sc->h, err)) return -1;

    for (int l = 0; l < c->n_layers; l++) {
        /* a chunk larger than K3_CHUNK_TOKENS can take long: an interrupt
         * stops it between layers and the caller undoes it (a smaller chunk
         * completes, as before) */
        if (T > K3_CHUNK_TOKENS && l > 0 && s->interrupt && __atomic_load_n(s->interrupt, __ATOMIC_RELAXED)) return K3_EVAL_INTERRUPTED;
        stats_set32(&m->stats.layer, (uint32_t)l);
        const k3_layer_weights *lw = k3_weights_acquire_layer(wp, l, err);
        if (!lw) return -1;
        if (c->attn_kind[l] == K3_ATTN_KDA) {
            kda_save_layer(s, m->layer_slot[l], 0);   /* KDA slots follow layer order */
            *n_saved = m->layer_slot[l] + 1;
        }
        layer_attention(s, l, lw, T, n_snap, 1);   /* the KDA block keeps its state */
        n_snap += at_boundary(c, l);
        int rc = k3_ffn_block(s, l, lw, T, err);
        k3_weights_release_layer(wp, l);
        if (rc) return -1;
        for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
    }
    return chunk_logits(s, T, n_snap, all_logits, err);
}

/* Point the chunk buffers that live across layers (the residual stream and
 * the AttnRes snapshots) at span row first. */
static void span_rows(k3_session *s, int first)
{
    const k3_config *c = &s->m->cfg;
    k3_scratch *sc = &s->sc;
    const int max_snap = c->attn_res_block ? (c->n_layers + c->attn_res_block - 1) / c->attn_res_block : 0;
    sc->h = sc->span_h + (size_t)first * c->hidden;
    if (max_snap) sc->snapshots = sc->span_snapshots + (size_t)first * max_snap * c->hidden;
}

/* A span of n tokens, layer by layer: each layer's attention and FFN input
 * run chunk by chunk in token order (the KDA state and the MLA cache grow
 * as in successive chunks: the position is moved along), then a MoE layer
 * runs each routed expert once for the whole span, then each chunk takes
 * its sum. Every token sees the same operations in the same order as in a
 * chunk, so the logits are the same bits; each weight is read once. */
static int forward_span_layers(k3_session *s, const int *ids, int n, int *n_saved, k3_error *err)
{
    k3_model *m = s->m;
    const k3_config *c = &m->cfg;
    k3_scratch *sc = &s->sc;
    const int D = c->hidden, tile = sc->chunk_tokens, pos0 = s->n_tokens;
    k3_weights *wp = m->weights;
    int n_snap = 0;

    if (k3_weights_embed_rows(wp, ids, n, sc->span_h, err)) return -1;

    for (int l = 0; l < c->n_layers; l++) {
        if (l > 0 && s->interrupt && __atomic_load_n(s->interrupt, __ATOMIC_RELAXED)) return K3_EVAL_INTERRUPTED;
        stats_set32(&m->stats.layer, (uint32_t)l);
        const k3_layer_weights *lw = k3_weights_acquire_layer(wp, l, err);
        if (!lw) return -1;
        if (c->attn_kind[l] == K3_ATTN_KDA) {
            kda_save_layer(s, m->layer_slot[l], 1);   /* before the span's first chunk */
            *n_saved = m->layer_slot[l] + 1;
        }
        const int moe = c->is_moe[l];
        for (int first = 0; first < n; first += tile) {
            const int T = n - first < tile ? n - first : tile;
            span_rows(s, first);
            s->n_tokens = pos0 + first;   /* the chunk's position (MLA) */
            layer_attention(s, l, lw, T, n_snap, 0);
            if (moe) {
                k3_ffn_span_route(s, lw, first, T);
            } else {
                k3_ffn_block(s, l, lw, T, err);   /* dense: no read, cannot fail */
                for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
            }
        }
        s->n_tokens = pos0;
        n_snap += at_boundary(c, l);
        int rc = moe ? k3_ffn_span_experts(s, l, n, err) : 0;
        if (rc == 0 && moe)
            for (int first = 0; first < n; first += tile) {
                const int T = n - first < tile ? n - first : tile;
                span_rows(s, first);
                k3_ffn_span_finish(s, lw, first, T);
                for (size_t i = 0; i < (size_t)T * D; i++) sc->h[i] += sc->out[i];
            }
        k3_weights_release_layer(wp, l);
        if (rc) return -1;
    }
    span_rows(s, n - 1);   /* the logits of the last token */
    return chunk_logits(s, 1, n_snap, NULL, err);
}

/* forward_span_layers with the chunk buffers and the position put back
 * whatever happens. */
static int forward_span(k3_session *s, const int *ids, int n, int *n_saved, k3_error *err)
{
    float *h = s->sc.h, *snapshots = s->sc.snapshots;
    const int pos0 = s->n_tokens;
    int rc = forward_span_layers(s, ids, n, n_saved, err);
    s->sc.h = h;
    s->sc.snapshots = snapshots;
    s->n_tokens = pos0;
    return rc;
}
