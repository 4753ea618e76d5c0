/* stats.h - how the engine updates the live statistics of k3.h. Writers use
 * these atomic helpers; k3_stats_read copies field by field with atomic
 * loads, so readers on other threads never block the engine. */
#ifndef K3_STATS_H
#define K3_STATS_H

#include "k3.h"

static inline void stats_add(uint64_t *field, uint64_t v) { __atomic_fetch_add(field, v, __ATOMIC_RELAXED); }
static inline void stats_set64(uint64_t *field, uint64_t v) { __atomic_store_n(field, v, __ATOMIC_RELAXED); }
static inline void stats_set32(uint32_t *field, uint32_t v) { __atomic_store_n(field, v, __ATOMIC_RELAXED); }
static inline void stats_add32(uint32_t *field, int32_t v) { __atomic_fetch_add(field, (uint32_t)v, __ATOMIC_RELAXED); }
static inline void stats_add_ms(double *field, double v)
{
    /* only the engine thread writes doubles: a plain read-modify-write,
     * published with an atomic store of the bits */
    double d = *field + v;
    uint64_t bits;
    __builtin_memcpy(&bits, &d, 8);
    __atomic_store_n((uint64_t *)field, bits, __ATOMIC_RELAXED);
}


/* Append a record to the ring of recent evaluation steps. */
void stats_record(k3_stats *s, const k3_token_record *r);

/* The clock and counters when an evaluation step starts, so its record
 * carries what that step alone took and read. */
typedef struct stats_step_start {
    uint64_t t0_ns, bytes_trunk, bytes_experts, expert_lookups, expert_hits;
} stats_step_start;
void stats_step_begin(const k3_stats *s, stats_step_start *start);

/* Fill the record's time, index and per-step reads since start, and append
 * it to the ring (the caller has set its phase and token count). */
void stats_step_record(k3_stats *s, const stats_step_start *start, k3_token_record *rec);

/* A consistent copy of the live counters and the record ring, safe while
 * other threads update them (k3_stats_read hands it a model's stats). */
void stats_copy(const k3_stats *s, k3_stats *out);

/* Current and peak resident set size from /proc/self. */
void stats_read_rss(uint64_t *rss_bytes, uint64_t *peak_bytes);

#endif
