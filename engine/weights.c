/* weights.c - the weight provider: every tensor of a Hugging Face or packed
 * model directory, held in a planned memory budget.
 *
 * At open, every tensor the config implies is looked up and its dtype and
 * shape checked (a bad checkpoint fails before the first token with a message
 * naming the tensor); small tensors (norms, biases, conv taps, A_log, fp8
 * block scales) are read and converted to fp32 once. The big matrices are
 * grouped into units that are read as a whole: one per layer's trunk (all its
 * non-expert matrices), one for the head (lm_head), one per routed expert.
 * A unit's bytes come from disk in a few large aligned windows (one for a
 * packed trunk run or expert page); its k3_weight templates hold placeholder
 * pointers that are rebased onto wherever the unit sits in memory.
 *
 * The planner (planner.c) splits the budget: pinned units are read once at
 * open; the other trunk units stream through a ring of slots (the next unit
 * is read while the current layer computes); routed experts live in an
 * expert cache of fixed slots. When everything fits, everything is pinned:
 * "fully resident" is the same code with no reads after open, so logits are
 * bit-identical at every budget. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "expert_cache.h"
#include "file_read.h"
#include "io.h"
#include "manifest.h"
#include "model.h"
#include "mxfp4.h"
#include "planner.h"
#include "stats.h"
#include "unit_sums.h"

/* A file window read into a unit's memory: [offset, offset + bytes) aligned;
 * need_bytes must arrive (the end may be past EOF). */
typedef struct unit_window {
    int file;
    uint64_t offset, bytes, need_bytes;
    uint64_t slot_pos;            /* where it lands inside the unit's memory */
} unit_window;

typedef struct unit {
    int *tensors;                 /* indices into index.tensors */
    int n_tensors, cap_tensors;
    unit_window *win;
    int n_win;
    uint64_t bytes;               /* memory the unit needs (sum of windows) */
    uint8_t *pinned;              /* memory when pinned, else NULL */
} unit;

/* A slot of the trunk ring or the expert cache: memory plus the reads that
 * fill it. */
typedef struct slot {
    uint8_t *mem;
    int unit;                     /* unit loaded or loading; -1 none */
    int busy;                     /* acquired by the forward pass */
    int checked;                  /* MXFP4 scales checked since the read */
    int prefetched;               /* read on a prediction, not yet used */
    k3_io_req *reqs;
    int n_reqs;
} slot;

typedef struct weights_provider {
    k3_weight_provider base;
    const k3_config *cfg;
    k3_provider_options opt;
    k3_stats *stats;
    st_index index;               /* HF shards, or the packed files */
    int packed;
    uint64_t packed_fingerprint;
    char dir[1024];
    int *fd;                      /* per file: reads of units (O_DIRECT when asked) */
    int *fd_buffered;             /* per file: small reads at open */
    k3_io *io;

    k3_layer_weights *layers;     /* templates (placeholder pointers in matrices) */
    k3_mlp_weights *experts;      /* [n_layers][n_experts] templates */
    k3_layer_weights *layer_views;/* rebased copies handed out */
    k3_weight head_template, head_view;
    const st_tensor *embed;       /* rows read on demand */
    uint8_t *embed_buf;           /* aligned bounce buffer for one row */
    uint64_t embed_buf_bytes;
    float *final_norm;
    float *output_res_score;

    unit *units;                  /* [n_layers] trunk, [n_layers] head, then experts */
    int n_units;
    uint64_t *tensor_pos;         /* per tensor: position inside its unit's memory */
    int cur_unit;                 /* unit the loader is filling */

    k3_plan plan;
    slot *ring;                   /* trunk slots */
    int n_ring;
    slot *cache_slots;            /* expert cache slots */
    k3_expert_cache cache;
    FILE *trace;                  /* trace_out.f while --trace is open */
    k3_output trace_out;
    uint64_t trace_token;

    void **owned;
    int n_owned, cap_owned;
} weights_provider;

/* Remember a malloc'd buffer so close() frees it. */
static void *own(weights_provider *rp, void *p)
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

static int head_unit(const weights_provider *rp) { return rp->cfg->n_layers; }
static int expert_unit(const weights_provider *rp, int layer, int expert)
{
    return rp->cfg->n_layers + 1 + layer * rp->cfg->n_experts + expert;
}

/* Register tensor t in the unit being loaded; the returned placeholder
 * (tensor index + 1) is turned into a real address by rebase(). */
static const void *place(weights_provider *rp, const st_tensor *t)
{
    unit *u = &rp->units[rp->cur_unit];
    int ti = (int)(t - rp->index.tensors);
    if (u->n_tensors == u->cap_tensors) {
        u->cap_tensors = u->cap_tensors ? u->cap_tensors * 2 : 8;
        int *g = realloc(u->tensors, (size_t)u->cap_tensors * sizeof *g);
        if (!g) abort();
        u->tensors = g;
    }
    u->tensors[u->n_tensors++] = ti;
    return (const void *)(uintptr_t)(ti + 1);
}

/* Read a whole (small) tensor's bytes at open, through the buffered fd. */
static int read_tensor_bytes(weights_provider *rp, const st_tensor *t, void *dst, k3_error *err)
{
    uint64_t got = 0;
    while (got < t->nbytes) {
        ssize_t n = pread(rp->fd_buffered[t->shard], (char *)dst + got, t->nbytes - got, (off_t)(t->file_offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return k3_err(err, "%s: cannot read tensor '%s' (%s)", rp->index.shards[t->shard].path, t->name,
                          n < 0 ? strerror(errno) : "file ends early");
        got += (uint64_t)n;
    }
    return 0;
}

/* A small tensor of n elements as a new fp32 array (owned). */
static float *read_as_f32(weights_provider *rp, const st_tensor *t, int64_t n, k3_error *err)
{
    void *raw = malloc(t->nbytes ? t->nbytes : 1);
    float *out = own(rp, malloc((size_t)(n ? n : 1) * sizeof(float)));
    if (!raw || !out) { free(raw); k3_err(err, "out of memory"); return NULL; }
    if (read_tensor_bytes(rp, t, raw, err)) { free(raw); return NULL; }
    k3_convert_to_f32(out, raw, t->dtype, n);
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
static const st_tensor *lookup(weights_provider *rp, const char *name)
{
    char full[1024];
    snprintf(full, sizeof full, "%.32s%.900s", rp->cfg->tensor_prefix, name);
    return st_find(&rp->index, full);
}

static const st_tensor *find_tensor(weights_provider *rp, const char *name, k3_error *err)
{
    const st_tensor *t = lookup(rp, name);
    if (!t) k3_err(err, "%s: tensor '%s%s' not found in any shard", rp->dir, rp->cfg->tensor_prefix, name);
    return t;
}

/* An MXFP4 matrix stored as NAME_packed (U8 [rows, cols/2]) and NAME_scale
 * (U8 E8M0 [rows, cols/32]), where NAME is "<module>.weight". */
static int load_mxfp4(weights_provider *rp, const char *name, int64_t rows, int64_t cols, k3_weight *w,
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
    return 0;
}

/* A 2-D weight matrix [rows, cols] used in place. fp8 matrices take their
 * "<name>_scale_inv" companion (128x128 blocks) when present. */
static int load_matrix(weights_provider *rp, const char *name, int64_t rows, int64_t cols,
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
        t->dtype != K3_DT_F8_E4M3)
        return k3_err(err, "%s: tensor '%s' has dtype %s; a weight matrix must be F32, BF16, F16 "
                      "or F8_E4M3", file, name, k3_dtype_name(t->dtype));
    w->dtype = t->dtype;
    w->rows = rows;
    w->cols = cols;
    w->data = place(rp, t);
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
static float *load_small(weights_provider *rp, const char *name, int64_t n, k3_error *err)
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
        t->dtype != K3_DT_F8_E4M3) {
        k3_err(err, "%s: tensor '%s' has dtype %s, expected a float type (F32, F16, BF16, F64, F8_E4M3)",
               rp->index.shards[t->shard].path, name, k3_dtype_name(t->dtype));
        return NULL;
    }
    return read_as_f32(rp, t, n, err);
}

/* Conv taps: [C, 1, W] (nn.Conv1d) or [C, W]. */
static float *load_conv(weights_provider *rp, const char *name, int64_t channels, int64_t width,
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

static int load_mlp(weights_provider *rp, const char *prefix, const char *gate, const char *up,
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

/* A_log: Kimi Linear stores [1,1,H,1]; K3 stores 128 floats of which the
 * first H are the heads (the rest are zero). Any shape with >= H elements. */
static float *load_a_log(weights_provider *rp, const char *name, int64_t heads, k3_error *err)
{
    const st_tensor *t = find_tensor(rp, name, err);
    if (!t) return NULL;
    int64_t n = st_tensor_numel(t);
    if (n < heads || (!rp->cfg->is_k3 && n != heads)) {
        k3_err(err, "%s: tensor '%s%s' has %lld elements, expected %s%lld (one per KDA head)",
               rp->index.shards[t->shard].path, rp->cfg->tensor_prefix, name, (long long)n,
               rp->cfg->is_k3 ? "at least " : "", (long long)heads);
        return NULL;
    }
    return load_small(rp, name, n, err);
}

/* AttnRes: the norm weight and the 1-row projection multiply elementwise,
 * so they fold into one score vector at load (kimi_k3_spec.md §3.1). */
static float *load_res_score(weights_provider *rp, const char *layer_prefix, const char *what, k3_error *err)
{
    char name[600];
    const int64_t D = rp->cfg->hidden;
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

static int load_layer(weights_provider *rp, int l, k3_error *err)
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
            !(k->A_log = load_a_log(rp, NAME("self_attn.A_log"), H, err)) ||
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
            load_matrix(rp, NAME("self_attn.kv_b_proj.weight"), H * (c->qk_nope_dim + c->v_head_dim),
                        c->kv_lora_rank, &m->kv_b, err) ||
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

/* ---- units: which bytes to read for each --------------------------------- */

static int by_file_offset(const void *a, const void *b, void *ctx)
{
    const st_index *ix = ctx;
    const st_tensor *x = &ix->tensors[*(const int *)a], *y = &ix->tensors[*(const int *)b];
    if (x->shard != y->shard) return x->shard - y->shard;
    return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

/* Cover a unit's tensors with aligned windows (merging neighbours less than
 * 1 MiB apart, so a packed run or an HF expert is one read) and record where
 * each tensor lands in the unit's memory. */
static int layout_unit(weights_provider *rp, unit *u, k3_error *err)
{
    if (!u->n_tensors) return 0;
    qsort_r(u->tensors, (size_t)u->n_tensors, sizeof *u->tensors, by_file_offset, &rp->index);
    u->win = calloc((size_t)u->n_tensors, sizeof *u->win);
    if (!u->win) return k3_err(err, "out of memory");
    const uint64_t A = K3_IO_ALIGN, gap = 1u << 20;
    for (int i = 0; i < u->n_tensors; i++) {
        const st_tensor *t = &rp->index.tensors[u->tensors[i]];
        unit_window *w = u->n_win ? &u->win[u->n_win - 1] : NULL;
        uint64_t end = t->file_offset + t->nbytes;
        if (w && w->file == t->shard && t->file_offset <= w->offset + w->need_bytes + gap) {
            if (end > w->offset + w->need_bytes) w->need_bytes = end - w->offset;
        } else {
            w = &u->win[u->n_win++];
            w->file = t->shard;
            w->offset = t->file_offset / A * A;
            w->need_bytes = end - w->offset;
        }
    }
    uint64_t pos = 0;
    for (int k = 0; k < u->n_win; k++) {
        unit_window *w = &u->win[k];
        w->bytes = (w->need_bytes + A - 1) / A * A;
        w->slot_pos = pos;
        pos += w->bytes;
    }
    u->bytes = pos;
    for (int i = 0; i < u->n_tensors; i++) {
        const st_tensor *t = &rp->index.tensors[u->tensors[i]];
        for (int k = 0; k < u->n_win; k++) {
            const unit_window *w = &u->win[k];
            if (w->file == t->shard && t->file_offset >= w->offset && t->file_offset + t->nbytes <= w->offset + w->need_bytes)
                rp->tensor_pos[u->tensors[i]] = w->slot_pos + (t->file_offset - w->offset);
        }
    }
    return 0;
}

/* Placeholder -> address inside a unit's memory. */
static void rebase_weight(const weights_provider *rp, k3_weight *w, uint8_t *base)
{
    if (!w->rows) return;
    w->data = base + rp->tensor_pos[(uintptr_t)w->data - 1];
    if (w->mx_scale) w->mx_scale = base + rp->tensor_pos[(uintptr_t)w->mx_scale - 1];
}

static void rebase_mlp(const weights_provider *rp, k3_mlp_weights *m, uint8_t *base)
{
    rebase_weight(rp, &m->gate, base);
    rebase_weight(rp, &m->up, base);
    rebase_weight(rp, &m->down, base);
}

/* A copy of layer l's template pointing into memory `base`. */
static void rebase_layer(weights_provider *rp, int l, uint8_t *base)
{
    k3_layer_weights *v = &rp->layer_views[l];
    *v = rp->layers[l];
    k3_weight *ws[] = {&v->kda.q, &v->kda.k, &v->kda.v, &v->kda.f_a, &v->kda.f_b, &v->kda.g_a, &v->kda.g_b,
                       &v->kda.g_full, &v->kda.b, &v->kda.o, &v->mla.q, &v->mla.q_a, &v->mla.gate,
                       &v->mla.kv_a, &v->mla.kv_b, &v->mla.o, &v->router, &v->latent_down, &v->latent_up};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) rebase_weight(rp, ws[i], base);
    rebase_mlp(rp, &v->dense, base);
    rebase_mlp(rp, &v->shared, base);
}

/* ---- reading units ------------------------------------------------------- */

/* Start reading unit ui into slot memory (requests kept in the slot). */
static int start_unit_read(weights_provider *rp, slot *s, int ui, k3_read_kind kind, k3_error *err)
{
    unit *u = &rp->units[ui];
    if (s->n_reqs < u->n_win) {
        k3_io_req *g = realloc(s->reqs, (size_t)u->n_win * sizeof *g);
        if (!g) return k3_err(err, "out of memory");
        s->reqs = g;
    }
    k3_io_req *ptrs[64];
    int n = 0;
    for (int k = 0; k < u->n_win; k++) {
        k3_io_req *r = &s->reqs[k];
        memset(r, 0, sizeof *r);
        r->fd = rp->fd[u->win[k].file];
        r->path = rp->index.shards[u->win[k].file].path;
        r->offset = u->win[k].offset;
        r->bytes = u->win[k].bytes;
        r->need_bytes = u->win[k].need_bytes;
        r->dst = s->mem + u->win[k].slot_pos;
        r->kind = kind;
        ptrs[n++] = r;
        if (n == 64 || k == u->n_win - 1) { k3_io_submit(rp->io, ptrs, n); n = 0; }
    }
    s->n_reqs = u->n_win;
    s->unit = ui;
    s->checked = 0;
    return 0;
}

/* Wait for a slot's reads; the stall is charged to *wait_ns when given. */
static int wait_slot_timed(weights_provider *rp, slot *s, uint64_t *wait_ns, k3_error *err)
{
    uint64_t t0 = wait_ns ? k3_now_ns() : 0;
    int rc = 0;
    for (int k = 0; k < rp->units[s->unit].n_win && rc == 0; k++)
        if (k3_io_wait(rp->io, &s->reqs[k], err)) rc = -1;
    if (wait_ns) stats_add(wait_ns, k3_now_ns() - t0);
    return rc;
}

static int wait_slot(weights_provider *rp, slot *s, k3_error *err) { return wait_slot_timed(rp, s, NULL, err); }

/* MXFP4 scale byte 255 is NaN in OCP MX: refuse to compute with it. */
static int check_mxfp4(weights_provider *rp, const k3_mlp_weights *m, int layer, int expert, k3_error *err)
{
    const k3_weight *ws[] = {&m->gate, &m->up, &m->down};
    for (int i = 0; i < 3; i++) {
        int64_t row;
        if (ws[i]->dtype == K3_DT_MXFP4 && k3_mxfp4_check(ws[i]->mx_scale, ws[i]->rows, ws[i]->cols, &row))
            return k3_err(err, "%s: layer %d expert %d has an E8M0 scale byte 255 (NaN in OCP MX) in row %lld; "
                          "refusing to compute with it", rp->dir, layer, expert, (long long)row);
    }
    return 0;
}

/* Read a unit into a pinned buffer now (at open). */
static int read_pinned(weights_provider *rp, int ui, k3_read_kind kind, k3_error *err)
{
    unit *u = &rp->units[ui];
    u->pinned = own(rp, aligned_alloc(K3_IO_ALIGN, u->bytes ? u->bytes : K3_IO_ALIGN));
    if (!u->pinned) return k3_err(err, "out of memory for %.1f MiB of weights", u->bytes / 1048576.0);
    slot s = {.mem = u->pinned, .unit = -1};
    int rc = start_unit_read(rp, &s, ui, kind, err) || wait_slot(rp, &s, err);
    free(s.reqs);
    return rc ? -1 : 0;
}

/* ---- the trunk: pinned or through the ring -------------------------------- */

/* The trunk unit that follows ui in forward order (layers, head, next token's
 * layers) and is not pinned; -1 if all are pinned. */
static int next_streamed_unit(const weights_provider *rp, int ui)
{
    const int n = rp->cfg->n_layers + 1;
    for (int k = 1; k <= n; k++) {
        int u = (ui + k) % n;
        if (!rp->plan.pinned[u]) return u;
    }
    return -1;
}

static slot *ring_find(weights_provider *rp, int ui)
{
    for (int i = 0; i < rp->n_ring; i++)
        if (rp->ring[i].unit == ui) return &rp->ring[i];
    return NULL;
}

/* A free ring slot (not busy); prefers one not holding a wanted unit. */
static slot *ring_free(weights_provider *rp, int avoid)
{
    slot *best = NULL;
    for (int i = 0; i < rp->n_ring; i++) {
        slot *s = &rp->ring[i];
        if (s->busy) continue;
        if (!best || (best->unit == avoid && s->unit != avoid)) best = s;
    }
    return best;
}

/* Make trunk unit ui available and start reading the next streamed unit. */
static uint8_t *acquire_trunk(weights_provider *rp, int ui, k3_error *err)
{
    if (rp->plan.pinned[ui]) return rp->units[ui].pinned;
    slot *s = ring_find(rp, ui);
    if (!s) {
        s = ring_free(rp, -1);
        if (!s) { k3_err(err, "internal: no free ring slot"); return NULL; }
        if (s->unit >= 0) wait_slot(rp, s, err);     /* drain an old prefetch */
        if (start_unit_read(rp, s, ui, K3_READ_TRUNK, err)) return NULL;
    }
    s->busy = 1;
    int next = next_streamed_unit(rp, ui);
    if (next >= 0 && next != ui && !ring_find(rp, next)) {
        slot *f = ring_free(rp, ui);
        if (f && f != s) {
            k3_error ignored;
            if (f->unit >= 0) wait_slot(rp, f, &ignored);
            if (start_unit_read(rp, f, next, K3_READ_TRUNK, err)) return NULL;
        }
    }
    if (wait_slot_timed(rp, s, &rp->stats->wait_trunk_ns, err)) {
        s->unit = -1;
        s->busy = 0;
        return NULL;
    }
    return s->mem;
}

static void release_trunk(weights_provider *rp, int ui)
{
    if (rp->plan.pinned[ui]) return;
    slot *s = ring_find(rp, ui);
    if (s) s->busy = 0;
}

static const k3_layer_weights *prov_acquire_layer(k3_weight_provider *p, int layer, k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    uint8_t *base = acquire_trunk(rp, layer, err);
    if (!base) return NULL;
    if (!rp->plan.pinned[layer]) rebase_layer(rp, layer, base);
    return &rp->layer_views[layer];
}

static void prov_release_layer(k3_weight_provider *p, int layer) { release_trunk((weights_provider *)p, layer); }

static const k3_weight *prov_acquire_head(k3_weight_provider *p, k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    const int ui = head_unit(rp);
    if (rp->cfg->tie_embeddings && !rp->units[ui].n_tensors) return &rp->head_view;
    uint8_t *base = acquire_trunk(rp, ui, err);
    if (!base) return NULL;
    rp->head_view = rp->head_template;
    rebase_weight(rp, &rp->head_view, base);
    return &rp->head_view;
}

static void prov_release_head(k3_weight_provider *p)
{
    weights_provider *rp = (weights_provider *)p;
    release_trunk(rp, head_unit(rp));
}

/* ---- routed experts: the expert cache ------------------------------------ */

static int prov_claim_experts(k3_weight_provider *p, int layer, int *experts, int n, int count_lookup,
                              k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    k3_stats *st = rp->stats;
    int claimed = 0;
    /* resident first: pin them, move them to the front */
    for (int i = 0; i < n; i++) {
        int e = experts[i];
        int s = k3_expert_cache_lookup(&rp->cache, layer, e);
        if (rp->trace && count_lookup)
            fprintf(rp->trace, "%llu %d %d\n", (unsigned long long)rp->trace_token, layer, e);
        if (count_lookup) {
            stats_add(&st->expert_lookups, 1);
            if (layer < K3_STATS_MAX_LAYERS) stats_add(&st->layer_lookups[layer], 1);
        }
        if (s < 0) continue;
        if (rp->cache_slots[s].prefetched) {  /* arrived on a prediction: not a resident hit */
            rp->cache_slots[s].prefetched = 0;
            if (count_lookup) stats_add(&st->prefetch_used, 1);
        } else if (count_lookup) {
            stats_add(&st->expert_hits, 1);
            if (layer < K3_STATS_MAX_LAYERS) stats_add(&st->layer_hits[layer], 1);
        }
        k3_expert_cache_pin(&rp->cache, s);
        int t = experts[claimed];
        experts[claimed++] = e;
        experts[i] = t;
    }
    /* then as many missing ones as slots allow; their reads go out together */
    for (int i = claimed; i < n; i++) {
        int e = experts[i];
        int s = k3_expert_cache_insert(&rp->cache, layer, e);
        if (s < 0) break;
        if (count_lookup) stats_add(&st->expert_misses, 1);
        k3_expert_cache_pin(&rp->cache, s);
        slot *sl = &rp->cache_slots[s];
        if (sl->prefetched) { sl->prefetched = 0; stats_add(&st->prefetch_unused, 1); }
        if (sl->unit >= 0 && sl->n_reqs) {    /* a slot never has a read still in flight here */
            k3_error ignored;
            wait_slot(rp, sl, &ignored);
        }
        if (start_unit_read(rp, sl, expert_unit(rp, layer, e), K3_READ_EXPERT, err)) return -1;
        int t = experts[claimed];
        experts[claimed++] = e;
        experts[i] = t;
    }
    if (!claimed) return k3_err(err, "internal: the expert cache has no free slot");
    return claimed;
}

static void prov_prefetch_experts(k3_weight_provider *p, int layer, const int *experts, int n)
{
    weights_provider *rp = (weights_provider *)p;
    if (!rp->opt.prefetch || rp->plan.all_resident) return;
    if (__atomic_load_n(&rp->stats->reads_in_flight, __ATOMIC_RELAXED) > 0) return;   /* disk busy */
    for (int i = 0; i < n; i++) {
        if (rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + experts[i]] >= 0) continue;
        int s = k3_expert_cache_insert(&rp->cache, layer, experts[i]);
        if (s < 0) return;
        slot *sl = &rp->cache_slots[s];
        if (sl->unit >= 0 && sl->n_reqs) {
            k3_error ignored;
            wait_slot(rp, sl, &ignored);
        }
        if (sl->prefetched) stats_add(&rp->stats->prefetch_unused, 1);
        k3_error err;
        if (start_unit_read(rp, sl, expert_unit(rp, layer, experts[i]), K3_READ_EXPERT, &err)) {
            k3_expert_cache_drop(&rp->cache, s);
            sl->unit = -1;
            return;
        }
        sl->prefetched = 1;
    }
}

static int prov_expert_ready(k3_weight_provider *p, int layer, int expert)
{
    weights_provider *rp = (weights_provider *)p;
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s < 0) return 0;
    const slot *sl = &rp->cache_slots[s];
    for (int k = 0; k < sl->n_reqs; k++)
        if (__atomic_load_n(&sl->reqs[k].state, __ATOMIC_ACQUIRE) == 0) return 0;
    return 1;
}

static const k3_layer_weights *prov_peek_layer(k3_weight_provider *p, int layer)
{
    weights_provider *rp = (weights_provider *)p;
    return rp->plan.pinned[layer] ? &rp->layer_views[layer] : NULL;
}

static int prov_acquire_expert(k3_weight_provider *p, int layer, int expert, k3_mlp_weights *out, k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s < 0) return k3_err(err, "internal: expert %d of layer %d was not claimed", expert, layer);
    slot *sl = &rp->cache_slots[s];
    if (wait_slot_timed(rp, sl, &rp->stats->wait_experts_ns, err)) {
        k3_expert_cache_unpin(&rp->cache, s);
        k3_expert_cache_drop(&rp->cache, s);
        sl->unit = -1;
        return -1;
    }
    *out = rp->experts[(size_t)layer * rp->cfg->n_experts + expert];
    rebase_mlp(rp, out, sl->mem);
    if (!sl->checked) {
        if (check_mxfp4(rp, out, layer, expert, err)) {
            k3_expert_cache_unpin(&rp->cache, s);
            k3_expert_cache_drop(&rp->cache, s);
            sl->unit = -1;
            return -1;
        }
        sl->checked = 1;
    }
    return 0;
}

static void prov_release_expert(k3_weight_provider *p, int layer, int expert)
{
    weights_provider *rp = (weights_provider *)p;
    int s = rp->cache.slot_of[(size_t)layer * rp->cfg->n_experts + expert];
    if (s >= 0) k3_expert_cache_unpin(&rp->cache, s);
}

/* ---- embedding rows, norms ----------------------------------------------- */

static int prov_embed_row(k3_weight_provider *p, int token, float *out, k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
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

static const float *prov_final_norm(k3_weight_provider *p) { return ((weights_provider *)p)->final_norm; }
static const float *prov_output_res_score(k3_weight_provider *p) { return ((weights_provider *)p)->output_res_score; }

/* Identifies the weights, the same way `k3 pack` fingerprints its source
 * (st_shard_fingerprint), so a packed copy and its HF original share state
 * snapshots; a packed directory carries the value in its manifest. */
static uint64_t prov_content_hash(k3_weight_provider *p)
{
    weights_provider *rp = (weights_provider *)p;
    if (rp->packed) return rp->packed_fingerprint;
    uint64_t h = K3_FNV_INIT;
    k3_error ignored;
    for (int s = 0; s < rp->index.n_shards; s++)
        st_shard_fingerprint(rp->fd_buffered[s], rp->index.shards[s].path, rp->index.shards[s].file_bytes, &h, &ignored);
    return h;
}

static int prov_plan_json(k3_weight_provider *p, char *buf, size_t len)
{
    return k3_plan_json(&((weights_provider *)p)->plan, buf, len);
}

/* Random aligned reads of one expert slot's size over the largest file,
 * `depth` at a time through the same reader: the device speed for exactly
 * the reads the runtime makes. The reads land in expert cache slots (no
 * memory beyond the plan's); the experts they held are read back after. */
static int prov_probe_device(k3_weight_provider *p, double seconds, double *gbps, uint64_t *read_bytes, int *depth,
                             k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    int file = 0;
    for (int i = 1; i < rp->index.n_shards; i++)
        if (rp->index.shards[i].file_bytes > rp->index.shards[file].file_bytes) file = i;
    uint64_t size = rp->plan.expert_slot_bytes ? rp->plan.expert_slot_bytes : (1u << 20);
    const uint64_t fbytes = rp->index.shards[file].file_bytes;
    if (fbytes < size) size = fbytes / K3_IO_ALIGN * K3_IO_ALIGN;
    if (!size) return k3_err(err, "%s: too small to probe", rp->index.shards[file].path);
    int d = rp->opt.io_depth > 0 ? rp->opt.io_depth : 4;
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
            k3_error ignored;
            if (sl->unit >= 0) wait_slot(rp, sl, &ignored);     /* a prefetch may be in flight */
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
        if (start_unit_read(rp, sl, sl->unit, K3_READ_OTHER, &rerr) || wait_slot(rp, sl, &rerr)) {
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

static void prov_close(k3_weight_provider *p)
{
    weights_provider *rp = (weights_provider *)p;
    if (!rp) return;
    k3_io_close(rp->io);
    for (int i = 0; i < rp->n_owned; i++) free(rp->owned[i]);
    free(rp->owned);
    for (int i = 0; i < rp->n_units; i++) { free(rp->units[i].tensors); free(rp->units[i].win); }
    free(rp->units);
    for (int i = 0; i < rp->n_ring; i++) { free(rp->ring[i].mem); free(rp->ring[i].reqs); }
    free(rp->ring);
    for (int i = 0; i < rp->cache.n_slots; i++) { free(rp->cache_slots[i].mem); free(rp->cache_slots[i].reqs); }
    free(rp->cache_slots);
    k3_expert_cache_free(&rp->cache);
    k3_plan_free(&rp->plan);
    free(rp->tensor_pos);
    free(rp->layers);
    free(rp->layer_views);
    free(rp->experts);
    free(rp->embed_buf);
    if (rp->trace) k3_output_close(&rp->trace_out, NULL);
    for (int i = 0; i < rp->index.n_shards; i++) {
        if (rp->fd && rp->fd[i] >= 0) close(rp->fd[i]);
        if (rp->fd_buffered && rp->fd_buffered[i] >= 0) close(rp->fd_buffered[i]);
    }
    free(rp->fd);
    free(rp->fd_buffered);
    st_index_close(&rp->index);
    free(rp);
}

/* A packed directory's manifest as an st_index: four "shards" (trunk,
 * experts, embed, head) and the tensor table, so one loader serves both. */
static int index_from_manifest(weights_provider *rp, const char *dir, k3_error *err)
{
    k3_manifest mf;
    if (k3_manifest_load(dir, &mf, err)) return -1;
    if (k3_unit_sums_check(&mf, 1, err)) { k3_manifest_free(&mf); return -1; }   /* weights changed in place? */
    st_index *ix = &rp->index;
    memset(ix, 0, sizeof *ix);
    ix->n_shards = K3_PK_NFILES;
    ix->shards = calloc(K3_PK_NFILES, sizeof *ix->shards);
    ix->tensors = calloc((size_t)(mf.n_tensors ? mf.n_tensors : 1), sizeof *ix->tensors);
    if (!ix->shards || !ix->tensors) { k3_manifest_free(&mf); return k3_err(err, "out of memory"); }
    for (int f = 0; f < K3_PK_NFILES; f++) {
        char path[4096];
        k3_manifest_path(&mf, (k3_pk_file)f, path, sizeof path);
        ix->shards[f].path = strdup(path);
        ix->shards[f].fd = -1;
        ix->shards[f].file_bytes = mf.file_bytes[f];
    }
    for (int i = 0; i < mf.n_tensors; i++) {
        const k3_manifest_tensor *mt = &mf.tensors[i];
        st_tensor *t = &ix->tensors[ix->n_tensors++];
        t->name = strdup(mt->name);
        t->dtype = mt->dtype;
        t->ndim = mt->ndim;
        memcpy(t->shape, mt->shape, sizeof(int64_t) * (mt->ndim < ST_MAX_DIMS ? mt->ndim : ST_MAX_DIMS));
        t->file_offset = mt->offset;
        t->nbytes = mt->bytes;
        t->shard = mt->file;
    }
    rp->packed = 1;
    rp->packed_fingerprint = mf.fingerprint;
    k3_manifest_free(&mf);
    return st_index_build_lookup(ix, err);
}

/* Open every file twice: for unit reads (O_DIRECT when asked) and for small
 * buffered reads at open. */
static int open_files(weights_provider *rp, k3_error *err)
{
    const int n = rp->index.n_shards;
    rp->fd = malloc((size_t)n * sizeof *rp->fd);
    rp->fd_buffered = malloc((size_t)n * sizeof *rp->fd_buffered);
    if (!rp->fd || !rp->fd_buffered) return k3_err(err, "out of memory");
    for (int i = 0; i < n; i++) rp->fd[i] = rp->fd_buffered[i] = -1;
    for (int i = 0; i < n; i++) {
        const char *path = rp->index.shards[i].path;
        rp->fd_buffered[i] = k3_open_regular(path, O_RDONLY, err);
        if (rp->fd_buffered[i] < 0) return -1;
        rp->fd[i] = open(path, O_RDONLY | O_CLOEXEC | (rp->opt.io_direct ? O_DIRECT : 0));
        if (rp->fd[i] < 0 && rp->opt.io_direct && errno == EINVAL)
            return k3_err(err, "%s: this filesystem does not support O_DIRECT; use --io buffered", path);
        if (rp->fd[i] < 0) return k3_err(err, "%s: %s", path, strerror(errno));
        if (!rp->opt.io_direct) posix_fadvise(rp->fd[i], 0, 0, POSIX_FADV_RANDOM);
    }
    return 0;
}

/* Current resident set size, to charge what the process already holds. */
static uint64_t current_rss(void)
{
    uint64_t rss, peak;
    stats_read_rss(&rss, &peak);
    return rss;
}

/* Plan the budget, allocate slots, read what is pinned. */
static int plan_and_allocate(weights_provider *rp, k3_error *err)
{
    if (rp->opt.sizes_only) return 0;
    const k3_config *c = rp->cfg;
    const int n_trunk = c->n_layers + 1;
    uint64_t *trunk_bytes = malloc((size_t)n_trunk * sizeof *trunk_bytes);
    if (!trunk_bytes) return k3_err(err, "out of memory");
    for (int i = 0; i < n_trunk; i++) trunk_bytes[i] = rp->units[i].bytes;
    uint64_t expert_bytes = 0;
    int n_experts_total = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->is_moe[l]) continue;
        for (int e = 0; e < c->n_experts; e++) {
            const unit *u = &rp->units[expert_unit(rp, l, e)];
            if (u->bytes > expert_bytes) expert_bytes = u->bytes;
            n_experts_total++;
        }
    }
    uint64_t fixed = k3_plan_fixed_bytes(current_rss(), rp->opt.session_bytes, rp->embed_buf_bytes);
    uint64_t budget = rp->opt.mem_bytes;
    char source[256] = "";                /* where a derived budget comes from (printed) */
    if (!budget) {                        /* no --mem: resident if it fits in 90% of what may be used */
        uint64_t total = fixed + (uint64_t)n_experts_total * expert_bytes;
        for (int i = 0; i < n_trunk; i++) total += trunk_bytes[i];
        k3_mem_limit lim;
        k3_mem_limit_read(current_rss(), &lim);
        const uint64_t avail = lim.avail_bytes;
        /* under a cgroup limit the budget is always in force (and printed) */
        budget = avail && (lim.from_cgroup || total > avail * 9 / 10) ? avail * 9 / 10 : 0;
        if (lim.from_cgroup)
            snprintf(source, sizeof source, "%s = %.1f MiB, %.1f MiB in use; budget 90%% of the rest",
                     lim.source, lim.limit_bytes / 1048576.0, lim.in_use_bytes / 1048576.0);
        else
            snprintf(source, sizeof source, "90%% of MemAvailable %.1f MiB", avail / 1048576.0);
    }
    k3_plan_input in = {budget, fixed, rp->opt.session_bytes, rp->opt.ctx_tokens, n_trunk, trunk_bytes,
                        expert_bytes, n_experts_total, c->top_k, source};
    int rc = k3_plan_make(&in, &rp->plan, err);
    free(trunk_bytes);
    if (rc) return -1;
    /* the plan is printed whenever a budget is in force (or no budget was
     * given and the model does not fit in available memory) */
    if (!rp->opt.quiet && budget) k3_plan_print(&rp->plan, stderr);
    k3_stats *st = rp->stats;
    stats_set64(&st->budget_bytes, budget);
    stats_set64(&st->resident_bytes, rp->plan.resident_bytes);
    stats_set64(&st->pinned_trunk_bytes, rp->plan.pinned_bytes);
    stats_set64(&st->ring_bytes, (uint64_t)rp->plan.n_ring * rp->plan.ring_slot_bytes);
    stats_set64(&st->expert_cache_bytes, (uint64_t)rp->plan.n_expert_slots * expert_bytes);
    stats_set64(&st->state_bytes, rp->opt.session_bytes);
    stats_set64(&st->other_bytes, fixed - rp->opt.session_bytes);
    stats_set32(&st->pinned_layers, (uint32_t)rp->plan.n_pinned);
    stats_set32(&st->ring_slots, (uint32_t)rp->plan.n_ring);
    stats_set32(&st->expert_slots, (uint32_t)rp->plan.n_expert_slots);

    /* pinned trunk units: read now, views rebased once */
    for (int i = 0; i < n_trunk; i++) {
        if (!rp->plan.pinned[i]) continue;
        if (read_pinned(rp, i, K3_READ_TRUNK, err)) return -1;
        if (i < c->n_layers) rebase_layer(rp, i, rp->units[i].pinned);
    }
    rp->n_ring = rp->plan.n_ring;
    rp->ring = calloc((size_t)(rp->n_ring ? rp->n_ring : 1), sizeof *rp->ring);
    if (!rp->ring) return k3_err(err, "out of memory");
    for (int i = 0; i < rp->n_ring; i++) {
        rp->ring[i].unit = -1;
        rp->ring[i].mem = aligned_alloc(K3_IO_ALIGN, rp->plan.ring_slot_bytes);
        if (!rp->ring[i].mem) return k3_err(err, "out of memory for the trunk ring");
    }
    if (k3_expert_cache_init(&rp->cache, (k3_cache_policy)rp->opt.cache_policy, rp->plan.n_expert_slots,
                             c->n_layers, c->n_experts))
        return k3_err(err, "out of memory");
    rp->cache_slots = calloc((size_t)(rp->plan.n_expert_slots ? rp->plan.n_expert_slots : 1), sizeof *rp->cache_slots);
    if (!rp->cache_slots) return k3_err(err, "out of memory");
    for (int i = 0; i < rp->plan.n_expert_slots; i++) {
        rp->cache_slots[i].unit = -1;
        rp->cache_slots[i].mem = aligned_alloc(K3_IO_ALIGN, expert_bytes ? expert_bytes : K3_IO_ALIGN);
        if (!rp->cache_slots[i].mem) return k3_err(err, "out of memory for the expert cache");
    }
    if (rp->plan.all_resident) {          /* fully resident: every expert read at open */
        for (int l = 0; l < c->n_layers; l++) {
            if (!c->is_moe[l]) continue;
            for (int e = 0; e < c->n_experts; e++) {
                int s = k3_expert_cache_insert(&rp->cache, l, e);
                if (start_unit_read(rp, &rp->cache_slots[s], expert_unit(rp, l, e), K3_READ_EXPERT, err)) return -1;
            }
        }
        for (int s = 0; s < rp->plan.n_expert_slots; s++)
            if (wait_slot(rp, &rp->cache_slots[s], err)) return -1;
    }
    return 0;
}

/* See model.h: the trace is the only file the provider writes. */
int k3_weights_finish(k3_weight_provider *p, k3_error *err)
{
    weights_provider *rp = (weights_provider *)p;
    if (!rp->trace) return 0;
    rp->trace = NULL;
    return k3_output_close(&rp->trace_out, err);
}

/* A directory with a manifest.json and no *.safetensors is meant to be a
 * packed model even when its manifest is empty, garbage or another version:
 * loading it as one says what is wrong with the manifest, where loading it
 * as a checkpoint would only say that no shards were found. */
static int treat_as_packed(const char *dir)
{
    if (k3_is_packed_dir(dir)) return 1;
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (access(path, F_OK) != 0) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int shards = 0;
    for (struct dirent *e; !shards && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        shards = l > 12 && !strcmp(e->d_name + l - 12, ".safetensors");
    }
    closedir(d);
    return !shards;
}

k3_weight_provider *k3_weights_open(const char *dir, const k3_config *c, const k3_provider_options *o,
                                    k3_stats *stats, k3_error *err)
{
    weights_provider *rp = calloc(1, sizeof *rp);
    if (!rp) { k3_err(err, "out of memory"); return NULL; }
    rp->base = (k3_weight_provider){prov_acquire_layer, prov_release_layer, prov_claim_experts,
                                    prov_prefetch_experts, prov_peek_layer, prov_expert_ready, prov_acquire_expert, prov_release_expert, prov_embed_row, prov_final_norm,
                                    prov_output_res_score, prov_acquire_head, prov_release_head,
                                    prov_probe_device, prov_plan_json, prov_content_hash, prov_close};
    rp->cfg = c;
    rp->opt = *o;
    rp->stats = stats;
    snprintf(rp->dir, sizeof rp->dir, "%s", dir);
    int rc = treat_as_packed(dir) ? index_from_manifest(rp, dir, err) : st_index_open(&rp->index, dir, 0, err);
    if (rc) { free(rp); return NULL; }
    if (open_files(rp, err)) goto fail;
    rp->io = k3_io_open((k3_io_backend)o->io_backend, o->io_depth > 0 ? o->io_depth : 4, stats, err);
    if (!rp->io) goto fail;
    /* test hook (tests/t_stream.sh): K3_TEST_FAIL_READ=N makes the Nth read fail with EIO */
    const char *fail_nth = getenv("K3_TEST_FAIL_READ");
    if (fail_nth && atoi(fail_nth) > 0) k3_io_inject_failure(rp->io, atoi(fail_nth), EIO);
    if (o->trace_path) {
        if (k3_output_open(&rp->trace_out, o->trace_path, err)) goto fail;
        rp->trace = rp->trace_out.f;
    }
    rp->n_units = c->n_layers + 1 + c->n_layers * c->n_experts;
    rp->units = calloc((size_t)rp->n_units, sizeof *rp->units);
    rp->tensor_pos = calloc((size_t)(rp->index.n_tensors ? rp->index.n_tensors : 1), sizeof *rp->tensor_pos);
    rp->layers = calloc((size_t)c->n_layers, sizeof *rp->layers);
    rp->layer_views = calloc((size_t)c->n_layers, sizeof *rp->layer_views);
    rp->experts = calloc((size_t)c->n_layers * c->n_experts, sizeof *rp->experts);
    if (!rp->units || !rp->tensor_pos || !rp->layers || !rp->layer_views || !rp->experts) {
        k3_err(err, "out of memory");
        goto fail;
    }
    /* the embedding: rows on demand */
    if (!(rp->embed = find_tensor(rp, "model.embed_tokens.weight", err))) goto fail;
    if (rp->embed->ndim != 2 || rp->embed->shape[0] != c->vocab_size || rp->embed->shape[1] != c->hidden ||
        (rp->embed->dtype != K3_DT_F32 && rp->embed->dtype != K3_DT_BF16 && rp->embed->dtype != K3_DT_F16)) {
        k3_err(err, "%s: tensor '%smodel.embed_tokens.weight' must be F32/BF16/F16 [%d, %d]",
               rp->index.shards[rp->embed->shard].path, c->tensor_prefix, c->vocab_size, c->hidden);
        goto fail;
    }
    rp->embed_buf_bytes = ((uint64_t)c->hidden * 4 + 2 * K3_IO_ALIGN + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
    if (!(rp->embed_buf = aligned_alloc(K3_IO_ALIGN, rp->embed_buf_bytes))) { k3_err(err, "out of memory"); goto fail; }
    if (!(rp->final_norm = load_small(rp, "model.norm.weight", c->hidden, err))) goto fail;
    if (c->attn_res_block && !(rp->output_res_score = load_res_score(rp, "model", "output_attn_res", err)))
        goto fail;
    rp->cur_unit = head_unit(rp);
    if (c->tie_embeddings) {
        rp->cur_unit = head_unit(rp);
        if (load_matrix(rp, "model.embed_tokens.weight", c->vocab_size, c->hidden, &rp->head_template, err)) goto fail;
    } else if (load_matrix(rp, "lm_head.weight", c->vocab_size, c->hidden, &rp->head_template, err)) {
        goto fail;
    }
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(rp, l, err)) goto fail;
    for (int i = 0; i < rp->n_units; i++)
        if (layout_unit(rp, &rp->units[i], err)) goto fail;
    if (plan_and_allocate(rp, err)) goto fail;
    if (rp->opt.sizes_only) return &rp->base;
    if (rp->plan.pinned[head_unit(rp)]) {
        rp->head_view = rp->head_template;
        rebase_weight(rp, &rp->head_view, rp->units[head_unit(rp)].pinned);
    }
    return &rp->base;
fail:
    prov_close(&rp->base);
    return NULL;
}

/* The unit sizes plan_and_allocate hands the planner (see model.h). */
void k3_weights_unit_sizes(const k3_weight_provider *p, uint64_t *trunk_bytes, uint64_t *expert_bytes,
                           int *n_experts_total, uint64_t *embed_buf_bytes)
{
    const weights_provider *rp = (const weights_provider *)p;
    const k3_config *c = rp->cfg;
    for (int i = 0; i <= c->n_layers; i++) trunk_bytes[i] = rp->units[i].bytes;
    *expert_bytes = 0;
    *n_experts_total = 0;
    for (int l = 0; l < c->n_layers; l++) {
        if (!c->is_moe[l]) continue;
        for (int e = 0; e < c->n_experts; e++) {
            const unit *u = &rp->units[expert_unit(rp, l, e)];
            if (u->bytes > *expert_bytes) *expert_bytes = u->bytes;
            (*n_experts_total)++;
        }
    }
    *embed_buf_bytes = rp->embed_buf_bytes;
}
