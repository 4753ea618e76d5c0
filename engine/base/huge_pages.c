/* huge_pages.c - large arenas on transparent huge pages.
 *
 * A matvec over weights far larger than the caches walks them once per
 * token; on 4 KiB pages every 4 KiB costs a TLB miss and a page walk, and a
 * fully resident model (tens of GB) misses on nearly every row. Linux backs
 * anonymous memory with 2 MiB pages when asked (madvise(MADV_HUGEPAGE)) in
 * its default "madvise" mode, and never unasked. So every large arena (the
 * expert slots, the trunk ring, the pinned trunk, a session's scratch and
 * latent cache) starts on a 2 MiB boundary and asks. Only the whole 2 MiB
 * pages inside the block are marked: a partly used huge page at either end
 * would be backed in full and charge memory the plan never counted. When
 * THP is off or missing, madvise fails or is ignored and the block is an
 * ordinary one: nothing else changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "huge_pages.h"

void *k3_huge_alloc(size_t bytes, size_t align, int huge)
{
    if (bytes == 0) bytes = align;
    if (huge && bytes >= K3_HUGE_PAGE_BYTES && align < K3_HUGE_PAGE_BYTES) align = K3_HUGE_PAGE_BYTES;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge && bytes >= K3_HUGE_PAGE_BYTES) {
        uintptr_t begin = ((uintptr_t)p + K3_HUGE_PAGE_BYTES - 1) & ~(uintptr_t)(K3_HUGE_PAGE_BYTES - 1);
        uintptr_t end = ((uintptr_t)p + bytes) & ~(uintptr_t)(K3_HUGE_PAGE_BYTES - 1);
        if (end > begin) (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);   /* a hint: failure is fine */
    }
#endif
    return p;
}

const char *k3_huge_pages_mode(void)
{
    char line[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return "unavailable";
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got) return "unavailable";
    /* the active mode is the bracketed one: "always [madvise] never" */
    if (strstr(line, "[always]")) return "always";
    if (strstr(line, "[madvise]")) return "madvise";
    if (strstr(line, "[never]")) return "never";
    return "unavailable";
}

uint64_t k3_huge_pages_anon_bytes(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %llu kB", &kib) == 1) break;
    fclose(f);
    return (uint64_t)kib * 1024;
}
