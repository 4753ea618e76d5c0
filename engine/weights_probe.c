/* weights_probe.c - measure the device with exactly the reads the runtime
 * makes (one expert slot's size, the reader's queue depth). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* Random aligned reads of one expert slot's size over the largest file,
 * `depth` at a time through the same reader: the device speed for exactly
 * the reads the runtime makes. */
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
    const int d = rp->opt.io_depth > 0 ? rp->opt.io_depth : K3_IO_DEPTH_DEFAULT;
    uint8_t *buf = aligned_alloc(K3_IO_ALIGN, (size_t)size * d);
    k3_io_req *reqs = calloc((size_t)d, sizeof *reqs);
    if (!buf || !reqs) { free(buf); free(reqs); return k3_err(err, "out of memory"); }
    uint64_t rng = 0x9E3779B97F4A7C15ull, done_bytes = 0;
    const uint64_t windows = (fbytes - size) / K3_IO_ALIGN + 1;
    const uint64_t t0_ns = k3_now_ns();
    double elapsed = 0;
    int rc = 0;
    while (elapsed < seconds && rc == 0) {
        k3_io_req *ptrs[64];
        for (int i = 0; i < d; i++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            reqs[i] = (k3_io_req){.fd = rp->fd[file], .path = rp->index.shards[file].path,
                                  .offset = (rng % windows) * K3_IO_ALIGN, .bytes = size, .need_bytes = size,
                                  .dst = buf + (size_t)i * size, .kind = K3_READ_OTHER};
            ptrs[i] = &reqs[i];
        }
        k3_io_submit(rp->io, ptrs, d);
        for (int i = 0; i < d && rc == 0; i++) rc = k3_io_wait(rp->io, &reqs[i], err);
        done_bytes += size * (uint64_t)d;
        elapsed = (double)(k3_now_ns() - t0_ns) * 1e-9;
    }
    free(buf);
    free(reqs);
    if (rc) return -1;
    *gbps = done_bytes / elapsed / 1e9;
    *read_bytes = size;
    *depth = d;
    return 0;
}
