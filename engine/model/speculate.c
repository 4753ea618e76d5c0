/* speculate.c - draft passes for exact speculative decoding (k3.h,
 * k3_session_eval_draft).
 *
 * A draft pass runs the token just sampled and the tokens a drafter guessed
 * after it through the model as one chunk: each weight, and each distinct
 * expert of the draft, is read once for all of them, and the chunk gives
 * every position's logits, equal bit for bit to feeding the tokens one by one
 * (forward.c). The caller then decides from those logits how many tokens
 * stand. Taking back the rest:
 *  - the MLA cache and the token list are cut (rows past n_tokens are never
 *    read before they are written again);
 *  - the KDA recurrent and conv states cannot be cut. Every KDA layer starts
 *    again from its roll-back copy (forward.c leaves kda_*_saved holding the
 *    state from before the chunk) and replays the recurrence of the kept
 *    tokens from the inputs k3_kda_block kept during the pass (kda.c,
 *    k3_kda_replay): a few vector operations per kept token, no weights.
 * Nothing is undone when every token is kept. */
#include <assert.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "forward.h"
#include "stats.h"

/* Bytes of the draft state: the KDA inputs of a full pass and its logits. */
size_t k3_draft_bytes(const k3_config *c)
{
    const size_t n_kda = (size_t)k3_config_count_attn(c, K3_ATTN_KDA);
    return sizeof(k3_draft_state) +
           ((size_t)K3_DRAFT_MAX_TOKENS * (n_kda * k3_kda_draft_floats(c) + (size_t)c->vocab_size) + (size_t)c->vocab_size) *
               sizeof(float);
}

void k3_draft_free(k3_draft_state *d)
{
    if (!d) return;
    free(d->kda_inputs);
    free(d->logits);
    free(d);
}

/* Allocated at a session's first draft pass (the memory plan counts it for
 * every session: k3_session_bytes). */
static k3_draft_state *draft_alloc(const k3_config *c)
{
    const size_t n_kda = (size_t)k3_config_count_attn(c, K3_ATTN_KDA);
    k3_draft_state *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->max_tokens = K3_DRAFT_MAX_TOKENS;
    d->kda_token_floats = k3_kda_draft_floats(c);
    d->kda_inputs = malloc((n_kda * d->max_tokens * d->kda_token_floats + 1) * sizeof(float));
    d->logits = malloc((size_t)(d->max_tokens + 1) * c->vocab_size * sizeof(float));   /* + the row before */
    if (!d->kda_inputs || !d->logits) {
        k3_draft_free(d);
        return NULL;
    }
    return d;
}

/* Every KDA layer back to the state before the pass, then forward again
 * over the first n_keep tokens (n_keep = 0: the state before the pass). */
static void draft_take_back(k3_session *s, int n_keep)
{
    const k3_config *c = &s->m->cfg;
    for (int l = 0; l < c->n_layers; l++)
        if (c->attn_kind[l] == K3_ATTN_KDA) k3_kda_replay(s, s->m->layer_slot[l], n_keep);
}

int k3_session_eval_draft(k3_session *s, const int *ids, int n, k3_draft_keep_fn keep, void *user,
                          k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    const int vocab = c->vocab_size;
    if (n < 1 || n > K3_DRAFT_MAX_TOKENS)
        return k3_err(err, "a draft pass holds 1 to %d tokens, not %d", K3_DRAFT_MAX_TOKENS, n);
    if (k3_session_check_tokens(s, ids, n, err)) return -1;
    if (!s->draft && !(s->draft = draft_alloc(c)))
        return k3_err(err, "out of memory for a draft pass of %d tokens", K3_DRAFT_MAX_TOKENS);
    omp_set_num_threads(s->m->n_threads);
    k3_stats *st = &s->m->stats;
    stats_set32(&st->phase, K3_PHASE_DECODE);
    stats_set32(&st->chunk_total, (uint32_t)n);
    stats_set32(&st->chunk_done, 0);
    k3_token_record rec = {.n_tokens = (uint32_t)n, .phase = K3_PHASE_DECODE};
    stats_step_start step_start;
    stats_step_begin(st, &step_start);

    /* the logits before the pass, kept in the row after the pass's rows */
    const int had_logits = s->has_logits;
    memcpy(s->draft->logits + (size_t)K3_DRAFT_MAX_TOKENS * vocab, s->logits, (size_t)vocab * sizeof(float));
    s->draft->capturing = 1;
    int rc = k3_forward_chunk(s, ids, n, s->draft->logits, err);
    s->draft->capturing = 0;
    int n_keep = n;
    if (rc == 0) {
        n_keep = keep(user, s->draft->logits, n, vocab);
        if (n_keep < 1 || n_keep > n) {
            draft_take_back(s, 0);        /* as before the pass, logits included */
            memcpy(s->logits, s->draft->logits + (size_t)K3_DRAFT_MAX_TOKENS * vocab, (size_t)vocab * sizeof(float));
            s->has_logits = had_logits;
            rc = k3_err(err, "a draft pass of %d tokens cannot keep %d", n, n_keep);
        }
    }
    if (rc == 0) {
        if (n_keep < n) draft_take_back(s, n_keep);
        assert(n_keep >= 1 && n_keep <= n && s->n_tokens + n_keep <= s->max_tokens);
        memcpy(s->tokens + s->n_tokens, ids, (size_t)n_keep * sizeof *ids);
        s->n_tokens += n_keep;
        memcpy(s->logits, s->draft->logits + (size_t)(n_keep - 1) * vocab, (size_t)vocab * sizeof(float));
        s->has_logits = 1;
    }

    rec.n_tokens = (uint32_t)n_keep;      /* the tokens this step decoded */
    stats_step_record(st, &step_start, &rec);
    if (rc == 0) {
        stats_set32(&st->chunk_done, (uint32_t)n);
        stats_add(&st->tokens_decoded, (uint64_t)n_keep);
        stats_add(&st->draft_passes, 1);
        stats_add(&st->draft_tokens, (uint64_t)(n - 1));
        stats_add(&st->draft_kept, (uint64_t)(n_keep - 1));
    }
    stats_add_ms(&st->decode_ms, rec.ms);
    stats_set32(&st->phase, K3_PHASE_IDLE);
    return rc;
}
