/* huge_pages.h - large arenas on transparent huge pages (huge_pages.c). */
#ifndef K3_HUGE_PAGES_H
#define K3_HUGE_PAGES_H

#include <stddef.h>
#include <stdint.h>

/* The huge page size of x86-64 and of aarch64 with 4 KiB base pages. */
#define K3_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* bytes of memory aligned to `align` (a power of two, at least 64); when
 * `huge` is set and bytes reach K3_HUGE_PAGE_BYTES the block starts on a
 * 2 MiB boundary and its whole 2 MiB pages are marked MADV_HUGEPAGE. Freed
 * with free(). NULL when out of memory. */
void *k3_huge_alloc(size_t bytes, size_t align, int huge);

/* The kernel's transparent huge page mode: "always", "madvise", "never", or
 * "unavailable" when /sys/kernel/mm/transparent_hugepage/enabled cannot be
 * read (another OS, or a kernel without THP). */
const char *k3_huge_pages_mode(void);

/* Bytes of this process's anonymous memory on huge pages now (AnonHugePages
 * of /proc/self/smaps_rollup; 0 when it cannot be read). */
uint64_t k3_huge_pages_anon_bytes(void);

#endif
