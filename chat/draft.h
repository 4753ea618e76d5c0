/* draft.h - drafts for exact speculative decoding, from the conversation
 * itself (no second model): prompt lookup over the tokens so far, and the
 * pass that verifies a draft with the sampler (k3_session_eval_draft). */
#ifndef K3_DRAFT_H
#define K3_DRAFT_H

#include "k3.h"

/* --draft: none, or n-gram lookup proposing up to DRAFT_NGRAM_TOKENS. */
enum { DRAFT_NONE = 0, DRAFT_NGRAM = 1 };
#define DRAFT_NGRAM_TOKENS (K3_DRAFT_MAX_TOKENS - 1)
/* The longest suffix matched (then shorter ones, down to one token). */
#define DRAFT_NGRAM_MAX 3

/* Up to max_draft tokens likely to follow ctx[0..n_ctx): the tokens that
 * followed the latest earlier occurrence of the last n tokens of ctx, for the
 * largest n from DRAFT_NGRAM_MAX down to 1 that occurs. Returns how many
 * were written to draft (0 = no earlier occurrence). *matched gets n. */
int draft_ngram(const int *ctx, int n_ctx, int max_draft, int *draft, int *matched);

/* What one verified pass produced. */
typedef struct draft_outcome {
    int tokens[K3_DRAFT_MAX_TOKENS];   /* sampled in order, stop token excluded */
    int n_tokens;
    int stopped_on;                    /* the stop id sampled, or -1 */
    int kept_drafts;                   /* draft tokens the session kept */
} draft_outcome;

/* The conversation so far (the session's tokens and the pending one) as
 * one array for the drafter, kept between passes. */
typedef struct draft_context {
    int *ids;
    int cap;
} draft_context;

/* An n-gram draft of up to max_draft tokens after the session's tokens and
 * `pending`. Returns the count (0 = none), or -1 with err set. */
int draft_propose(draft_context *c, const k3_session *s, int pending, int max_draft, int *draft, k3_error *err);
void draft_context_free(draft_context *c);

/* One pass over the model: feed `pending` and the draft after it (n_draft
 * may be 0: a plain step) and sample from each position in order, exactly
 * as plain decoding would (the same sampler calls on bit-identical logits,
 * so seeded sampling draws the same numbers): stop at the first draft token
 * the sampler did not choose (its choice is the pass's last token), at a
 * stop id, or after max_out (>= 1) tokens. The session keeps what plain
 * decoding would have fed by then. Returns 0, or -1 with err set (the
 * session then as before). */
int draft_step(k3_session *s, k3_sampler *sp, int pending, const int *draft, int n_draft, const int *stop_ids,
               int n_stop_ids, int max_out, draft_outcome *out, k3_error *err);

#endif
