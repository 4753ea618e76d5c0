/* test_plan.c - the expert hit rate k3 plan predicts for uniform routing
 * (the LRU closed form) against the runtime's own cache replayed on
 * uniform random traces (k3_expert_cache_replay, the code trace_replay and
 * k3 plan --trace use), over cache sizes from "thrashes" to "holds all":
 * within 6 points (measured at most 5.5; the naive slots/experts is off by
 * up to 8 and predicts hits where LRU thrashes). */
#include <stdint.h>
#include <stdlib.h>
#include "expert_cache.h"
#include "test.h"

/* A uniform trace: each token, each layer, top_k distinct experts. */
static k3_cache_lookup *uniform_trace(int tokens, int layers, int experts, int top_k, int *n)
{
    k3_cache_lookup *v = malloc((size_t)tokens * layers * top_k * sizeof *v);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    *n = 0;
    for (int t = 0; t < tokens; t++)
        for (int l = 0; l < layers; l++) {
            int picked[64], np = 0;
            while (np < top_k) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                int e = (int)(x % (uint64_t)experts), dup = 0;
                for (int i = 0; i < np; i++) dup |= picked[i] == e;
                if (dup) continue;
                picked[np++] = e;
                v[(*n)++] = (k3_cache_lookup){t, l, e};
            }
        }
    return v;
}

int main(void)
{
    static const struct { int layers, experts, top_k; } shapes[] = {{11, 24, 4}, {11, 256, 16}, {26, 64, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int L = shapes[s].layers, E = shapes[s].experts, k = shapes[s].top_k;
        char name[96];
        snprintf(name, sizeof name, "uniform_hit_rate_matches_lru_replay_%dx%d_top%d", L, E, k);
        TEST_BEGIN(name);
        int n;
        k3_cache_lookup *v = uniform_trace(400, L, E, k, &n);
        const double fracs[] = {0.05, 0.2, 0.4, 0.6, 0.8, 0.95};
        for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; f++) {
            int slots = (int)(fracs[f] * L * E);
            if (slots < k) slots = k;
            double sim = k3_expert_cache_replay(v, n, slots, K3_CACHE_LRU, L, E, 0);
            double got = k3_expert_cache_uniform_hit_rate(L, E, k, slots);
            if (getenv("K3_TEST_VERBOSE")) printf("  %dx%d top-%d, %d slots: closed %.3f replay %.3f\n", L, E, k, slots, got, sim);
            CHECK(fabs(got - sim) < 0.06, "%d slots of %d: closed form %.3f, LRU replay %.3f", slots, L * E, got, sim);
        }
        CHECK(k3_expert_cache_uniform_hit_rate(L, E, k, L * E) == 1, "all cached must be 1");
        CHECK(k3_expert_cache_uniform_hit_rate(L, E, k, L * k / 2) == 0, "below one token's lookups must be 0");
        free(v);
        TEST_END();
    }
    TEST_EXIT();
}
