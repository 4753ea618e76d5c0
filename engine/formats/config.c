/* config.c - read and validate config.json (see config.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "k3.h"
#include "k3_util.h"

/* Fetch an integer field; required fields fail when absent. Bounds keep
 * later size arithmetic from overflowing on hostile input. */
static int get_int(json_t *o, const char *what, const char *key, int required, int dflt,
                   int lo, int hi, int *out, k3_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            return k3_err(err, "%s: missing required field \"%s\"", what, key);
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v))
        return k3_err(err, "%s: field \"%s\" must be an integer", what, key);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return k3_err(err, "%s: field \"%s\" = %lld is out of range [%d, %d]", what, key,
                      (long long)i, lo, hi);
    *out = (int)i;
    return 0;
}

static int get_num(json_t *o, const char *what, const char *key, double lo, double hi,
                   float *out, k3_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v) return k3_err(err, "%s: missing required field \"%s\"", what, key);
    if (!json_is_number(v)) return k3_err(err, "%s: field \"%s\" must be a number", what, key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return k3_err(err, "%s: field \"%s\" = %g is out of range [%g, %g]", what, key, d, lo, hi);
    *out = (float)d;
    return 0;
}

static int get_bool(json_t *o, const char *what, const char *key, int dflt, int *out, k3_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = dflt; return 0; }
    if (!json_is_boolean(v)) return k3_err(err, "%s: field \"%s\" must be true or false", what, key);
    *out = json_is_true(v);
    return 0;
}

/* A string field that, when present, must equal one of the values we implement. */
static int check_string(json_t *o, const char *what, const char *key, const char *want, k3_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v) || strcmp(json_string_value(v), want))
        return k3_err(err, "%s: field \"%s\" must be \"%s\" (this engine implements only that)",
                      what, key, want);
    return 0;
}

/* A 1-based layer list: marks kind for each listed layer. */
static int read_layer_list(json_t *lac, const char *what, const char *key, int n_layers,
                           uint8_t *seen, uint8_t *kinds, k3_attn_kind kind, k3_error *err)
{
    json_t *arr = json_object_get(lac, key);
    if (!json_is_array(arr))
        return k3_err(err, "%s: missing required field \"linear_attn_config.%s\" (a list of "
                      "1-based layer numbers)", what, key);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > n_layers)
            return k3_err(err, "%s: linear_attn_config.%s[%zu] must be a layer number in 1..%d",
                          what, key, i, n_layers);
        int layer = (int)json_integer_value(v) - 1;
        if (seen[layer])
            return k3_err(err, "%s: layer %d appears twice in linear_attn_config", what, layer + 1);
        seen[layer] = 1;
        kinds[layer] = (uint8_t)kind;
    }
    return 0;
}

/* A required boolean field. */
static int get_bool_required(json_t *o, const char *what, const char *key, int *out, k3_error *err)
{
    if (!json_object_get(o, key)) return k3_err(err, "%s: missing required field \"%s\"", what, key);
    return get_bool(o, what, key, 0, out, err);
}

/* The Kimi K3 additions (docs/MODEL.md, "Config"), all required. */
static int parse_k3_fields(k3_config *c, json_t *tc, json_t *top, const char *what, k3_error *err)
{
    json_t *act = json_object_get(tc, "hidden_act");
    if (!json_is_string(act)) return k3_err(err, "%s: missing required field \"text_config.hidden_act\"", what);
    if (!strcmp(json_string_value(act), "situ")) {
        c->use_situ = 1;
        if (get_num(tc, what, "activation_situ_beta", 1e-6, 1e6, &c->situ_beta, err) ||
            get_num(tc, what, "activation_situ_linear_beta", 1e-6, 1e6, &c->situ_linear_beta, err))
            return -1;
    } else if (strcmp(json_string_value(act), "silu")) {
        return k3_err(err, "%s: hidden_act \"%s\" is not supported (situ or silu)", what, json_string_value(act));
    }
    static const char *const required[] = {"moe_router_activation_func", "moe_renormalize",
                                           "num_key_value_heads", "tie_word_embeddings"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!json_object_get(tc, required[i]))
            return k3_err(err, "%s: missing required field \"text_config.%s\"", what, required[i]);
    if (!json_object_get(tc, "q_lora_rank"))
        return k3_err(err, "%s: missing required field \"text_config.q_lora_rank\"", what);
    if (get_int(tc, what, "attn_res_block_size", 1, 0, 1, K3_MAX_LAYERS, &c->attn_res_block, err) ||
        get_bool_required(tc, what, "mla_use_output_gate", &c->mla_output_gate, err) ||
        get_int(tc, what, "routed_expert_hidden_size", 1, 0, 1, 1 << 16, &c->latent_dim, err) ||
        get_bool_required(tc, what, "latent_moe_use_norm", &c->latent_norm, err))
        return -1;
    json_t *lac = json_object_get(tc, "linear_attn_config");
    if (!json_is_object(lac)) return k3_err(err, "%s: missing required field \"linear_attn_config\"", what);
    if (get_num(lac, what, "gate_lower_bound", -1e6, 0, &c->kda_gate_lower_bound, err) ||
        get_bool_required(lac, what, "use_full_rank_gate", &c->kda_full_rank_gate, err))
        return -1;
    c->kda_lower_bound_gate = 1;
    json_t *tm = json_object_get(tc, "topk_method");
    if (tm && (!json_is_string(tm) || strcmp(json_string_value(tm), "noaux_tc")))
        return k3_err(err, "%s: topk_method must be \"noaux_tc\"", what);
    /* quantization_config: in text_config or at the top; null = nothing quantized */
    json_t *qc = json_object_get(tc, "quantization_config");
    if (!qc) qc = json_object_get(top, "quantization_config");
    if (!qc) return k3_err(err, "%s: missing required field \"quantization_config\"", what);
    if (!json_is_null(qc)) {
        json_t *fmt = json_object_get(qc, "format");
        if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "mxfp4-pack-quantized"))
            return k3_err(err, "%s: quantization_config.format must be \"mxfp4-pack-quantized\"", what);
        c->experts_mxfp4 = 1;
    }
    return 0;
}

/* What the app shows about a model but the math never reads: the random-weights
 * marker k3 gen writes (so nobody mistakes a synthetic model for a real one)
 * and the declared weight dtype (top level, else the decoder's text_config). */
static int parse_people_facts(k3_config *c, json_t *top, json_t *decoder, const char *what, k3_error *err)
{
    if (get_bool(top, what, "k3_random_weights", 0, &c->random_weights, err)) return -1;
    const char *keys[] = {"dtype", "torch_dtype"};
    json_t *objs[] = {top, decoder};
    for (int o = 0; o < 2 && !c->dtype[0]; o++)
        for (int k = 0; k < 2 && !c->dtype[0]; k++) {
            json_t *v = json_object_get(objs[o], keys[k]);
            if (json_is_string(v)) snprintf(c->dtype, sizeof c->dtype, "%s", json_string_value(v));
        }
    return 0;
}

static int parse_object(k3_config *c, json_t *root, const char *what, k3_error *err)
{
    json_t *top = root;
    memset(c, 0, sizeof *c);
    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt))
        return k3_err(err, "%s: missing required field \"model_type\"", what);
    if (!strcmp(json_string_value(mt), "kimi_k3")) {
        root = json_object_get(top, "text_config");
        if (!json_is_object(root))
            return k3_err(err, "%s: missing required field \"text_config\"", what);
        json_t *tmt = json_object_get(root, "model_type");
        if (!json_is_string(tmt) || strcmp(json_string_value(tmt), "kimi_linear"))
            return k3_err(err, "%s: text_config.model_type must be \"kimi_linear\"", what);
        c->is_k3 = 1;
        snprintf(c->tensor_prefix, sizeof c->tensor_prefix, "language_model.");
    } else if (strcmp(json_string_value(mt), "kimi_linear")) {
        return k3_err(err, "%s: model_type \"%s\" is not supported (expected \"kimi_linear\" or "
                      "\"kimi_k3\")", what, json_string_value(mt));
    }
    snprintf(c->model_type, sizeof c->model_type, "%s", json_string_value(mt));
    if (parse_people_facts(c, top, root, what, err)) return -1;

    const int BIG = 1 << 24;
    if (get_int(root, what, "vocab_size", 1, 0, 1, BIG, &c->vocab_size, err) ||
        get_int(root, what, "hidden_size", 1, 0, 1, 1 << 16, &c->hidden, err) ||
        get_int(root, what, "num_hidden_layers", 1, 0, 1, K3_MAX_LAYERS, &c->n_layers, err) ||
        get_num(root, what, "rms_norm_eps", 0, 1, &c->rms_eps, err) ||
        get_bool(root, what, "tie_word_embeddings", 0, &c->tie_embeddings, err) ||
        get_int(root, what, "num_attention_heads", 1, 0, 1, 4096, &c->mla_heads, err) ||
        get_int(root, what, "q_lora_rank", 0, 0, 1, 1 << 16, &c->q_lora_rank, err) ||
        get_int(root, what, "kv_lora_rank", 1, 0, 1, 1 << 16, &c->kv_lora_rank, err) ||
        get_int(root, what, "qk_nope_head_dim", 1, 0, 1, 1 << 12, &c->qk_nope_dim, err) ||
        get_int(root, what, "qk_rope_head_dim", 1, 0, 0, 1 << 12, &c->qk_rope_dim, err) ||
        get_int(root, what, "v_head_dim", 1, 0, 1, 1 << 12, &c->v_head_dim, err) ||
        get_int(root, what, "intermediate_size", 1, 0, 1, BIG, &c->dense_inter, err) ||
        get_int(root, what, "moe_intermediate_size", 1, 0, 1, BIG, &c->moe_inter, err) ||
        get_int(root, what, "num_experts", 1, 0, 1, 1 << 16, &c->n_experts, err) ||
        get_int(root, what, json_object_get(root, "num_experts_per_token") || !json_object_get(root, "num_experts_per_tok")
                ? "num_experts_per_token" : "num_experts_per_tok", 1, 0, 1, 1 << 16, &c->top_k, err) ||
        get_int(root, what, "num_shared_experts", 1, 0, 0, 1 << 10, &c->n_shared_experts, err) ||
        get_int(root, what, "first_k_dense_replace", 1, 0, 0, K3_MAX_LAYERS, &c->first_k_dense, err) ||
        get_int(root, what, "moe_layer_freq", 0, 1, 1, K3_MAX_LAYERS, &c->moe_layer_freq, err) ||
        get_num(root, what, "routed_scaling_factor", 0, 1e6, &c->routed_scaling, err) ||
        get_bool(root, what, "moe_renormalize", 1, &c->moe_renormalize, err) ||
        get_int(root, what, "bos_token_id", 0, -1, 0, BIG, &c->bos_id, err) ||
        get_int(root, what, "eos_token_id", 0, -1, 0, BIG, &c->eos_id, err) ||
        get_int(root, what, "pad_token_id", 0, -1, 0, BIG, &c->pad_id, err))
        return -1;
    if (c->q_lora_rank && !c->is_k3)
        return k3_err(err, "%s: q_lora_rank %d: q-LoRA MLA is not supported for kimi_linear",
                      what, c->q_lora_rank);
    /* bos/eos/pad may sit at the top level of a K3 config */
    if (c->is_k3 && (get_int(top, what, "bos_token_id", 0, c->bos_id, 0, BIG, &c->bos_id, err) ||
                     get_int(top, what, "eos_token_id", 0, c->eos_id, 0, BIG, &c->eos_id, err) ||
                     get_int(top, what, "pad_token_id", 0, c->pad_id, 0, BIG, &c->pad_id, err)))
        return -1;
    int kv_heads = c->mla_heads;
    if (get_int(root, what, "num_key_value_heads", 0, c->mla_heads, 1, 4096, &kv_heads, err))
        return -1;
    if (kv_heads != c->mla_heads)
        return k3_err(err, "%s: num_key_value_heads %d differs from num_attention_heads %d "
                      "(MLA is multi-head after decompression)", what, kv_heads, c->mla_heads);
    if (c->top_k > c->n_experts)
        return k3_err(err, "%s: num_experts_per_token %d exceeds num_experts %d", what, c->top_k,
                      c->n_experts);
    if (c->is_k3 && parse_k3_fields(c, root, top, what, err)) return -1;
    if ((!c->is_k3 && check_string(root, what, "hidden_act", "silu", err)) ||
        check_string(root, what, "moe_router_activation_func", "sigmoid", err))
        return -1;
    int use_nope = 1;
    if (c->is_k3 && !json_object_get(root, "mla_use_nope"))
        return k3_err(err, "%s: missing required field \"mla_use_nope\"", what);
    if (get_bool(root, what, "mla_use_nope", 1, &use_nope, err)) return -1;
    if (!use_nope)
        return k3_err(err, "%s: mla_use_nope false (RoPE MLA) is not supported", what);
    int n_groups = 1, topk_group = 1;
    if (get_int(root, what, "num_expert_group", 0, 1, 1, 1 << 16, &n_groups, err) ||
        get_int(root, what, "topk_group", 0, 1, 1, 1 << 16, &topk_group, err))
        return -1;
    if (n_groups != 1 || topk_group != 1)
        return k3_err(err, "%s: grouped expert selection (num_expert_group %d, topk_group %d) "
                      "is not supported", what, n_groups, topk_group);

    json_t *lac = json_object_get(root, "linear_attn_config");
    if (!json_is_object(lac))
        return k3_err(err, "%s: missing required field \"linear_attn_config\"", what);
    if (get_int(lac, what, "head_dim", 1, 0, 1, 1024, &c->kda_head_dim, err) ||
        get_int(lac, what, "num_heads", 1, 0, 1, 4096, &c->kda_heads, err) ||
        get_int(lac, what, "short_conv_kernel_size", 1, 0, 1, 64, &c->conv_kernel, err))
        return -1;
    uint8_t seen[K3_MAX_LAYERS] = {0};
    if (read_layer_list(lac, what, "kda_layers", c->n_layers, seen, c->attn_kind, K3_ATTN_KDA, err) ||
        read_layer_list(lac, what, "full_attn_layers", c->n_layers, seen, c->attn_kind, K3_ATTN_MLA, err))
        return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (!seen[l])
            return k3_err(err, "%s: layer %d is in neither linear_attn_config.kda_layers nor "
                          "full_attn_layers", what, l + 1);
    for (int l = 0; l < c->n_layers; l++)
        c->is_moe[l] = l >= c->first_k_dense && l % c->moe_layer_freq == 0;
    return 0;
}

int k3_config_parse(k3_config *c, const char *text, size_t len, const char *what, k3_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return k3_err(err, "%s: not valid JSON (%s, line %d)", what, jerr.text, jerr.line);
    int rc;
    if (!json_is_object(root))
        rc = k3_err(err, "%s: top level is not a JSON object", what);
    else
        rc = parse_object(c, root, what, err);
    json_decref(root);
    return rc;
}

/* config.json from disk: a regular file of at most K3_MAX_CONFIG_BYTES. */
int k3_config_load(k3_config *c, const char *path, k3_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    if (k3_read_file(path, K3_MAX_CONFIG_BYTES, &buf, &n, err)) return -1;
    int rc = k3_config_parse(c, buf, n, path, err);
    free(buf);
    return rc;
}

int k3_config_count_attn(const k3_config *c, k3_attn_kind kind)
{
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += c->attn_kind[l] == kind;
    return n;
}

size_t k3_config_kda_conv_floats(const k3_config *c)
{
    return (size_t)k3_config_count_attn(c, K3_ATTN_KDA) * 3 * (size_t)(c->conv_kernel - 1) *
           ((size_t)c->kda_heads * c->kda_head_dim);
}

size_t k3_config_kda_state_floats(const k3_config *c)
{
    return (size_t)k3_config_count_attn(c, K3_ATTN_KDA) * c->kda_heads * c->kda_head_dim * c->kda_head_dim;
}

size_t k3_config_mla_entry_floats(const k3_config *c) { return (size_t)c->kv_lora_rank + c->qk_rope_dim; }
