/* mem_limit.c - see mem_limit.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "k3.h"
#include "cgroup.h"
#include "file_read.h"
#include "mem_limit.h"

/* Limits at or above this are "no limit" (v1 writes 2^63 rounded to pages). */
#define NO_LIMIT_BYTES (1ull << 62)

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
    k3_sys_path(path, sizeof path, "/proc/meminfo");
    return k3_proc_kib_field_bytes(path, "MemAvailable:");
}

/* The limit with the least headroom found so far. */
typedef struct {
    k3_mem_limit *best;
    uint64_t headroom;        /* of *best */
} limit_search;

/* Every limit file of one cgroup directory (a k3_cgroup_dir_fn): keep the
 * one with the least headroom (limit minus usage, page cache that can be
 * dropped not counted). */
static void check_cgroup_dir(const char *dir, const char *cg_path, int v2, void *user)
{
    limit_search *search = user;
    k3_mem_limit *best = search->best;
    static const char *const v2_files[] = {"memory.max", "memory.high"};
    static const char *const v1_files[] = {"memory.limit_in_bytes"};
    const char *const *files = v2 ? v2_files : v1_files;
    const int n_files = v2 ? 2 : 1;
    char path[8400];
    uint64_t usage = 0;
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (k3_read_u64_file(path, &usage)) usage = 0;
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    const uint64_t inactive = read_stat_key(path, v2 ? "inactive_file" : "total_inactive_file");
    const uint64_t in_use = usage > inactive ? usage - inactive : 0;
    for (int i = 0; i < n_files; i++) {
        uint64_t limit;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (k3_read_u64_file(path, &limit) || limit >= NO_LIMIT_BYTES) continue;
        const uint64_t headroom = limit > in_use ? limit - in_use : 0;
        if (headroom >= search->headroom) continue;
        search->headroom = headroom;
        best->hard_limit = 1;
        best->cgroup = 1;
        best->limit_bytes = limit;
        best->in_use_bytes = in_use;
        snprintf(best->source, sizeof best->source, "cgroup v%d %s of %.100s", v2 ? 2 : 1, files[i],
                 *cg_path ? cg_path : "/");
    }
}

/* The rlimits on memory: RLIMIT_AS bounds the virtual size (every mapping,
 * the reserved stacks of threads included), RLIMIT_DATA the data segment
 * (heap and private writable mappings, since Linux 4.7). What the process
 * already spans of each is in /proc/self/status. */
static void check_rlimits(limit_search *search)
{
    static const struct {
        int resource;
        const char *name, *status_key;
    } limits[] = {
        {RLIMIT_AS, "RLIMIT_AS (ulimit -v)", "VmSize:"},
        {RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)", "VmData:"},
    };
    char status[4096];
    k3_sys_path(status, sizeof status, "/proc/self/status");
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        struct rlimit rl;
        if (getrlimit(limits[i].resource, &rl) || rl.rlim_cur == RLIM_INFINITY) continue;
        const uint64_t limit = rl.rlim_cur, used = k3_proc_kib_field_bytes(status, limits[i].status_key);
        const uint64_t headroom = limit > used ? limit - used : 0;
        if (headroom >= search->headroom) continue;
        search->headroom = headroom;
        search->best->hard_limit = 1;
        search->best->cgroup = 0;
        search->best->limit_bytes = limit;
        search->best->in_use_bytes = used;
        snprintf(search->best->source, sizeof search->best->source, "%s", limits[i].name);
    }
}

void k3_mem_limit_read(uint64_t self_rss_bytes, k3_mem_limit *out)
{
    memset(out, 0, sizeof *out);
    limit_search search = {out, k3_mem_available()};
    snprintf(out->source, sizeof out->source, "MemAvailable");
    if (!search.headroom) search.headroom = UINT64_MAX;
    static const char *const v1_mounts[] = {"/sys/fs/cgroup/memory", NULL};
    k3_cgroup_walk("memory", v1_mounts, check_cgroup_dir, &search);
    check_rlimits(&search);
    out->avail_bytes = search.headroom == UINT64_MAX ? 0 : search.headroom + self_rss_bytes;
}
