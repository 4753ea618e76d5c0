/* stats.c - live statistics: the record ring and the lock-free copy. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "forward.h"
#include "stats.h"

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
    const uint64_t *src64 = (const uint64_t *)r;
    uint64_t *dst64 = (uint64_t *)dst;
    for (size_t i = 0; i < sizeof *r / 8; i++) __atomic_store_n(&dst64[i], src64[i], __ATOMIC_RELAXED);
    __atomic_store_n(&s->n_records, n + 1, __ATOMIC_RELEASE);
}

void stats_read_rss(uint64_t *rss_bytes, uint64_t *peak_bytes)
{
    *rss_bytes = *peak_bytes = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *rss_bytes = kb * 1024;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *peak_bytes = kb * 1024;
    }
    fclose(f);
}

/* Copy every field with an atomic load (the struct is all 4- and 8-byte
 * fields), then lay the record ring out oldest first. */
void k3_stats_read(const k3_model *m, k3_stats *out)
{
    const k3_stats *s = &m->stats;
    _Static_assert(sizeof(k3_token_record) % 8 == 0, "records are whole 8-byte words");
    const size_t head_bytes = offsetof(k3_stats, records);
    const uint32_t *src32 = (const uint32_t *)s;
    uint32_t *dst32 = (uint32_t *)out;
    for (size_t i = 0; i < head_bytes / 4; i++) dst32[i] = __atomic_load_n(&src32[i], __ATOMIC_RELAXED);
    uint64_t n = __atomic_load_n(&s->n_records, __ATOMIC_ACQUIRE);
    uint32_t valid = n < K3_STATS_RECORDS ? (uint32_t)n : K3_STATS_RECORDS;
    out->n_records = n;
    out->n_valid = valid;
    for (uint32_t i = 0; i < valid; i++) {
        const k3_token_record *r = &s->records[(n - valid + i) % K3_STATS_RECORDS];
        const uint64_t *src64 = (const uint64_t *)r;
        uint64_t *dst64 = (uint64_t *)&out->records[i];
        for (size_t j = 0; j < sizeof *r / 8; j++) dst64[j] = __atomic_load_n(&src64[j], __ATOMIC_RELAXED);
    }
    stats_read_rss(&out->rss_bytes, &out->peak_rss_bytes);
}
