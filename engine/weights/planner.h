/* planner.h - split a memory budget between pinned trunk, a ring of trunk
 * slots and an expert cache (docs/ARCHITECTURE.md, "Weights and the memory budget").
 *
 * Order of claims: fixed costs (what the process already holds, session
 * state for the context limit, scratch, a safety margin), then the trunk:
 * pinned whole units while they fit (largest first, so the ring slots stay
 * small), the rest streaming through a ring of 2 slots; whatever remains is
 * the expert cache, at least top_k slots. A budget below the minimum (fixed
 * + 2 ring slots of the largest trunk unit + top_k expert slots, or all trunk
 * pinned + top_k slots if smaller) is refused with the minimum in the
 * message. With no budget, or one that holds everything, all is pinned.
 *
 * With costs (k3_plan_costs), the split between pinned trunk units and
 * expert slots is the one whose decode token is predicted to wait least
 * (k3_plan_token_wait_s): pinning fewer of the units that fit, largest
 * last, frees their bytes (and their ring growth) for expert slots; and
 * the prompt chunk grows only while decode's predicted token stays within
 * 1% of its time at the smallest chunk. */
#ifndef K3_PLANNER_H
#define K3_PLANNER_H

#include <stdint.h>
#include <stdio.h>
#include "k3.h"
#include "mem_limit.h"

/* The speeds a decode token's predicted wait is weighed at: this machine's
 * measured ones when the process has them (k3 plan's cached probes, or a
 * --rates file: engine/model/plan_speeds.c), else k3_plan_default_speeds.
 * The same speeds give the same plan. */
typedef struct k3_plan_speeds {
    double trunk_matvec_bytes_per_s;   /* the trunk's weights through the decode matvec */
    double expert_matvec_bytes_per_s;  /* a routed expert's weights through it */
    double read_bytes_per_s;           /* the disk, for ring units and expert pages alike */
    char source[200];                  /* where they come from, one line (printed with the plan) */
} k3_plan_speeds;

/* The speeds assumed when none were measured: bf16 matvec ~30 GB/s, MXFP4
 * ~17 GB/s with 2 threads, the disk ~2 GB/s (docs/PERFORMANCE.md). */
void k3_plan_default_speeds(k3_plan_speeds *s);

/* What a decode token costs, for weighing a pinned trunk unit against the
 * expert slots its bytes would hold: the model's bytes at the speeds
 * (k3_plan_costs_at), the engine's and k3 plan's alike. */
typedef struct k3_plan_costs {
    double trunk_read_bytes_per_s;   /* the ring's reads of whole units */
    double expert_read_bytes_per_s;  /* expert pages, read when a layer's router misses */
    const double *unit_compute_s;    /* [n_trunk]: a decode token's compute in each unit, its experts' included */
    int n_moe_layers, n_experts_per_layer;
    /* hit rate of n_slots expert slots; NULL = uniform routing through an
     * LRU cache (k3_expert_cache_uniform_hit_rate) */
    double (*hit_rate)(int n_slots, void *ctx);
    void *hit_rate_ctx;
    const k3_plan_speeds *speeds; /* what the costs were made at (copied into the plan); may be NULL */
} k3_plan_costs;

typedef struct k3_plan_input {
    uint64_t budget_bytes;        /* 0 = no limit */
    uint64_t fixed_bytes;
    uint64_t state_bytes;         /* part of fixed: one session's state + scratch at the context limit */
    int ctx_tokens;               /* that context limit */
    int n_trunk;                  /* trunk units: layers, then the head */
    const uint64_t *trunk_bytes;
    uint64_t expert_bytes;        /* one expert cache slot */
    int n_experts_total;          /* routed experts in all layers */
    int top_k;
    const char *budget_source;    /* where budget_bytes came from ("--mem", a cgroup limit ...) */
    /* The prompt chunk: fixed_bytes holds the scratch of a chunk_min-token
     * chunk; each token more costs chunk_token_bytes (0 = the chunk is
     * chunk_min, as given). The plan takes the largest chunk up to
     * chunk_max whose extra scratch fits in an eighth of what the budget
     * leaves above its minimum (no budget: of chunk_room_bytes, the memory
     * left beside a fully resident model). */
    int chunk_min, chunk_max;
    uint64_t chunk_token_bytes, chunk_room_bytes;
    /* When that chunk cannot hold chunk_max tokens: a span of tokens run
     * layer by layer in chunks (forward.c) keeps span_token_bytes per token
     * (0 = no spans); the eighth then goes to the longest span up to
     * chunk_max first, the rest to the chunk. */
    uint64_t span_token_bytes;
    /* The embedding table's stored bytes: held in memory with everything
     * else when the model is fully resident (a row per token read from disk
     * costs a reader hand-off and an O_DIRECT read, tens of microseconds,
     * which is a fifth of a small model's step); under a budget its rows
     * are read per token (Kimi K3's table is 2.3 GB for 14 KB a token). */
    uint64_t embed_table_bytes;
    const k3_plan_costs *costs;   /* NULL: pin the most trunk that fits, the chunk as above */
} k3_plan_input;

typedef struct k3_plan {
    uint64_t budget_bytes, fixed_bytes, state_bytes, min_budget_bytes;
    int ctx_tokens;
    uint64_t pinned_bytes, ring_slot_bytes, expert_slot_bytes;
    int n_trunk, n_pinned, n_ring, n_expert_slots, n_experts_total;
    int all_resident;             /* every trunk unit pinned, every expert cached, the embedding table held */
    uint8_t *pinned;              /* [n_trunk] */
    uint64_t resident_bytes;      /* what holding everything resident takes (embedding table included) */
    char budget_source[200];      /* printed on the plan's first line */
    int chunk_tokens;             /* prompt tokens per pass over the weights (its scratch is in fixed_bytes) */
    int tile_tokens;              /* tokens the chunk scratch holds: chunk_tokens, or less for a span */
    uint64_t chunk_scratch_bytes; /* the part of fixed_bytes beyond the input's (the chunk's growth) */
    char chunk_why[256];          /* why that many, one line */
    double token_wait_s;          /* with costs: the decode token's predicted wait (reads not hidden) */
    double token_s;               /* with costs: its predicted time, compute included */
    char split_why[256];          /* with costs: why this many units pinned, one line */
    k3_plan_speeds speeds;        /* with costs: the speeds it was weighed at (source "" without) */
} k3_plan;

int k3_plan_make(const k3_plan_input *in, k3_plan *out, k3_error *err);

/* A decode token's predicted wait in seconds with these units pinned (the
 * rest streamed through 2 ring slots, in unit order, a token after
 * another) and n_expert_slots expert slots: expert misses are read while
 * the layer waits; ring reads hide behind the compute of the units before
 * the one they are for, as far as 2 slots and the one disk allow.
 * *token_s (may be NULL): the token's time, compute included. */
double k3_plan_token_wait_s(const k3_plan_input *in, const uint8_t *pinned, int n_expert_slots, double *token_s);

/* Costs from the model's bytes at these speeds (NULL: the defaults), so
 * the engine and k3 plan weigh alike. unit_compute_s is filled ([n_trunk]);
 * moe_expert_bytes_per_unit[i] is the routed experts' bytes a token runs in
 * unit i (top_k x expert bytes in a MoE layer). The costs point at speeds
 * (keep them alive while the costs are used). */
void k3_plan_costs_at(k3_plan_costs *costs, const k3_plan_speeds *speeds, const uint64_t *trunk_bytes,
                      const uint64_t *moe_expert_bytes_per_unit, int n_trunk, double *unit_compute_s, int n_moe_layers,
                      int n_experts_per_layer);
void k3_plan_free(k3_plan *p);

/* What holding the whole model takes: the fixed claim, every trunk unit,
 * every routed expert and the embedding table (the plan's resident_bytes). */
uint64_t k3_plan_resident_bytes(const k3_plan_input *in);

/* The budget without --mem, for the engine and k3 plan alike: none (fully
 * resident) when the whole model fits in 9/10 of what this process may hold
 * (lim), else that 9/10; under a hard limit (a cgroup, an rlimit) the budget
 * always stands. Sets in->budget_bytes, and in->chunk_room_bytes to the
 * memory left beside a resident model. */
void k3_plan_default_budget(k3_plan_input *in, const k3_mem_limit *lim);
/* The plan as a compact JSON object (the lines are printed by the front
 * ends from k3_plan_info: the engine never prints). */
int k3_plan_json(const k3_plan *p, char *buf, size_t len);

/* The fixed claim before any weight: what the process holds (its RSS at
 * open), one session's state and scratch, the embedding row buffer, and a
 * margin for allocator slack and thread stacks. One formula for the engine
 * and for k3 plan. */
uint64_t k3_plan_fixed_bytes(uint64_t process_bytes, uint64_t session_bytes, uint64_t embed_buf_bytes);

#endif
