/* weights_plan.c - split the budget (planner.c) over the units found at
 * open, allocate the ring and expert-cache slots, and read what is pinned. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "huge_pages.h"
#include "prefault.h"
#include "quant_types.h"
#include "weights_internal.h"

/* Current resident set size, to charge what the process already holds. */
static uint64_t current_rss(void)
{
    uint64_t rss, peak;
    stats_read_rss(&rss, &peak);
    return rss;
}

/* Plan the budget, allocate slots, read what is pinned. */
int weights_plan_and_allocate(k3_weights *rp, k3_error *err)
{
    if (rp->opt.sizes_only) return 0;
    const k3_config *c = rp->cfg;
    const int n_trunk = c->n_layers + 1;
    uint64_t *trunk_bytes = malloc((size_t)n_trunk * sizeof *trunk_bytes);
    if (!trunk_bytes) return k3_err(err, "out of memory");
    uint64_t expert_bytes, embed_buf_bytes, embed_table_bytes;
    int n_experts_total;
    k3_weights_unit_sizes(rp, trunk_bytes, &expert_bytes, &n_experts_total, &embed_buf_bytes, &embed_table_bytes);
    uint64_t fixed = k3_plan_fixed_bytes(current_rss(), rp->opt.session_bytes, embed_buf_bytes);
    char source[256] = "";                /* where a derived budget comes from (printed) */
    k3_plan_input in = {.budget_bytes = rp->opt.mem_bytes, .fixed_bytes = fixed, .state_bytes = rp->opt.session_bytes,
                        .ctx_tokens = rp->opt.ctx_tokens, .n_trunk = n_trunk, .trunk_bytes = trunk_bytes,
                        .expert_bytes = expert_bytes, .n_experts_total = n_experts_total, .top_k = c->top_k,
                        .budget_source = source, .chunk_min = rp->opt.chunk_min, .chunk_max = rp->opt.chunk_max,
                        .chunk_token_bytes = rp->opt.chunk_token_bytes, .chunk_room_bytes = 0,
                        .span_token_bytes = rp->opt.span_token_bytes, .embed_table_bytes = embed_table_bytes};
    /* the split between pinned trunk and expert slots by what a decode
     * token waits for, at the speeds the model was opened with (planner.h) */
    double *unit_compute_s = calloc((size_t)n_trunk, sizeof *unit_compute_s);
    uint64_t *unit_expert_bytes = calloc((size_t)n_trunk, sizeof *unit_expert_bytes);
    if (!unit_compute_s || !unit_expert_bytes) {
        free(unit_compute_s);
        free(unit_expert_bytes);
        free(trunk_bytes);
        return k3_err(err, "out of memory");
    }
    int n_moe = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (c->is_moe[l]) {
            unit_expert_bytes[l] = (uint64_t)c->top_k * expert_bytes;
            n_moe++;
        }
    k3_plan_speeds speeds = rp->opt.speeds;
    if (!(speeds.trunk_matvec_bytes_per_s > 0 && speeds.expert_matvec_bytes_per_s > 0 && speeds.read_bytes_per_s > 0))
        k3_plan_default_speeds(&speeds);
    k3_plan_costs costs;
    k3_plan_costs_at(&costs, &speeds, trunk_bytes, unit_expert_bytes, n_trunk, unit_compute_s, n_moe, c->n_experts);
    free(unit_expert_bytes);
    if (n_experts_total) in.costs = &costs;
    k3_mem_limit lim;
    k3_mem_limit_read(current_rss(), &lim);
    if (in.budget_bytes) {                /* --mem above a memory cgroup's limit: refused, not OOM-killed */
        if (lim.cgroup && lim.limit_bytes && in.budget_bytes > lim.limit_bytes) {
            free(trunk_bytes);
            free(unit_compute_s);
            return k3_err(err, "--mem %.1f MiB is more than %s = %.1f MiB (%.1f MiB in use); use --mem %lluM or less",
                          in.budget_bytes / 1048576.0, lim.source, lim.limit_bytes / 1048576.0,
                          lim.in_use_bytes / 1048576.0,
                          (unsigned long long)((lim.avail_bytes < lim.limit_bytes ? lim.avail_bytes : lim.limit_bytes) /
                                               10 * 9 >> 20));
        }
    }
    if (!in.budget_bytes) {               /* no --mem: resident if it fits in 90% of what may be used */
        k3_plan_default_budget(&in, &lim);
        if (lim.hard_limit)
            snprintf(source, sizeof source, "%s = %.1f MiB, %.1f MiB in use; budget 90%% of the rest",
                     lim.source, lim.limit_bytes / 1048576.0, lim.in_use_bytes / 1048576.0);
        else
            snprintf(source, sizeof source, "90%% of MemAvailable %.1f MiB", lim.avail_bytes / 1048576.0);
    }
    int rc = k3_plan_make(&in, &rp->plan, err);
    free(trunk_bytes);
    free(unit_compute_s);
    if (rc) return -1;
    k3_stats *st = rp->stats;
    stats_set64(&st->budget_bytes, in.budget_bytes);
    stats_set64(&st->resident_bytes, rp->plan.resident_bytes);
    stats_set64(&st->pinned_trunk_bytes, rp->plan.pinned_bytes);
    stats_set64(&st->ring_bytes, (uint64_t)rp->plan.n_ring * rp->plan.ring_slot_bytes);
    stats_set64(&st->expert_cache_bytes, (uint64_t)rp->plan.n_expert_slots * expert_bytes);
    stats_set64(&st->state_bytes, rp->opt.session_bytes);
    stats_set64(&st->other_bytes, fixed - rp->opt.session_bytes);
    stats_set32(&st->pinned_layers, (uint32_t)rp->plan.n_pinned);
    stats_set32(&st->ring_slots, (uint32_t)rp->plan.n_ring);
    stats_set32(&st->expert_slots, (uint32_t)rp->plan.n_expert_slots);

    /* pinned trunk units: read now, views rebased once */
    for (int i = 0; i < n_trunk; i++) {
        if (!rp->plan.pinned[i]) continue;
        if (weights_read_pinned(rp, i, K3_READ_TRUNK, err)) return -1;
        if (i < c->n_layers) weights_rebase_layer(rp, i, rp->units[i].pinned);
    }
    rp->expert_used = calloc((size_t)c->n_layers * (c->n_experts > 0 ? c->n_experts : 1), 1);
    if (!rp->expert_used) return k3_err(err, "out of memory");
    rp->n_ring = rp->plan.n_ring;
    rp->ring = calloc((size_t)(rp->n_ring ? rp->n_ring : 1), sizeof *rp->ring);
    if (!rp->ring) return k3_err(err, "out of memory");
    for (int i = 0; i < rp->n_ring; i++) {
        rp->ring[i].unit = -1;
        rp->ring[i].mem = k3_huge_alloc(rp->plan.ring_slot_bytes, K3_IO_ALIGN, rp->opt.huge_pages);
        if (!rp->ring[i].mem) return k3_err(err, "out of memory for the trunk ring");
    }
    if (k3_expert_cache_init(&rp->cache, (k3_cache_policy)rp->opt.cache_policy, rp->plan.n_expert_slots,
                             c->n_layers, c->n_experts))
        return k3_err(err, "out of memory");
    rp->cache_slots = calloc((size_t)(rp->plan.n_expert_slots ? rp->plan.n_expert_slots : 1), sizeof *rp->cache_slots);
    if (!rp->cache_slots) return k3_err(err, "out of memory");
    /* one arena for all slots, so its whole 2 MiB pages back every slot
     * (a slot is a multiple of K3_IO_ALIGN, not of 2 MiB) */
    const uint64_t slot_bytes = expert_bytes ? expert_bytes : K3_IO_ALIGN;
    if (rp->plan.n_expert_slots > 0) {
        rp->cache_arena = k3_huge_alloc((size_t)rp->plan.n_expert_slots * slot_bytes, K3_IO_ALIGN, rp->opt.huge_pages);
        if (!rp->cache_arena) return k3_err(err, "out of memory for the expert cache");
    }
    for (int i = 0; i < rp->plan.n_expert_slots; i++) {
        rp->cache_slots[i].unit = -1;
        rp->cache_slots[i].mem = rp->cache_arena + (size_t)i * slot_bytes;
    }
    /* a streamed model's cache fills miss by miss: fault its memory in
     * while the CPU idles, not inside the first answers' reads (prefault.c) */
    if (!rp->plan.all_resident && rp->plan.n_expert_slots > 0)
        rp->cache_prefault = k3_prefault_start(rp->cache_arena, (size_t)rp->plan.n_expert_slots * slot_bytes);
    if (rp->plan.all_resident) {          /* fully resident: the embedding table and every expert read at open */
        if (weights_read_embed_table(rp, err)) return -1;
        for (int l = 0; l < c->n_layers; l++) {
            if (!c->is_moe[l]) continue;
            for (int e = 0; e < c->n_experts; e++) {
                int s = k3_expert_cache_insert(&rp->cache, l, e);
                if (weights_start_read(rp, &rp->cache_slots[s], expert_unit(rp, l, e), K3_READ_EXPERT, err)) return -1;
            }
        }
        for (int s = 0; s < rp->plan.n_expert_slots; s++)
            if (weights_wait_slot(rp, &rp->cache_slots[s], err)) return -1;
    }
    return 0;
}

void k3_weights_wait_prefault(k3_weights *rp, uint64_t *bytes, double *seconds)
{
    k3_prefault_wait(rp->cache_prefault, bytes, seconds);
}

/* The planner's inputs as the units were laid out (k3 plan opens with
 * sizes_only and plans from these, so its sizes are the engine's own). */
void k3_weights_unit_sizes(const k3_weights *rp, uint64_t *trunk_bytes, uint64_t *expert_bytes,
                           int *n_experts_total, uint64_t *embed_buf_bytes, uint64_t *embed_table_bytes)
{
    const k3_config *c = rp->cfg;
    for (int i = 0; i <= c->n_layers; i++) trunk_bytes[i] = rp->units[i].bytes;
    *expert_bytes = 0;
    *n_experts_total = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->is_moe[l]) continue;
        for (int e = 0; e < c->n_experts; e++) {
            const unit *u = &rp->units[expert_unit(rp, l, e)];
            if (u->bytes > *expert_bytes) *expert_bytes = u->bytes;
            (*n_experts_total)++;
        }
    }
    *embed_buf_bytes = rp->embed_buf_bytes;
    *embed_table_bytes = weights_embed_table_bytes(rp);
}

/* The formats the weights hold: the trunk's, as the format of most trunk
 * bytes (a GGUF mixes types), and the routed experts' (the first MoE
 * layer's first expert's w1). For k3 plan's compute probe. */
void k3_weights_formats(const k3_weights *rp, k3_dtype *trunk_dtype, const k3_quant_type **trunk_qtype,
                        k3_dtype *expert_dtype, const k3_quant_type **expert_qtype)
{
    const k3_config *c = rp->cfg;
    typedef struct { k3_dtype dtype; const k3_quant_type *qtype; uint64_t bytes; } format_bytes;
    format_bytes seen[16];
    int n_seen = 0;
    for (int i = 0; i < c->n_layers; i++) {
        const unit *u = &rp->units[i];
        for (int k = 0; k < u->n_tensors; k++) {
            const st_tensor *t = &rp->index.tensors[u->tensors[k]];
            if (t->ndim != 2) continue;
            int j = 0;
            while (j < n_seen && (seen[j].dtype != t->dtype || seen[j].qtype != t->qtype)) j++;
            if (j == n_seen && n_seen < 16) seen[n_seen++] = (format_bytes){t->dtype, t->qtype, 0};
            if (j < n_seen) seen[j].bytes += t->nbytes;
        }
    }
    int best = 0;
    for (int j = 1; j < n_seen; j++)
        if (seen[j].bytes > seen[best].bytes) best = j;
    *trunk_dtype = n_seen ? seen[best].dtype : K3_DT_BF16;
    *trunk_qtype = n_seen ? seen[best].qtype : NULL;
    *expert_dtype = *trunk_dtype;
    *expert_qtype = *trunk_qtype;
    for (int l = 0; l < c->n_layers; l++)
        if (c->is_moe[l]) {
            const k3_weight *w1 = &rp->experts[(size_t)l * c->n_experts].gate;
            *expert_dtype = w1->dtype;
            *expert_qtype = w1->qtype;
            break;
        }
}

int k3_weights_chunk_tokens(const k3_weights *rp, const char **why)
{
    if (why) *why = rp->plan.chunk_why;
    return rp->plan.chunk_tokens;
}

int k3_weights_tile_tokens(const k3_weights *rp) { return rp->plan.tile_tokens; }

int k3_weights_expert_slots(const k3_weights *rp) { return rp->cache.n_slots; }
