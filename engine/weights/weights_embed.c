/* weights_embed.c - embedding rows: read from disk one row per token under
 * a budget (a 160k x 7168 bf16 table is 2.2 GB for a few KB per token), from
 * the table held in memory when the plan is fully resident (a row read is a
 * reader hand-off and an O_DIRECT read, tens of microseconds: a fifth of a
 * small model's step); and the model-level vectors kept in memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "huge_pages.h"
#include "quant_matvec.h"
#include "weights_internal.h"

/* Bytes of the aligned bounce buffer: K3_EMBED_BATCH_ROWS rows of at most 4
 * bytes per value, each with an alignment block on either side of an
 * unaligned row (the planner counts the same figure). */
uint64_t k3_weights_embed_buf_bytes(int hidden)
{
    const uint64_t row = ((uint64_t)hidden * 4 + 2 * K3_IO_ALIGN + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
    return row * K3_EMBED_BATCH_ROWS;
}

/* The table's stored bytes rounded out to K3_IO_ALIGN on both sides: what
 * holding it takes, and the span weights_read_embed_table reads. */
static void embed_extent(const k3_weights *rp, uint64_t *start, uint64_t *bytes)
{
    const st_tensor *t = rp->embed;
    *start = t->file_offset / K3_IO_ALIGN * K3_IO_ALIGN;
    *bytes = (t->file_offset + t->nbytes - *start + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
}

uint64_t weights_embed_table_bytes(const k3_weights *rp)
{
    uint64_t start, bytes;
    embed_extent(rp, &start, &bytes);
    return bytes;
}

/* Read the whole table into memory, in 8 MiB reads all in flight (the plan
 * is fully resident, so it counted these bytes). */
int weights_read_embed_table(k3_weights *rp, k3_error *err)
{
    const st_tensor *t = rp->embed;
    uint64_t start, bytes;
    embed_extent(rp, &start, &bytes);
    uint8_t *mem = weights_own(rp, k3_huge_alloc(bytes, K3_IO_ALIGN, rp->opt.huge_pages));
    if (!mem) return k3_err(err, "out of memory for the %.1f MiB embedding table", bytes / 1048576.0);
    const uint64_t piece = 8u << 20, end = t->file_offset + t->nbytes;
    const int n = (int)((bytes + piece - 1) / piece);
    k3_io_req *r = calloc((size_t)n, sizeof *r);
    if (!r) return k3_err(err, "out of memory");
    for (int i = 0; i < n; i++) {
        const uint64_t off = start + (uint64_t)i * piece, left = bytes - (uint64_t)i * piece;
        const uint64_t len = left < piece ? left : piece;
        r[i] = (k3_io_req){.fd = rp->fd[t->shard], .path = rp->index.shards[t->shard].path, .offset = off,
                           .bytes = len, .need_bytes = end - off < len ? end - off : len,
                           .dst = mem + (size_t)i * piece, .kind = K3_READ_OTHER};
        k3_io_req *one = &r[i];
        k3_io_submit(rp->io, &one, 1);
    }
    int failed = 0;
    for (int i = 0; i < n; i++)          /* every read ends before r is freed */
        if (k3_io_wait(rp->io, &r[i], failed ? NULL : err)) failed = 1;
    free(r);
    if (failed) return -1;
    rp->embed_table = mem + (t->file_offset - start);
    return 0;
}

/* Bytes of one embedding row, and its decode to fp32 (a GGUF's table may
 * be a block type: Q4_K, Q6_K, ...). */
static uint64_t embed_row_bytes(const st_tensor *t, int hidden)
{
    return t->dtype == K3_DT_GGML ? k3_quant_row_bytes(t->qtype, hidden) : (uint64_t)hidden * k3_dtype_size(t->dtype);
}

static void embed_row_decode(const st_tensor *t, const uint8_t *row, int hidden, float *out)
{
    if (t->dtype == K3_DT_GGML) k3_quant_decode_scalar(t->qtype, row, hidden, out);
    else k3_convert_to_f32(out, row, t->dtype, hidden);
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
    const uint64_t row_bytes = embed_row_bytes(t, c->hidden);
    if (rp->embed_table) {
        for (int i = 0; i < n; i++) {
            embed_row_decode(t, rp->embed_table + (uint64_t)tokens[i] * row_bytes, c->hidden, out + (size_t)i * c->hidden);
            rp->trace_token++;
        }
        return 0;
    }
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
            embed_row_decode(t, rp->embed_buf + (size_t)i * slot_bytes + skip[i], c->hidden,
                             out + (size_t)(b + i) * c->hidden);
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
