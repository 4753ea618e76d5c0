/* config.h - the model configuration read from config.json.
 *
 * Every value the forward pass uses comes from here. A field the math needs
 * and that has no agreed default is required: if it is missing or has the
 * wrong type or an unsupported value, loading fails with a message naming
 * config.json and the field. Fields with a documented Hugging Face default
 * (tie_word_embeddings=false, q_lora_rank=null, ...) may be absent. */
#ifndef K3_CONFIG_H
#define K3_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"

#define K3_MAX_LAYERS 512

typedef enum { K3_ATTN_KDA = 0, K3_ATTN_MLA = 1 } k3_attn_kind;

typedef struct k3_config {
    char model_type[32];          /* "kimi_linear" */
    int vocab_size;
    int hidden;                   /* hidden_size */
    int n_layers;                 /* num_hidden_layers */
    float rms_eps;                /* rms_norm_eps */
    int tie_embeddings;           /* tie_word_embeddings */

    /* MLA */
    int mla_heads;                /* num_attention_heads */
    int q_lora_rank;              /* 0 = direct q_proj */
    int kv_lora_rank;
    int qk_nope_dim, qk_rope_dim, v_head_dim;

    /* KDA (linear_attn_config) */
    int kda_heads, kda_head_dim, conv_kernel;

    /* per layer (0-based): attention kind and whether the FFN is MoE */
    uint8_t attn_kind[K3_MAX_LAYERS];
    uint8_t is_moe[K3_MAX_LAYERS];

    /* FFN */
    int dense_inter;              /* intermediate_size */
    int moe_inter;                /* moe_intermediate_size */
    int n_experts, top_k, n_shared_experts;
    int first_k_dense, moe_layer_freq;
    float routed_scaling;
    int moe_renormalize;

    int bos_id, eos_id, pad_id;   /* -1 when absent */

    /* Kimi K3 (model_type kimi_k3, decoder in text_config; docs/MODEL.md, "Kimi K3").
     * For kimi_linear these keep the Kimi Linear behaviour: no prefix,
     * SiLU-GLU, softplus decay, low-rank KDA gate, no AttnRes, no latent. */
    int is_k3;
    char tensor_prefix[32];       /* "language_model." for K3, else "" */
    int use_situ;                 /* hidden_act "situ" */
    float situ_beta, situ_linear_beta;
    int attn_res_block;           /* attn_res_block_size; 0 = plain residual */
    int kda_lower_bound_gate;     /* decay = lb * sigmoid(exp(A_log) * (f + dt_bias)) */
    float kda_gate_lower_bound;
    int kda_full_rank_gate;       /* output gate g_proj instead of g_a/g_b */
    int mla_output_gate;          /* o * sigmoid(g_proj x) before o_proj */
    int latent_dim;               /* routed_expert_hidden_size; 0 = experts at hidden width */
    int latent_norm;              /* latent_moe_use_norm */
    int experts_mxfp4;            /* quantization_config: mxfp4-pack-quantized */

    /* Facts for people, not for the math */
    int random_weights;           /* "k3_random_weights": true (written by k3 gen) */
    char dtype[24];               /* "dtype" / "torch_dtype" as declared, "" if absent */
} k3_config;

/* Parse `path` (a config.json). Returns 0 or -1 with err naming the file and field. */
int k3_config_load(k3_config *c, const char *path, k3_error *err);

/* Parse from a JSON text held in memory (`what` names it in messages). Used by
 * k3_config_load and the fuzzer. */
int k3_config_parse(k3_config *c, const char *text, size_t len, const char *what, k3_error *err);

/* Count of layers of each kind. */
int k3_config_count_attn(const k3_config *c, k3_attn_kind kind);

/* Sizes of one sequence's state, in floats, derived from the config (one
 * definition for the session, its file format and the memory plan):
 * KDA conv history (last W-1 raw q, k, v projections of every KDA layer),
 * KDA recurrent matrices, and one MLA cache entry (latent + shared k_pe). */
size_t k3_config_kda_conv_floats(const k3_config *c);
size_t k3_config_kda_state_floats(const k3_config *c);
size_t k3_config_mla_entry_floats(const k3_config *c);

#endif
