/* remote_metrics.h - what a remote server says about itself on /metrics
 * (Prometheus text exposition format), for the gauges of `k3 chat
 * --endpoint`. Four dialects are known: vLLM (vllm:*, the names of V0,
 * 0.8 V1 and >= 0.9), SGLang (sglang:*, hybrid models' mamba_usage too),
 * llama-server (llamacpp:*) and k3 serve (k3_*); for anything else every figure is "not available"
 * and the panel says so instead of showing zeros. Samples of one name with
 * several label sets (model_name, engine, ...) are added up for counters
 * and counts, and the largest is taken for fractions. */
#ifndef K3_REMOTE_METRICS_H
#define K3_REMOTE_METRICS_H

#include <stddef.h>

typedef enum { REMOTE_UNKNOWN = 0, REMOTE_VLLM, REMOTE_SGLANG, REMOTE_K3, REMOTE_LLAMA } remote_server_kind;

typedef struct remote_figure {
    double v;
    int have;
} remote_figure;

typedef struct remote_metrics {
    remote_server_kind kind;
    int n_samples;                       /* sample lines parsed */
    int n_bad_lines;                     /* lines that are not comments or samples */
    /* every dialect (whichever it has) */
    remote_figure running, waiting;      /* requests */
    remote_figure kv_usage;              /* fraction 0..1 of the KV cache / token pool in use */
    remote_figure state_usage;           /* SGLang hybrid (Kimi Linear, K3): the KDA/mamba state pool, 0..1 */
    remote_figure cached_tokens;         /* SGLang: prompt tokens served from the radix cache (counter) */
    remote_figure prefix_hits, prefix_queries;   /* vLLM, k3: counters */
    remote_figure gpu_prefix_hits, gpu_prefix_queries;   /* vLLM 0.8's names of the same (used when the new ones are absent) */
    remote_figure cache_hit_rate;        /* SGLang: fraction; vLLM/k3: hits / queries */
    remote_figure gen_throughput;        /* tokens/s: SGLang's gauge, llama-server's average, else the
                                          * generation counter between two polls (remote_metrics_between) */
    remote_figure prompt_tokens, generation_tokens;   /* counters */
    /* k3 serve: the remote engine's disk, expert cache and memory */
    remote_figure bytes_trunk, bytes_experts, bytes_other;
    remote_figure expert_lookups, expert_hits;
    remote_figure mem_budget, mem_trunk, mem_ring, mem_cache, mem_state, mem_other, rss;
    remote_figure layer, n_layers, phase;
} remote_metrics;

/* Parse exposition text; never fails (unknown or bad lines are counted). */
void remote_metrics_parse(const char *text, size_t len, remote_metrics *out);

/* Rates from two polls dt_s apart, into now: tokens/s from the generation
 * counter when the server has no rate of its own, and the prefix-cache hit
 * rate of the prompts in between (SGLang's own gauge is per prefill batch
 * and 0 on decode logs; vLLM's counters are lifetime). With no prompt in
 * between, the hit rate of the previous poll stands. */
void remote_metrics_between(const remote_metrics *prev, remote_metrics *now, double dt_s);

/* "vLLM", "SGLang", "llama-server", "k3 serve" or "unknown server". */
const char *remote_server_name(remote_server_kind k);

/* A comma-separated list of the panel's figures this server does not give
 * (e.g. "KV cache use, prefix-cache hit rate"), "" if it gives them all. */
void remote_metrics_missing(const remote_metrics *m, char *buf, size_t len);

/* One line for a status panel: the figures this kind of server gives, then
 * "not available: ..." for those it does not. */
void remote_metrics_summary(const remote_metrics *m, char *buf, size_t len);

#endif
