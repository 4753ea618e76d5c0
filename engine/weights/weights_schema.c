/* weights_schema.c - the tensor schema of the two model families (Kimi
 * Linear, Kimi K3): which tensors a config implies, with the shape and dtype
 * each must have (a bad checkpoint fails at open with a message naming the
 * tensor), which unit each big matrix lands in, and the small tensors (norms,
 * biases, conv taps, A_log, fp8 block scales, AttnRes scores) read and
 * converted to fp32 once. The layer formulas are docs/MODEL.md's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf_checkpoint.h"
#include "quant_types.h"
#include "weights_internal.h"
#include "k3_util.h"

/* Remember a malloc'd buffer so close() frees it. */
void *weights_own(k3_weights *rp, void *p)
{
    if (!p) return NULL;
    if (rp->n_owned == rp->cap_owned) {
        rp->cap_owned = rp->cap_owned ? rp->cap_owned * 2 : 64;
        void **g = realloc(rp->owned, (size_t)rp->cap_owned * sizeof *g);
        if (!g) { free(p); return NULL; }
        rp->owned = g;
    }
    rp->owned[rp->n_owned++] = p;
    return p;
}

/* Register tensor t in the unit being loaded; the returned placeholder
 * (tensor index + 1) is turned into a real address by rebase(). NULL when
 * out of memory (the caller fails the open). */
static const void *place(k3_weights *rp, const st_tensor *t)
{
    unit *u = &rp->units[rp->cur_unit];
    int ti = (int)(t - rp->index.tensors);
    if (u->n_tensors == u->cap_tensors) {
        int cap = u->cap_tensors ? u->cap_tensors * 2 : 8;
        int *g = realloc(u->tensors, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        u->tensors = g;
        u->cap_tensors = cap;
    }
    u->tensors[u->n_tensors++] = ti;
    return (const void *)(uintptr_t)(ti + 1);
}

/* Read a whole (small) tensor's bytes at open, through the buffered fd. */
static int read_tensor_bytes(k3_weights *rp, const st_tensor *t, void *dst, k3_error *err)
{
    k3_error e;
    if (k3_pread_full(rp->fd_buffered[t->shard], dst, t->nbytes, t->file_offset, rp->index.shards[t->shard].path, &e))
        return k3_err(err, "cannot read tensor '%s': %s", t->name, e.msg);
    return 0;
}

/* A small tensor of n elements as a new fp32 array (owned). */
static float *read_as_f32(k3_weights *rp, const st_tensor *t, int64_t n, k3_error *err)
{
    void *raw = malloc(t->nbytes ? t->nbytes : 1);
    float *out = weights_own(rp, malloc((size_t)(n ? n : 1) * sizeof(float)));
    if (!raw || !out) { free(raw); k3_err(err, "out of memory"); return NULL; }
    if (read_tensor_bytes(rp, t, raw, err)) { free(raw); return NULL; }
    if (t->dtype == K3_DT_GGML) k3_quant_decode_scalar(t->qtype, raw, n, out);
    else k3_convert_to_f32(out, raw, t->dtype, n);
    free(raw);
    return out;
}

/* "[a, b, c]" for messages */
static void shape_text(const st_tensor *t, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* Tensor by its name inside the decoder (K3 checkpoints prefix every text
 * tensor with "language_model."); NULL if absent. */
static const st_tensor *lookup(k3_weights *rp, const char *name)
{
    char full[1024];
    snprintf(full, sizeof full, "%.32s%.900s", rp->cfg->tensor_prefix, name);
    return st_find(&rp->index, full);
}

static const st_tensor *find_tensor(k3_weights *rp, const char *name, k3_error *err)
{
    const st_tensor *t = lookup(rp, name);
    if (t) return t;
    if (rp->gguf) {                       /* name it as the file does */
        char gname[200];
        gguf_checkpoint_name(name, "", gname, sizeof gname);
        k3_err(err, "%s: tensor '%s' is missing", rp->dir, gname);
    } else {
        k3_err(err, "%s: tensor '%s%s' not found in any shard", rp->dir, rp->cfg->tensor_prefix, name);
    }
    return NULL;
}

/* An MXFP4 matrix stored as NAME_packed (U8 [rows, cols/2]) and NAME_scale
 * (U8 E8M0 [rows, cols/32]), where NAME is "<module>.weight". */
static int load_mxfp4(k3_weights *rp, const char *name, int64_t rows, int64_t cols, k3_weight *w,
                      k3_error *err)
{
    char pname[600], sname[600];
    snprintf(pname, sizeof pname, "%s_packed", name);
    snprintf(sname, sizeof sname, "%s_scale", name);
    const st_tensor *tp = find_tensor(rp, pname, err), *ts = tp ? find_tensor(rp, sname, err) : NULL;
    if (!tp || !ts) return -1;
    if (!rp->cfg->experts_mxfp4)
        return k3_err(err, "%s: tensor '%s%s' is MXFP4-packed but config.json has no mxfp4 "
                      "quantization_config", rp->index.shards[tp->shard].path, rp->cfg->tensor_prefix, pname);
    if (cols % 32)
        return k3_err(err, "%s: tensor '%s%s': %lld columns is not a multiple of the MXFP4 group (32)",
                      rp->index.shards[tp->shard].path, rp->cfg->tensor_prefix, pname, (long long)cols);
    if ((tp->dtype != K3_DT_U8 && tp->dtype != K3_DT_I8) || tp->ndim != 2 || tp->shape[0] != rows || tp->shape[1] != cols / 2)
        return k3_err(err, "%s: tensor '%s%s' must be U8 [%lld, %lld]", rp->index.shards[tp->shard].path,
                      rp->cfg->tensor_prefix, pname, (long long)rows, (long long)(cols / 2));
    if ((ts->dtype != K3_DT_U8 && ts->dtype != K3_DT_F8_E8M0) || ts->ndim != 2 || ts->shape[0] != rows ||
        ts->shape[1] != cols / 32)
        return k3_err(err, "%s: tensor '%s%s' must be U8 [%lld, %lld]", rp->index.shards[ts->shard].path,
                      rp->cfg->tensor_prefix, sname, (long long)rows, (long long)(cols / 32));
    w->dtype = K3_DT_MXFP4;
    w->rows = rows;
    w->cols = cols;
    w->data = place(rp, tp);
    w->block_scale = NULL;
    w->mx_scale = place(rp, ts);
    if (!w->data || !w->mx_scale) return k3_err(err, "out of memory");
    return 0;
}

/* A 2-D weight matrix [rows, cols] used in place. fp8 matrices take their
 * "<name>_scale_inv" companion (128x128 blocks) when present. */
static int load_matrix(k3_weights *rp, const char *name, int64_t rows, int64_t cols,
                       k3_weight *w, k3_error *err)
{
    memset(w, 0, sizeof *w);
    if (!lookup(rp, name)) {
        char packed[600];
        snprintf(packed, sizeof packed, "%s_packed", name);
        if (lookup(rp, packed)) return load_mxfp4(rp, name, rows, cols, w, err);
    }
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return -1;
    const char *file = rp->index.shards[t->shard].path;
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        char s[96];
        shape_text(t, s, sizeof s);
        return k3_err(err, "%s: tensor '%s%s' has shape %s, expected [%lld, %lld]", file,
                      rp->cfg->tensor_prefix, name, s, (long long)rows, (long long)cols);
    }
    if (t->dtype != K3_DT_F32 && t->dtype != K3_DT_BF16 && t->dtype != K3_DT_F16 &&
        t->dtype != K3_DT_F8_E4M3 && t->dtype != K3_DT_GGML)
        return k3_err(err, "%s: tensor '%s' has dtype %s; a weight matrix must be F32, BF16, F16, "
                      "F8_E4M3 or a GGUF block type", file, name, k3_dtype_name(t->dtype));
    w->dtype = t->dtype;
    w->qtype = t->qtype;
    w->rows = rows;
    w->cols = cols;
    w->data = place(rp, t);
    if (!w->data) return k3_err(err, "out of memory");
    w->block_scale = NULL;
    if (t->dtype == K3_DT_F8_E4M3) {
        char sname[512];
        snprintf(sname, sizeof sname, "%s_scale_inv", name);
        const st_tensor *s = lookup(rp, sname);
        if (s) {
            int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
            if (st_tensor_numel(s) != br * bc || s->ndim != 2)
                return k3_err(err, "%s: tensor '%s' must have shape [%lld, %lld]",
                              rp->index.shards[s->shard].path, sname, (long long)br, (long long)bc);
            float *scale = read_as_f32(rp, s, br * bc, err);
            if (!scale) return -1;
            w->block_scale = scale;
        }
    }
    return 0;
}

/* A small tensor of exactly n elements (any shape with that many), as fp32. */
static float *load_small(k3_weights *rp, const char *name, int64_t n, k3_error *err)
{
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return NULL;
    if (st_tensor_numel(t) != n) {
        char s[96];
        shape_text(t, s, sizeof s);
        k3_err(err, "%s: tensor '%s' has shape %s (%lld elements), expected %lld elements",
               rp->index.shards[t->shard].path, name, s, (long long)st_tensor_numel(t), (long long)n);
        return NULL;
    }
    if (t->dtype != K3_DT_F32 && t->dtype != K3_DT_F16 && t->dtype != K3_DT_BF16 && t->dtype != K3_DT_F64 &&
        t->dtype != K3_DT_F8_E4M3 && t->dtype != K3_DT_GGML) {
        k3_err(err, "%s: tensor '%s' has dtype %s, expected a float type (F32, F16, BF16, F64, F8_E4M3)",
               rp->index.shards[t->shard].path, name, k3_dtype_name(t->dtype));
        return NULL;
    }
    return read_as_f32(rp, t, n, err);
}

/* Conv taps: [C, 1, W] (nn.Conv1d) or [C, W]. */
static float *load_conv(k3_weights *rp, const char *name, int64_t channels, int64_t width,
                        k3_error *err)
{
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return NULL;
    int ok = (t->ndim == 3 && t->shape[0] == channels && t->shape[1] == 1 && t->shape[2] == width) ||
             (t->ndim == 2 && t->shape[0] == channels && t->shape[1] == width);
    if (!ok) {
        char s[96];
        shape_text(t, s, sizeof s);
        k3_err(err, "%s: tensor '%s' has shape %s, expected [%lld, 1, %lld]",
               rp->index.shards[t->shard].path, name, s, (long long)channels, (long long)width);
        return NULL;
    }
    return load_small(rp, name, channels * width, err);
}

static int load_mlp(k3_weights *rp, const char *prefix, const char *gate, const char *up,
                    const char *down, int64_t inter, int64_t hidden, k3_mlp_weights *m, k3_error *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s.weight", prefix, gate);
    if (load_matrix(rp, name, inter, hidden, &m->gate, err)) return -1;
    snprintf(name, sizeof name, "%s.%s.weight", prefix, up);
    if (load_matrix(rp, name, inter, hidden, &m->up, err)) return -1;
    snprintf(name, sizeof name, "%s.%s.weight", prefix, down);
    return load_matrix(rp, name, hidden, inter, &m->down, err);
}

/* The KDA decay rate exp(A_log) per head, computed once here (the forward
 * pass used to take expf of A_log every token: the same bits). Kimi Linear
 * stores A_log as [1,1,H,1]; K3 stores 128 floats of which the first H are
 * the heads (the rest are zero); a GGUF stores -exp(A_log) itself as ssm_a
 * (gguf_checkpoint.c), whose negation is exact. */
static float *load_decay_rate(k3_weights *rp, const char *layer_prefix, int64_t heads, k3_error *err)
{
    char name[600];
    snprintf(name, sizeof name, "%s.self_attn.ssm_a", layer_prefix);
    const int gguf_form = lookup(rp, name) != NULL;
    if (!gguf_form) snprintf(name, sizeof name, "%s.self_attn.A_log", layer_prefix);
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return NULL;
    int64_t n = st_tensor_numel(t);
    if (n < heads || (!rp->cfg->is_k3 && n != heads) || (gguf_form && n != heads)) {
        k3_err(err, "%s: tensor '%s%s' has %lld elements, expected %s%lld (one per KDA head)",
               rp->index.shards[t->shard].path, rp->cfg->tensor_prefix, name, (long long)n,
               rp->cfg->is_k3 && !gguf_form ? "at least " : "", (long long)heads);
        return NULL;
    }
    float *rate = load_small(rp, name, n, err);
    if (!rate) return NULL;
    for (int64_t h = 0; h < heads; h++) rate[h] = gguf_form ? -rate[h] : expf(rate[h]);
    return rate;
}

/* AttnRes: the norm weight and the 1-row projection multiply elementwise,
 * so they fold into one score vector at load (docs/MODEL.md, "Attention Residuals"). */
static float *load_res_score(k3_weights *rp, const char *layer_prefix, const char *what, k3_error *err)
{
    char name[600];
    const int64_t D = rp->cfg->hidden;
    snprintf(name, sizeof name, "%s%s%s_score", layer_prefix, *layer_prefix ? "." : "", what);
    if (lookup(rp, name)) return load_small(rp, name, D, err);     /* a GGUF holds the product */
    snprintf(name, sizeof name, "%s%s%s_norm.weight", layer_prefix, *layer_prefix ? "." : "", what);
    float *norm = load_small(rp, name, D, err);
    if (!norm) return NULL;
    snprintf(name, sizeof name, "%s%s%s_proj.weight", layer_prefix, *layer_prefix ? "." : "", what);
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return NULL;
    if (!(t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == D)) {
        k3_err(err, "%s: tensor '%s%s' must have shape [1, %lld]", rp->index.shards[t->shard].path,
               rp->cfg->tensor_prefix, name, (long long)D);
        return NULL;
    }
    float *proj = load_small(rp, name, D, err);
    if (!proj) return NULL;
    for (int64_t i = 0; i < D; i++) norm[i] *= proj[i];
    return norm;
}

/* MLA's kv_b_proj [heads * (nope + v), kv_lora], or a GGUF's two halves
 * (gguf_checkpoint.c): k_b [heads * kv_lora, nope] (each head's nope rows
 * transposed) and v_b [heads * v, kv_lora]. mla.c reads either form. */
static int load_kv_b(k3_weights *rp, const char *layer_prefix, k3_mla_weights *m, k3_error *err)
{
    const k3_config *c = rp->cfg;
    const int64_t H = c->mla_heads, L = c->kv_lora_rank;
    char name[600], v_name[600];
    snprintf(name, sizeof name, "%s.self_attn.k_b_proj.weight", layer_prefix);
    snprintf(v_name, sizeof v_name, "%s.self_attn.v_b_proj.weight", layer_prefix);
    if (!lookup(rp, name) && !lookup(rp, v_name)) {
        snprintf(name, sizeof name, "%s.self_attn.kv_b_proj.weight", layer_prefix);
        return load_matrix(rp, name, H * (c->qk_nope_dim + c->v_head_dim), L, &m->kv_b, err);
    }
    /* mla.c decodes a k_b row (nope weights) into a buffer of max(L, v) */
    if (c->qk_nope_dim > L && c->qk_nope_dim > c->v_head_dim)
        return k3_err(err, "%s: qk_nope_head_dim %d exceeds both kv_lora_rank and v_head_dim", rp->dir,
                      c->qk_nope_dim);
    if (load_matrix(rp, name, H * L, c->qk_nope_dim, &m->k_b, err)) return -1;
    return load_matrix(rp, v_name, H * c->v_head_dim, L, &m->v_b, err);
}

static int load_layer(k3_weights *rp, int l, k3_error *err)
{
    const k3_config *c = rp->cfg;
    k3_layer_weights *lw = &rp->layers[l];
    int64_t D = c->hidden;
    char p[256], name[512];
    snprintf(p, sizeof p, "model.layers.%d", l);
    rp->cur_unit = l;
#define NAME(fmt) (snprintf(name, sizeof name, "%s." fmt, p), name)
    if (!(lw->attn_norm = load_small(rp, NAME("input_layernorm.weight"), D, err))) return -1;
    if (!(lw->ffn_norm = load_small(rp, NAME("post_attention_layernorm.weight"), D, err))) return -1;
    if (c->attn_res_block &&
        (!(lw->attn_res_score = load_res_score(rp, p, "self_attention_res", err)) ||
         !(lw->mlp_res_score = load_res_score(rp, p, "mlp_res", err))))
        return -1;
    if (c->attn_kind[l] == K3_ATTN_KDA) {
        k3_kda_weights *k = &lw->kda;
        int64_t H = c->kda_heads, P = (int64_t)c->kda_heads * c->kda_head_dim, W = c->conv_kernel;
        const st_tensor *fa = find_tensor(rp, NAME("self_attn.f_a_proj.weight"), err);
        if (!fa) return -1;
        int64_t rank = fa->ndim == 2 ? fa->shape[0] : -1;
        if (rank < 1 || rank > D)
            return k3_err(err, "%s: KDA decay projection of layer %d must be 2-D with at most %lld rows",
                          rp->dir, l, (long long)D);
        if (load_matrix(rp, NAME("self_attn.q_proj.weight"), P, D, &k->q, err) ||
            load_matrix(rp, NAME("self_attn.k_proj.weight"), P, D, &k->k, err) ||
            load_matrix(rp, NAME("self_attn.v_proj.weight"), P, D, &k->v, err) ||
            load_matrix(rp, NAME("self_attn.f_a_proj.weight"), rank, D, &k->f_a, err) ||
            load_matrix(rp, NAME("self_attn.f_b_proj.weight"), P, rank, &k->f_b, err))
            return -1;
        if (c->kda_full_rank_gate) {
            if (load_matrix(rp, NAME("self_attn.g_proj.weight"), P, D, &k->g_full, err)) return -1;
        } else {
            const st_tensor *ga = find_tensor(rp, NAME("self_attn.g_a_proj.weight"), err);
            if (!ga) return -1;
            int64_t grank = ga->ndim == 2 ? ga->shape[0] : -1;
            if (grank < 1 || grank > D)
                return k3_err(err, "%s: KDA output gate of layer %d must be 2-D with at most %lld rows",
                              rp->dir, l, (long long)D);
            if (load_matrix(rp, NAME("self_attn.g_a_proj.weight"), grank, D, &k->g_a, err) ||
                load_matrix(rp, NAME("self_attn.g_b_proj.weight"), P, grank, &k->g_b, err))
                return -1;
        }
        if (
            load_matrix(rp, NAME("self_attn.b_proj.weight"), H, D, &k->b, err) ||
            load_matrix(rp, NAME("self_attn.o_proj.weight"), D, P, &k->o, err))
            return -1;
        if (!(k->conv[0] = load_conv(rp, NAME("self_attn.q_conv1d.weight"), P, W, err)) ||
            !(k->conv[1] = load_conv(rp, NAME("self_attn.k_conv1d.weight"), P, W, err)) ||
            !(k->conv[2] = load_conv(rp, NAME("self_attn.v_conv1d.weight"), P, W, err)) ||
            !(k->decay_rate = load_decay_rate(rp, p, H, err)) ||
            !(k->dt_bias = load_small(rp, NAME("self_attn.dt_bias"), P, err)) ||
            !(k->o_norm = load_small(rp, NAME("self_attn.o_norm.weight"), c->kda_head_dim, err)))
            return -1;
    } else {
        k3_mla_weights *m = &lw->mla;
        int64_t H = c->mla_heads, qdim = H * (c->qk_nope_dim + c->qk_rope_dim);
        if (c->q_lora_rank) {
            if (load_matrix(rp, NAME("self_attn.q_a_proj.weight"), c->q_lora_rank, D, &m->q_a, err) ||
                load_matrix(rp, NAME("self_attn.q_b_proj.weight"), qdim, c->q_lora_rank, &m->q, err) ||
                !(m->q_a_norm = load_small(rp, NAME("self_attn.q_a_layernorm.weight"), c->q_lora_rank, err)))
                return -1;
        } else if (load_matrix(rp, NAME("self_attn.q_proj.weight"), qdim, D, &m->q, err)) {
            return -1;
        }
        if (c->mla_output_gate &&
            load_matrix(rp, NAME("self_attn.g_proj.weight"), H * c->v_head_dim, D, &m->gate, err))
            return -1;
        if (
            load_matrix(rp, NAME("self_attn.kv_a_proj_with_mqa.weight"),
                        c->kv_lora_rank + c->qk_rope_dim, D, &m->kv_a, err) ||
            load_kv_b(rp, p, m, err) ||
            load_matrix(rp, NAME("self_attn.o_proj.weight"), D, H * c->v_head_dim, &m->o, err))
            return -1;
        if (!(m->kv_a_norm = load_small(rp, NAME("self_attn.kv_a_layernorm.weight"), c->kv_lora_rank, err)))
            return -1;
    }
    if (!c->is_moe[l]) {
        snprintf(name, sizeof name, "%s.mlp", p);
        char prefix[512];
        snprintf(prefix, sizeof prefix, "%s", name);
        return load_mlp(rp, prefix, "gate_proj", "up_proj", "down_proj", c->dense_inter, D, &lw->dense, err);
    }
    if (load_matrix(rp, NAME("block_sparse_moe.gate.weight"), c->n_experts, D, &lw->router, err))
        return -1;
    if (!(lw->router_bias = load_small(rp, NAME("block_sparse_moe.gate.e_score_correction_bias"),
                                       c->n_experts, err)))
        return -1;
    char prefix[512];
    int64_t expert_in = D;
    if (c->latent_dim) {
        expert_in = c->latent_dim;
        if (load_matrix(rp, NAME("block_sparse_moe.routed_expert_down_proj.weight"), expert_in, D,
                        &lw->latent_down, err) ||
            load_matrix(rp, NAME("block_sparse_moe.routed_expert_up_proj.weight"), D, expert_in,
                        &lw->latent_up, err))
            return -1;
        if (c->latent_norm &&
            !(lw->latent_norm = load_small(rp, NAME("block_sparse_moe.routed_expert_norm.weight"), expert_in, err)))
            return -1;
    }
    if (c->n_shared_experts > 0) {
        lw->has_shared = 1;
        snprintf(prefix, sizeof prefix, "%s.block_sparse_moe.shared_experts", p);
        if (load_mlp(rp, prefix, "gate_proj", "up_proj", "down_proj",
                     (int64_t)c->moe_inter * c->n_shared_experts, D, &lw->shared, err))
            return -1;
    }
    for (int e = 0; e < c->n_experts; e++) {
        snprintf(prefix, sizeof prefix, "%s.block_sparse_moe.experts.%d", p, e);
        rp->cur_unit = expert_unit(rp, l, e);
        if (load_mlp(rp, prefix, "w1", "w3", "w2", c->moe_inter, expert_in,
                     &rp->experts[(size_t)l * c->n_experts + e], err))
            return -1;
    }
#undef NAME
    return 0;
}

/* Every tensor the config implies: the embedding (rows read on demand), the
 * final norm, K3's output AttnRes score, the head, then each layer. */
int weights_load_schema(k3_weights *rp, k3_error *err)
{
    const k3_config *c = rp->cfg;
    if (!(rp->embed = find_tensor(rp, "model.embed_tokens.weight", err))) return -1;
    if (rp->embed->ndim != 2 || rp->embed->shape[0] != c->vocab_size || rp->embed->shape[1] != c->hidden ||
        (rp->embed->dtype != K3_DT_F32 && rp->embed->dtype != K3_DT_BF16 && rp->embed->dtype != K3_DT_F16 &&
         rp->embed->dtype != K3_DT_GGML))
        return k3_err(err, "%s: tensor '%smodel.embed_tokens.weight' must be F32/BF16/F16 or a GGUF type [%d, %d]",
                      rp->index.shards[rp->embed->shard].path, c->tensor_prefix, c->vocab_size, c->hidden);
    rp->embed_buf_bytes = k3_weights_embed_buf_bytes(c->hidden);
    if (!(rp->embed_buf = aligned_alloc(K3_IO_ALIGN, rp->embed_buf_bytes))) return k3_err(err, "out of memory");
    if (!(rp->final_norm = load_small(rp, "model.norm.weight", c->hidden, err))) return -1;
    if (c->attn_res_block && !(rp->output_res_score = load_res_score(rp, "model", "output_attn_res", err)))
        return -1;
    rp->cur_unit = head_unit(rp);
    const char *head = c->tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    if (load_matrix(rp, head, c->vocab_size, c->hidden, &rp->head_template, err)) return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(rp, l, err)) return -1;
    return 0;
}
