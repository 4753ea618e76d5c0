/* cpu_limit.c - see cpu_limit.h. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "k3.h"
#include "cgroup.h"
#include "cpu_limit.h"

/* Quotas below a hundredth of a CPU are taken as misreadings, not limits. */
#define MIN_QUOTA_CPUS 0.01

/* A cgroup path as the reason names it: quotes, backslashes and control
 * bytes become '_', so the reason can go into JSON as it is (plan JSON). */
static void plain_path(char *dst, size_t len, const char *cg_path)
{
    size_t i = 0;
    for (; cg_path[i] && i + 1 < len; i++) {
        const unsigned char c = (unsigned char)cg_path[i];
        dst[i] = c < 0x20 || c == '"' || c == '\\' || c == 0x7f ? '_' : (char)c;
    }
    dst[i] = 0;
}

/* One cgroup directory's quota (a k3_cgroup_dir_fn): v2 "cpu.max" holds
 * "QUOTA PERIOD" or "max PERIOD"; v1 has cpu.cfs_quota_us (-1 = none) and
 * cpu.cfs_period_us. The smallest quota in CPUs wins. */
static void check_cgroup_dir(const char *dir, const char *cg_path, int v2, void *user)
{
    k3_cpu_limit *lim = user;
    char path[8400];
    unsigned long long quota = 0, period = 0;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        FILE *f = fopen(path, "r");
        if (!f) return;
        int n = fscanf(f, "%llu %llu", &quota, &period);
        fclose(f);
        if (n != 2) return;                  /* "max ...": no quota */
    } else {
        uint64_t q, p;
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        if (k3_read_u64_file(path, &q)) return;   /* missing, or -1: no quota */
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        if (k3_read_u64_file(path, &p)) return;
        quota = q, period = p;
    }
    if (period == 0) return;
    const double cpus = (double)quota / (double)period;
    if (cpus < MIN_QUOTA_CPUS || (lim->quota_cpus > 0 && cpus >= lim->quota_cpus)) return;
    lim->quota_cpus = cpus;
    char shown[101];
    plain_path(shown, sizeof shown, *cg_path ? cg_path : "/");
    snprintf(lim->source, sizeof lim->source, "cgroup v%d %s of %s: %.2f CPUs", v2 ? 2 : 1,
             v2 ? "cpu.max" : "cpu.cfs_quota_us", shown, cpus);
}

void k3_cpu_limit_read(k3_cpu_limit *out)
{
    memset(out, 0, sizeof *out);
    out->cpus = omp_get_num_procs();          /* libgomp counts the affinity mask */
    if (out->cpus < 1) out->cpus = 1;
    static const char *const v1_mounts[] = {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", NULL};
    k3_cgroup_walk("cpu", v1_mounts, check_cgroup_dir, out);
    out->threads = out->cpus;
    if (out->quota_cpus > 0 && out->quota_cpus < out->cpus) {
        out->threads = (int)floor(out->quota_cpus);
        if (out->threads < 1) out->threads = 1;
    } else {
        snprintf(out->source, sizeof out->source, "%d CPU%s this process may run on%s", out->cpus,
                 out->cpus == 1 ? "" : "s", out->quota_cpus > 0 ? " (a cgroup quota allows more)" : "");
    }
}

int k3_default_threads(char *why, size_t why_len)
{
    k3_cpu_limit lim;
    k3_cpu_limit_read(&lim);
    if (why && why_len) snprintf(why, why_len, "%s", lim.source);
    return lim.threads;
}

/* The threads of one k3_threads_startable probe wait here until the probe
 * has tried them all, so each one holds its slot of the pids limit. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t go;
    int released;
} thread_probe;

static void *probe_thread(void *arg)
{
    thread_probe *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->released) pthread_cond_wait(&p->go, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int k3_threads_startable(int want)
{
    if (want <= 0) return 0;
    if (want > K3_THREAD_PROBE_MAX) want = K3_THREAD_PROBE_MAX;
    pthread_t threads[K3_THREAD_PROBE_MAX];
    thread_probe p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int started = 0;
    while (started < want && pthread_create(&threads[started], &attr, probe_thread, &p) == 0) started++;
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&p.lock);
    p.released = 1;
    pthread_cond_broadcast(&p.go);
    pthread_mutex_unlock(&p.lock);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    return started;
}

/* See cpu_limit.h. */
size_t k3_l3_cache_bytes(void)
{
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (v > 0) return (size_t)v;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    unsigned long kib = 0;
    if (f) {
        if (fscanf(f, "%luK", &kib) != 1) kib = 0;
        fclose(f);
    }
    return kib ? (size_t)kib << 10 : (size_t)32 << 20;
}
