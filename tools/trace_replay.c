/* trace_replay.c - compare expert-cache policies on a recorded routing trace.
 *
 *   build/tools/trace_replay TRACE SLOTS [SLOTS...]
 *
 * TRACE is what `k3 run|bench|chat --trace FILE` writes: one line
 * "token layer expert" per expert lookup, a (token, layer) group being one
 * layer step. Each step is replayed the way the runtime does it (hits are
 * pinned, then misses take slots; an expert needed by the step is never
 * evicted), with the runtime's own k3_expert_cache for LRU and LFRU, and
 * Belady's offline optimum (evict the expert used furthest in the future)
 * as the upper bound. Prints the true hit rate of each policy per size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "expert_cache.h"

typedef k3_cache_lookup lookup;

static lookup *read_trace(const char *path, int *n, int *max_layer, int *max_expert)
{
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); return NULL; }
    int cap = 1 << 16;
    lookup *v = malloc((size_t)cap * sizeof *v);
    *n = 0;
    *max_layer = *max_expert = 0;
    lookup l;
    while (v && fscanf(f, "%lld %d %d", &l.token, &l.layer, &l.expert) == 3) {
        if (l.layer < 0 || l.expert < 0 || l.layer > 4096 || l.expert > 1 << 20) continue;
        if (*n == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[(*n)++] = l;
        if (l.layer > *max_layer) *max_layer = l.layer;
        if (l.expert > *max_expert) *max_expert = l.expert;
    }
    fclose(f);
    return v;
}

/* The runtime's policies, step by step (the runtime's own replay). */
static double replay_online(const lookup *v, int n, int slots, k3_cache_policy policy, int layers, int experts)
{
    return k3_expert_cache_replay(v, n, slots, policy, layers, experts, 0);
}

/* Belady: on a miss with the cache full, evict the resident expert whose
 * next use is furthest away (never one of the current step). */
static double replay_belady(const lookup *v, int n, int slots, int layers, int experts)
{
    const size_t keys = (size_t)(layers + 1) * experts;
    int *next = malloc((size_t)n * sizeof *next), *last = malloc(keys * sizeof *last);
    for (size_t k = 0; k < keys; k++) last[k] = n;
    for (int i = n - 1; i >= 0; i--) {
        size_t key = (size_t)v[i].layer * experts + v[i].expert;
        next[i] = last[key];
        last[key] = i;
    }
    int *slot_key = malloc((size_t)slots * sizeof *slot_key), *slot_next = malloc((size_t)slots * sizeof *slot_next);
    char *resident = calloc(keys, 1);
    int used = 0;
    long hits = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && v[j].token == v[i].token && v[j].layer == v[i].layer) j++;
        for (int k = i; k < j; k++) {
            int key = v[k].layer * experts + v[k].expert;
            if (resident[key]) {
                hits++;
                for (int s = 0; s < used; s++) if (slot_key[s] == key) slot_next[s] = next[k];
                continue;
            }
            int victim = -1, fresh = 0;
            if (used < slots) { victim = used++; fresh = 1; }
            else
                for (int s = 0; s < slots; s++) {
                    int in_step = 0;
                    for (int q = i; q < j; q++) in_step |= slot_key[s] == v[q].layer * experts + v[q].expert;
                    if (in_step) continue;
                    if (victim < 0 || slot_next[s] > slot_next[victim]) victim = s;
                }
            if (victim < 0) continue;
            if (!fresh) resident[slot_key[victim]] = 0;
            slot_key[victim] = key;
            slot_next[victim] = next[k];
            resident[key] = 1;
        }
        i = j;
    }
    free(next); free(last); free(slot_key); free(slot_next); free(resident);
    return (double)hits / n;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: trace_replay TRACE SLOTS [SLOTS...]\n");
        return 2;
    }
    int n, max_layer, max_expert;
    lookup *v = read_trace(argv[1], &n, &max_layer, &max_expert);
    if (!v || !n) { fprintf(stderr, "%s: no lookups\n", argv[1]); return 1; }
    int layers = max_layer + 1, experts = max_expert + 1;
    long long tokens = v[n - 1].token - v[0].token + 1;
    printf("trace %s: %d lookups, %lld tokens, %d layers, %d experts per layer\n", argv[1], n, tokens, layers, experts);
    printf("%8s %8s %8s %8s\n", "slots", "lru", "lfru", "belady");
    for (int a = 2; a < argc; a++) {
        int slots = atoi(argv[a]);
        if (slots < 1) continue;
        printf("%8d %7.1f%% %7.1f%% %7.1f%%\n", slots, 100 * replay_online(v, n, slots, K3_CACHE_LRU, layers, experts),
               100 * replay_online(v, n, slots, K3_CACHE_LFRU, layers, experts),
               100 * replay_belady(v, n, slots, layers, experts));
    }
    free(v);
    return 0;
}
