/* test_sampler.c - the sampler: greedy is argmax (lowest id on ties), a seed
 * gives the same draws, the filters keep exactly the tokens they should, and
 * at temperature 1 the draw frequencies follow the softmax. */
#include <math.h>
#include <string.h>
#include "k3_sampler.h"
#include "test.h"

static int draw_n(k3_sampler *s, const float *logits, int n, int *counts, int vocab)
{
    memset(counts, 0, (size_t)vocab * sizeof *counts);
    int last = -1;
    for (int i = 0; i < n; i++) {
        last = k3_sample(s, logits);
        if (last >= 0 && last < vocab) counts[last]++;
    }
    return last;
}

int main(void)
{
    enum { V = 8 };
    const float logits[V] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f, 2.5f, 0.0f};
    int counts[V];

    TEST_BEGIN("greedy_is_argmax_lowest_id_on_ties");
    k3_sampler g = {.temperature = 0, .top_p = 1};
    CHECK(k3_sampler_init(&g, V) == 0, "init");
    CHECK(k3_sample(&g, logits) == 1, "greedy picked %d, want 1 (tie with 3)", k3_sample(&g, logits));
    k3_sampler_free(&g);
    TEST_END();

    TEST_BEGIN("same_seed_same_draws_other_seed_other_draws");
    int a[64], b[64], c[64];
    for (int run = 0; run < 3; run++) {
        k3_sampler s = {.temperature = 1.0f, .top_p = 1, .seed = run == 2 ? 43 : 42};
        k3_sampler_init(&s, V);
        for (int i = 0; i < 64; i++) (run == 0 ? a : run == 1 ? b : c)[i] = k3_sample(&s, logits);
        k3_sampler_free(&s);
    }
    CHECK(!memcmp(a, b, sizeof a), "seed 42 twice differs");
    CHECK(memcmp(a, c, sizeof a) != 0, "seeds 42 and 43 gave the same 64 draws");
    TEST_END();

    TEST_BEGIN("filters_keep_exactly_their_tokens");
    k3_sampler k = {.temperature = 5.0f, .top_k = 2, .top_p = 1, .seed = 1};
    k3_sampler_init(&k, V);
    draw_n(&k, logits, 4000, counts, V);
    CHECK(counts[1] + counts[3] == 4000 && counts[1] > 1500 && counts[3] > 1500, "top-k 2: %d %d of 4000", counts[1], counts[3]);
    k3_sampler_free(&k);
    /* softmax at T=1: p(1)=p(3)=0.31, p(6)=0.19, p(2)=0.11 ... top-p 0.6 keeps {1, 3} only (0.62) */
    k3_sampler p = {.temperature = 1.0f, .top_p = 0.6f, .seed = 2};
    k3_sampler_init(&p, V);
    draw_n(&p, logits, 4000, counts, V);
    CHECK(counts[1] + counts[3] == 4000, "top-p 0.6 drew outside {1,3}: %d", 4000 - counts[1] - counts[3]);
    k3_sampler_free(&p);
    /* min-p 0.5: keeps tokens with p >= 0.5 p(best): 1, 3, 6 (e^-0.5 = 0.61) */
    k3_sampler mp = {.temperature = 1.0f, .top_p = 1, .min_p = 0.5f, .seed = 3};
    k3_sampler_init(&mp, V);
    draw_n(&mp, logits, 4000, counts, V);
    CHECK(counts[1] + counts[3] + counts[6] == 4000 && counts[6] > 0, "min-p 0.5: %d %d %d", counts[1], counts[3], counts[6]);
    k3_sampler_free(&mp);
    TEST_END();

    TEST_BEGIN("temperature_1_frequencies_follow_softmax");
    k3_sampler t = {.temperature = 1.0f, .top_p = 1, .seed = 7};
    k3_sampler_init(&t, V);
    const int N = 40000;
    draw_n(&t, logits, N, counts, V);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(logits[i]);
    for (int i = 0; i < V; i++) {
        double p_i = exp(logits[i]) / z, sd = sqrt(N * p_i * (1 - p_i));
        CHECK(fabs(counts[i] - N * p_i) <= 5 * sd + 1, "token %d: %d draws, expected %.0f +- %.0f", i, counts[i], N * p_i, sd);
    }
    k3_sampler_free(&t);
    TEST_END();
    TEST_EXIT();
}
