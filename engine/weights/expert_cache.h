/* expert_cache.h - which routed experts are resident, in a fixed number of
 * equal slots, and which to evict when a missing one needs a slot.
 *
 * Policies: LRU (baseline) and LFU with aging ("lfru": the use count of
 * every resident expert is halved every `slots` insertions, ties broken by
 * recency), compared on recorded routing traces by tools/trace_replay. An
 * expert pinned by the layer being computed is never evicted. The cache only
 * does bookkeeping: the provider owns the slot memory and the reads. */
#ifndef K3_EXPERT_CACHE_H
#define K3_EXPERT_CACHE_H

#include <stdint.h>
#include "k3.h"

/* k3_cache_policy and k3_cache_policy_parse are public (k3.h). */

typedef struct k3_expert_cache {
    k3_cache_policy policy;
    int n_slots, n_layers, n_experts;
    int *slot_of;                /* [n_layers * n_experts] -> slot or -1 */
    int *key_of;                 /* [n_slots] -> layer * n_experts + expert, or -1 */
    int *pins;                   /* [n_slots] */
    uint64_t *last_use;          /* [n_slots] */
    uint32_t *uses;              /* [n_slots] (lfru) */
    uint64_t tick;
    uint64_t insertions;
} k3_expert_cache;

int k3_expert_cache_init(k3_expert_cache *c, k3_cache_policy policy, int n_slots, int n_layers, int n_experts);
void k3_expert_cache_free(k3_expert_cache *c);

/* Slot holding (layer, expert), or -1. Counts as a use when found. */
int k3_expert_cache_lookup(k3_expert_cache *c, int layer, int expert);

/* A slot for (layer, expert) not resident: a free slot, else the policy's
 * victim among unpinned slots (its old expert is dropped). -1 if every slot
 * is pinned. */
int k3_expert_cache_insert(k3_expert_cache *c, int layer, int expert);

/* Forget what a slot holds (e.g. after a failed read). */
void k3_expert_cache_drop(k3_expert_cache *c, int slot);

void k3_expert_cache_pin(k3_expert_cache *c, int slot);
void k3_expert_cache_unpin(k3_expert_cache *c, int slot);

/* One lookup of a recorded routing trace ("token layer expert" lines of
 * --trace); consecutive lookups with the same (token, layer) are one step. */
typedef struct k3_cache_lookup { long long token; int layer, expert; } k3_cache_lookup;

/* The true hit rate of `policy` with n_slots on a trace, replayed the way
 * the runtime runs a step: hits pinned first, then misses take slots (an
 * expert the step needs is never evicted). With count_max_step > 0 only
 * steps of at most that many lookups count (top_k: the decode steps, not
 * the prompt chunks that warm the cache). -1 if out of memory. */
double k3_expert_cache_replay(const k3_cache_lookup *v, int n, int n_slots, k3_cache_policy policy,
                              int n_layers, int n_experts, int count_max_step);

/* The LRU hit rate under uniform routing (each token picks top_k of
 * n_experts in each of n_moe_layers, independently), closed form: the
 * expert a layer asks for was last used d tokens ago (geometric in d) and
 * is still resident iff fewer than n_slots distinct others were used
 * since. Checked against k3_expert_cache_replay on uniform traces
 * (tests/test_plan.c). */
double k3_expert_cache_uniform_hit_rate(int n_moe_layers, int n_experts, int top_k, int n_slots);

/* Parse "lru" / "lfru"; -1 if unknown. */
const char *k3_cache_policy_name(k3_cache_policy p);

#endif
