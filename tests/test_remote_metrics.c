/* test_remote_metrics.c - the /metrics parsers of `k3 chat --endpoint` on
 * fixture texts in the exposition format of vLLM and SGLang (label sets
 * such as model_name and engine, counters with _total and _created,
 * histograms, look-alike names, NaN) and on k3 serve's own. */
#include <string.h>
#include "remote_metrics.h"
#include "test.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[*len] = 0;
    return buf;
}

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

int main(void)
{
    size_t len;
    remote_metrics m;
    char missing[256];

    TEST_BEGIN("remote metrics: vLLM exposition (two engines, model_name labels, _created, histograms)");
    char *t = slurp("tests/fixtures/metrics_vllm.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_VLLM, "kind %d", m.kind);
        CHECK(m.running.have && NEAR(m.running.v, 5), "running %g (want 3+2)", m.running.v);
        CHECK(m.waiting.have && NEAR(m.waiting.v, 4), "waiting %g (the _by_reason gauge must not count)", m.waiting.v);
        CHECK(m.kv_usage.have && NEAR(m.kv_usage.v, 0.4125), "kv %g (the fuller engine)", m.kv_usage.v);
        CHECK(NEAR(m.prefix_hits.v, 15000) && NEAR(m.prefix_queries.v, 20000), "hits %g queries %g (_created ignored)",
              m.prefix_hits.v, m.prefix_queries.v);
        CHECK(m.cache_hit_rate.have && NEAR(m.cache_hit_rate.v, 0.75), "hit rate %g", m.cache_hit_rate.v);
        CHECK(!m.gen_throughput.have && !m.mem_budget.have, "vLLM has no throughput gauge or k3 memory");
        CHECK(m.n_bad_lines == 0, "%d bad lines", m.n_bad_lines);
        remote_metrics_missing(&m, missing, sizeof missing);
        CHECK(!strcmp(missing, "server tokens/s"), "missing: '%s'", missing);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: SGLang exposition (token_usage, cache_hit_rate, look-alike names, NaN)");
    t = slurp("tests/fixtures/metrics_sglang.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_SGLANG, "kind %d", m.kind);
        CHECK(NEAR(m.running.v, 7) && NEAR(m.waiting.v, 3), "running %g waiting %g (num_running_reqs_extra ignored)",
              m.running.v, m.waiting.v);
        CHECK(NEAR(m.kv_usage.v, 0.91), "token_usage %g (NaN sample ignored)", m.kv_usage.v);
        CHECK(NEAR(m.cache_hit_rate.v, 0.625) && NEAR(m.gen_throughput.v, 142.5), "hit %g tps %g", m.cache_hit_rate.v,
              m.gen_throughput.v);
        CHECK(NEAR(m.prompt_tokens.v, 40960) && NEAR(m.generation_tokens.v, 1200), "tokens");
        remote_metrics_missing(&m, missing, sizeof missing);
        CHECK(!strcmp(missing, ""), "missing: '%s'", missing);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: k3 serve's own, escaped labels, an unknown server");
    const char *k3 = "# TYPE k3_bytes_read_total counter\n"
                     "k3_bytes_read_total{kind=\"trunk\"} 100\nk3_bytes_read_total{kind=\"experts\"} 2500\n"
                     "k3_expert_cache_lookups_total 40\nk3_expert_cache_hits_total 30\n"
                     "k3_memory_budget_bytes 314572800\nk3_memory_bytes{use=\"expert_cache\"} 157286400\r\n"
                     "k3_requests_running 1\nk3_requests_waiting 2\n"
                     "k3_prefix_cache_hits_total 3\nk3_prefix_cache_queries_total 4\n"
                     "k3_memory_bytes{note=\"a \\\"use\\\"=x\",use=\"trunk\"} 5 1712345678\n";
    remote_metrics_parse(k3, strlen(k3), &m);
    CHECK(m.kind == REMOTE_K3, "kind %d", m.kind);
    CHECK(NEAR(m.bytes_experts.v, 2500) && NEAR(m.bytes_trunk.v, 100) && !m.bytes_other.have, "bytes");
    CHECK(NEAR(m.expert_hits.v, 30) && NEAR(m.mem_cache.v, 157286400) && NEAR(m.mem_budget.v, 314572800), "cache/mem");
    CHECK(m.mem_trunk.have && NEAR(m.mem_trunk.v, 5), "escaped label value and timestamp: %g", m.mem_trunk.v);
    CHECK(NEAR(m.cache_hit_rate.v, 0.75) && NEAR(m.waiting.v, 2), "hit rate %g", m.cache_hit_rate.v);
    const char *other = "# TYPE tgi_queue_size gauge\ntgi_queue_size 5\nnot a sample line\n";
    remote_metrics_parse(other, strlen(other), &m);
    remote_metrics_missing(&m, missing, sizeof missing);
    CHECK(m.kind == REMOTE_UNKNOWN && m.n_bad_lines == 1 && strstr(missing, "KV cache use") &&
          strstr(missing, "running requests"), "unknown: kind %d bad %d missing '%s'", m.kind, m.n_bad_lines, missing);
    char line[512];
    remote_metrics_summary(&m, line, sizeof line);
    CHECK(strstr(line, "unknown server:") && strstr(line, "not available: running requests") && !strstr(line, " 0"),
          "unknown server summary shows zeros or no list: '%s'", line);
    remote_metrics_parse(k3, strlen(k3), &m);
    remote_metrics_summary(&m, line, sizeof line);
    CHECK(strstr(line, "k3 serve: running 1, waiting 2") && strstr(line, "expert cache hit 75%") &&
          strstr(line, "memory") && strstr(line, "of 315 MB"), "k3 summary: '%s'", line);
    TEST_END();
    /* issue 29, items 4-6: each server's real names (the fixtures cite their upstream files) */
    TEST_BEGIN("remote metrics: vLLM 0.8 V1 names (gpu_prefix_cache_* counters, gpu_cache_usage_perc)");
    t = slurp("tests/fixtures/metrics_vllm08.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_VLLM && NEAR(m.running.v, 2) && NEAR(m.waiting.v, 1), "kind %d running %g", m.kind,
              m.running.v);
        CHECK(m.kv_usage.have && NEAR(m.kv_usage.v, 0.25), "kv %g", m.kv_usage.v);
        CHECK(m.cache_hit_rate.have && NEAR(m.cache_hit_rate.v, 0.6), "hit rate %g (want 3000/5000)", m.cache_hit_rate.v);
        const char *both = "vllm:prefix_cache_hits_total 10\nvllm:prefix_cache_queries_total 40\n"
                           "vllm:gpu_prefix_cache_hits_total 10\nvllm:gpu_prefix_cache_queries_total 40\n";
        remote_metrics_parse(both, strlen(both), &m);
        CHECK(NEAR(m.prefix_hits.v, 10) && NEAR(m.cache_hit_rate.v, 0.25), "both names counted twice: hits %g",
              m.prefix_hits.v);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: vLLM V0 (gpu_prefix_cache_hit_rate gauge, no counters)");
    t = slurp("tests/fixtures/metrics_vllm_v0.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_VLLM && NEAR(m.running.v, 4) && NEAR(m.waiting.v, 6), "kind %d", m.kind);
        CHECK(m.kv_usage.have && NEAR(m.kv_usage.v, 0.5), "kv %g", m.kv_usage.v);
        CHECK(m.cache_hit_rate.have && NEAR(m.cache_hit_rate.v, 0.42), "hit rate %g (the gauge)", m.cache_hit_rate.v);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: SGLang hybrid (hit rate from cached/prompt counters, not the 0 gauge; state pool)");
    t = slurp("tests/fixtures/metrics_sglang_hybrid.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_SGLANG, "kind %d", m.kind);
        CHECK(m.cache_hit_rate.have && NEAR(m.cache_hit_rate.v, 0.75), "hit rate %g (want 3000/4000, the gauge says 0)",
              m.cache_hit_rate.v);
        CHECK(NEAR(m.kv_usage.v, 0.12) && m.state_usage.have && NEAR(m.state_usage.v, 0.85), "token pool %g state pool %g",
              m.kv_usage.v, m.state_usage.v);
        char line[512];
        remote_metrics_summary(&m, line, sizeof line);
        CHECK(strstr(line, "KV cache 12%") && strstr(line, "state pool 85%") && strstr(line, "prefix cache hit 75%"),
              "summary: '%s'", line);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: llama-server (llamacpp:* names)");
    t = slurp("tests/fixtures/metrics_llama.txt", &len);
    CHECK(t != NULL, "fixture missing");
    if (t) {
        remote_metrics_parse(t, len, &m);
        CHECK(m.kind == REMOTE_LLAMA && !strcmp(remote_server_name(m.kind), "llama-server"), "kind %d", m.kind);
        CHECK(NEAR(m.running.v, 1) && NEAR(m.waiting.v, 2), "running %g waiting %g", m.running.v, m.waiting.v);
        CHECK(NEAR(m.gen_throughput.v, 0.978767) && NEAR(m.prompt_tokens.v, 6886) && NEAR(m.generation_tokens.v, 3469),
              "tps %g prompt %g gen %g", m.gen_throughput.v, m.prompt_tokens.v, m.generation_tokens.v);
        remote_metrics_missing(&m, missing, sizeof missing);
        CHECK(!strcmp(missing, "KV cache use, prefix-cache hit rate"), "missing: '%s'", missing);
    }
    TEST_END();

    TEST_BEGIN("remote metrics: rates between two polls (vLLM tokens/s, SGLang and vLLM hit rates, an idle poll)");
    {
        remote_metrics a, b, c;
        const char *v1 = "vllm:generation_tokens_total 1000\nvllm:prefix_cache_hits_total 10\nvllm:prefix_cache_queries_total 100\n";
        const char *v2 = "vllm:generation_tokens_total 1300\nvllm:prefix_cache_hits_total 90\nvllm:prefix_cache_queries_total 200\n";
        remote_metrics_parse(v1, strlen(v1), &a);
        remote_metrics_parse(v2, strlen(v2), &b);
        CHECK(!b.gen_throughput.have, "a single poll has no rate");
        remote_metrics_between(&a, &b, 2.0);
        CHECK(b.gen_throughput.have && NEAR(b.gen_throughput.v, 150), "tok/s %g (want 300/2)", b.gen_throughput.v);
        CHECK(NEAR(b.cache_hit_rate.v, 0.8), "hit rate %g (want 80/100 between the polls)", b.cache_hit_rate.v);
        remote_metrics_parse(v2, strlen(v2), &c);
        remote_metrics_between(&b, &c, 1.0);
        CHECK(NEAR(c.cache_hit_rate.v, 0.8) && NEAR(c.gen_throughput.v, 0), "idle poll: hit %g tps %g",
              c.cache_hit_rate.v, c.gen_throughput.v);
        const char *s1 = "sglang:prompt_tokens_total 4000\nsglang:cached_tokens_total 3000\nsglang:cache_hit_rate 0\n";
        const char *s2 = "sglang:prompt_tokens_total 5000\nsglang:cached_tokens_total 3900\nsglang:cache_hit_rate 0\n";
        remote_metrics_parse(s1, strlen(s1), &a);
        remote_metrics_parse(s2, strlen(s2), &b);
        remote_metrics_between(&a, &b, 1.0);
        CHECK(NEAR(b.cache_hit_rate.v, 0.9), "SGLang hit rate %g (want 900/1000)", b.cache_hit_rate.v);
    }
    TEST_END();
    TEST_EXIT();
}
