/* draft.h - drafts for exact speculative decoding, from the conversation
 * itself (no second model): prompt lookup over the tokens so far, and the
 * pass that verifies a draft with the sampler (k3_session_eval_draft). */
#ifndef K3_DRAFT_H
#define K3_DRAFT_H

#include "k3.h"

/* --draft: none, or n-gram lookup proposing up to DRAFT_NGRAM_TOKENS. */
enum { DRAFT_NONE = 0, DRAFT_NGRAM = 1 };
#define DRAFT_NGRAM_TOKENS (K3_DRAFT_MAX_TOKENS - 1)
/* The longest suffix matched (prompt lookup: the longest earlier occurrence
 * of the context's last tokens, up to this many, down to one token). */
#define DRAFT_NGRAM_MAX 16

/* max_draft tokens likely to follow ctx[0..n_ctx): the tokens that followed
 * the earlier occurrence of the longest suffix of ctx (the last n tokens, n
 * up to DRAFT_NGRAM_MAX; the latest of the longest), continued periodically
 * (the copy goes on from its own tokens) when it reaches the end of ctx.
 * Returns how many were written to draft (0 = the last token never occurred
 * before). *matched gets n. */
int draft_ngram(const int *ctx, int n_ctx, int max_draft, int *draft, int *matched);

/* How long a draft to risk, learned while decoding. A draft pass of 1 + k
 * tokens costs about step + k * extra (extra: what one more token adds to a
 * pass: near a whole step when compute dominates and every token routes to
 * its own experts, near nothing when the pass is bound by reading a trunk
 * that streams) and yields 1 + a + a^2 + ... + a^k tokens on average (a:
 * the chance a draft token is kept after the one before it was). The
 * length chosen maximises tokens per unit of time; 0 = a plain step. a is
 * a decayed count of what the passes kept; step and extra are the least of
 * the last DRAFT_COST_WINDOW measurements, because other work on the
 * machine only ever adds time to a pass: one pass held up 44 ms (against
 * 0.4 ms steps) had made a running average price every draft token at 36 ms,
 * and drafting stopped for the rest of the answer. So drafting turns itself
 * off where it loses (random-weight models, which never repeat) and on
 * where it wins. */
#define DRAFT_COST_WINDOW 8
typedef struct draft_cost_window {
    double ms[DRAFT_COST_WINDOW];
    int n, next;
} draft_cost_window;
typedef struct draft_policy {
    double kept, tried;          /* decayed counts of draft tokens kept / judged */
    double step_ms, extra_ms;    /* the estimates: least of the windows (priors before) */
    draft_cost_window steps, extras;   /* the measurements (n = 0: none yet) */
    int idle_passes;             /* passes since the last draft (a retry after DRAFT_RETRY_PASSES,
                                  * and after DRAFT_RETRY_SHARE times the retry's own cost) */
} draft_policy;
#define DRAFT_RETRY_PASSES 16
#define DRAFT_RETRY_SHARE 8

void draft_policy_init(draft_policy *p);
/* The draft length for the next pass, at most max_draft. */
int draft_policy_length(draft_policy *p, int max_draft);
/* What a pass of 1 + n_draft tokens kept and how long it took. */
void draft_policy_update(draft_policy *p, int n_draft, int kept, double ms);

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
