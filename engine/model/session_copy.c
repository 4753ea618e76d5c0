/* session_copy.c - in-memory copies of a session's state (k3.h).
 *
 * KDA's recurrent state cannot be rolled back, so a server that wants to
 * reuse the work of a prompt has to copy the state at the moment the prompt
 * ends. A k3_state holds what a session file holds (tokens, KDA conv and
 * recurrent states, the used rows of the MLA cache, the last logits), in
 * memory and without a header: it is only ever restored into a session of
 * the same model in the same process. Restoring gives bit-identical logits
 * to the session it was taken from, because it is the same bytes. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "forward.h"

struct k3_state {
    const k3_model *m;
    int n_tokens, has_logits;
    int *tokens;
    float *kda;          /* conv floats then recurrent floats */
    float *mla;          /* [n_mla][n_tokens][entry] */
    float *logits;
    size_t bytes;
};

/* Copy the parts of a session that depend on its tokens, and nothing of the
 * scratch, so a kept state costs only what the conversation has used. */
k3_state *k3_state_capture(const k3_session *s, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    const size_t conv = k3_config_kda_conv_floats(c), rec = k3_config_kda_state_floats(c);
    const size_t entry = k3_config_mla_entry_floats(c);
    const size_t n_mla = (size_t)k3_config_count_attn(c, K3_ATTN_MLA);
    const size_t n = (size_t)s->n_tokens;
    k3_state *st = calloc(1, sizeof *st);
    if (!st) { k3_err(err, "out of memory copying a session state"); return NULL; }
    st->m = s->m;
    st->n_tokens = s->n_tokens;
    st->has_logits = s->has_logits;
    st->tokens = malloc((n ? n : 1) * sizeof *st->tokens);
    st->kda = malloc((conv + rec + 1) * sizeof(float));
    st->mla = malloc((n_mla * n * entry + 1) * sizeof(float));
    st->logits = malloc((size_t)c->vocab_size * sizeof(float));
    if (!st->tokens || !st->kda || !st->mla || !st->logits) {
        k3_state_free(st);
        k3_err(err, "out of memory copying a session state of %d tokens", s->n_tokens);
        return NULL;
    }
    memcpy(st->tokens, s->tokens, n * sizeof *st->tokens);
    memcpy(st->kda, s->kda_conv, conv * sizeof(float));
    memcpy(st->kda + conv, s->kda_state, rec * sizeof(float));
    for (size_t l = 0; l < n_mla; l++)
        memcpy(st->mla + l * n * entry, s->mla_cache + l * (size_t)s->max_tokens * entry, n * entry * sizeof(float));
    memcpy(st->logits, s->logits, (size_t)c->vocab_size * sizeof(float));
    st->bytes = sizeof *st + n * sizeof(int) + (conv + rec + n_mla * n * entry + (size_t)c->vocab_size) * sizeof(float);
    return st;
}

/* Put a captured state back; the session then continues exactly as the
 * one it was taken from would have. */
int k3_state_restore(k3_session *s, const k3_state *st, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    if (st->m != s->m) return k3_err(err, "a session state of another model cannot be restored");
    if (st->n_tokens > s->max_tokens)
        return k3_err(err, "a session state of %d tokens exceeds the context limit %d", st->n_tokens, s->max_tokens);
    const size_t conv = k3_config_kda_conv_floats(c), rec = k3_config_kda_state_floats(c);
    const size_t entry = k3_config_mla_entry_floats(c);
    const size_t n_mla = (size_t)k3_config_count_attn(c, K3_ATTN_MLA);
    const size_t n = (size_t)st->n_tokens;
    memcpy(s->tokens, st->tokens, n * sizeof *st->tokens);
    memcpy(s->kda_conv, st->kda, conv * sizeof(float));
    memcpy(s->kda_state, st->kda + conv, rec * sizeof(float));
    for (size_t l = 0; l < n_mla; l++)
        memcpy(s->mla_cache + l * (size_t)s->max_tokens * entry, st->mla + l * n * entry, n * entry * sizeof(float));
    memcpy(s->logits, st->logits, (size_t)c->vocab_size * sizeof(float));
    assert(st->n_tokens >= 0 && st->n_tokens <= s->max_tokens);   /* checked against the session above */
    s->n_tokens = st->n_tokens;
    s->has_logits = st->has_logits;
    return 0;
}

void k3_state_free(k3_state *st)
{
    if (!st) return;
    free(st->tokens);
    free(st->kda);
    free(st->mla);
    free(st->logits);
    free(st);
}

size_t k3_state_bytes(const k3_state *st) { return st->bytes; }
int k3_state_n_tokens(const k3_state *st) { return st->n_tokens; }
const int *k3_state_tokens(const k3_state *st) { return st->tokens; }

/* Bytes a state of n tokens takes, so a cache can refuse before copying. */
size_t k3_state_bytes_for(const k3_model *m, int n_tokens)
{
    const k3_config *c = &m->cfg;
    const size_t n = (size_t)n_tokens;
    return sizeof(k3_state) + n * sizeof(int) +
           (k3_config_kda_conv_floats(c) + k3_config_kda_state_floats(c) +
            (size_t)k3_config_count_attn(c, K3_ATTN_MLA) * n * k3_config_mla_entry_floats(c) + (size_t)c->vocab_size) *
               sizeof(float);
}

/* A session holding exactly the state of src (dst must be of the same model
 * and hold src's tokens). Used by tests and by anyone forking a conversation. */
int k3_session_copy(k3_session *dst, const k3_session *src, k3_error *err)
{
    k3_state *st = k3_state_capture(src, err);
    if (!st) return -1;
    int rc = k3_state_restore(dst, st, err);
    k3_state_free(st);
    return rc;
}
