/* serve.h - `k3 serve`: an OpenAI-compatible HTTP server on one engine.
 *
 * Pieces, one file each:
 *   serve_http.c     libmicrohttpd: routing, limits, auth, SSE streaming
 *   serve_request.c  request JSON -> serve_job, every field validated
 *   serve_engine.c   the one generation thread, the bounded queue, the
 *                    prompt-state cache (state reuse)
 *   serve_metrics.c  Prometheus text for /metrics
 *   cmd_serve.c      the command line
 * Connections run on their own threads (libmicrohttpd thread per
 * connection) and only queue jobs and wait on them; the engine is touched by
 * the generation thread alone. One mutex guards the queue, every job's
 * progress and the counters. */
#ifndef K3_SERVE_H
#define K3_SERVE_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "k3.h"

enum { SERVE_CHAT = 0, SERVE_COMPLETION = 1 };
enum { JOB_QUEUED = 0, JOB_RUNNING = 1, JOB_DONE = 2 };
#define SERVE_MAX_STOP 4

struct serve;

typedef struct serve_job {
    struct serve *sv;
    /* the request, fixed once queued */
    int kind, stream, include_usage;
    int ignore_eos;              /* vLLM's extension: do not stop on the model's end tokens */
    int *ids, n_ids;
    float temperature, top_p;
    int top_k;
    uint64_t seed;
    int max_tokens;
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    size_t max_stop_len;
    const char *think;           /* Kimi K3 thinking effort ("low".."max"), NULL = off */
    int think_asked;             /* parsing: -1 not said, 0 off, 1 on (chat_template_kwargs.thinking, reasoning_effort) */
    const char *effort_asked;    /* parsing: the effort the request named, or NULL */
    char id[48];
    int64_t created;
    int conn_fd;                 /* to notice a client that went away */
    uint64_t arrival_ns;
    /* progress, under serve.mu */
    int refs;                    /* the connection and the engine */
    int state;                   /* JOB_* */
    volatile sig_atomic_t halt;  /* stop generating: cancelled or a stop string */
    int cancelled;               /* the client went away */
    int stop_hit;
    char *text;
    size_t len, cap;             /* text so far (cut at a stop string) */
    char *reasoning;             /* a thinking answer's reasoning so far (reasoning_content) */
    size_t reasoning_len, reasoning_cap, reasoning_sent;
    int n_generated, cached_tokens, prefilled;
    const char *finish;          /* "stop" / "length" once done */
    int http_status;             /* != 0: failed before or during generation */
    char error[512];
    /* streaming output (connection side only) */
    char *out;
    size_t out_len, out_cap, out_pos, sent;
    int stream_phase;            /* 0 nothing sent, 1 role sent, 2 finish sent, 3 [DONE] */
    uint64_t last_write_ns;
    struct serve_job *next;
} serve_job;

/* Histogram with fixed bucket bounds (seconds), Prometheus style. */
#define SERVE_HIST_MAX 16
typedef struct serve_hist {
    int n_bounds;
    double bounds[SERVE_HIST_MAX];
    uint64_t counts[SERVE_HIST_MAX + 1];  /* per bucket, not cumulative; last = +Inf */
    double sum;
    uint64_t count;
} serve_hist;

typedef struct serve_state_entry {
    k3_state *st;
    uint64_t last_used;
} serve_state_entry;

#define SERVE_STATE_SLOTS 64

typedef struct serve {
    /* configuration */
    k3_model *model;
    char model_name[128];
    const char *api_key;         /* NULL = no auth */
    int ctx_tokens, max_tokens_limit, queue_max, n_threads;
    size_t max_body_bytes;
    size_t state_cache_bytes;    /* 0 = no state reuse */
    int state_cache_entries;
    int verbose;
    int draft;                   /* speculative decoding (chat/draft.h): the options table's default */
    const char *think;           /* --think: a request's thinking unless it says otherwise (NULL = off) */
    /* bounds on what clients can make the server hold (serve_http.c) */
    int request_timeout_s;       /* a request's headers and body must arrive within this (slowloris) */
    unsigned per_address_limit;  /* connections one client address may hold */
    size_t body_bytes_cap;       /* request bodies held at once, all connections (more: 429) */
    size_t body_bytes_in_flight; /* under mu */
    int parse_slots_free;        /* requests parsed at once (JSON trees bounded by SERVE_PARSE_BYTES each); under mu */
    pthread_cond_t parse_cv;
    /* the engine side */
    k3_session *session;
    int stop_ids[8], n_stop_ids;
    int close_ids[32], n_close;
    pthread_t worker;
    int worker_started, shutting_down;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, job_cv;
    serve_job *queue_head, *queue_tail;
    serve_job *running;          /* the job on the engine, or NULL */
    int n_waiting, n_running;
    serve_state_entry states[SERVE_STATE_SLOTS];
    size_t states_bytes;
    uint64_t use_clock;
    /* counters for /metrics (under mu) */
    uint64_t requests_ok, requests_error, requests_rejected, requests_cancelled;
    uint64_t prompt_tokens, generation_tokens, prefilled_tokens;
    uint64_t prefix_queries, prefix_hits, prefix_cached_tokens;
    serve_hist ttft, itl, e2e;
    uint64_t next_id;
} serve;

/* serve_engine.c */
int serve_engine_start(serve *sv, k3_error *err);
void serve_engine_stop(serve *sv);
/* Queue a job (refs becomes 2). Returns 0, or -1 when the queue is full. */
int serve_submit(serve *sv, serve_job *job);
/* Drop one reference (under no lock); frees the job at zero. */
void serve_job_release(serve *sv, serve_job *job);
serve_job *serve_job_new(void);

/* The request bounds and the memory they may take, counted against --mem:
 * bodies in flight (SERVE_BODIES_IN_FLIGHT of the largest) and at most
 * SERVE_PARSE_SLOTS parses at once, each a JSON tree of at most
 * SERVE_MAX_CONTAINERS containers (~512 bytes each) plus ~3x its body. */
#define SERVE_BODIES_IN_FLIGHT 4
#define SERVE_PARSE_SLOTS 2
#define SERVE_MAX_CONTAINERS (4 * 4096 + 64)
size_t serve_request_reserve_bytes(size_t max_body_bytes);

/* serve_request.c: parse and validate a body into job; 0, or the HTTP
 * status (400/404) with a message in msg and the offending field in param. */
int serve_parse_chat(serve *sv, const char *body, size_t len, serve_job *job, char *msg, size_t msglen,
                     char *param, size_t paramlen);
int serve_parse_completion(serve *sv, const char *body, size_t len, serve_job *job, char *msg, size_t msglen,
                           char *param, size_t paramlen);
/* Response bodies (malloc'd JSON text). */
char *serve_json_error(const char *msg, const char *type, const char *param, const char *code);
char *serve_json_result(serve *sv, const serve_job *job);
char *serve_json_chunk(serve *sv, const serve_job *job, const char *delta_text, size_t n, int role,
                       const char *finish, int usage_only);
/* A streamed chunk of a thinking answer's reasoning: delta.reasoning_content, as vLLM sends it. */
char *serve_json_reasoning_chunk(serve *sv, const serve_job *job, const char *text, size_t n);
char *serve_json_models(serve *sv);
char *serve_json_model(serve *sv);

/* serve_metrics.c */
void serve_hist_init(serve_hist *h, const double *bounds, int n);
void serve_hist_add(serve_hist *h, double v);
char *serve_metrics_text(serve *sv);

/* serve_http.c: run until *stop is set; 0 or -1 with err. */
int serve_http_run(serve *sv, const char *host, int port, volatile sig_atomic_t *stop, k3_error *err);

#endif
