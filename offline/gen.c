/* gen.c - `k3 gen`: write a synthetic Kimi Linear checkpoint in the exact
 * Hugging Face layout (config.json, one or more safetensors shards with
 * model.safetensors.index.json, tiktoken.model, tokenizer_config.json,
 * generation_config.json).
 *
 * Values are pseudo-random but deterministic per (seed, tensor name), so the
 * same model written as 1 or 5 shards, or re-run, holds identical weights.
 * Scales follow the usual initialisations (1/sqrt(fan_in) matrices, norms
 * near 1, A_log = log U(1,16), dt_bias = inverse softplus of a dt in
 * [1e-3, 1e-1]) so activations stay healthy through all layers. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"
#include <sys/stat.h>
#include "k3_offline.h"
#include "kernels.h"
#include "safetensors_write.h"
#include "tokenizer_gen.h"

typedef struct gen_preset {
    const char *name;
    int hidden, layers, kda_heads, kda_head_dim, gate_rank;
    int mla_heads, kv_lora, nope, rope, v_dim;
    int dense_inter, moe_inter, experts, top_k, shared;
    int n_base;                  /* BPE ranks; vocab = n_base + 256 */
    const char *full_attn;       /* 1-based MLA layers */
    /* Kimi K3 layout (docs/MODEL.md, "Kimi K3") when q_lora > 0 */
    int q_lora, latent, attn_res_block;
} gen_preset;

static const gen_preset presets[] = {
    {.name = "tiny", .hidden = 64, .layers = 4, .kda_heads = 2, .kda_head_dim = 16, .gate_rank = 16,
     .mla_heads = 2, .kv_lora = 32, .nope = 16, .rope = 8, .v_dim = 16, .dense_inter = 128, .moe_inter = 32,
     .experts = 8, .top_k = 2, .shared = 1, .n_base = 512, .full_attn = "2,4", .q_lora = 0, .latent = 0,
     .attn_res_block = 0},
    {.name = "small", .hidden = 256, .layers = 8, .kda_heads = 4, .kda_head_dim = 32, .gate_rank = 32,
     .mla_heads = 4, .kv_lora = 64, .nope = 32, .rope = 16, .v_dim = 32, .dense_inter = 512, .moe_inter = 128,
     .experts = 16, .top_k = 4, .shared = 1, .n_base = 1024, .full_attn = "4,8", .q_lora = 0, .latent = 0,
     .attn_res_block = 0},
    {.name = "demo", .hidden = 768, .layers = 12, .kda_heads = 6, .kda_head_dim = 128, .gate_rank = 128,
     .mla_heads = 6, .kv_lora = 256, .nope = 64, .rope = 32, .v_dim = 64, .dense_inter = 2048,
     .moe_inter = 384, .experts = 24, .top_k = 4, .shared = 1, .n_base = 2048, .full_attn = "4,8,12",
     .q_lora = 0, .latent = 0, .attn_res_block = 0},
    /* K3: AttnRes blocks of 2 (boundaries 0,2,4,6), last two layers MLA, MXFP4 experts */
    {.name = "k3-tiny", .hidden = 64, .layers = 7, .kda_heads = 2, .kda_head_dim = 16, .gate_rank = 16,
     .mla_heads = 2, .kv_lora = 32, .nope = 16, .rope = 8, .v_dim = 16, .dense_inter = 128, .moe_inter = 64,
     .experts = 12, .top_k = 3, .shared = 2, .n_base = 512, .full_attn = "4,6,7", .q_lora = 32, .latent = 32,
     .attn_res_block = 2},
    /* K3's proportions at a few GB: 256 experts top-16, 1.2 MiB pages, experts > 90% of bytes */
    {.name = "k3-sim", .hidden = 1024, .layers = 12, .kda_heads = 8, .kda_head_dim = 128, .gate_rank = 128,
     .mla_heads = 8, .kv_lora = 256, .nope = 64, .rope = 32, .v_dim = 64, .dense_inter = 4096,
     .moe_inter = 1536, .experts = 256, .top_k = 16, .shared = 2, .n_base = 2048, .full_attn = "4,8,11,12",
     .q_lora = 512, .latent = 512, .attn_res_block = 3},
    /* a ~15 GB K3-shaped model, the size the closest peer is measured on (benchmarks only) */
    {.name = "k3-16g", .hidden = 3072, .layers = 24, .kda_heads = 24, .kda_head_dim = 128, .gate_rank = 128,
     .mla_heads = 24, .kv_lora = 512, .nope = 128, .rope = 64, .v_dim = 128, .dense_inter = 12288,
     .moe_inter = 1536, .experts = 128, .top_k = 16, .shared = 2, .n_base = 2048,
     .full_attn = "4,8,12,16,20,23,24", .q_lora = 768, .latent = 1536, .attn_res_block = 6},
    /* Kimi K3 at its real widths, two layers (benchmarks only, ~24.5 GB):
     * layer 0 KDA (96 heads x 128) + the dense 33792 MLP, layer 1 gated
     * q-LoRA MLA + MoE of 896 MXFP4 experts (3584 latent x 3072, the real
     * 17.5 MB page) top-16 + 2 shared; the real vocabulary's embedding and
     * head (163840 x 7168) */
    {.name = "k3-real-widths", .hidden = 7168, .layers = 2, .kda_heads = 96, .kda_head_dim = 128,
     .gate_rank = 128, .mla_heads = 96, .kv_lora = 512, .nope = 128, .rope = 64, .v_dim = 128,
     .dense_inter = 33792, .moe_inter = 3072, .experts = 896, .top_k = 16, .shared = 2, .n_base = 163584,
     .full_attn = "2", .q_lora = 1536, .latent = 3584, .attn_res_block = 12},
    /* a ~3.9 GB Kimi Linear for the side-by-side bench against llama.cpp
     * (tools/bench_llamacpp.sh): KDA and MLA share 16 heads and the gate
     * rank equals the KDA head size, as llama.cpp's kimi-linear graph needs */
    {.name = "kl-4g", .hidden = 2048, .layers = 6, .kda_heads = 16, .kda_head_dim = 128, .gate_rank = 128,
     .mla_heads = 16, .kv_lora = 512, .nope = 128, .rope = 64, .v_dim = 128, .dense_inter = 8192,
     .moe_inter = 1024, .experts = 56, .top_k = 8, .shared = 1, .n_base = 2048, .full_attn = "3,6",
     .q_lora = 0, .latent = 0, .attn_res_block = 0},
};

typedef enum {
    INIT_MATRIX, INIT_EMBED, INIT_NORM, INIT_ALOG, INIT_DTBIAS, INIT_CONV, INIT_BIAS,
    INIT_RES_PROJ,      /* AttnRes score row: ~1/sqrt(hidden) so mixes stay soft */
    INIT_MX_PACKED,     /* MXFP4 nibbles, uniform */
    INIT_MX_SCALE,      /* E8M0 exponents giving ~1/sqrt(fan_in) weights */
    INIT_ZERO           /* vision tower placeholders */
} init_kind;

typedef struct gen_tensor {
    st_out_tensor t;
    init_kind init;
    int fan_in;
    int n_heads;                 /* INIT_ALOG: entries past the heads are 0 (K3 ships 128) */
} gen_tensor;

typedef struct gen_state {
    gen_tensor *list;
    int n, cap;
    uint64_t seed;
    int gen_dtype_f32;           /* 1 = big matrices F32, else BF16 */
    int out_of_memory;           /* a tensor could not be listed */
} gen_state;

/* splitmix64: a well-mixed stream from (seed, name hash). */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *x) { return (double)(splitmix(x) >> 11) / 9007199254740992.0; }

static gen_tensor *add_tensor(gen_state *g, const char *name, k3_dtype dt, int ndim, int64_t d0, int64_t d1,
                       int64_t d2, int64_t d3, init_kind init, int fan_in)
{
    static gen_tensor discard;   /* written to, then ignored, once out of memory */
    if (g->out_of_memory) return &discard;
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 256;
        gen_tensor *grown = realloc(g->list, (size_t)cap * sizeof *grown);
        if (!grown) { g->out_of_memory = 1; return &discard; }
        g->list = grown;
        g->cap = cap;
    }
    gen_tensor *t = &g->list[g->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->t.name, sizeof t->t.name, "%s", name);
    t->t.dtype = dt;
    t->t.ndim = ndim;
    int64_t dims[4] = {d0, d1, d2, d3};
    for (int i = 0; i < ndim; i++) t->t.shape[i] = dims[i];
    t->init = init;
    t->fan_in = fan_in;
    return t;
}

/* Write one value into dst at index i in the tensor's dtype. */
static void put_value(void *dst, k3_dtype dt, int64_t i, double v)
{
    if (dt == K3_DT_F32) ((float *)dst)[i] = (float)v;
    else if (dt == K3_DT_BF16) ((uint16_t *)dst)[i] = k3_f32_to_bf16((float)v);
    else ((uint16_t *)dst)[i] = k3_f32_to_f16((float)v);
}

static void fill_tensor(void *user, int i, const st_out_tensor *t, void *dst)
{
    gen_state *g = user;
    const gen_tensor *gt = &g->list[i];
    uint64_t h = k3_fnv1a64(K3_FNV_INIT ^ g->seed, t->name, strlen(t->name));
    uint64_t n = st_out_tensor_bytes(t) / k3_dtype_size(t->dtype);
    if (gt->init == INIT_MX_PACKED || gt->init == INIT_ZERO) {
        uint8_t *b = dst;
        for (uint64_t j = 0; j < n; j += 8) {
            uint64_t r = gt->init == INIT_ZERO ? 0 : splitmix(&h);
            for (uint64_t k = 0; k < 8 && j + k < n; k++) b[j + k] = (uint8_t)(r >> (8 * k));
        }
        return;
    }
    if (gt->init == INIT_MX_SCALE) {
        /* E2M1 values have RMS ~2.93: pick 2^e near 1/(2.93 sqrt(fan_in)), +-1 per group */
        int e = (int)lround(log2(1.0 / (2.93 * sqrt((double)gt->fan_in))));
        uint8_t *b = dst;
        for (uint64_t j = 0; j < n; j++) b[j] = (uint8_t)(127 + e + (int)(splitmix(&h) % 3) - 1);
        return;
    }
    for (uint64_t j = 0; j < n; j++) {
        double u = uniform01(&h), v;
        switch (gt->init) {
        case INIT_MATRIX: v = (2 * u - 1) * sqrt(3.0 / gt->fan_in); break;
        case INIT_EMBED: v = (2 * u - 1) * sqrt(3.0); break;
        case INIT_NORM: v = 1.0 + 0.2 * (u - 0.5); break;
        case INIT_ALOG: v = gt->n_heads && (int)j >= gt->n_heads ? 0.0 : log(1.0 + 15.0 * u); break;
        case INIT_RES_PROJ: v = (2 * u - 1) * sqrt(3.0 / gt->fan_in); break;
        case INIT_DTBIAS: {
            double dt = exp(log(1e-3) + u * (log(1e-1) - log(1e-3)));
            v = dt + log(-expm1(-dt));
            break;
        }
        case INIT_CONV: v = (2 * u - 1) * 0.6; break;
        default: v = (2 * u - 1) * 0.3; break;   /* router correction bias */
        }
        put_value(dst, t->dtype, (int64_t)j, v);
    }
}

/* The KDA attention tensors of layer l (docs/MODEL.md, "Tensors"; K3: A_log
 * shipped as 128 floats, full-rank output gate g_proj, F32 o_norm). Conv
 * taps, A_log and dt_bias are F32 as the runtimes keep them (docs/MODEL.md, "Tensors"). */
static void add_kda_tensors(gen_state *g, const gen_preset *p, int l, const char *prefix, k3_dtype W,
                            k3_dtype o_norm_dtype, int k3)
{
    const int D = p->hidden, P = p->kda_heads * p->kda_head_dim, R = p->gate_rank;
    char n[256];
#define KN(what) (snprintf(n, sizeof n, "%smodel.layers.%d.self_attn." what, prefix, l), n)
    add_tensor(g, KN("q_proj.weight"), W, 2, P, D, 0, 0, INIT_MATRIX, D);
    add_tensor(g, KN("k_proj.weight"), W, 2, P, D, 0, 0, INIT_MATRIX, D);
    add_tensor(g, KN("v_proj.weight"), W, 2, P, D, 0, 0, INIT_MATRIX, D);
    add_tensor(g, KN("q_conv1d.weight"), K3_DT_F32, 3, P, 1, 4, 0, INIT_CONV, 1);
    add_tensor(g, KN("k_conv1d.weight"), K3_DT_F32, 3, P, 1, 4, 0, INIT_CONV, 1);
    add_tensor(g, KN("v_conv1d.weight"), K3_DT_F32, 3, P, 1, 4, 0, INIT_CONV, 1);
    add_tensor(g, KN("f_a_proj.weight"), W, 2, R, D, 0, 0, INIT_MATRIX, D);
    add_tensor(g, KN("f_b_proj.weight"), W, 2, P, R, 0, 0, INIT_MATRIX, R);
    add_tensor(g, KN("b_proj.weight"), W, 2, p->kda_heads, D, 0, 0, INIT_MATRIX, D);
    if (k3) {
        int alog = p->kda_heads <= 128 ? 128 : p->kda_heads;
        add_tensor(g, KN("A_log"), K3_DT_F32, 1, alog, 0, 0, 0, INIT_ALOG, 1)->n_heads = p->kda_heads;
    } else {
        add_tensor(g, KN("A_log"), K3_DT_F32, 4, 1, 1, p->kda_heads, 1, INIT_ALOG, 1);
    }
    add_tensor(g, KN("dt_bias"), K3_DT_F32, 1, P, 0, 0, 0, INIT_DTBIAS, 1);
    if (k3) {
        add_tensor(g, KN("g_proj.weight"), W, 2, P, D, 0, 0, INIT_MATRIX, D);
    } else {
        add_tensor(g, KN("g_a_proj.weight"), W, 2, R, D, 0, 0, INIT_MATRIX, D);
        add_tensor(g, KN("g_b_proj.weight"), W, 2, P, R, 0, 0, INIT_MATRIX, R);
    }
    add_tensor(g, KN("o_norm.weight"), o_norm_dtype, 1, p->kda_head_dim, 0, 0, 0, INIT_NORM, 1);
    add_tensor(g, KN("o_proj.weight"), W, 2, D, P, 0, 0, INIT_MATRIX, P);
#undef KN
}

/* The full tensor list of a preset, in forward order (as a real export). */
static void build_tensors(gen_state *g, const gen_preset *p, const uint8_t *is_mla)
{
    const k3_dtype W = g->gen_dtype_f32 ? K3_DT_F32 : K3_DT_BF16;   /* big matrices */
    const k3_dtype N = W;                                            /* norms follow the model dtype */
    const int D = p->hidden, V = p->n_base + 256;
    char n[256];
    add_tensor(g, "model.embed_tokens.weight", W, 2, V, D, 0, 0, INIT_EMBED, D);
    for (int l = 0; l < p->layers; l++) {
#define NM(fmt, ...) (snprintf(n, sizeof n, "model.layers.%d." fmt, l, ##__VA_ARGS__), n)
        add_tensor(g, NM("input_layernorm.weight"), N, 1, D, 0, 0, 0, INIT_NORM, 1);
        if (!is_mla[l]) {
            add_kda_tensors(g, p, l, "", W, N, 0);
        } else {
            int qd = p->nope + p->rope;
            add_tensor(g, NM("self_attn.q_proj.weight"), W, 2, p->mla_heads * qd, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("self_attn.kv_a_proj_with_mqa.weight"), W, 2, p->kv_lora + p->rope, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("self_attn.kv_a_layernorm.weight"), N, 1, p->kv_lora, 0, 0, 0, INIT_NORM, 1);
            add_tensor(g, NM("self_attn.kv_b_proj.weight"), W, 2, p->mla_heads * (p->nope + p->v_dim), p->kv_lora, 0, 0, INIT_MATRIX, p->kv_lora);
            add_tensor(g, NM("self_attn.o_proj.weight"), W, 2, D, p->mla_heads * p->v_dim, 0, 0, INIT_MATRIX, p->mla_heads * p->v_dim);
        }
        add_tensor(g, NM("post_attention_layernorm.weight"), N, 1, D, 0, 0, 0, INIT_NORM, 1);
        if (l == 0) {
            add_tensor(g, NM("mlp.gate_proj.weight"), W, 2, p->dense_inter, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("mlp.up_proj.weight"), W, 2, p->dense_inter, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("mlp.down_proj.weight"), W, 2, D, p->dense_inter, 0, 0, INIT_MATRIX, p->dense_inter);
        } else {
            add_tensor(g, NM("block_sparse_moe.gate.weight"), W, 2, p->experts, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("block_sparse_moe.gate.e_score_correction_bias"), K3_DT_F32, 1, p->experts, 0, 0, 0, INIT_BIAS, 1);
            for (int e = 0; e < p->experts; e++) {
                add_tensor(g, NM("block_sparse_moe.experts.%d.w1.weight", e), W, 2, p->moe_inter, D, 0, 0, INIT_MATRIX, D);
                add_tensor(g, NM("block_sparse_moe.experts.%d.w2.weight", e), W, 2, D, p->moe_inter, 0, 0, INIT_MATRIX, p->moe_inter);
                add_tensor(g, NM("block_sparse_moe.experts.%d.w3.weight", e), W, 2, p->moe_inter, D, 0, 0, INIT_MATRIX, D);
            }
            int si = p->moe_inter * p->shared;
            add_tensor(g, NM("block_sparse_moe.shared_experts.gate_proj.weight"), W, 2, si, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("block_sparse_moe.shared_experts.up_proj.weight"), W, 2, si, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("block_sparse_moe.shared_experts.down_proj.weight"), W, 2, D, si, 0, 0, INIT_MATRIX, si);
        }
#undef NM
    }
    add_tensor(g, "model.norm.weight", N, 1, D, 0, 0, 0, INIT_NORM, 1);
    add_tensor(g, "lm_head.weight", W, 2, V, D, 0, 0, INIT_MATRIX, D);
}


/* Compare tensor names the way a sorted safetensors writer orders them. */
static int by_name(const void *a, const void *b)
{
    return strcmp(((const gen_tensor *)a)->t.name, ((const gen_tensor *)b)->t.name);
}

/* The Kimi K3 tensor set (docs/MODEL.md, "Kimi K3"), prefixed "language_model.";
 * routed experts MXFP4 (weight_packed + weight_scale), written in the
 * lexicographic name order of the real release (experts.10 before
 * experts.2), so an expert's six tensors are contiguous but pages are not in
 * id order; plus vision tensors a text engine must ignore. */
static void build_tensors_k3(gen_state *g, const gen_preset *p, const uint8_t *is_mla)
{
    const k3_dtype W = g->gen_dtype_f32 ? K3_DT_F32 : K3_DT_BF16;
    const int D = p->hidden, V = p->n_base + 256, Lt = p->latent;
    char n[256];
#define LM "language_model."
    add_tensor(g, LM "model.embed_tokens.weight", W, 2, V, D, 0, 0, INIT_EMBED, D);
    for (int l = 0; l < p->layers; l++) {
#define NM(fmt, ...) (snprintf(n, sizeof n, LM "model.layers.%d." fmt, l, ##__VA_ARGS__), n)
        add_tensor(g, NM("input_layernorm.weight"), W, 1, D, 0, 0, 0, INIT_NORM, 1);
        add_tensor(g, NM("post_attention_layernorm.weight"), W, 1, D, 0, 0, 0, INIT_NORM, 1);
        add_tensor(g, NM("self_attention_res_norm.weight"), W, 1, D, 0, 0, 0, INIT_NORM, 1);
        add_tensor(g, NM("self_attention_res_proj.weight"), W, 2, 1, D, 0, 0, INIT_RES_PROJ, D);
        add_tensor(g, NM("mlp_res_norm.weight"), W, 1, D, 0, 0, 0, INIT_NORM, 1);
        add_tensor(g, NM("mlp_res_proj.weight"), W, 2, 1, D, 0, 0, INIT_RES_PROJ, D);
        if (!is_mla[l]) {
            add_kda_tensors(g, p, l, LM, W, K3_DT_F32, 1);
        } else {
            int qd = p->nope + p->rope;
            add_tensor(g, NM("self_attn.q_a_proj.weight"), W, 2, p->q_lora, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("self_attn.q_a_layernorm.weight"), W, 1, p->q_lora, 0, 0, 0, INIT_NORM, 1);
            add_tensor(g, NM("self_attn.q_b_proj.weight"), W, 2, p->mla_heads * qd, p->q_lora, 0, 0, INIT_MATRIX, p->q_lora);
            add_tensor(g, NM("self_attn.kv_a_proj_with_mqa.weight"), W, 2, p->kv_lora + p->rope, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("self_attn.kv_a_layernorm.weight"), W, 1, p->kv_lora, 0, 0, 0, INIT_NORM, 1);
            add_tensor(g, NM("self_attn.kv_b_proj.weight"), W, 2, p->mla_heads * (p->nope + p->v_dim), p->kv_lora, 0, 0, INIT_MATRIX, p->kv_lora);
            add_tensor(g, NM("self_attn.o_proj.weight"), W, 2, D, p->mla_heads * p->v_dim, 0, 0, INIT_MATRIX, p->mla_heads * p->v_dim);
            add_tensor(g, NM("self_attn.g_proj.weight"), W, 2, p->mla_heads * p->v_dim, D, 0, 0, INIT_MATRIX, D);
        }
        if (l == 0) {
            add_tensor(g, NM("mlp.gate_proj.weight"), W, 2, p->dense_inter, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("mlp.up_proj.weight"), W, 2, p->dense_inter, D, 0, 0, INIT_MATRIX, D);
            add_tensor(g, NM("mlp.down_proj.weight"), W, 2, D, p->dense_inter, 0, 0, INIT_MATRIX, p->dense_inter);
            continue;
        }
        add_tensor(g, NM("block_sparse_moe.gate.weight"), W, 2, p->experts, D, 0, 0, INIT_MATRIX, D);
        add_tensor(g, NM("block_sparse_moe.gate.e_score_correction_bias"), K3_DT_F32, 1, p->experts, 0, 0, 0, INIT_BIAS, 1);
        add_tensor(g, NM("block_sparse_moe.routed_expert_down_proj.weight"), W, 2, Lt, D, 0, 0, INIT_MATRIX, D);
        add_tensor(g, NM("block_sparse_moe.routed_expert_up_proj.weight"), W, 2, D, Lt, 0, 0, INIT_MATRIX, Lt);
        add_tensor(g, NM("block_sparse_moe.routed_expert_norm.weight"), W, 1, Lt, 0, 0, 0, INIT_NORM, 1);
        int si = p->moe_inter * p->shared;
        add_tensor(g, NM("block_sparse_moe.shared_experts.gate_proj.weight"), W, 2, si, D, 0, 0, INIT_MATRIX, D);
        add_tensor(g, NM("block_sparse_moe.shared_experts.up_proj.weight"), W, 2, si, D, 0, 0, INIT_MATRIX, D);
        add_tensor(g, NM("block_sparse_moe.shared_experts.down_proj.weight"), W, 2, D, si, 0, 0, INIT_MATRIX, si);
        int first_expert = g->n;
        for (int e = 0; e < p->experts; e++) {
            const int I = p->moe_inter;
            add_tensor(g, NM("block_sparse_moe.experts.%d.w1.weight_packed", e), K3_DT_U8, 2, I, Lt / 2, 0, 0, INIT_MX_PACKED, Lt);
            add_tensor(g, NM("block_sparse_moe.experts.%d.w1.weight_scale", e), K3_DT_U8, 2, I, Lt / 32, 0, 0, INIT_MX_SCALE, Lt);
            add_tensor(g, NM("block_sparse_moe.experts.%d.w2.weight_packed", e), K3_DT_U8, 2, Lt, I / 2, 0, 0, INIT_MX_PACKED, I);
            add_tensor(g, NM("block_sparse_moe.experts.%d.w2.weight_scale", e), K3_DT_U8, 2, Lt, I / 32, 0, 0, INIT_MX_SCALE, I);
            add_tensor(g, NM("block_sparse_moe.experts.%d.w3.weight_packed", e), K3_DT_U8, 2, I, Lt / 2, 0, 0, INIT_MX_PACKED, Lt);
            add_tensor(g, NM("block_sparse_moe.experts.%d.w3.weight_scale", e), K3_DT_U8, 2, I, Lt / 32, 0, 0, INIT_MX_SCALE, Lt);
        }
        qsort(g->list + first_expert, (size_t)(g->n - first_expert), sizeof *g->list, by_name);
#undef NM
    }
    add_tensor(g, LM "model.norm.weight", W, 1, D, 0, 0, 0, INIT_NORM, 1);
    add_tensor(g, LM "model.output_attn_res_norm.weight", W, 1, D, 0, 0, 0, INIT_NORM, 1);
    add_tensor(g, LM "model.output_attn_res_proj.weight", W, 2, 1, D, 0, 0, INIT_RES_PROJ, D);
    add_tensor(g, LM "lm_head.weight", W, 2, V, D, 0, 0, INIT_MATRIX, D);
#undef LM
    add_tensor(g, "vision_tower.patch_embed.proj.weight", K3_DT_BF16, 2, 32, 48, 0, 0, INIT_ZERO, 1);
    add_tensor(g, "vision_tower.model.norm.weight", K3_DT_BF16, 1, 32, 0, 0, 0, INIT_ZERO, 1);
    add_tensor(g, "mm_projector.proj.0.weight", K3_DT_BF16, 2, 64, 32, 0, 0, INIT_ZERO, 1);
}

/* Write a JSON value to DIR/NAME, pretty-printed like the HF files. */
static int write_json(const char *dir, const char *name, json_t *v, k3_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = json_dump_file(v, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(v);
    if (rc) return k3_err(err, "%s: cannot write", path);
    return 0;
}

static json_t *int_list(const char *csv, int n_layers, int want_in_list)
{
    json_t *a = json_array();
    for (int l = 1; l <= n_layers; l++) {
        int in = 0;
        for (const char *p = csv; *p;) {
            in |= atoi(p) == l;
            while (*p && *p != ',') p++;
            if (*p == ',') p++;
        }
        if (in == want_in_list) json_array_append_new(a, json_integer(l));
    }
    return a;
}

static json_t *make_config(const gen_preset *p, int f32)
{
    json_t *c = json_object();
    json_t *arch = json_array();
    json_array_append_new(arch, json_string("KimiLinearForCausalLM"));
    json_object_set_new(c, "architectures", arch);
    json_object_set_new(c, "model_type", json_string("kimi_linear"));
    json_object_set_new(c, "dtype", json_string(f32 ? "float32" : "bfloat16"));
    json_object_set_new(c, "vocab_size", json_integer(p->n_base + 256));
    json_object_set_new(c, "hidden_size", json_integer(p->hidden));
    json_object_set_new(c, "num_hidden_layers", json_integer(p->layers));
    json_object_set_new(c, "num_attention_heads", json_integer(p->mla_heads));
    json_object_set_new(c, "num_key_value_heads", json_integer(p->mla_heads));
    json_object_set_new(c, "head_dim", json_integer(p->hidden / p->mla_heads));
    json_object_set_new(c, "q_lora_rank", json_null());
    json_object_set_new(c, "kv_lora_rank", json_integer(p->kv_lora));
    json_object_set_new(c, "qk_nope_head_dim", json_integer(p->nope));
    json_object_set_new(c, "qk_rope_head_dim", json_integer(p->rope));
    json_object_set_new(c, "v_head_dim", json_integer(p->v_dim));
    json_object_set_new(c, "mla_use_nope", json_true());
    json_object_set_new(c, "rope_theta", json_real(10000.0));
    json_object_set_new(c, "rope_scaling", json_null());
    json_t *lac = json_object();
    json_object_set_new(lac, "full_attn_layers", int_list(p->full_attn, p->layers, 1));
    json_object_set_new(lac, "kda_layers", int_list(p->full_attn, p->layers, 0));
    json_object_set_new(lac, "head_dim", json_integer(p->kda_head_dim));
    json_object_set_new(lac, "num_heads", json_integer(p->kda_heads));
    json_object_set_new(lac, "short_conv_kernel_size", json_integer(4));
    json_object_set_new(c, "linear_attn_config", lac);
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "intermediate_size", json_integer(p->dense_inter));
    json_object_set_new(c, "moe_intermediate_size", json_integer(p->moe_inter));
    json_object_set_new(c, "num_experts", json_integer(p->experts));
    json_object_set_new(c, "num_experts_per_token", json_integer(p->top_k));
    json_object_set_new(c, "num_shared_experts", json_integer(p->shared));
    json_object_set_new(c, "first_k_dense_replace", json_integer(1));
    json_object_set_new(c, "moe_layer_freq", json_integer(1));
    json_object_set_new(c, "moe_router_activation_func", json_string("sigmoid"));
    json_object_set_new(c, "moe_renormalize", json_true());
    json_object_set_new(c, "routed_scaling_factor", json_real(2.446));
    json_object_set_new(c, "use_grouped_topk", json_true());
    json_object_set_new(c, "num_expert_group", json_integer(1));
    json_object_set_new(c, "topk_group", json_integer(1));
    json_object_set_new(c, "num_nextn_predict_layers", json_integer(0));
    json_object_set_new(c, "rms_norm_eps", json_real(1e-5));
    json_object_set_new(c, "tie_word_embeddings", json_false());
    json_object_set_new(c, "bos_token_id", json_integer(p->n_base));
    json_object_set_new(c, "eos_token_id", json_integer(p->n_base + 2));
    json_object_set_new(c, "pad_token_id", json_integer(p->n_base + 255));
    json_object_set_new(c, "initializer_range", json_real(0.02));
    json_object_set_new(c, "use_cache", json_true());
    return c;
}

/* The Kimi K3 config: wrapper kimi_k3 with the decoder in text_config
 * (docs/MODEL.md, "Config"), MXFP4 quantization_config as released. */
static json_t *make_config_k3(const gen_preset *p, int f32)
{
    json_t *tc = make_config(p, f32);
    json_object_set_new(tc, "hidden_act", json_string("situ"));
    json_object_set_new(tc, "activation_situ_beta", json_real(4.0));
    json_object_set_new(tc, "activation_situ_linear_beta", json_real(25.0));
    json_object_set_new(tc, "q_lora_rank", json_integer(p->q_lora));
    json_object_set_new(tc, "mla_use_output_gate", json_true());
    json_object_set_new(tc, "routed_expert_hidden_size", json_integer(p->latent));
    json_object_set_new(tc, "latent_moe_use_norm", json_true());
    json_object_set_new(tc, "routed_scaling_factor", json_real(1.0));
    json_object_set_new(tc, "topk_method", json_string("noaux_tc"));
    json_object_set_new(tc, "attn_res_block_size", json_integer(p->attn_res_block));
    json_object_set_new(tc, "max_position_embeddings", json_integer(1048576));
    json_object_del(tc, "rope_theta");
    json_object_del(tc, "rope_scaling");
    json_object_del(tc, "head_dim");
    json_t *lac = json_object_get(tc, "linear_attn_config");
    json_object_set_new(lac, "gate_lower_bound", json_real(-5.0));
    json_object_set_new(lac, "use_full_rank_gate", json_true());
    json_t *qc = json_pack("{s:s,s:s,s:s,s:{s:{s:[s],s:{s:i,s:s,s:i,s:s,s:b,s:s},s:n}},s:[s,s,s,s,s,s]}",
                           "quant_method", "compressed-tensors", "format", "mxfp4-pack-quantized",
                           "quantization_status", "compressed", "config_groups", "group_0", "targets", "Linear",
                           "weights", "num_bits", 4, "type", "float", "group_size", 32, "strategy", "group",
                           "symmetric", 1, "scale_dtype", "torch.uint8", "input_activations", "ignore",
                           "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
                           "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*");
    json_object_set_new(tc, "quantization_config", qc);
    json_t *arch = json_array();
    json_array_append_new(arch, json_string("KimiK3ForConditionalGeneration"));
    json_t *top = json_object();
    json_object_set_new(top, "architectures", arch);
    json_object_set_new(top, "model_type", json_string("kimi_k3"));
    json_object_set_new(top, "bos_token_id", json_integer(p->n_base));
    json_object_set_new(top, "eos_token_id", json_integer(p->n_base + 2));
    json_object_set_new(top, "pad_token_id", json_integer(p->n_base + 255));
    json_object_set_new(top, "vt_num_hidden_layers", json_integer(1));
    json_object_set_new(top, "vt_hidden_size", json_integer(32));
    json_object_set_new(top, "mm_projector_type", json_string("patchmergerv2"));
    json_object_set_new(top, "text_config", tc);
    return top;
}

/* K3 renamed the special tokens at the same ids (docs/MODEL.md, "XTML chat format"):
 * rewrite added_tokens_decoder of the generated tokenizer_config.json. */
static int rename_specials_k3(const char *dir, int n_base, k3_error *err)
{
    static const struct { int offset; const char *name; } k3_specials[] = {
        {0, "[BOS]"}, {1, "[EOS]"}, {2, "<|end_of_msg|>"}, {3, "<|open|>"}, {4, "<|close|>"},
        {5, "<|sep|>"}, {6, "[start_header_id]"}, {7, "[end_header_id]"}, {9, "[EOT]"},
        {18, "<|media_begin|>"}, {19, "<|media_content|>"}, {20, "<|media_end|>"},
        {21, "<|media_pad|>"}, {65, "<osagent_mode>"}, {254, "[UNK]"}, {255, "[PAD]"}};
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) return k3_err(err, "%s: %s", path, jerr.text);
    json_t *dec = json_object();
    for (size_t i = 0; i < sizeof k3_specials / sizeof k3_specials[0]; i++) {
        char id[32];
        snprintf(id, sizeof id, "%d", n_base + k3_specials[i].offset);
        int special = k3_specials[i].offset < 3 || k3_specials[i].offset > 5;
        json_object_set_new(dec, id, json_pack("{s:s,s:b,s:b,s:b,s:b,s:b}", "content", k3_specials[i].name,
                                               "lstrip", 0, "normalized", 0, "rstrip", 0, "single_word", 0,
                                               "special", special));
    }
    json_object_set_new(root, "added_tokens_decoder", dec);
    json_object_set_new(root, "eos_token", json_string("[EOS]"));
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    return write_json(dirbuf, "tokenizer_config.json", root, err);
}

const char *k3_gen_preset_names(void)
{
    return "tiny, small, demo, k3-tiny, k3-sim, k3-16g, k3-real-widths, kl-4g";
}

static const gen_preset *find_preset(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

int k3_gen_preset_exists(const char *name)
{
    return find_preset(name) != NULL;
}

int k3_gen_model(const char *out, const k3_gen_opts *o, k3_gen_result *res, k3_error *err)
{
    const gen_preset *p = find_preset(o->preset);
    if (!p) return k3_err(err, "gen: unknown preset '%s' (%s)", o->preset, k3_gen_preset_names());
    if (o->shards < 1 || o->shards > 64) return k3_err(err, "gen: --shards must be 1..64, got %d", o->shards);
    const int shards = o->shards;
    /* create OUT_DIR and any missing parents (mkdir -p) */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", out);
    for (char *q = parent + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            if (mkdir(parent, 0755) != 0 && errno != EEXIST) return k3_err(err, "%s: %s", parent, strerror(errno));
            *q = '/';
        }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) return k3_err(err, "%s: %s", out, strerror(errno));

    uint8_t is_mla[512] = {0};
    json_t *full = int_list(p->full_attn, p->layers, 1);
    size_t idx;
    json_t *v;
    json_array_foreach(full, idx, v) is_mla[json_integer_value(v) - 1] = 1;
    json_decref(full);

    gen_state g = {0};
    g.seed = o->seed;
    g.gen_dtype_f32 = o->f32 != 0;
    if (p->q_lora) build_tensors_k3(&g, p, is_mla);
    else build_tensors(&g, p, is_mla);
    if (g.out_of_memory) { free(g.list); return k3_err(err, "gen: out of memory listing tensors"); }

    /* Split into K shards of about equal size, keeping forward order. */
    uint64_t total = 0;
    for (int i = 0; i < g.n; i++) total += st_out_tensor_bytes(&g.list[i].t);
    json_t *weight_map = json_object();
    int first = 0, rc = 0;
    uint64_t written = 0;
    for (int s = 0; s < shards && rc == 0; s++) {
        uint64_t target = total * (uint64_t)(s + 1) / (uint64_t)shards;
        int last = first;
        while (last < g.n && (s == shards - 1 || written < target || last == first))
            written += st_out_tensor_bytes(&g.list[last++].t);
        char fname[128], path[4096];
        if (shards == 1) snprintf(fname, sizeof fname, "model.safetensors");
        else snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, shards);
        snprintf(path, sizeof path, "%s/%s", out, fname);
        st_out_tensor *ts = malloc((size_t)(last - first + 1) * sizeof *ts);
        if (!ts) { rc = k3_err(err, "gen: out of memory"); break; }
        gen_state sub = g;
        sub.list = g.list + first;
        for (int i = first; i < last; i++) {
            ts[i - first] = g.list[i].t;
            json_object_set_new(weight_map, g.list[i].t.name, json_string(fname));
        }
        rc = st_write_shard(path, ts, last - first, fill_tensor, &sub, err);
        free(ts);
        first = last;
    }
    if (rc == 0 && shards > 1) {
        json_t *index = json_object(), *meta = json_object();
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set_new(index, "metadata", meta);
        json_object_set_new(index, "weight_map", json_incref(weight_map));
        rc = write_json(out, "model.safetensors.index.json", index, err);
    }
    json_decref(weight_map);
    free(g.list);
    if (rc) return -1;
    json_t *config = p->q_lora ? make_config_k3(p, g.gen_dtype_f32) : make_config(p, g.gen_dtype_f32);
    /* the marker the app shows: these weights are random, the model talks nonsense */
    json_object_set_new(config, "k3_random_weights", json_true());
    if (write_json(out, "config.json", config, err)) return -1;
    json_t *gc = json_object();
    json_object_set_new(gc, "bos_token_id", json_integer(p->n_base));
    json_object_set_new(gc, "eos_token_id", json_integer(p->n_base + 2));
    json_object_set_new(gc, "max_length", json_integer(1048576));
    if (write_json(out, "generation_config.json", gc, err)) return -1;
    if (k3_tokenizer_generate(out, p->n_base, err)) return -1;
    if (p->q_lora && rename_specials_k3(out, p->n_base, err)) return -1;
    if (res) res->weight_bytes = total;
    return 0;
}

/* A K3 tokenizer alone, its BPE merges learned from a corpus file: what
 * tools/train_demo.py trains the demo model on (`k3 gen DIR --tokenizer-corpus
 * FILE --n-base N`). Same learner and the same special tokens as the K3
 * presets, so the engine reads it like any K3 tokenizer. */
int k3_gen_tokenizer(const char *dir, int n_base, const char *corpus_path, k3_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (k3_read_file(corpus_path, (size_t)1 << 30, &text, &len, err)) return -1;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        free(text);
        return k3_err(err, "%s: %s", dir, strerror(errno));
    }
    int rc = k3_tokenizer_generate_from(dir, n_base, text, len, err);
    free(text);
    if (rc == 0) rc = rename_specials_k3(dir, n_base, err);
    return rc;
}
