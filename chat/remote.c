/* remote.c - see remote.h. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "remote.h"
#include "text_append.h"
#include "k3_util.h"

struct remote {
    char url[1024];              /* scheme://host[:port][/prefix], no trailing /v1 */
    char *auth;                  /* "Authorization: Bearer KEY" or NULL */
    char *ca_cert;               /* --ca-cert: the CA bundle that signs the server's certificate, or NULL (the system's) */
    uint64_t bytes_in;           /* atomically updated */
};

#define ERR_BODY_MAX (64 * 1024)

remote *remote_open(const char *base_url, const char *api_key, k3_error *err)
{
    if (strncmp(base_url, "http://", 7) && strncmp(base_url, "https://", 8)) {
        k3_err(err, "--endpoint %s: expected an http:// or https:// URL", base_url);
        return NULL;
    }
    remote *r = calloc(1, sizeof *r);
    if (!r) { k3_err(err, "out of memory"); return NULL; }
    size_t n = strlen(base_url);
    if (n >= sizeof r->url) { free(r); k3_err(err, "--endpoint: the URL is too long"); return NULL; }
    memcpy(r->url, base_url, n + 1);
    while (n > 0 && r->url[n - 1] == '/') r->url[--n] = 0;
    if (n >= 3 && !strcmp(r->url + n - 3, "/v1")) r->url[n -= 3] = 0;
    if (api_key) {
        size_t len = strlen(api_key) + 32;
        r->auth = malloc(len);
        if (!r->auth) { free(r); k3_err(err, "out of memory"); return NULL; }
        snprintf(r->auth, len, "Authorization: Bearer %s", api_key);
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return r;
}

void remote_close(remote *r)
{
    if (!r) return;
    free(r->auth);
    free(r->ca_cert);
    free(r);
}

/* A CA of one's own (a self-signed or company certificate): checked here so
 * a wrong path is its own clear error, not a TLS failure later. */
int remote_set_ca_cert(remote *r, const char *path, k3_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return k3_err(err, "--ca-cert %s: %s", path, strerror(errno));
    char head[64] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = 0;
    if (!strstr(head, "-----BEGIN")) return k3_err(err, "--ca-cert %s: not a PEM certificate file", path);
    free(r->ca_cert);
    if (!(r->ca_cert = strdup(path))) return k3_err(err, "out of memory");
    return 0;
}

const char *remote_url(const remote *r) { return r->url; }
uint64_t remote_bytes_in(const remote *r) { return __atomic_load_n(&r->bytes_in, __ATOMIC_RELAXED); }

void remote_result_free(remote_result *r)
{
    free(r->text);
    free(r->reasoning);
    r->text = r->reasoning = NULL;
}

/* ---- plumbing shared by every request ---------------------------------- */

typedef struct buf {
    char *s;
    size_t len, cap, max;        /* max 0 = unbounded */
    int over;                    /* more than max arrived: the rest was dropped */
} buf;

/* Append, keeping at most max bytes (over says some were dropped). */
static int buf_add(buf *b, const char *p, size_t n)
{
    if (b->max && b->len + n > b->max) {
        n = b->len < b->max ? b->max - b->len : 0;
        b->over = 1;
    }
    return text_append(&b->s, &b->len, &b->cap, p, n);
}

/* The server's own words for an error body: error.message (OpenAI), or
 * message / detail (other servers), else the body's first line. */
static void error_text(const buf *body, char *out, size_t len)
{
    out[0] = 0;
    if (!body->len) return;
    json_error_t je;
    json_t *j = json_loadb(body->s, body->len, 0, &je);
    json_t *e = j ? json_object_get(j, "error") : NULL;
    json_t *m = json_is_object(e) ? json_object_get(e, "message") : json_is_string(e) ? e : NULL;
    if (!m && j) m = json_object_get(j, "message");
    if (!m && j) m = json_object_get(j, "detail");
    if (json_is_string(m)) snprintf(out, len, "%s", json_string_value(m));
    else {
        size_t n = strcspn(body->s, "\r\n");
        snprintf(out, len, "%.*s", (int)(n < 200 ? n : 200), body->s);
    }
    json_decref(j);
}

/* One line for a transport failure. */
static void transport_error(const remote *r, CURLcode rc, const char *curl_msg, int timeout_s, k3_error *err)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        k3_err(err, "%s: connection refused (is the server running?)", r->url);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        k3_err(err, "%s: cannot resolve the host name (DNS): %s", r->url, curl_msg);
        break;
    case CURLE_OPERATION_TIMEDOUT:
        k3_err(err, "%s: no data from the server for %d s (timeout)", r->url, timeout_s);
        break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
        k3_err(err, "%s: TLS error: %s%s", r->url, curl_msg[0] ? curl_msg : curl_easy_strerror(rc),
               rc == CURLE_PEER_FAILED_VERIFICATION && !r->ca_cert
                   ? " (the server's certificate is not trusted here: give its CA with --ca-cert FILE)" : "");
        break;
    default:
        k3_err(err, "%s: %s%s%s", r->url, curl_easy_strerror(rc), curl_msg[0] ? ": " : "", curl_msg);
    }
}

/* One line for an HTTP error status, with the server's message. */
static void status_error(const remote *r, long status, const buf *body, k3_error *err)
{
    char msg[400];
    error_text(body, msg, sizeof msg);
    const char *hint = status == 401 || status == 403 ? " (check the key: --api-key-env VAR)"
                       : status == 404                ? " (check --model and the URL)"
                       : status >= 500                ? " (server error)"
                                                      : "";
    k3_err(err, "%s: HTTP %ld: %s%s", r->url, status, msg[0] ? msg : "(no message)", hint);
}

static CURL *easy_for(const remote *r, const char *path, struct curl_slist **hdrs, char *errbuf, int timeout_s)
{
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    char url[1200];
    snprintf(url, sizeof url, "%s%s", r->url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(timeout_s > 0 ? timeout_s : 120));
    curl_easy_setopt(c, CURLOPT_USERAGENT, "k3");
    if (r->ca_cert) curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_cert);
    *hdrs = NULL;
    if (r->auth) *hdrs = curl_slist_append(*hdrs, r->auth);
    errbuf[0] = 0;
    return c;
}

/* A whole response body, refused (the transfer aborted) past its bound. */
static size_t collect(char *p, size_t sz, size_t n, void *u)
{
    buf *b = u;
    return buf_add(b, p, sz * n) || b->over ? 0 : sz * n;
}

/* GET path into a buffer; 0, or -1 with err. */
static int get_text(remote *r, const char *path, int timeout_s, buf *out, long *status, k3_error *err)
{
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdrs;
    CURL *c = easy_for(r, path, &hdrs, errbuf, timeout_s);
    if (!c) return k3_err(err, "out of memory");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)(timeout_s > 0 ? timeout_s : 30));
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (out->over) return k3_err(err, "%s%s: the response is larger than %zu bytes: refused", r->url, path, out->max);
    if (rc != CURLE_OK) {
        transport_error(r, rc, errbuf, timeout_s, err);
        return -1;
    }
    return 0;
}

int remote_pick_model(remote *r, const char *want, char *out, size_t outlen, k3_error *err)
{
    buf b = {.max = REMOTE_MODELS_MAX_BYTES};
    long status = 0;
    if (get_text(r, "/v1/models", 30, &b, &status, err)) { free(b.s); return -1; }
    if (status != 200) {
        status_error(r, status, &b, err);
        free(b.s);
        return -1;
    }
    json_error_t je;
    json_t *j = json_loadb(b.s ? b.s : "", b.len, 0, &je);
    json_t *data = json_object_get(j, "data");
    int rc = 0;
    if (!json_is_array(data)) {
        rc = k3_err(err, "%s/v1/models: not an OpenAI model list", r->url);
    } else if (want) {
        size_t i;
        json_t *m;
        int found = 0;
        char names[300] = "";
        json_array_foreach(data, i, m) {
            const char *id = json_string_value(json_object_get(m, "id"));
            if (id && !strcmp(id, want)) found = 1;
            if (id && strlen(names) + strlen(id) + 3 < sizeof names) {
                if (names[0]) strcat(names, ", ");
                strcat(names, id);
            }
        }
        if (!found) rc = k3_err(err, "%s: the server has no model '%s' (it has: %s)", r->url, want, names[0] ? names : "none");
        else snprintf(out, outlen, "%s", want);
    } else {
        const char *id = json_string_value(json_object_get(json_array_get(data, 0), "id"));
        if (!id) rc = k3_err(err, "%s/v1/models: the server lists no model", r->url);
        else snprintf(out, outlen, "%s", id);
    }
    json_decref(j);
    free(b.s);
    return rc;
}

char *remote_get_metrics(remote *r, size_t *len, int timeout_s, k3_error *err)
{
    buf b = {.max = 4 << 20};
    long status = 0;
    if (get_text(r, "/metrics", timeout_s, &b, &status, err)) { free(b.s); return NULL; }
    if (status != 200) {
        k3_err(err, "%s/metrics: HTTP %ld", r->url, status);
        free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s ? b.s : strdup("");
}

/* ---- the streamed chat --------------------------------------------------- */

typedef struct stream {
    remote *r;
    CURL *c;
    remote_result *out;
    remote_text_fn on_text;
    void *user;
    volatile sig_atomic_t *interrupt_flag;
    const remote_params *p;
    remote_notice_fn on_notice;
    buf line, text, reasoning, errbody;
    int done, malformed, server_error;
    int stopped;                 /* k3 stopped reading (max_tokens reached): not a failure */
    char problem[400];
    uint64_t t0_ns, first_ns, last_ns;
    double *gaps;
    int n_gaps, cap_gaps;
    char retry_after[32];
} stream;

/* The stream's pieces are bounded: past max_tokens pieces (the server
 * ignored max_tokens) or REMOTE_ANSWER_MAX_BYTES k3 stops reading and keeps
 * what arrived. */
static int over_bounds(stream *s)
{
    const int max_tokens = s->p->max_tokens;
    if (max_tokens > 0 && s->out->n_chunks + s->out->n_reasoning_chunks >= max_tokens) {
        s->out->stopped_at_max_tokens = 1;
        snprintf(s->out->finish_reason, sizeof s->out->finish_reason, "length");
        return 1;
    }
    if (s->text.len + s->reasoning.len >= REMOTE_ANSWER_MAX_BYTES) {
        s->malformed = 1;
        snprintf(s->problem, sizeof s->problem, "the answer is larger than %u MiB: stopped (what arrived is kept)",
                 REMOTE_ANSWER_MAX_BYTES >> 20);
        return 1;
    }
    return 0;
}

/* One piece of answer (is_reasoning 0) or reasoning (1): timed (the first
 * of either is the TTFT), kept, handed on. */
static void take_piece(stream *s, json_t *value, int is_reasoning)
{
    if (s->done || s->malformed) return;
    if (over_bounds(s)) { s->stopped = s->done = !s->malformed; return; }
    const char *piece = json_string_value(value);
    size_t n = json_string_length(value);
    char *clean = NULL;
    if (n && memchr(piece, 0, n)) {   /* a U+0000 in the answer: shown and stored as U+FFFD */
        clean = malloc(n * 3 + 1);
        size_t k = 0;
        for (size_t i = 0; clean && i < n; i++) {
            if (piece[i]) clean[k++] = piece[i];
            else { memcpy(clean + k, "\xef\xbf\xbd", 3); k += 3; }
        }
        if (clean) { clean[k] = 0; piece = clean; n = k; }
        else n = 0;
    }
    if (n) {
        uint64_t now = k3_now_ns();
        if (!s->first_ns) s->first_ns = now;
        else {
            if (s->n_gaps == s->cap_gaps) {
                int cap = s->cap_gaps ? s->cap_gaps * 2 : 256;
                double *g = realloc(s->gaps, (size_t)cap * sizeof *g);
                if (g) { s->gaps = g; s->cap_gaps = cap; }
            }
            if (s->n_gaps < s->cap_gaps) s->gaps[s->n_gaps++] = (now - s->last_ns) * 1e-6;
        }
        s->last_ns = now;
        if (is_reasoning) {
            buf_add(&s->reasoning, piece, n);
            s->out->n_reasoning_chunks++;
            if (s->p->on_reasoning) s->p->on_reasoning(s->user, piece, n);
        } else {
            buf_add(&s->text, piece, n);
            s->out->n_chunks++;
            if (s->on_text) s->on_text(s->user, piece, n);
        }
    }
    free(clean);
}

static void on_event(stream *s, const char *data)
{
    if (!strcmp(data, "[DONE]")) { s->done = 1; return; }
    json_error_t je;
    json_t *j = json_loads(data, JSON_ALLOW_NUL, &je);   /* "\u0000" is valid JSON text */
    if (!json_is_object(j)) {
        s->malformed = 1;
        snprintf(s->problem, sizeof s->problem, "malformed event stream: not a JSON object: '%.60s'", data);
        json_decref(j);
        return;
    }
    json_t *e = json_object_get(j, "error");
    if (e) {
        buf b = {0};
        buf_add(&b, data, strlen(data));
        char msg[300];
        error_text(&b, msg, sizeof msg);
        free(b.s);
        s->server_error = 1;
        snprintf(s->problem, sizeof s->problem, "the server reported an error mid-stream: %s", msg);
        json_decref(j);
        return;
    }
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *delta = json_object_get(ch, "delta");
    /* reasoning first: vLLM >= 0.10 "reasoning", older vLLM, SGLang and
     * llama-server "reasoning_content" (a chunk may carry both names) */
    json_t *thought = json_object_get(delta, "reasoning");
    if (!json_is_string(thought) || !json_string_length(thought)) thought = json_object_get(delta, "reasoning_content");
    if (json_is_string(thought) && json_string_length(thought)) take_piece(s, thought, 1);
    json_t *calls = json_object_get(delta, "tool_calls");
    if (json_is_array(calls) && json_array_size(calls) && !s->out->tool_call[0]) {
        const char *name = json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name"));
        snprintf(s->out->tool_call, sizeof s->out->tool_call, "%s", name && *name ? name : "(unnamed)");
    }
    json_t *content = json_object_get(delta, "content");
    if (!json_is_string(content)) content = json_object_get(ch, "text");
    if (json_is_string(content) && json_string_length(content)) take_piece(s, content, 0);
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    if (fr) snprintf(s->out->finish_reason, sizeof s->out->finish_reason, "%s", fr);
    json_t *u = json_object_get(j, "usage");
    if (json_is_object(u)) {
        json_t *pt = json_object_get(u, "prompt_tokens"), *ct = json_object_get(u, "completion_tokens");
        json_t *cached = json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
        if (json_is_integer(pt)) s->out->prompt_tokens = (int)json_integer_value(pt);
        if (json_is_integer(ct)) s->out->completion_tokens = (int)json_integer_value(ct);
        if (json_is_integer(cached)) s->out->cached_tokens = (int)json_integer_value(cached);
    }
    /* llama-server's own decode rate (tools/server/server.cpp, "timings") */
    json_t *pps = json_object_get(json_object_get(j, "timings"), "predicted_per_second");
    if (json_is_number(pps) && json_number_value(pps) > 0) {
        s->out->tok_s = json_number_value(pps);
        s->out->tok_s_from_server = 1;
    }
    json_decref(j);
}

static void on_line(stream *s, char *l, size_t n)
{
    if (n && l[n - 1] == '\r') l[--n] = 0;
    if (n == 0 || l[0] == ':') return;                          /* event end, comment */
    if (!strncmp(l, "data:", 5)) {
        on_event(s, l[5] == ' ' ? l + 6 : l + 5);
    } else if (strncmp(l, "event:", 6) && strncmp(l, "id:", 3) && strncmp(l, "retry:", 6)) {
        s->malformed = 1;
        snprintf(s->problem, sizeof s->problem, "malformed event stream: unexpected line '%.60s'", l);
    }
}

static size_t on_body(char *p, size_t sz, size_t nm, void *u)
{
    stream *s = u;
    size_t n = sz * nm;
    s->out->bytes_in += n;
    __atomic_add_fetch(&s->r->bytes_in, n, __ATOMIC_RELAXED);
    long status = 0;
    curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) return buf_add(&s->errbody, p, n) ? 0 : n;
    for (size_t i = 0; i < n && !s->malformed && !s->server_error && !s->stopped; i++) {
        if (p[i] != '\n') {
            if (s->line.len > (4u << 20)) {
                s->malformed = 1;
                snprintf(s->problem, sizeof s->problem, "malformed event stream: a line longer than 4 MiB");
                break;
            }
            buf_add(&s->line, p + i, 1);
            continue;
        }
        on_line(s, s->line.s ? s->line.s : (char *)"", s->line.len);
        s->line.len = 0;
        if (s->line.s) s->line.s[0] = 0;
    }
    return s->malformed || s->server_error || s->stopped ? 0 : n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *u)
{
    stream *s = u;
    size_t n = sz * nm;
    if (n > 12 && !strncasecmp(p, "Retry-After:", 12)) {
        size_t k = 12;
        while (k < n && p[k] == ' ') k++;
        size_t e = k;
        while (e < n && p[e] >= '0' && p[e] <= '9') e++;
        snprintf(s->retry_after, sizeof s->retry_after, "%.*s", (int)(e - k), p + k);
    }
    return n;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a; (void)b; (void)c; (void)d;
    stream *s = u;
    return s->interrupt_flag && __atomic_load_n(s->interrupt_flag, __ATOMIC_RELAXED);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* See remote.h: the fewest significant digits (1 to 9) that read back as
 * the same float, so the server gets what was typed. */
double remote_float_decimal(float v)
{
    char text[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, (double)v);
        double d = strtod(text, NULL);
        if ((float)d == v) return d;
    }
    return (double)v;
}

/* The request: a chat (msgs) or a raw completion (prompt), streamed, with
 * only the sampling the user set. */
static char *request_body(const char *model, const k3_chat_msg *msgs, int n_msgs, const char *prompt,
                          const remote_params *p)
{
    json_t *j = json_pack("{s:s, s:b, s:{s:b}}", "model", model, "stream", 1, "stream_options", "include_usage", 1);
    if (!j) return NULL;
    if (prompt) {
        json_object_set_new(j, "prompt", json_string(prompt));
    } else {
        json_t *arr = json_array();
        for (int i = 0; i < n_msgs; i++)
            json_array_append_new(arr, json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content));
        json_object_set_new(j, "messages", arr);
    }
    if (p->temperature >= 0) json_object_set_new(j, "temperature", json_real(remote_float_decimal((float)p->temperature)));
    if (p->top_p > 0 && p->top_p < 1) json_object_set_new(j, "top_p", json_real(remote_float_decimal((float)p->top_p)));
    if (p->seed >= 0) json_object_set_new(j, "seed", json_integer(p->seed));
    if (p->max_tokens > 0) json_object_set_new(j, "max_tokens", json_integer(p->max_tokens));
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(j);
    return s;
}

/* Sleep seconds, waking early on an interrupt; 1 if interrupted. */
static int nap(int seconds, volatile sig_atomic_t *flag)
{
    for (int i = 0; i < seconds * 10; i++) {
        if (flag && __atomic_load_n(flag, __ATOMIC_RELAXED)) return 1;
        usleep(100 * 1000);
    }
    return flag && __atomic_load_n(flag, __ATOMIC_RELAXED);
}

/* The decode rate, or 0 when it cannot be measured: the server's own
 * figure when it gave one; else the tokens after the first piece over the
 * time they took, only when they came as 3 or more pieces over 1 ms or
 * more (an answer in one or two chunks has no rate to see). */
static double measured_tok_s(const remote_result *out, uint64_t first_ns, uint64_t last_ns)
{
    if (out->tok_s_from_server) return out->tok_s;
    const int pieces = out->n_chunks + out->n_reasoning_chunks;
    const double span_s = (last_ns - first_ns) * 1e-9;
    if (pieces < 3 || span_s < 0.001) return 0;
    const int tokens = out->completion_tokens > 0 ? out->completion_tokens : pieces;
    return tokens * (double)(pieces - 1) / pieces / span_s;
}

/* Both kinds of request: POST path with body, streamed into out. */
static int stream_request(remote *r, const char *path, char *body, const remote_params *p,
                          volatile sig_atomic_t *interrupt_flag, remote_text_fn on_text, remote_notice_fn on_notice,
                          void *user, remote_result *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    out->prompt_tokens = out->completion_tokens = out->cached_tokens = -1;
    const int timeout_s = p->timeout_s > 0 ? p->timeout_s : 120;
    const int max_retries = p->max_retries >= 0 ? p->max_retries : 3;
    if (!body) { out->failed = 1; out->text = strdup(""); out->reasoning = strdup(""); return k3_err(err, "out of memory"); }
    stream s = {.r = r, .out = out, .on_text = on_text, .user = user, .interrupt_flag = interrupt_flag, .p = p,
                .on_notice = on_notice};
    int rc = 0;
    const uint64_t t_start = k3_now_ns();
    for (int attempt = 0;; attempt++) {
        char errbuf[CURL_ERROR_SIZE];
        struct curl_slist *hdrs;
        s.c = easy_for(r, path, &hdrs, errbuf, timeout_s);
        if (!s.c) { rc = k3_err(err, "out of memory"); break; }
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
        curl_easy_setopt(s.c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(s.c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(s.c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(s.c, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(s.c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(s.c, CURLOPT_HEADERDATA, &s);
        curl_easy_setopt(s.c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(s.c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(s.c, CURLOPT_XFERINFODATA, &s);
        s.errbody.len = 0;
        s.errbody.max = ERR_BODY_MAX;
        s.retry_after[0] = 0;
        s.t0_ns = k3_now_ns();
        CURLcode cc = curl_easy_perform(s.c);
        long status = 0;
        curl_easy_getinfo(s.c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(s.c);
        curl_slist_free_all(hdrs);
        out->http_status = (int)status;
        if (cc == CURLE_ABORTED_BY_CALLBACK) { out->interrupted = 1; break; }
        if (s.stopped) break;        /* max_tokens pieces arrived: the answer is complete as asked */
        if (s.malformed || s.server_error) { rc = k3_err(err, "%s: %s", r->url, s.problem); break; }
        if (cc != CURLE_OK && status == 200 && s.first_ns) {
            rc = k3_err(err, "%s: the stream was cut mid-answer (%d pieces received): %s", r->url, out->n_chunks,
                        cc == CURLE_OPERATION_TIMEDOUT ? "no data for the timeout" : curl_easy_strerror(cc));
            break;
        }
        if (cc != CURLE_OK && status == 0) { transport_error(r, cc, errbuf, timeout_s, err); rc = -1; break; }
        if (cc != CURLE_OK && status == 200) { transport_error(r, cc, errbuf, timeout_s, err); rc = -1; break; }
        if (status == 429 && attempt < max_retries) {
            int wait_s = s.retry_after[0] ? atoi(s.retry_after) : 1 << attempt;
            if (wait_s < 1) wait_s = 1;
            if (wait_s > 60) wait_s = 60;
            char note[1200];
            snprintf(note, sizeof note, "%s: busy (HTTP 429): retrying in %d s (retry %d of %d)", r->url, wait_s,
                     attempt + 1, max_retries);
            if (on_notice) on_notice(user, note);
            out->retries++;
            if (nap(wait_s, interrupt_flag)) { out->interrupted = 1; break; }
            continue;
        }
        if (status != 200) {
            status_error(r, status, &s.errbody, err);
            if (status == 429) {
                size_t l = strlen(err->msg);
                snprintf(err->msg + l, sizeof err->msg - l, " (gave up after %d retries)", out->retries);
            }
            rc = -1;
            break;
        }
        if (!s.done && !out->finish_reason[0]) {
            rc = k3_err(err, "%s: the stream was cut mid-answer (%d pieces received, no finish and no [DONE])", r->url,
                        out->n_chunks);
            break;
        }
        break;
    }
    const uint64_t t_end = k3_now_ns();
    out->failed = rc != 0;
    out->text = s.text.s ? s.text.s : strdup("");
    out->len = s.text.len;
    out->reasoning = s.reasoning.s ? s.reasoning.s : strdup("");
    out->reasoning_len = s.reasoning.len;
    if (!strcmp(out->finish_reason, "length") && !out->n_chunks && out->n_reasoning_chunks) out->length_in_reasoning = 1;
    if (out->stopped_at_max_tokens && on_notice) {
        char note[1200];
        snprintf(note, sizeof note, "%s: the server sent more than max_tokens %d pieces: stopped reading there", r->url,
                 p->max_tokens);
        on_notice(user, note);
    }
    if (out->tool_call[0] && on_notice) {
        char note[1400];
        snprintf(note, sizeof note, "%s: the model asked to call the tool '%s', but k3 offers no tools: %s", r->url,
                 out->tool_call, out->n_chunks ? "only its text is shown" : "there is no answer text");
        on_notice(user, note);
    }
    out->total_ms = (t_end - t_start) * 1e-6;
    out->ttft_ms = s.first_ns ? (s.first_ns - s.t0_ns) * 1e-6 : 0;
    out->tok_s = s.first_ns ? measured_tok_s(out, s.first_ns, s.last_ns) : out->tok_s_from_server ? out->tok_s : 0;
    if (s.n_gaps) {
        qsort(s.gaps, (size_t)s.n_gaps, sizeof *s.gaps, cmp_double);
        out->itl_p50_ms = s.gaps[(s.n_gaps - 1) / 2];
        out->itl_p90_ms = s.gaps[(int)((s.n_gaps - 1) * 0.9)];
    }
    free(s.gaps);
    free(s.line.s);
    free(s.errbody.s);
    free(body);
    return rc;
}

int remote_chat(remote *r, const char *model, const k3_chat_msg *msgs, int n_msgs, const remote_params *p,
                volatile sig_atomic_t *interrupt_flag, remote_text_fn on_text, remote_notice_fn on_notice,
                void *user, remote_result *out, k3_error *err)
{
    return stream_request(r, "/v1/chat/completions", request_body(model, msgs, n_msgs, NULL, p), p, interrupt_flag,
                          on_text, on_notice, user, out, err);
}

int remote_complete(remote *r, const char *model, const char *prompt, const remote_params *p,
                    volatile sig_atomic_t *interrupt_flag, remote_text_fn on_text, remote_notice_fn on_notice,
                    void *user, remote_result *out, k3_error *err)
{
    int rc = stream_request(r, "/v1/completions", request_body(model, NULL, 0, prompt, p), p, interrupt_flag, on_text,
                            on_notice, user, out, err);
    if (rc == 0 || out->http_status != 404 || out->n_chunks) return rc;
    if (on_notice) {
        char note[1200];
        snprintf(note, sizeof note, "%s: no /v1/completions (HTTP 404): the prompt goes as one chat message instead",
                 r->url);
        on_notice(user, note);
    }
    remote_result_free(out);
    k3_chat_msg msg = {"user", prompt, NULL};
    return remote_chat(r, model, &msg, 1, p, interrupt_flag, on_text, on_notice, user, out, err);
}
