/* cpu_limit.h - how many compute threads to run when --threads is not
 * given: the CPUs this process may run on (its affinity mask), capped by
 * every CPU quota a cgroup above it sets (v2 cpu.max, v1 cpu.cfs_quota_us /
 * cpu.cfs_period_us; `docker run --cpus`, Kubernetes CPU limits).
 *
 * Why: OpenMP threads meet at a barrier after every kernel, so one thread
 * more than the quota allows gets the whole group throttled for the rest of
 * each period. Measured on a 2-core machine under a 1-CPU quota (demo
 * model, 48 tokens): 2 threads decoded 1.8-6.9 tokens/s, 1 thread 63-115.
 * So the default is the quota rounded down, never below 1 thread. */
#ifndef K3_CPU_LIMIT_H
#define K3_CPU_LIMIT_H

typedef struct k3_cpu_limit {
    int threads;              /* the default compute thread count (>= 1) */
    int cpus;                 /* CPUs in the affinity mask */
    double quota_cpus;        /* the smallest quota above the process, in CPUs; 0 = none */
    char source[160];         /* why: e.g. "cgroup v1 cpu.cfs_quota_us of /k3: 1.00 CPUs"
                               * (no quote, backslash or control byte) */
} k3_cpu_limit;

/* The most threads one k3_threads_startable call tries. */
#define K3_THREAD_PROBE_MAX 256

/* How many of `want` more threads this process can start now (at most
 * K3_THREAD_PROBE_MAX): it starts them, holds them all at once, then lets
 * them finish. A cgroup pids limit (docker --pids-limit) or RLIMIT_NPROC
 * makes thread creation fail, and libgomp ends the process when it cannot
 * start a thread of a parallel region; asking first lets the model run
 * with the threads it can have. */
int k3_threads_startable(int want);

/* Fill *out (reads /proc/self/cgroup and the cgroup files; test hook
 * K3_TEST_SYSFS_ROOT as in cgroup.h). */
void k3_cpu_limit_read(k3_cpu_limit *out);

/* The last-level (L3) cache's bytes: glibc's sysconf, else sysfs, else 32
 * MiB. Speed probes stream more than twice this, so a pass cannot find
 * the previous pass's bytes still cached: these VMs have shown 32 MiB and
 * 260 MiB, and a 256 MiB matrix read again and again came partly from the
 * 260 MiB L3. */
size_t k3_l3_cache_bytes(void);

#endif
