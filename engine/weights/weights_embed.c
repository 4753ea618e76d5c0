/* weights_embed.c - embedding rows, read from disk one row per token (the
 * table is never resident: a 160k x 7168 bf16 table is 2.2 GB for a few KB
 * per token), and the model-level vectors kept in memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "weights_internal.h"

/* Bytes of the aligned bounce buffer: K3_EMBED_BATCH_ROWS rows of at most 4
 * bytes per value, each with an alignment block on either side of an
 * unaligned row (the planner counts the same figure). */
uint64_t k3_weights_embed_buf_bytes(int hidden)
{
    const uint64_t row = ((uint64_t)hidden * 4 + 2 * K3_IO_ALIGN + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
    return row * K3_EMBED_BATCH_ROWS;
}

/* The rows of a chunk are read K3_EMBED_BATCH_ROWS at a time, all in flight
 * together: a pass of 8 tokens (a draft pass, a prompt chunk) waits for about
 * one read instead of eight one after another. */
int k3_weights_embed_rows(k3_weights *rp, const int *tokens, int n, float *out, k3_error *err)
{
    const k3_config *c = rp->cfg;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return k3_err(err, "token id %d is outside the vocabulary (0..%d)", tokens[i], c->vocab_size - 1);
    const st_tensor *t = rp->embed;
    const uint64_t row_bytes = (uint64_t)c->hidden * k3_dtype_size(t->dtype);
    const uint64_t slot_bytes = rp->embed_buf_bytes / K3_EMBED_BATCH_ROWS;
    for (int b = 0; b < n; b += K3_EMBED_BATCH_ROWS) {
        const int nb = n - b < K3_EMBED_BATCH_ROWS ? n - b : K3_EMBED_BATCH_ROWS;
        k3_io_req r[K3_EMBED_BATCH_ROWS], *rq[K3_EMBED_BATCH_ROWS];
        uint64_t skip[K3_EMBED_BATCH_ROWS];
        for (int i = 0; i < nb; i++) {
            const uint64_t start = t->file_offset + (uint64_t)tokens[b + i] * row_bytes;
            const uint64_t a0 = start / K3_IO_ALIGN * K3_IO_ALIGN;
            skip[i] = start - a0;
            r[i] = (k3_io_req){.fd = rp->fd[t->shard], .path = rp->index.shards[t->shard].path, .offset = a0,
                               .bytes = (start + row_bytes - a0 + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN,
                               .need_bytes = start + row_bytes - a0, .dst = rp->embed_buf + (size_t)i * slot_bytes,
                               .kind = K3_READ_OTHER};
            rq[i] = &r[i];
        }
        k3_io_submit(rp->io, rq, nb);
        int failed = 0;
        for (int i = 0; i < nb; i++)       /* every read ends before its slot is reused */
            if (k3_io_wait(rp->io, &r[i], failed ? NULL : err)) failed = 1;
        if (failed) return -1;
        for (int i = 0; i < nb; i++) {
            k3_convert_to_f32(out + (size_t)(b + i) * c->hidden, rp->embed_buf + (size_t)i * slot_bytes + skip[i],
                              t->dtype, c->hidden);
            rp->trace_token++;
        }
    }
    return 0;
}

int k3_weights_embed_row(k3_weights *rp, int token, float *out, k3_error *err)
{
    return k3_weights_embed_rows(rp, &token, 1, out, err);
}

const float *k3_weights_final_norm(k3_weights *rp) { return rp->final_norm; }

const float *k3_weights_output_res_score(k3_weights *rp) { return rp->output_res_score; }
