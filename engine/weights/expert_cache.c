/* expert_cache.c - see expert_cache.h. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "expert_cache.h"

int k3_expert_cache_init(k3_expert_cache *c, k3_cache_policy policy, int n_slots, int n_layers, int n_experts)
{
    memset(c, 0, sizeof *c);
    c->policy = policy;
    c->n_slots = n_slots;
    c->n_layers = n_layers;
    c->n_experts = n_experts;
    size_t keys = (size_t)n_layers * n_experts;
    c->slot_of = malloc((keys ? keys : 1) * sizeof *c->slot_of);
    c->key_of = malloc((size_t)(n_slots ? n_slots : 1) * sizeof *c->key_of);
    c->pins = calloc((size_t)(n_slots ? n_slots : 1), sizeof *c->pins);
    c->last_use = calloc((size_t)(n_slots ? n_slots : 1), sizeof *c->last_use);
    c->uses = calloc((size_t)(n_slots ? n_slots : 1), sizeof *c->uses);
    if (!c->slot_of || !c->key_of || !c->pins || !c->last_use || !c->uses) {
        k3_expert_cache_free(c);
        return -1;
    }
    memset(c->slot_of, 0xff, keys * sizeof *c->slot_of);
    memset(c->key_of, 0xff, (size_t)n_slots * sizeof *c->key_of);
    return 0;
}

void k3_expert_cache_free(k3_expert_cache *c)
{
    free(c->slot_of);
    free(c->key_of);
    free(c->pins);
    free(c->last_use);
    free(c->uses);
    memset(c, 0, sizeof *c);
}

int k3_expert_cache_lookup(k3_expert_cache *c, int layer, int expert)
{
    assert(layer >= 0 && layer < c->n_layers && expert >= 0 && expert < c->n_experts);
    int s = c->slot_of[(size_t)layer * c->n_experts + expert];
    if (s >= 0) {
        c->last_use[s] = ++c->tick;
        if (c->uses[s] < UINT32_MAX) c->uses[s]++;
    }
    return s;
}

/* Lower is a better victim. */
static int worse_victim(const k3_expert_cache *c, int a, int b)
{
    if (c->policy == K3_CACHE_LFRU && c->uses[a] != c->uses[b]) return c->uses[a] < c->uses[b];
    return c->last_use[a] < c->last_use[b];
}

int k3_expert_cache_insert(k3_expert_cache *c, int layer, int expert)
{
    int victim = -1;
    for (int s = 0; s < c->n_slots; s++) {
        if (c->pins[s]) continue;
        if (c->key_of[s] < 0) { victim = s; break; }
        if (victim < 0 || worse_victim(c, s, victim)) victim = s;
    }
    if (victim < 0) return -1;
    assert(c->pins[victim] == 0);           /* a claimed (pinned) expert is never evicted */
    assert(c->slot_of[layer * c->n_experts + expert] < 0);   /* inserted once: not already cached */
    if (c->key_of[victim] >= 0) c->slot_of[c->key_of[victim]] = -1;
    int key = layer * c->n_experts + expert;
    c->key_of[victim] = key;
    c->slot_of[key] = victim;
    c->last_use[victim] = ++c->tick;
    c->uses[victim] = 1;
    /* aging: halve every count once per n_slots insertions */
    if (c->policy == K3_CACHE_LFRU && ++c->insertions % (uint64_t)c->n_slots == 0)
        for (int s = 0; s < c->n_slots; s++) c->uses[s] >>= 1;
    return victim;
}

void k3_expert_cache_drop(k3_expert_cache *c, int slot)
{
    assert(slot >= 0 && slot < c->n_slots);
    if (c->key_of[slot] >= 0) c->slot_of[c->key_of[slot]] = -1;
    c->key_of[slot] = -1;
}

void k3_expert_cache_pin(k3_expert_cache *c, int slot) { c->pins[slot]++; }
void k3_expert_cache_unpin(k3_expert_cache *c, int slot)
{
    assert(c->pins[slot] > 0);              /* every unpin matches a pin */
    if (c->pins[slot] > 0) c->pins[slot]--;
}

int k3_cache_policy_parse(const char *s)
{
    if (!strcmp(s, "lru")) return K3_CACHE_LRU;
    if (!strcmp(s, "lfru")) return K3_CACHE_LFRU;
    return -1;
}

const char *k3_cache_policy_name(k3_cache_policy p) { return p == K3_CACHE_LFRU ? "lfru" : "lru"; }

double k3_expert_cache_replay(const k3_cache_lookup *v, int n, int n_slots, k3_cache_policy policy,
                              int n_layers, int n_experts, int count_max_step)
{
    if (n <= 0) return 0;
    if (n_slots <= 0) return 0;
    k3_expert_cache c;
    int *pinned = malloc((size_t)n * sizeof *pinned);
    if (!pinned || k3_expert_cache_init(&c, policy, n_slots, n_layers, n_experts)) { free(pinned); return -1; }
    long hits = 0, counted = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && v[j].token == v[i].token && v[j].layer == v[i].layer) j++;
        const int count = count_max_step <= 0 || j - i <= count_max_step;
        if (count) counted += j - i;
        int np = 0;
        for (int k = i; k < j; k++) {             /* hits first, pinned */
            int s = k3_expert_cache_lookup(&c, v[k].layer, v[k].expert);
            if (s >= 0) { hits += count; k3_expert_cache_pin(&c, s); pinned[np++] = s; }
        }
        for (int k = i; k < j; k++) {             /* then misses */
            if (c.slot_of[(size_t)v[k].layer * n_experts + v[k].expert] >= 0) continue;
            int s = k3_expert_cache_insert(&c, v[k].layer, v[k].expert);
            if (s >= 0) { k3_expert_cache_pin(&c, s); pinned[np++] = s; }
        }
        for (int k = 0; k < np; k++) k3_expert_cache_unpin(&c, pinned[k]);
        i = j;
    }
    free(pinned);
    k3_expert_cache_free(&c);
    return counted ? (double)hits / counted : 0;
}

double k3_expert_cache_uniform_hit_rate(int n_moe_layers, int n_experts, int top_k, int n_slots)
{
    const int E = n_experts, k = top_k, L = n_moe_layers;
    if (L <= 0 || E <= 0 || (double)n_slots >= (double)L * E) return 1;
    const double p = (double)k / E;
    double hit = 0, older = 1;          /* P(last use more than d-1 tokens ago) */
    for (int d = 1; d < 10000000 && older > 1e-12; d++) {
        /* distinct others since: every other layer over d tokens, this
         * layer's other experts over the d-1 tokens between, the step's own */
        const double others = (L - 1) * (double)E * (1 - pow(1 - p, d)) + (E - 1) * (1 - pow(1 - p, d - 1)) + (k - 1);
        if (others >= n_slots) break;
        hit += p * older;
        older *= 1 - p;
    }
    return hit;
}
