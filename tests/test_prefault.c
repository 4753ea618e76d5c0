/* test_prefault.c - faulting an arena in ahead of use (engine/base/
 * prefault.c): after k3_prefault_wait every page of the block is resident
 * (mincore) where none was before; bytes already written by another
 * thread while it ran are kept (it must never write a page: the expert
 * cache's reader fills slots meanwhile); stopping a large block returns
 * before the whole block is in; a NULL handle is harmless. On a kernel
 * without MADV_POPULATE_WRITE (before 5.14): nothing starts. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "prefault.h"
#include "test.h"

/* Pages of [p, p + bytes) resident now. */
static size_t resident_pages(void *p, size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (bytes + page - 1) / page;
    unsigned char *vec = malloc(n);
    size_t in = 0;
    if (vec && mincore(p, bytes, vec) == 0)
        for (size_t i = 0; i < n; i++) in += vec[i] & 1;
    free(vec);
    return in;
}

int main(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* a kernel before 5.14 has no MADV_POPULATE_WRITE: then nothing may start */
    uint8_t *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe != MAP_FAILED && madvise(probe, page, MADV_POPULATE_WRITE) != 0) {
        TEST_BEGIN("prefault_starts_nothing_without_populate_write");
        k3_prefault *pf = k3_prefault_start(probe, page);
        CHECK(!pf, "started on a kernel without MADV_POPULATE_WRITE");
        k3_prefault_stop(pf);
        TEST_END();
        munmap(probe, page);
        TEST_EXIT();
    }
    if (probe != MAP_FAILED) munmap(probe, page);
    const size_t bytes = (size_t)24 << 20;        /* 12 huge pages' worth */
    uint8_t *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TEST_BEGIN("prefault_makes_every_page_resident_and_writes_none");
    CHECK(p != MAP_FAILED, "mmap failed");
    if (p != MAP_FAILED) {
        const size_t before = resident_pages(p, bytes);
        /* the last 4 MiB hold data written "by the reader" before and while it runs */
        uint8_t *tail = p + bytes - ((size_t)4 << 20);
        memset(tail, 0x5A, (size_t)2 << 20);
        k3_prefault *pf = k3_prefault_start(p, bytes);
        memset(tail + ((size_t)2 << 20), 0xA5, (size_t)2 << 20);
        uint64_t done = 0;
        double seconds = -1;
        k3_prefault_wait(pf, &done, &seconds);
        const size_t after = resident_pages(p, bytes), n = bytes / page;
        CHECK(pf, "not started (a kernel before 5.14 lacks MADV_POPULATE_WRITE)");
        CHECK(before <= n / 2, "%zu of %zu pages resident before: the test cannot tell", before, n);
        CHECK(after == n && done == bytes && seconds >= 0, "after: %zu of %zu pages resident, %llu bytes done, %.3f s",
              after, n, (unsigned long long)done, seconds);
        int zero = 1, kept = 1;
        for (size_t i = 0; i < bytes - ((size_t)4 << 20); i += 997) zero &= p[i] == 0;
        for (size_t i = 0; i < ((size_t)2 << 20); i += 61) kept &= tail[i] == 0x5A && tail[i + ((size_t)2 << 20)] == 0xA5;
        CHECK(zero && kept, "contents changed: untouched pages zero %d, written bytes kept %d", zero, kept);
        CHECK(k3_prefault_done_bytes(pf) == bytes, "done bytes %llu", (unsigned long long)k3_prefault_done_bytes(pf));
        k3_prefault_stop(pf);
        munmap(p, bytes);
    }
    TEST_END();

    TEST_BEGIN("prefault_stop_returns_before_a_large_block_is_in");
    const size_t big = (size_t)8 << 30;   /* reserved, not committed: stop must come long before the end */
    uint8_t *q = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(q != MAP_FAILED, "mmap of the reservation failed");
    if (q != MAP_FAILED) {
        k3_prefault *pf = k3_prefault_start(q, big);
        CHECK(pf, "not started");
        usleep(20000);
        k3_prefault_stop(pf);                       /* joins: returns within one 2 MiB piece */
        const size_t in = resident_pages(q, big);
        CHECK(in * page < big / 2, "%zu MiB resident after stop: it did not stop", in * page >> 20);
        munmap(q, big);
    }
    k3_prefault_stop(NULL);
    uint64_t b = 1;
    double s = 1;
    k3_prefault_wait(NULL, &b, &s);
    CHECK(b == 0 && s == 0 && k3_prefault_done_bytes(NULL) == 0, "a NULL handle gave %llu bytes, %.3f s",
          (unsigned long long)b, s);
    TEST_END();
    TEST_EXIT();
}
