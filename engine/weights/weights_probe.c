/* weights_probe.c - measure the device with exactly the reads the runtime
 * makes: routed experts' own pages, wherever they lie in whichever file,
 * through the same reader, into the expert cache's own slots. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* The depths probed: 1, 2, and the reader's own (the last). */
static int probe_depths(int d, int *depths)
{
    int n = 0;
    depths[n++] = 1;
    if (d > 2) depths[n++] = 2;
    if (d > 1) depths[n++] = d;
    return n;
}

/* Random routed experts (uniform over every layer's experts, so over every
 * file that holds them), `d` reads in flight per wave as a layer's misses
 * go out together, for `seconds`; the bytes are the units' own windows. */
static int probe_experts(k3_weights *rp, slot *const *slots, int d, double seconds, uint64_t *rng, double *gbps,
                         uint64_t *bytes_total, k3_error *err)
{
    const k3_config *c = rp->cfg;
    int moe[K3_MAX_LAYERS], n_moe = 0;
    for (int l = 0; l < c->n_layers && n_moe < K3_MAX_LAYERS; l++)
        if (c->is_moe[l]) moe[n_moe++] = l;
    uint64_t done = 0;
    const uint64_t t0 = k3_now_ns();
    double elapsed = 0;
    while (elapsed < seconds) {
        for (int i = 0; i < d; i++) {
            *rng ^= *rng << 13; *rng ^= *rng >> 7; *rng ^= *rng << 17;
            const int layer = moe[*rng % (uint64_t)n_moe];
            const int ui = expert_unit(rp, layer, (int)((*rng >> 20) % (uint64_t)c->n_experts));
            if (weights_start_read(rp, slots[i], ui, K3_READ_OTHER, err)) return -1;
            done += rp->units[ui].bytes;
        }
        int rc = 0;
        for (int i = 0; i < d; i++)          /* wait for all, as a layer waits for its misses */
            if (weights_wait_slot(rp, slots[i], rc ? NULL : err)) rc = -1;
        if (rc) return -1;
        elapsed = (k3_now_ns() - t0) * 1e-9;
    }
    *gbps = done / elapsed / 1e9;
    *bytes_total += done;
    return 0;
}

/* The files the routed experts' windows lie in. */
static int expert_files(const k3_weights *rp)
{
    const k3_config *c = rp->cfg;
    int n = 0;
    uint8_t seen[256] = {0};
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->is_moe[l]) continue;
        for (int e = 0; e < c->n_experts; e++) {
            const unit *u = &rp->units[expert_unit(rp, l, e)];
            for (int k = 0; k < u->n_win; k++)
                if (u->win[k].file < 256 && !seen[u->win[k].file]) { seen[u->win[k].file] = 1; n++; }
        }
    }
    return n;
}

/* Wait out every read in flight (the ring's next trunk unit, expert
 * prefetches): the probe must have the device to itself, or it times its
 * pages queued behind a trunk unit of hundreds of MiB. The slots keep
 * their units: a drained read is complete and stays valid. */
static void drain_all_reads(k3_weights *rp)
{
    for (int i = 0; i < rp->n_ring; i++) weights_drain_slot(rp, &rp->ring[i]);
    const int n_slots = rp->plan.expert_slot_bytes ? rp->plan.n_expert_slots : 0;
    for (int i = 0; i < n_slots; i++) weights_drain_slot(rp, &rp->cache_slots[i]);
}

int k3_weights_probe_device(k3_weights *rp, double seconds, k3_device_probe *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    drain_all_reads(rp);
    int d = rp->opt.io_depth > 0 ? rp->opt.io_depth : K3_IO_DEPTH_DEFAULT;
    if (d > 64) d = 64;
    const int n_slots = rp->plan.expert_slot_bytes ? rp->plan.n_expert_slots : 0;
    if (n_slots > 0) {
        /* borrow the first d expert slots; the experts they held are read
         * back after (a slot's unit is -1 while it holds a probe page) */
        if (d > n_slots) d = n_slots;
        slot *slots[64];
        int held[64];
        for (int i = 0; i < d; i++) {
            slots[i] = &rp->cache_slots[i];
            held[i] = slots[i]->unit;
        }
        out->n_depths = probe_depths(d, out->depths);
        uint64_t rng = 0x9E3779B97F4A7C15ull;
        int rc = 0;
        const uint64_t t0 = k3_now_ns();
        for (int k = 0; k < out->n_depths && rc == 0; k++)
            rc = probe_experts(rp, slots, out->depths[k], seconds / out->n_depths, &rng, &out->depth_gbps[k],
                               &out->bytes_total, err);
        out->seconds = (k3_now_ns() - t0) * 1e-9;
        for (int i = 0; i < d; i++) {
            slot *sl = slots[i];
            sl->unit = held[i];
            if (sl->unit < 0) continue;
            k3_error rerr;
            if (weights_start_read(rp, sl, sl->unit, K3_READ_OTHER, &rerr) || weights_wait_slot(rp, sl, &rerr)) {
                k3_expert_cache_drop(&rp->cache, i);
                sl->unit = -1;
                if (rc == 0) { *err = rerr; rc = -1; }
            }
        }
        if (rc) return -1;
        out->gbps = out->depth_gbps[out->n_depths - 1];
        out->read_bytes = rp->plan.expert_slot_bytes;
        out->depth = d;
        out->files = expert_files(rp);
        return 0;
    }
    /* no routed experts: slot-sized random reads over the largest file */
    int file = 0;
    for (int i = 1; i < rp->index.n_shards; i++)
        if (rp->index.shards[i].file_bytes > rp->index.shards[file].file_bytes) file = i;
    uint64_t size = 1u << 20;
    const uint64_t fbytes = rp->index.shards[file].file_bytes;
    if (fbytes < size) size = fbytes / K3_IO_ALIGN * K3_IO_ALIGN;
    if (!size) return k3_err(err, "%s: too small to probe", rp->index.shards[file].path);
    uint8_t *own_buf = aligned_alloc(K3_IO_ALIGN, (size_t)size * d);
    if (!own_buf) return k3_err(err, "out of memory");
    uint8_t *bufs[64];
    for (int i = 0; i < d; i++) bufs[i] = own_buf + (size_t)i * size;
    out->n_depths = probe_depths(d, out->depths);
    const uint64_t t0 = k3_now_ns();
    int rc = 0;
    for (int k = 0; k < out->n_depths && rc == 0; k++) {
        rc = k3_io_probe(rp->io, rp->fd[file], rp->index.shards[file].path, fbytes, size, bufs, out->depths[k],
                         seconds / out->n_depths, &out->depth_gbps[k], err);
        out->bytes_total += (uint64_t)(out->depth_gbps[k] * 1e9 * seconds / out->n_depths);
    }
    out->seconds = (k3_now_ns() - t0) * 1e-9;
    free(own_buf);
    if (rc) return -1;
    out->gbps = out->depth_gbps[out->n_depths - 1];
    out->read_bytes = size;
    out->depth = d;
    out->files = 1;
    return 0;
}
