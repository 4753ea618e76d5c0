/* mla.c - NoPE Multi-head Latent Attention with the absorbed latent cache
 * (docs/MODEL.md, "MLA").
 *
 * Per token the cache keeps 576 floats per MLA layer (for Kimi Linear): the
 * RMS-normalised latent c (kv_lora) and the shared key slice k_pe (rope).
 * Queries are moved into the latent space with W_UK (the k_nope rows of
 * kv_b_proj, or a GGUF's k_b, which holds them transposed per head: a dot
 * product per latent column instead of an axpy per nope row), attention runs against the cached latents, and W_UV (the v
 * rows) maps the attended latent back out. No positions are used (NoPE). */
#include <omp.h>
#include <string.h>
#include "forward.h"
#include "ops.h"

void k3_mla_block(k3_session *s, int layer, const k3_layer_weights *lw, int T)
{
    const k3_config *c = &s->m->cfg;
    const k3_mla_weights *w = &lw->mla;
    k3_scratch *sc = &s->sc;
    const int H = c->mla_heads, nope = c->qk_nope_dim, rope = c->qk_rope_dim, vd = c->v_head_dim;
    const int L = c->kv_lora_rank, qdim = nope + rope, entry = L + rope;
    const int pos0 = s->n_tokens;
    float *cache = s->mla_cache + (size_t)s->m->layer_slot[layer] * s->max_tokens * entry;

    /* the projections of the normalised input in one group (one parallel
     * region a decode step); q-LoRA's second factor then runs per head
     * inside the head loop (decode) */
    k3_matvec_job jobs[3];
    int n_jobs = 0;
    jobs[n_jobs++] = w->q_a.rows ? (k3_matvec_job){sc->q_low, &w->q_a, sc->xn} : (k3_matvec_job){sc->q, &w->q, sc->xn};
    jobs[n_jobs++] = (k3_matvec_job){sc->kv, &w->kv_a, sc->xn};
    if (w->gate.rows) jobs[n_jobs++] = (k3_matvec_job){sc->mla_gate, &w->gate, sc->xn};
    k3_matmul_group(jobs, n_jobs, T);
    const int q_in_heads = w->q_a.rows && T == 1;
    if (w->q_a.rows) {                    /* K3 q-LoRA: q = W_qb rms(W_qa x) */
        for (int t = 0; t < T; t++)
            k3_rmsnorm(sc->q_low + (size_t)t * c->q_lora_rank, sc->q_low + (size_t)t * c->q_lora_rank,
                       w->q_a_norm, c->q_lora_rank, 1e-6f);
        if (!q_in_heads) k3_matmul(sc->q, &w->q, sc->q_low, T);
    }
    for (int t = 0; t < T; t++) {         /* append normalised latent + raw k_pe to the cache */
        float *dst = cache + (size_t)(pos0 + t) * entry;
        const float *src = sc->kv + (size_t)t * entry;
        k3_rmsnorm(dst, src, w->kv_a_norm, L, 1e-6f);
        memcpy(dst + L, src + L, (size_t)rope * sizeof(float));
    }
    const float scale = 1.0f / sqrtf((float)qdim);
    /* at most n_threads threads: sc->row and sc->scores have that many rows */
    #pragma omp parallel for schedule(static) num_threads(s->m->n_threads) \
        if ((int64_t)T * H * ((int64_t)nope * L + (int64_t)(pos0 + T) * (L + rope + vd)) >= K3_PARALLEL_MIN_MACS)
    for (int h = 0; h < H; h++) {
        int tid = omp_get_thread_num();
        float *row = sc->row + (size_t)tid * (L > vd ? L : vd);
        float *scores = sc->scores + (size_t)tid * s->max_tokens;
        if (q_in_heads)                   /* this head's rows of q */
            k3_matvec_rows(sc->q, &w->q, sc->q_low, (int64_t)h * qdim, (int64_t)(h + 1) * qdim);
        /* q_latent[t][h] = sum_d W_UK[h][d] * q_nope[t][h][d], rows decoded once for all t */
        if (w->k_b.rows) {                /* a GGUF's k_b: row j of head h is W_UK[h][.][j] */
            for (int j = 0; j < L; j++) {
                k3_weight_row_f32(&w->k_b, (int64_t)h * L + j, row);
                for (int t = 0; t < T; t++)
                    sc->q_latent[((size_t)t * H + h) * L + j] =
                        k3_dot_f32(row, sc->q + (size_t)t * H * qdim + (size_t)h * qdim, nope);
            }
        } else {
            for (int t = 0; t < T; t++) memset(sc->q_latent + ((size_t)t * H + h) * L, 0, (size_t)L * sizeof(float));
            for (int d = 0; d < nope; d++) {
                k3_weight_row_f32(&w->kv_b, (int64_t)h * (nope + vd) + d, row);
                for (int t = 0; t < T; t++)
                    k3_axpy_f32(sc->q_latent + ((size_t)t * H + h) * L,
                                sc->q[(size_t)t * H * qdim + (size_t)h * qdim + d], row, L);
            }
        }
        for (int t = 0; t < T; t++) {
            const float *ql = sc->q_latent + ((size_t)t * H + h) * L;
            const float *qpe = sc->q + (size_t)t * H * qdim + (size_t)h * qdim + nope;
            const int n_keys = pos0 + t + 1;        /* causal: itself and everything before */
            for (int j = 0; j < n_keys; j++) {
                const float *e = cache + (size_t)j * entry;
                scores[j] = (k3_dot_f32(ql, e, L) + k3_dot_f32(qpe, e + L, rope)) * scale;
            }
            k3_softmax(scores, n_keys);
            float *ctx = sc->ctx + ((size_t)t * H + h) * L;
            memset(ctx, 0, (size_t)L * sizeof(float));
            for (int j = 0; j < n_keys; j++) k3_axpy_f32(ctx, scores[j], cache + (size_t)j * entry, L);
        }
        /* attn[t][h][d] = W_UV[h][d] . ctx[t][h] */
        for (int d = 0; d < vd; d++) {
            if (w->v_b.rows) k3_weight_row_f32(&w->v_b, (int64_t)h * vd + d, row);
            else k3_weight_row_f32(&w->kv_b, (int64_t)h * (nope + vd) + nope + d, row);
            for (int t = 0; t < T; t++)
                sc->attn[(size_t)t * H * vd + (size_t)h * vd + d] =
                    k3_dot_f32(row, sc->ctx + ((size_t)t * H + h) * L, L);
        }
    }
    if (w->gate.rows) {                   /* K3 output gate: o * sigmoid(W_g x), no norm */
        for (size_t i = 0; i < (size_t)T * H * vd; i++) sc->attn[i] *= k3_sigmoid(sc->mla_gate[i]);
    }
    k3_matmul(sc->out, &w->o, sc->attn, T);
}
