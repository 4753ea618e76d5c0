/* planner.c - see planner.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "expert_cache.h"
#include "planner.h"
#include "k3_util.h"

static int by_size_desc(const void *a, const void *b, void *ctx)
{
    const uint64_t *bytes = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    if (bytes[x] != bytes[y]) return bytes[x] > bytes[y] ? -1 : 1;
    return x - y;
}

static double gib(uint64_t b) { return b / 1073741824.0; }

static int plan_for_fixed(const k3_plan_input *in, k3_plan *out, k3_error *err);

/* The speeds k3_plan_default_speeds gives: a decode matvec streams bf16
 * weights at ~30 GB/s and MXFP4 experts at ~17 GB/s with 2 threads, the
 * disk reads ~2 GB/s (k3 plan's probes on this machine, docs/PERFORMANCE.md) */
#define PLAN_DEFAULT_TRUNK_COMPUTE_BYTES_PER_S 30e9
#define PLAN_DEFAULT_EXPERT_COMPUTE_BYTES_PER_S 17e9
#define PLAN_DEFAULT_READ_BYTES_PER_S 2e9
/* The prompt chunk may cost decode this fraction of its predicted token. */
#define PLAN_CHUNK_DECODE_TOLERANCE 0.01

static const k3_plan_speeds plan_default_speeds = {
    .trunk_matvec_bytes_per_s = PLAN_DEFAULT_TRUNK_COMPUTE_BYTES_PER_S,
    .expert_matvec_bytes_per_s = PLAN_DEFAULT_EXPERT_COMPUTE_BYTES_PER_S,
    .read_bytes_per_s = PLAN_DEFAULT_READ_BYTES_PER_S, .source = "defaults (nothing measured)"};

void k3_plan_default_speeds(k3_plan_speeds *s) { *s = plan_default_speeds; }

void k3_plan_costs_at(k3_plan_costs *costs, const k3_plan_speeds *speeds, const uint64_t *trunk_bytes,
                      const uint64_t *moe_expert_bytes_per_unit, int n_trunk, double *unit_compute_s, int n_moe_layers,
                      int n_experts_per_layer)
{
    if (!speeds) speeds = &plan_default_speeds;
    for (int i = 0; i < n_trunk; i++)
        unit_compute_s[i] = trunk_bytes[i] / speeds->trunk_matvec_bytes_per_s +
                            (moe_expert_bytes_per_unit ? moe_expert_bytes_per_unit[i] : 0) /
                                speeds->expert_matvec_bytes_per_s;
    *costs = (k3_plan_costs){.trunk_read_bytes_per_s = speeds->read_bytes_per_s,
                             .expert_read_bytes_per_s = speeds->read_bytes_per_s,
                             .unit_compute_s = unit_compute_s, .n_moe_layers = n_moe_layers,
                             .n_experts_per_layer = n_experts_per_layer, .speeds = speeds};
}

/* The hit rate of n_slots expert slots: the caller's model, else uniform
 * routing through an LRU cache (the closed form k3 plan uses). */
static double plan_hit_rate(const k3_plan_input *in, int n_slots)
{
    const k3_plan_costs *c = in->costs;
    if (n_slots >= in->n_experts_total) return 1;
    if (c->hit_rate) return c->hit_rate(n_slots, c->hit_rate_ctx);
    return k3_expert_cache_uniform_hit_rate(c->n_moe_layers, c->n_experts_per_layer, in->top_k, n_slots);
}

/* The compute's stalls on the ring in a steady token: the units run in
 * order, a token after another; a streamed unit's read starts when the
 * reader is done with the previous streamed unit and a slot is free (the
 * streamed unit two before it has been computed), and its compute starts
 * when that read has ended. The third pass over the units is the steady
 * one (the first two start with both slots free). */
static double ring_stall_s(const k3_plan_input *in, const uint8_t *pinned)
{
    const k3_plan_costs *c = in->costs;
    enum { PASSES = 3 };
    double clock_s = 0, stall_s = 0, read_end_s = 0;
    double computed_s[2] = {0, 0};        /* compute end of the two streamed units before */
    for (int pass = 0; pass < PASSES; pass++)
        for (int i = 0; i < in->n_trunk; i++) {
            if (!pinned[i]) {
                const double slot_free_s = computed_s[0];
                const double read_start_s = read_end_s > slot_free_s ? read_end_s : slot_free_s;
                read_end_s = read_start_s + in->trunk_bytes[i] / c->trunk_read_bytes_per_s;
                if (read_end_s > clock_s) {
                    if (pass == PASSES - 1) stall_s += read_end_s - clock_s;
                    clock_s = read_end_s;
                }
            }
            clock_s += c->unit_compute_s[i];
            if (!pinned[i]) {
                computed_s[0] = computed_s[1];
                computed_s[1] = clock_s;
            }
        }
    return stall_s;
}

double k3_plan_token_wait_s(const k3_plan_input *in, const uint8_t *pinned, int n_expert_slots, double *token_s)
{
    const k3_plan_costs *c = in->costs;
    double compute_s = 0, ring_read_s = 0;
    for (int i = 0; i < in->n_trunk; i++) {
        compute_s += c->unit_compute_s[i];
        if (!pinned[i]) ring_read_s += in->trunk_bytes[i] / c->trunk_read_bytes_per_s;
    }
    const double lookups = (double)in->top_k * c->n_moe_layers;
    const double expert_read_s =
        (1 - plan_hit_rate(in, n_expert_slots)) * lookups * (double)in->expert_bytes / c->expert_read_bytes_per_s;
    /* the misses are known only once a layer's router has run: they wait;
     * the ring waits as ring_stall_s says; and the one disk reads both */
    const double compute_path_s = compute_s + expert_read_s + ring_stall_s(in, pinned);
    const double disk_path_s = expert_read_s + ring_read_s;
    const double t = compute_path_s > disk_path_s ? compute_path_s : disk_path_s;
    if (token_s) *token_s = t;
    return t - compute_s;
}

/* The chunk's growth in bytes for an eighth of room (see k3_plan_make):
 * *more chunk tokens above lo, *span span tokens (0: no span). */
static uint64_t chunk_growth(const k3_plan_input *in, int lo, int hi, uint64_t eighth, uint64_t *more, uint64_t *span)
{
    *span = 0;
    *more = eighth / in->chunk_token_bytes;
    if (*more > (uint64_t)(hi - lo)) *more = (uint64_t)(hi - lo);
    if (lo + *more < (uint64_t)hi && in->span_token_bytes) {
        *span = eighth / in->span_token_bytes;
        if (*span > (uint64_t)hi) *span = (uint64_t)hi;
        if (*span > lo + *more) {         /* a span holds more than a chunk: it goes first */
            *more = (eighth - *span * in->span_token_bytes) / in->chunk_token_bytes;
            if (lo + *more > *span) *more = *span - lo;
        } else
            *span = 0;
    }
    return *more * in->chunk_token_bytes + *span * in->span_token_bytes;
}

/* A bigger prompt chunk reads each weight once for more tokens (a prompt of
 * n tokens reads the streamed weights ceil(n / chunk) times, and each routed
 * expert runs on more tokens at once) for scratch that grows linearly with
 * the chunk. An eighth of what the budget leaves above its minimum goes to
 * that growth; the rest stays with the expert cache, which decode needs.
 * When that cannot hold chunk_max tokens, a span (the tokens of one pass run
 * layer by layer in chunks: forward.c) costs far less per token than a chunk
 * (only the residual stream, the FFN input and the routed sum are kept):
 * the eighth goes to the longest span up to chunk_max first, what is left
 * grows the chunk the span runs in. The plan is made at chunk_min first
 * (its minimum), then again with the growth added to the fixed claim. */
int k3_plan_make(const k3_plan_input *in, k3_plan *out, k3_error *err)
{
    if (plan_for_fixed(in, out, err)) return -1;
    if (in->costs && in->costs->speeds) out->speeds = *in->costs->speeds;
    const int lo = in->chunk_min > 0 ? in->chunk_min : 1, hi = in->chunk_max > lo ? in->chunk_max : lo;
    out->chunk_tokens = out->tile_tokens = lo;
    if (!in->chunk_token_bytes || hi == lo) {
        snprintf(out->chunk_why, sizeof out->chunk_why, "%d tokens: %s", lo,
                 in->chunk_token_bytes ? "the context limit" : "as given (--chunk-tokens)");
        return 0;
    }
    const int budgeted = in->budget_bytes && !out->all_resident;
    const uint64_t room = budgeted ? in->budget_bytes - out->min_budget_bytes
                          : in->budget_bytes ? in->budget_bytes - out->resident_bytes : in->chunk_room_bytes;
    const uint64_t eighth = room / 8;
    uint64_t more, span;
    uint64_t growth = chunk_growth(in, lo, hi, eighth, &more, &span);
    const char *of = budgeted ? "the budget above its minimum" : "the memory left beside the resident model";
    if (more == 0 && span == 0) {
        snprintf(out->chunk_why, sizeof out->chunk_why,
                 "%d tokens: an eighth of %s (%.1f MiB) holds no more at %.1f KiB of scratch per token", lo, of,
                 eighth / 1048576.0, in->chunk_token_bytes / 1024.0);
        return 0;
    }
    /* with costs, the chunk's scratch must leave decode the expert slots it
     * needs: halve the chunk's growth until decode's predicted token is
     * within the tolerance of its time at the smallest chunk. A span stays
     * as long as the eighth allows: its tokens cost a few KiB each (the
     * residual stream, the FFN input, the routed sum) and save the prompt a
     * read of every expert per chunk (tests/t_span.sh) */
    const double base_token_s = out->token_s;
    const int weighed = in->costs && budgeted;
    k3_plan_input bigger = *in;
    for (int halvings = 0;; halvings++) {
        bigger.fixed_bytes = in->fixed_bytes + growth;
        bigger.state_bytes = in->state_bytes + growth;
        k3_plan_free(out);
        if (plan_for_fixed(&bigger, out, err)) return -1;
        if (!weighed || more == 0 || out->token_s <= base_token_s * (1 + PLAN_CHUNK_DECODE_TOLERANCE)) break;
        more /= 2;                        /* a smaller tile; the rest of the eighth may hold a span */
        span = 0;
        if (lo + more < (uint64_t)hi && in->span_token_bytes) {
            span = (eighth - more * in->chunk_token_bytes) / in->span_token_bytes;
            if (span > (uint64_t)hi) span = (uint64_t)hi;
            if (span <= lo + more) span = 0;
        }
        growth = more * in->chunk_token_bytes + span * in->span_token_bytes;
        if (more == 0 && span == 0) {     /* decode needs all of it: the smallest chunk */
            k3_plan_free(out);
            if (plan_for_fixed(in, out, err)) return -1;
            out->chunk_tokens = out->tile_tokens = lo;
            snprintf(out->chunk_why, sizeof out->chunk_why,
                     "%d tokens: more scratch would take expert slots decode needs (its predicted token +%.0f%%)",
                     lo, PLAN_CHUNK_DECODE_TOLERANCE * 100);
            return 0;
        }
        if (halvings == 0) of = "the budget above its minimum, less the expert slots decode needs";
    }
    out->tile_tokens = lo + (int)more;
    out->chunk_tokens = span ? (int)span : out->tile_tokens;
    out->chunk_scratch_bytes = growth;
    if (span)
        snprintf(out->chunk_why, sizeof out->chunk_why,
                 "%d tokens%s, layer by layer in chunks of %d: %.1f KiB per span token, %.1f per chunk token, "
                 "within an eighth of %s (%.1f MiB)", out->chunk_tokens,
                 out->chunk_tokens == hi ? " (context or engine limit)" : "", out->tile_tokens,
                 in->span_token_bytes / 1024.0, in->chunk_token_bytes / 1024.0, of, eighth / 1048576.0);
    else if (out->chunk_tokens == hi)
        snprintf(out->chunk_why, sizeof out->chunk_why,
                 "%d tokens: the most allowed (context or engine limit); %.1f KiB of scratch per token, %.1f MiB "
                 "in all, within an eighth of %s", hi, in->chunk_token_bytes / 1024.0,
                 (double)hi * in->chunk_token_bytes / 1048576.0, of);
    else
        snprintf(out->chunk_why, sizeof out->chunk_why,
                 "%d tokens: the most whose scratch (%.1f KiB per token) fits in an eighth of %s (%.1f MiB)",
                 out->chunk_tokens, in->chunk_token_bytes / 1024.0, of, eighth / 1048576.0);
    return 0;
}

uint64_t k3_plan_resident_bytes(const k3_plan_input *in)
{
    uint64_t bytes = in->fixed_bytes + (uint64_t)in->n_experts_total * in->expert_bytes + in->embed_table_bytes;
    for (int i = 0; i < in->n_trunk; i++) bytes += in->trunk_bytes[i];
    return bytes;
}

/* 9/10: the last tenth is left to the page cache (the streamed files), the
 * kernel and whatever else runs beside us; under a cgroup limit the budget
 * is always in force (and printed). */
void k3_plan_default_budget(k3_plan_input *in, const k3_mem_limit *lim)
{
    const uint64_t total = k3_plan_resident_bytes(in), usable = lim->avail_bytes * 9 / 10;
    in->budget_bytes = lim->avail_bytes && (lim->hard_limit || total > usable) ? usable : 0;
    in->chunk_room_bytes = !in->budget_bytes && usable > total ? usable - total : 0;
}

/* Expert slots the bytes left beside this trunk claim hold (at most all). */
static int slots_beside(const k3_plan_input *in, uint64_t used)
{
    if (!in->expert_bytes || used >= in->budget_bytes) return 0;
    const uint64_t slots = (in->budget_bytes - used) / in->expert_bytes;
    return slots > (uint64_t)in->n_experts_total ? in->n_experts_total : (int)slots;
}

/* The split by what a decode token waits for: out holds the most trunk
 * that fits (largest units first); candidates pin only the first k of
 * those units in that order (k = all of them down to none), each with the
 * expert slots the rest of the budget holds, and the one whose token is
 * predicted to wait least wins (ties: the most pinned, so the same inputs
 * always give the same plan). */
static int weigh_split(const k3_plan_input *in, k3_plan *out, uint64_t min_experts, k3_error *err)
{
    const int n = in->n_trunk;
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    uint8_t *trial = calloc((size_t)(n ? n : 1), 1);
    if (!order || !trial) { free(order); free(trial); return k3_err(err, "out of memory"); }
    int n_greedy = 0;                     /* the greedy's pinned units, largest first */
    for (int i = 0; i < n; i++)
        if (out->pinned[i]) order[n_greedy++] = i;
    qsort_r(order, (size_t)n_greedy, sizeof *order, by_size_desc, (void *)in->trunk_bytes);
    int best_k = n_greedy;
    double best_wait_s = 0, greedy_wait_s = 0;
    for (int k = n_greedy; k >= 0; k--) {
        memset(trial, 0, (size_t)n);
        uint64_t pinned_bytes = 0, ring_slot = 0;
        for (int j = 0; j < k; j++) {
            trial[order[j]] = 1;
            pinned_bytes += in->trunk_bytes[order[j]];
        }
        for (int i = 0; i < n; i++)
            if (!trial[i] && in->trunk_bytes[i] > ring_slot) ring_slot = in->trunk_bytes[i];
        const uint64_t used = in->fixed_bytes + pinned_bytes + (k < n ? 2 * ring_slot : 0);
        if (used + min_experts > in->budget_bytes) continue;   /* a bigger ring than this budget holds */
        const double wait_s = k3_plan_token_wait_s(in, trial, slots_beside(in, used), NULL);
        if (k == n_greedy) greedy_wait_s = wait_s;
        if (k == n_greedy || wait_s < best_wait_s - 1e-9) {
            best_k = k;
            best_wait_s = wait_s;
        }
    }
    const int greedy_pinned = out->n_pinned;
    if (best_k < n_greedy) {
        memset(out->pinned, 0, (size_t)n);
        out->pinned_bytes = 0;
        out->ring_slot_bytes = 0;
        for (int j = 0; j < best_k; j++) {
            out->pinned[order[j]] = 1;
            out->pinned_bytes += in->trunk_bytes[order[j]];
        }
        out->n_pinned = best_k;
        for (int i = 0; i < n; i++)
            if (!out->pinned[i] && in->trunk_bytes[i] > out->ring_slot_bytes) out->ring_slot_bytes = in->trunk_bytes[i];
        out->n_ring = best_k < n ? 2 : 0;
        snprintf(out->split_why, sizeof out->split_why,
                 "%d of %d units pinned, not %d: their bytes as expert slots cut a token's predicted wait "
                 "from %.1f to %.1f ms", best_k, n, greedy_pinned, greedy_wait_s * 1e3, best_wait_s * 1e3);
    } else
        snprintf(out->split_why, sizeof out->split_why,
                 "%d of %d units pinned: pinning fewer for expert slots would not cut a token's predicted wait "
                 "(%.1f ms)", best_k, n, best_wait_s * 1e3);
    free(order);
    free(trial);
    return 0;
}

/* The plan for the fixed claim as given (chunk scratch included). */
static int plan_for_fixed(const k3_plan_input *in, k3_plan *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    out->budget_bytes = in->budget_bytes;
    out->fixed_bytes = in->fixed_bytes;
    out->state_bytes = in->state_bytes;
    out->ctx_tokens = in->ctx_tokens;
    out->n_trunk = in->n_trunk;
    out->expert_slot_bytes = in->expert_bytes;
    out->n_experts_total = in->n_experts_total;
    snprintf(out->budget_source, sizeof out->budget_source, "%s", in->budget_source ? in->budget_source : "");
    out->pinned = calloc((size_t)(in->n_trunk ? in->n_trunk : 1), 1);
    if (!out->pinned) return k3_err(err, "out of memory");
    uint64_t total_trunk = 0, max_trunk = 0;
    for (int i = 0; i < in->n_trunk; i++) {
        total_trunk += in->trunk_bytes[i];
        if (in->trunk_bytes[i] > max_trunk) max_trunk = in->trunk_bytes[i];
    }
    const int min_slots = in->n_experts_total ? (in->top_k < in->n_experts_total ? in->top_k : in->n_experts_total) : 0;
    const uint64_t min_experts = (uint64_t)min_slots * in->expert_bytes;
    uint64_t min_ring = in->fixed_bytes + 2 * max_trunk + min_experts;
    uint64_t min_pinned = in->fixed_bytes + total_trunk + min_experts;
    out->min_budget_bytes = min_ring < min_pinned ? min_ring : min_pinned;
    out->resident_bytes = k3_plan_resident_bytes(in);

    if (in->budget_bytes == 0 || in->budget_bytes >= out->resident_bytes) {
        memset(out->pinned, 1, (size_t)in->n_trunk);
        out->n_pinned = in->n_trunk;
        out->pinned_bytes = total_trunk;
        out->n_expert_slots = in->n_experts_total;
        out->all_resident = 1;
        if (in->costs) out->token_wait_s = k3_plan_token_wait_s(in, out->pinned, out->n_expert_slots, &out->token_s);
        return 0;
    }
    if (in->budget_bytes < out->min_budget_bytes)
        return k3_err(err, "memory budget %.2f GiB is below the minimum %.2f GiB for this model "
                      "(fixed %.2f GiB + trunk ring + %d expert slots); use --mem %lluM or more",
                      gib(in->budget_bytes), gib(out->min_budget_bytes), gib(in->fixed_bytes), min_slots,
                      (unsigned long long)((out->min_budget_bytes + (1 << 20) - 1) >> 20));
    uint64_t avail = in->budget_bytes - in->fixed_bytes - min_experts;
    if (avail >= total_trunk) {
        memset(out->pinned, 1, (size_t)in->n_trunk);
        out->n_pinned = in->n_trunk;
        out->pinned_bytes = total_trunk;
    } else {
        int *order = malloc((size_t)in->n_trunk * sizeof *order);
        if (!order) return k3_err(err, "out of memory");
        for (int i = 0; i < in->n_trunk; i++) order[i] = i;
        qsort_r(order, (size_t)in->n_trunk, sizeof *order, by_size_desc, (void *)in->trunk_bytes);
        for (int k = 0; k < in->n_trunk; k++) {
            int u = order[k];
            /* the ring slot must hold the largest unit left unpinned if u is
             * pinned (pinned[] is indexed by unit, order[] by sorted position) */
            uint64_t ring_slot = 0;
            for (int j = 0; j < in->n_trunk; j++) {
                const int v = order[j];
                if (v != u && !out->pinned[v] && in->trunk_bytes[v] > ring_slot) ring_slot = in->trunk_bytes[v];
            }
            if (out->pinned_bytes + in->trunk_bytes[u] + 2 * ring_slot <= avail) {
                out->pinned[u] = 1;
                out->pinned_bytes += in->trunk_bytes[u];
                out->n_pinned++;
            }
        }
        free(order);
        for (int i = 0; i < in->n_trunk; i++)
            if (!out->pinned[i] && in->trunk_bytes[i] > out->ring_slot_bytes) out->ring_slot_bytes = in->trunk_bytes[i];
        out->n_ring = out->n_pinned < in->n_trunk ? 2 : 0;
    }
    if (in->costs && weigh_split(in, out, min_experts, err)) return -1;
    const uint64_t used = in->fixed_bytes + out->pinned_bytes + (uint64_t)out->n_ring * out->ring_slot_bytes;
    /* invariants (tests/test_planner.c checks them on random inputs): the
     * trunk leaves room for top_k expert slots, so the subtraction below
     * cannot wrap; a violation is a planner bug, refused rather than run */
    assert(used + min_experts <= in->budget_bytes);
    if (used + min_experts > in->budget_bytes)
        return k3_err(err, "memory plan error: trunk %.2f GiB leaves no room for %d expert slots in %.2f GiB",
                      gib(used), min_slots, gib(in->budget_bytes));
    uint64_t slots = in->expert_bytes ? (in->budget_bytes - used) / in->expert_bytes : 0;
    if (slots > (uint64_t)in->n_experts_total) slots = (uint64_t)in->n_experts_total;
    out->n_expert_slots = (int)slots;
    assert(out->n_expert_slots >= min_slots);
    assert(used + (uint64_t)out->n_expert_slots * in->expert_bytes <= in->budget_bytes);
    if (in->costs) out->token_wait_s = k3_plan_token_wait_s(in, out->pinned, out->n_expert_slots, &out->token_s);
    return 0;
}

void k3_plan_free(k3_plan *p)
{
    free(p->pinned);
    p->pinned = NULL;
}

int k3_plan_json(const k3_plan *p, char *buf, size_t len)
{
    char source[2 * sizeof p->speeds.source];   /* the source line, JSON-escaped (quotes and backslashes) */
    size_t n = 0;
    for (const char *c = p->speeds.source; *c && n + 2 < sizeof source; c++) {
        if (*c == '"' || *c == '\\') source[n++] = '\\';
        source[n++] = (char)((unsigned char)*c < 0x20 ? ' ' : *c);
    }
    source[n] = 0;
    return snprintf(buf, len,
                    "{\"budget_bytes\":%llu,\"fixed_bytes\":%llu,\"state_bytes\":%llu,\"ctx_tokens\":%d,"
                    "\"min_budget_bytes\":%llu,\"pinned_units\":%d,"
                    "\"trunk_units\":%d,\"pinned_bytes\":%llu,\"ring_slots\":%d,\"ring_slot_bytes\":%llu,"
                    "\"expert_slots\":%d,\"experts_total\":%d,\"expert_slot_bytes\":%llu,\"fully_resident\":%s,"
                    "\"resident_bytes\":%llu,\"chunk_tokens\":%d,\"tile_tokens\":%d,\"chunk_scratch_bytes\":%llu,"
                    "\"speeds\":{\"source\":\"%s\",\"disk_gbps\":%.6g,\"trunk_matvec_gbps\":%.6g,"
                    "\"expert_matvec_gbps\":%.6g}}",
                    (unsigned long long)p->budget_bytes, (unsigned long long)p->fixed_bytes,
                    (unsigned long long)p->state_bytes, p->ctx_tokens, (unsigned long long)p->min_budget_bytes, p->n_pinned, p->n_trunk,
                    (unsigned long long)p->pinned_bytes, p->n_ring, (unsigned long long)p->ring_slot_bytes,
                    p->n_expert_slots, p->n_experts_total, (unsigned long long)p->expert_slot_bytes,
                    p->all_resident ? "true" : "false", (unsigned long long)p->resident_bytes, p->chunk_tokens,
                    p->tile_tokens, (unsigned long long)p->chunk_scratch_bytes, source,
                    p->speeds.read_bytes_per_s / 1e9, p->speeds.trunk_matvec_bytes_per_s / 1e9,
                    p->speeds.expert_matvec_bytes_per_s / 1e9);
}

int64_t k3_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1048576.0; end++; break;
    case 'g': case 'G': mult = 1073741824.0; end++; break;
    case 't': case 'T': mult = 1099511627776.0; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return -1;
    return (int64_t)(v * mult);
}

uint64_t k3_plan_fixed_bytes(uint64_t process_bytes, uint64_t session_bytes, uint64_t embed_buf_bytes)
{
    /* 24 MiB for what comes after this measurement and is not in the RSS:
     * allocator slack, the touched stacks of the reader's threads, the
     * history store and the front end (docs/PERFORMANCE.md, "Memory margin") */
    const uint64_t margin = 24ull << 20;
    return process_bytes + session_bytes + embed_buf_bytes + margin;
}
