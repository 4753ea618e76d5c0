/* mem_limit.c - see mem_limit.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "file_read.h"
#include "mem_limit.h"

/* Limits at or above this are "no limit" (v1 writes 2^63 rounded to pages). */
#define NO_LIMIT_BYTES (1ull << 62)

/* A system path, under the test root when K3_TEST_SYSFS_ROOT is set. */
static void sys_path(char *buf, size_t len, const char *path)
{
    const char *root = k3_test_hook_text("K3_TEST_SYSFS_ROOT");
    snprintf(buf, len, "%s%s", root && *root ? root : "", path);
}

/* The first number in a one-line file; "max" (v2 for none) and a missing or
 * unreadable file give no value. */
static int read_u64_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[64];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    char *end;
    unsigned long long v = strtoull(line, &end, 10);
    if (end == line) return -1;
    *out = v;
    return 0;
}

/* A "key value" entry of a memory.stat file (0 if absent). */
static uint64_t read_stat_key(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned long long v = 0;
    const size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, klen) && line[klen] == ' ') { v = strtoull(line + klen + 1, NULL, 10); break; }
    fclose(f);
    return v;
}

uint64_t k3_mem_available(void)
{
    char path[4096];
    sys_path(path, sizeof path, "/proc/meminfo");
    return k3_proc_kib_field_bytes(path, "MemAvailable:");
}

/* Every limit file of one cgroup directory: keep the one with the least
 * headroom (limit minus usage, page cache that can be dropped not counted). */
static void check_cgroup_dir(const char *dir, const char *cg_path, int v2, k3_mem_limit *best,
                             uint64_t *best_headroom)
{
    static const char *const v2_files[] = {"memory.max", "memory.high"};
    static const char *const v1_files[] = {"memory.limit_in_bytes"};
    const char *const *files = v2 ? v2_files : v1_files;
    const int n_files = v2 ? 2 : 1;
    char path[8400];
    uint64_t usage = 0;
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (read_u64_file(path, &usage)) usage = 0;
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    const uint64_t inactive = read_stat_key(path, v2 ? "inactive_file" : "total_inactive_file");
    const uint64_t in_use = usage > inactive ? usage - inactive : 0;
    for (int i = 0; i < n_files; i++) {
        uint64_t limit;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (read_u64_file(path, &limit) || limit >= NO_LIMIT_BYTES) continue;
        const uint64_t headroom = limit > in_use ? limit - in_use : 0;
        if (headroom >= *best_headroom) continue;
        *best_headroom = headroom;
        best->from_cgroup = 1;
        best->limit_bytes = limit;
        best->in_use_bytes = in_use;
        snprintf(best->source, sizeof best->source, "cgroup v%d %s of %.100s", v2 ? 2 : 1, files[i],
                 *cg_path ? cg_path : "/");
    }
}

/* The cgroup and every ancestor up to the mount's root: a parent's limit
 * binds its children too. A path absent under the mount (a cgroup
 * namespace shows the container's root there) falls through to the root. */
static void check_cgroup_path(const char *mount, const char *cg_path, int v2, k3_mem_limit *best,
                              uint64_t *best_headroom)
{
    char path[4096], dir[8256];
    snprintf(path, sizeof path, "%s", cg_path);
    for (;;) {
        size_t n = strlen(path);
        while (n > 0 && path[n - 1] == '/') path[--n] = 0;   /* "/a/b/" -> "/a/b", "/" -> "" */
        char root[4096];
        sys_path(root, sizeof root, mount);
        snprintf(dir, sizeof dir, "%s%s", root, path);
        check_cgroup_dir(dir, path, v2, best, best_headroom);
        if (n == 0) break;
        char *slash = strrchr(path, '/');
        if (!slash) break;
        *slash = 0;
    }
}

void k3_mem_limit_read(uint64_t self_rss_bytes, k3_mem_limit *out)
{
    memset(out, 0, sizeof *out);
    uint64_t headroom = k3_mem_available();
    snprintf(out->source, sizeof out->source, "MemAvailable");
    if (!headroom) headroom = UINT64_MAX;
    char path[4096], line[4096];
    sys_path(path, sizeof path, "/proc/self/cgroup");
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        /* "hierarchy-id:controllers:path"; v2 is "0::path" */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        if (!strcmp(line, "0") && !*ctrls) {
            check_cgroup_path("/sys/fs/cgroup", cg, 1, out, &headroom);
            check_cgroup_path("/sys/fs/cgroup/unified", cg, 1, out, &headroom);   /* hybrid layout */
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", ctrls);
            if (strstr(list, ",memory,")) check_cgroup_path("/sys/fs/cgroup/memory", cg, 0, out, &headroom);
        }
    }
    if (f) fclose(f);
    out->avail_bytes = headroom == UINT64_MAX ? 0 : headroom + self_rss_bytes;
}
