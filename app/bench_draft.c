/* bench_draft.c - `k3 bench`'s speculative decoding figures: greedy decode
 * of the same prompt with --draft none, with n-gram drafts (--draft ngram)
 * and with an oracle draft (the plain run's own next tokens: what a model
 * asked to repeat text that is in its context would draft), measured side by
 * side in one run, alternating, on the same loaded model. The prompt is
 * repetitive (a paragraph of ids, then its first part again), so a model
 * that repeats text gets n-gram drafts; random-weight models do not repeat,
 * which is why the oracle is measured too. Each mode must give the very
 * tokens of the plain run (identical is reported, not assumed). Figures,
 * not tests. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench_draft.h"
#include "draft.h"
#include "k3_util.h"

enum { MODE_NONE, MODE_NGRAM, MODE_ORACLE };

/* Greedy decode of `tokens` tokens after the prompt in mode; fills ids and
 * the pass counts; returns the seconds of decoding, or -1 with err set. */
static double decode_run(k3_model *m, const int *prompt, int n_prompt, int tokens, int mode, const int *oracle,
                         int *ids, int *passes, int *drafted, int *kept, uint64_t *bytes_read, k3_error *err)
{
    k3_model_info info;
    k3_model_get_info(m, &info);
    k3_session *s = k3_session_new(m, n_prompt + tokens + 1, err);
    if (!s) return -1;
    k3_sampler sp = {.top_p = 1.0f};   /* greedy */
    if (k3_sampler_init(&sp, info.vocab_size)) {
        k3_session_free(s);
        k3_err(err, "out of memory");
        return -1;
    }
    draft_context ctx = {0};
    draft_policy policy;
    draft_policy_init(&policy);
    double seconds = -1;
    *passes = *drafted = *kept = 0;
    if (k3_session_eval(s, prompt, n_prompt, NULL, err) == 0) {
        k3_stats before, after;
        k3_stats_read(m, &before);
        const uint64_t t0 = k3_now_ns();
        int n = 0, rc = 0;
        ids[n++] = k3_sample(&sp, k3_session_logits(s));
        while (n < tokens && rc == 0) {
            int guess[K3_DRAFT_MAX_TOKENS], n_guess = 0, max_draft = tokens - n - 1;
            if (max_draft > DRAFT_NGRAM_TOKENS) max_draft = DRAFT_NGRAM_TOKENS;
            if (mode == MODE_NGRAM) {           /* as k3 run and chat do (generate.c) */
                if (max_draft > 0) max_draft = draft_policy_length(&policy, max_draft);
                n_guess = draft_propose(&ctx, s, ids[n - 1], max_draft, guess, err);
                if (n_guess < 0) { rc = -1; break; }
            } else if (mode == MODE_ORACLE) {
                for (; n_guess < max_draft; n_guess++) guess[n_guess] = oracle[n + n_guess];
            }
            draft_outcome d;
            const uint64_t pass_t0 = k3_now_ns();
            rc = draft_step(s, &sp, ids[n - 1], guess, n_guess, NULL, 0, tokens - n, &d, err);
            if (rc) break;
            if (mode == MODE_NGRAM) draft_policy_update(&policy, n_guess, d.kept_drafts, (k3_now_ns() - pass_t0) * 1e-6);
            memcpy(ids + n, d.tokens, (size_t)d.n_tokens * sizeof *ids);
            n += d.n_tokens;
            (*passes)++;
            *drafted += n_guess;
            *kept += d.kept_drafts;
        }
        if (rc == 0) seconds = (k3_now_ns() - t0) * 1e-9;
        k3_stats_read(m, &after);
        *bytes_read = (after.bytes_read_trunk + after.bytes_read_experts + after.bytes_read_other) -
                      (before.bytes_read_trunk + before.bytes_read_experts + before.bytes_read_other);
    }
    draft_context_free(&ctx);
    k3_sampler_free(&sp);
    k3_session_free(s);
    return seconds;
}

int bench_draft(k3_model *m, const int *paragraph, int n_paragraph, int tokens, int rounds, bench_draft_figures *f,
                k3_error *err)
{
    memset(f, 0, sizeof *f);
    /* the paragraph, then its first half again: "repeat after me" */
    const int n_prompt = n_paragraph + n_paragraph / 2;
    int *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    int *ref = malloc((size_t)tokens * sizeof *ref), *ids = malloc((size_t)tokens * sizeof *ids);
    int rc = prompt && ref && ids ? 0 : k3_err(err, "out of memory");
    if (rc == 0) {
        memcpy(prompt, paragraph, (size_t)n_paragraph * sizeof *prompt);
        memcpy(prompt + n_paragraph, paragraph, (size_t)(n_prompt - n_paragraph) * sizeof *prompt);
    }
    f->tokens = tokens;
    f->prompt_tokens = n_prompt;
    f->rounds = rounds;
    f->identical = 1;
    /* the plain run first: the reference tokens (and the oracle's drafts) */
    int passes, drafted, kept;
    uint64_t bytes;
    if (rc == 0 && decode_run(m, prompt, n_prompt, tokens, MODE_NONE, NULL, ref, &passes, &drafted, &kept, &bytes, err) < 0)
        rc = -1;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int mode = MODE_NONE; mode <= MODE_ORACLE && rc == 0; mode++) {   /* alternating */
            double s = decode_run(m, prompt, n_prompt, tokens, mode, ref, ids, &passes, &drafted, &kept, &bytes, err);
            if (s < 0) { rc = -1; break; }
            if (memcmp(ids, ref, (size_t)tokens * sizeof *ids)) f->identical = 0;
            bench_draft_mode *bm = mode == MODE_NONE ? &f->none : mode == MODE_NGRAM ? &f->ngram : &f->oracle;
            bm->seconds += s;
            bm->passes += passes;
            bm->drafted += drafted;
            bm->kept += kept;
            bm->bytes_read += bytes;
        }
    }
    free(prompt);
    free(ref);
    free(ids);
    return rc;
}

/* Tokens per second over all rounds (the first token comes from the prompt:
 * not counted). */
double bench_draft_tok_s(const bench_draft_figures *f, const bench_draft_mode *bm)
{
    return bm->seconds > 0 ? (double)(f->tokens - 1) * f->rounds / bm->seconds : 0;
}

/* Keeps only the first token of a pass (as when the first draft token is
 * wrong): the session advances by one token, as after a plain step. */
static int keep_first(void *user, const float *logits, int n, int vocab)
{
    (void)user, (void)logits, (void)n, (void)vocab;
    return 1;
}

/* CPU time of the whole process (every compute and I/O thread), in ms: on
 * a machine shared with other work it moves less than the wall clock. */
static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Sorts doubles in place (for the median). */
static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bench_draft_pass_cost(k3_model *m, const int *prompt, int n_prompt, int ctx_tokens, int reps, bench_draft_cost *cost,
                          k3_error *err)
{
    enum { K = K3_DRAFT_MAX_TOKENS };
    memset(cost, 0, sizeof *cost);
    cost->reps = reps;
    /* a round feeds K + 1 operations of one kept token each, and the
     * largest pass needs K positions: when the context cannot hold another
     * round, the session starts again from the prompt (outside the timing) */
    if (n_prompt > ctx_tokens - 2 * K - 1) n_prompt = ctx_tokens - 2 * K - 1;
    if (n_prompt < 1)
        return k3_err(err, "a context of %d tokens is too short for a round of draft passes (%d)", ctx_tokens, 2 * K + 2);
    k3_session *s = k3_session_new(m, ctx_tokens, err);
    double *ms = malloc((size_t)(K + 1) * reps * sizeof *ms), *cpu_ms = malloc((size_t)(K + 1) * reps * sizeof *cpu_ms);
    int rc = s && ms && cpu_ms ? 0 : (s ? k3_err(err, "out of memory") : -1);
    if (rc == 0) rc = k3_session_eval(s, prompt, n_prompt, NULL, err);
    /* alternating: a plain step and passes of 1..K tokens, each keeping one
     * token, so every operation runs at about the same context length */
    uint32_t lcg = 12345;
    for (int r = 0; r < reps && rc == 0; r++) {
        /* each round in its own shuffled order: on a shared machine the
         * scheduler takes the CPU away every few ms, and a fixed order lets
         * that land on the same operation round after round */
        int order[K + 1];
        for (int i = 0; i <= K; i++) order[i] = i;
        for (int i = K; i > 0; i--) {
            lcg = lcg * 1664525u + 1013904223u;
            int j = (int)((lcg >> 8) % (uint32_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        if (k3_session_n_tokens(s) + 2 * K + 1 > ctx_tokens) {
            k3_session_reset(s);
            if ((rc = k3_session_eval(s, prompt, n_prompt, NULL, err))) break;
        }
        for (int o = 0; o <= K && rc == 0; o++) {
            const int k = order[o];
            int ids[K];
            for (int i = 0; i < K; i++) ids[i] = prompt[(r * (K + 1) + k + i) % n_prompt];
            const uint64_t t0 = k3_now_ns();
            const double cpu0 = process_cpu_ms();
            rc = k == 0 ? k3_session_eval(s, ids, 1, NULL, err) : k3_session_eval_draft(s, ids, k, keep_first, NULL, err);
            ms[(size_t)k * reps + r] = (k3_now_ns() - t0) * 1e-6;
            cpu_ms[(size_t)k * reps + r] = process_cpu_ms() - cpu0;
        }
    }
    for (int k = 0; k <= K && rc == 0; k++) {
        double *row = ms + (size_t)k * reps;
        qsort(row, (size_t)reps, sizeof *row, cmp_double);
        cost->ms[k] = reps % 2 ? row[reps / 2] : 0.5 * (row[reps / 2 - 1] + row[reps / 2]);
        row = cpu_ms + (size_t)k * reps;
        qsort(row, (size_t)reps, sizeof *row, cmp_double);
        cost->cpu_ms[k] = reps % 2 ? row[reps / 2] : 0.5 * (row[reps / 2 - 1] + row[reps / 2]);
    }
    free(ms);
    free(cpu_ms);
    k3_session_free(s);
    return rc;
}
