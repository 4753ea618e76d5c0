/* weights_probe.c - measure the device with exactly the reads the runtime
 * makes (one expert slot's size, the reader's queue depth). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* Random aligned reads of one expert slot's size over the largest file,
 * `depth` at a time through the same reader: the device speed for exactly
 * the reads the runtime makes. The reads land in expert cache slots (no
 * memory beyond the plan's); the experts they held are read back after. */
int k3_weights_probe_device(k3_weights *rp, double seconds, double *gbps, uint64_t *read_bytes, int *depth,
                            k3_error *err)
{
    int file = 0;
    for (int i = 1; i < rp->index.n_shards; i++)
        if (rp->index.shards[i].file_bytes > rp->index.shards[file].file_bytes) file = i;
    uint64_t size = rp->plan.expert_slot_bytes ? rp->plan.expert_slot_bytes : (1u << 20);
    const uint64_t fbytes = rp->index.shards[file].file_bytes;
    if (fbytes < size) size = fbytes / K3_IO_ALIGN * K3_IO_ALIGN;
    if (!size) return k3_err(err, "%s: too small to probe", rp->index.shards[file].path);
    int d = rp->opt.io_depth > 0 ? rp->opt.io_depth : K3_IO_DEPTH_DEFAULT;
    if (d > 64) d = 64;
    /* buffers: the first d expert cache slots (a model without routed
     * experts has no slots and allocates its own) */
    const int n_borrow = rp->plan.expert_slot_bytes && rp->plan.n_expert_slots > 0
                             ? (d < rp->plan.n_expert_slots ? d : rp->plan.n_expert_slots) : 0;
    if (n_borrow) d = n_borrow;
    uint8_t *own_buf = n_borrow ? NULL : aligned_alloc(K3_IO_ALIGN, (size_t)size * d);
    uint8_t *bufs[64];
    for (int i = 0; i < d; i++) {
        if (n_borrow) {
            slot *sl = &rp->cache_slots[i];
            weights_drain_slot(rp, sl);                  /* a prefetch may be in flight */
            bufs[i] = sl->mem;
        } else {
            bufs[i] = own_buf ? own_buf + (size_t)i * size : NULL;
        }
    }
    if (!n_borrow && !own_buf) return k3_err(err, "out of memory");
    int rc = k3_io_probe(rp->io, rp->fd[file], rp->index.shards[file].path, fbytes, size, bufs, d, seconds, gbps, err);
    free(own_buf);
    for (int i = 0; i < n_borrow; i++) {   /* put back the experts whose slots were borrowed */
        slot *sl = &rp->cache_slots[i];
        if (sl->unit < 0) continue;
        k3_error rerr;
        if (weights_start_read(rp, sl, sl->unit, K3_READ_OTHER, &rerr) || weights_wait_slot(rp, sl, &rerr)) {
            k3_expert_cache_drop(&rp->cache, i);
            sl->unit = -1;
            if (rc == 0) { *err = rerr; rc = -1; }
        }
    }
    if (rc) return -1;
    *read_bytes = size;
    *depth = d;
    return 0;
}
