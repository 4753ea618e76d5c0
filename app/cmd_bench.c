/* cmd_bench.c - `k3 bench`: prompt and decode speed under a memory budget,
 * with the disk measured in the same run.
 *
 * Passes (1, 2 and 4 each on a freshly opened model, so none inherits
 * another's cache; 2a to 3b on pass 2's):
 *   1. the prompt token by token (bytes read: what chunking saves; not with
 *      --no-token-by-token),
 *   2. the prompt in chunks, then N greedy decode steps (the figures),
 *      once the engine has faulted the expert cache's memory in (it starts
 *      at open; the wait is reported as cache_prefault, cold start),
 *   2a. unless --no-warm-prompt, another prompt of the same length on the
 *      same model: prefill with the weights the first one read already in
 *      memory (cold start and steady state apart: the first prompt pays the
 *      reads and the first touch of every arena page),
 *   2b. unless --no-draft, speculative decoding on the same model (none,
 *      ngram and an oracle draft, alternating), then what a verify pass of
 *      k tokens costs against a plain step (bench_draft.c),
 *   3. unless --no-probe, the device: the runtime's own read size and depth,
 *      read into the expert cache's own slots (no memory beyond the plan),
 *      before pass 2's run and again after it; 3b. the trunk as the ring reads it,
 *   4. unless --no-resident, the same decode fully resident, for floor_ratio:
 *      only when holding everything fits in the same limit as pass 2 (--mem,
 *      else the limit the engine derived from the cgroup or MemAvailable);
 *      otherwise resident_s_per_token is null and the reason is given.
 * Every pass stays within that one limit, so `k3 bench --mem X` inside a
 * cgroup of X is not killed. Peak RSS is taken after pass 2. The figures of
 * pass 2 are printed as soon as they are measured (the text report line by
 * line; with --json a summary line on stderr, then one JSON object at the
 * end), so a later pass that fails cannot lose them. Benchmarks are figures,
 * not tests.
 *
 * One function a pass, each filling its part of a bench_run: bench_token_by_token
 * (1), bench_main_pass (2), bench_warm_prompt (2a), bench_drafts (2b),
 * bench_device (3, 3b), bench_resident (4), bench_floor; then
 * print_bench_json or print_floor_text, and cmd_bench calls them in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"
#include "remote_cli.h"
#include "k3.h"
#include "k3_util.h"
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

/* The index of the largest of n logits: the greedy token. */
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

/* The speculative decoding fields of the JSON object (no braces around):
 * draft_accept_rate and tokens_per_pass are --draft ngram's; "draft" holds
 * every mode's figures; null when not measured. */
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

/* Everything one `k3 bench` run measures, pass by pass, kept for the report
 * at the end: the options, each pass's figures and, for a pass that could
 * not be measured, why not (an empty string when it was). On the heap: it
 * holds several strings of 600 to 1024 bytes. */
typedef struct bench_run {
    bench_options o;
    k3_error err;
    int *prompt;                         /* the benchmark's prompt: o.prompt_tokens ids */
    k3_model *m;                         /* pass 2's model: open from bench_main_pass to bench_device */
    decode_figures tbt;                  /* pass 1: prefill only */
    /* pass 2 */
    decode_figures main_pass;
    double open_s;                       /* k3_model_open: cold start */
    uint64_t prefault_bytes;             /* the expert cache, faulted in from open on */
    double prefault_s;
    k3_stats st;                         /* right after the pass: peak RSS, budget, resident bytes */
    char plan[2048];                     /* k3_model_plan_json */
    double s_per_token, bytes_per_token; /* decode */
    double read_gbps;                    /* decode's bytes over the time the reads were busy */
    double hit_rate;                     /* decode's expert lookups that hit the cache */
    /* pass 2a */
    decode_figures warm;
    char warm_failed[600];
    /* pass 2b */
    bench_draft_figures dr;
    char draft_failed[600];
    int have_draft;
    bench_draft_cost cost;
    char cost_failed[600];
    int measure_cost;
    /* pass 3 */
    k3_device_probe probe_before, probe_after;
    char probe_failed[600];
    k3_trunk_probe trunk_probe;
    char trunk_failed[600];
    double device_gbps;                  /* the faster of the two probes */
    double device_spread;                /* the faster over the slower */
    char huge_mode[32];
    int huge_requested;
    uint64_t anon_huge_bytes;
    int chunk_tokens;
    char chunk_why[256];
    int trace_failed;                    /* k3_model_finish failed (a --trace write): an error exit after the report */
    k3_error trace_err;
    /* pass 4 */
    decode_figures resident;
    double resident_s;                   /* s/token: measured, or --resident-s-per-token */
    char resident_why[600];
    /* the floor */
    double floor_s;                      /* I/O floor s/token: decode's bytes at the device's speed */
    double floor_ratio;                  /* decode over the higher of the floor and resident */
    char floor_note[300];
} bench_run;

/* Pass 1: the prompt one token at a time on a model of its own, for the
 * bytes it reads (what chunking saves). Makes the prompt. Returns 0, or -1
 * with the error printed. */
static int bench_token_by_token(bench_run *r)
{
    if (!r->o.token_by_token) return 0;
    k3_model *m = k3_model_open(r->o.model_dir, &r->o.model, &r->err);
    if (!m) { cli_error("%s", r->err.msg); return -1; }
    k3_model_info info;
    k3_model_get_info(m, &info);
    r->prompt = make_prompt(r->o.prompt_tokens, info.vocab_size);
    int rc = r->prompt ? run_pass(m, r->prompt, r->o.prompt_tokens, 0, 1, &r->tbt, &r->err)
                       : k3_err(&r->err, "out of memory");
    if (rc == 0) rc = k3_model_finish(m, &r->err);
    k3_model_close(m);
    if (rc) { cli_error("%s", r->err.msg); return -1; }
    return 0;
}

/* Pass 2's figures as soon as they are measured, so a later pass that fails
 * cannot lose them: the text report's lines, or with --json one summary
 * line on stderr. */
static void print_main_pass(const bench_run *r)
{
    const bench_options *o = &r->o;
    const decode_figures *f = &r->main_pass;
    const double n = o->tokens;
    if (o->json) {
        fprintf(stderr, "k3: bench: decode %.6f s/token, prefill %.2f tok/s, %.0f bytes read/token, peak RSS %llu bytes\n",
                r->s_per_token, o->prompt_tokens / f->prefill_s, r->bytes_per_token,
                (unsigned long long)r->st.peak_rss_bytes);
        return;
    }
    printf("kernels    %s\n", k3_kernels_name());
    printf("decode     %.4f s/token (%.2f tok/s), prefill %.1f tok/s\n", r->s_per_token, 1.0 / r->s_per_token,
           o->prompt_tokens / f->prefill_s);
    char why[256];
    printf("prefill    %.5f s/token in chunks of %d tokens (%s)\n", f->prefill_s / o->prompt_tokens,
           k3_model_chunk_tokens(r->m, why, sizeof why), why);
    printf("prefill    read %.1f MB (least possible %.1f MB)", f->prefill_bytes / 1e6, f->prefill_bytes_min / 1e6);
    if (o->token_by_token) printf(" vs %.1f MB token by token", r->tbt.prefill_bytes / 1e6);
    printf("\n");
    printf("cache      true hit rate %.1f%%; prefetched and used %llu, unused %llu\n", r->hit_rate * 100,
           (unsigned long long)f->prefetch_used, (unsigned long long)f->prefetch_unused);
    printf("memory     peak RSS %.1f MiB, budget %.1f MiB\n", r->st.peak_rss_bytes / 1048576.0,
           r->st.budget_bytes / 1048576.0);
    printf("per token  waiting for experts %.4f s, for trunk %.4f s, computing %.4f s; disk busy %.4f s\n",
           f->wait_experts_ns * 1e-9 / n, f->wait_trunk_ns * 1e-9 / n,
           r->s_per_token - (f->wait_experts_ns + f->wait_trunk_ns) * 1e-9 / n, f->read_busy_ns * 1e-9 / n);
    fflush(stdout);
}

/* Pass 2: open the model (timed: cold start), print the plan, wait for the
 * expert cache's prefault, probe the device once before the run, then the
 * chunked prompt and the decode steps: the figures. Makes the prompt when
 * pass 1 did not. Leaves the model open for passes 2a to 3. Returns 0, or
 * -1 with the error printed and the model closed. */
static int bench_main_pass(bench_run *r)
{
    const bench_options *o = &r->o;
    const double open_t0 = k3_now_ns() / 1e9;   /* cold start: reads and first touch of every arena */
    r->m = k3_model_open(o->model_dir, &o->model, &r->err);
    r->open_s = k3_now_ns() / 1e9 - open_t0;
    if (!r->m) { cli_error("%s", r->err.msg); return -1; }
    if (!r->prompt) {
        k3_model_info info;
        k3_model_get_info(r->m, &info);
        if (!(r->prompt = make_prompt(o->prompt_tokens, info.vocab_size))) {
            cli_error("out of memory");
            k3_model_close(r->m);
            return -1;
        }
    }
    if (!o->json) cli_print_plan(r->m);
    /* the expert cache's memory, faulted in by the engine from open on
     * while the CPU idles: waited for here, so the first touch (slow on a
     * VM whose host took the memory back) is cold start, not decode */
    k3_model_wait_prefault(r->m, &r->prefault_bytes, &r->prefault_s);
    if (!o->json && r->prefault_bytes)
        printf("memory     expert cache faulted in at open: %.1f MiB in %.2f s (%.2f GB/s), before the timed passes\n",
               r->prefault_bytes / 1048576.0, r->prefault_s,
               r->prefault_s > 0 ? r->prefault_bytes / r->prefault_s / 1e9 : 0);
    /* the device before the run (and again after it, bench_device): the
     * host's caches and other tenants move it from one minute to the next */
    if (o->probe && k3_model_probe_device(r->m, 1.0, &r->probe_before, &r->err))
        snprintf(r->probe_failed, sizeof r->probe_failed, "%s", r->err.msg);
    decode_figures *f = &r->main_pass;
    if (run_pass(r->m, r->prompt, o->prompt_tokens, o->tokens, 0, f, &r->err)) {
        cli_error("%s", r->err.msg);
        k3_model_close(r->m);
        return -1;
    }
    k3_stats_read(r->m, &r->st);
    k3_model_plan_json(r->m, r->plan, sizeof r->plan);
    const double n = o->tokens;
    r->s_per_token = f->decode_s / n;
    r->bytes_per_token = (f->decode_trunk + f->decode_experts + f->decode_other) / n;
    r->read_gbps = f->read_busy_ns ? (f->decode_trunk + f->decode_experts + f->decode_other) / (f->read_busy_ns * 1e-9) / 1e9
                                   : 0;
    r->hit_rate = f->decode_lookups ? (double)f->decode_hits / f->decode_lookups : 1.0;
    print_main_pass(r);
    return 0;
}

/* Pass 2a: a second prompt (other ids, same length) on the warmed model:
 * prefill with the weights the first one read already in memory. */
static void bench_warm_prompt(bench_run *r)
{
    const bench_options *o = &r->o;
    if (!o->warm_prompt) return;
    k3_model_info info;
    k3_model_get_info(r->m, &info);
    int *warm_prompt = make_prompt_seeded(o->prompt_tokens, info.vocab_size, 0x9E3779B97F4A7C15ull);
    if (!warm_prompt) snprintf(r->warm_failed, sizeof r->warm_failed, "out of memory");
    else if (run_pass(r->m, warm_prompt, o->prompt_tokens, 0, 0, &r->warm, &r->err))
        snprintf(r->warm_failed, sizeof r->warm_failed, "%s", r->err.msg);
    free(warm_prompt);
    if (!o->json && !r->warm_failed[0])
        printf("prefill    warm (a second prompt, weights already read): %.5f s/token, %.5f CPU s/token, read %.1f MB\n",
               r->warm.prefill_s / o->prompt_tokens, r->warm.prefill_cpu_s / o->prompt_tokens, r->warm.prefill_bytes / 1e6);
    else if (!o->json)
        printf("prefill    warm not measured: %s\n", r->warm_failed);
    fflush(stdout);
}

/* The text line of pass 2b's draft modes, or why they were not measured. */
static void print_draft_text(const bench_run *r)
{
    const bench_draft_figures *dr = &r->dr;
    if (r->have_draft) {
        const double steps = (dr->tokens - 1) * dr->rounds;   /* tokens decoded after the first, over all rounds */
        printf("draft      %d rounds alternating, %d-token repetitive prompt, %d tokens: none %.2f tok/s; ngram %.2f tok/s "
               "(%d of %d drafted kept, %.2f tokens/pass); oracle %.2f tok/s (%.2f tokens/pass); "
               "read %.1f / %.1f / %.1f MB/token; %s\n",
               dr->rounds, dr->prompt_tokens, dr->tokens, bench_draft_tok_s(dr, &dr->none),
               bench_draft_tok_s(dr, &dr->ngram), dr->ngram.kept, dr->ngram.drafted,
               dr->ngram.passes ? steps / dr->ngram.passes : 0, bench_draft_tok_s(dr, &dr->oracle),
               dr->oracle.passes ? steps / dr->oracle.passes : 0,
               dr->none.bytes_read / 1e6 / steps, dr->ngram.bytes_read / 1e6 / steps, dr->oracle.bytes_read / 1e6 / steps,
               dr->identical ? "tokens identical" : "TOKENS DIFFER");
        fflush(stdout);
    } else if (r->draft_failed[0]) {
        printf("draft      not measured: %s\n", r->draft_failed);
    }
}

/* The text line of pass 2b's verify cost, or why it was not measured. */
static void print_pass_cost_text(const bench_run *r)
{
    const bench_draft_cost *cost = &r->cost;
    if (r->measure_cost && !r->cost_failed[0]) {
        printf("verify     pass of k tokens / plain step (%.3f ms), median of %d alternating:", cost->ms[0], cost->reps);
        for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf(" k=%d %.2f", k, cost->ms[k] / cost->ms[0]);
        printf("; CPU time (%.3f ms):", cost->cpu_ms[0]);
        for (int k = 1; k <= K3_DRAFT_MAX_TOKENS; k++) printf(" k=%d %.2f", k, cost->cpu_ms[k] / cost->cpu_ms[0]);
        printf("\n");
        fflush(stdout);
    } else if (r->cost_failed[0]) {
        printf("verify     not measured: %s\n", r->cost_failed);
    }
}

/* Pass 2b: speculative decoding side by side on the same model (none, ngram
 * and an oracle draft, alternating), then what a verify pass of k tokens
 * costs against a plain step. Both need 2 decode steps and a 3-token prompt,
 * and are skipped with --no-draft. */
static void bench_drafts(bench_run *r)
{
    const bench_options *o = &r->o;
    const int wanted = o->draft_rounds && o->tokens > 1 && o->prompt_tokens >= 3;
    if (wanted && bench_draft(r->m, r->prompt, o->prompt_tokens * 2 / 3, o->tokens, o->draft_rounds, &r->dr, &r->err))
        snprintf(r->draft_failed, sizeof r->draft_failed, "%s", r->err.msg);
    r->have_draft = o->draft_rounds && r->dr.rounds && !r->draft_failed[0];
    if (!o->json) print_draft_text(r);
    r->measure_cost = wanted;
    if (r->measure_cost && bench_draft_pass_cost(r->m, r->prompt, o->prompt_tokens,
                                                 o->prompt_tokens + o->tokens + 1,   /* the draft pass's context */
                                                 2 * o->draft_rounds + 1, &r->cost, &r->err))
        snprintf(r->cost_failed, sizeof r->cost_failed, "%s", r->err.msg);
    if (!o->json) print_pass_cost_text(r);
}

/* The text lines of pass 3 and pass 2's reads: decode's bytes and read
 * speed, the device, the trunk ring. */
static void print_device_text(const bench_run *r)
{
    const decode_figures *f = &r->main_pass;
    const double n = r->o.tokens;
    printf("reads      %.2f MB/token (trunk %.2f, experts %.2f) at %.2f GB/s; ", r->bytes_per_token / 1e6,
           f->decode_trunk / n / 1e6, f->decode_experts / n / 1e6, r->read_gbps);
    if (r->probe_failed[0]) printf("device not measured: %s\n", r->probe_failed);
    else if (r->o.probe)
        printf("device %.2f GB/s reading a sample again (before the run %.2f, after %.2f, spread x%.2f); "
               "its first reading %.3g / %.3g GB/s\n", r->device_gbps, r->probe_before.gbps, r->probe_after.gbps,
               r->device_spread, r->probe_before.first_read_gbps, r->probe_after.first_read_gbps);
    else printf("device not measured (--no-probe)\n");
    const k3_trunk_probe *t = &r->trunk_probe;
    if (r->trunk_failed[0]) printf("trunk      not measured: %s\n", r->trunk_failed);
    else if (r->o.probe)
        printf("trunk      %.2f GB/s as the ring reads it (%d units, %.1f MB a pass, %d passes in %.1f s; "
               "first pass %.2f GB/s)\n", t->gbps, t->units, t->pass_bytes / 1e6, t->passes, t->seconds,
               t->first_pass_gbps);
    fflush(stdout);
}

/* Pass 3 and the end of pass 2's model: the device again, then the trunk as
 * the ring reads it; the huge pages and the chunk size the model got; then
 * finish (a --trace write) and close it. */
static void bench_device(bench_run *r)
{
    const bench_options *o = &r->o;
    /* the device again, into the model's own expert slots; the floor uses
     * the faster of the two figures (the lower floor), so a ratio below 1
     * means the probe missed what the run got */
    if (o->probe && !r->probe_failed[0] && k3_model_probe_device(r->m, 1.0, &r->probe_after, &r->err))
        snprintf(r->probe_failed, sizeof r->probe_failed, "%s", r->err.msg);
    /* pass 3b: the trunk as the ring reads it, right after decode read it
     * the same way (k3 plan --disk-trunk takes this figure) */
    if (o->probe && k3_model_probe_trunk(r->m, 1.0, &r->trunk_probe, &r->err))
        snprintf(r->trunk_failed, sizeof r->trunk_failed, "%s", r->err.msg);
    else if (o->probe && !r->trunk_probe.units)
        snprintf(r->trunk_failed, sizeof r->trunk_failed, "every trunk unit is pinned at this budget: the ring reads nothing");
    if (!r->probe_failed[0] && o->probe) {
        const double before = r->probe_before.gbps, after = r->probe_after.gbps;
        const double lo = before < after ? before : after;
        r->device_gbps = before > after ? before : after;
        r->device_spread = lo > 0 ? r->device_gbps / lo : 0;
    }
    const char *huge_mode;
    k3_model_huge_pages(r->m, &huge_mode, &r->huge_requested, &r->anon_huge_bytes);
    snprintf(r->huge_mode, sizeof r->huge_mode, "%s", huge_mode);
    r->chunk_tokens = k3_model_chunk_tokens(r->m, r->chunk_why, sizeof r->chunk_why);
    r->trace_failed = k3_model_finish(r->m, &r->trace_err) != 0;
    k3_model_close(r->m);
    r->m = NULL;
    if (!o->json) print_device_text(r);
}

/* Pass 4: the same decode fully resident on a model of its own, for the
 * floor; only when holding everything fits in pass 2's limit (--mem, else
 * the budget the engine derived), otherwise resident_why says why not. With
 * --resident-s-per-token and --no-resident the given figure stands. */
static void bench_resident(bench_run *r)
{
    const bench_options *o = &r->o;
    r->resident_s = o->resident_s_per_token;
    if (!o->resident) {
        if (!r->resident_s) snprintf(r->resident_why, sizeof r->resident_why, "--no-resident");
        return;
    }
    const uint64_t limit = o->model.mem_bytes ? o->model.mem_bytes : r->st.budget_bytes;
    if (limit && r->st.resident_bytes > limit) {
        snprintf(r->resident_why, sizeof r->resident_why,
                 "fully resident needs %.1f MiB, over the %.1f MiB limit of this run", r->st.resident_bytes / 1048576.0,
                 limit / 1048576.0);
        return;
    }
    k3_options res_opt = {.skip_tokenizer = 1, .n_threads = o->model.n_threads, .ctx_tokens = o->model.ctx_tokens,
                          .mem_bytes = limit};
    k3_model *m = k3_model_open(o->model_dir, &res_opt, &r->err);
    if (!m) {
        snprintf(r->resident_why, sizeof r->resident_why, "%s", r->err.msg);
        return;
    }
    k3_stats rs;
    k3_stats_read(m, &rs);
    if (rs.budget_bytes && rs.budget_bytes < rs.resident_bytes)
        snprintf(r->resident_why, sizeof r->resident_why,
                 "fully resident needs %.1f MiB, over the %.1f MiB limit of this run", rs.resident_bytes / 1048576.0,
                 rs.budget_bytes / 1048576.0);
    else if (run_pass(m, r->prompt, o->prompt_tokens, o->tokens, 0, &r->resident, &r->err) == 0)
        r->resident_s = r->resident.decode_s / o->tokens;
    else
        snprintf(r->resident_why, sizeof r->resident_why, "%s", r->err.msg);
    k3_model_close(m);
}

/* The I/O floor (decode's bytes at the device's speed) and floor_ratio:
 * decode against the higher of the floor and the resident decode. A decode
 * faster than its own floor means the floor was wrong, not the run: noted. */
static void bench_floor(bench_run *r)
{
    r->floor_s = r->device_gbps > 0 ? r->bytes_per_token / (r->device_gbps * 1e9) : 0;
    const double denom = r->floor_s > r->resident_s ? r->floor_s : r->resident_s;
    r->floor_ratio = denom > 0 ? r->s_per_token / denom : 0;
    if (denom > 0 && r->floor_ratio < 1)
        snprintf(r->floor_note, sizeof r->floor_note,
                 "unreliable: decode ran %.2fx faster than the floor; the device probe (%.2f GB/s before, %.2f after) "
                 "missed what the run got (host caching or other tenants)", 1 / r->floor_ratio, r->probe_before.gbps,
                 r->probe_after.gbps);
}

/* s as a JSON string, escaped, or null when it is empty (a reason not to
 * have measured something: empty when it was measured). */
static void print_json_reason(const char *s)
{
    char escaped[1300];
    if (!s[0]) {
        printf("null");
        return;
    }
    json_escape(escaped, sizeof escaped, s);
    printf("\"%s\"", escaped);
}

/* The JSON object's first fields: pass 2's decode and prefill speeds, cold
 * start, then pass 2a's warm prompt, or null and why not. */
static void print_speed_json(const bench_run *r)
{
    const bench_options *o = &r->o;
    const decode_figures *f = &r->main_pass;
    printf("{\"model\":\"%s\",\"kernels\":\"%s\",\"tokens\":%d,\"prompt_tokens\":%d,\"decode_s_per_token\":%.6f,"
           "\"decode_tok_per_s\":%.3f,\"prefill_tokens_per_s\":%.2f,\"prefill_s_per_token\":%.6f,"
           "\"cpu_s_per_token\":{\"prefill\":%.6f,\"decode\":%.6f},\"open_s\":%.3f,"
           "\"cache_prefault\":{\"bytes\":%llu,\"seconds\":%.3f},",
           o->model_dir, k3_kernels_name(), o->tokens, o->prompt_tokens, r->s_per_token, 1.0 / r->s_per_token,
           o->prompt_tokens / f->prefill_s, f->prefill_s / o->prompt_tokens, f->prefill_cpu_s / o->prompt_tokens,
           f->decode_cpu_s / (double)o->tokens, r->open_s, (unsigned long long)r->prefault_bytes, r->prefault_s);
    if (o->warm_prompt && !r->warm_failed[0]) {
        printf("\"prefill_warm_s_per_token\":%.6f,\"prefill_warm_cpu_s_per_token\":%.6f,\"prefill_warm_bytes\":%llu,",
               r->warm.prefill_s / o->prompt_tokens, r->warm.prefill_cpu_s / o->prompt_tokens,
               (unsigned long long)r->warm.prefill_bytes);
    } else {
        char why[700];
        json_escape(why, sizeof why, o->warm_prompt ? r->warm_failed : "--no-warm-prompt");
        printf("\"prefill_warm_s_per_token\":null,\"prefill_warm_not_measured\":\"%s\",", why);
    }
}

/* The reads: chunk size, huge pages, bytes per decode step and per prompt
 * (pass 1's token-by-token figure, or null), the reads' own speed. */
static void print_reads_json(const bench_run *r)
{
    const decode_figures *f = &r->main_pass;
    const double n = r->o.tokens;
    char chunk_why[600], tbt_bytes[32] = "null";
    json_escape(chunk_why, sizeof chunk_why, r->chunk_why);
    if (r->o.token_by_token) snprintf(tbt_bytes, sizeof tbt_bytes, "%llu", (unsigned long long)r->tbt.prefill_bytes);
    printf("\"chunk_tokens\":%d,\"chunk_why\":\"%s\","
           "\"huge_pages\":{\"mode\":\"%s\",\"requested\":%s,\"anon_huge_bytes\":%llu},"
           "\"bytes_read_per_token\":{\"total\":%.0f,\"trunk\":%.0f,\"experts\":%.0f},"
           "\"prefill_bytes\":%llu,\"prefill_bytes_min\":%llu,\"prefill_bytes_token_by_token\":%s,"
           "\"read_gbps\":%.3f,",
           r->chunk_tokens, chunk_why, r->huge_mode, r->huge_requested ? "true" : "false",
           (unsigned long long)r->anon_huge_bytes, r->bytes_per_token, f->decode_trunk / n, f->decode_experts / n,
           (unsigned long long)f->prefill_bytes, (unsigned long long)f->prefill_bytes_min, tbt_bytes, r->read_gbps);
}

/* Pass 3's fields: the device (null with --no-probe or when the probe
 * failed, then device_probe_error says why), both probes, the trunk ring. */
static void print_device_json(const bench_run *r)
{
    const int have_device = r->o.probe && !r->probe_failed[0];
    char before[300], after[300];
    device_probe_json(before, sizeof before, &r->probe_before);
    device_probe_json(after, sizeof after, &r->probe_after);
    if (have_device) printf("\"device_gbps\":%.3f,", r->device_gbps);
    else printf("\"device_gbps\":null,");
    printf("\"device_spread\":%.3f,\"device_probe\":{\"read_bytes\":%llu,\"depth\":%d,\"before\":%s,\"after\":%s},"
           "\"device_probe_error\":", r->device_spread, (unsigned long long)r->probe_after.read_bytes,
           r->probe_after.depth, before, after);
    print_json_reason(r->probe_failed);
    const k3_trunk_probe *t = &r->trunk_probe;
    if (r->trunk_failed[0] || !r->o.probe) {
        char why[1300];
        json_escape(why, sizeof why, r->o.probe ? r->trunk_failed : "--no-probe");
        printf(",\"trunk_gbps\":null,\"trunk_probe\":null,\"trunk_probe_error\":\"%s\",", why);
    } else {
        printf(",\"trunk_gbps\":%.3f,\"trunk_probe\":{\"gbps\":%.3f,\"first_pass_gbps\":%.3f,\"units\":%d,"
               "\"pass_bytes\":%llu,\"read_bytes\":%llu,\"passes\":%d,\"seconds\":%.2f},\"trunk_probe_error\":null,",
               t->gbps, t->gbps, t->first_pass_gbps, t->units, (unsigned long long)t->pass_bytes,
               (unsigned long long)t->read_bytes, t->passes, t->seconds);
    }
}

/* The cache, memory and plan, then the floor: io_floor_s_per_token, pass
 * 4's resident decode (or null and why not), floor_ratio and whether to
 * trust it, and where decode's time went. */
static void print_floor_json(const bench_run *r)
{
    const decode_figures *f = &r->main_pass;
    const double n = r->o.tokens;
    printf("\"true_hit_rate\":%.4f,\"prefetch_used\":%llu,\"prefetch_unused\":%llu,\"peak_rss_bytes\":%llu,"
           "\"budget_bytes\":%llu,\"plan\":%s,\"io_floor_s_per_token\":%.6f,",
           r->hit_rate, (unsigned long long)f->prefetch_used, (unsigned long long)f->prefetch_unused,
           (unsigned long long)r->st.peak_rss_bytes, (unsigned long long)r->st.budget_bytes, r->plan, r->floor_s);
    if (r->resident_why[0]) printf("\"resident_s_per_token\":null,");
    else printf("\"resident_s_per_token\":%.6f,", r->resident_s);
    printf("\"resident_not_measured\":");
    print_json_reason(r->resident_why);
    printf(",\"floor_ratio\":%.3f,\"floor_reliable\":%s,\"floor_note\":", r->floor_ratio,
           r->floor_note[0] ? "false" : "true");
    print_json_reason(r->floor_note);
    printf(",\"breakdown_s_per_token\":{\"wait_experts\":%.6f,\"wait_trunk\":%.6f,\"compute\":%.6f,"
           "\"read_busy\":%.6f}",
           f->wait_experts_ns * 1e-9 / n, f->wait_trunk_ns * 1e-9 / n,
           r->s_per_token - (f->wait_experts_ns + f->wait_trunk_ns) * 1e-9 / n, f->read_busy_ns * 1e-9 / n);
}

/* --json: every pass's figures as one JSON object on stdout, at the end. */
static void print_bench_json(const bench_run *r)
{
    print_speed_json(r);
    print_reads_json(r);
    print_device_json(r);
    print_floor_json(r);
    print_draft_json(&r->dr, r->have_draft, r->draft_failed);
    print_pass_cost_json(&r->cost, r->measure_cost && !r->cost_failed[0]);
    printf("}\n");
}

/* The text report's last lines: the floor, the resident decode (or why
 * not), floor_ratio, and the note when the floor is not to be trusted. */
static void print_floor_text(const bench_run *r)
{
    printf("floor      I/O floor %.4f s/token, ", r->floor_s);
    if (r->resident_why[0]) printf("resident not measured (%s), ", r->resident_why);
    else printf("resident %.4f s/token, ", r->resident_s);
    printf("floor ratio %.2f\n", r->floor_ratio);
    if (r->floor_note[0]) printf("floor      %s\n", r->floor_note);
}

/* `k3 bench`: the passes in order (the top of this file), then the report.
 * Passes 1 and 2 give the figures, so their failure is an error exit; a
 * later pass that fails only leaves its figures null, with the reason. */
int cmd_bench(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    for (int i = 1; i < argc; i++)   /* a remote server: no model to load (cmd_run_remote.c) */
        if (!strcmp(argv[i], "--endpoint")) return cmd_bench_remote(argc, argv);
    bench_options o;
    if (parse(argc, argv, &o)) return K3_EXIT_USAGE;
    char model_dir_buf[4096];
    if (!(o.model_dir = cli_model_dir(o.model_dir, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;
    bench_run *r = calloc(1, sizeof *r);
    if (!r) { cli_error("out of memory"); return K3_EXIT_ERROR; }
    r->o = o;
    int rc = K3_EXIT_ERROR;
    if (bench_token_by_token(r) == 0 && bench_main_pass(r) == 0) {
        bench_warm_prompt(r);
        bench_drafts(r);
        bench_device(r);
        bench_resident(r);
        bench_floor(r);
        if (o.json) print_bench_json(r);
        else print_floor_text(r);
        if (r->trace_failed) cli_error("%s", r->trace_err.msg);   /* a failed --trace write is an error exit */
        else rc = K3_EXIT_OK;
    }
    free(r->prompt);
    free(r);
    return rc;
}
