/* stats.c - live statistics: the record ring and the lock-free copy.
 * Threading: I/O threads and the evaluating thread update counters with
 * atomic adds and stores (stats.h); only the evaluating thread appends
 * records; any thread may call k3_stats_read at any time. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "file_read.h"
#include "stats.h"
#include "k3_util.h"

uint64_t k3_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void stats_record(k3_stats *s, const k3_token_record *r)
{
    uint64_t n = __atomic_load_n(&s->n_records, __ATOMIC_RELAXED);
    k3_token_record *dst = &s->records[n % K3_STATS_RECORDS];
    /* Release stores: a reader whose acquire load sees any of them also sees
     * n_records >= n (stored before them), and drops the record this one
     * overwrites: k3_stats_read. (Per-word release/acquire instead of a
     * fence pair: the same order, and ThreadSanitizer can check it; on x86
     * both are plain moves.) */
    const uint64_t *src64 = (const uint64_t *)r;
    uint64_t *dst64 = (uint64_t *)dst;
    for (size_t i = 0; i < sizeof *r / 8; i++) __atomic_store_n(&dst64[i], src64[i], __ATOMIC_RELEASE);
    __atomic_store_n(&s->n_records, n + 1, __ATOMIC_RELEASE);
}

void stats_read_rss(uint64_t *rss_bytes, uint64_t *peak_bytes)
{
    *rss_bytes = k3_proc_kib_field_bytes("/proc/self/status", "VmRSS:");
    *peak_bytes = k3_proc_kib_field_bytes("/proc/self/status", "VmHWM:");
}

/* Copy the counters with 64-bit atomic loads: every 8-byte field sits in one
 * aligned 8-byte word of the struct, so none can tear (a 32-bit copy could
 * pair the low word before an I/O thread's add with the high word after it:
 * a gauge jumping by 4 GiB). Fields may be from slightly different instants.
 * The record ring is a seqlock with one writer (the evaluating thread): a
 * record is kept only if the writer had not started overwriting its slot
 * when the copy ended. */
void stats_copy(const k3_stats *s, k3_stats *out)
{
    _Static_assert(sizeof(k3_token_record) % 8 == 0, "records are whole 8-byte words");
    _Static_assert(offsetof(k3_stats, records) % 8 == 0, "the counters are whole 8-byte words");
    const size_t head_words = offsetof(k3_stats, records) / 8;
    const uint64_t *src64 = (const uint64_t *)s;
    uint64_t *dst64 = (uint64_t *)out;
    for (size_t i = 0; i < head_words; i++) dst64[i] = __atomic_load_n(&src64[i], __ATOMIC_RELAXED);
    const uint64_t n = __atomic_load_n(&s->n_records, __ATOMIC_ACQUIRE);
    uint32_t valid = n < K3_STATS_RECORDS ? (uint32_t)n : K3_STATS_RECORDS;
    for (uint32_t i = 0; i < valid; i++) {
        const k3_token_record *r = &s->records[(n - valid + i) % K3_STATS_RECORDS];
        const uint64_t *rs = (const uint64_t *)r;
        uint64_t *rd = (uint64_t *)&out->records[i];
        for (size_t j = 0; j < sizeof *r / 8; j++) rd[j] = __atomic_load_n(&rs[j], __ATOMIC_ACQUIRE);
    }
    /* records numbered below n_now - K3_STATS_RECORDS + 1 may have been
     * rewritten while they were copied: drop them (oldest first). A word
     * read from a newer record (acquire) makes its n_records visible here. */
    const uint64_t n_now = __atomic_load_n(&s->n_records, __ATOMIC_RELAXED);
    /* the writer may be filling record n_now, which overwrites record
     * n_now - K3_STATS_RECORDS: records below n_now - K3_STATS_RECORDS + 1 are
     * suspect; ours start at n - valid */
    const int64_t first_safe = (int64_t)n_now - K3_STATS_RECORDS + 1, first = (int64_t)(n - valid);
    uint32_t stale = first_safe > first ? (first_safe - first >= valid ? valid : (uint32_t)(first_safe - first)) : 0;
    if (stale) memmove(out->records, out->records + stale, (size_t)(valid - stale) * sizeof *out->records);
    out->n_records = n;
    out->n_valid = valid - stale;
    stats_read_rss(&out->rss_bytes, &out->peak_rss_bytes);
}

/* One place reads the counters at a step's start (plain decode, prompt
 * chunks and draft passes all record their steps the same way). */
void stats_step_begin(const k3_stats *s, stats_step_start *start)
{
    start->bytes_trunk = __atomic_load_n(&s->bytes_read_trunk, __ATOMIC_RELAXED);
    start->bytes_experts = __atomic_load_n(&s->bytes_read_experts, __ATOMIC_RELAXED);
    start->expert_lookups = __atomic_load_n(&s->expert_lookups, __ATOMIC_RELAXED);
    start->expert_hits = __atomic_load_n(&s->expert_hits, __ATOMIC_RELAXED);
    start->t0_ns = k3_now_ns();
}

void stats_step_record(k3_stats *s, const stats_step_start *start, k3_token_record *rec)
{
    rec->ms = (float)((k3_now_ns() - start->t0_ns) * 1e-6);
    rec->index = s->n_records;
    /* the reader threads add to these while a step ends (the ring reads
     * ahead into the next step): atomic loads, as stats_add writes them */
    rec->bytes_trunk = __atomic_load_n(&s->bytes_read_trunk, __ATOMIC_RELAXED) - start->bytes_trunk;
    rec->bytes_experts = __atomic_load_n(&s->bytes_read_experts, __ATOMIC_RELAXED) - start->bytes_experts;
    rec->expert_lookups = (uint32_t)(__atomic_load_n(&s->expert_lookups, __ATOMIC_RELAXED) - start->expert_lookups);
    rec->expert_hits = (uint32_t)(__atomic_load_n(&s->expert_hits, __ATOMIC_RELAXED) - start->expert_hits);
    stats_record(s, rec);
}
