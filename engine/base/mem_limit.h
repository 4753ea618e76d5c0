/* mem_limit.h - how much memory this process may use when no --mem is
 * given: the smallest of MemAvailable, the headroom of every memory cgroup
 * limit above the process (v2 memory.max and memory.high, v1
 * memory.limit_in_bytes) and of the address-space and data limits
 * (ulimit -v: RLIMIT_AS against the process's virtual size; RLIMIT_DATA
 * against its data segment), so a container or a shell limit is planned
 * for instead of ending in an OOM kill or a failed allocation.
 *
 * Test hook: K3_TEST_SYSFS_ROOT=DIR reads DIR/proc/self/cgroup,
 * DIR/proc/meminfo and DIR/sys/fs/cgroup/... instead of the real files
 * (tests/test_mem_limit.c builds fake cgroup v1 and v2 trees there). */
#ifndef K3_MEM_LIMIT_H
#define K3_MEM_LIMIT_H

#include <stdint.h>

typedef struct k3_mem_limit {
    /* bytes this process may hold in total (what it holds now included):
     * the smallest headroom found plus its own resident set; 0 = unknown */
    uint64_t avail_bytes;
    int hard_limit;           /* 1 if a cgroup limit or an rlimit was the smallest */
    int cgroup;               /* 1 if that was a memory cgroup's limit (its processes are
                               * OOM-killed past it; an rlimit fails an allocation instead) */
    uint64_t limit_bytes;     /* that limit (0 for MemAvailable) */
    uint64_t in_use_bytes;    /* what counts against it now: the cgroup's usage less reclaimable
                               * page cache, or the virtual size / data segment for an rlimit */
    char source[160];         /* e.g. "cgroup v1 memory.limit_in_bytes of /k3test", "RLIMIT_AS (ulimit -v)"
                               * or "MemAvailable" */
} k3_mem_limit;

/* Fill *out; self_rss_bytes is this process's resident set now. */
void k3_mem_limit_read(uint64_t self_rss_bytes, k3_mem_limit *out);

/* MemAvailable from /proc/meminfo (bytes), 0 if unknown. */
uint64_t k3_mem_available(void);

#endif
