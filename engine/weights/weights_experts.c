/* weights_experts.c - routed experts in the expert cache: claiming the
 * experts a layer needs (resident first, then reads for missing ones into
 * free slots), optional router-lookahead prefetch, and the NaN-scale check
 * of MXFP4 experts after each read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* MXFP4 scale byte 255 is NaN in OCP MX: refuse to compute with it. */
static int check_mxfp4(k3_weights *rp, const k3_mlp_weights *m, int layer, int expert, k3_error *err)
{
    const k3_weight *ws[] = {&m->gate, &m->up, &m->down};
    for (int i = 0; i < 3; i++) {
        int64_t row;
        if (ws[i]->dtype == K3_DT_MXFP4 && k3_mxfp4_check(ws[i]->mx_scale, ws[i]->rows, ws[i]->cols, &row))
            return k3_err(err, "%s: layer %d expert %d has an E8M0 scale byte 255 (NaN in OCP MX) in row %lld; "
                          "refusing to compute with it", rp->dir, layer, expert, (long long)row);
    }
    return 0;
}

int k3_weights_claim_experts(k3_weights *rp, int layer, int *experts, int n, int count_lookup,
                              k3_error *err)
{
    k3_stats *st = rp->stats;
    int claimed = 0;
    /* resident first: pin them, move them to the front */
    for (int i = 0; i < n; i++) {
        int e = experts[i];
        int s = k3_expert_cache_lookup(&rp->cache, layer, e);
        if (rp->trace && count_lookup)
            fprintf(rp->trace, "%llu %d %d\n", (unsigned long long)rp->trace_token, layer, e);
        if (count_lookup && rp->expert_used) rp->expert_used[(size_t)layer * rp->cfg->n_experts + e] = 1;
        if (count_lookup) {
            stats_add(&st->expert_lookups, 1);
            if (layer < K3_STATS_MAX_LAYERS) stats_add(&st->layer_lookups[layer], 1);
        }
        if (s < 0) continue;
        if (rp->cache_slots[s].prefetched) {  /* read on a prediction: not a resident hit */
            slot *sl = &rp->cache_slots[s];
            sl->prefetched = 0;
            for (int k = 0; k < sl->n_reqs; k++) k3_io_promote(rp->io, &sl->reqs[k]);   /* needed now */
            if (count_lookup) stats_add(&st->prefetch_used, 1);
        } else if (count_lookup) {
            stats_add(&st->expert_hits, 1);
            if (layer < K3_STATS_MAX_LAYERS) stats_add(&st->layer_hits[layer], 1);
        }
        k3_expert_cache_pin(&rp->cache, s);
        int t = experts[claimed];
        experts[claimed++] = e;
        experts[i] = t;
    }
    /* then as many missing ones as slots allow; their reads go out together */
    for (int i = claimed; i < n; i++) {
        int e = experts[i];
        int s = k3_expert_cache_insert(&rp->cache, layer, e);
        if (s < 0) break;
        if (count_lookup) stats_add(&st->expert_misses, 1);
        k3_expert_cache_pin(&rp->cache, s);
        slot *sl = &rp->cache_slots[s];
        if (sl->prefetched) { sl->prefetched = 0; stats_add(&st->prefetch_unused, 1); }
        weights_drain_slot(rp, sl);

        if (weights_start_read(rp, sl, expert_unit(rp, layer, e), K3_READ_EXPERT, err)) return -1;
        int t = experts[claimed];
        experts[claimed++] = e;
        experts[i] = t;
    }
    if (!claimed) return k3_err(err, "internal: the expert cache has no free slot");
    return claimed;
}

/* Prefetch reads only into a cache that can miss, and only when asked:
 * the forward pass skips its lookahead router otherwise (weights.h). */
int k3_weights_prefetch_wanted(const k3_weights *rp)
{
    return rp->opt.prefetch && !rp->plan.all_resident;
}

void k3_weights_prefetch_experts(k3_weights *rp, int layer, const int *experts, int n)
{
    if (!k3_weights_prefetch_wanted(rp)) return;
    for (int i = 0; i < n; i++) {
        if (rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + experts[i]] >= 0) continue;
        int s = k3_expert_cache_insert(&rp->cache, layer, experts[i]);
        if (s < 0) return;
        slot *sl = &rp->cache_slots[s];
        weights_drain_slot(rp, sl);
        if (sl->prefetched) stats_add(&rp->stats->prefetch_unused, 1);
        k3_error err;
        if (weights_start_read(rp, sl, expert_unit(rp, layer, experts[i]), K3_READ_AHEAD, &err)) {
            k3_expert_cache_drop(&rp->cache, s);
            sl->unit = -1;
            return;
        }
        sl->prefetched = 1;
    }
}

int k3_weights_expert_ready(k3_weights *rp, int layer, int expert)
{
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s < 0) return 0;
    const slot *sl = &rp->cache_slots[s];
    for (int k = 0; k < sl->n_reqs; k++)
        if (__atomic_load_n(&sl->reqs[k].state, __ATOMIC_ACQUIRE) == 0) return 0;
    return 1;
}

int k3_weights_acquire_expert(k3_weights *rp, int layer, int expert, k3_mlp_weights *out, k3_error *err)
{
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s < 0) return k3_err(err, "internal: expert %d of layer %d was not claimed", expert, layer);
    slot *sl = &rp->cache_slots[s];
    if (weights_wait_slot_timed(rp, sl, &rp->stats->wait_experts_ns, err)) {
        k3_expert_cache_unpin(&rp->cache, s);
        k3_expert_cache_drop(&rp->cache, s);
        sl->unit = -1;
        return -1;
    }
    *out = rp->experts[(size_t)layer * rp->cfg->n_experts + expert];
    weights_rebase_mlp(rp, out, sl->mem);
    if (!sl->checked) {
        if (check_mxfp4(rp, out, layer, expert, err)) {
            k3_expert_cache_unpin(&rp->cache, s);
            k3_expert_cache_drop(&rp->cache, s);
            sl->unit = -1;
            return -1;
        }
        sl->checked = 1;
    }
    return 0;
}

void k3_weights_release_expert(k3_weights *rp, int layer, int expert)
{
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s >= 0) k3_expert_cache_unpin(&rp->cache, s);
}

/* The least a prompt can read: each distinct expert routed to since open
 * once (none when every expert was read at open), and each trunk unit that
 * is not pinned once (pinned ones are read at open, before any prompt). */
uint64_t k3_weights_prefill_bytes_min(const k3_weights *rp)
{
    const k3_config *c = rp->cfg;
    uint64_t bytes = 0;
    for (int i = 0; i <= c->n_layers; i++)
        if (!rp->units[i].pinned) bytes += rp->units[i].bytes;
    if (rp->expert_used && !rp->plan.all_resident)
        for (int l = 0; l < c->n_layers; l++)
            for (int e = 0; e < c->n_experts; e++)
                if (rp->expert_used[(size_t)l * c->n_experts + e]) bytes += rp->units[expert_unit(rp, l, e)].bytes;
    return bytes;
}
