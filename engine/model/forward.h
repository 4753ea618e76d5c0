/* forward.h - the model and session structures shared by the forward-pass
 * files (forward.c, kda.c, mla.c, moe.c, session.c). Not public: outside the
 * engine only k3.h is seen. */
#ifndef K3_FORWARD_H
#define K3_FORWARD_H

#include "k3.h"
#include "layer_weights.h"
#include "weights.h"

/* Tokens processed together per layer in a prompt chunk: each weight matrix
 * (and each routed expert) is read once per chunk. A model's chunk is chosen
 * at open from its budget by the planner (planner.c): K3_CHUNK_TOKENS when the
 * budget leaves no room for more, up to K3_CHUNK_TOKENS_MAX. */
#define K3_CHUNK_TOKENS 32
#define K3_CHUNK_TOKENS_MAX 4096

/* Multiply-adds below which a layer's parallel loop (KDA or MLA heads, a
 * wave of experts) runs on the calling thread: waking the team and joining
 * it costs microseconds, and on a busy machine a whole scheduler slice,
 * more than a small model's head or expert takes. The same threshold as the
 * kernels' (matvec.c); which thread computes a head or an expert changes no
 * bit. */
#define K3_PARALLEL_MIN_MACS ((int64_t)1 << 15)

/* Upper bound on a model's compute threads (per-thread scratch rows). */
#define K3_MAX_THREADS 1024

struct k3_model {
    k3_config cfg;
    k3_weights *weights;
    k3_tokenizer *tok;
    int n_threads;            /* every parallel region of an evaluation: scratch has this many rows */
    char threads_why[160];    /* where n_threads comes from (plan JSON) */
    int *layer_slot;          /* per layer: index among the KDA or among the MLA layers */
    uint64_t weight_bytes;
    char fingerprint[17];     /* hex of config.json + weights hash */
    k3_stats stats;           /* live counters (stats.h) */
    int ctx_tokens;           /* context planned in the memory budget */
    int budgeted;             /* a --mem budget is in force */
    int chunk_tokens;         /* prompt tokens per pass over the weights (the plan's choice) */
    int tile_tokens;          /* tokens the chunk scratch holds: chunk_tokens, or less for a span */
    char chunk_why[256];      /* why that many, one line */
    int huge_pages;           /* large arenas asked onto 2 MiB pages (huge_pages.c) */
};

/* A model's config from its path: a folder's config.json, or a GGUF's
 * metadata (gguf_checkpoint.c); *config_hash (may be NULL) identifies it
 * for the model's fingerprint. config_peek.c. */
int k3_model_config_load(const char *path, k3_config *c, uint64_t *config_hash, k3_error *err);

/* Bytes one session of ctx tokens holds (for the memory plan). */
size_t k3_session_bytes(k3_model *m, int ctx);

/* Per-thread buffers for one routed expert over a chunk. */
typedef struct k3_expert_work {
    float *gathered;          /* [T][expert width] inputs of the tokens that chose it */
    float *inter_gate, *inter_up;   /* [T][inter] */
    float *out;               /* [T][expert width] */
    int *rows;                /* [T] (token, choice) row of each gathered token */
} k3_expert_work;

/* Scratch for one chunk of up to chunk_tokens tokens (the plan picks it). */
typedef struct k3_scratch {
    float *h;                 /* [T][D] residual stream */
    float *xn;                /* [T][D] normalised input of a block */
    float *out;               /* [T][D] block output */
    /* KDA */
    float *proj[3];           /* [T][P] raw q, k, v projections */
    float *qkv[3];            /* [T][P] after conv + SiLU (+ L2 norm for q, k) */
    float *gate_low;          /* [T][max rank] */
    float *forget;            /* [T][P] */
    float *out_gate;          /* [T][P] */
    float *beta;              /* [T][H] */
    float *attn;              /* [T][max(P, H*v)] pre-o_proj */
    /* MLA */
    float *q;                 /* [T][H*(nope+rope)] */
    float *kv;                /* [T][kv_lora+rope] */
    float *q_latent;          /* [T][H][kv_lora] */
    float *ctx;               /* [T][H][kv_lora] */
    float *scores;            /* [threads][max_tokens] */
    float *row;               /* [threads][max cols] decoded weight row */
    /* FFN */
    float *router;            /* [T][E] */
    int *topk;                /* [T][k] */
    float *topw;              /* [T][k] */
    float *inter_gate;        /* [T][max inter] */
    float *inter_up;          /* [T][max inter] */
    float *expert_out;        /* [T][D] */
    int *distinct;            /* [n_experts] distinct experts of a chunk */
    float *expert_results;    /* [T][K][expert width] each choice's expert output */
    k3_expert_work *workers;  /* [n_workers]: experts of a prompt chunk run in parallel */
    int n_workers;
    k3_mlp_weights *wave;     /* [n_experts] experts acquired for one wave */
    /* Kimi K3 */
    float *q_low;             /* [T][q_lora] */
    float *mla_gate;          /* [T][H*v] */
    float *latent_in;         /* [T][latent] */
    float *latent_acc;        /* [T][latent] */
    float *snapshots;         /* [T][max snapshots][D] AttnRes block snapshots */
    float *mix_scores;        /* [threads][max snapshots + 1] */
    /* A prompt span (forward_span in forward.c): more tokens than a chunk,
     * run layer by layer in chunks, so that each routed expert is read once
     * for the whole span. Only what lives from one layer to the next, or
     * across the span's chunks within a layer, is kept per span token
     * (NULL when span_tokens is 0). */
    float *span_h;            /* [S][D] residual stream */
    float *span_xn;           /* [S][D] normalised FFN input */
    float *span_x;            /* [S][latent] routed experts' input (K3); NULL: span_xn */
    float *span_acc;          /* [S][expert width] weighted sum of the routed experts */
    int *span_topk;           /* [S][k] */
    float *span_topw;         /* [S][k] */
    float *span_snapshots;    /* [S][max snapshots][D] AttnRes block snapshots */
    uint8_t *arena;           /* every buffer above lives in it (scratch.c) */
    int chunk_tokens;         /* T of the largest chunk the buffers hold */
    int span_tokens;          /* tokens of the largest span (0: a prompt runs chunk by chunk) */
} k3_scratch;

/* The chunk scratch (scratch.c): its bytes for the plan, and one arena that
 * holds every buffer, sized by the same table. span_tokens > chunk_tokens
 * adds the span buffers (else none). */
size_t k3_scratch_bytes(const k3_config *c, int n_threads, int max_tokens, int chunk_tokens, int span_tokens);
int k3_scratch_alloc(k3_scratch *sc, const k3_config *c, int n_threads, int max_tokens, int chunk_tokens,
                     int span_tokens, int huge);

/* Scratch bytes one more token of chunk costs, and one more token of span
 * (the planner sizes both from them: planner.c). */
size_t k3_scratch_bytes_per_chunk_token(const k3_config *c, int n_threads, int max_tokens);
size_t k3_scratch_bytes_per_span_token(const k3_config *c, int n_threads, int max_tokens);
void k3_scratch_free(k3_scratch *sc);

struct k3_session {
    k3_model *m;
    int n_tokens, max_tokens;
    int *tokens;              /* [max_tokens] history */
    float *kda_conv;          /* [n_kda][3][W-1][P] raw projections, oldest first */
    float *kda_state;         /* [n_kda][H][Dk][Dv] */
    /* roll-back copies of the KDA layers a chunk has updated so far (a
     * failed chunk puts them back: forward.c) */
    float *kda_conv_saved, *kda_state_saved;
    float *mla_cache;         /* [n_mla][max_tokens][kv_lora+rope]: normalised latent, k_pe */
    float *logits;            /* [vocab] after the last token */
    int has_logits;
    volatile int *interrupt; /* checked between prompt chunks */
    k3_scratch sc;
    struct k3_draft_state *draft;   /* a draft pass's KDA inputs and logits (speculate.c); NULL until the first */
};

/* Per-layer blocks. x: [T][D] normalised input; y: [T][D] output. */
/* keep_state: first copy each head's state into s->kda_state_saved (a
 * chunk's undo copy, forward.c), inside the parallel head loop. */
void k3_kda_block(k3_session *s, int layer, const k3_layer_weights *lw, int T, int keep_state);
void k3_mla_block(k3_session *s, int layer, const k3_layer_weights *lw, int T);
int k3_ffn_block(k3_session *s, int layer, const k3_layer_weights *lw, int T, k3_error *err);
/* The FFN of a MoE layer over a span, in three steps (moe.c): route each
 * chunk of it (sc->xn of T tokens from span row first), run every routed
 * expert once for the whole span (n tokens), then finish each chunk (latent
 * up-projection, shared experts: sc->out). The same operations per token as
 * k3_ffn_block, in the same order. */
void k3_ffn_span_route(k3_session *s, const k3_layer_weights *lw, int first, int T);
int k3_ffn_span_experts(k3_session *s, int layer, int n, k3_error *err);
void k3_ffn_span_finish(k3_session *s, const k3_layer_weights *lw, int first, int T);

/* Speculative decoding (speculate.c): while a draft pass runs, k3_kda_block
 * keeps every token's recurrence inputs here, so that the tokens after the
 * ones kept can be taken back by replaying the recurrence of the kept ones
 * from the state before the pass (the roll-back copy kda_*_saved, which
 * forward.c leaves holding the state from before the chunk). */
typedef struct k3_draft_state {
    int capturing;            /* 1 while a draft pass runs */
    int max_tokens;           /* tokens a pass may hold (K3_DRAFT_MAX_TOKENS) */
    size_t kda_token_floats;  /* floats kept per KDA layer per token */
    float *kda_inputs;        /* [n_kda][max_tokens][kda_token_floats]: see k3_kda_capture_layout */
    float *logits;            /* [max_tokens + 1][vocab]: the pass's rows, then the logits before it */
} k3_draft_state;

/* Floats one KDA layer keeps per token of a draft pass: q, k, v after the
 * conv (q, k normalised), the decay alpha, the raw q, k, v projections (the
 * conv history), then beta per head. */
size_t k3_kda_draft_floats(const k3_config *c);
/* Put a KDA layer (slot) back to the state of a session fed only the first
 * n_keep tokens of the last draft pass: its saved pre-chunk state, then the
 * recurrence and the conv history of those tokens replayed. */
void k3_kda_replay(k3_session *s, int slot, int n_keep);
/* Bytes of a session's draft state (counted in k3_session_bytes). */
size_t k3_draft_bytes(const k3_config *c);
void k3_draft_free(k3_draft_state *d);

/* 0 if n more tokens fit in the session's context and every id is in the
 * vocabulary; else -1 with the one-line error. Every way tokens enter a
 * session (k3_session_eval, k3_session_eval_draft) checks through here, so
 * the limits and their wording are said once. */
int k3_session_check_tokens(const k3_session *s, const int *ids, int n, k3_error *err);

/* One chunk of T <= the model's chunk_tokens tokens through all layers; a
 * span of up to span_tokens (no logits of every position) runs layer by
 * layer in chunks (forward.c). */
int k3_forward_chunk(k3_session *s, const int *ids, int T, float *all_logits, k3_error *err);

#endif
