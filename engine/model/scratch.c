/* scratch.c - the scratch of one prompt chunk, as the RunState of the llama2 C project: one
 * table (scratch_layout) names every buffer with its size, the same walk
 * either sizes the whole (for the memory plan) or places every buffer in one
 * zeroed arena (for a session), so the plan and the allocation cannot drift
 * apart. */
#include <stdlib.h>
#include <string.h>
#include "forward.h"
#include "huge_pages.h"

/* Each buffer starts on a 64-byte boundary (a cache line, and the widest
 * vector load the kernels issue). */
#define SCRATCH_ALIGN 64

/* The next n elements of size elem from the arena (NULL when only sizing). */
static void *take(uint8_t *arena, size_t *at, size_t n, size_t elem)
{
    const size_t off = (*at + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    *at = off + (n ? n : 1) * elem;
    return arena ? arena + off : NULL;
}

/* The table: every buffer of k3_scratch and its size for this config,
 * n_threads compute threads and a context of max_tokens. Returns the arena
 * bytes; with arena set, points every buffer into it. */
static size_t scratch_layout(k3_scratch *sc, const k3_config *c, int n_threads, int max_tokens, int chunk_tokens,
                             int span_tokens, uint8_t *arena)
{
    const size_t T = (size_t)chunk_tokens, D = (size_t)c->hidden;
    const size_t S = span_tokens > chunk_tokens ? (size_t)span_tokens : 0;   /* no span: none of its buffers */
    const size_t P = (size_t)c->kda_heads * c->kda_head_dim;
    const size_t HV = (size_t)c->mla_heads * c->v_head_dim;
    const size_t L = (size_t)c->kv_lora_rank;
    const size_t threads = (size_t)n_threads + 1;     /* per-thread rows, indexed by omp_get_thread_num() */
    const size_t shared = (size_t)c->moe_inter * (c->n_shared_experts > 1 ? c->n_shared_experts : 1);
    const size_t max_inter = (size_t)c->dense_inter > shared ? (size_t)c->dense_inter : shared;
    const size_t max_rank = D;   /* KDA low-rank widths; the loader refuses rank > hidden */
    const size_t attn = P > HV ? P : HV;
    const size_t row = L > (size_t)c->v_head_dim ? L : (size_t)c->v_head_dim;
    const size_t D_or_latent = (size_t)c->latent_dim > D ? (size_t)c->latent_dim : D;
    const size_t max_snap = c->attn_res_block ? (size_t)(c->n_layers + c->attn_res_block - 1) / c->attn_res_block : 0;
    const int n_workers = n_threads > 0 ? n_threads : 1;   /* routed experts of a chunk run in parallel */
    size_t at = 0;
#define BUF(field, n) (sc->field = take(arena, &at, (n), sizeof *sc->field))
    BUF(h, T * D);
    BUF(xn, T * D);
    BUF(out, T * D);
    for (int i = 0; i < 3; i++) {
        BUF(proj[i], T * P);
        BUF(qkv[i], T * P);
    }
    BUF(gate_low, T * max_rank);
    BUF(forget, T * P);
    BUF(out_gate, T * P);
    BUF(beta, T * c->kda_heads);
    BUF(attn, T * attn);
    BUF(q, T * c->mla_heads * (c->qk_nope_dim + c->qk_rope_dim));
    BUF(kv, T * (L + c->qk_rope_dim));
    BUF(q_latent, T * c->mla_heads * L);
    BUF(ctx, T * c->mla_heads * L);
    BUF(scores, threads * (size_t)max_tokens);
    BUF(row, threads * row);
    BUF(router, T * c->n_experts);
    BUF(topk, T * c->top_k);
    BUF(topw, T * c->top_k);
    BUF(inter_gate, T * max_inter);
    BUF(inter_up, T * max_inter);
    BUF(expert_out, T * D_or_latent);
    BUF(distinct, (size_t)c->n_experts);
    BUF(expert_results, T * c->top_k * D_or_latent);
    BUF(wave, (size_t)c->n_experts);
    BUF(q_low, T * (size_t)c->q_lora_rank);
    BUF(mla_gate, T * HV);
    BUF(latent_in, T * (size_t)c->latent_dim);
    BUF(latent_acc, T * (size_t)c->latent_dim);
    BUF(snapshots, T * max_snap * D);
    BUF(mix_scores, threads * (max_snap + 1));
    BUF(workers, (size_t)n_workers);
    if (S) {
        BUF(span_h, S * D);
        BUF(span_xn, S * D);
        if (c->latent_dim) BUF(span_x, S * (size_t)c->latent_dim);
        BUF(span_acc, S * (c->latent_dim ? (size_t)c->latent_dim : D));
        BUF(span_topk, S * c->top_k);
        BUF(span_topw, S * c->top_k);
        if (max_snap) BUF(span_snapshots, S * max_snap * D);
    }
#undef BUF
    sc->n_workers = n_workers;
    for (int w = 0; w < n_workers; w++) {
        k3_expert_work sizing, *wk = arena ? &sc->workers[w] : &sizing;
        wk->gathered = take(arena, &at, T * D_or_latent, sizeof(float));
        wk->out = take(arena, &at, T * D_or_latent, sizeof(float));
        wk->inter_gate = take(arena, &at, T * (size_t)c->moe_inter, sizeof(float));
        wk->inter_up = take(arena, &at, T * (size_t)c->moe_inter, sizeof(float));
        wk->rows = take(arena, &at, T, sizeof(int));
    }
    return at;
}

/* Bytes of a session's scratch (what the plan charges for it). */
size_t k3_scratch_bytes(const k3_config *c, int n_threads, int max_tokens, int chunk_tokens, int span_tokens)
{
    k3_scratch sizing;
    return scratch_layout(&sizing, c, n_threads, max_tokens, chunk_tokens, span_tokens, NULL);
}

/* One zeroed arena with every buffer placed in it (on huge pages when
 * asked); -1 when out of memory. */
int k3_scratch_alloc(k3_scratch *sc, const k3_config *c, int n_threads, int max_tokens, int chunk_tokens,
                     int span_tokens, int huge)
{
    memset(sc, 0, sizeof *sc);
    const size_t bytes = (k3_scratch_bytes(c, n_threads, max_tokens, chunk_tokens, span_tokens) + SCRATCH_ALIGN - 1) /
                         SCRATCH_ALIGN * SCRATCH_ALIGN;
    uint8_t *arena = k3_huge_alloc(bytes, SCRATCH_ALIGN, huge);
    if (!arena) return -1;
    memset(arena, 0, bytes);
    scratch_layout(sc, c, n_threads, max_tokens, chunk_tokens, span_tokens, arena);
    sc->arena = arena;
    sc->chunk_tokens = chunk_tokens;
    sc->span_tokens = span_tokens > chunk_tokens ? span_tokens : 0;
    return 0;
}

/* Scratch bytes each prompt token of a chunk adds, for the planner's
 * choice of chunk (k3_plan_make in planner.c). The table is linear in the
 * chunk but for each buffer's rounding to SCRATCH_ALIGN; the slope is
 * rounded up and a SCRATCH_ALIGN per buffer added, so the planner's charge
 * is never below the arena k3_scratch_alloc then makes. */
size_t k3_scratch_bytes_per_chunk_token(const k3_config *c, int n_threads, int max_tokens)
{
    const size_t base = k3_scratch_bytes(c, n_threads, max_tokens, K3_CHUNK_TOKENS, 0);
    const size_t n_buffers = 40 + 5 * (size_t)(n_threads > 0 ? n_threads : 1);   /* the table's rows, rounded up */
    return (k3_scratch_bytes(c, n_threads, max_tokens, K3_CHUNK_TOKENS + 64, 0) - base + 63) / 64 + n_buffers;
}

/* Scratch bytes each token of a prompt span adds (its buffers exist only
 * for a span longer than the chunk), rounded up the same way: the slope,
 * plus the 7 span buffers' alignment (up to SCRATCH_ALIGN each) spread
 * over the shortest span (one token more than the smallest chunk), so the
 * planner's charge is never below the arena. */
size_t k3_scratch_bytes_per_span_token(const k3_config *c, int n_threads, int max_tokens)
{
    const int S = 4 * K3_CHUNK_TOKENS;
    const size_t base = k3_scratch_bytes(c, n_threads, max_tokens, K3_CHUNK_TOKENS, S);
    const size_t alignment = (7 * SCRATCH_ALIGN + K3_CHUNK_TOKENS) / (K3_CHUNK_TOKENS + 1);
    return (k3_scratch_bytes(c, n_threads, max_tokens, K3_CHUNK_TOKENS, S + 64) - base + 63) / 64 + alignment;
}

void k3_scratch_free(k3_scratch *sc)
{
    free(sc->arena);
    memset(sc, 0, sizeof *sc);
}
