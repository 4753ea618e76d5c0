/* tool_engine.c - engine checks driven by tests/t_forward.sh (not part of k3).
 *
 *   tool_engine split MODEL "ids" K    prefill(T) vs prefill(T-K) + K single steps,
 *                                      and vs all single steps: logits must be
 *                                      bit-identical (same kernels, same order)
 *   tool_engine greedy MODEL "ids" N   greedy continuation: prints N ids
 *   tool_engine iocheck MODEL "ids" MEM  eval under a --mem budget with O_DIRECT
 *                                      reads: the engine's bytes-read counters
 *                                      must match /proc/self/io read_bytes (1%)
 *   tool_engine span MODEL "ids" MEM   under a --mem budget (MiB) whose plan runs
 *                                      the prompt as one span (layer by layer in
 *                                      chunks): the logits after it and after one
 *                                      more token are bit-identical to plain
 *                                      7-token chunks; an interrupt between its
 *                                      layers undoes it
 *
 * Prints PASS/FAIL lines for split; greedy prints the ids on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "tool_common.h"

static int split_check(k3_model *m, const int *ids, int n, int k)
{
    k3_model_info info;
    k3_model_get_info(m, &info);
    size_t V = (size_t)info.vocab_size;
    float *whole = malloc(n * V * sizeof(float)), *parts = malloc(n * V * sizeof(float));
    k3_error err;
    k3_session *a = k3_session_new(m, n, &err), *b = k3_session_new(m, n, &err);
    int fails = 0;
    if (k3_session_eval(a, ids, n, whole, &err)) { printf("FAIL split: %s\n", err.msg); return 1; }
    /* prefill(T-k) then k single steps */
    if (k3_session_eval(b, ids, n - k, parts, &err)) { printf("FAIL split: %s\n", err.msg); return 1; }
    for (int i = n - k; i < n; i++)
        if (k3_session_eval(b, ids + i, 1, parts + i * V, &err)) { printf("FAIL split: %s\n", err.msg); return 1; }
    if (memcmp(whole, parts, n * V * sizeof(float))) {
        printf("FAIL prefill(%d) == prefill(%d) + %d steps: logits differ\n", n, n - k, k);
        fails++;
    } else {
        printf("PASS prefill(%d) == prefill(%d) + %d steps (bit-identical)\n", n, n - k, k);
    }
    /* every token on its own */
    k3_session_reset(b);
    for (int i = 0; i < n; i++)
        if (k3_session_eval(b, ids + i, 1, parts + i * V, &err)) { printf("FAIL split: %s\n", err.msg); return 1; }
    if (memcmp(whole, parts, n * V * sizeof(float))) {
        printf("FAIL prefill(%d) == %d single steps: logits differ\n", n, n);
        fails++;
    } else {
        printf("PASS prefill(%d) == %d single steps (bit-identical)\n", n, n);
    }
    /* the last logits kept by the session equal the last row */
    if (memcmp(k3_session_logits(a), whole + (n - 1) * V, V * sizeof(float))) {
        printf("FAIL session logits equal the last row\n");
        fails++;
    }
    k3_session_free(a);
    k3_session_free(b);
    free(whole);
    free(parts);
    return fails;
}

static int greedy(k3_model *m, const int *ids, int n, int steps)
{
    k3_error err;
    k3_session *s = k3_session_new(m, n + steps, &err);
    k3_model_info info;
    k3_model_get_info(m, &info);
    if (!s || k3_session_eval(s, ids, n, NULL, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    for (int i = 0; i < steps; i++) {
        const float *l = k3_session_logits(s);
        int best = 0;
        for (int v = 1; v < info.vocab_size; v++) if (l[v] > l[best]) best = v;
        printf("%s%d", i ? " " : "", best);
        if (i + 1 < steps && k3_session_eval(s, &best, 1, NULL, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    }
    printf("\n");
    k3_session_free(s);
    return 0;
}

/* read_bytes of /proc/self/io: what this process made the storage layer read. */
static unsigned long long proc_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    unsigned long long v = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

static int iocheck(const char *dir, const int *ids, int n, const char *mem)
{
    k3_options opt = {.mem_bytes = (uint64_t)strtoull(mem, NULL, 10) << 20, .ctx_tokens = n};
    k3_error err;
    unsigned long long before_open = proc_read_bytes();
    k3_model *m = k3_model_open(dir, &opt, &err);
    if (!m) { printf("FAIL iocheck open: %s\n", err.msg); return 1; }
    /* the check is about reads while evaluating: a budget that holds the
     * whole model (embedding table included) reads nothing then, so reopen
     * halfway between the minimum and resident; a reopen's minimum can be
     * higher (the process holds more once a model was open, more so under
     * ASan), so a refused budget moves halfway back up, a few times */
    k3_plan_info plan;
    k3_model_plan(m, &plan);
    if (plan.all_resident) {
        const uint64_t resident = plan.resident_bytes;
        opt.mem_bytes = plan.min_budget_bytes + (resident - plan.min_budget_bytes) / 2;
        k3_model_close(m);
        m = NULL;
        const uint64_t gap = resident - plan.min_budget_bytes;
        for (int up = 0; up < 6 && !m; up++) {
            before_open = proc_read_bytes();
            if ((m = k3_model_open(dir, &opt, &err))) break;
            /* the refusal names the reopen's own minimum ("use --mem NM or
             * more"): go half the first open's gap above it (under ASan the
             * minimum can pass the first open's resident size) */
            const char *at = strstr(err.msg, "use --mem ");
            unsigned long long min_mib = 0;
            if (at && sscanf(at, "use --mem %lluM", &min_mib) == 1) opt.mem_bytes = (min_mib << 20) + gap / 2;
            else opt.mem_bytes += (resident - opt.mem_bytes) / 2;
        }
        if (!m) { printf("FAIL iocheck reopen: %s\n", err.msg); return 1; }
        k3_model_plan(m, &plan);
    }
    if (plan.all_resident) {
        printf("FAIL iocheck: no budget below %s MiB streams anything\n", mem);
        k3_model_close(m);
        return 1;
    }
    k3_stats a, b;
    k3_stats_read(m, &a);
    unsigned long long before = proc_read_bytes();
    k3_session *s = k3_session_new(m, n, &err);
    if (!s || k3_session_eval(s, ids, n, NULL, &err)) { printf("FAIL iocheck eval: %s\n", err.msg); return 1; }
    unsigned long long after = proc_read_bytes();
    k3_stats_read(m, &b);
    unsigned long long engine = (b.bytes_read_trunk + b.bytes_read_experts + b.bytes_read_other) -
                                (a.bytes_read_trunk + a.bytes_read_experts + a.bytes_read_other);
    unsigned long long kernel = after - before;
    double diff = engine > kernel ? (double)(engine - kernel) : (double)(kernel - engine);
    int ok = engine > 0 && diff <= 0.01 * (double)kernel + 65536;
    printf("%s bytes read: engine counters %llu vs /proc/self/io read_bytes %llu (open: %llu, --mem %.1f MiB)%s\n",
           ok ? "PASS" : "FAIL", engine, kernel, before - before_open, opt.mem_bytes / 1048576.0,
           ok ? "" : ": differ by more than 1%");
    k3_session_free(s);
    k3_model_close(m);
    return !ok;
}

/* The prompt, then one more token (ids[0]) on a fresh session of m: both
 * logits rows into out[0..2V). With interrupt set, the prompt is first fed
 * with the flag raised: it must stop and leave the session empty. */
static int prompt_and_step(k3_model *m, const int *ids, int n, float *out, size_t V, int interrupt, const char *what)
{
    k3_error err;
    k3_session *s = k3_session_new(m, n + 1, &err);
    if (!s) { printf("FAIL span %s: %s\n", what, err.msg); return 1; }
    int fails = 0;
    if (interrupt) {
        volatile int flag = 1;
        k3_session_set_interrupt(s, &flag);
        int rc = k3_session_eval(s, ids, n, NULL, &err);
        int ok = rc == K3_EVAL_INTERRUPTED && k3_session_n_tokens(s) == 0;
        printf("%s span %s: an interrupt between layers stops the span and undoes it (rc %d, %d tokens kept)\n",
               ok ? "PASS" : "FAIL", what, rc, k3_session_n_tokens(s));
        fails += !ok;
        k3_session_set_interrupt(s, NULL);
    }
    if (k3_session_eval(s, ids, n, NULL, &err)) { printf("FAIL span %s: %s\n", what, err.msg); k3_session_free(s); return 1; }
    memcpy(out, k3_session_logits(s), V * sizeof(float));
    if (k3_session_eval(s, ids, 1, NULL, &err)) { printf("FAIL span %s: %s\n", what, err.msg); k3_session_free(s); return 1; }
    memcpy(out + V, k3_session_logits(s), V * sizeof(float));
    k3_session_free(s);
    return fails;
}

/* A prompt run as one span against the same prompt in plain 7-token chunks
 * (fully resident): the same bits. */
static int span_check(const char *dir, const int *ids, int n, const char *mem)
{
    k3_options budget = {.mem_bytes = (uint64_t)strtoull(mem, NULL, 10) << 20, .ctx_tokens = n + 1};
    k3_options plain = {.chunk_tokens = 7, .ctx_tokens = n + 1};
    k3_error err;
    k3_model *m = k3_model_open(dir, &budget, &err);
    if (!m) { printf("FAIL span open: %s\n", err.msg); return 1; }
    k3_model_info info;
    k3_model_get_info(m, &info);
    const size_t V = (size_t)info.vocab_size;
    float *a = malloc(2 * V * sizeof(float)), *b = malloc(2 * V * sizeof(float));
    char why[300];
    const int chunk = k3_model_chunk_tokens(m, why, sizeof why);
    int fails = 0;
    if (chunk < n || !strstr(why, "layer by layer")) {
        printf("FAIL span: at --mem %sM the %d-token prompt is not one span (%d tokens: %s)\n", mem, n, chunk, why);
        fails++;
    } else {
        printf("PASS span: at --mem %sM the %d-token prompt is one span (%s)\n", mem, n, why);
    }
    fails += prompt_and_step(m, ids, n, a, V, 1, "budget");
    k3_model_close(m);
    m = k3_model_open(dir, &plain, &err);
    if (!m) { printf("FAIL span open: %s\n", err.msg); free(a); free(b); return 1; }
    fails += prompt_and_step(m, ids, n, b, V, 0, "7-token chunks");
    k3_model_close(m);
    int same_prompt = !memcmp(a, b, V * sizeof(float)), same_step = !memcmp(a + V, b + V, V * sizeof(float));
    printf("%s span: logits after the prompt bit-identical to 7-token chunks\n", same_prompt ? "PASS" : "FAIL");
    printf("%s span: logits of the next token bit-identical (the KDA state and MLA cache the span left)\n",
           same_step ? "PASS" : "FAIL");
    free(a);
    free(b);
    return fails + !same_prompt + !same_step;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: tool_engine split|greedy|iocheck|span MODEL \"ids\" K\n");
        return 2;
    }
    k3_error err;
    k3_options quiet = {0};
    k3_model *m = k3_model_open(argv[2], &quiet, &err);
    if (!m) { printf("FAIL open %s: %s\n", argv[2], err.msg); return 1; }
    int n, *ids = parse_ids(argv[3], &n), k = atoi(argv[4]), rc;
    if (!strcmp(argv[1], "iocheck")) {
        k3_model_close(m);
        m = NULL;
        rc = iocheck(argv[2], ids, n, argv[4]);
    } else if (!strcmp(argv[1], "span")) {
        k3_model_close(m);
        m = NULL;
        rc = span_check(argv[2], ids, n, argv[4]);
    } else if (!strcmp(argv[1], "split")) rc = split_check(m, ids, n, k);
    else rc = greedy(m, ids, n, k);
    free(ids);
    k3_model_close(m);
    return rc ? 1 : 0;
}
