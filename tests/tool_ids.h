/* tool_ids.h - the token-id list the engine tools (tool_engine, tool_trust)
 * take on their command line: "1 2 3" -> {1, 2, 3}. One copy for both; the
 * tools do not include test.h (its counters are per test binary). */
#ifndef K3_TOOL_IDS_H
#define K3_TOOL_IDS_H

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

#endif
