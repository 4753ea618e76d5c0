/* test_mem_limit.c - the container limits k3 plans for. The memory limit
 * without --mem comes from the smallest of MemAvailable and every cgroup
 * limit above the process, less what the cgroup already uses (reclaimable
 * page cache not counted); the compute threads without --threads are the
 * CPUs the process may use, capped by the smallest cgroup CPU quota above
 * it, rounded down (cpu_limit.h says why). The machine's own cgroup layout
 * is whatever it is, so fake /proc and /sys trees are built under
 * tests/out/ and given through K3_TEST_SYSFS_ROOT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "k3.h"
#include "cpu_limit.h"
#include "mem_limit.h"
#include "test.h"

#define MIB (1024ull * 1024)
static char root[512];

/* mkdir -p of the parent, then write text to root/rel. */
static void put(const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(path, 0755); *p = '/'; }
    FILE *f = fopen(path, "w");
    if (!f) { printf("FAIL mem_limit: cannot write %s\n", path); exit(1); }
    fputs(text, f);
    fclose(f);
}

static void new_root(const char *name)
{
    snprintf(root, sizeof root, "tests/out/mem_limit/%s", name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    if (system(cmd)) exit(1);
    setenv("K3_TEST_SYSFS_ROOT", root, 1);
    put("proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         1000 kB\nMemAvailable:    8388608 kB\n");
}

int main(void)
{
    k3_mem_limit lim;
    const uint64_t rss = 10 * MIB;

    TEST_BEGIN("mem_limit_v2_memory_high_of_own_cgroup");
    new_root("v2");
    put("proc/self/cgroup", "0::/a/b\n");
    put("sys/fs/cgroup/a/memory.max", "1073741824\n");
    put("sys/fs/cgroup/a/memory.current", "104857600\n");
    put("sys/fs/cgroup/a/b/memory.max", "max\n");
    put("sys/fs/cgroup/a/b/memory.high", "524288000\n");                   /* 500 MiB */
    put("sys/fs/cgroup/a/b/memory.current", "104857600\n");                /* 100 MiB */
    put("sys/fs/cgroup/a/b/memory.stat", "anon 50000000\nfile 60000000\ninactive_file 41943040\nactive_file 1\n");
    k3_mem_limit_read(rss, &lim);
    CHECK(lim.hard_limit && lim.cgroup, "no cgroup limit found: %s", lim.source);
    CHECK(lim.limit_bytes == 500 * MIB, "limit %llu", (unsigned long long)lim.limit_bytes);
    CHECK(lim.avail_bytes == 500 * MIB - 60 * MIB + rss, "avail %.1f MiB, want 450", lim.avail_bytes / (double)MIB);
    CHECK(strstr(lim.source, "cgroup v2 memory.high of /a/b") != NULL, "source '%s'", lim.source);
    TEST_END();

    TEST_BEGIN("mem_limit_v2_parent_limit_binds_the_child");
    put("sys/fs/cgroup/a/memory.max", "314572800\n");                      /* 300 MiB, 100 in use */
    k3_mem_limit_read(rss, &lim);
    CHECK(lim.avail_bytes == 200 * MIB + rss, "avail %.1f MiB, want 210", lim.avail_bytes / (double)MIB);
    CHECK(strstr(lim.source, "cgroup v2 memory.max of /a") != NULL, "source '%s'", lim.source);
    TEST_END();

    TEST_BEGIN("mem_limit_v1_memory_limit_in_bytes");
    new_root("v1");
    put("proc/self/cgroup", "5:devices:/x\n4:memory:/k3test\n0::/\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/k3test/memory.limit_in_bytes", "314572800\n");
    put("sys/fs/cgroup/memory/k3test/memory.usage_in_bytes", "62914560\n"); /* 60 MiB */
    put("sys/fs/cgroup/memory/k3test/memory.stat", "cache 1\ninactive_file 999999999\ntotal_inactive_file 10485760\n");
    put("sys/fs/cgroup/unified/memory.stat", "ignored 1\n");
    k3_mem_limit_read(rss, &lim);
    CHECK(lim.hard_limit && lim.cgroup && lim.limit_bytes == 300 * MIB, "limit %llu from %s",
          (unsigned long long)lim.limit_bytes, lim.source);
    CHECK(lim.avail_bytes == 250 * MIB + rss, "avail %.1f MiB, want 260", lim.avail_bytes / (double)MIB);
    CHECK(strstr(lim.source, "cgroup v1 memory.limit_in_bytes of /k3test") != NULL, "source '%s'", lim.source);
    TEST_END();

    TEST_BEGIN("mem_limit_v1_namespaced_path_falls_back_to_the_mount_root");
    put("proc/self/cgroup", "4:memory:/docker/abc\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "209715200\n");       /* 200 MiB at the root */
    k3_mem_limit_read(rss, &lim);
    CHECK(lim.hard_limit && lim.limit_bytes == 200 * MIB, "limit %llu from %s", (unsigned long long)lim.limit_bytes,
          lim.source);
    TEST_END();

    TEST_BEGIN("mem_limit_no_cgroup_limit_is_memavailable");
    new_root("none");
    put("proc/self/cgroup", "4:memory:/\n0::/\n");
    put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory.max", "max\n");
    k3_mem_limit_read(rss, &lim);
    CHECK(!lim.hard_limit && !lim.cgroup && !strcmp(lim.source, "MemAvailable"), "source '%s'", lim.source);
    CHECK(lim.avail_bytes == 8192 * MIB + rss, "avail %.1f MiB", lim.avail_bytes / (double)MIB);
    TEST_END();

    TEST_BEGIN("mem_limit_cgroup_smaller_than_memavailable_only_when_it_is");
    new_root("big");
    put("proc/self/cgroup", "0::/big\n");
    put("sys/fs/cgroup/big/memory.max", "17179869184\n");                  /* 16 GiB > 8 GiB available */
    k3_mem_limit_read(rss, &lim);
    CHECK(!lim.hard_limit, "a 16 GiB cgroup limit won over 8 GiB available: %s", lim.source);
    TEST_END();

    k3_cpu_limit cpu;
    TEST_BEGIN("cpu_quota_v2_parent_quota_binds_the_child");
    new_root("cpu_v2");
    put("proc/self/cgroup", "0::/a/b\n");
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/a/cpu.max", "50000 100000\n");                    /* half a CPU */
    put("sys/fs/cgroup/a/b/cpu.max", "max 100000\n");
    k3_cpu_limit_read(&cpu);
    CHECK(cpu.quota_cpus == 0.5, "quota %g CPUs from %s", cpu.quota_cpus, cpu.source);
    CHECK(cpu.threads == 1, "threads %d under half a CPU", cpu.threads);
    CHECK(strstr(cpu.source, "cgroup v2 cpu.max of /a: 0.50 CPUs") != NULL, "source '%s'", cpu.source);
    TEST_END();

    TEST_BEGIN("cpu_quota_v1_cfs_quota_rounded_down");
    new_root("cpu_v1");
    put("proc/self/cgroup", "4:memory:/m\n3:cpu,cpuacct:/k3\"x\n");
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");             /* none at the root */
    put("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/k3\"x/cpu.cfs_quota_us", "150000\n");    /* 1.5 CPUs */
    put("sys/fs/cgroup/cpu,cpuacct/k3\"x/cpu.cfs_period_us", "100000\n");
    k3_cpu_limit_read(&cpu);
    CHECK(cpu.quota_cpus == 1.5, "quota %g CPUs from %s", cpu.quota_cpus, cpu.source);
    CHECK(cpu.threads == 1, "threads %d under 1.5 CPUs (one more than the quota stalls every barrier)", cpu.threads);
    CHECK(strstr(cpu.source, "cgroup v1 cpu.cfs_quota_us of /k3_x: 1.50 CPUs") != NULL, "source '%s'", cpu.source);
    TEST_END();

    TEST_BEGIN("cpu_quota_none_or_above_the_cpus_leaves_the_cpus");
    new_root("cpu_none");
    put("proc/self/cgroup", "0::/big\n1:cpu:/\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    k3_cpu_limit_read(&cpu);
    CHECK(cpu.quota_cpus == 0 && cpu.threads == cpu.cpus && cpu.cpus >= 1, "no quota: threads %d of %d CPUs (%s)",
          cpu.threads, cpu.cpus, cpu.source);
    put("sys/fs/cgroup/big/cpu.max", "409600000 100000\n");              /* 4096 CPUs */
    k3_cpu_limit_read(&cpu);
    CHECK(cpu.quota_cpus == 4096 && cpu.threads == cpu.cpus, "quota above the CPUs: threads %d of %d CPUs (%s)",
          cpu.threads, cpu.cpus, cpu.source);
    char why[160];
    CHECK(k3_default_threads(why, sizeof why) == cpu.threads && strstr(why, "CPU"), "k3_default_threads: '%s'", why);
    TEST_END();

    /* without a pids limit every thread asked for starts (the real limit is
     * exercised by tests/t_trust.sh, which creates one) */
    TEST_BEGIN("threads_startable_starts_what_is_asked_up_to_its_cap");
    CHECK(k3_threads_startable(0) == 0, "0 asked");
    CHECK(k3_threads_startable(5) == 5, "5 asked: %d", k3_threads_startable(5));
    CHECK(k3_threads_startable(K3_THREAD_PROBE_MAX + 10) == K3_THREAD_PROBE_MAX, "%d asked: %d",
          K3_THREAD_PROBE_MAX + 10, k3_threads_startable(K3_THREAD_PROBE_MAX + 10));
    TEST_END();
    TEST_EXIT();
}
