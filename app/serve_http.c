/* serve_http.c - the HTTP side of `k3 serve` on libmicrohttpd (see serve.h).
 *
 * A thread per connection: a request is read (body bounded, headers bounded
 * by the connection memory limit), checked (API key, route, JSON), queued
 * for the engine, and answered either at once (non-stream) or as
 * Server-Sent Events that follow the engine token by token. A client that
 * goes away is noticed at the next write (stream) or by peeking at its
 * socket while waiting (non-stream), and its generation is halted at the
 * next token. No part of a request is ever used as a file name. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "serve.h"
#include "text_append.h"
#include "k3_util.h"

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    size_t reserved;             /* of sv->body_bytes_in_flight, given back on completion */
    int too_big;
    int too_busy;                /* the bodies in flight are at their cap: 429 */
    int http11;                  /* the request is HTTP/1.1 (may get an interim 1xx) */
} conn_ctx;

/* ---- slowloris: each connection's request must arrive within a deadline --
 * MHD's idle timeout restarts at every byte, so a byte every few seconds
 * would hold a connection for ever. Every connection is in this table from
 * accept to close; while it is reading a request (from accept, or from the
 * end of its previous answer) a watchdog thread shuts it down once
 * request_timeout_s have passed. Answering (streaming) is not bounded here. */
#define WATCH_SLOTS 1100          /* --queue's maximum 1024 + 32 connections, and spare */

typedef struct conn_watch {
    int fd;                      /* -1 = free slot */
    int reading;                 /* waiting for (more of) a request */
    uint64_t since_ns;
} conn_watch;

static conn_watch watch[WATCH_SLOTS];
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t watch_thread;
static int watch_stop;             /* set and read with __atomic */

/* MHD tells of every connection opened and closed. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    pthread_mutex_lock(&watch_mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = NULL;
        for (int i = 0; ci && i < WATCH_SLOTS; i++)
            if (watch[i].fd < 0) {
                watch[i] = (conn_watch){.fd = ci->connect_fd, .reading = 1, .since_ns = k3_now_ns()};
                *socket_context = &watch[i];
                break;
            }
    } else if (*socket_context) {
        ((conn_watch *)*socket_context)->fd = -1;
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&watch_mu);
}

/* reading 1: a request is awaited from now; 0: it has arrived. */
static void watch_mark(struct MHD_Connection *c, int reading)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn_watch *w = ci ? ci->socket_context : NULL;
    if (!w) return;
    pthread_mutex_lock(&watch_mu);
    w->reading = reading;
    w->since_ns = k3_now_ns();
    pthread_mutex_unlock(&watch_mu);
}

/* Once a second: shut down the connections whose request is overdue (MHD
 * then sees the end of the stream and closes them). */
static void *watchdog_main(void *arg)
{
    serve *sv = arg;
    const uint64_t limit_ns = (uint64_t)sv->request_timeout_s * 1000000000ull;
    while (!__atomic_load_n(&watch_stop, __ATOMIC_RELAXED)) {
        usleep(250 * 1000);
        const uint64_t now = k3_now_ns();
        pthread_mutex_lock(&watch_mu);
        for (int i = 0; i < WATCH_SLOTS; i++)
            if (watch[i].fd >= 0 && watch[i].reading && now - watch[i].since_ns > limit_ns) {
                shutdown(watch[i].fd, SHUT_RDWR);
                watch[i].reading = 0;   /* once */
            }
        pthread_mutex_unlock(&watch_mu);
    }
    return NULL;
}

/* Queue a response with a body we own (copied by MHD) and a content type. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type, const char *body,
                               const char *retry_after)
{
    const char *b = body ? body : "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned status, char *json)
{
    enum MHD_Result ok = respond(c, status, "application/json", json, NULL);
    free(json);
    return ok;
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *msg, const char *type,
                                     const char *param, const char *code, const char *retry_after)
{
    char *j = serve_json_error(msg, type, param, code);
    enum MHD_Result ok = respond(c, status, "application/json", j, retry_after);
    free(j);
    return ok;
}

enum { PEER_THERE = 0, PEER_EOF = 1, PEER_RESET = 2 };

/* What a look at the peer's side finds: nothing new (PEER_THERE), the end
 * of its stream (a close, or a half-close after its request), or a reset.
 * drain 1 (a non-stream request, which reads nothing more before
 * answering): bytes after the request are read and dropped, so a client
 * that wrote one more byte and closed still shows its end. */
static int peer_state(int fd, int drain)
{
    char b[4096];
    if (fd < 0) return PEER_THERE;
    for (int round = 0; round < 64; round++) {   /* at most 256 KiB dropped per look */
        ssize_t n = recv(fd, b, drain ? sizeof b : 1, drain ? MSG_DONTWAIT : MSG_PEEK | MSG_DONTWAIT);
        if (n == 0) return PEER_EOF;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? PEER_THERE : PEER_RESET;
        if (!drain) return PEER_THERE;
    }
    return PEER_THERE;
}

/* A stream's client is gone at the end of its stream (it reads as it goes). */
static int peer_gone(int fd) { return peer_state(fd, 0) != PEER_THERE; }

/* A non-stream client whose stream ended may have closed or only
 * half-closed (shutdown(SHUT_WR), nc -N) and still wait for the answer:
 * the two look the same until something is written. An interim
 * "100 Continue" (HTTP/1.1 clients must skip 1xx responses) is written at
 * most every 2 s: a closed client answers it with a reset, which the next
 * look sees (as the socket's error); a half-closed one reads on. HTTP/1.0 has no 1xx: its end is
 * taken as gone. Returns 1 when the client is gone. */
static int nonstream_client_gone(int fd, int http11, uint64_t *last_probe_ns)
{
    const int st = peer_state(fd, 1);
    if (st == PEER_THERE) return 0;
    if (st == PEER_RESET || !http11) return 1;
    if (*last_probe_ns) {                     /* the reset a probe drew (recv keeps saying EOF: SO_ERROR says it) */
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e) return 1;
    }
    const uint64_t now = k3_now_ns();
    if (*last_probe_ns && now - *last_probe_ns < 2000000000ull) return 0;
    *last_probe_ns = now;
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    return send(fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
}

static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* Append an SSE frame to the job's output buffer (under mu). */
static void out_put(serve_job *job, const char *a, const char *b, const char *c)
{
    const char *parts[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!parts[i]) continue;
        size_t n = strlen(parts[i]);
        if (text_append(&job->out, &job->out_len, &job->out_cap, parts[i], n)) return;
    }
}

static void out_chunk(serve_job *job, char *json)
{
    if (json) out_put(job, "data: ", json, "\n\n");
    free(json);
}

/* libmicrohttpd asks for more of the event stream: hand out what is
 * buffered, else turn new text (held back while it could still be the start
 * of a stop string) into chunks, else wait for the engine. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    serve_job *job = cls;
    serve *sv = job->sv;
    pthread_mutex_lock(&sv->mu);
    for (;;) {
        if (job->out_pos < job->out_len) {
            size_t n = job->out_len - job->out_pos < max ? job->out_len - job->out_pos : max;
            memcpy(buf, job->out + job->out_pos, n);
            job->out_pos += n;
            if (job->out_pos == job->out_len) job->out_pos = job->out_len = 0;
            job->last_write_ns = k3_now_ns();
            pthread_mutex_unlock(&sv->mu);
            return (ssize_t)n;
        }
        if (job->stream_phase == 3) {
            pthread_mutex_unlock(&sv->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (job->cancelled) {
            pthread_mutex_unlock(&sv->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (job->stream_phase == 0) {
            if (job->kind == SERVE_CHAT) out_chunk(job, serve_json_chunk(sv, job, "", 0, 1, NULL, 0));
            job->stream_phase = 1;
            continue;
        }
        const int done = job->state == JOB_DONE;
        /* a thinking answer's reasoning first (its pieces are whole UTF-8 characters) */
        size_t rsafe = job->reasoning_len;
        if (rsafe > job->reasoning_sent && !job->http_status) {
            out_chunk(job, serve_json_reasoning_chunk(sv, job, job->reasoning + job->reasoning_sent,
                                                      rsafe - job->reasoning_sent));
            job->reasoning_sent = rsafe;
            continue;
        }
        size_t safe = job->len;
        if (!done && job->max_stop_len > 0) safe = safe + 1 > job->max_stop_len ? safe + 1 - job->max_stop_len : 0;
        while (safe > job->sent && safe < job->len && (job->text[safe] & 0xC0) == 0x80) safe--;
        if (safe > job->sent && !job->http_status) {
            out_chunk(job, serve_json_chunk(sv, job, job->text + job->sent, safe - job->sent, 0, NULL, 0));
            job->sent = safe;
            continue;
        }
        if (done) {
            if (job->http_status) {
                char *e = serve_json_error(job->error, "server_error", NULL, NULL);
                out_chunk(job, e);
            } else {
                out_chunk(job, serve_json_chunk(sv, job, NULL, 0, 0, job->finish ? job->finish : "stop", 0));
                if (job->include_usage) out_chunk(job, serve_json_chunk(sv, job, NULL, 0, 0, NULL, 1));
            }
            out_put(job, "data: [DONE]\n\n", NULL, NULL);
            job->stream_phase = 3;
            continue;
        }
        cond_wait_ms(&sv->job_cv, &sv->mu, 500);
        if (job->state != JOB_DONE && peer_gone(job->conn_fd)) {
            job->cancelled = 1;
            __atomic_store_n(&job->halt, 1, __ATOMIC_RELAXED);   /* read by the engine thread */
        } else if (job->out_len == 0 && k3_now_ns() - job->last_write_ns > 5000000000ull) {
            out_put(job, ": waiting\n\n", NULL, NULL);   /* an SSE comment: keeps proxies and the peer check alive */
        }
    }
}

/* The response is gone (finished, or the client disconnected): an unfinished
 * generation is cancelled at its next token. */
static void stream_free(void *cls)
{
    serve_job *job = cls;
    serve *sv = job->sv;
    pthread_mutex_lock(&sv->mu);
    if (job->state != JOB_DONE || job->stream_phase != 3) {
        job->cancelled = 1;
        __atomic_store_n(&job->halt, 1, __ATOMIC_RELAXED);   /* read by the engine thread */
    }
    pthread_mutex_unlock(&sv->mu);
    serve_job_release(sv, job);
}

static int connection_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result generate(serve *sv, struct MHD_Connection *c, conn_ctx *cx, int kind)
{
    serve_job *job = serve_job_new();
    if (!job) return respond_error(c, 500, "out of memory", "server_error", NULL, NULL, NULL);
    job->sv = sv;
    char msg[512], param[64];
    pthread_mutex_lock(&sv->mu);              /* a parse slot: the JSON trees held at once are bounded */
    while (sv->parse_slots_free == 0) pthread_cond_wait(&sv->parse_cv, &sv->mu);
    sv->parse_slots_free--;
    pthread_mutex_unlock(&sv->mu);
    int status = kind == SERVE_CHAT ? serve_parse_chat(sv, cx->body ? cx->body : "", cx->len, job, msg, sizeof msg, param, sizeof param)
                                    : serve_parse_completion(sv, cx->body ? cx->body : "", cx->len, job, msg, sizeof msg, param,
                                                             sizeof param);
    pthread_mutex_lock(&sv->mu);
    sv->parse_slots_free++;
    pthread_cond_signal(&sv->parse_cv);
    pthread_mutex_unlock(&sv->mu);
    if (status) {
        serve_job_release(sv, job);
        return respond_error(c, (unsigned)status, msg, status == 500 ? "server_error" : "invalid_request_error", param,
                             status == 404 ? "model_not_found" : NULL, NULL);
    }
    job->conn_fd = connection_fd(c);
    if (serve_submit(sv, job)) {
        serve_job_release(sv, job);
        return respond_error(c, 429, "the server is busy: the request queue is full; retry later", "rate_limit_error",
                             NULL, "queue_full", "1");
    }
    if (job->stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, job, stream_free);
        if (!r) { stream_free(job); return MHD_NO; }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ok;
    }
    pthread_mutex_lock(&sv->mu);
    uint64_t last_probe_ns = 0;
    while (job->state != JOB_DONE) {
        cond_wait_ms(&sv->job_cv, &sv->mu, 200);
        if (job->state != JOB_DONE && !job->cancelled && nonstream_client_gone(job->conn_fd, cx->http11, &last_probe_ns)) {
            job->cancelled = 1;
            __atomic_store_n(&job->halt, 1, __ATOMIC_RELAXED);   /* read by the engine thread */
        }
    }
    const int cancelled = job->cancelled;
    pthread_mutex_unlock(&sv->mu);
    enum MHD_Result ok;
    if (cancelled) ok = MHD_NO;   /* nobody to answer: close */
    else if (job->http_status) ok = respond_error(c, (unsigned)job->http_status, job->error, "server_error", NULL, NULL, NULL);
    else ok = respond_json(c, 200, serve_json_result(sv, job));
    serve_job_release(sv, job);
    return ok;
}

/* Constant-time comparison of the presented key with ours. */
static int key_ok(serve *sv, struct MHD_Connection *c)
{
    if (!sv->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    const char *k = h + 7;
    size_t a = strlen(k), b = strlen(sv->api_key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned)(k[i] ^ sv->api_key[i]);
    return diff == 0;
}

static enum MHD_Result route(serve *sv, struct MHD_Connection *c, const char *url, const char *method, conn_ctx *cx)
{
    const int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    watch_mark(c, 0);                         /* the request is in: no deadline while it is answered */
    if (!strcmp(url, "/health")) {
        if (!get) return respond_error(c, 405, "use GET", "invalid_request_error", NULL, NULL, NULL);
        return respond(c, 200, "application/json", "{\"status\":\"ok\"}", NULL);
    }
    if (!key_ok(sv, c))
        return respond_error(c, 401, "Incorrect API key provided (send it as 'Authorization: Bearer KEY')",
                             "invalid_request_error", NULL, "invalid_api_key", NULL);
    if (cx->too_busy)
        return respond_error(c, 429, "the server is busy: too many request bodies are arriving at once; retry later",
                             "rate_limit_error", NULL, "busy", "1");
    if (cx->too_big) {
        char m[128];
        snprintf(m, sizeof m, "the request body exceeds %zu bytes", sv->max_body_bytes);
        return respond_error(c, 413, m, "invalid_request_error", NULL, NULL, NULL);
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return respond_error(c, 405, "use GET", "invalid_request_error", NULL, NULL, NULL);
        char *t = serve_metrics_text(sv);
        enum MHD_Result ok = respond(c, t ? 200 : 500, "text/plain; version=0.0.4", t ? t : "out of memory\n", NULL);
        free(t);
        return ok;
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) return respond_error(c, 405, "use GET", "invalid_request_error", NULL, NULL, NULL);
        return respond_json(c, 200, serve_json_models(sv));
    }
    if (!strncmp(url, "/v1/models/", 11)) {
        if (!get) return respond_error(c, 405, "use GET", "invalid_request_error", NULL, NULL, NULL);
        if (strcmp(url + 11, sv->model_name))
            return respond_error(c, 404, "The model does not exist on this server", "invalid_request_error", "model",
                                 "model_not_found", NULL);
        return respond_json(c, 200, serve_json_model(sv));
    }
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions")) {
        if (!post) return respond_error(c, 405, "use POST", "invalid_request_error", NULL, NULL, NULL);
        return generate(sv, c, cx, url[4] == 'c' && url[5] == 'h' ? SERVE_CHAT : SERVE_COMPLETION);
    }
    return respond_error(c, 404, "no such endpoint (this server has /v1/chat/completions, /v1/completions, "
                         "/v1/models, /health, /metrics)", "invalid_request_error", NULL, "not_found", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    serve *sv = cls;
    conn_ctx *cx = *con_cls;
    if (!cx) {
        cx = calloc(1, sizeof *cx);
        if (!cx) return MHD_NO;
        *con_cls = cx;
        cx->http11 = version && !strcmp(version, "HTTP/1.1");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > sv->max_body_bytes) cx->too_big = 1;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cx->too_big && cx->len + *upload_size > sv->max_body_bytes) {
            cx->too_big = 1;
            free(cx->body);
            cx->body = NULL;
            cx->len = cx->cap = 0;
        }
        if (!cx->too_big && !cx->too_busy) {   /* the bodies of all connections share one cap */
            pthread_mutex_lock(&sv->mu);
            if (sv->body_bytes_in_flight + *upload_size > sv->body_bytes_cap) cx->too_busy = 1;
            else { sv->body_bytes_in_flight += *upload_size; cx->reserved += *upload_size; }
            pthread_mutex_unlock(&sv->mu);
            if (cx->too_busy) {
                free(cx->body);
                cx->body = NULL;
                cx->len = cx->cap = 0;
            }
        }
        if (!cx->too_big && !cx->too_busy) {
            if (text_append(&cx->body, &cx->len, &cx->cap, upload, *upload_size)) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(sv, c, url, method, cx);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    serve *sv = cls;
    conn_ctx *cx = *con_cls;
    if (cx) {
        pthread_mutex_lock(&sv->mu);
        sv->body_bytes_in_flight -= cx->reserved;
        pthread_mutex_unlock(&sv->mu);
        free(cx->body);
        free(cx);
    }
    *con_cls = NULL;
    watch_mark(c, 1);                         /* keep-alive: the next request has its own deadline */
}

int serve_http_run(serve *sv, const char *host, int port, volatile sig_atomic_t *stop, k3_error *err)
{
    for (int i = 0; i < WATCH_SLOTS; i++) watch[i].fd = -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai) return k3_err(err, "--host %s: %s", host, gai_strerror(gai));
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, sv, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_CONNECTION_LIMIT, (unsigned)(sv->queue_max + 32),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_NOTIFY_COMPLETED, on_completed, sv,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, sv->per_address_limit, MHD_OPTION_NOTIFY_CONNECTION, on_connection, sv,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) return k3_err(err, "cannot listen on %s port %d (in use, or not an address of this machine)", host, port);
    int watching = pthread_create(&watch_thread, NULL, watchdog_main, sv) == 0;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? di->port : port;
    fprintf(stderr, "k3 serve: listening on http://%s%s%s:%d (model '%s', context %d, queue %d%s)\n",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", bound, sv->model_name, sv->ctx_tokens,
            sv->queue_max, sv->api_key ? ", API key required" : "");
    fflush(stderr);
    while (!*stop) usleep(100 * 1000);
    fprintf(stderr, "k3 serve: shutting down\n");
    serve_engine_stop(sv);   /* wakes every waiting connection */
    __atomic_store_n(&watch_stop, 1, __ATOMIC_RELAXED);
    if (watching) pthread_join(watch_thread, NULL);
    MHD_stop_daemon(d);
    return 0;
}
