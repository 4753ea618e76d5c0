/* serve_metrics.c - /metrics of `k3 serve` in the Prometheus text format
 * (version 0.0.4): the engine's own counters (bytes read by kind, expert
 * cache lookups and true hits, memory by use against the budget) next to
 * the server's (requests, tokens in and out, state reuse, queue, latency
 * histograms). Names carry their units, as Prometheus asks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"

void serve_hist_init(serve_hist *h, const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->n_bounds = n < SERVE_HIST_MAX ? n : SERVE_HIST_MAX;
    memcpy(h->bounds, bounds, (size_t)h->n_bounds * sizeof *bounds);
}

void serve_hist_add(serve_hist *h, double v)
{
    int b = 0;
    while (b < h->n_bounds && v > h->bounds[b]) b++;
    h->counts[b]++;
    h->sum += v;
    h->count++;
}

typedef struct text_buf {
    char *s;
    size_t len, cap;
    int failed;
} text_buf;

static void put(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *t, const char *fmt, ...)
{
    if (t->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) { t->failed = 1; return; }
        if (t->len + (size_t)n < t->cap) { t->len += (size_t)n; return; }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *g = realloc(t->s, cap);
        if (!g) { t->failed = 1; return; }
        t->s = g;
        t->cap = cap;
    }
}

static void metric(text_buf *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist(text_buf *t, const char *name, const char *help, const serve_hist *h)
{
    metric(t, name, "histogram", help);
    uint64_t cum = 0;
    for (int b = 0; b < h->n_bounds; b++) {
        cum += h->counts[b];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[b], (unsigned long long)cum);
    }
    cum += h->counts[h->n_bounds];
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
        name, (unsigned long long)h->count);
}

char *serve_metrics_text(serve *sv)
{
    k3_stats *st = malloc(sizeof *st);
    if (!st) return NULL;
    k3_stats_read(sv->model, st);
    text_buf t = {0};
    typedef unsigned long long ull;
    metric(&t, "k3_bytes_read_total", "counter", "Bytes read from disk by the weight provider, by kind.");
    put(&t, "k3_bytes_read_total{kind=\"trunk\"} %llu\nk3_bytes_read_total{kind=\"experts\"} %llu\n"
            "k3_bytes_read_total{kind=\"other\"} %llu\n",
        (ull)st->bytes_read_trunk, (ull)st->bytes_read_experts, (ull)st->bytes_read_other);
    metric(&t, "k3_reads_in_flight", "gauge", "Disk reads in flight now.");
    put(&t, "k3_reads_in_flight %u\n", st->reads_in_flight);
    metric(&t, "k3_expert_cache_lookups_total", "counter", "Routed experts a layer asked for.");
    put(&t, "k3_expert_cache_lookups_total %llu\n", (ull)st->expert_lookups);
    metric(&t, "k3_expert_cache_hits_total", "counter", "Routed experts already resident when asked for (true hits).");
    put(&t, "k3_expert_cache_hits_total %llu\n", (ull)st->expert_hits);
    metric(&t, "k3_memory_budget_bytes", "gauge", "The --mem budget (0 = none: fully resident).");
    put(&t, "k3_memory_budget_bytes %llu\n", (ull)st->budget_bytes);
    metric(&t, "k3_memory_bytes", "gauge", "Memory by use.");
    put(&t, "k3_memory_bytes{use=\"trunk\"} %llu\nk3_memory_bytes{use=\"ring\"} %llu\n"
            "k3_memory_bytes{use=\"expert_cache\"} %llu\nk3_memory_bytes{use=\"state\"} %llu\n"
            "k3_memory_bytes{use=\"other\"} %llu\n",
        (ull)st->pinned_trunk_bytes, (ull)st->ring_bytes, (ull)st->expert_cache_bytes, (ull)st->state_bytes,
        (ull)st->other_bytes);
    metric(&t, "k3_rss_bytes", "gauge", "Resident set size of the server process.");
    put(&t, "k3_rss_bytes %llu\n", (ull)st->rss_bytes);
    metric(&t, "k3_engine_phase", "gauge", "0 idle, 1 prefill, 2 decode.");
    put(&t, "k3_engine_phase %u\n", st->phase);
    metric(&t, "k3_engine_layer", "gauge", "Layer being computed.");
    put(&t, "k3_engine_layer %u\n", st->layer);
    metric(&t, "k3_model_layers", "gauge", "Layers of the served model.");
    put(&t, "k3_model_layers %u\n", st->n_layers);
    free(st);

    pthread_mutex_lock(&sv->mu);
    metric(&t, "k3_requests_total", "counter", "Finished requests by outcome.");
    put(&t, "k3_requests_total{outcome=\"ok\"} %llu\nk3_requests_total{outcome=\"error\"} %llu\n"
            "k3_requests_total{outcome=\"cancelled\"} %llu\nk3_requests_total{outcome=\"rejected\"} %llu\n",
        (ull)sv->requests_ok, (ull)sv->requests_error, (ull)sv->requests_cancelled, (ull)sv->requests_rejected);
    metric(&t, "k3_requests_running", "gauge", "Requests on the engine (at most 1).");
    put(&t, "k3_requests_running %d\n", sv->n_running);
    metric(&t, "k3_requests_waiting", "gauge", "Requests in the queue.");
    put(&t, "k3_requests_waiting %d\n", sv->n_waiting);
    metric(&t, "k3_queue_capacity", "gauge", "Queue length past which requests get 429.");
    put(&t, "k3_queue_capacity %d\n", sv->queue_max);
    metric(&t, "k3_prompt_tokens_total", "counter", "Prompt tokens of all requests.");
    put(&t, "k3_prompt_tokens_total %llu\n", (ull)sv->prompt_tokens);
    metric(&t, "k3_prefilled_tokens_total", "counter", "Prompt tokens actually computed (not restored from a kept state).");
    put(&t, "k3_prefilled_tokens_total %llu\n", (ull)sv->prefilled_tokens);
    metric(&t, "k3_generation_tokens_total", "counter", "Tokens generated.");
    put(&t, "k3_generation_tokens_total %llu\n", (ull)sv->generation_tokens);
    metric(&t, "k3_prefix_cache_queries_total", "counter", "Prompts looked up in the kept states.");
    put(&t, "k3_prefix_cache_queries_total %llu\n", (ull)sv->prefix_queries);
    metric(&t, "k3_prefix_cache_hits_total", "counter", "Prompts that started with a kept state.");
    put(&t, "k3_prefix_cache_hits_total %llu\n", (ull)sv->prefix_hits);
    metric(&t, "k3_prefix_cache_cached_tokens_total", "counter", "Prompt tokens restored from kept states.");
    put(&t, "k3_prefix_cache_cached_tokens_total %llu\n", (ull)sv->prefix_cached_tokens);
    metric(&t, "k3_prefix_cache_bytes", "gauge", "Memory held by kept states.");
    put(&t, "k3_prefix_cache_bytes %zu\n", sv->states_bytes);
    metric(&t, "k3_prefix_cache_capacity_bytes", "gauge", "Limit of the kept states (--state-cache).");
    put(&t, "k3_prefix_cache_capacity_bytes %zu\n", sv->state_cache_bytes);
    hist(&t, "k3_time_to_first_token_seconds", "From request arrival (queue included) to the first token.", &sv->ttft);
    hist(&t, "k3_time_per_output_token_seconds", "Engine time per decoded token after the first.", &sv->itl);
    hist(&t, "k3_e2e_request_latency_seconds", "From request arrival to the last token.", &sv->e2e);
    pthread_mutex_unlock(&sv->mu);
    if (t.failed) { free(t.s); return NULL; }
    return t.s;
}
