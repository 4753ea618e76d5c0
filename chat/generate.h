/* generate.h - the token loop shared by `k3 run` and `k3 chat`: sample,
 * stream whole UTF-8 characters (special and reserved tokens are not shown),
 * feed the token back, stop on a stop id, the token limit, a full context or
 * an interrupt flag, and time it all. */
#ifndef K3_GENERATE_H
#define K3_GENERATE_H

#include <signal.h>
#include "k3.h"

typedef struct generate_result {
    int n_generated;          /* tokens produced (stop token excluded) */
    int stopped_on;           /* the stop id that ended it, or -1 */
    int interrupted;          /* the interrupt flag ended it */
    int context_full;         /* the context limit ended it */
    int length_limit;         /* max_new ended it (an answer cut by -n) */
    int loop_period;          /* the loop rule ended it: the repeated cycle's length in tokens, else 0 */
    int pending_token;        /* last sampled token not yet fed to the session, or -1 */
    double first_token_s;     /* seconds from start to the first token */
    double decode_s;          /* seconds from the first token to the end */
    double decode_cpu_s;      /* CPU seconds of the process over the same span (every thread) */
    char *text;               /* malloc'd answer text (UTF-8) */
    int *ids;                 /* malloc'd: every token produced, in order (the last may be pending) */
    /* speculative decoding (--draft ngram): passes over the model after the
     * first token, draft tokens verified and kept */
    int n_passes, n_drafted, n_draft_kept;
    /* thinking (generate_thinking): */
    char *reasoning;          /* malloc'd reasoning text, or NULL (generate_answer) */
    int in_reasoning;         /* progress: the tokens so far are still reasoning */
    int think_open;           /* it ended inside the think block (no answer): close(think)
                               * open(response) must come before the closing ids */
} generate_result;

/* The loop rule: an answer whose last tokens repeat one cycle of at most
 * GENERATE_LOOP_MAX_PERIOD tokens, at least GENERATE_LOOP_MIN_REPEATS times
 * in a row and over at least GENERATE_LOOP_MIN_TOKENS tokens, has stopped
 * saying anything new ("of the sanding of the sanding of ..."): it ends
 * there instead of running to the length limit. Greedy decoding falls into
 * such loops with real models too; a repetition penalty would also change
 * every answer that legitimately repeats (copying a passage, code). */
#define GENERATE_LOOP_MAX_PERIOD 64
#define GENERATE_LOOP_MIN_REPEATS 4
#define GENERATE_LOOP_MIN_TOKENS 48

/* The length of the cycle the last tokens of ids[0..n) repeat under the
 * loop rule, or 0. */
int generate_loop_period(const int *ids, int n);

/* Called with each complete piece of text as it is produced. */
typedef void (*generate_text_fn)(void *user, const char *text, size_t len);
/* Called after each token with the answer so far (ids, n_generated, text):
 * the chat keeps a streaming answer durable with it. */
typedef void (*generate_progress_fn)(void *user, const generate_result *so_far);

/* Generate up to max_new tokens from the session's current logits, with
 * drafts (draft = DRAFT_NGRAM, draft.h: each pass feeds the pending token and
 * the n-gram draft after it, and keeps what sampling confirms: the same
 * tokens and session as DRAFT_NONE, in fewer passes when drafts hit). The last
 * sampled token is left pending (not fed) so a stop or limit costs no extra
 * forward pass; the caller feeds it when the conversation goes on. With
 * stop ids the loop rule applies too (out->loop_period); without any (a
 * caller that ignores the end of message, as a benchmark) it does not. Returns
 * 0, or -1 with err set (the result still describes what was produced). */
int generate_answer(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids,
                    int max_new, int draft, volatile sig_atomic_t *interrupt_flag, generate_text_fn on_text,
                    generate_progress_fn on_progress, void *user, generate_result *out, k3_error *err);

/* A thinking answer (Kimi K3 with --think; the prompt ends with open(think)):
 * the tokens up to the model's <|close|> are the reasoning (on_reasoning sees
 * its text), then close(think) open(response) is fed as the template frames
 * it and the tokens after it are the answer (on_text). out->ids holds every
 * id of the answer as the session has it (reasoning, framing, answer; the
 * last pending), out->text the answer and out->reasoning the reasoning
 * text; on_progress sees the same merged view (in_reasoning set while
 * reasoning). When it ends inside the think block (-n, a stop id other than
 * <|close|>, an interrupt) there is no answer and out->think_open is set.
 * max_new counts the reasoning and the answer together. */
int generate_thinking(k3_session *s, k3_sampler *sp, const int *stop_ids, int n_stop_ids, int max_new, int draft,
                      volatile sig_atomic_t *interrupt_flag, generate_text_fn on_reasoning, generate_text_fn on_text,
                      generate_progress_fn on_progress, void *user, generate_result *out, k3_error *err);

#endif
