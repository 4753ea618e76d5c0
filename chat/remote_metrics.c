/* remote_metrics.c - see remote_metrics.h.
 *
 * The exposition format, as servers write it: "# HELP" / "# TYPE" comments,
 * then one sample per line: name, optional {label="value",...} (values may
 * hold escaped quotes and commas), a space, the value (a float, NaN, +Inf),
 * optionally a timestamp. A counter may appear as name_total and
 * name_created; only the _total sample is a count. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "remote_metrics.h"

enum { SUM = 0, MAX = 1 };

typedef struct known {
    const char *name;        /* exact sample name */
    remote_server_kind kind;
    size_t offset;           /* of the remote_figure in remote_metrics */
    int how;
    const char *label;       /* NULL = any; else this label must be present with label_value */
    const char *label_value;
} known;

#define F(field) offsetof(remote_metrics, field)

static const known known_names[] = {
    {"vllm:num_requests_running", REMOTE_VLLM, F(running), SUM, NULL, NULL},
    {"vllm:num_requests_waiting", REMOTE_VLLM, F(waiting), SUM, NULL, NULL},
    {"vllm:kv_cache_usage_perc", REMOTE_VLLM, F(kv_usage), MAX, NULL, NULL},
    {"vllm:gpu_cache_usage_perc", REMOTE_VLLM, F(kv_usage), MAX, NULL, NULL},   /* before vLLM V1 */
    {"vllm:prefix_cache_hits_total", REMOTE_VLLM, F(prefix_hits), SUM, NULL, NULL},
    {"vllm:prefix_cache_queries_total", REMOTE_VLLM, F(prefix_queries), SUM, NULL, NULL},
    {"vllm:gpu_prefix_cache_hits_total", REMOTE_VLLM, F(gpu_prefix_hits), SUM, NULL, NULL},      /* 0.8 V1 */
    {"vllm:gpu_prefix_cache_queries_total", REMOTE_VLLM, F(gpu_prefix_queries), SUM, NULL, NULL},
    {"vllm:gpu_prefix_cache_hit_rate", REMOTE_VLLM, F(cache_hit_rate), MAX, NULL, NULL},    /* V0: a fraction */
    {"vllm:prompt_tokens_total", REMOTE_VLLM, F(prompt_tokens), SUM, NULL, NULL},
    {"vllm:generation_tokens_total", REMOTE_VLLM, F(generation_tokens), SUM, NULL, NULL},
    {"sglang:num_running_reqs", REMOTE_SGLANG, F(running), SUM, NULL, NULL},
    {"sglang:num_queue_reqs", REMOTE_SGLANG, F(waiting), SUM, NULL, NULL},
    {"sglang:token_usage", REMOTE_SGLANG, F(kv_usage), MAX, NULL, NULL},
    {"sglang:mamba_usage", REMOTE_SGLANG, F(state_usage), MAX, NULL, NULL},
    {"sglang:cached_tokens_total", REMOTE_SGLANG, F(cached_tokens), SUM, NULL, NULL},
    {"sglang:cache_hit_rate", REMOTE_SGLANG, F(cache_hit_rate), MAX, NULL, NULL},
    {"sglang:gen_throughput", REMOTE_SGLANG, F(gen_throughput), SUM, NULL, NULL},
    {"sglang:prompt_tokens_total", REMOTE_SGLANG, F(prompt_tokens), SUM, NULL, NULL},
    {"sglang:generation_tokens_total", REMOTE_SGLANG, F(generation_tokens), SUM, NULL, NULL},
    {"llamacpp:requests_processing", REMOTE_LLAMA, F(running), SUM, NULL, NULL},
    {"llamacpp:requests_deferred", REMOTE_LLAMA, F(waiting), SUM, NULL, NULL},
    {"llamacpp:kv_cache_usage_ratio", REMOTE_LLAMA, F(kv_usage), MAX, NULL, NULL},
    {"llamacpp:predicted_tokens_seconds", REMOTE_LLAMA, F(gen_throughput), MAX, NULL, NULL},
    {"llamacpp:prompt_tokens_total", REMOTE_LLAMA, F(prompt_tokens), SUM, NULL, NULL},
    {"llamacpp:tokens_predicted_total", REMOTE_LLAMA, F(generation_tokens), SUM, NULL, NULL},
    {"k3_requests_running", REMOTE_K3, F(running), SUM, NULL, NULL},
    {"k3_requests_waiting", REMOTE_K3, F(waiting), SUM, NULL, NULL},
    {"k3_prefix_cache_hits_total", REMOTE_K3, F(prefix_hits), SUM, NULL, NULL},
    {"k3_prefix_cache_queries_total", REMOTE_K3, F(prefix_queries), SUM, NULL, NULL},
    {"k3_prompt_tokens_total", REMOTE_K3, F(prompt_tokens), SUM, NULL, NULL},
    {"k3_generation_tokens_total", REMOTE_K3, F(generation_tokens), SUM, NULL, NULL},
    {"k3_bytes_read_total", REMOTE_K3, F(bytes_trunk), SUM, "kind", "trunk"},
    {"k3_bytes_read_total", REMOTE_K3, F(bytes_experts), SUM, "kind", "experts"},
    {"k3_bytes_read_total", REMOTE_K3, F(bytes_other), SUM, "kind", "other"},
    {"k3_expert_cache_lookups_total", REMOTE_K3, F(expert_lookups), SUM, NULL, NULL},
    {"k3_expert_cache_hits_total", REMOTE_K3, F(expert_hits), SUM, NULL, NULL},
    {"k3_memory_budget_bytes", REMOTE_K3, F(mem_budget), MAX, NULL, NULL},
    {"k3_memory_bytes", REMOTE_K3, F(mem_trunk), SUM, "use", "trunk"},
    {"k3_memory_bytes", REMOTE_K3, F(mem_ring), SUM, "use", "ring"},
    {"k3_memory_bytes", REMOTE_K3, F(mem_cache), SUM, "use", "expert_cache"},
    {"k3_memory_bytes", REMOTE_K3, F(mem_state), SUM, "use", "state"},
    {"k3_memory_bytes", REMOTE_K3, F(mem_other), SUM, "use", "other"},
    {"k3_rss_bytes", REMOTE_K3, F(rss), MAX, NULL, NULL},
    {"k3_engine_layer", REMOTE_K3, F(layer), MAX, NULL, NULL},
    {"k3_model_layers", REMOTE_K3, F(n_layers), MAX, NULL, NULL},
    {"k3_engine_phase", REMOTE_K3, F(phase), MAX, NULL, NULL},
};

/* Does the label block {a="x",b="y"} hold key="value"? Escapes (\" \\ \n)
 * inside values are honoured. */
static int has_label(const char *lb, const char *le, const char *key, const char *value)
{
    const char *p = lb;
    size_t kl = strlen(key), vl = strlen(value);
    while (p < le) {
        while (p < le && (*p == ' ' || *p == ',')) p++;
        const char *k = p;
        while (p < le && *p != '=') p++;
        if (p >= le || p + 1 >= le || p[1] != '"') return 0;
        size_t klen = (size_t)(p - k);
        p += 2;
        const char *v = p;
        int escaped = 0;
        while (p < le && *p != '"') {
            if (*p == '\\') { escaped = 1; p++; }
            p++;
        }
        if (p >= le) return 0;
        if (klen == kl && !memcmp(k, key, kl) && !escaped && (size_t)(p - v) == vl && !memcmp(v, value, vl)) return 1;
        p++;
    }
    return 0;
}

/* One sample line; returns 0, or -1 when it is not a sample. */
static int parse_line(const char *s, const char *e, remote_metrics *out)
{
    const char *n = s;
    while (s < e && (*s == '_' || *s == ':' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                     (s > n && *s >= '0' && *s <= '9')))
        s++;
    if (s == n) return -1;
    size_t nlen = (size_t)(s - n);
    const char *lb = NULL, *le = NULL;
    if (s < e && *s == '{') {
        lb = ++s;
        int inq = 0;
        while (s < e && (inq || *s != '}')) {
            if (inq && *s == '\\') s++;
            else if (*s == '"') inq = !inq;
            s++;
        }
        if (s >= e) return -1;
        le = s++;
    }
    if (s >= e || (*s != ' ' && *s != '\t')) return -1;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    char num[64];
    size_t k = 0;
    while (s < e && *s != ' ' && *s != '\t' && k + 1 < sizeof num) num[k++] = *s++;
    num[k] = 0;
    if (!k) return -1;
    char *end;
    double v = strtod(num, &end);
    if (*end) return -1;
    out->n_samples++;
    for (size_t i = 0; i < sizeof known_names / sizeof known_names[0]; i++) {
        const known *kn = &known_names[i];
        if (strlen(kn->name) != nlen || memcmp(kn->name, n, nlen)) continue;
        if (kn->label && (!lb || !has_label(lb, le, kn->label, kn->label_value))) continue;
        if (isnan(v)) continue;
        if (out->kind == REMOTE_UNKNOWN) out->kind = kn->kind;
        remote_figure *f = (remote_figure *)((char *)out + kn->offset);
        if (!f->have) f->v = v;
        else if (kn->how == SUM) f->v += v;
        else if (v > f->v) f->v = v;
        f->have = 1;
    }
    return 0;
}

void remote_metrics_parse(const char *text, size_t len, remote_metrics *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *s = p;
        while (s < le && (*s == ' ' || *s == '\t')) s++;
        const char *e = le;
        while (e > s && (e[-1] == '\r' || e[-1] == ' ')) e--;
        if (s < e && *s != '#' && parse_line(s, e, out)) out->n_bad_lines++;
        p = nl ? nl + 1 : end;
    }
    if (!out->prefix_hits.have && !out->prefix_queries.have) {   /* vLLM 0.8 (some versions export both names) */
        out->prefix_hits = out->gpu_prefix_hits;
        out->prefix_queries = out->gpu_prefix_queries;
    }
    if (out->kind == REMOTE_SGLANG && out->cached_tokens.have && out->prompt_tokens.have) {
        /* the gauge is the last prefill batch's (0 after any decode): the lifetime ratio instead */
        out->cache_hit_rate.have = out->prompt_tokens.v > 0;
        out->cache_hit_rate.v = out->cache_hit_rate.have ? out->cached_tokens.v / out->prompt_tokens.v : 0;
    }
    if (!out->cache_hit_rate.have && out->prefix_queries.have && out->prefix_hits.have && out->prefix_queries.v > 0) {
        out->cache_hit_rate.v = out->prefix_hits.v / out->prefix_queries.v;
        out->cache_hit_rate.have = 1;
    }
}

void remote_metrics_between(const remote_metrics *prev, remote_metrics *now, double dt_s)
{
    if (!prev || prev->kind != now->kind || dt_s <= 0) return;
    if (!now->gen_throughput.have && prev->generation_tokens.have && now->generation_tokens.have &&
        now->generation_tokens.v >= prev->generation_tokens.v) {
        now->gen_throughput.v = (now->generation_tokens.v - prev->generation_tokens.v) / dt_s;
        now->gen_throughput.have = 1;
    }
    double hits = -1, queries = 0;
    if (now->kind == REMOTE_SGLANG && prev->cached_tokens.have && now->cached_tokens.have && prev->prompt_tokens.have &&
        now->prompt_tokens.have) {
        hits = now->cached_tokens.v - prev->cached_tokens.v;
        queries = now->prompt_tokens.v - prev->prompt_tokens.v;
    } else if (prev->prefix_queries.have && now->prefix_queries.have && prev->prefix_hits.have && now->prefix_hits.have) {
        hits = now->prefix_hits.v - prev->prefix_hits.v;
        queries = now->prefix_queries.v - prev->prefix_queries.v;
    }
    if (hits < 0) return;                      /* no counters (V0's own gauge stands) or a restart */
    if (queries > 0) {
        now->cache_hit_rate.v = hits / queries;
        now->cache_hit_rate.have = 1;
    } else if (prev->cache_hit_rate.have) {    /* nothing prefilled since: the last rate stands */
        now->cache_hit_rate = prev->cache_hit_rate;
    }
}

const char *remote_server_name(remote_server_kind k)
{
    switch (k) {
    case REMOTE_VLLM: return "vLLM";
    case REMOTE_SGLANG: return "SGLang";
    case REMOTE_K3: return "k3 serve";
    case REMOTE_LLAMA: return "llama-server";
    default: return "unknown server";
    }
}

void remote_metrics_missing(const remote_metrics *m, char *buf, size_t len)
{
    /* the panel of a GPU server, or (k3 serve) the remote engine's own panel */
    struct { const remote_figure *f; const char *what; } gpu[] = {
        {&m->running, "running requests"}, {&m->waiting, "waiting requests"},
        {&m->kv_usage, "KV cache use"}, {&m->cache_hit_rate, "prefix-cache hit rate"},
        {&m->gen_throughput, "server tokens/s"},
    }, k3[] = {
        {&m->running, "running requests"}, {&m->waiting, "waiting requests"},
        {&m->cache_hit_rate, "state-reuse hit rate"}, {&m->bytes_experts, "disk reads"},
        {&m->expert_lookups, "expert cache"}, {&m->mem_budget, "memory"},
    };
    const int is_k3 = m->kind == REMOTE_K3;
    const size_t n = is_k3 ? sizeof k3 / sizeof k3[0] : sizeof gpu / sizeof gpu[0];
    size_t at = 0;
    if (len) buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const remote_figure *f = is_k3 ? k3[i].f : gpu[i].f;
        if (f->have) continue;
        int w = snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? ", " : "", is_k3 ? k3[i].what : gpu[i].what);
        if (w > 0) at += (size_t)w;
        if (at >= len) break;
    }
}

/* Append printf-style text at *at (never past len). */
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    if (*at >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n > 0) *at += (size_t)n;
}

void remote_metrics_summary(const remote_metrics *m, char *buf, size_t len)
{
    size_t at = 0;
    if (len) buf[0] = 0;
    add(buf, len, &at, "%s:", remote_server_name(m->kind));
    if (m->running.have) add(buf, len, &at, " running %.0f", m->running.v);
    if (m->waiting.have) add(buf, len, &at, ", waiting %.0f", m->waiting.v);
    if (m->kv_usage.have) add(buf, len, &at, ", KV cache %.0f%%", m->kv_usage.v * 100);
    if (m->state_usage.have) add(buf, len, &at, ", state pool %.0f%%", m->state_usage.v * 100);
    if (m->cache_hit_rate.have) add(buf, len, &at, ", %s hit %.0f%%", m->kind == REMOTE_K3 ? "state reuse" : "prefix cache",
                                    m->cache_hit_rate.v * 100);
    if (m->gen_throughput.have) add(buf, len, &at, ", %.1f tok/s", m->gen_throughput.v);
    if (m->bytes_experts.have || m->bytes_trunk.have)
        add(buf, len, &at, ", disk read %.1f MB (experts %.1f MB)",
            (m->bytes_trunk.v + m->bytes_experts.v + m->bytes_other.v) / 1e6, m->bytes_experts.v / 1e6);
    if (m->expert_lookups.have && m->expert_lookups.v > 0)
        add(buf, len, &at, ", expert cache hit %.0f%%", 100 * m->expert_hits.v / m->expert_lookups.v);
    if (m->mem_budget.have) {
        double used = m->mem_trunk.v + m->mem_ring.v + m->mem_cache.v + m->mem_state.v + m->mem_other.v;
        if (m->mem_budget.v > 0) add(buf, len, &at, ", memory %.0f of %.0f MB", used / 1e6, m->mem_budget.v / 1e6);
        else add(buf, len, &at, ", memory %.0f MB (no budget)", used / 1e6);
    }
    char missing[256];
    remote_metrics_missing(m, missing, sizeof missing);
    if (missing[0]) add(buf, len, &at, "; not available: %s", missing);
}
