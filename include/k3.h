/* k3.h - the engine's public interface: the only header the command line,
 * the UI and the history store include.
 *
 * A model owns the weights (through a weight provider) and the kernels'
 * threads; a session owns everything that belongs to one conversation: the
 * KDA recurrent and conv states, the MLA latent cache, the tokens so far and
 * the logits after the last token. Sessions are independent: several can
 * share one model (one at a time per thread). */
#ifndef K3_H
#define K3_H

#include <stddef.h>
#include <stdint.h>
#include "k3_error.h"
#include "k3_tokenizer.h"
#include "k3_chat_format.h"
#include "k3_sampler.h"

typedef struct k3_model k3_model;
typedef struct k3_session k3_session;

typedef struct k3_options {
    int n_threads;           /* 0 = all cores */
    int need_tokenizer;      /* 1 = fail if tokenizer files are missing */
    uint64_t mem_bytes;      /* --mem: hard budget for the process; 0 = fully resident if
                              * it fits in available memory, else derived from it */
    int io_buffered;         /* --io buffered (default: O_DIRECT) */
    int io_uring;            /* --io-backend uring (default: pread pool) */
    int io_depth;            /* reads in flight (default 4) */
    int cache_lru;           /* --cache-policy lru (default lfru: measured better on traces) */
    int ctx_tokens;          /* context limit sessions will use (default 4096) */
    const char *trace_path;  /* --trace FILE: record (token, layer, expert) */
    int prefetch;            /* --prefetch: router-lookahead reads (off by default: measured
                              * no gain on this disk, docs/PERFORMANCE.md) */
    int quiet;               /* do not print the memory plan */
} k3_options;

/* Public facts about a loaded model. */
typedef struct k3_model_info {
    char model_type[32];
    int vocab_size;
    int hidden;
    int n_layers;
    int n_kda_layers, n_mla_layers;
    int n_experts, top_k;
    int bos_id;              /* -1 if unknown */
    uint64_t weight_bytes;   /* bytes of all tensors */
} k3_model_info;

/* Open a model directory (Hugging Face layout). Tokenizer files are loaded
 * when present; with opt->need_tokenizer a missing one is an error. */
k3_model *k3_model_open(const char *dir, const k3_options *opt, k3_error *err);
void k3_model_close(k3_model *m);
void k3_model_get_info(const k3_model *m, k3_model_info *out);
/* NULL when the model directory has no tokenizer. */
const k3_tokenizer *k3_model_tokenizer(const k3_model *m);
/* Ids at which a chat answer stops: Kimi Linear <|im_end|>, [EOS], [EOT];
 * Kimi K3 <|end_of_msg|>, <|close|> (the model closing its response), [EOS],
 * [EOT] (those that exist). */
int k3_model_stop_ids(const k3_model *m, int *ids, int max_ids);
/* Render a chat in the model's own format: the K2 framing for kimi_linear,
 * XTML for kimi_k3; optionally with the generation prompt. */
int *k3_model_render_chat(const k3_model *m, const k3_chat_msg *msgs, int n_msgs,
                          int add_generation_prompt, int *n_out, k3_error *err);
/* The ids that close an assistant message after its content (Kimi Linear:
 * <|im_end|>; K3: close(response) close(message) <|end_of_msg|>). Returns
 * the count, or -1 with err set. */
int k3_model_chat_close_ids(const k3_model *m, int *ids, int max_ids, k3_error *err);

/* A new empty conversation state. max_tokens bounds the context (0 = the
 * model's planned ctx_tokens); more than the planned context is refused when
 * a memory budget is in force. */
k3_session *k3_session_new(k3_model *m, int max_tokens, k3_error *err);
void k3_session_free(k3_session *s);
/* Start over (zero states, empty cache). */
void k3_session_reset(k3_session *s);
int k3_session_n_tokens(const k3_session *s);
int k3_session_max_tokens(const k3_session *s);

/* Run n tokens through the model, appending them to the session.
 * If all_logits is non-NULL it receives [n][vocab] logits (the prediction
 * after each token); the logits after the last token are always kept in the
 * session (k3_session_logits). Prompts are processed in chunks; the result
 * equals feeding the tokens one by one. Returns 0, or -1 with err set (the
 * session is then unchanged if the failure was detected before compute,
 * e.g. an id out of range or the context full). */
int k3_session_eval(k3_session *s, const int *ids, int n, float *all_logits, k3_error *err);

/* An interrupt flag (set from a signal handler or another thread) that
 * k3_session_eval checks between prompt chunks: when set, eval stops at the
 * chunk boundary and returns K3_EVAL_INTERRUPTED; the session then holds the
 * chunks completed so far (a clean token boundary). NULL = none. */
#define K3_EVAL_INTERRUPTED 1
void k3_session_set_interrupt(k3_session *s, volatile int *flag);

/* Logits after the last evaluated token ([vocab]); NULL before any token. */
const float *k3_session_logits(const k3_session *s);


/* ---- conversation state on disk ---------------------------------------- */

/* Format version of session files; bumped whenever the layout changes. */
#define K3_SESSION_FORMAT_VERSION 1

/* A stable fingerprint of the model's weights and config (hex, NUL-terminated,
 * 16 chars): hash of config.json and of every shard's size and header. */
const char *k3_model_fingerprint(const k3_model *m);

/* Write the session (KDA conv + recurrent states, MLA latent cache of the
 * tokens so far, the token ids, the last logits) to path, with a header
 * (format version, model fingerprint, engine build, token count) and a
 * checksum. The caller handles temp files and renames. */
int k3_session_save(const k3_session *s, const char *path, k3_error *err);

/* Load a file written by k3_session_save into s (whose max_tokens must hold
 * it). A file from another model, another format version or engine build, a
 * truncated file or a checksum mismatch is refused with a message; s is then
 * left reset (empty), never half-loaded. */
int k3_session_load(k3_session *s, const char *path, k3_error *err);

/* The token ids the session holds (n = k3_session_n_tokens). */
const int *k3_session_tokens(const k3_session *s);

/* The model a session runs on. */
k3_model *k3_session_model(const k3_session *s);

/* ---- conversation state in memory ---------------------------------------- */

/* A copy of a session's state (tokens, KDA states, the used MLA cache rows,
 * the last logits) kept in memory, e.g. by a server at the end of each
 * prompt: KDA state cannot be rolled back, so work is reused by copying it.
 * Restoring into a session of the same model gives bit-identical logits. */
typedef struct k3_state k3_state;
k3_state *k3_state_capture(const k3_session *s, k3_error *err);
int k3_state_restore(k3_session *s, const k3_state *st, k3_error *err);
void k3_state_free(k3_state *st);
size_t k3_state_bytes(const k3_state *st);
size_t k3_state_bytes_for(const k3_model *m, int n_tokens);
int k3_state_n_tokens(const k3_state *st);
const int *k3_state_tokens(const k3_state *st);
/* dst takes src's state (same model; dst's context must hold it). */
int k3_session_copy(k3_session *dst, const k3_session *src, k3_error *err);

/* ---- live statistics (DESIGN §7) ----------------------------------------
 * The engine keeps these counters as it runs; any thread may read a
 * consistent-enough copy at any time without locks (each field is read
 * atomically; fields may be from slightly different instants). */

#define K3_STATS_MAX_LAYERS 128
#define K3_STATS_RECORDS 512

typedef enum { K3_PHASE_IDLE = 0, K3_PHASE_PREFILL = 1, K3_PHASE_DECODE = 2 } k3_phase;

/* One evaluation step: a decoded token, or one prompt chunk. */
typedef struct k3_token_record {
    uint64_t index;              /* 0, 1, 2, ... over the model's life */
    uint32_t n_tokens;           /* 1 for a decoded token, else the chunk size */
    uint32_t phase;              /* k3_phase */
    uint64_t bytes_trunk, bytes_experts;
    uint32_t expert_lookups, expert_hits;
    float ms;
} k3_token_record;

typedef struct k3_stats {
    /* disk reads */
    uint64_t bytes_read_trunk, bytes_read_experts, bytes_read_other;
    uint64_t read_busy_ns;       /* wall time with at least one read in flight */
    uint64_t reads_done;
    uint64_t wait_trunk_ns;      /* compute stalled waiting for trunk reads */
    uint64_t wait_experts_ns;    /* compute stalled waiting for expert reads */
    uint32_t reads_in_flight;
    /* expert cache: a hit is an expert already resident when the layer asked
     * for it; a prefetched expert that arrives in time is not a hit */
    uint64_t expert_lookups, expert_hits, expert_misses;
    uint64_t prefetch_used, prefetch_unused;
    uint32_t n_layers;
    uint64_t layer_lookups[K3_STATS_MAX_LAYERS], layer_hits[K3_STATS_MAX_LAYERS];
    /* memory, bytes */
    uint64_t budget_bytes;       /* 0 = no budget (fully resident) */
    uint64_t pinned_trunk_bytes, ring_bytes, expert_cache_bytes, state_bytes, other_bytes;
    uint64_t rss_bytes, peak_rss_bytes;
    uint32_t pinned_layers, ring_slots, expert_slots;
    /* progress */
    uint32_t phase;              /* k3_phase */
    uint32_t layer;              /* layer being computed */
    uint32_t chunk_done, chunk_total;   /* prompt tokens done / total of the current eval */
    uint64_t tokens_prefilled, tokens_decoded;
    double prefill_ms, decode_ms;       /* summed compute wall time per phase */
    /* the last K3_STATS_RECORDS evaluation steps, oldest first */
    uint64_t n_records;          /* total ever recorded */
    uint32_t n_valid;            /* records[0 .. n_valid) */
    k3_token_record records[K3_STATS_RECORDS];
} k3_stats;

void k3_stats_read(const k3_model *m, k3_stats *out);

/* The memory plan as a JSON object (budget, pinned units, ring, expert slots). */
int k3_model_plan_json(const k3_model *m, char *buf, size_t len);

/* Measure the device with the runtime's own read size and queue depth. */
int k3_model_probe_device(k3_model *m, double seconds, double *gbps, uint64_t *read_bytes, int *depth,
                          k3_error *err);

/* ---- small shared utilities ---------------------------------------------- */

/* The engine's monotonic clock, in nanoseconds (the one clock every layer uses). */
uint64_t k3_now_ns(void);

/* "8G", "512M", "1.5G", "2000000000": bytes, or -1. */
int64_t k3_parse_size(const char *s);

#endif
