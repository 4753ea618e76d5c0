/* test_planner.c - properties of the memory planner (k3_plan_make) on
 * thousands of random inputs from a fixed seed: a plan never uses more than
 * its budget, always has at least top_k expert slots (or every expert), and
 * its ring slot holds every unpinned trunk unit; a budget is refused only
 * when it is below the minimum the plan reports. The prompt chunk it picks
 * lies in its range, its scratch is in the fixed claim, and that scratch
 * beyond the smallest chunk's takes at most an eighth of what the budget
 * leaves above the smallest chunk's minimum.
 *
 * With costs (k3_plan_costs) the split between pinned trunk and expert
 * slots goes by what a decode token is predicted to wait for: hand-made
 * cases where pinning a unit beats the slots it costs and where it does
 * not, the wait model on a case worked by hand, the prompt chunk held back
 * when its scratch would take slots decode needs (and not when they do not
 * matter), and on random inputs a weighed plan never predicted to wait
 * more than the fixed order's.
 *
 * The speeds behind those costs (k3_plan_costs_at): a slow disk pins more
 * trunk than a fast disk with slow kernels, which gives the bytes to expert
 * slots; the same speeds give the same plan, which records them. */
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

/* A hit rate proportional to the slots (every expert equally likely): the
 * hand-made cases' model, cheap enough for thousands of random plans. */
static double linear_hit_rate(int n_slots, void *ctx)
{
    const int total = *(const int *)ctx;
    return n_slots >= total ? 1 : (double)n_slots / total;
}

/* A hit rate that slots do not change (too few for any reuse). */
static double flat_hit_rate(int n_slots, void *ctx)
{
    (void)n_slots;
    (void)ctx;
    return 0;
}

enum { HAND_UNITS = 6 };

/* Six trunk units of 100 MB, 2 MoE layers of 64 experts of 4 MB, top 8,
 * disk 1 GB/s; unit_s of compute in each unit; the budget holds the fixed
 * claim, `pinned` units, 2 ring slots and `slots` expert slots. */
static k3_plan_input hand_case(uint64_t *trunk, double *compute_s, double unit_s, k3_plan_costs *costs, int *total,
                               int pinned, int slots)
{
    const uint64_t mb = 1000000;
    for (int i = 0; i < HAND_UNITS; i++) {
        trunk[i] = 100 * mb;
        compute_s[i] = unit_s;
    }
    *total = 128;
    *costs = (k3_plan_costs){.trunk_read_bytes_per_s = 1e9, .expert_read_bytes_per_s = 1e9,
                             .unit_compute_s = compute_s, .n_moe_layers = 2, .n_experts_per_layer = 64,
                             .hit_rate = linear_hit_rate, .hit_rate_ctx = total};
    return (k3_plan_input){.budget_bytes = 10 * mb + (uint64_t)pinned * 100 * mb + 200 * mb + (uint64_t)slots * 4 * mb,
                           .fixed_bytes = 10 * mb, .state_bytes = 5 * mb, .ctx_tokens = 4096, .n_trunk = HAND_UNITS,
                           .trunk_bytes = trunk, .expert_bytes = 4 * mb, .n_experts_total = 128, .top_k = 8,
                           .chunk_min = 32, .chunk_max = 32, .costs = costs};
}

/* The hand-made cases: the fixed order's plan (costs NULL) against the
 * weighed one. */
static void check_split_by_wait(void)
{
    uint64_t trunk[HAND_UNITS];
    double compute_s[HAND_UNITS];
    k3_plan_costs costs;
    int total;
    k3_error err;
    k3_plan fixed_order, weighed, again;

    /* 1 ms of compute a unit: a streamed unit's 0.1 s read cannot hide, and
     * the 25 slots its bytes hold save 25/128 of 16 lookups of 4 MB (12.5
     * ms): pin it */
    TEST_BEGIN("planner_pins_a_unit_whose_read_would_wait");
    k3_plan_input in = hand_case(trunk, compute_s, 0.001, &costs, &total, 2, 20);
    k3_plan_input plain = in;
    plain.costs = NULL;
    int ok = k3_plan_make(&plain, &fixed_order, &err) == 0 && k3_plan_make(&in, &weighed, &err) == 0;
    CHECK(ok, "planning failed: %s", err.msg);
    if (ok) {
        CHECK(fixed_order.n_pinned == 2, "the fixed order pinned %d of 6, the case wants 2", fixed_order.n_pinned);
        CHECK(weighed.n_pinned == fixed_order.n_pinned, "pinned %d, not the %d that fit (%s)", weighed.n_pinned,
              fixed_order.n_pinned, weighed.split_why);
        uint8_t fewer[HAND_UNITS] = {1, 0, 0, 0, 0, 0};  /* one unit fewer: its 100 MB as 25 slots */
        const double fewer_wait_s = k3_plan_token_wait_s(&in, fewer, weighed.n_expert_slots + 25, NULL);
        CHECK(weighed.token_wait_s < fewer_wait_s - 0.05, "predicted wait %.4f s, one unit fewer %.4f s",
              weighed.token_wait_s, fewer_wait_s);
    }
    TEST_END();
    k3_plan_free(&fixed_order);
    k3_plan_free(&weighed);

    /* 1 s of compute a unit hides every ring read; then slots are all that
     * decode waits for, and the units' bytes go to them */
    TEST_BEGIN("planner_gives_slots_the_bytes_of_a_unit_whose_read_hides");
    in = hand_case(trunk, compute_s, 1.0, &costs, &total, 2, 20);
    plain = in;
    plain.costs = NULL;
    ok = k3_plan_make(&plain, &fixed_order, &err) == 0 && k3_plan_make(&in, &weighed, &err) == 0 &&
         k3_plan_make(&in, &again, &err) == 0;
    CHECK(ok, "planning failed: %s", err.msg);
    if (ok) {
        const double fixed_wait_s = k3_plan_token_wait_s(&in, fixed_order.pinned, fixed_order.n_expert_slots, NULL);
        CHECK(weighed.n_pinned == 0 && weighed.n_expert_slots == fixed_order.n_expert_slots + 50,
              "pinned %d with %d slots; the fixed order %d with %d (%s)", weighed.n_pinned, weighed.n_expert_slots,
              fixed_order.n_pinned, fixed_order.n_expert_slots, weighed.split_why);
        CHECK(weighed.token_wait_s < fixed_wait_s - 0.01, "predicted wait %.4f s against the fixed order's %.4f s",
              weighed.token_wait_s, fixed_wait_s);
        CHECK(again.n_pinned == weighed.n_pinned && again.n_expert_slots == weighed.n_expert_slots &&
              memcmp(again.pinned, weighed.pinned, HAND_UNITS) == 0, "the same inputs planned twice differ");
    }
    TEST_END();
    k3_plan_free(&fixed_order);
    k3_plan_free(&weighed);
    k3_plan_free(&again);

    /* the wait model by hand: units 0-4 pinned (1 ms each), unit 5
     * streamed (0.1 s at 1 GB/s): with 2 slots the reader reads it token
     * after token without a pause, so a token lasts its 0.1 s read, 94 ms
     * more than the 6 ms of compute; no expert slot: 16 misses of 4 MB at
     * 1 GB/s wait 64 ms more */
    TEST_BEGIN("planner_wait_model_counts_unhidden_reads");
    in = hand_case(trunk, compute_s, 0.001, &costs, &total, 2, 20);
    uint8_t five[HAND_UNITS] = {1, 1, 1, 1, 1, 0}, all[HAND_UNITS] = {1, 1, 1, 1, 1, 1};
    double token_s = 0;
    const double wait_s = k3_plan_token_wait_s(&in, five, 0, &token_s);
    CHECK(fabs(wait_s - (0.094 + 0.064)) < 1e-6, "wait %.6f s, by hand 0.158 s", wait_s);
    CHECK(fabs(token_s - (0.006 + 0.158)) < 1e-6, "token %.6f s, by hand 0.164 s", token_s);
    CHECK(k3_plan_token_wait_s(&in, all, 128, NULL) == 0, "everything resident still waits");
    TEST_END();
}

/* The prompt chunk against decode's expert slots: with slots that lower
 * decode's wait, the chunk's scratch is held back to within 1% of decode's
 * predicted token; with slots that change nothing, it grows as before. */
static void check_chunk_leaves_slots(void)
{
    uint64_t trunk[HAND_UNITS];
    double compute_s[HAND_UNITS];
    k3_plan_costs costs;
    int total;
    k3_error err;
    k3_plan before, weighed, smallest;
    TEST_BEGIN("planner_chunk_scratch_leaves_decode_its_slots");
    /* every unit pinned, 100 of 128 slots and 3 MB beside them; the room
     * above the minimum (242 MB) is 771 MB, its eighth 96 MB: 24 slots,
     * 60% more to wait for at 1 ms of compute a unit */
    k3_plan_input in = hand_case(trunk, compute_s, 0.001, &costs, &total, 6, 50);
    in.budget_bytes += 3000000;
    in.chunk_max = 4096;
    in.chunk_token_bytes = 64 * 1024;
    k3_plan_input plain = in, small = in;
    plain.costs = NULL;
    small.chunk_token_bytes = 0;
    int ok = k3_plan_make(&plain, &before, &err) == 0 && k3_plan_make(&in, &weighed, &err) == 0 &&
             k3_plan_make(&small, &smallest, &err) == 0;
    CHECK(ok, "planning failed: %s", err.msg);
    if (ok) {
        CHECK(before.chunk_tokens > weighed.chunk_tokens && before.n_expert_slots < weighed.n_expert_slots,
              "chunk %d with %d slots, without costs %d with %d", weighed.chunk_tokens, weighed.n_expert_slots,
              before.chunk_tokens, before.n_expert_slots);
        CHECK(weighed.token_s <= smallest.token_s * 1.01 + 1e-12,
              "decode's predicted token %.5f s, %.5f s at the smallest chunk", weighed.token_s, smallest.token_s);
        CHECK(weighed.chunk_tokens > in.chunk_min, "the chunk kept none of what decode leaves (%d tokens)",
              weighed.chunk_tokens);
    }
    TEST_END();
    k3_plan_free(&before);
    k3_plan_free(&weighed);
    k3_plan_free(&smallest);

    TEST_BEGIN("planner_chunk_grows_when_slots_change_nothing");
    costs.hit_rate = flat_hit_rate;
    ok = k3_plan_make(&plain, &before, &err) == 0 && k3_plan_make(&in, &weighed, &err) == 0;
    CHECK(ok, "planning failed: %s", err.msg);
    if (ok)
        CHECK(weighed.chunk_tokens == before.chunk_tokens && weighed.chunk_tokens > in.chunk_min,
              "chunk %d, without costs %d", weighed.chunk_tokens, before.chunk_tokens);
    TEST_END();
    k3_plan_free(&before);
    k3_plan_free(&weighed);
}

/* The hand case's model (6 units of 100 MB, 2 MoE layers of 64 experts of
 * 4 MB, top 8; room for 3 units pinned, 2 ring slots and 20 expert slots)
 * planned at speeds. */
static int plan_at_speeds(const k3_plan_speeds *speeds, k3_plan *out, k3_error *err)
{
    const uint64_t mb = 1000000;
    uint64_t trunk[HAND_UNITS], experts_run[HAND_UNITS] = {0};
    double compute_s[HAND_UNITS];
    for (int i = 0; i < HAND_UNITS; i++) trunk[i] = 100 * mb;
    experts_run[1] = experts_run[3] = 8 * 4 * mb;       /* the MoE layers: top 8 experts of 4 MB */
    k3_plan_costs costs;
    k3_plan_costs_at(&costs, speeds, trunk, experts_run, HAND_UNITS, compute_s, 2, 64);
    k3_plan_input in = {.budget_bytes = 10 * mb + 3 * 100 * mb + 200 * mb + 20 * 4 * mb, .fixed_bytes = 10 * mb,
                        .state_bytes = 5 * mb, .ctx_tokens = 4096, .n_trunk = HAND_UNITS, .trunk_bytes = trunk,
                        .expert_bytes = 4 * mb, .n_experts_total = 128, .top_k = 8, .chunk_min = 32,
                        .chunk_max = 32, .costs = &costs};
    return k3_plan_make(&in, out, err);
}

/* The speeds reach the weighing: the disk against the kernels decides. */
static void check_speeds(void)
{
    k3_error err;
    k3_plan slow_disk, slow_kernels, again;
    k3_plan_speeds slow_disk_speeds = {.trunk_matvec_bytes_per_s = 30e9, .expert_matvec_bytes_per_s = 17e9,
                                       .read_bytes_per_s = 0.2e9, .source = "slow disk"};
    k3_plan_speeds slow_kernel_speeds = {.trunk_matvec_bytes_per_s = 0.5e9, .expert_matvec_bytes_per_s = 0.5e9,
                                         .read_bytes_per_s = 20e9, .source = "fast disk, slow kernels"};
    const int ok = plan_at_speeds(&slow_disk_speeds, &slow_disk, &err) == 0 &&
                   plan_at_speeds(&slow_kernel_speeds, &slow_kernels, &err) == 0;

    /* a 100 MB unit takes 0.5 s to read at 0.2 GB/s and 3 ms to compute:
     * streamed, it waits; with 200 ms of compute a unit and 5 ms reads
     * every ring read hides, and the bytes serve expert misses better */
    TEST_BEGIN("planner_pins_more_on_a_slow_disk_than_with_slow_kernels");
    CHECK(ok, "planning failed: %s", err.msg);
    if (ok) {
        CHECK(slow_disk.n_pinned == 3, "slow disk: %d of 6 units pinned, not the 3 that fit (%s)",
              slow_disk.n_pinned, slow_disk.split_why);
        CHECK(slow_kernels.n_pinned < slow_disk.n_pinned && slow_kernels.n_expert_slots > slow_disk.n_expert_slots,
              "slow kernels: %d pinned / %d slots against the slow disk's %d / %d (%s)", slow_kernels.n_pinned,
              slow_kernels.n_expert_slots, slow_disk.n_pinned, slow_disk.n_expert_slots, slow_kernels.split_why);
    }
    TEST_END();

    TEST_BEGIN("planner_same_speeds_same_plan_and_records_them");
    k3_plan_speeds copy = slow_kernel_speeds;
    const int ok2 = ok && plan_at_speeds(&copy, &again, &err) == 0;
    CHECK(ok2, "planning failed: %s", err.msg);
    if (ok2) {
        CHECK(again.n_pinned == slow_kernels.n_pinned && again.n_expert_slots == slow_kernels.n_expert_slots &&
              !memcmp(again.pinned, slow_kernels.pinned, HAND_UNITS) && again.token_s == slow_kernels.token_s,
              "the same speeds planned %d pinned / %d slots, then %d / %d", slow_kernels.n_pinned,
              slow_kernels.n_expert_slots, again.n_pinned, again.n_expert_slots);
        CHECK(!strcmp(again.speeds.source, "fast disk, slow kernels") && again.speeds.read_bytes_per_s == 20e9 &&
              again.speeds.trunk_matvec_bytes_per_s == 0.5e9,
              "the plan records speeds '%s' (disk %g B/s), not those it was weighed at", again.speeds.source,
              again.speeds.read_bytes_per_s);
        /* a token's compute at 0.5 GB/s: 6 units of 100 MB and 2 x 32 MB of experts */
        CHECK(again.token_s >= (600e6 + 64e6) / 0.5e9 - 1e-9, "predicted token %.3f s, its compute alone is %.3f s",
              again.token_s, (600e6 + 64e6) / 0.5e9);
    }
    TEST_END();
    if (ok) {
        k3_plan_free(&slow_disk);
        k3_plan_free(&slow_kernels);
    }
    if (ok2) k3_plan_free(&again);
}

int main(void)
{
    enum { N_PLANS = 20000, MAX_TRUNK = 64 };
    uint64_t trunk[MAX_TRUNK];
    int over_budget = 0, few_slots = 0, small_ring = 0, bad_refusal = 0, bad_sum = 0, refused = 0, streamed = 0;
    int bad_chunk = 0, big_chunks = 0, min_chunks = 0, spans = 0, weighed = 0, worse_wait = 0, split_moved = 0;
    double compute_s[MAX_TRUNK];
    char first_chunk[256] = "", first_worse[256] = "";
    check_split_by_wait();
    check_chunk_leaves_slots();
    check_speeds();
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
        /* every other plan weighs its split, at rates from the plan's
         * number (not rnd(), so the inputs above stay those of before) */
        k3_plan_costs costs = {.trunk_read_bytes_per_s = 0.25e9 * (1 + it % 7),
                               .expert_read_bytes_per_s = 0.25e9 * (1 + it % 5), .unit_compute_s = compute_s,
                               .n_moe_layers = 1 + it % 60, .hit_rate = linear_hit_rate,
                               .hit_rate_ctx = (void *)&n_experts};
        for (int i = 0; i < n_trunk; i++) compute_s[i] = trunk[i] / (1e9 * (1 + it % 50));
        if (it % 2 && n_experts) in.costs = &costs;
        k3_plan p, at_min;
        k3_error err;
        k3_plan_input smallest = in;      /* the same plan at the smallest chunk */
        smallest.chunk_token_bytes = 0;
        smallest.span_token_bytes = 0;
        const int min_ok = k3_plan_make(&smallest, &at_min, &err) == 0;
        if (min_ok && in.costs) {         /* weighed: never predicted to wait more than the fixed order */
            k3_plan plain_plan;
            k3_plan_input plain = smallest;
            plain.costs = NULL;
            if (k3_plan_make(&plain, &plain_plan, &err) == 0) {
                const double plain_wait_s =
                    k3_plan_token_wait_s(&smallest, plain_plan.pinned, plain_plan.n_expert_slots, NULL);
                weighed++;
                split_moved += at_min.n_pinned != plain_plan.n_pinned;
                if (at_min.token_wait_s > plain_wait_s + 1e-9 && !worse_wait++)
                    snprintf(first_worse, sizeof first_worse, "plan %d: %.6f s against the fixed order's %.6f s", it,
                             at_min.token_wait_s, plain_wait_s);
            }
            k3_plan_free(&plain_plan);
        }
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
            else if (in.costs && in.budget_bytes && !at_min.all_resident) why = NULL;  /* held back for decode */
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
    TEST_BEGIN("planner_weighed_split_never_waits_more");
    CHECK(worse_wait == 0, "%d of %d weighed plans predicted to wait more than the fixed order; first: %s", worse_wait,
          weighed, first_worse);
    CHECK(weighed > 1000 && split_moved > 100, "inputs too easy: %d weighed plans, %d moved the split", weighed,
          split_moved);
    TEST_END();
    printf("# %d random plans: %d refused, %d with a streamed trunk, %d weighed (%d split moved)\n", N_PLANS, refused,
           streamed, weighed, split_moved);
    TEST_EXIT();
}
