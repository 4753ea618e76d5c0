/* remote.h - an OpenAI-compatible server as a chat backend (libcurl):
 * `k3 chat --endpoint URL`, `k3 run --endpoint`, `k3 bench --endpoint`.
 *
 * POST /v1/chat/completions with stream: true, read as Server-Sent Events,
 * each text delta handed on as it arrives; GET /v1/models to check or pick
 * the model; GET /metrics for the server's own figures. Every failure is one
 * line in err naming the endpoint and what went wrong: connection refused,
 * DNS, TLS, 401/403 (the key), 404 (the model), 429 (retried after the
 * server's Retry-After, at most max_retries times, each retry announced),
 * 5xx, a stream cut mid-answer, malformed SSE, no data for timeout_s.
 * What arrived before a failure or an interrupt is kept in the result. */
#ifndef K3_REMOTE_H
#define K3_REMOTE_H

#include <signal.h>
#include <stddef.h>
#include "k3.h"

typedef struct remote remote;

typedef void (*remote_text_fn)(void *user, const char *text, size_t len);

/* Only what the user set is sent: the server's own generation defaults
 * (a thinking model's temperature 1.0) stand otherwise. */
typedef struct remote_params {
    double temperature;          /* < 0 = not sent */
    double top_p;                /* <= 0 or >= 1 = not sent */
    long long seed;              /* < 0 = not sent */
    int max_tokens;              /* 0 = not sent; > 0 also stops a server that sends more */
    int timeout_s;               /* no data for this long = fail (default 120) */
    int max_retries;             /* 429 retries (default 3) */
    remote_text_fn on_reasoning; /* a thinking model's reasoning as it streams (NULL = kept in the result only) */
} remote_params;

/* Bounds on what a server can make the client hold: an endless /v1/models
 * body or answer ends with a clear error, what arrived kept. */
#define REMOTE_MODELS_MAX_BYTES (1u << 20)
#define REMOTE_ANSWER_MAX_BYTES (16u << 20)   /* answer and reasoning together */

typedef struct remote_result {
    char *text;                  /* the answer (malloc'd, NUL-terminated; partial on failure) */
    size_t len;
    char *reasoning;             /* delta.reasoning / reasoning_content (malloc'd, "" when none) */
    size_t reasoning_len;
    int n_chunks;                /* content deltas received */
    int n_reasoning_chunks;      /* reasoning deltas received */
    int length_in_reasoning;     /* finish_reason "length" before any answer text: the budget went on thinking */
    int stopped_at_max_tokens;   /* the server sent more than max_tokens pieces: k3 stopped reading */
    char tool_call[128];         /* the name of a tool the model asked for (k3 sends none), or "" */
    int prompt_tokens, completion_tokens, cached_tokens;   /* from usage; -1 if not sent */
    char finish_reason[32];      /* "" when the stream ended without one */
    int interrupted;             /* the interrupt flag ended it */
    int failed;                  /* err is set */
    int http_status;
    int retries;                 /* 429s retried */
    double ttft_ms, total_ms;    /* from sending the request */
    double tok_s;                /* completion tokens per second after the first; 0 = not measurable
                                  * (one chunk, or no usage and every piece at once) */
    int tok_s_from_server;       /* tok_s came from the server's own timings (llama-server) */
    double itl_p50_ms, itl_p90_ms;   /* gaps between content deltas */
    uint64_t bytes_in;           /* bytes of the response body */
} remote_result;

void remote_result_free(remote_result *r);

/* Called with a one-line notice (a 429 retry, ...). */
typedef void (*remote_notice_fn)(void *user, const char *line);

/* base_url: "http://host:port" or ".../v1". api_key may be NULL. */
remote *remote_open(const char *base_url, const char *api_key, k3_error *err);
void remote_close(remote *r);
/* Trust the CA certificates in this PEM file (instead of the system's) for
 * https:// endpoints; 0, or -1 with err when the file is not readable PEM. */
int remote_set_ca_cert(remote *r, const char *path, k3_error *err);
const char *remote_url(const remote *r);     /* normalised, without /v1 */

/* Check want (if not NULL) against /v1/models, or take the first model
 * listed; the chosen id goes to out. 0 or -1 with err. */
int remote_pick_model(remote *r, const char *want, char *out, size_t outlen, k3_error *err);

/* One streamed chat completion. Returns 0 (see out->interrupted) or -1 with
 * err (out still holds what arrived). */
int remote_chat(remote *r, const char *model, const k3_chat_msg *msgs, int n_msgs, const remote_params *p,
                volatile sig_atomic_t *interrupt_flag, remote_text_fn on_text, remote_notice_fn on_notice,
                void *user, remote_result *out, k3_error *err);

/* One streamed raw completion (POST /v1/completions, the prompt as is, no
 * chat template), as remote_chat. A server without /v1/completions (404)
 * gets the prompt as one user message instead, with a notice. */
int remote_complete(remote *r, const char *model, const char *prompt, const remote_params *p,
                    volatile sig_atomic_t *interrupt_flag, remote_text_fn on_text, remote_notice_fn on_notice,
                    void *user, remote_result *out, k3_error *err);

/* The shortest decimal that reads back as this float (0.7f -> 0.7, not
 * 0.699999988): what the user typed, for a request body. */
double remote_float_decimal(float v);

/* GET /metrics into a malloc'd text (NULL + err when the server has none). */
char *remote_get_metrics(remote *r, size_t *len, int timeout_s, k3_error *err);

/* Bytes received on the current stream so far (any thread; for gauges). */
uint64_t remote_bytes_in(const remote *r);

#endif
