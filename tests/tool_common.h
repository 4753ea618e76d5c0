/* tool_common.h - what the engine tools (tool_engine, tool_trust,
 * tool_draft) share: the token-id list they take on their command line
 * ("1 2 3" -> {1, 2, 3}) and a byte comparison of two output files. One copy
 * for all; the tools do not include test.h (its counters are per test
 * binary). */
#ifndef K3_TOOL_COMMON_H
#define K3_TOOL_COMMON_H

#include <stdio.h>
#include <stdlib.h>

/* Whitespace-separated integers up to the first non-number; *n gets the
 * count. Exits on out of memory: these are test tools, not the engine. */
static inline int *parse_ids(const char *s, int *n)
{
    int cap = 64, *ids = malloc((size_t)cap * sizeof *ids);
    *n = 0;
    for (char *end;; s = end) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (ids && *n == cap) {
            int *grown = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!grown) free(ids);
            ids = grown;
        }
        if (!ids) { fprintf(stderr, "parse_ids: out of memory\n"); exit(2); }
        ids[(*n)++] = (int)v;
    }
    return ids;
}

/* 1 if files a and b both open and hold the same bytes. */
static inline int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

#endif
