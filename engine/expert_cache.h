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

/* Parse "lru" / "lfru"; -1 if unknown. */
const char *k3_cache_policy_name(k3_cache_policy p);

#endif
