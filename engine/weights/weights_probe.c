/* weights_probe.c - measure the device with exactly the reads the runtime
 * makes: routed experts' own pages, wherever they lie in whichever file,
 * through the same reader, into the expert cache's own slots; and the trunk
 * as the ring reads it. Both report a first reading apart from reading
 * again: decode meets the same pages again and again, and a host's cache
 * can serve those tenfold faster than pages nobody read lately. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"
#include "k3_util.h"

/* The depths probed: 1, 2, and the reader's own (the last). */
static int probe_depths(int d, int *depths)
{
    int n = 0;
    depths[n++] = 1;
    if (d > 2) depths[n++] = 2;
    if (d > 1) depths[n++] = d;
    return n;
}

/* The probe's sample: at most this many distinct expert pages. */
#define PROBE_SAMPLE_MAX 4096

/* Probes made by this process: each draws another sample (seeded by the
 * count and the clock), so neither a probe after the run nor the next
 * process's probe finds its sample already read by the one before. */
static atomic_uint probe_count;
static uint64_t probe_seed(void)
{
    const uint64_t x = k3_now_ns() ^ (0x9E3779B97F4A7C15ull * (2 * (uint64_t)atomic_fetch_add(&probe_count, 1) + 1));
    return x ? x : 1;                     /* xorshift never leaves 0 */
}

/* A sample of distinct routed experts, uniform over every MoE layer's
 * experts (so over every file that holds them), as unit indices in the
 * order they will be read. n <= PROBE_SAMPLE_MAX; -1 when out of memory. */
static int probe_sample(k3_weights *rp, int *sample, int *n)
{
    const k3_config *c = rp->cfg;
    int moe[K3_MAX_LAYERS], n_moe = 0;
    for (int l = 0; l < c->n_layers && n_moe < K3_MAX_LAYERS; l++)
        if (c->is_moe[l]) moe[n_moe++] = l;
    const uint64_t total = (uint64_t)n_moe * (uint64_t)c->n_experts;
    uint8_t *taken = calloc(total ? total : 1, 1);
    if (!taken) return -1;
    const int want = total < PROBE_SAMPLE_MAX ? (int)total : PROBE_SAMPLE_MAX;
    uint64_t rng = probe_seed();
    *n = 0;
    while (*n < want) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        const uint64_t k = rng % total;
        if (taken[k]) continue;
        taken[k] = 1;
        sample[(*n)++] = expert_unit(rp, moe[k / (uint64_t)c->n_experts], (int)(k % (uint64_t)c->n_experts));
    }
    free(taken);
    return 0;
}

/* Read sample[*next], sample[*next + 1], ... in waves of `d` reads into
 * `slots`, as a layer's misses go out together and are waited for
 * together, for `seconds` (at least one wave). once: a first reading, each
 * page once, ending early at the sample's end (*next counts the pages
 * read); else round and round the n_sample pages (*next is where the next
 * call goes on from). */
static int probe_waves(k3_weights *rp, slot *const *slots, int d, const int *sample, int n_sample, int once, int *next,
                       double seconds, double *gbps, uint64_t *bytes_total, k3_error *err)
{
    uint64_t done = 0;
    const uint64_t t0 = k3_now_ns();
    double elapsed = 0;
    do {
        const int wave = once && n_sample - *next < d ? n_sample - *next : d;
        for (int i = 0; i < wave; i++) {
            const int ui = sample[*next];
            *next = once ? *next + 1 : (*next + 1) % n_sample;
            if (weights_start_read(rp, slots[i], ui, K3_READ_OTHER, err)) return -1;
            done += rp->units[ui].bytes;
        }
        int rc = 0;
        for (int i = 0; i < wave; i++)       /* wait for all, as a layer waits for its misses */
            if (weights_wait_slot(rp, slots[i], rc ? NULL : err)) rc = -1;
        if (rc) return -1;
        elapsed = (k3_now_ns() - t0) * 1e-9;
    } while (elapsed < seconds && !(once && *next == n_sample));
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
        int *sample = malloc(PROBE_SAMPLE_MAX * sizeof *sample), n_sample = 0;
        int rc = sample && probe_sample(rp, sample, &n_sample) == 0 ? 0 : k3_err(err, "out of memory");
        if (rc == 0 && n_sample == 0) rc = k3_err(err, "internal: expert slots but no routed expert to probe");
        const uint64_t t0 = k3_now_ns();
        /* the first reads: as far into the sample as a quarter of the time
         * goes (at least one wave); that much of it is then read again */
        int n_read = 0, next = 0;
        if (rc == 0)
            rc = probe_waves(rp, slots, d, sample, n_sample, 1, &n_read, seconds / 4, &out->first_read_gbps,
                             &out->bytes_total, err);
        for (int k = 0; k < n_read && rc == 0; k++) out->sample_bytes += rp->units[sample[k]].bytes;
        for (int k = 0; k < out->n_depths && rc == 0; k++)
            rc = probe_waves(rp, slots, out->depths[k], sample, n_read, 0, &next, seconds * 3 / 4 / out->n_depths,
                             &out->depth_gbps[k], &out->bytes_total, err);
        out->seconds = (k3_now_ns() - t0) * 1e-9;
        free(sample);
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
    const uint64_t t0 = k3_now_ns(), seed = probe_seed();
    uint64_t n_read = 0, reads = 0;
    /* the first reads for a quarter of the time, then those places again */
    int rc = k3_io_probe(rp->io, rp->fd[file], rp->index.shards[file].path, fbytes, size, bufs, d, seconds / 4, seed,
                         0, &out->first_read_gbps, &n_read, err);
    out->bytes_total += n_read * size;
    out->sample_bytes = n_read * size;
    for (int k = 0; k < out->n_depths && rc == 0; k++) {
        rc = k3_io_probe(rp->io, rp->fd[file], rp->index.shards[file].path, fbytes, size, bufs, out->depths[k],
                         seconds * 3 / 4 / out->n_depths, seed, n_read, &out->depth_gbps[k], &reads, err);
        out->bytes_total += reads * size;
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

/* ---- the trunk as the ring reads it -------------------------------------- */

/* Where a pass over the streamed trunk units stands. */
typedef struct trunk_cursor {
    const int *units;
    int n_units, i, win;
    uint64_t off;                 /* bytes of window `win` already requested */
} trunk_cursor;

/* The next buffer's worth of the pass: requests for the rest of the current
 * unit's windows, as many bytes as fit in buf (a unit never shares a buffer
 * with the next: the ring gives each unit its own slot). A unit that fits
 * is its windows, one request each, as weights_start_read issues them.
 * 1 with *n requests made, 0 when the pass is over. */
static int trunk_next_group(const k3_weights *rp, trunk_cursor *c, uint8_t *buf, uint64_t buf_bytes, k3_io_req *reqs,
                            int max_reqs, int *n)
{
    *n = 0;
    while (c->i < c->n_units && c->win >= rp->units[c->units[c->i]].n_win) { c->i++; c->win = 0; c->off = 0; }
    if (c->i >= c->n_units) return 0;
    const unit *u = &rp->units[c->units[c->i]];
    uint64_t used = 0;
    while (c->win < u->n_win && *n < max_reqs && used + K3_IO_ALIGN <= buf_bytes) {
        const unit_window *w = &u->win[c->win];
        uint64_t len = w->bytes - c->off;
        if (len > buf_bytes - used) len = buf_bytes - used;
        const uint64_t need = w->need_bytes > c->off ? (w->need_bytes - c->off < len ? w->need_bytes - c->off : len) : 0;
        reqs[(*n)++] = (k3_io_req){.fd = rp->fd[w->file], .path = rp->index.shards[w->file].path,
                                   .offset = w->offset + c->off, .bytes = len, .need_bytes = need,
                                   .dst = buf + used, .kind = K3_READ_OTHER};
        used = (used + len + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
        c->off += len;
        if (c->off >= w->bytes) { c->win++; c->off = 0; }
    }
    if (c->win >= u->n_win) { c->i++; c->win = 0; c->off = 0; }
    return 1;
}

/* Queue a group's requests. */
static void trunk_submit(k3_weights *rp, k3_io_req *reqs, int n)
{
    k3_io_req *ptrs[64];
    for (int k = 0; k < n; k += 64) {
        const int m = n - k < 64 ? n - k : 64;
        for (int j = 0; j < m; j++) ptrs[j] = &reqs[k + j];
        k3_io_submit(rp->io, ptrs, m);
    }
}

/* See weights.h. Passes over the streamed units in forward order, as
 * decode streams them token after token: each unit's reads go out while
 * the previous unit's are waited for (two buffers: the ring's current unit
 * and the one it reads ahead), until at least two passes and `seconds`
 * (or 20 x `seconds` after the first pass, for a trunk too large to read
 * twice quickly). The first pass is reported apart: it may find the units
 * colder than decode does, which re-reads the same units every token. */
int k3_weights_probe_trunk_into(k3_weights *rp, const uint8_t *pinned, uint8_t *const *bufs, int n_bufs,
                                uint64_t buf_bytes, double seconds, k3_trunk_probe *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    if (buf_bytes < K3_IO_ALIGN || n_bufs < 1) return k3_err(err, "internal: no buffer for the trunk probe");
    const int n_trunk = rp->cfg->n_layers + 1;
    int *units = malloc((size_t)n_trunk * sizeof *units);
    if (!units) return k3_err(err, "out of memory");
    int n_units = 0, max_win = 1;
    for (int ui = 0; ui < n_trunk; ui++) {
        if (pinned[ui] || !rp->units[ui].bytes) continue;
        units[n_units++] = ui;
        out->pass_bytes += rp->units[ui].bytes;
        if (rp->units[ui].n_win > max_win) max_win = rp->units[ui].n_win;
    }
    out->units = n_units;
    out->read_bytes = buf_bytes;
    if (!n_units) { free(units); return 0; }          /* nothing streams: nothing to time */
    if (n_bufs > 2) n_bufs = 2;
    k3_io_req *reqs = calloc((size_t)max_win * 2, sizeof *reqs);
    if (!reqs) { free(units); return k3_err(err, "out of memory"); }
    k3_io_req *group[2] = {reqs, reqs + max_win};
    const uint64_t t0 = k3_now_ns();
    uint64_t later_bytes = 0, later_ns = 0;
    int rc = 0, stop = 0;
    while (!stop && rc == 0) {
        const uint64_t p0 = k3_now_ns();
        uint64_t pass_done = 0;
        trunk_cursor c = {.units = units, .n_units = n_units};
        int n[2] = {0, 0}, have[2] = {0, 0};
        for (int b = 0; b < n_bufs; b++)
            if ((have[b] = trunk_next_group(rp, &c, bufs[b], buf_bytes, group[b], max_win, &n[b])))
                trunk_submit(rp, group[b], n[b]);
        for (int b = 0; have[b];) {
            for (int k = 0; k < n[b]; k++) {
                if (k3_io_wait(rp->io, &group[b][k], rc ? NULL : err)) rc = -1;
                pass_done += group[b][k].got;
            }
            /* a trunk too large to read twice in time: stop after the first pass */
            if (out->passes >= 1 && (k3_now_ns() - t0) * 1e-9 >= 20 * seconds) stop = 1;
            have[b] = !stop && rc == 0 && trunk_next_group(rp, &c, bufs[b], buf_bytes, group[b], max_win, &n[b]);
            if (have[b]) trunk_submit(rp, group[b], n[b]);
            b = (b + 1) % n_bufs;                       /* groups went out alternately */
        }
        const uint64_t pass_ns = k3_now_ns() - p0;
        if (out->passes == 0) out->first_pass_gbps = pass_done / (pass_ns * 1e-9) / 1e9;
        else { later_bytes += pass_done; later_ns += pass_ns; }
        out->bytes_total += pass_done;
        if (!stop) out->passes++;
        const double elapsed = (k3_now_ns() - t0) * 1e-9;
        if (out->passes >= 2 && elapsed >= seconds) stop = 1;
    }
    out->seconds = (k3_now_ns() - t0) * 1e-9;
    out->gbps = later_ns ? later_bytes / (later_ns * 1e-9) / 1e9 : out->first_pass_gbps;
    free(reqs);
    free(units);
    return rc;
}

/* See weights.h: into the ring's own slots (its first two), which are left
 * empty after (the ring reads its units again when decode next needs them). */
int k3_weights_probe_trunk(k3_weights *rp, double seconds, k3_trunk_probe *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    drain_all_reads(rp);
    if (!rp->n_ring) return 0;                          /* every trunk unit pinned: nothing streams */
    const int n_bufs = rp->n_ring < 2 ? rp->n_ring : 2;
    uint8_t *bufs[2];
    for (int b = 0; b < n_bufs; b++) {
        rp->ring[b].unit = -1;                          /* its bytes are about to be overwritten */
        rp->ring[b].prefetched = 0;
        bufs[b] = rp->ring[b].mem;
    }
    return k3_weights_probe_trunk_into(rp, rp->plan.pinned, bufs, n_bufs, rp->plan.ring_slot_bytes, seconds, out, err);
}
