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
