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
    TEST_EXIT();
}
