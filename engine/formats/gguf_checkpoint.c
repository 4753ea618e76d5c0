/* gguf_checkpoint.c - a GGUF as a checkpoint (see gguf_checkpoint.h): the
 * config from metadata and shapes, the tensors under k3's names. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "gguf_checkpoint.h"

/* GGUF name inside a block (after "blk.L.") -> k3's name after
 * "model.layers.L.". KDA and MLA share attn_q/attn_output (q_proj, o_proj);
 * a KDA layer's full-rank gate (ssm_g) and an MLA layer's output gate
 * (attn_gate) are both g_proj, told apart by the layer's kind. */
static const struct { const char *gguf, *k3; } block_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"ssm_conv1d_q.weight", "self_attn.q_conv1d.weight"},
    {"ssm_conv1d_k.weight", "self_attn.k_conv1d.weight"},
    {"ssm_conv1d_v.weight", "self_attn.v_conv1d.weight"},
    {"ssm_f_a.weight", "self_attn.f_a_proj.weight"},
    {"ssm_f_b.weight", "self_attn.f_b_proj.weight"},
    {"ssm_beta.weight", "self_attn.b_proj.weight"},
    {"ssm_a", "self_attn.ssm_a"},
    {"ssm_dt.bias", "self_attn.dt_bias"},
    {"ssm_g_a.weight", "self_attn.g_a_proj.weight"},
    {"ssm_g_b.weight", "self_attn.g_b_proj.weight"},
    {"ssm_g.weight", "self_attn.g_proj.weight"},
    {"ssm_norm.weight", "self_attn.o_norm.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_gate.weight", "self_attn.g_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"attn_k_b.weight", "self_attn.k_b_proj.weight"},
    {"attn_v_b.weight", "self_attn.v_b_proj.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"},
    {"exp_probs_b.bias", "block_sparse_moe.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "block_sparse_moe.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "block_sparse_moe.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "block_sparse_moe.shared_experts.down_proj.weight"},
    {"ffn_routed_down.weight", "block_sparse_moe.routed_expert_down_proj.weight"},
    {"ffn_routed_up.weight", "block_sparse_moe.routed_expert_up_proj.weight"},
    {"ffn_routed_norm.weight", "block_sparse_moe.routed_expert_norm.weight"},
    {"attn_res_score", "self_attention_res_score"},
    {"attn_res_score.weight", "self_attention_res_score"},
    {"ffn_res_score", "mlp_res_score"},
    {"ffn_res_score.weight", "mlp_res_score"},
};

/* Names outside the blocks. */
static const struct { const char *gguf, *k3; } top_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"output_res_score", "model.output_attn_res_score"},
    {"output_res_score.weight", "model.output_attn_res_score"},
};

/* The stacked expert tensors and the per-expert matrix each slab becomes. */
static const struct { const char *gguf, *k3; } expert_names[] = {
    {"ffn_gate_exps.weight", "w1"},
    {"ffn_up_exps.weight", "w3"},
    {"ffn_down_exps.weight", "w2"},
};

int gguf_is_model_path(const char *path)
{
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".gguf")) return 1;
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) return 0;
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", path);
    if (access(p, F_OK) == 0) return 0;
    gguf_file g;
    k3_error e;
    /* a folder holding one .gguf file or one split set, which opens */
    if (gguf_open(&g, path, &e)) return 0;
    gguf_close(&g);
    return 1;
}

void gguf_model_folder(const char *path, char *out, size_t len)
{
    size_t n = strlen(path);
    const char *slash = strrchr(path, '/');
    if (n > 5 && !strcmp(path + n - 5, ".gguf"))
        snprintf(out, len, "%.*s", !slash ? 1 : slash == path ? 1 : (int)(slash - path), slash ? path : ".");
    else
        snprintf(out, len, "%s", path);
}

/* The file's name for messages: its first part. */
static const char *file_name(const gguf_file *g) { return g->parts[0].path; }

/* The tensor "blk.L.suffix", or NULL. */
static const gguf_tensor *block_tensor(const gguf_file *g, int layer, const char *suffix)
{
    char name[160];
    snprintf(name, sizeof name, "blk.%d.%s", layer, suffix);
    return gguf_find_tensor(g, name);
}

/* A metadata key "ARCH.key" (or a full key when arch is NULL). */
static const gguf_kv *arch_kv(const gguf_file *g, const char *arch, const char *key)
{
    char name[256];
    if (arch) snprintf(name, sizeof name, "%s.%s", arch, key);
    else snprintf(name, sizeof name, "%s", key);
    return gguf_find_kv(g, name);
}

/* The number held by a key, into a JSON object under json_key; absent keys
 * are left out (the config parser then applies its default or refuses). */
static int put_number(json_t *o, const char *json_key, const gguf_kv *kv, int integer, const char *what,
                      const char *key, k3_error *err)
{
    if (!kv) return 0;
    if (integer) {
        int64_t v;
        if (gguf_kv_int(kv, &v)) return k3_err(err, "%s: metadata %s must be an integer", what, key);
        return json_object_set_new(o, json_key, json_integer(v));
    }
    double v;
    if (gguf_kv_f64(kv, &v)) return k3_err(err, "%s: metadata %s must be a number", what, key);
    return json_object_set_new(o, json_key, json_real(v));
}

/* A matrix's row count (ggml dims[1]) and row length (dims[0]). */
static int64_t rows_of(const gguf_tensor *t) { return t->n_dims >= 2 ? t->dims[1] : 1; }

/* The text config.json would hold, from the metadata and the shapes:
 * shapes give every size (they cannot disagree with the tensors), the
 * metadata what no shape says (top-k, eps, scaling, special ids, the K3
 * gate and residual settings). */
static json_t *config_json(const gguf_file *g, const char *arch, int is_k3, k3_error *err)
{
    const char *what = file_name(g);
    const gguf_tensor *embd = gguf_find_tensor(g, "token_embd.weight");
    if (!embd || embd->n_dims != 2) {
        k3_err(err, "%s: no 2-D tensor token_embd.weight", what);
        return NULL;
    }
    uint64_t n_layers_u = 0;
    const gguf_kv *bc = arch_kv(g, arch, "block_count");
    if (!bc || gguf_kv_uint(bc, &n_layers_u) || n_layers_u < 1 || n_layers_u > K3_MAX_LAYERS) {
        k3_err(err, "%s: metadata %s.block_count must be a layer count in 1..%d", what, arch, K3_MAX_LAYERS);
        return NULL;
    }
    const int n_layers = (int)n_layers_u;
    json_t *tc = json_object(), *lac = json_object(), *kda = json_array(), *mla = json_array();
    json_object_set_new(tc, "model_type", json_string("kimi_linear"));
    json_object_set_new(tc, "vocab_size", json_integer(embd->dims[1]));
    json_object_set_new(tc, "hidden_size", json_integer(embd->dims[0]));
    json_object_set_new(tc, "num_hidden_layers", json_integer(n_layers));
    json_object_set_new(tc, "tie_word_embeddings", json_boolean(!gguf_find_tensor(g, "output.weight")));
    json_object_set_new(tc, "hidden_act", json_string("silu"));
    json_object_set_new(tc, "moe_router_activation_func", json_string("sigmoid"));
    json_object_set_new(tc, "mla_use_nope", json_true());
    json_object_set_new(tc, "q_lora_rank", json_null());
    json_object_set_new(tc, "linear_attn_config", lac);
    json_object_set_new(lac, "kda_layers", kda);
    json_object_set_new(lac, "full_attn_layers", mla);
    int first_moe = -1, first_kda = -1, first_mla = -1, first_dense = -1;
    for (int l = 0; l < n_layers; l++) {
        if (block_tensor(g, l, "ssm_beta.weight")) {
            json_array_append_new(kda, json_integer(l + 1));
            if (first_kda < 0) first_kda = l;
        } else if (block_tensor(g, l, "attn_kv_a_mqa.weight")) {
            json_array_append_new(mla, json_integer(l + 1));
            if (first_mla < 0) first_mla = l;
        }
        if (block_tensor(g, l, "ffn_gate_inp.weight")) { if (first_moe < 0) first_moe = l; }
        else if (first_dense < 0) first_dense = l;
    }
    if (first_moe > 0 && first_dense > first_moe) {
        k3_err(err, "%s: layer %d is dense after MoE layer %d (k3 runs dense layers first, then MoE)", what,
               first_dense, first_moe);
        goto fail;
    }
    json_object_set_new(tc, "first_k_dense_replace", json_integer(first_moe < 0 ? n_layers : first_moe));
    const gguf_tensor *t;
    if (first_kda >= 0) {
        const gguf_tensor *beta = block_tensor(g, first_kda, "ssm_beta.weight");
        const gguf_tensor *norm = block_tensor(g, first_kda, "ssm_norm.weight");
        const gguf_tensor *conv = block_tensor(g, first_kda, "ssm_conv1d_q.weight");
        if (!norm || !conv) {
            k3_err(err, "%s: KDA layer %d lacks blk.%d.%s", what, first_kda, first_kda,
                   norm ? "ssm_conv1d_q.weight" : "ssm_norm.weight");
            goto fail;
        }
        json_object_set_new(lac, "num_heads", json_integer(rows_of(beta)));
        json_object_set_new(lac, "head_dim", json_integer(norm->dims[0]));
        json_object_set_new(lac, "short_conv_kernel_size", json_integer(conv->dims[0]));
        json_object_set_new(lac, "use_full_rank_gate", json_boolean(block_tensor(g, first_kda, "ssm_g.weight") != NULL));
    } else {                                      /* no KDA layer: sizes the config still requires */
        json_object_set_new(lac, "num_heads", json_integer(1));
        json_object_set_new(lac, "head_dim", json_integer(1));
        json_object_set_new(lac, "short_conv_kernel_size", json_integer(1));
        json_object_set_new(lac, "use_full_rank_gate", json_false());
    }
    if (first_mla >= 0) {
        const int l = first_mla;
        const gguf_tensor *norm = block_tensor(g, l, "attn_kv_a_norm.weight");
        const gguf_tensor *kv_a = block_tensor(g, l, "attn_kv_a_mqa.weight");
        const gguf_tensor *k_b = block_tensor(g, l, "attn_k_b.weight"), *v_b = block_tensor(g, l, "attn_v_b.weight");
        if (!norm || !k_b || !v_b || k_b->n_dims != 3 || v_b->n_dims != 3) {
            k3_err(err, "%s: MLA layer %d needs attn_kv_a_norm and the split attn_k_b / attn_v_b (3-D); "
                   "files with a fused attn_kv_b are not read", what, l);
            goto fail;
        }
        const int64_t kv_lora = norm->dims[0];
        json_object_set_new(tc, "kv_lora_rank", json_integer(kv_lora));
        json_object_set_new(tc, "qk_rope_head_dim", json_integer(rows_of(kv_a) - kv_lora));
        json_object_set_new(tc, "qk_nope_head_dim", json_integer(k_b->dims[0]));
        json_object_set_new(tc, "v_head_dim", json_integer(v_b->dims[1]));
        json_object_set_new(tc, "num_attention_heads", json_integer(k_b->dims[2]));
        if ((t = block_tensor(g, l, "attn_q_a.weight"))) json_object_set_new(tc, "q_lora_rank", json_integer(rows_of(t)));
        json_object_set_new(tc, "mla_use_output_gate", json_boolean(block_tensor(g, l, "attn_gate.weight") != NULL));
    } else {
        k3_err(err, "%s: no MLA layer (blk.L.attn_kv_a_mqa.weight): not a Kimi model k3 runs", what);
        goto fail;
    }
    json_object_set_new(tc, "intermediate_size",
                        json_integer(first_dense >= 0 && (t = block_tensor(g, first_dense, "ffn_gate.weight"))
                                         ? rows_of(t) : 1));
    if (first_moe >= 0) {
        const int l = first_moe;
        const gguf_tensor *gate = block_tensor(g, l, "ffn_gate_exps.weight");
        if (!gate || gate->n_dims != 3) {
            k3_err(err, "%s: MoE layer %d lacks the stacked tensor blk.%d.ffn_gate_exps.weight [in, inter, experts]",
                   what, l, l);
            goto fail;
        }
        const int64_t inter = gate->dims[1];
        json_object_set_new(tc, "moe_intermediate_size", json_integer(inter));
        json_object_set_new(tc, "num_experts", json_integer(gate->dims[2]));
        const gguf_tensor *sh = block_tensor(g, l, "ffn_gate_shexp.weight");
        if (sh && rows_of(sh) % inter) {
            k3_err(err, "%s: blk.%d.ffn_gate_shexp.weight has %lld rows, not a whole number of experts of %lld",
                   what, l, (long long)rows_of(sh), (long long)inter);
            goto fail;
        }
        json_object_set_new(tc, "num_shared_experts", json_integer(sh ? rows_of(sh) / inter : 0));
        const gguf_tensor *latent = block_tensor(g, l, "ffn_routed_down.weight");
        if (latent) json_object_set_new(tc, "routed_expert_hidden_size", json_integer(rows_of(latent)));
        json_object_set_new(tc, "latent_moe_use_norm", json_boolean(block_tensor(g, l, "ffn_routed_norm.weight") != NULL));
    } else {
        json_object_set_new(tc, "moe_intermediate_size", json_integer(1));
        json_object_set_new(tc, "num_experts", json_integer(1));
        json_object_set_new(tc, "num_shared_experts", json_integer(0));
    }
    /* what no shape says */
    if (!arch_kv(g, arch, "expert_used_count") && first_moe >= 0) {
        k3_err(err, "%s: metadata %s.expert_used_count is missing", what, arch);
        goto fail;
    }
    json_object_set_new(tc, "num_experts_per_token", json_integer(1));
    int rc = put_number(tc, "num_experts_per_token", arch_kv(g, arch, "expert_used_count"), 1, what,
                        "expert_used_count", err) ||
             put_number(tc, "rms_norm_eps", arch_kv(g, arch, "attention.layer_norm_rms_epsilon"), 0, what,
                        "attention.layer_norm_rms_epsilon", err) ||
             put_number(tc, "routed_scaling_factor", arch_kv(g, arch, "expert_weights_scale"), 0, what,
                        "expert_weights_scale", err) ||
             put_number(tc, "bos_token_id", arch_kv(g, NULL, "tokenizer.ggml.bos_token_id"), 1, what,
                        "tokenizer.ggml.bos_token_id", err) ||
             put_number(tc, "eos_token_id", arch_kv(g, NULL, "tokenizer.ggml.eos_token_id"), 1, what,
                        "tokenizer.ggml.eos_token_id", err) ||
             put_number(tc, "pad_token_id", arch_kv(g, NULL, "tokenizer.ggml.padding_token_id"), 1, what,
                        "tokenizer.ggml.padding_token_id", err);
    if (rc) goto fail;
    const gguf_kv *norm_kv = arch_kv(g, arch, "expert_weights_norm");
    if (norm_kv) {
        uint64_t v;
        if (norm_kv->type != GGUF_BOOL || gguf_kv_uint(norm_kv, &v)) {
            if (norm_kv->type != GGUF_BOOL) {
                k3_err(err, "%s: metadata %s.expert_weights_norm must be a bool", what, arch);
                goto fail;
            }
            v = norm_kv->value[0];
        }
        json_object_set_new(tc, "moe_renormalize", json_boolean(v != 0));
    } else {
        json_object_set_new(tc, "moe_renormalize", json_true());
    }
    if (is_k3) {
        const gguf_kv *situ = arch_kv(g, arch, "activation.situ_beta");
        if (situ) {
            json_object_set_new(tc, "hidden_act", json_string("situ"));
            if (put_number(tc, "activation_situ_beta", situ, 0, what, "activation.situ_beta", err) ||
                put_number(tc, "activation_situ_linear_beta", arch_kv(g, arch, "activation.situ_linear_beta"), 0,
                           what, "activation.situ_linear_beta", err))
                goto fail;
        }
        if (put_number(tc, "attn_res_block_size", arch_kv(g, arch, "attn_res.block_size"), 1, what,
                       "attn_res.block_size", err) ||
            put_number(lac, "gate_lower_bound", arch_kv(g, arch, "kda.gate_lower_bound"), 0, what,
                       "kda.gate_lower_bound", err))
            goto fail;
        if (!json_object_get(lac, "gate_lower_bound")) {
            k3_err(err, "%s: metadata %s.kda.gate_lower_bound is missing", what, arch);
            goto fail;
        }
        json_object_set_new(tc, "num_key_value_heads", json_integer(json_integer_value(json_object_get(tc, "num_attention_heads"))));
        json_object_set_new(tc, "quantization_config", json_null());
    }
    return tc;
fail:
    json_decref(tc);
    return NULL;
}

int gguf_checkpoint_config_text(const gguf_file *g, char **text, k3_error *err)
{
    *text = NULL;
    const char *what = file_name(g);
    const gguf_kv *a = gguf_find_kv(g, "general.architecture");
    const char *arch_s;
    size_t arch_len;
    if (!a || gguf_kv_string(a, &arch_s, &arch_len))
        return k3_err(err, "%s: metadata general.architecture is missing", what);
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(arch_len < 63 ? arch_len : 63), arch_s);
    int is_k3 = !strcmp(arch, "kimi-k3");
    if (!is_k3 && strcmp(arch, "kimi-linear"))
        return k3_err(err, "%s: architecture \"%s\" is not one k3 runs (kimi-linear, kimi-k3)", what, arch);
    json_t *tc = config_json(g, arch, is_k3, err);
    if (!tc) return -1;
    json_t *root = tc;
    if (is_k3) {
        root = json_object();
        json_object_set_new(root, "model_type", json_string("kimi_k3"));
        json_object_set_new(root, "text_config", tc);
    }
    const char *ftype = gguf_file_type_name(g);
    json_object_set_new(root, "dtype", json_string(ftype[0] ? ftype : "GGUF"));
    *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return *text ? 0 : k3_err(err, "out of memory");
}

int gguf_checkpoint_config(const gguf_file *g, k3_config *c, k3_error *err)
{
    char *text;
    if (gguf_checkpoint_config_text(g, &text, err)) return -1;
    char label[1100];
    snprintf(label, sizeof label, "%.1000s (its metadata, read as config.json)", file_name(g));
    int rc = k3_config_parse(c, text, strlen(text), label, err);
    free(text);
    return rc;
}

/* Write n bytes or say why. */
static int write_all(FILE *f, const void *p, size_t n, const char *path, k3_error *err)
{
    return fwrite(p, 1, n, f) == n ? 0 : k3_err(err, "%s: write failed", path);
}

int gguf_write_vocab_file(const gguf_file *g, const char *path, k3_error *err)
{
    const gguf_part *p0 = &g->parts[0];
    if (!p0->header) return k3_err(err, "%s: the header is not held in memory", p0->path);
    uint64_t n_keep = 0;
    for (int64_t i = 0; i < p0->n_kvs; i++)
        n_keep += !strncmp(p0->kvs[i].key, "tokenizer.", 10) || !strcmp(p0->kvs[i].key, "general.architecture");
    FILE *f = fopen(path, "wb");
    if (!f) return k3_err(err, "%s: %s", path, strerror(errno));
    uint8_t head[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};   /* version 3, no tensors */
    for (int b = 0; b < 8; b++) head[16 + b] = (uint8_t)(n_keep >> (8 * b));
    int rc = write_all(f, head, sizeof head, path, err);
    uint64_t at = sizeof head;
    for (int64_t i = 0; i < p0->n_kvs && !rc; i++) {
        const gguf_kv *kv = &p0->kvs[i];
        if (strncmp(kv->key, "tokenizer.", 10) && strcmp(kv->key, "general.architecture")) continue;
        rc = write_all(f, p0->header + kv->header_at, (size_t)kv->header_bytes, path, err);
        at += kv->header_bytes;
    }
    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT] = {0};
    if (!rc && at % GGUF_DEFAULT_ALIGNMENT)   /* the (empty) data section starts aligned */
        rc = write_all(f, zeros, (size_t)(GGUF_DEFAULT_ALIGNMENT - at % GGUF_DEFAULT_ALIGNMENT), path, err);
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0)) rc = k3_err(err, "%s: %s", path, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = k3_err(err, "%s: close failed", path);
    return rc;
}

/* Append one tensor to the index (names and shapes copied). */
static st_tensor *add_tensor(st_index *ix, int *cap, const char *name, const gguf_tensor *t, k3_error *err)
{
    if (ix->n_tensors == *cap) {
        int n = *cap ? *cap * 2 : 256;
        st_tensor *grown = realloc(ix->tensors, (size_t)n * sizeof *grown);
        if (!grown) { k3_err(err, "out of memory"); return NULL; }
        ix->tensors = grown;
        *cap = n;
    }
    st_tensor *s = &ix->tensors[ix->n_tensors];
    memset(s, 0, sizeof *s);
    if (!(s->name = strdup(name))) { k3_err(err, "out of memory"); return NULL; }
    ix->n_tensors++;
    switch (t->type->ggml_id) {
    case K3_GGML_F32: s->dtype = K3_DT_F32; break;
    case K3_GGML_F16: s->dtype = K3_DT_F16; break;
    case K3_GGML_BF16: s->dtype = K3_DT_BF16; break;
    default: s->dtype = K3_DT_GGML; s->qtype = t->type; break;
    }
    /* k3's order is outermost first; a 3-D or 4-D tensor's 1-sized dims
     * go (conv taps [W, 1, C, 1] read as [C, W]) */
    int nd = 0;
    for (int d = t->n_dims - 1; d >= 0; d--)
        if (t->n_dims <= 2 || t->dims[d] != 1) s->shape[nd++] = t->dims[d];
    s->ndim = nd ? nd : 1;
    if (!nd) s->shape[0] = 1;
    s->file_offset = t->file_offset;
    s->nbytes = t->bytes;
    s->shard = t->part;
    return s;
}

int gguf_checkpoint_index(const gguf_file *g, const k3_config *cfg, st_index *ix, k3_error *err)
{
    memset(ix, 0, sizeof *ix);
    int cap = 0;
    ix->shards = calloc((size_t)g->n_parts, sizeof *ix->shards);
    if (!ix->shards) return k3_err(err, "out of memory");
    for (int p = 0; p < g->n_parts; p++) {
        ix->shards[p].fd = -1;
        if (!(ix->shards[p].path = strdup(g->parts[p].path))) return k3_err(err, "out of memory");
        ix->shards[p].file_bytes = g->parts[p].file_bytes;
        ix->shards[p].header_bytes = g->parts[p].data_start;
        ix->n_shards++;
    }
    char name[512];
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        int layer = -1, used = 0;
        const char *suffix = NULL;
        if (!strncmp(t->name, "blk.", 4)) {
            char *end;
            long l = strtol(t->name + 4, &end, 10);
            if (end != t->name + 4 && *end == '.' && l >= 0 && l < cfg->n_layers) {
                layer = (int)l;
                suffix = end + 1;
            }
        }
        if (layer < 0) {
            for (size_t k = 0; k < sizeof top_names / sizeof top_names[0]; k++)
                if (!strcmp(t->name, top_names[k].gguf)) {
                    snprintf(name, sizeof name, "%s%s", cfg->tensor_prefix, top_names[k].k3);
                    if (!add_tensor(ix, &cap, name, t, err)) return -1;
                    used = 1;
                }
            continue;               /* other tensors (a vision tower, rope tables) are not k3's */
        }
        for (size_t k = 0; k < sizeof block_names / sizeof block_names[0] && !used; k++)
            if (!strcmp(suffix, block_names[k].gguf)) {
                snprintf(name, sizeof name, "%smodel.layers.%d.%s", cfg->tensor_prefix, layer, block_names[k].k3);
                st_tensor *s = add_tensor(ix, &cap, name, t, err);
                if (!s) return -1;
                used = 1;
                if (t->n_dims == 3 && s->ndim == 3) {   /* k_b, v_b: the heads' matrices one after another */
                    s->ndim = 2;
                    s->shape[0] = t->dims[2] * t->dims[1];
                    s->shape[1] = t->dims[0];
                }
            }
        for (size_t k = 0; k < sizeof expert_names / sizeof expert_names[0] && !used; k++) {
            if (strcmp(suffix, expert_names[k].gguf)) continue;
            used = 1;
            if (t->n_dims != 3 || t->dims[2] != cfg->n_experts)
                return k3_err(err, "%s: tensor '%s' must be 3-D with %d experts", file_name(g), t->name,
                              cfg->n_experts);
            /* expert e's matrix: the e-th slab of dims[1] rows */
            const uint64_t slab = t->bytes / (uint64_t)cfg->n_experts;   /* dims[1] rows of dims[0] */
            for (int e = 0; e < cfg->n_experts; e++) {
                snprintf(name, sizeof name, "%smodel.layers.%d.block_sparse_moe.experts.%d.%s.weight",
                         cfg->tensor_prefix, layer, e, expert_names[k].k3);
                st_tensor *s = add_tensor(ix, &cap, name, t, err);
                if (!s) return -1;
                s->ndim = 2;
                s->shape[0] = t->dims[1];
                s->shape[1] = t->dims[0];
                s->file_offset = t->file_offset + slab * (uint64_t)e;
                s->nbytes = slab;
            }
        }
    }
    return st_index_build_lookup(ix, err);
}

void gguf_checkpoint_name(const char *name, const char *prefix, char *out, size_t len)
{
    size_t pl = strlen(prefix);
    if (!strncmp(name, prefix, pl)) name += pl;
    for (size_t k = 0; k < sizeof top_names / sizeof top_names[0]; k++)
        if (!strcmp(name, top_names[k].k3)) { snprintf(out, len, "%s", top_names[k].gguf); return; }
    int layer, at = 0;
    if (sscanf(name, "model.layers.%d.%n", &layer, &at) == 1 && at > 0) {
        const char *suffix = name + at;
        for (size_t k = 0; k < sizeof block_names / sizeof block_names[0]; k++)
            if (!strcmp(suffix, block_names[k].k3)) {
                snprintf(out, len, "blk.%d.%s", layer, block_names[k].gguf);
                return;
            }
        int expert, e_at = 0;
        char which[8];
        if (sscanf(suffix, "block_sparse_moe.experts.%d.%3[w123].weight%n", &expert, which, &e_at) == 2 && e_at > 0)
            for (size_t k = 0; k < sizeof expert_names / sizeof expert_names[0]; k++)
                if (!strcmp(which, expert_names[k].k3)) {
                    snprintf(out, len, "blk.%d.%s (expert %d)", layer, expert_names[k].gguf, expert);
                    return;
                }
    }
    snprintf(out, len, "%s", name);
}

const char *gguf_file_type_name(const gguf_file *g)
{
    static const char *const names[] = {
        [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1",
        [10] = "Q2_K", [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M",
        [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K", [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S",
        [22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M",
        [28] = "IQ2_S", [29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0",
        [37] = "TQ2_0", [38] = "MXFP4_MOE"};
    const gguf_kv *kv = gguf_find_kv(g, "general.file_type");
    uint64_t v;
    if (!kv || gguf_kv_uint(kv, &v) || v >= sizeof names / sizeof names[0] || !names[v]) return "";
    return names[v];
}
