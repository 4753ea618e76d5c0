/* tool_engine.c - engine checks driven by tests/t_forward.sh (not part of k3).
 *
 *   tool_engine split MODEL "ids" K    prefill(T) vs prefill(T-K) + K single steps,
 *                                      and vs all single steps: logits must be
 *                                      bit-identical (same kernels, same order)
 *   tool_engine greedy MODEL "ids" N   greedy continuation: prints N ids
 *
 * Prints PASS/FAIL lines for split; greedy prints the ids on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"

static int *parse_ids(const char *s, int *n)
{
    int cap = 64, *ids = malloc(cap * sizeof *ids);
    *n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (*n == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        ids[(*n)++] = (int)v;
        s = end;
    }
    return ids;
}

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

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: tool_engine split|greedy MODEL \"ids\" K\n");
        return 2;
    }
    k3_error err;
    k3_model *m = k3_model_open(argv[2], NULL, &err);
    if (!m) { printf("FAIL open %s: %s\n", argv[2], err.msg); return 1; }
    int n, *ids = parse_ids(argv[3], &n), k = atoi(argv[4]), rc;
    if (!strcmp(argv[1], "split")) rc = split_check(m, ids, n, k);
    else rc = greedy(m, ids, n, k);
    free(ids);
    k3_model_close(m);
    return rc ? 1 : 0;
}
