/* bench_draft.h - speculative decoding figures of `k3 bench` (bench_draft.c). */
#ifndef K3_BENCH_DRAFT_H
#define K3_BENCH_DRAFT_H

#include "k3.h"

/* One mode's totals over all rounds. */
typedef struct bench_draft_mode {
    double seconds;          /* decode time after the first token */
    int passes, drafted, kept;
    uint64_t bytes_read;     /* from disk, while decoding */
} bench_draft_mode;

typedef struct bench_draft_figures {
    int tokens, prompt_tokens, rounds;
    int identical;           /* every mode gave the plain run's tokens */
    bench_draft_mode none, ngram, oracle;
} bench_draft_figures;

/* Decode `tokens` greedy tokens after a repetitive prompt made from the
 * paragraph, `rounds` times in each mode (none, ngram, oracle), alternating.
 * Returns 0, or -1 with err set. */
int bench_draft(k3_model *m, const int *paragraph, int n_paragraph, int tokens, int rounds, bench_draft_figures *f,
                k3_error *err);
double bench_draft_tok_s(const bench_draft_figures *f, const bench_draft_mode *bm);

/* What a verify pass costs against a plain step: the median wall time of a
 * plain one-token step (ms[0]) and of a draft pass of k tokens that keeps
 * one (ms[k], k = 1..K3_DRAFT_MAX_TOKENS), over `reps` alternating rounds
 * after the prompt, in a session of ctx_tokens (started again from the
 * prompt when full); cpu_ms the same in CPU time of the process. A pass that keeps more costs the same pass plus less
 * replay, so this is the pass's price when its drafts are rejected. */
typedef struct bench_draft_cost {
    int reps;
    double ms[K3_DRAFT_MAX_TOKENS + 1], cpu_ms[K3_DRAFT_MAX_TOKENS + 1];
} bench_draft_cost;
int bench_draft_pass_cost(k3_model *m, const int *prompt, int n_prompt, int ctx_tokens, int reps, bench_draft_cost *cost,
                          k3_error *err);

#endif
