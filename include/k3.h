/* k3.h - the engine's public interface for models, sessions and their
 * statistics. The door has three more rooms: k3_util.h (the engine's small
 * utilities the front ends share: clock, file reads and writes, hashes, test
 * hooks), k3_plan.h (k3 plan's predictor, used by app/cmd_plan.c alone) and
 * k3_offline.h (gen and pack). The command line, the UI and the history
 * store include these and nothing else of the engine.
 *
 * A model owns the weights (through a weight provider) and the kernels'
 * threads; a session owns everything that belongs to one conversation: the
 * KDA recurrent and conv states, the MLA latent cache, the tokens so far and
 * the logits after the last token. Sessions are independent: several can
 * share one model (one at a time per thread).
 *
 * Threading contract:
 *  - k3_model: serves one evaluation at a time. k3_session_eval,
 *    k3_session_new/free/reset/save/load and k3_model_probe_device of one
 *    model must not run concurrently (the weight provider's cache and ring
 *    are not locked); any one thread may do them, not only the thread that
 *    opened the model: the compute thread count is the model's
 *    (k3_options.n_threads) whichever thread evaluates. k3_model_close only
 *    when nothing else uses the model.
 *  - k3_stats_read: any thread, any time, concurrently with an evaluation
 *    (lock-free; see the statistics below).
 *  - k3_session_set_interrupt's flag: set from any thread or a signal handler.
 *  - The read-only queries (k3_model_get_info, k3_model_tokenizer,
 *    k3_model_fingerprint, k3_model_stop_ids, k3_model_render_chat,
 *    k3_model_plan_json) may run on any thread at any time.
 *  - Inside the engine, I/O threads complete reads and update the counters;
 *    they never touch a session. */
#ifndef K3_H
#define K3_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "k3_error.h"
#include "k3_tokenizer.h"
#include "k3_chat_format.h"
#include "k3_sampler.h"

typedef struct k3_model k3_model;
typedef struct k3_session k3_session;

/* Defaults written once: reads in flight (4 keep an NVMe busy with 1-4 MiB
 * expert reads, docs/PERFORMANCE.md) and the context a session plans for. */
#define K3_IO_DEPTH_DEFAULT 4
#define K3_CTX_TOKENS_DEFAULT 4096

/* Expert-cache eviction policies, named "lru" and "lfru" (--cache-policy). */
typedef enum { K3_CACHE_LRU = 0, K3_CACHE_LFRU = 1 } k3_cache_policy;
/* The policy a name means, or -1. */
int k3_cache_policy_parse(const char *s);

/* The compute threads used when k3_options.n_threads is 0: the CPUs this
 * process may run on, capped by a cgroup CPU quota (docker --cpus) rounded
 * down, at least 1 (one OpenMP thread more than the quota stalls them all at
 * every barrier). why (if not NULL) gets where the number comes from. */
int k3_default_threads(char *why, size_t why_len);

typedef struct k3_options {
    int n_threads;           /* compute threads of every evaluation, whichever thread
                              * calls k3_session_eval (0 = k3_default_threads) */
    int need_tokenizer;      /* 1 = fail if tokenizer files are missing */
    int skip_tokenizer;      /* 1 = do not load tokenizer files at all (eval, bench: ids only) */
    uint64_t mem_bytes;      /* --mem: hard budget for the process; 0 = fully resident if
                              * it fits in available memory, else derived from it */
    int io_buffered;         /* --io buffered (default: O_DIRECT) */
    int io_uring;            /* --io-backend uring (default: pread pool) */
    int io_depth;            /* reads in flight (default K3_IO_DEPTH_DEFAULT) */
    int cache_lru;           /* --cache-policy lru (default lfru: measured better on traces) */
    int ctx_tokens;          /* context limit sessions will use (default K3_CTX_TOKENS_DEFAULT) */
    const char *trace_path;  /* --trace FILE: record (token, layer, expert) */
    int no_prefetch;         /* --no-prefetch: no router-lookahead reads (on by default: its
                              * guesses queue behind the needed reads, docs/PERFORMANCE.md) */
    int chunk_tokens;        /* --chunk-tokens: tokens per prompt chunk; 0 = the largest the
                              * budget allows (k3_model_chunk_tokens says which and why) */
    int no_huge_pages;       /* --huge-pages off: large arenas on ordinary 4 KiB pages */
    int activations_q8;      /* --activations q8: MXFP4 experts and GGUF block types take int8
                              * activations per block (faster, not exact); default f32, exact */
    const char *rates_path;  /* --rates FILE: the kernel (and disk) speeds the memory plan weighs
                              * trunk against expert slots at; NULL = k3 plan's cached probes of
                              * this machine, else defaults (k3_plan_info.speeds_source says which) */
} k3_options;

/* Tokens per forward chunk: prompts run in chunks of this many, and a
 * caller that wants every position's logits needs at most this many rows at
 * a time (k3_session_eval gives the same logits however the ids are split). */
#define K3_EVAL_CHUNK_TOKENS 32

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
    int random_weights;      /* config.json says "k3_random_weights": true (k3 gen) */
    char dtype[24];          /* declared weight dtype ("bfloat16"), "" if not declared */
    int experts_mxfp4;       /* routed experts stored as MXFP4 */
    int ctx_tokens;          /* context the memory plan was made for */
    char type_label[48];     /* the weights' type as ollama and llama.cpp name a file's: the layer
                              * matrices' dtype, and the routed experts' when it differs ("BF16",
                              * "F8_E4M3", "BF16 + MXFP4 experts"); a GGUF's own file type */
} k3_model_info;

/* vocab_size from DIR/config.json alone, without opening the model (cheap):
 * for a caller that sizes its own buffers before k3_model_open, so the plan
 * counts them in the process's memory (k3 eval's chunk of logits). */
int k3_model_peek_vocab(const char *dir, int *vocab_size, k3_error *err);
/* 1 if path is a GGUF model (a .gguf file, or a folder holding one file or
 * one split set and no config.json); k3_model_open reads those too. */
int k3_model_path_is_gguf(const char *path);
/* What a GGUF model's header says, without reading its weights: model_type,
 * n_layers, n_kda_layers, n_mla_layers, n_experts, top_k, vocab_size,
 * hidden, dtype and type_label (the file's type, "Q4_K_M"), and in
 * weight_bytes the bytes of its parts. `k3 models`. 0, or -1 with err. */
int k3_model_peek_gguf(const char *path, k3_model_info *out, k3_error *err);

/* k3_model_info.type_label of the model in DIR from its tensor headers
 * alone, without opening the model (nothing of the weights is read): `k3
 * models`. 0, or -1 with err set. */
int k3_model_peek_type(const char *dir, char *out, size_t cap, k3_error *err);

/* Open a model directory (Hugging Face layout). Tokenizer files are loaded
 * when present; with opt->need_tokenizer a missing one is an error. */
k3_model *k3_model_open(const char *dir, const k3_options *opt, k3_error *err);
void k3_model_close(k3_model *m);
/* Finish the files the model writes (--trace): returns -1 with err set if a
 * write failed. Commands call it before k3_model_close so a failed trace is
 * an error exit, not a silent loss. */
int k3_model_finish(k3_model *m, k3_error *err);
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
/* The same with thinking (K3 only; k3_chat_render_xtml_think): effort
 * "low".."max", or NULL = thinking off (as k3_model_render_chat). A Kimi
 * Linear model has no thinking: an effort is an error. */
int *k3_model_render_chat_think(const k3_model *m, const k3_chat_msg *msgs, int n_msgs,
                                int add_generation_prompt, const char *effort, int *n_out, k3_error *err);
/* 1 when the model's chat format can think (Kimi K3, XTML). */
int k3_model_can_think(const k3_model *m);
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
 * equals feeding the tokens one by one. Returns 0, or -1 with err set.
 * A failure before compute (an id out of range, the context full) leaves the
 * session unchanged. A failure during compute (a read error) rolls back the
 * chunk being computed: the session then holds the tokens of the chunks
 * completed before it, with exactly the state (KDA states, MLA cache, token
 * count, logits) of a session fed only those tokens, so evaluating the rest
 * again, or saving it, is as if the error had not happened. The cost is a
 * copy of each KDA layer's state per chunk (k3_session_bytes counts it). */
int k3_session_eval(k3_session *s, const int *ids, int n, float *all_logits, k3_error *err);

/* An interrupt flag (set from a signal handler or another thread) that
 * k3_session_eval checks between prompt chunks, and between the layers of a
 * chunk of more than 32 tokens (that chunk is then undone): when set, eval
 * stops at a chunk boundary and returns K3_EVAL_INTERRUPTED; the session
 * then holds the chunks completed so far (a clean token boundary). NULL =
 * none. */
#define K3_EVAL_INTERRUPTED 1
void k3_session_set_interrupt(k3_session *s, volatile int *flag);

/* Logits after the last evaluated token ([vocab]); NULL before any token. */
const float *k3_session_logits(const k3_session *s);


/* ---- speculative decoding ---------------------------------------------- */

/* Tokens one draft pass may hold: the token just sampled and up to
 * K3_DRAFT_MAX_TOKENS - 1 drafted after it. */
#define K3_DRAFT_MAX_TOKENS 8

/* Chooses how many of a draft pass's tokens the session keeps: logits holds
 * [n][vocab], the prediction after each of ids[0..n); returns n_keep in
 * 1..n (the caller samples from the rows in order and stops at the first
 * draft token sampling would not have chosen). */
typedef int (*k3_draft_keep_fn)(void *user, const float *logits, int n, int vocab);

/* Evaluate ids[0..n) (n <= K3_DRAFT_MAX_TOKENS) in one pass over the model,
 * as k3_session_eval would with all_logits, then keep only the first n_keep
 * that keep() returns: the session ends exactly (bit for bit: state, logits,
 * token count) as a session fed only those n_keep tokens. The MLA cache is
 * simply cut; the KDA states, which cannot be cut, are put back to before the
 * pass and the recurrence of the kept tokens is replayed from the inputs the
 * pass computed (no weight is read again). Failures are as k3_session_eval's
 * (the session unchanged); keep() returning a count outside 1..n is an error
 * and leaves the session as before the pass. The pass counts in the
 * statistics as one decode step of n tokens (draft_* counters). */
int k3_session_eval_draft(k3_session *s, const int *ids, int n, k3_draft_keep_fn keep, void *user,
                          k3_error *err);

/* ---- conversation state on disk ---------------------------------------- */

/* Format version of session files; bumped whenever the layout changes. */
#define K3_SESSION_FORMAT_VERSION 1

/* A stable fingerprint of the model's weights and config (hex, NUL-terminated,
 * 16 chars): hash of config.json and of every shard's size and header. */
const char *k3_model_fingerprint(const k3_model *m);

/* The engine build's identity: "k3-engine-" and a hash of the sources that
 * decide numerics and kernel speed. Session snapshots carry it (one from
 * another build is refused); k3 plan keys its cached kernel rates by it.
 * Under --activations q8 it ends in "+q8" (other numerics). */
const char *k3_engine_build(void);

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

/* ---- live statistics (docs/ARCHITECTURE.md, "Threading contract") ----------------------------------------
 * The engine keeps these counters as it runs; any thread may read a copy
 * at any time without locks: each field is read with one atomic load, so no
 * counter is ever torn (it never goes backwards between two reads), though
 * fields may be from slightly different instants; the records are each
 * whole (a record being overwritten while copied is left out). */

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
    uint64_t resident_bytes;     /* what holding the whole model resident would take */
    uint32_t pinned_layers, ring_slots, expert_slots;
    /* progress */
    uint32_t phase;              /* k3_phase */
    uint32_t layer;              /* layer being computed */
    uint32_t chunk_done, chunk_total;   /* prompt tokens done / total of the current eval */
    uint64_t tokens_prefilled, tokens_decoded;
    double prefill_ms, decode_ms;       /* summed compute wall time per phase */
    /* speculative decoding (k3_session_eval_draft): passes, the draft tokens
     * they verified (the tokens after the first of each pass), how many of
     * those were kept */
    uint64_t draft_passes, draft_tokens, draft_kept;
    /* the last K3_STATS_RECORDS evaluation steps, oldest first */
    uint64_t n_records;          /* total ever recorded */
    uint32_t n_valid;            /* records[0 .. n_valid) */
    k3_token_record records[K3_STATS_RECORDS];
} k3_stats;

void k3_stats_read(const k3_model *m, k3_stats *out);

/* The memory plan in force, as data: the engine never prints, the front ends
 * show it (app/cli.c prints the "k3: plan:" lines when a budget is in force). */
typedef struct k3_plan_info {
    uint64_t budget_bytes;       /* 0 = no budget: the model is fully resident */
    uint64_t fixed_bytes;        /* process, session state, scratch and margin */
    uint64_t state_bytes;        /* of which one session's state + scratch */
    uint64_t min_budget_bytes;
    int ctx_tokens;              /* the context the state is sized for */
    int n_trunk, n_pinned;       /* trunk units (layers + head), of which pinned */
    uint64_t pinned_bytes;
    int n_ring;                  /* ring slots for the streamed trunk units */
    uint64_t ring_slot_bytes;
    int n_expert_slots, n_experts_total;
    uint64_t expert_slot_bytes;
    int all_resident;            /* every unit pinned and every expert cached */
    uint64_t resident_bytes;     /* what holding everything resident takes */
    char budget_source[200];     /* where a derived budget came from (a cgroup, MemAvailable); "" = --mem */
    char speeds_source[200];     /* where the speeds the split was weighed at came from */
    double disk_gbps, trunk_matvec_gbps, expert_matvec_gbps;   /* those speeds */
} k3_plan_info;
void k3_model_plan(const k3_model *m, k3_plan_info *out);

/* The memory plan as a JSON object (budget, pinned units, ring, expert slots). */
int k3_model_plan_json(const k3_model *m, char *buf, size_t len);

/* Tokens per prompt chunk this model runs (a prompt of n tokens takes
 * ceil(n / chunk) passes over the weights); why (optional) gets the reason
 * in one line. */
int k3_model_chunk_tokens(const k3_model *m, char *why, size_t why_len);

/* Bytes a prompt must read at least, for the prompts evaluated since the
 * model was opened: every distinct routed expert they chose once (none when
 * the model is fully resident: all were read at open), plus the trunk units
 * that are not pinned (read once per chunk; pinned ones were read at open). */
uint64_t k3_model_prefill_bytes_min(const k3_model *m);

/* Transparent huge pages: the kernel's mode ("always", "madvise", "never",
 * "unavailable"), whether this model asked for them, and the bytes of the
 * process on huge pages now (AnonHugePages). */
void k3_model_huge_pages(const k3_model *m, const char **mode, int *requested, uint64_t *anon_huge_bytes);

/* When experts stream, k3_model_open starts faulting the expert cache's
 * memory in from a thread that runs only when a CPU would idle: memory
 * touched for the first time is slow on a VM whose host took it back, and
 * the cache's first misses would otherwise pay that inside the answer.
 * This blocks until it is done: the bytes faulted in and the seconds since
 * open (k3 bench waits, to time the steady state apart from cold start).
 * 0 and 0 at once when fully resident or the kernel lacks
 * MADV_POPULATE_WRITE (Linux < 5.14). */
void k3_model_wait_prefault(k3_model *m, uint64_t *bytes, double *seconds);

/* The device as the runtime reads it (k3_model_probe_device). */
typedef struct k3_device_probe {
    double gbps;                 /* the sample read again, at the runtime's own depth: what the I/O floor uses */
    double first_read_gbps;      /* the sample's first reads, at the runtime's depth: pages not read lately */
    uint64_t sample_bytes;       /* bytes of the sample (its distinct pages) */
    uint64_t read_bytes;         /* bytes of one read (an expert page, or a slot) */
    int depth;                   /* the runtime's reads in flight */
    int n_depths;                /* depths measured, ascending; the last is `depth` */
    int depths[4];
    double depth_gbps[4];
    int files;                   /* files the reads were spread over */
    uint64_t bytes_total;
    double seconds;
} k3_device_probe;

/* Measure the device with the runtime's own reads: a sample of random
 * routed experts' pages (spread over every file that holds them; a model
 * without routed experts: random slot-sized reads of its largest file),
 * read once at the reader's depth for a quarter of `seconds` (the first
 * reads), then again and again at depth 1, 2 and the reader's depth for the
 * rest. Decode re-reads the pages it evicted, which a host's cache may
 * serve far faster than pages nobody read lately, so the two are apart:
 * gbps and depth_gbps are the reads again, first_read_gbps the first. On a
 * machine's own NVMe the two agree. */
int k3_model_probe_device(k3_model *m, double seconds, k3_device_probe *out, k3_error *err);

/* The trunk as the ring reads it (k3_model_probe_trunk): the trunk units
 * that stream at this budget, whole, in forward order, again and again as
 * decode reads them token after token. Decode's trunk reads meet the same
 * units each token, which a host's cache may serve far faster than the
 * random expert pages of k3_device_probe, so the two are kept apart. */
typedef struct k3_trunk_probe {
    double gbps;                 /* over the passes after the first: what decode's trunk reads get */
    double first_pass_gbps;      /* the first pass alone */
    int units;                   /* trunk units streamed (0: all pinned, nothing measured) */
    uint64_t pass_bytes;         /* bytes of one pass */
    uint64_t read_bytes;         /* buffer each read group fills (the ring slot, or a piece of it) */
    int passes;
    uint64_t bytes_total;
    double seconds;
} k3_trunk_probe;

/* Measure it with the runtime's reader into the ring's own slots (no memory
 * beyond the plan), at least two passes and `seconds`; out->units = 0 when
 * every trunk unit is pinned. */
int k3_model_probe_trunk(k3_model *m, double seconds, k3_trunk_probe *out, k3_error *err);

#endif
