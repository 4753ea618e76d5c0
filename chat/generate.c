/* generate.c - see generate.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "draft.h"
#include "generate.h"
#include "text_append.h"
#include "k3_util.h"

/* CPU seconds of the whole process: beside the wall clock, the cost of
 * decoding on a machine that other work shares. */
static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The growing answer text. */
typedef struct answer_text {
    char *buf;
    size_t len, cap;
} answer_text;

/* One sampled token joins the answer: it becomes the pending token (fed on
 * the next pass), its text (if any) is shown and the progress reported. */
static int emit_token(generate_result *out, int next, int n_base, k3_detok *dt,
                      answer_text *text, generate_text_fn on_text, generate_progress_fn on_progress, void *user,
                      double t0, double *t_first, double *cpu_first, k3_error *err)
{
    char piece[256];
    out->pending_token = next;
    int *grown = realloc(out->ids, (size_t)(out->n_generated + 1) * sizeof *grown);
    if (!grown) return k3_err(err, "out of memory");
    out->ids = grown;
    out->ids[out->n_generated] = next;
    out->n_generated++;
    if (out->n_generated == 1) {
        *t_first = (k3_now_ns() / 1e9);
        *cpu_first = process_cpu_s();
        out->first_token_s = *t_first - t0;
    }
    /* special and reserved tokens are not text: not shown (as llama.cpp
     * without --special), still part of the session */
    size_t n = next < n_base ? k3_detok_push(dt, next, piece, sizeof piece) : 0;
    if (n) {
        if (text_append(&text->buf, &text->len, &text->cap, piece, n)) return k3_err(err, "out of memory");
        out->text = text->buf;
        if (on_text) on_text(user, piece, n);
    }
    if (on_progress) on_progress(user, out);
    return 0;
}

/* Checked after every token: for each period p, how far back the tail
 * equals itself shifted by p. It fires when that span is long enough and
 * holds whole cycles, so the answer ends where its loop began a new round
 * ("... of the sanding of the sanding"), not inside a word. */
int generate_loop_period(const int *ids, int n)
{
    for (int p = 1; p <= GENERATE_LOOP_MAX_PERIOD && p * GENERATE_LOOP_MIN_REPEATS <= n; p++) {
        int need = p * GENERATE_LOOP_MIN_REPEATS;
        if (need < GENERATE_LOOP_MIN_TOKENS) need = GENERATE_LOOP_MIN_TOKENS;
        if (need > n) continue;
        int span = p;                     /* ids[n - span .. n) repeat with period p */
        while (span < n && ids[n - 1 - span] == ids[n - 1 - span + p]) span++;
        if (span >= need && span % p == 0) return p;
    }
    return 0;
}

int generate_answer(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids,
                    int max_new, int draft, volatile sig_atomic_t *interrupt_flag, generate_text_fn on_text,
                    generate_progress_fn on_progress, void *user, generate_result *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    out->stopped_on = -1;
    out->pending_token = -1;
    answer_text text = {0};
    if (text_append(&text.buf, &text.len, &text.cap, "", 0)) return k3_err(err, "out of memory");
    out->text = text.buf;
    const k3_tokenizer *tok = k3_model_tokenizer(k3_session_model(s));
    k3_detok dt;
    k3_detok_init(&dt, tok);
    const int n_base = k3_tokenizer_n_base(tok);
    char piece[256];
    const double t0 = (k3_now_ns() / 1e9);
    double t_first = t0, cpu_first = 0;
    int rc = 0;
    draft_context ctx = {0};                      /* the conversation so far, for the drafter */
    draft_policy policy;                          /* how long a draft pays (draft.h) */
    draft_policy_init(&policy);
    while (out->n_generated < max_new) {
        if (interrupt_flag && __atomic_load_n(interrupt_flag, __ATOMIC_RELAXED)) { out->interrupted = 1; break; }
        int sampled[K3_DRAFT_MAX_TOKENS], n_sampled = 0;
        if (out->pending_token >= 0) {          /* feed the previous token (and a draft), then sample anew */
            const int n_ctx = k3_session_n_tokens(s);
            if (n_ctx >= k3_session_max_tokens(s)) { out->context_full = 1; break; }
            /* a draft: no further than the context or the answer's limit allows */
            int room = k3_session_max_tokens(s) - n_ctx - 1, left = max_new - out->n_generated - 1;
            int max_draft = draft == DRAFT_NGRAM ? DRAFT_NGRAM_TOKENS : 0;
            if (max_draft > room) max_draft = room;
            if (max_draft > left) max_draft = left;
            if (max_draft > 0) max_draft = draft_policy_length(&policy, max_draft);
            int guess[K3_DRAFT_MAX_TOKENS];
            int n_guess = draft_propose(&ctx, s, out->pending_token, max_draft, guess, err);
            if (n_guess < 0) { rc = -1; break; }
            draft_outcome d;
            const uint64_t pass_t0 = k3_now_ns();
            if (draft_step(s, sp, out->pending_token, guess, n_guess, stop_ids, n_stop_ids, max_new - out->n_generated,
                           &d, err)) { rc = -1; break; }
            if (draft == DRAFT_NGRAM) draft_policy_update(&policy, n_guess, d.kept_drafts, (k3_now_ns() - pass_t0) * 1e-6);
            out->pending_token = -1;
            out->n_passes++;
            out->n_drafted += n_guess;
            out->n_draft_kept += d.kept_drafts;
            memcpy(sampled, d.tokens, (size_t)d.n_tokens * sizeof *sampled);
            n_sampled = d.n_tokens;
            out->stopped_on = d.stopped_on;
        }
        if (n_sampled == 0 && out->stopped_on < 0) {
            int next = k3_sample(sp, k3_session_logits(s));
            for (int i = 0; i < n_stop_ids; i++)
                if (next == stop_ids[i]) out->stopped_on = next;
            if (out->stopped_on < 0) sampled[n_sampled++] = next;
        }
        for (int j = 0; j < n_sampled && rc == 0; j++) rc = emit_token(out, sampled[j], n_base, &dt, &text,
                                                                       on_text, on_progress, user, t0, &t_first,
                                                                       &cpu_first, err);
        if (rc || out->stopped_on >= 0) break;
        if (n_stop_ids > 0 && (out->loop_period = generate_loop_period(out->ids, out->n_generated))) break;
    }
    draft_context_free(&ctx);
    out->length_limit = rc == 0 && out->n_generated >= max_new && out->stopped_on < 0 && !out->interrupted &&
                        !out->loop_period;
    size_t n = k3_detok_flush(&dt, piece, sizeof piece);
    if (n && text_append(&text.buf, &text.len, &text.cap, piece, n) == 0 && on_text) on_text(user, piece, n);
    out->text = text.buf;
    out->decode_s = out->n_generated ? (k3_now_ns() / 1e9) - t_first : 0;
    out->decode_cpu_s = out->n_generated ? process_cpu_s() - cpu_first : 0;
    return rc;
}

/* generate_thinking's view for the progress callback: the reasoning phase
 * as it is, the answer phase with the reasoning and the framing before its
 * ids (what the session holds). */
typedef struct think_view {
    generate_progress_fn on_progress;
    generate_text_fn on_reasoning, on_text;
    void *user;
    int *ids;                 /* reasoning + framing, then the answer's ids appended */
    int n_prefix, n, cap;
    const char *reasoning;    /* the answer phase: the finished reasoning */
} think_view;

/* Append ids to the view's buffer. */
static int view_push(think_view *v, const int *ids, int n)
{
    if (v->n + n > v->cap) {
        int cap = (v->n + n) * 2 + 64;
        int *g = realloc(v->ids, (size_t)cap * sizeof *g);
        if (!g) return -1;
        v->ids = g;
        v->cap = cap;
    }
    memcpy(v->ids + v->n, ids, (size_t)n * sizeof *ids);
    v->n += n;
    return 0;
}

/* The caller's text callbacks, with the caller's user pointer. */
static void think_text_reasoning(void *user, const char *text, size_t len)
{
    think_view *v = user;
    if (v->on_reasoning) v->on_reasoning(v->user, text, len);
}

static void think_text_answer(void *user, const char *text, size_t len)
{
    think_view *v = user;
    if (v->on_text) v->on_text(v->user, text, len);
}

/* Reasoning phase: the caller sees the tokens so far as reasoning. */
static void think_progress_reasoning(void *user, const generate_result *g)
{
    think_view *v = user;
    if (!v->on_progress) return;
    generate_result view = *g;
    view.in_reasoning = 1;
    view.reasoning = g->text;
    view.text = "";
    v->on_progress(v->user, &view);
}

/* Answer phase: the ids so far after the reasoning and the framing. */
static void think_progress_answer(void *user, const generate_result *g)
{
    think_view *v = user;
    int have = v->n - v->n_prefix;
    if (g->n_generated > have && view_push(v, g->ids + have, g->n_generated - have)) return;
    if (!v->on_progress) return;
    generate_result view = *g;
    view.ids = v->ids;
    view.n_generated = v->n;
    view.reasoning = (char *)v->reasoning;
    v->on_progress(v->user, &view);
}

int generate_thinking(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids, int max_new, int draft,
                      volatile sig_atomic_t *interrupt_flag, generate_text_fn on_reasoning, generate_text_fn on_text,
                      generate_progress_fn on_progress, void *user, generate_result *out, k3_error *err)
{
    const k3_tokenizer *tok = k3_model_tokenizer(k3_session_model(s));
    int think_end[32], close_id = k3_tokenizer_special_id(tok, "<|close|>");
    int n_end = k3_chat_xtml_think_end_ids(tok, think_end, 32, err);
    memset(out, 0, sizeof *out);
    out->stopped_on = out->pending_token = -1;
    if (n_end < 0) return -1;
    think_view v = {.on_progress = on_progress, .on_reasoning = on_reasoning, .on_text = on_text, .user = user};
    generate_result r;
    int rc = generate_answer(s, sp, stop_ids, n_stop_ids, max_new, draft,
                             interrupt_flag, think_text_reasoning, think_progress_reasoning, &v, &r, err);
    const int closed = rc == 0 && !r.interrupted && !r.context_full && r.stopped_on == close_id;
    const int room = k3_session_max_tokens(s) - k3_session_n_tokens(s) - (r.pending_token >= 0) - n_end;
    if (!closed || room <= 0 || r.n_generated + n_end >= max_new) {
        /* no answer: the reasoning is all there is */
        *out = r;
        out->reasoning = r.text;
        out->text = strdup("");
        out->think_open = 1;
        out->length_limit = rc == 0 && !r.interrupted && (r.length_limit || (closed && r.n_generated + n_end >= max_new));
        if (!out->text) rc = k3_err(err, "out of memory");
        return rc;
    }
    /* the template's framing between the reasoning and the answer */
    int feed[33], n_feed = 0;
    if (r.pending_token >= 0) feed[n_feed++] = r.pending_token;
    memcpy(feed + n_feed, think_end, (size_t)n_end * sizeof *feed);
    n_feed += n_end;
    if (view_push(&v, r.ids, r.n_generated) || view_push(&v, think_end, n_end)) {
        free(r.ids);
        free(v.ids);
        *out = (generate_result){.stopped_on = -1, .pending_token = -1};
        out->text = strdup("");
        out->reasoning = r.text;
        return k3_err(err, "out of memory");
    }
    v.n_prefix = v.n;
    v.reasoning = r.text;
    double t_framing = k3_now_ns() / 1e9;
    rc = k3_session_eval(s, feed, n_feed, NULL, err);
    t_framing = k3_now_ns() / 1e9 - t_framing;
    generate_result a;
    if (rc == 0)
        rc = generate_answer(s, sp, stop_ids, n_stop_ids, max_new - r.n_generated - n_end, draft, interrupt_flag,
                             think_text_answer, think_progress_answer, &v, &a, err);
    else
        a = (generate_result){.stopped_on = -1, .pending_token = -1, .text = strdup("")};
    int have = v.n - v.n_prefix;
    if (a.n_generated > have) view_push(&v, a.ids + have, a.n_generated - have);
    *out = a;
    out->ids = v.ids;
    out->n_generated = v.n;
    out->first_token_s = r.first_token_s;
    out->decode_s = r.decode_s + t_framing + a.first_token_s + a.decode_s;
    out->decode_cpu_s = r.decode_cpu_s + a.decode_cpu_s;
    out->n_passes = r.n_passes + 1 + a.n_passes;
    out->n_drafted = r.n_drafted + a.n_drafted;
    out->n_draft_kept = r.n_draft_kept + a.n_draft_kept;
    out->reasoning = r.text;
    out->in_reasoning = 0;
    free(r.ids);
    free(a.ids);
    return rc;
}
