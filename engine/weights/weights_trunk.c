/* weights_trunk.c - the trunk units (each layer's non-expert matrices, and
 * the head): pinned, or streamed through a ring of slots where the next
 * streamed unit is read while the current layer computes. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* The trunk unit that follows ui in forward order (layers, head, next token's
 * layers) and is not pinned; -1 if all are pinned. */
static int next_streamed_unit(const k3_weights *rp, int ui)
{
    const int n = rp->cfg->n_layers + 1;
    for (int k = 1; k <= n; k++) {
        int u = (ui + k) % n;
        if (!rp->plan.pinned[u]) return u;
    }
    return -1;
}

static slot *ring_find(k3_weights *rp, int ui)
{
    for (int i = 0; i < rp->n_ring; i++)
        if (rp->ring[i].unit == ui) return &rp->ring[i];
    return NULL;
}

/* A free ring slot (not busy); prefers one not holding a wanted unit. */
static slot *ring_free(k3_weights *rp, int avoid)
{
    slot *best = NULL;
    for (int i = 0; i < rp->n_ring; i++) {
        slot *s = &rp->ring[i];
        if (s->busy) continue;
        if (!best || (best->unit == avoid && s->unit != avoid)) best = s;
    }
    return best;
}

/* Make trunk unit ui available and start reading the next streamed unit. */
static uint8_t *acquire_trunk(k3_weights *rp, int ui, k3_error *err)
{
    if (rp->plan.pinned[ui]) return rp->units[ui].pinned;
    slot *s = ring_find(rp, ui);
    if (!s) {
        s = ring_free(rp, -1);
        if (!s) { k3_err(err, "internal: no free ring slot"); return NULL; }
        weights_drain_slot(rp, s);                         /* an old prefetch */
        if (weights_start_read(rp, s, ui, K3_READ_TRUNK, err)) return NULL;
    }
    s->busy = 1;
    int next = next_streamed_unit(rp, ui);
    if (next >= 0 && next != ui && !ring_find(rp, next)) {
        slot *f = ring_free(rp, ui);
        if (f && f != s) {
            weights_drain_slot(rp, f);
            if (weights_start_read(rp, f, next, K3_READ_TRUNK, err)) return NULL;
        }
    }
    if (weights_wait_slot_timed(rp, s, &rp->stats->wait_trunk_ns, err)) {
        s->unit = -1;
        s->busy = 0;
        return NULL;
    }
    return s->mem;
}

static void release_trunk(k3_weights *rp, int ui)
{
    if (rp->plan.pinned[ui]) return;
    slot *s = ring_find(rp, ui);
    assert(s && s->busy);                 /* released only after a successful acquire */
    if (s) s->busy = 0;
}

const k3_layer_weights *k3_weights_acquire_layer(k3_weights *rp, int layer, k3_error *err)
{
    uint8_t *base = acquire_trunk(rp, layer, err);
    if (!base) return NULL;
    if (!rp->plan.pinned[layer]) weights_rebase_layer(rp, layer, base);
    return &rp->layer_views[layer];
}

void k3_weights_release_layer(k3_weights *rp, int layer) { release_trunk(rp, layer); }

const k3_layer_weights *k3_weights_peek_layer(k3_weights *rp, int layer)
{
    return rp->plan.pinned[layer] ? &rp->layer_views[layer] : NULL;
}

const k3_weight *k3_weights_acquire_head(k3_weights *rp, k3_error *err)
{
    const int ui = head_unit(rp);
    if (rp->cfg->tie_embeddings && !rp->units[ui].n_tensors) return &rp->head_view;
    uint8_t *base = acquire_trunk(rp, ui, err);
    if (!base) return NULL;
    rp->head_view = rp->head_template;
    weights_rebase_weight(rp, &rp->head_view, base);
    return &rp->head_view;
}

void k3_weights_release_head(k3_weights *rp)
{
    release_trunk(rp, head_unit(rp));
}
