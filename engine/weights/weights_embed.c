/* weights_embed.c - embedding rows, read from disk one row per token (the
 * table is never resident: a 160k x 7168 bf16 table is 2.2 GB for a few KB
 * per token), and the model-level vectors kept in memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

int k3_weights_embed_row(k3_weights *rp, int token, float *out, k3_error *err)
{
    const k3_config *c = rp->cfg;
    if (token < 0 || token >= c->vocab_size)
        return k3_err(err, "token id %d is outside the vocabulary (0..%d)", token, c->vocab_size - 1);
    const st_tensor *t = rp->embed;
    const uint64_t row_bytes = (uint64_t)c->hidden * k3_dtype_size(t->dtype);
    const uint64_t start = t->file_offset + (uint64_t)token * row_bytes;
    const uint64_t a0 = start / K3_IO_ALIGN * K3_IO_ALIGN;
    k3_io_req r = {.fd = rp->fd[t->shard], .path = rp->index.shards[t->shard].path, .offset = a0,
                   .bytes = (start + row_bytes - a0 + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN,
                   .need_bytes = start + row_bytes - a0, .dst = rp->embed_buf, .kind = K3_READ_OTHER};
    k3_io_req *rq = &r;
    k3_io_submit(rp->io, &rq, 1);
    if (k3_io_wait(rp->io, &r, err)) return -1;
    k3_convert_to_f32(out, rp->embed_buf + (start - a0), t->dtype, c->hidden);
    rp->trace_token++;
    return 0;
}

const float *k3_weights_final_norm(k3_weights *rp) { return rp->final_norm; }

const float *k3_weights_output_res_score(k3_weights *rp) { return rp->output_res_score; }
