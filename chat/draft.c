/* draft.c - see draft.h. The verification rule: a draft proposes one token
 * per position with certainty, so the standard speculative rejection rule
 * (accept with probability min(1, p/q), else draw from the rest) reduces to
 * "draw from the model's distribution at that position and keep the draft
 * token if the draw equals it". Drawing exactly as plain decoding does, one
 * k3_sample per position in order, gives the same tokens as plain decoding
 * for greedy and for any seed: the logits are bit-identical (a chunk equals
 * single steps) and the generator advances once per sampled token in both. */
#include <stdlib.h>
#include <string.h>
#include "draft.h"

/* Prompt lookup: every earlier position holding the last token is a
 * candidate; its match length is how far the tokens before it agree with the
 * tokens before the last one (at most DRAFT_NGRAM_MAX). The longest match
 * wins, the latest of equal ones (the most recent use of a phrase predicts
 * best). One pass over the context, DRAFT_NGRAM_MAX compares at most per
 * candidate. The draft copies what followed the match; where that runs into
 * the end of the context it goes on copying its own tokens, so text that
 * repeats with a short period (a line said again and again) drafts as far as
 * asked, not only up to the end of the context. */
int draft_ngram(const int *ctx, int n_ctx, int max_draft, int *draft, int *matched)
{
    *matched = 0;
    if (n_ctx < 2) return 0;
    const int *tail = ctx + n_ctx - 1;     /* tail[-i]: the i-th token before the last */
    int best_len = 0, best_end = -1;
    for (int end = n_ctx - 2; end >= 0; end--) {   /* the latest occurrence first */
        if (ctx[end] != *tail) continue;
        int len = 1;
        while (len < DRAFT_NGRAM_MAX && end - len >= 0 && ctx[end - len] == tail[-len]) len++;
        if (len > best_len) {
            best_len = len, best_end = end;
            if (len == DRAFT_NGRAM_MAX) break;
        }
    }
    if (best_end < 0) return 0;
    for (int i = 0; i < max_draft; i++) {
        const int from = best_end + 1 + i;   /* past n_ctx: the draft's own earlier tokens */
        draft[i] = from < n_ctx ? ctx[from] : draft[from - n_ctx];
    }
    *matched = best_len;
    return max_draft > 0 ? max_draft : 0;
}

/* Prior: half the drafts kept, one more token costs a quarter of a step
 * (optimistic enough to try, corrected by the first measured passes). */
void draft_policy_init(draft_policy *p)
{
    memset(p, 0, sizeof *p);
    p->kept = 1.0;
    p->tried = 2.0;
    p->step_ms = 1.0;
    p->extra_ms = 0.25;
}

/* Tokens per unit of time of a pass with k drafts (see draft.h). */
static double draft_gain(const draft_policy *p, int k)
{
    const double a = p->kept / p->tried;
    double tokens = 1.0, ak = 1.0;
    for (int i = 0; i < k; i++) tokens += (ak *= a);
    const double extra = p->extra_ms > 0 ? p->extra_ms : 0;
    return tokens / (p->step_ms + k * extra);
}

int draft_policy_length(draft_policy *p, int max_draft)
{
    int best = 0;
    double best_gain = draft_gain(p, 0);
    for (int k = 1; k <= max_draft; k++) {
        double g = draft_gain(p, k);
        if (g > best_gain * 1.02) best = k, best_gain = g;   /* a clear gain, not noise */
    }
    /* look again now and then (the text may start repeating), but spend at
     * most about 1/DRAFT_RETRY_SHARE of the time on looking: a retry pass of
     * 2 drafts waits for that many plain steps' worth of time */
    const double extra = p->extra_ms > 0 ? p->extra_ms : 0;
    if (best == 0 && max_draft > 0 && ++p->idle_passes >= DRAFT_RETRY_PASSES &&
        p->idle_passes * p->step_ms >= DRAFT_RETRY_SHARE * (p->step_ms + 2 * extra)) {
        p->idle_passes = 0;
        best = max_draft < 2 ? max_draft : 2;
    }
    return best;
}

/* Add one measurement to a window and return the least of the window. */
static double window_add_min(draft_cost_window *w, double ms)
{
    w->ms[w->next] = ms;
    w->next = (w->next + 1) % DRAFT_COST_WINDOW;
    if (w->n < DRAFT_COST_WINDOW) w->n++;
    double least = w->ms[0];
    for (int i = 1; i < w->n; i++)
        if (w->ms[i] < least) least = w->ms[i];
    return least;
}

void draft_policy_update(draft_policy *p, int n_draft, int kept, double ms)
{
    const double keep = 0.9;                /* the last ~10 passes weigh most */
    if (n_draft == 0) {
        p->step_ms = window_add_min(&p->steps, ms);
        if (!p->extras.n) p->extra_ms = 0.25 * p->step_ms;      /* the prior, in this model's units */
        return;
    }
    p->idle_passes = 0;
    p->kept = keep * p->kept + kept;
    p->tried = keep * p->tried + kept + (kept < n_draft);       /* the first rejection is judged, the rest not */
    if (p->steps.n) {                       /* a draft token's cost needs a plain step to compare */
        /* the prior stands as one measurement until the window turns over,
         * so the first measured pass alone cannot end drafting */
        if (p->extras.n == 0) window_add_min(&p->extras, p->extra_ms);
        p->extra_ms = window_add_min(&p->extras, (ms - p->step_ms) / n_draft);
    }
}

/* The state of one pass, for the keep callback. */
typedef struct verify_run {
    k3_sampler *sp;
    const int *ids;
    const int *stop_ids;
    int n_stop_ids, max_out;
    draft_outcome *out;
} verify_run;

/* Sample each position in order: see draft_verify. */
static int keep_sampled(void *user, const float *logits, int n, int vocab)
{
    verify_run *v = user;
    for (int i = 0; i < n; i++) {
        int y = k3_sample(v->sp, logits + (size_t)i * vocab);
        for (int j = 0; j < v->n_stop_ids; j++)
            if (y == v->stop_ids[j]) v->out->stopped_on = y;
        if (v->out->stopped_on >= 0) return i + 1;
        v->out->tokens[v->out->n_tokens++] = y;
        if (v->out->n_tokens == v->max_out || i == n - 1 || y != v->ids[i + 1]) return i + 1;
        v->out->kept_drafts++;
    }
    return n;
}

int draft_step(k3_session *s, k3_sampler *sp, int pending, const int *draft, int n_draft, const int *stop_ids,
               int n_stop_ids, int max_out, draft_outcome *out, k3_error *err)
{
    int ids[K3_DRAFT_MAX_TOKENS];
    const int chunk = k3_model_chunk_tokens(k3_session_model(s), NULL, 0);   /* a pass is one chunk */
    if (n_draft > K3_DRAFT_MAX_TOKENS - 1) n_draft = K3_DRAFT_MAX_TOKENS - 1;
    if (n_draft > chunk - 1) n_draft = chunk - 1;
    ids[0] = pending;
    memcpy(ids + 1, draft, (size_t)n_draft * sizeof *ids);
    memset(out, 0, sizeof *out);
    out->stopped_on = -1;
    verify_run v = {.sp = sp, .ids = ids, .stop_ids = stop_ids, .n_stop_ids = n_stop_ids, .max_out = max_out, .out = out};
    if (n_draft > 0) return k3_session_eval_draft(s, ids, 1 + n_draft, keep_sampled, &v, err);
    /* no draft: the plain step */
    if (k3_session_eval(s, &pending, 1, NULL, err)) return -1;
    k3_model_info info;
    k3_model_get_info(k3_session_model(s), &info);
    keep_sampled(&v, k3_session_logits(s), 1, info.vocab_size);
    return 0;
}

int draft_propose(draft_context *c, const k3_session *s, int pending, int max_draft, int *draft, k3_error *err)
{
    const int n = k3_session_n_tokens(s);
    const int chunk = k3_model_chunk_tokens(k3_session_model(s), NULL, 0);   /* a pass is one chunk (--chunk-tokens) */
    if (max_draft > chunk - 1) max_draft = chunk - 1;
    if (max_draft <= 0) return 0;
    if (c->cap < n + 1) {
        int cap = (n + 1) * 2, *grown = realloc(c->ids, (size_t)cap * sizeof *grown);
        if (!grown) return k3_err(err, "out of memory");
        c->ids = grown;
        c->cap = cap;
    }
    memcpy(c->ids, k3_session_tokens(s), (size_t)n * sizeof *c->ids);
    c->ids[n] = pending;
    int matched;
    return draft_ngram(c->ids, n + 1, max_draft, draft, &matched);
}

void draft_context_free(draft_context *c)
{
    free(c->ids);
    c->ids = NULL;
    c->cap = 0;
}
