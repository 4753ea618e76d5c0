/* test_huge_pages.c - large arenas on transparent huge pages
 * (engine/base/huge_pages.c): a large block starts on a 2 MiB boundary and
 * its whole 2 MiB pages are eligible for huge pages (THPeligible in
 * /proc/self/smaps) when the kernel's mode allows it; a partial 2 MiB page
 * at its end is not marked (it would be backed in full and charge memory
 * the plan never counted); a block asked without huge pages is not marked;
 * the mode reported is the kernel's. */
#include <stdint.h>
#include <string.h>
#include "huge_pages.h"
#include "test.h"

/* THPeligible of the mapping that holds addr: 1, 0, or -1 if not found. */
static int thp_eligible(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx", &lo, &dash, &hi) == 3 && dash == '-') {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        int v;
        if (in && sscanf(line, "THPeligible: %d", &v) == 1) { found = v; break; }
    }
    fclose(f);
    return found;
}

int main(void)
{
    const char *mode = k3_huge_pages_mode();
    char want[32] = "unavailable", line[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f && fgets(line, sizeof line, f)) {
        const char *b = strchr(line, '['), *e = b ? strchr(b, ']') : NULL;
        if (b && e) snprintf(want, sizeof want, "%.*s", (int)(e - b - 1), b + 1);
    }
    if (f) fclose(f);
    TEST_BEGIN("huge_pages_mode_is_the_kernels");
    CHECK(!strcmp(mode, want), "reported '%s', the kernel says '%s'", mode, want);
    TEST_END();

    const size_t big = 6 * K3_HUGE_PAGE_BYTES + 12288;   /* 6 whole huge pages, then a partial one */
    uint8_t *p = k3_huge_alloc(big, 4096, 1);
    uint8_t *q = k3_huge_alloc(big, 4096, 0);
    uint8_t *small = k3_huge_alloc(100000, 64, 1);
    TEST_BEGIN("huge_alloc_aligns_large_blocks_to_2MiB");
    CHECK(p && q && small, "allocation failed");
    if (p && q && small) {
        CHECK(((uintptr_t)p & (K3_HUGE_PAGE_BYTES - 1)) == 0, "block at %p is not on a 2 MiB boundary", (void *)p);
        CHECK(((uintptr_t)q & 4095) == 0 && ((uintptr_t)small & 63) == 0, "alignment asked for is not kept");
        memset(p, 1, big);
        memset(q, 1, big);
        memset(small, 1, 100000);
    }
    TEST_END();
    if (p && q && (!strcmp(mode, "madvise") || !strcmp(mode, "always"))) {
        TEST_BEGIN("huge_alloc_marks_the_whole_2MiB_pages");
        CHECK(thp_eligible(p) == 1 && thp_eligible(p + 5 * K3_HUGE_PAGE_BYTES) == 1,
              "the block's whole 2 MiB pages are not eligible (THPeligible %d, %d)", thp_eligible(p),
              thp_eligible(p + 5 * K3_HUGE_PAGE_BYTES));
        TEST_END();
    }
    if (p && q && !strcmp(mode, "madvise")) {
        TEST_BEGIN("huge_alloc_leaves_partial_pages_and_unasked_blocks_alone");
        CHECK(thp_eligible(p + big - 1) == 0, "the partial 2 MiB page at the end is eligible");
        CHECK(thp_eligible(q) == 0 && thp_eligible(q + big / 2) == 0, "a block asked without huge pages is eligible");
        TEST_END();
    }
    free(p);
    free(q);
    free(small);
    TEST_EXIT();
}
