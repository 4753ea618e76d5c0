/* sampler.c - greedy, temperature, top-k, top-p and min-p sampling with a
 * seeded generator (see k3_sampler.h). */
#include <math.h>
#include <stdlib.h>
#include "k3_sampler.h"
#include "k3_util.h"

/* xorshift64*: small, fast, and the same sequence on every machine. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1) with 24 bits. */
static float rng_uniform(uint64_t *state) { return (float)(rng_next(state) >> 40) / 16777216.0f; }

int k3_sampler_init(k3_sampler *s, int n_vocab)
{
    s->n_vocab = n_vocab;
    s->rng_state = s->seed ^ 0x9E3779B97F4A7C15ull;
    if (!s->rng_state) s->rng_state = 1;
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    s->order = malloc((size_t)n_vocab * sizeof *s->order);
    return s->probs && s->order ? 0 : -1;
}

void k3_sampler_free(k3_sampler *s)
{
    free(s->probs);
    free(s->order);
    s->probs = NULL;
    s->order = NULL;
}

/* Descending probability, ascending id on ties (deterministic). */
static int by_prob_desc(const void *a, const void *b, void *probs_v)
{
    const float *probs = probs_v;
    int x = *(const int *)a, y = *(const int *)b;
    if (probs[x] != probs[y]) return probs[x] > probs[y] ? -1 : 1;
    return x - y;
}

/* The test hook K3_TEST_FORCE_IDS (test_hooks.c): the next forced id, or -1
 * when there is none (left). Tests only: one sequence per process. */
static int forced_id(int n_vocab)
{
    static const char *at;
    static int started;
    if (!started) {
        started = 1;
        at = k3_test_hook_text("K3_TEST_FORCE_IDS");
    }
    char *end;
    long id = at && *at ? strtol(at, &end, 10) : -1;
    if (id < 0 || at == end) return at = NULL, -1;
    at = end;
    return id < n_vocab ? (int)id : -1;
}

int k3_sample(k3_sampler *s, const float *logits)
{
    const int n = s->n_vocab;
    int forced = forced_id(n);
    if (forced >= 0) return forced;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->temperature <= 0.0f) return best;

    /* softmax at temperature over all tokens */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        s->probs[i] = expf((logits[i] - logits[best]) / s->temperature);
        sum += s->probs[i];
    }
    for (int i = 0; i < n; i++) s->probs[i] = (float)(s->probs[i] / sum);

    /* candidates: sorted by probability; keep the top-k */
    int m = 0;
    for (int i = 0; i < n; i++) s->order[m++] = i;
    qsort_r(s->order, (size_t)m, sizeof *s->order, by_prob_desc, s->probs);
    if (s->top_k > 0 && s->top_k < m) m = s->top_k;
    /* min-p: drop tokens below min_p * p(best) */
    if (s->min_p > 0.0f) {
        float floor_p = s->min_p * s->probs[s->order[0]];
        int keep = 1;
        while (keep < m && s->probs[s->order[keep]] >= floor_p) keep++;
        m = keep;
    }
    /* top-p: the smallest prefix whose mass reaches top_p (of the kept mass) */
    double kept = 0.0;
    for (int i = 0; i < m; i++) kept += s->probs[s->order[i]];
    if (s->top_p > 0.0f && s->top_p < 1.0f) {
        double acc = 0.0;
        int keep = 0;
        while (keep < m) {
            acc += s->probs[s->order[keep++]];
            if (acc >= s->top_p * kept) break;
        }
        m = keep;
        kept = acc;
    }
    double r = rng_uniform(&s->rng_state) * kept, acc = 0.0;
    for (int i = 0; i < m; i++) {
        acc += s->probs[s->order[i]];
        if (r < acc) return s->order[i];
    }
    return s->order[m - 1];
}
