/* cmd_bench.c - `k3 bench`: prompt and decode speed under a memory budget,
 * with the disk measured in the same run.
 *
 * Passes (each on a freshly opened model, so none inherits another's cache):
 *   1. the prompt token by token (bytes read: what chunking saves; not with
 *      --no-token-by-token),
 *   2. the prompt in chunks, then N greedy decode steps (the figures),
 *      once the engine has faulted the expert cache's memory in (it starts
 *      at open; the wait is reported as cache_prefault, cold start),
 *   2a. unless --no-warm-prompt, another prompt of the same length on the
 *      same model: prefill with the weights the first one read already in
 *      memory (cold start and steady state apart: the first prompt pays the
 *      reads and the first touch of every arena page),
 *   3. unless --no-probe, the device: the runtime's own read size and depth,
 *      read into the expert cache's own slots (no memory beyond the plan),
 *   4. unless --no-resident, the same decode fully resident, for floor_ratio:
 *      only when holding everything fits in the same limit as pass 2 (--mem,
 *      else the limit the engine derived from the cgroup or MemAvailable);
 *      otherwise resident_s_per_token is null and the reason is given.
 * Every pass stays within that one limit, so `k3 bench --mem X` inside a
 * cgroup of X is not killed. Peak RSS is taken after pass 2. The figures of
 * pass 2 are printed as soon as they are measured (the text report line by
 * line; with --json a summary line on stderr, then one JSON object at the
 * end), so a later pass that fails cannot lose them. Benchmarks are figures,
 * not tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "remote_cli.h"
#include "k3.h"
#include "options.h"
#include "generate.h"
#include "bench_draft.h"

typedef struct bench_options {
    const char *model_dir;
    int tokens, prompt_tokens, json, probe, resident, token_by_token, warm_prompt;
    int draft_rounds;                /* speculative decoding pass: rounds of none/ngram/oracle (0 = --no-draft) */
    double resident_s_per_token;     /* given instead of measured (--resident-s-per-token) */
    k3_options model;
} bench_options;

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 bench [MODEL] [--mem SIZE] [--tokens N] [--prompt-tokens P] [--json] [options]\n\n"
               "Runs a P-token prompt and N decode steps and reports\n"
               "decode_s_per_token, prefill_tokens_per_s, bytes_read_per_token (total, trunk, experts),\n"
               "read_gbps, device_gbps (measured now with the same read size and depth), trunk_gbps (the\n"
               "trunk ring's own reads timed after the run: the units that stream, pass after pass), true_hit_rate,\n"
               "peak_rss_bytes, budget_bytes, the plan, io_floor_s_per_token and floor_ratio.\n");
    cli_print_options(f, OPTS_BENCH | OPTS_MODEL);
    fprintf(f, "\nk3 bench --endpoint URL [--requests N] [--tokens N] [--prompt TEXT] [--json]: N chat requests\n"
               "(default 5, greedy, N tokens each, default 64) to an OpenAI-compatible server, one after another;\n"
               "reports TTFT p50/p90, tokens/s and inter-token latency p50/p90.\n");
    cli_print_options(f, OPTS_REMOTE | OPTS_BENCH_REMOTE);
}

/* Deterministic prompt ids spread over the vocabulary (no specials). */
static int *make_prompt_seeded(int n, int vocab, uint64_t seed)
{
    int *ids = malloc((size_t)n * sizeof *ids);
    uint64_t x = seed;
    int range = vocab > 512 ? vocab - 258 : vocab;
    for (int i = 0; i < n && ids; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[i] = (int)(x % (uint64_t)range);
    }
    return ids;
}

/* The benchmark's prompt: the same ids run after run. */
static int *make_prompt(int n, int vocab)
{
    return make_prompt_seeded(n, vocab, 0x2545F4914F6CDD1Dull);
}

static int argmax(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

/* CPU seconds of the whole process (every thread): on a shared machine the
 * wall time counts other tenants' turns on the cores, this does not. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct decode_figures {
    double prefill_s, decode_s;
    double prefill_cpu_s, decode_cpu_s;
    uint64_t prefill_bytes, decode_trunk, decode_experts, decode_other;
    uint64_t decode_lookups, decode_hits, read_busy_ns, wait_trunk_ns, wait_experts_ns;
    uint64_t prefetch_used, prefetch_unused;
    uint64_t prefill_bytes_min;      /* distinct experts of the prompt + unpinned trunk (k3.h) */
} decode_figures;

/* Prefill (chunked, or one token at a time), then `tokens` greedy steps. */
static int run_pass(k3_model *m, const int *prompt, int n_prompt, int tokens, int token_by_token,
                    decode_figures *f, k3_error *err)
{
    k3_model_info info;
    k3_model_get_info(m, &info);
    k3_session *s = k3_session_new(m, n_prompt + tokens + 1, err);
    if (!s) return -1;
    k3_stats a, b;
    k3_stats_read(m, &a);
    double t0 = (k3_now_ns() / 1e9), c0 = cpu_s();
    int rc = 0;
    if (token_by_token)
        for (int i = 0; i < n_prompt && rc == 0; i++) rc = k3_session_eval(s, prompt + i, 1, NULL, err);
    else
        rc = k3_session_eval(s, prompt, n_prompt, NULL, err);
    f->prefill_s = (k3_now_ns() / 1e9) - t0;
    f->prefill_cpu_s = cpu_s() - c0;
    k3_stats_read(m, &b);
    f->prefill_bytes = (b.bytes_read_trunk + b.bytes_read_experts + b.bytes_read_other) -
                       (a.bytes_read_trunk + a.bytes_read_experts + a.bytes_read_other);
    f->prefill_bytes_min = k3_model_prefill_bytes_min(m);
    t0 = (k3_now_ns() / 1e9);
    c0 = cpu_s();
    for (int i = 0; i < tokens && rc == 0; i++) {
        int next = argmax(k3_session_logits(s), info.vocab_size);
        rc = k3_session_eval(s, &next, 1, NULL, err);
    }
    f->decode_s = (k3_now_ns() / 1e9) - t0;
    f->decode_cpu_s = cpu_s() - c0;
    k3_stats_read(m, &a);
    f->decode_trunk = a.bytes_read_trunk - b.bytes_read_trunk;
    f->decode_experts = a.bytes_read_experts - b.bytes_read_experts;
    f->decode_other = a.bytes_read_other - b.bytes_read_other;
    f->decode_lookups = a.expert_lookups - b.expert_lookups;
    f->decode_hits = a.expert_hits - b.expert_hits;
    f->read_busy_ns = a.read_busy_ns - b.read_busy_ns;
    f->wait_trunk_ns = a.wait_trunk_ns - b.wait_trunk_ns;
    f->wait_experts_ns = a.wait_experts_ns - b.wait_experts_ns;
    f->prefetch_used = a.prefetch_used - b.prefetch_used;
    f->prefetch_unused = a.prefetch_unused - b.prefetch_unused;
    k3_session_free(s);
    return rc;
}

/* The table's bench and model rows; one positional MODEL. */
static int parse(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof *o);
    cli_settings set;
    cli_settings_defaults(&set);
    set.model.skip_tokenizer = 1;  /* bench feeds ids: the tokenizer is not needed */
    int n_args;
    if (cli_parse_args("bench", argc, argv, OPTS_BENCH | OPTS_MODEL, &set, &o->model_dir, 1, &n_args)) return -1;
    const cli_bench_settings *b = &set.bench;
    o->model = set.model;
    o->tokens = b->tokens;
    o->prompt_tokens = b->prompt_tokens;
    o->json = set.json;
    o->probe = !b->no_probe;
    o->token_by_token = !b->no_token_by_token;
    o->resident = !b->no_resident;
    o->warm_prompt = !b->no_warm_prompt;
    o->resident_s_per_token = b->resident_s_per_token;
    o->draft_rounds = b->draft_rounds;
    if (!o->model_dir) o->model_dir = cli_default_model();
    o->model.ctx_tokens = o->prompt_tokens + o->tokens + 1;
    return 0;
}

/* The device probe as JSON: the runtime-depth figure and each depth's (the
 * sample read again), and the sample's first reading. */
static void device_probe_json(char *dst, size_t len, const k3_device_probe *p)
{
    size_t o = (size_t)snprintf(dst, len,
                                "{\"gbps\":%.3f,\"first_read_gbps\":%.3f,\"sample_bytes\":%llu,\"seconds\":%.2f,"
                                "\"files\":%d,\"depths\":{",
                                p->gbps, p->first_read_gbps, (unsigned long long)p->sample_bytes, p->seconds, p->files);
    for (int i = 0; i < p->n_depths && o < len; i++)
        o += (size_t)snprintf(dst + o, len - o, "%s\"%d\":%.3f", i ? "," : "", p->depths[i], p->depth_gbps[i]);
    if (o < len) snprintf(dst + o, len - o, "}}");
}

/* JSON string body: the reasons are ours, but paths may hold quotes. */
static void json_escape(char *dst, size_t len, const char *src)
{
    size_t o = 0;
    for (; *src && o + 7 < len; src++) {
        unsigned char ch = (unsigned char)*src;
        if (ch == '"' || ch == '\\') { dst[o++] = '\\'; dst[o++] = (char)ch; }
        else if (ch < 0x20) o += (size_t)snprintf(dst + o, len - o, "\\u%04x", ch);
        else dst[o++] = (char)ch;
    }
    dst[o] = 0;
}

/* The speculative decoding fields of the JSON object (no braces around):
 * draft_accept_rate and tokens_per_pass are --draft ngram's; "draft" holds
 * every mode's figures; null when not measured. */
/* "verify_pass_cost": what a draft pass of k tokens costs against a plain
 * step, wall and CPU time (bench_draft_pass_cost); null with --no-draft or
 * when it could not be measured. */
static void print_pass_cost_json(const bench_draft_cost *cost, int have)
{
    if (!have) {
        printf(",\"verify_pass_cost\":null");
        return;
    }
    printf(",\"verify_pass_cost\":{\"reps\":%d,\"step_ms\":%.4f,\"step_cpu_ms\":%.4f,\"pass_over_step\":[", cost->reps,
           cost->ms[0], cost->cpu_ms[0]);
    for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf("%s%.3f", k > 1 ? "," : "", cost->ms[k] / cost->ms[0]);
    printf("],\"pass_over_step_cpu\":[");
    for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf("%s%.3f", k > 1 ? "," : "", cost->cpu_ms[k] / cost->cpu_ms[0]);
    printf("]}");
}

static void print_draft_json(const bench_draft_figures *dr, int have, const char *failed)
{
    if (!have) {
        char why[1300];
        json_escape(why, sizeof why, failed[0] ? failed : "--no-draft");
        printf(",\"draft_accept_rate\":null,\"tokens_per_pass\":null,\"draft\":null,\"draft_not_measured\":\"%s\"", why);
        return;
    }
    const bench_draft_mode *modes[3] = {&dr->none, &dr->ngram, &dr->oracle};
    const char *names[3] = {"none", "ngram", "oracle"};
    const double none_tok_s = bench_draft_tok_s(dr, &dr->none);
    printf(",\"draft_accept_rate\":%.4f,\"tokens_per_pass\":%.3f", dr->ngram.drafted ? (double)dr->ngram.kept / dr->ngram.drafted : 0,
           dr->ngram.passes ? (double)(dr->tokens - 1) * dr->rounds / dr->ngram.passes : 0);
    printf(",\"draft\":{\"prompt_tokens\":%d,\"tokens\":%d,\"rounds\":%d,\"identical\":%s", dr->prompt_tokens, dr->tokens,
           dr->rounds, dr->identical ? "true" : "false");
    for (int i = 0; i < 3; i++) {
        const double tok_s = bench_draft_tok_s(dr, modes[i]);
        printf(",\"%s\":{\"tok_per_s\":%.3f,\"speedup\":%.3f,\"accept_rate\":%.4f,\"tokens_per_pass\":%.3f,"
               "\"bytes_read_per_token\":%.0f}", names[i],
               tok_s, none_tok_s > 0 ? tok_s / none_tok_s : 0,
               modes[i]->drafted ? (double)modes[i]->kept / modes[i]->drafted : 0,
               modes[i]->passes ? (double)(dr->tokens - 1) * dr->rounds / modes[i]->passes : 0,
               (double)modes[i]->bytes_read / ((double)(dr->tokens - 1) * dr->rounds));
    }
    printf("}");
}

int cmd_bench(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    for (int i = 1; i < argc; i++)   /* a remote server: no model to load (cmd_run_remote.c) */
        if (!strcmp(argv[i], "--endpoint")) return cmd_bench_remote(argc, argv);
    bench_options o;
    if (parse(argc, argv, &o)) return K3_EXIT_USAGE;
    char model_dir_buf[4096];
    if (!(o.model_dir = cli_model_dir(o.model_dir, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;
    k3_error err;
    k3_model *m = NULL;
    int *prompt = NULL, rc = 0;
    decode_figures tbt = {0}, main_pass = {0}, resident = {0};
    if (o.token_by_token) {               /* pass 1: token by token */
        m = k3_model_open(o.model_dir, &o.model, &err);
        if (!m) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
        k3_model_info info;
        k3_model_get_info(m, &info);
        prompt = make_prompt(o.prompt_tokens, info.vocab_size);
        rc = prompt ? run_pass(m, prompt, o.prompt_tokens, 0, 1, &tbt, &err) : k3_err(&err, "out of memory");
        if (rc == 0) rc = k3_model_finish(m, &err);
        k3_model_close(m);
        if (rc) { cli_error("%s", err.msg); free(prompt); return K3_EXIT_ERROR; }
    }
    /* pass 2: chunked prompt + decode */
    k3_options main_opt = o.model;
    const double open_t0 = k3_now_ns() / 1e9;   /* cold start: reads and first touch of every arena */
    m = k3_model_open(o.model_dir, &main_opt, &err);
    const double open_s = k3_now_ns() / 1e9 - open_t0;
    if (!m) { cli_error("%s", err.msg); free(prompt); return K3_EXIT_ERROR; }
    if (!prompt) {
        k3_model_info info;
        k3_model_get_info(m, &info);
        if (!(prompt = make_prompt(o.prompt_tokens, info.vocab_size))) {
            cli_error("out of memory");
            k3_model_close(m);
            return K3_EXIT_ERROR;
        }
    }
    if (!o.json) cli_print_plan(m);
    /* the expert cache's memory, faulted in by the engine from open on
     * while the CPU idles: waited for here, so the first touch (slow on a
     * VM whose host took the memory back) is cold start, not decode */
    uint64_t prefault_bytes;
    double prefault_s;
    k3_model_wait_prefault(m, &prefault_bytes, &prefault_s);
    if (!o.json && prefault_bytes)
        printf("memory     expert cache faulted in at open: %.1f MiB in %.2f s (%.2f GB/s), before the timed passes\n",
               prefault_bytes / 1048576.0, prefault_s, prefault_s > 0 ? prefault_bytes / prefault_s / 1e9 : 0);
    /* the device before the run (and again after it): the host's caches
     * and other tenants move it from one minute to the next */
    k3_device_probe probe_before = {0}, probe_after = {0};
    char probe_failed[600] = "";
    if (o.probe && k3_model_probe_device(m, 1.0, &probe_before, &err))
        snprintf(probe_failed, sizeof probe_failed, "%s", err.msg);
    rc = run_pass(m, prompt, o.prompt_tokens, o.tokens, 0, &main_pass, &err);
    if (rc) { cli_error("%s", err.msg); k3_model_close(m); free(prompt); return K3_EXIT_ERROR; }
    k3_stats st;
    k3_stats_read(m, &st);
    char plan[1024];
    k3_model_plan_json(m, plan, sizeof plan);
    const double n = o.tokens;
    const double s_per_token = main_pass.decode_s / n;
    const double bytes_per_token = (main_pass.decode_trunk + main_pass.decode_experts + main_pass.decode_other) / n;
    const double read_gbps = main_pass.read_busy_ns ? (main_pass.decode_trunk + main_pass.decode_experts + main_pass.decode_other) /
                                                      (main_pass.read_busy_ns * 1e-9) / 1e9 : 0;
    const double hit = main_pass.decode_lookups ? (double)main_pass.decode_hits / main_pass.decode_lookups : 1.0;
    if (o.json) {
        fprintf(stderr, "k3: bench: decode %.6f s/token, prefill %.2f tok/s, %.0f bytes read/token, peak RSS %llu bytes\n",
                s_per_token, o.prompt_tokens / main_pass.prefill_s, bytes_per_token,
                (unsigned long long)st.peak_rss_bytes);
    } else {
        printf("kernels    %s\n", k3_kernels_name());
        printf("decode     %.4f s/token (%.2f tok/s), prefill %.1f tok/s\n", s_per_token, 1.0 / s_per_token,
               o.prompt_tokens / main_pass.prefill_s);
        char why[256];
        printf("prefill    %.5f s/token in chunks of %d tokens (%s)\n", main_pass.prefill_s / o.prompt_tokens,
               k3_model_chunk_tokens(m, why, sizeof why), why);
        printf("prefill    read %.1f MB (least possible %.1f MB)", main_pass.prefill_bytes / 1e6,
               main_pass.prefill_bytes_min / 1e6);
        if (o.token_by_token) printf(" vs %.1f MB token by token", tbt.prefill_bytes / 1e6);
        printf("\n");
        printf("cache      true hit rate %.1f%%; prefetched and used %llu, unused %llu\n", hit * 100,
               (unsigned long long)main_pass.prefetch_used, (unsigned long long)main_pass.prefetch_unused);
        printf("memory     peak RSS %.1f MiB, budget %.1f MiB\n", st.peak_rss_bytes / 1048576.0,
               st.budget_bytes / 1048576.0);
        printf("per token  waiting for experts %.4f s, for trunk %.4f s, computing %.4f s; disk busy %.4f s\n",
               main_pass.wait_experts_ns * 1e-9 / n, main_pass.wait_trunk_ns * 1e-9 / n,
               s_per_token - (main_pass.wait_experts_ns + main_pass.wait_trunk_ns) * 1e-9 / n,
               main_pass.read_busy_ns * 1e-9 / n);
        fflush(stdout);
    }
    /* pass 2a: a second prompt (other ids, same length) on the warmed model */
    decode_figures warm = {0};
    char warm_failed[600] = "";
    if (o.warm_prompt) {
        k3_model_info info;
        k3_model_get_info(m, &info);
        int *warm_prompt = make_prompt_seeded(o.prompt_tokens, info.vocab_size, 0x9E3779B97F4A7C15ull);
        if (!warm_prompt) snprintf(warm_failed, sizeof warm_failed, "out of memory");
        else if (run_pass(m, warm_prompt, o.prompt_tokens, 0, 0, &warm, &err))
            snprintf(warm_failed, sizeof warm_failed, "%s", err.msg);
        free(warm_prompt);
        if (!o.json && !warm_failed[0])
            printf("prefill    warm (a second prompt, weights already read): %.5f s/token, %.5f CPU s/token, read %.1f MB\n",
                   warm.prefill_s / o.prompt_tokens, warm.prefill_cpu_s / o.prompt_tokens, warm.prefill_bytes / 1e6);
        else if (!o.json)
            printf("prefill    warm not measured: %s\n", warm_failed);
        fflush(stdout);
    }
    /* pass 2b: speculative decoding, side by side on the same model */
    bench_draft_figures dr = {0};
    char draft_failed[600] = "";
    if (o.draft_rounds && o.tokens > 1 && o.prompt_tokens >= 3 &&
        bench_draft(m, prompt, o.prompt_tokens * 2 / 3, o.tokens, o.draft_rounds, &dr, &err))
        snprintf(draft_failed, sizeof draft_failed, "%s", err.msg);
    const int have_draft = o.draft_rounds && dr.rounds && !draft_failed[0];
    if (!o.json && have_draft) {
        printf("draft      %d rounds alternating, %d-token repetitive prompt, %d tokens: none %.2f tok/s; ngram %.2f tok/s "
               "(%d of %d drafted kept, %.2f tokens/pass); oracle %.2f tok/s (%.2f tokens/pass); "
               "read %.1f / %.1f / %.1f MB/token; %s\n",
               dr.rounds, dr.prompt_tokens, dr.tokens, bench_draft_tok_s(&dr, &dr.none), bench_draft_tok_s(&dr, &dr.ngram),
               dr.ngram.kept, dr.ngram.drafted, dr.ngram.passes ? (double)(dr.tokens - 1) * dr.rounds / dr.ngram.passes : 0,
               bench_draft_tok_s(&dr, &dr.oracle),
               dr.oracle.passes ? (double)(dr.tokens - 1) * dr.rounds / dr.oracle.passes : 0,
               dr.none.bytes_read / 1e6 / ((dr.tokens - 1) * dr.rounds), dr.ngram.bytes_read / 1e6 / ((dr.tokens - 1) * dr.rounds),
               dr.oracle.bytes_read / 1e6 / ((dr.tokens - 1) * dr.rounds), dr.identical ? "tokens identical" : "TOKENS DIFFER");
        fflush(stdout);
    } else if (!o.json && draft_failed[0]) {
        printf("draft      not measured: %s\n", draft_failed);
    }
    bench_draft_cost cost = {0};
    char cost_failed[600] = "";
    const int measure_cost = o.draft_rounds && o.tokens > 1 && o.prompt_tokens >= 3;   /* as the draft pass */
    if (measure_cost && bench_draft_pass_cost(m, prompt, o.prompt_tokens, o.prompt_tokens + o.tokens + 1,   /* the draft pass's context */
                                          2 * o.draft_rounds + 1, &cost, &err))
        snprintf(cost_failed, sizeof cost_failed, "%s", err.msg);
    if (!o.json && measure_cost && !cost_failed[0]) {
        printf("verify     pass of k tokens / plain step (%.3f ms), median of %d alternating:", cost.ms[0], cost.reps);
        for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf(" k=%d %.2f", k, cost.ms[k] / cost.ms[0]);
        printf("; CPU time (%.3f ms):", cost.cpu_ms[0]);
        for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf(" k=%d %.2f", k, cost.cpu_ms[k] / cost.cpu_ms[0]);
        printf("\n");
        fflush(stdout);
    } else if (!o.json && cost_failed[0]) {
        printf("verify     not measured: %s\n", cost_failed);
    }
    /* pass 3: the device again, into the model's own expert slots; the
     * floor uses the faster of the two figures (the lower floor), so a
     * ratio below 1 means the probe missed what the run got */
    if (o.probe && !probe_failed[0] && k3_model_probe_device(m, 1.0, &probe_after, &err))
        snprintf(probe_failed, sizeof probe_failed, "%s", err.msg);
    /* pass 3b: the trunk as the ring reads it, right after decode read it
     * the same way (k3 plan --disk-trunk takes this figure) */
    k3_trunk_probe trunk_probe = {0};
    char trunk_failed[600] = "";
    if (o.probe && k3_model_probe_trunk(m, 1.0, &trunk_probe, &err))
        snprintf(trunk_failed, sizeof trunk_failed, "%s", err.msg);
    else if (o.probe && !trunk_probe.units)
        snprintf(trunk_failed, sizeof trunk_failed, "every trunk unit is pinned at this budget: the ring reads nothing");
    double device_gbps = 0, device_spread = 0;
    if (!probe_failed[0] && o.probe) {
        const double lo = probe_before.gbps < probe_after.gbps ? probe_before.gbps : probe_after.gbps;
        device_gbps = probe_before.gbps > probe_after.gbps ? probe_before.gbps : probe_after.gbps;
        device_spread = lo > 0 ? device_gbps / lo : 0;
    }
    const uint64_t probe_bytes = probe_after.read_bytes;
    const int probe_depth = probe_after.depth;
    char huge_mode_buf[32];
    const char *huge_mode;
    int huge_requested;
    uint64_t anon_huge_bytes;
    k3_model_huge_pages(m, &huge_mode, &huge_requested, &anon_huge_bytes);
    snprintf(huge_mode_buf, sizeof huge_mode_buf, "%s", huge_mode);
    char chunk_why[256];
    const int chunk_tokens = k3_model_chunk_tokens(m, chunk_why, sizeof chunk_why);
    k3_error trace_err;
    int trace_failed = k3_model_finish(m, &trace_err) != 0;   /* a failed --trace write is an error exit */
    k3_model_close(m);
    if (!o.json) {
        printf("reads      %.2f MB/token (trunk %.2f, experts %.2f) at %.2f GB/s; ", bytes_per_token / 1e6,
               main_pass.decode_trunk / n / 1e6, main_pass.decode_experts / n / 1e6, read_gbps);
        if (probe_failed[0]) printf("device not measured: %s\n", probe_failed);
        else if (o.probe)
            printf("device %.2f GB/s reading a sample again (before the run %.2f, after %.2f, spread x%.2f); "
                   "its first reading %.3g / %.3g GB/s\n", device_gbps, probe_before.gbps, probe_after.gbps,
                   device_spread, probe_before.first_read_gbps, probe_after.first_read_gbps);
        else printf("device not measured (--no-probe)\n");
        if (trunk_failed[0]) printf("trunk      not measured: %s\n", trunk_failed);
        else if (o.probe)
            printf("trunk      %.2f GB/s as the ring reads it (%d units, %.1f MB a pass, %d passes in %.1f s; "
                   "first pass %.2f GB/s)\n", trunk_probe.gbps, trunk_probe.units, trunk_probe.pass_bytes / 1e6,
                   trunk_probe.passes, trunk_probe.seconds, trunk_probe.first_pass_gbps);
        fflush(stdout);
    }
    /* pass 4: fully resident decode, only within the same limit */
    double resident_s = o.resident_s_per_token;
    char resident_why[600] = "";
    if (o.resident) {
        const uint64_t limit = o.model.mem_bytes ? o.model.mem_bytes : st.budget_bytes;
        if (limit && st.resident_bytes > limit) {
            snprintf(resident_why, sizeof resident_why,
                     "fully resident needs %.1f MiB, over the %.1f MiB limit of this run", st.resident_bytes / 1048576.0,
                     limit / 1048576.0);
        } else {
            k3_options res_opt = {.skip_tokenizer = 1, .n_threads = o.model.n_threads, .ctx_tokens = o.model.ctx_tokens,
                                  .mem_bytes = limit};
            k3_model *r = k3_model_open(o.model_dir, &res_opt, &err);
            k3_stats rs;
            if (!r) {
                snprintf(resident_why, sizeof resident_why, "%s", err.msg);
            } else {
                k3_stats_read(r, &rs);
                if (rs.budget_bytes && rs.budget_bytes < rs.resident_bytes)
                    snprintf(resident_why, sizeof resident_why,
                             "fully resident needs %.1f MiB, over the %.1f MiB limit of this run",
                             rs.resident_bytes / 1048576.0, rs.budget_bytes / 1048576.0);
                else if (run_pass(r, prompt, o.prompt_tokens, o.tokens, 0, &resident, &err) == 0)
                    resident_s = resident.decode_s / o.tokens;
                else
                    snprintf(resident_why, sizeof resident_why, "%s", err.msg);
                k3_model_close(r);
            }
        }
    } else if (!resident_s) {
        snprintf(resident_why, sizeof resident_why, "--no-resident");
    }
    free(prompt);
    const double floor_s = device_gbps > 0 ? bytes_per_token / (device_gbps * 1e9) : 0;
    const double denom = floor_s > resident_s ? floor_s : resident_s;
    const double ratio = denom > 0 ? s_per_token / denom : 0;
    /* decode faster than its own floor: the floor was wrong, not the run */
    char floor_note[300] = "";
    if (denom > 0 && ratio < 1)
        snprintf(floor_note, sizeof floor_note,
                 "unreliable: decode ran %.2fx faster than the floor; the device probe (%.2f GB/s before, %.2f after) "
                 "missed what the run got (host caching or other tenants)", 1 / ratio, probe_before.gbps,
                 probe_after.gbps);
    const double prefill_s_per_token = main_pass.prefill_s / o.prompt_tokens;
    if (o.json) {
        char why_json[1300], probe_json[1300], resident_field[64], device_field[64], chunk_json[600];
        char before_json[300], after_json[300], note_json[700], tbt_field[32] = "null";
        /* the warm prompt's figures, or null and why not */
        char warm_json[900], warm_why_json[700];
        if (o.warm_prompt && !warm_failed[0])
            snprintf(warm_json, sizeof warm_json,
                     "\"prefill_warm_s_per_token\":%.6f,\"prefill_warm_cpu_s_per_token\":%.6f,\"prefill_warm_bytes\":%llu,",
                     warm.prefill_s / o.prompt_tokens, warm.prefill_cpu_s / o.prompt_tokens,
                     (unsigned long long)warm.prefill_bytes);
        else {
            json_escape(warm_why_json, sizeof warm_why_json, o.warm_prompt ? warm_failed : "--no-warm-prompt");
            snprintf(warm_json, sizeof warm_json,
                     "\"prefill_warm_s_per_token\":null,\"prefill_warm_not_measured\":\"%s\",", warm_why_json);
        }
        char trunk_json[1500];
        if (trunk_failed[0] || !o.probe) {
            char why[1300];
            json_escape(why, sizeof why, o.probe ? trunk_failed : "--no-probe");
            snprintf(trunk_json, sizeof trunk_json, "\"trunk_gbps\":null,\"trunk_probe\":null,\"trunk_probe_error\":\"%s\"", why);
        } else {
            snprintf(trunk_json, sizeof trunk_json,
                     "\"trunk_gbps\":%.3f,\"trunk_probe\":{\"gbps\":%.3f,\"first_pass_gbps\":%.3f,\"units\":%d,"
                     "\"pass_bytes\":%llu,\"read_bytes\":%llu,\"passes\":%d,\"seconds\":%.2f},\"trunk_probe_error\":null",
                     trunk_probe.gbps, trunk_probe.gbps, trunk_probe.first_pass_gbps, trunk_probe.units,
                     (unsigned long long)trunk_probe.pass_bytes, (unsigned long long)trunk_probe.read_bytes,
                     trunk_probe.passes, trunk_probe.seconds);
        }
        if (o.token_by_token) snprintf(tbt_field, sizeof tbt_field, "%llu", (unsigned long long)tbt.prefill_bytes);
        json_escape(why_json, sizeof why_json, resident_why);
        json_escape(probe_json, sizeof probe_json, probe_failed);
        json_escape(chunk_json, sizeof chunk_json, chunk_why);
        json_escape(note_json, sizeof note_json, floor_note);
        device_probe_json(before_json, sizeof before_json, &probe_before);
        device_probe_json(after_json, sizeof after_json, &probe_after);
        if (resident_why[0]) snprintf(resident_field, sizeof resident_field, "null");
        else snprintf(resident_field, sizeof resident_field, "%.6f", resident_s);
        if (probe_failed[0] || !o.probe) snprintf(device_field, sizeof device_field, "null");
        else snprintf(device_field, sizeof device_field, "%.3f", device_gbps);
        printf("{\"model\":\"%s\",\"kernels\":\"%s\",\"tokens\":%d,\"prompt_tokens\":%d,\"decode_s_per_token\":%.6f,"
               "\"decode_tok_per_s\":%.3f,\"prefill_tokens_per_s\":%.2f,\"prefill_s_per_token\":%.6f,"
               "\"cpu_s_per_token\":{\"prefill\":%.6f,\"decode\":%.6f},\"open_s\":%.3f,"
               "\"cache_prefault\":{\"bytes\":%llu,\"seconds\":%.3f},%s"
               "\"chunk_tokens\":%d,\"chunk_why\":\"%s\","
               "\"huge_pages\":{\"mode\":\"%s\",\"requested\":%s,\"anon_huge_bytes\":%llu},"
               "\"bytes_read_per_token\":{\"total\":%.0f,\"trunk\":%.0f,\"experts\":%.0f},"
               "\"prefill_bytes\":%llu,\"prefill_bytes_min\":%llu,\"prefill_bytes_token_by_token\":%s,"
               "\"read_gbps\":%.3f,\"device_gbps\":%s,\"device_spread\":%.3f,"
               "\"device_probe\":{\"read_bytes\":%llu,\"depth\":%d,\"before\":%s,\"after\":%s},"
               "\"device_probe_error\":%s%s%s,%s,"
               "\"true_hit_rate\":%.4f,\"prefetch_used\":%llu,\"prefetch_unused\":%llu,\"peak_rss_bytes\":%llu,"
               "\"budget_bytes\":%llu,\"plan\":%s,\"io_floor_s_per_token\":%.6f,"
               "\"resident_s_per_token\":%s,\"resident_not_measured\":%s%s%s,\"floor_ratio\":%.3f,"
               "\"floor_reliable\":%s,\"floor_note\":%s%s%s,"
               "\"breakdown_s_per_token\":{\"wait_experts\":%.6f,\"wait_trunk\":%.6f,\"compute\":%.6f,"
               "\"read_busy\":%.6f}",
               o.model_dir, k3_kernels_name(), o.tokens, o.prompt_tokens, s_per_token, 1.0 / s_per_token,
               o.prompt_tokens / main_pass.prefill_s, prefill_s_per_token, main_pass.prefill_cpu_s / o.prompt_tokens,
               main_pass.decode_cpu_s / n, open_s, (unsigned long long)prefault_bytes, prefault_s, warm_json,
               chunk_tokens, chunk_json, huge_mode_buf,
               huge_requested ? "true" : "false", (unsigned long long)anon_huge_bytes, bytes_per_token,
               main_pass.decode_trunk / n, main_pass.decode_experts / n, (unsigned long long)main_pass.prefill_bytes,
               (unsigned long long)main_pass.prefill_bytes_min, tbt_field, read_gbps,
               device_field, device_spread, (unsigned long long)probe_bytes, probe_depth, before_json, after_json,
               probe_failed[0] ? "\"" : "", probe_failed[0] ? probe_json : "null",
               probe_failed[0] ? "\"" : "", trunk_json, hit, (unsigned long long)main_pass.prefetch_used,
               (unsigned long long)main_pass.prefetch_unused, (unsigned long long)st.peak_rss_bytes,
               (unsigned long long)st.budget_bytes, plan, floor_s, resident_field, resident_why[0] ? "\"" : "",
               resident_why[0] ? why_json : "null", resident_why[0] ? "\"" : "", ratio,
               floor_note[0] ? "false" : "true", floor_note[0] ? "\"" : "", floor_note[0] ? note_json : "null",
               floor_note[0] ? "\"" : "",
               main_pass.wait_experts_ns * 1e-9 / n, main_pass.wait_trunk_ns * 1e-9 / n,
               s_per_token - (main_pass.wait_experts_ns + main_pass.wait_trunk_ns) * 1e-9 / n,
               main_pass.read_busy_ns * 1e-9 / n);
        print_draft_json(&dr, have_draft, draft_failed);
        print_pass_cost_json(&cost, measure_cost && !cost_failed[0]);
        printf("}\n");
    } else {
        printf("floor      I/O floor %.4f s/token, ", floor_s);
        if (resident_why[0]) printf("resident not measured (%s), ", resident_why);
        else printf("resident %.4f s/token, ", resident_s);
        printf("floor ratio %.2f\n", ratio);
        if (floor_note[0]) printf("floor      %s\n", floor_note);
    }
    if (trace_failed) {
        cli_error("%s", trace_err.msg);
        return K3_EXIT_ERROR;
    }
    return K3_EXIT_OK;
}
