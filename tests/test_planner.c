/* test_planner.c - properties of the memory planner (k3_plan_make) on
 * thousands of random inputs from a fixed seed: a plan never uses more than
 * its budget, always has at least top_k expert slots (or every expert), and
 * its ring slot holds every unpinned trunk unit; a budget is refused only
 * when it is below the minimum the plan reports. The prompt chunk it picks
 * lies in its range, its scratch is in the fixed claim, and that scratch
 * beyond the smallest chunk's takes at most an eighth of what the budget
 * leaves above the smallest chunk's minimum. */
#include <string.h>
#include "planner.h"
#include "test.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* xorshift64*: deterministic, so a failure reproduces exactly */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static uint64_t rnd_range(uint64_t lo, uint64_t hi) { return lo + rnd() % (hi - lo + 1); }

/* Trunk units of one random model: often similar sizes (real layers), with
 * a few outliers (the head, dense first layers). */
static void random_trunk(uint64_t *bytes, int n)
{
    uint64_t base = rnd_range(1 << 16, 64ull << 20);
    for (int i = 0; i < n; i++) {
        switch (rnd() % 4) {
        case 0: bytes[i] = rnd_range(1, base * 4); break;
        case 1: bytes[i] = base / (1 + rnd() % 8); break;
        default: bytes[i] = base + rnd() % (base / 8 + 1); break;
        }
    }
}

int main(void)
{
    enum { N_PLANS = 20000, MAX_TRUNK = 64 };
    uint64_t trunk[MAX_TRUNK];
    int over_budget = 0, few_slots = 0, small_ring = 0, bad_refusal = 0, bad_sum = 0, refused = 0, streamed = 0;
    int bad_chunk = 0, big_chunks = 0, min_chunks = 0, spans = 0;
    char first_chunk[256] = "";
    char first[256] = "";
    for (int it = 0; it < N_PLANS; it++) {
        const int n_trunk = (int)rnd_range(1, MAX_TRUNK);
        random_trunk(trunk, n_trunk);
        uint64_t total = 0;
        for (int i = 0; i < n_trunk; i++) total += trunk[i];
        const int n_experts = rnd() % 8 == 0 ? 0 : (int)rnd_range(1, 4096);
        const uint64_t expert_bytes = n_experts ? rnd_range(4096, 32ull << 20) : 0;
        const uint64_t fixed = rnd_range(1 << 20, 512ull << 20);
        total += fixed + (uint64_t)n_experts * expert_bytes;
        k3_plan_input in = {.budget_bytes = rnd() % 16 == 0 ? 0 : rnd_range(1, total + total / 4),
                            .fixed_bytes = fixed, .state_bytes = fixed / 2, .ctx_tokens = 4096,
                            .n_trunk = n_trunk, .trunk_bytes = trunk, .expert_bytes = expert_bytes,
                            .n_experts_total = n_experts, .top_k = (int)rnd_range(1, 16),
                            .chunk_min = 32, .chunk_max = (int)rnd_range(32, 4096),
                            .chunk_token_bytes = rnd() % 4 == 0 ? 0 : rnd_range(1024, rnd() % 2 ? 1 << 20 : 1ull << 30),
                            .chunk_room_bytes = rnd_range(0, 8ull << 30)};
        if (in.chunk_token_bytes && rnd() % 2) in.span_token_bytes = rnd_range(64, in.chunk_token_bytes);
        k3_plan p, at_min;
        k3_error err;
        k3_plan_input smallest = in;      /* the same plan at the smallest chunk */
        smallest.chunk_token_bytes = 0;
        smallest.span_token_bytes = 0;
        const int min_ok = k3_plan_make(&smallest, &at_min, &err) == 0;
        const int min_slots = in.top_k < n_experts ? in.top_k : n_experts;
        if (k3_plan_make(&in, &p, &err)) {
            refused++;
            if (in.budget_bytes == 0 || in.budget_bytes >= p.min_budget_bytes || min_ok) bad_refusal++;
            k3_plan_free(&p);
            k3_plan_free(&at_min);
            continue;
        }
        {
            /* a span: more tokens per pass than the chunk scratch holds (tile) */
            const uint64_t span = p.chunk_tokens > p.tile_tokens ? (uint64_t)p.chunk_tokens : 0;
            const uint64_t extra = (uint64_t)(p.tile_tokens - in.chunk_min) * in.chunk_token_bytes +
                                   span * in.span_token_bytes;
            const uint64_t room = !min_ok ? 0
                                  : in.budget_bytes && !at_min.all_resident ? in.budget_bytes - at_min.min_budget_bytes
                                  : in.budget_bytes ? in.budget_bytes - at_min.resident_bytes : in.chunk_room_bytes;
            const char *why = NULL;
            if (!min_ok) why = "planned at its chunk but refused at the smallest";
            else if (p.chunk_tokens < in.chunk_min || p.chunk_tokens > in.chunk_max) why = "chunk outside its range";
            else if (p.tile_tokens < in.chunk_min || p.tile_tokens > p.chunk_tokens) why = "tile outside its range";
            else if (span && !in.span_token_bytes) why = "a span without span scratch";
            else if (p.fixed_bytes != fixed + extra) why = "the chunk's scratch is not in the fixed claim";
            else if (extra > room / 8) why = "the chunk's scratch takes more than an eighth of the room";
            else if (in.chunk_token_bytes && p.tile_tokens < (span ? p.chunk_tokens : in.chunk_max) &&
                     extra + in.chunk_token_bytes <= room / 8) why = "a bigger chunk would have fitted";
            else if (in.span_token_bytes && p.chunk_tokens < in.chunk_max &&
                     (span ? (span + 1) * in.span_token_bytes
                           : (uint64_t)(p.chunk_tokens + 1) * in.span_token_bytes) <= room / 8)
                why = "a longer span would have fitted";
            if (why && !bad_chunk++)
                snprintf(first_chunk, sizeof first_chunk, "plan %d: %s (chunk %d of %d..%d, %llu bytes per token)", it,
                         why, p.chunk_tokens, in.chunk_min, in.chunk_max, (unsigned long long)in.chunk_token_bytes);
            big_chunks += p.chunk_tokens == in.chunk_max && in.chunk_max > in.chunk_min;
            spans += span > 0;
            min_chunks += p.chunk_tokens == in.chunk_min && in.chunk_token_bytes && in.chunk_max > in.chunk_min;
        }
        k3_plan_free(&at_min);
        uint64_t pinned_sum = 0, largest_unpinned = 0;
        for (int i = 0; i < n_trunk; i++) {
            if (p.pinned[i]) pinned_sum += trunk[i];
            else if (trunk[i] > largest_unpinned) largest_unpinned = trunk[i];
        }
        const uint64_t used = p.fixed_bytes + pinned_sum + (uint64_t)p.n_ring * p.ring_slot_bytes +
                              (uint64_t)p.n_expert_slots * expert_bytes;
        if (in.budget_bytes && used > in.budget_bytes) {
            if (!over_budget++)
                snprintf(first, sizeof first, "plan %d: %llu bytes planned in a budget of %llu", it,
                         (unsigned long long)used, (unsigned long long)in.budget_bytes);
        }
        if (p.n_expert_slots < min_slots || p.n_expert_slots > n_experts) few_slots++;
        if (largest_unpinned && (p.n_ring < 2 || p.ring_slot_bytes < largest_unpinned)) small_ring++;
        if (pinned_sum != p.pinned_bytes) bad_sum++;
        streamed += p.n_pinned < n_trunk;
        k3_plan_free(&p);
    }
    TEST_BEGIN("planner_never_plans_past_the_budget");
    CHECK(over_budget == 0, "%d of %d plans over budget; first: %s", over_budget, N_PLANS, first);
    TEST_END();
    TEST_BEGIN("planner_keeps_top_k_expert_slots");
    CHECK(few_slots == 0, "%d plans with fewer than top_k (or more than all) expert slots", few_slots);
    TEST_END();
    TEST_BEGIN("planner_ring_holds_every_unpinned_unit");
    CHECK(small_ring == 0, "%d plans whose ring cannot hold an unpinned unit", small_ring);
    CHECK(bad_sum == 0, "%d plans whose pinned_bytes is not the sum of pinned units", bad_sum);
    TEST_END();
    TEST_BEGIN("planner_refuses_only_below_its_minimum");
    CHECK(bad_refusal == 0, "%d budgets at or above the reported minimum were refused", bad_refusal);
    /* the random inputs must reach every branch, or the checks above say little */
    CHECK(refused > 100 && streamed > 1000, "inputs too easy: %d refused, %d with streamed trunk", refused, streamed);
    TEST_END();
    TEST_BEGIN("planner_sizes_the_prompt_chunk_from_the_budget");
    CHECK(bad_chunk == 0, "%d plans with a wrong chunk; first: %s", bad_chunk, first_chunk);
    CHECK(big_chunks > 100 && min_chunks > 100 && spans > 100,
          "inputs too easy: %d at the largest chunk, %d at the smallest, %d spans", big_chunks, min_chunks, spans);
    TEST_END();
    printf("# %d random plans: %d refused, %d with a streamed trunk\n", N_PLANS, refused, streamed);
    TEST_EXIT();
}
