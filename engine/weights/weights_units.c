/* weights_units.c - units: the groups of big matrices read as a whole (a
 * layer's trunk, the head, one routed expert). A unit's tensors are covered
 * by a few large aligned file windows; its k3_weight templates hold
 * placeholders that are rebased onto wherever the unit sits in memory. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "huge_pages.h"
#include "weights_internal.h"
#include "k3_util.h"

static int by_file_offset(const void *a, const void *b, void *ctx)
{
    const st_index *ix = ctx;
    const st_tensor *x = &ix->tensors[*(const int *)a], *y = &ix->tensors[*(const int *)b];
    if (x->shard != y->shard) return x->shard - y->shard;
    return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

/* Cut every window longer than piece_bytes (a multiple of K3_IO_ALIGN)
 * into pieces of that size, each its own read, contiguous in the file and
 * in the unit's memory as before. */
static int cut_windows(unit *u, uint64_t piece_bytes, k3_error *err)
{
    int n = 0;
    for (int k = 0; k < u->n_win; k++) n += (int)((u->win[k].bytes + piece_bytes - 1) / piece_bytes);
    if (n == u->n_win) return 0;
    unit_window *cut = calloc((size_t)n, sizeof *cut);
    if (!cut) return k3_err(err, "out of memory");
    int m = 0;
    for (int k = 0; k < u->n_win; k++) {
        const unit_window *w = &u->win[k];
        for (uint64_t at = 0; at < w->bytes; at += piece_bytes) {
            unit_window *p = &cut[m++];
            p->file = w->file;
            p->offset = w->offset + at;
            p->bytes = w->bytes - at < piece_bytes ? w->bytes - at : piece_bytes;
            p->need_bytes = w->need_bytes - at < p->bytes ? w->need_bytes - at : p->bytes;   /* > 0: bytes is need rounded up */
            p->slot_pos = w->slot_pos + at;
        }
    }
    free(u->win);
    u->win = cut;
    u->n_win = n;
    return 0;
}

/* Cover a unit's tensors with aligned windows (merging neighbours less than
 * 1 MiB apart, so a packed run or an HF expert is one read) and record where
 * each tensor lands in the unit's memory. A trunk unit's windows are then
 * cut into reads of at most piece_bytes (0: not cut): the reader lets an
 * expert page go before the trunk reads not yet issued (io.c), and a layer's
 * expert misses then wait for a few pieces in flight, not a whole window of
 * tens or hundreds of MB. */
int weights_layout_unit(k3_weights *rp, unit *u, uint64_t piece_bytes, k3_error *err)
{
    if (!u->n_tensors) return 0;
    qsort_r(u->tensors, (size_t)u->n_tensors, sizeof *u->tensors, by_file_offset, &rp->index);
    u->win = calloc((size_t)u->n_tensors, sizeof *u->win);
    if (!u->win) return k3_err(err, "out of memory");
    /* Neighbours closer than 1 MiB share one read: on NVMe a 1 MiB gap
     * costs ~0.3 ms of extra transfer, about what a separate request costs
     * in latency, and it makes an HF expert's three matrices (stored
     * adjacently) and a packed trunk run one read each. */
    const uint64_t A = K3_IO_ALIGN, gap = 1u << 20;
    for (int i = 0; i < u->n_tensors; i++) {
        const st_tensor *t = &rp->index.tensors[u->tensors[i]];
        unit_window *w = u->n_win ? &u->win[u->n_win - 1] : NULL;
        uint64_t end = t->file_offset + t->nbytes;
        if (w && w->file == t->shard && t->file_offset <= w->offset + w->need_bytes + gap) {
            if (end > w->offset + w->need_bytes) w->need_bytes = end - w->offset;
        } else {
            w = &u->win[u->n_win++];
            w->file = t->shard;
            w->offset = t->file_offset / A * A;
            w->need_bytes = end - w->offset;
        }
    }
    uint64_t pos = 0;
    for (int k = 0; k < u->n_win; k++) {
        unit_window *w = &u->win[k];
        w->bytes = (w->need_bytes + A - 1) / A * A;
        w->slot_pos = pos;
        pos += w->bytes;
    }
    u->bytes = pos;
    for (int i = 0; i < u->n_tensors; i++) {
        const st_tensor *t = &rp->index.tensors[u->tensors[i]];
        for (int k = 0; k < u->n_win; k++) {
            const unit_window *w = &u->win[k];
            if (w->file == t->shard && t->file_offset >= w->offset && t->file_offset + t->nbytes <= w->offset + w->need_bytes)
                rp->tensor_pos[u->tensors[i]] = w->slot_pos + (t->file_offset - w->offset);
        }
    }
    return piece_bytes ? cut_windows(u, piece_bytes, err) : 0;
}

/* Placeholder -> address inside a unit's memory. */
void weights_rebase_weight(const k3_weights *rp, k3_weight *w, uint8_t *base)
{
    if (!w->rows) return;
    assert((uintptr_t)w->data - 1 < (uintptr_t)rp->index.n_tensors);   /* a placeholder, not an address */
    w->data = base + rp->tensor_pos[(uintptr_t)w->data - 1];
    if (w->mx_scale) w->mx_scale = base + rp->tensor_pos[(uintptr_t)w->mx_scale - 1];
}

void weights_rebase_mlp(const k3_weights *rp, k3_mlp_weights *m, uint8_t *base)
{
    weights_rebase_weight(rp, &m->gate, base);
    weights_rebase_weight(rp, &m->up, base);
    weights_rebase_weight(rp, &m->down, base);
}

/* A copy of layer l's template pointing into memory `base`. */
void weights_rebase_layer(k3_weights *rp, int l, uint8_t *base)
{
    k3_layer_weights *v = &rp->layer_views[l];
    *v = rp->layers[l];
    k3_weight *ws[] = {&v->kda.q, &v->kda.k, &v->kda.v, &v->kda.f_a, &v->kda.f_b, &v->kda.g_a, &v->kda.g_b,
                       &v->kda.g_full, &v->kda.b, &v->kda.o, &v->mla.q, &v->mla.q_a, &v->mla.gate,
                       &v->mla.kv_a, &v->mla.kv_b, &v->mla.k_b, &v->mla.v_b, &v->mla.o, &v->router, &v->latent_down, &v->latent_up};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) weights_rebase_weight(rp, ws[i], base);
    weights_rebase_mlp(rp, &v->dense, base);
    weights_rebase_mlp(rp, &v->shared, base);
}

/* Start reading unit ui into slot memory (requests kept in the slot). */
int weights_start_read(k3_weights *rp, slot *s, int ui, k3_read_kind kind, k3_error *err)
{
    unit *u = &rp->units[ui];
    if (s->n_reqs < u->n_win) {
        k3_io_req *g = realloc(s->reqs, (size_t)u->n_win * sizeof *g);
        if (!g) return k3_err(err, "out of memory");
        s->reqs = g;
    }
    k3_io_req *ptrs[64];
    int n = 0;
    for (int k = 0; k < u->n_win; k++) {
        k3_io_req *r = &s->reqs[k];
        memset(r, 0, sizeof *r);
        r->fd = rp->fd[u->win[k].file];
        r->path = rp->index.shards[u->win[k].file].path;
        r->offset = u->win[k].offset;
        r->bytes = u->win[k].bytes;
        r->need_bytes = u->win[k].need_bytes;
        r->dst = s->mem + u->win[k].slot_pos;
        r->kind = kind;
        ptrs[n++] = r;
        if (n == 64 || k == u->n_win - 1) { k3_io_submit(rp->io, ptrs, n); n = 0; }
    }
    s->n_reqs = u->n_win;
    s->unit = ui;
    s->checked = 0;
    return 0;
}

/* Wait for a slot's reads; the stall is charged to *wait_ns when given. */
int weights_wait_slot_timed(k3_weights *rp, slot *s, uint64_t *wait_ns, k3_error *err)
{
    uint64_t t0 = wait_ns ? k3_now_ns() : 0;
    int rc = 0;
    for (int k = 0; k < rp->units[s->unit].n_win && rc == 0; k++)
        if (k3_io_wait(rp->io, &s->reqs[k], err)) rc = -1;
    if (wait_ns) stats_add(wait_ns, k3_now_ns() - t0);
    return rc;
}

int weights_wait_slot(k3_weights *rp, slot *s, k3_error *err) { return weights_wait_slot_timed(rp, s, NULL, err); }

/* Wait out a slot's reads before it is refilled: its bytes are discarded, so
 * whether the old read failed does not matter (a failed read of a unit that
 * is needed surfaces when that unit is read again). Reads not yet issued
 * are taken off the queue first: a guess the reader would reach only after
 * every needed read must not hold up the read that replaces it. */
void weights_drain_slot(k3_weights *rp, slot *s)
{
    k3_error discarded;
    if (s->unit < 0 || !s->n_reqs) return;
    for (int k = 0; k < rp->units[s->unit].n_win; k++) k3_io_cancel(rp->io, &s->reqs[k]);
    weights_wait_slot(rp, s, &discarded);
}

/* Read a unit into a pinned buffer now (at open). */
int weights_read_pinned(k3_weights *rp, int ui, k3_read_kind kind, k3_error *err)
{
    unit *u = &rp->units[ui];
    u->pinned = weights_own(rp, k3_huge_alloc(u->bytes ? u->bytes : K3_IO_ALIGN, K3_IO_ALIGN, rp->opt.huge_pages));
    if (!u->pinned) return k3_err(err, "out of memory for %.1f MiB of weights", u->bytes / 1048576.0);
    slot s = {.mem = u->pinned, .unit = -1};
    int rc = weights_start_read(rp, &s, ui, kind, err) || weights_wait_slot(rp, &s, err);
    free(s.reqs);
    return rc ? -1 : 0;
}
