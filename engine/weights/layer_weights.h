/* layer_weights.h - the weights of one layer as the forward pass sees them, and the
 * options of the weight store (weights.h) that hands them out.
 *
 * The forward pass never touches files directly: it asks the weight store
 * for a layer (acquire/release) and for the routed experts it needs, wherever
 * their bytes sit (pinned, a ring slot, an expert-cache slot). */
#ifndef K3_LAYER_WEIGHTS_H
#define K3_LAYER_WEIGHTS_H

#include <stdint.h>
#include "config.h"
#include "k3_error.h"
#include "kernels.h"
#include "planner.h"
#include "safetensors.h"

/* gate/up/down of one SwiGLU MLP (dense layer, shared expert, routed expert) */
typedef struct k3_mlp_weights {
    k3_weight gate;   /* [inter, hidden] */
    k3_weight up;     /* [inter, hidden] */
    k3_weight down;   /* [hidden, inter] */
} k3_mlp_weights;

typedef struct k3_kda_weights {
    k3_weight q, k, v;            /* [P, hidden], P = heads * head_dim */
    float *conv[3];               /* q, k, v taps: [P][W] fp32, tap W-1 = current token */
    k3_weight f_a, f_b;           /* forget gate low rank: [r, hidden], [P, r] */
    k3_weight g_a, g_b;           /* output gate low rank (Kimi Linear) */
    k3_weight g_full;             /* output gate full rank g_proj [P, hidden] (K3) */
    k3_weight b;                  /* beta logits [heads, hidden] */
    float *decay_rate;            /* [heads] exp(A_log) (a GGUF's -ssm_a) */
    float *dt_bias;               /* [P] */
    float *o_norm;                /* [head_dim] */
    k3_weight o;                  /* [hidden, P] */
} k3_kda_weights;

typedef struct k3_mla_weights {
    k3_weight q;                  /* [heads * (nope + rope), hidden], or q_b_proj with q-LoRA */
    k3_weight q_a;                /* q-LoRA down [q_lora, hidden] (K3); rows 0 = none */
    float *q_a_norm;              /* [q_lora] */
    k3_weight gate;               /* output gate g_proj [heads * v, hidden] (K3); rows 0 = none */
    k3_weight kv_a;               /* [kv_lora + rope, hidden] */
    float *kv_a_norm;             /* [kv_lora] */
    k3_weight kv_b;               /* [heads * (nope + v), kv_lora]; rows 0 when k_b/v_b hold it */
    k3_weight k_b;                /* a GGUF's split kv_b: [heads * kv_lora, nope], each head's */
    k3_weight v_b;                /*   nope rows transposed; and [heads * v, kv_lora] */
    k3_weight o;                  /* [hidden, heads * v] */
} k3_mla_weights;

typedef struct k3_layer_weights {
    float *attn_norm;             /* input_layernorm [hidden] */
    float *ffn_norm;              /* post_attention_layernorm [hidden] */
    k3_kda_weights kda;           /* valid when the layer is KDA */
    k3_mla_weights mla;           /* valid when the layer is MLA */
    k3_mlp_weights dense;         /* valid when the FFN is dense */
    k3_weight router;             /* MoE: [n_experts, hidden] */
    float *router_bias;           /* MoE: e_score_correction_bias [n_experts] */
    int has_shared;
    k3_mlp_weights shared;        /* MoE: shared experts fused, inter = moe_inter * n_shared */
    /* Kimi K3 */
    float *attn_res_score;        /* AttnRes mix before attention: norm (.) proj, [hidden] */
    float *mlp_res_score;         /* AttnRes mix before the FFN */
    k3_weight latent_down;        /* routed_expert_down_proj [latent, hidden] */
    k3_weight latent_up;          /* routed_expert_up_proj [hidden, latent] */
    float *latent_norm;           /* routed_expert_norm [latent] or NULL */
} k3_layer_weights;

/* How the provider holds the weights (from k3_options and the planner). */
typedef struct k3_provider_options {
    uint64_t mem_bytes;           /* hard budget for the whole process; 0 = derive */
    int io_direct;                /* O_DIRECT reads */
    int io_backend;               /* k3_io_backend */
    int io_depth;                 /* reader threads / queue depth */
    int cache_policy;             /* k3_cache_policy */
    int ctx_tokens;               /* context the sessions will use (state cost) */
    uint64_t session_bytes;       /* state + scratch of one session at ctx_tokens */
    const char *trace_path;       /* record (token, layer, expert); NULL = off */
    int prefetch;                 /* router-lookahead prefetch (on unless --no-prefetch) */
    int sizes_only;               /* k3 plan: lay the units out, plan nothing, read no unit */
    int chunk_min, chunk_max;     /* prompt chunk range; session_bytes holds chunk_min's scratch */
    uint64_t chunk_token_bytes;   /* scratch per chunk token beyond chunk_min (0 = chunk_min as given) */
    uint64_t span_token_bytes;    /* scratch per token of a prompt span (0 = no spans) */
    int huge_pages;               /* large arenas on 2 MiB pages (huge_pages.c) */
    k3_plan_speeds speeds;        /* what the plan weighs trunk against experts at (plan_speeds.c);
                                   * a zero speed: k3_plan_default_speeds */
} k3_provider_options;

#endif
