/* model.h - a loaded model: config, per-layer weights, and the weight
 * provider through which the forward pass sees them.
 *
 * The forward pass never touches files or mappings directly: it asks the
 * provider for a layer (acquire/release) and for the routed experts it
 * needs. Today's provider keeps the whole checkpoint resident (mmap of the
 * shards, small tensors converted to fp32 at load); the streaming runtime
 * replaces it without changing the math. */
#ifndef K3_MODEL_H
#define K3_MODEL_H

#include <stdint.h>
#include "config.h"
#include "k3_error.h"
#include "kernels.h"
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
    float *A_log;                 /* [heads] */
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
    k3_weight kv_b;               /* [heads * (nope + v), kv_lora] */
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

typedef struct k3_weight_provider k3_weight_provider;
struct k3_weight_provider {
    /* The layer's non-expert tensors, valid until release_layer. */
    const k3_layer_weights *(*acquire_layer)(k3_weight_provider *p, int layer, k3_error *err);
    void (*release_layer)(k3_weight_provider *p, int layer);
    /* Make routed experts of a layer resident, as many as the cache can hold
     * at once: reorders experts[0..n) so the claimed ones come first
     * (resident ones before those being read) and returns how many were
     * claimed (>= 1), or -1 with err set. count_lookup: count these as cache
     * lookups (the first call of a layer step; waves after it do not). */
    int (*claim_experts)(k3_weight_provider *p, int layer, int *experts, int n, int count_lookup,
                         k3_error *err);
    /* Speculative: start reading experts a layer is predicted to need, only
     * when the disk is idle, into evictable slots (never a pinned one). A
     * prefetched expert that the layer then uses counts as prefetch_used,
     * not as a cache hit; one evicted unused counts as prefetch_unused. */
    void (*prefetch_experts)(k3_weight_provider *p, int layer, const int *experts, int n);
    /* The layer's weights if they are resident without any read (pinned),
     * else NULL: lets the forward pass run a later layer's router early. */
    const k3_layer_weights *(*peek_layer)(k3_weight_provider *p, int layer);
    /* 1 if a claimed expert's bytes are already in memory (acquire will not wait). */
    int (*expert_ready)(k3_weight_provider *p, int layer, int expert);
    /* A claimed expert, waiting for its read; valid until release_expert. */
    int (*acquire_expert)(k3_weight_provider *p, int layer, int expert, k3_mlp_weights *out,
                          k3_error *err);
    void (*release_expert)(k3_weight_provider *p, int layer, int expert);
    /* Row `token` of the embedding table, as fp32. */
    int (*embed_row)(k3_weight_provider *p, int token, float *out, k3_error *err);
    /* Final norm weight [hidden] and lm_head [vocab, hidden]. */
    const float *(*final_norm)(k3_weight_provider *p);
    /* K3: the model-level AttnRes score vector [hidden] (NULL otherwise). */
    const float *(*output_res_score)(k3_weight_provider *p);
    const k3_weight *(*acquire_head)(k3_weight_provider *p, k3_error *err);
    void (*release_head)(k3_weight_provider *p);
    /* Measure the device: O_DIRECT-or-not reads of one expert slot's size at
     * random aligned offsets of the largest file, at the reader's depth, for
     * about `seconds`. Writes GB/s and the read size. */
    int (*probe_device)(k3_weight_provider *p, double seconds, double *gbps, uint64_t *read_bytes, int *depth,
                        k3_error *err);
    /* The plan as a JSON object. */
    int (*plan_json)(k3_weight_provider *p, char *buf, size_t len);
    /* Hash of what identifies the weights (shard names, sizes, headers). */
    uint64_t (*content_hash)(k3_weight_provider *p);
    void (*close)(k3_weight_provider *p);
};

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
    int prefetch;                 /* router-lookahead prefetch (off by default) */
    int quiet;                    /* do not print the plan */
    int sizes_only;               /* k3 plan: lay the units out, plan nothing, read no unit */
} k3_provider_options;

/* The one weight provider: reads a Hugging Face or packed directory into a
 * planned memory budget (pinned trunk, a ring of trunk slots, an expert
 * cache); everything pinned when the model fits. */
/* Close what the provider writes (the --trace file), reporting a failed
 * write; 0 when there is nothing to close. */
int k3_weights_finish(k3_weight_provider *p, k3_error *err);
k3_weight_provider *k3_weights_open(const char *dir, const k3_config *c, const k3_provider_options *o,
                                    k3_stats *stats, k3_error *err);

/* The planner's inputs as this provider laid them out (k3 plan opens with
 * sizes_only and plans from these, so its sizes are the engine's own):
 * trunk_bytes[n_layers + 1] (layers, then the head), the expert slot size,
 * routed experts in all layers, the embedding row buffer. */
void k3_weights_unit_sizes(const k3_weight_provider *p, uint64_t *trunk_bytes, uint64_t *expert_bytes,
                           int *n_experts_total, uint64_t *embed_buf_bytes);

#endif
