/* tool_trust.c - engine checks for threads, failed evaluations and the live
 * statistics, driven by tests/t_trust.sh (not part of k3). White-box: it may
 * look inside the engine's structs.
 *
 *   tool_trust threads MODEL "ids"
 *       an evaluation on a thread other than the model's creator, with 1 and
 *       with 5 compute threads (more than this machine's cores): logits equal
 *       to the single-thread ones on the creator, and the requested number of
 *       threads used (counted in /proc/self/task from the evaluating thread)
 *   tool_trust rollback MODEL "ids" MEM_MIB
 *       a read that fails (EIO) in the middle of an evaluation: the next
 *       evaluation of the remaining tokens gives the logits of a fresh
 *       session fed the same tokens, and a snapshot saved after the error
 *       equals one of a session that never failed
 *   tool_trust probe MODEL "ids" MEM_MIB
 *       the device probe borrows expert cache slots for its reads: between
 *       two evaluations it must leave the logits exactly as without it
 *   tool_trust stats-torn
 *       a writer flips counters across a 4 GiB boundary and appends records
 *       as fast as it can while a reader calls k3_stats_read: never a value
 *       that was not written, never a record mixing two writes
 *   tool_trust stats-stream MODEL "ids" MEM_MIB
 *       a reader hammering k3_stats_read while a budgeted model streams
 *       (byte counters started just below 4 GiB): no counter goes backwards
 *       or jumps by 4 GiB or more between two reads */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "forward.h"
#include "stats.h"
#include "tool_common.h"
#include "k3_util.h"

static int count_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* ---- threads ------------------------------------------------------------ */

typedef struct eval_job {
    k3_session *s;
    const int *ids;
    int n;
    float *logits;
    int rc, tasks_before, tasks_after;
    k3_error err;
} eval_job;

static void *eval_thread(void *arg)
{
    eval_job *j = arg;
    j->tasks_before = count_tasks();
    j->rc = k3_session_eval(j->s, j->ids, j->n, j->logits, &j->err);
    j->tasks_after = count_tasks();   /* the thread's OpenMP team stays parked until it exits */
    return NULL;
}

/* counts: the thread counts to try on the other thread ("1,5,3"; the
 * ThreadSanitizer run gives "1": libgomp's barriers are invisible to it). */
static int threads_check(const char *dir, const int *ids, int n, const char *counts_text)
{
    k3_error err;
    k3_options one = {.n_threads = 1, .ctx_tokens = n};
    k3_model *m = k3_model_open(dir, &one, &err);
    if (!m) { printf("FAIL threads open: %s\n", err.msg); return 1; }
    k3_model_info info;
    k3_model_get_info(m, &info);
    const size_t bytes = (size_t)n * info.vocab_size * sizeof(float);
    float *ref = malloc(bytes), *got = malloc(bytes);
    k3_session *s = k3_session_new(m, n, &err);
    if (!s || k3_session_eval(s, ids, n, ref, &err)) { printf("FAIL threads ref eval: %s\n", err.msg); return 1; }
    k3_session_free(s);
    k3_model_close(m);
    int fails = 0;
    int counts[8], n_counts = 0;
    for (const char *p = counts_text; *p && n_counts < 8; p++)
        if (p == counts_text || p[-1] == ',') counts[n_counts++] = atoi(p);
    for (int i = 0; i < n_counts; i++) {
        k3_options o = {.n_threads = counts[i], .ctx_tokens = n};
        m = k3_model_open(dir, &o, &err);
        s = m ? k3_session_new(m, n, &err) : NULL;   /* created here, evaluated on another thread */
        if (!s) { printf("FAIL threads open %d: %s\n", counts[i], err.msg); return 1; }
        memset(got, 0, bytes);
        eval_job j = {.s = s, .ids = ids, .n = n, .logits = got};
        pthread_t t;
        pthread_create(&t, NULL, eval_thread, &j);
        pthread_join(t, NULL);
        const int extra = j.tasks_after - j.tasks_before;
        if (j.rc) {
            printf("FAIL eval on another thread with %d threads: %s\n", counts[i], j.err.msg);
            fails++;
        } else if (memcmp(ref, got, bytes)) {
            printf("FAIL eval on another thread with %d threads: logits differ from 1 thread on the creator\n",
                   counts[i]);
            fails++;
        } else if (extra != counts[i] - 1) {
            printf("FAIL eval on another thread with %d threads: its OpenMP team added %d threads, want %d\n",
                   counts[i], extra, counts[i] - 1);
            fails++;
        } else {
            printf("PASS eval on another thread with %d threads (%d cores): logits identical to 1 thread, "
                   "%d threads used\n", counts[i], (int)sysconf(_SC_NPROCESSORS_ONLN), counts[i]);
        }
        k3_session_free(s);
        k3_model_close(m);
    }
    free(ref);
    free(got);
    return fails;
}

/* ---- rollback ----------------------------------------------------------- */

static int rollback_check(const char *dir, const int *ids, int n, const char *mem)
{
    k3_error err;
    /* chunks of 8 tokens, whatever the plan would choose at this budget: the
     * session must keep a whole number of them after the error */
    k3_options opt = {.mem_bytes = strtoull(mem, NULL, 10) << 20, .ctx_tokens = n, .chunk_tokens = 8};
    const int half = n / 2;
    /* A dry run: how many reads the model makes by the end of the first half
     * and of the second, so the failure can be aimed into the second. The
     * plan weighs what the process already holds (its RSS): at a budget 2 MiB
     * above the minimum a megabyte more moves a trunk unit or a cache slot,
     * and so the reads. The dry run is made twice and the second counted:
     * like each run that fails a read, it then follows a whole open,
     * evaluation and close. */
    unsetenv("K3_TEST_FAIL_READ");
    k3_model *m = NULL;
    k3_session *s = NULL;
    float *want = NULL, *got = NULL;
    size_t V = 0;
    uint64_t reads_half = 0, reads_all = 0;
    for (int pass = 0; pass < 2; pass++) {
        m = k3_model_open(dir, &opt, &err);
        if (!m) { printf("FAIL rollback open: %s\n", err.msg); return 1; }
        if (!want) {
            k3_model_info info;
            k3_model_get_info(m, &info);
            V = (size_t)info.vocab_size;
            want = calloc((size_t)n * V, sizeof(float));
            got = calloc((size_t)n * V, sizeof(float));
            memset(got, 0, (size_t)n * V * sizeof(float));   /* touched now, as the failing runs find it */
        }
        s = k3_session_new(m, n, &err);
        k3_stats st;
        if (!s || k3_session_eval(s, ids, half, want, &err)) { printf("FAIL rollback eval: %s\n", err.msg); return 1; }
        /* the trunk ring reads ahead into the next step: let the reads in
         * flight end before counting them */
        usleep(200 * 1000);
        k3_stats_read(m, &st);
        reads_half = st.reads_done;
        if (k3_session_eval(s, ids + half, n - half, want + half * V, &err)) {
            printf("FAIL rollback eval: %s\n", err.msg);
            return 1;
        }
        k3_stats_read(m, &st);
        reads_all = st.reads_done;
        /* the clean session's snapshot at the half */
        k3_session_reset(s);
        if (k3_session_eval(s, ids, half, NULL, &err) || k3_session_save(s, "tests/out/trust/clean.session", &err)) {
            printf("FAIL rollback save: %s\n", err.msg);
            return 1;
        }
        k3_session_free(s);
        k3_model_close(m);
    }
    if (reads_all - reads_half < 4) {
        printf("FAIL rollback: the second half reads only %llu times; use a smaller budget\n",
               (unsigned long long)(reads_all - reads_half));
        return 1;
    }
    int fails = 0, tried = 0;
    /* fail the second half's first read (the session then keeps the first
     * half: its snapshot must be the clean one), and reads half and three
     * quarters into the second half */
    for (int q = 1; q <= 3; q++) {
        char nth[32];
        snprintf(nth, sizeof nth, "%llu",
                 (unsigned long long)(q == 1 ? reads_half + 1 : reads_half + (reads_all - reads_half) * q / 4));
        setenv("K3_TEST_FAIL_READ", nth, 1);
        m = k3_model_open(dir, &opt, &err);
        unsetenv("K3_TEST_FAIL_READ");
        s = m ? k3_session_new(m, n, &err) : NULL;
        if (!s || k3_session_eval(s, ids, half, got, &err)) { printf("FAIL rollback eval: %s\n", err.msg); return 1; }
        int rc = k3_session_eval(s, ids + half, n - half, got + half * V, &err);
        const int kept = k3_session_n_tokens(s);
        if (rc == 0) {
            printf("FAIL rollback: read %s did not fail inside the second evaluation\n", nth);
            fails++;
        } else if (kept < half || kept >= n || (kept - half) % k3_model_chunk_tokens(m, NULL, 0)) {
            printf("FAIL rollback: after the error the session holds %d tokens, not a chunk boundary after %d\n",
                   kept, half);
            fails++;
        } else {
            tried++;
            /* a snapshot now, then the rest of the tokens again */
            int saved_ok = 1;
            if (kept == half) {
                if (k3_session_save(s, "tests/out/trust/after_error.session", &err)) {
                    printf("FAIL rollback save after the error: %s\n", err.msg);
                    fails++;
                    saved_ok = 0;
                } else if (!files_equal("tests/out/trust/after_error.session", "tests/out/trust/clean.session")) {
                    printf("FAIL rollback (read %s): a snapshot after the error differs from the clean one\n", nth);
                    fails++;
                    saved_ok = 0;
                }
            }
            if (k3_session_eval(s, ids + kept, n - kept, got + kept * V, &err)) {
                printf("FAIL rollback: the evaluation after the error failed: %s\n", err.msg);
                fails++;
            } else if (memcmp(want + kept * V, got + kept * V, (size_t)(n - kept) * V * sizeof(float)) ||
                       memcmp(k3_session_logits(s), want + (n - 1) * V, V * sizeof(float))) {
                printf("FAIL rollback (read %s failed): the next evaluation differs from a fresh session's\n", nth);
                fails++;
            } else if (saved_ok) {
                printf("PASS rollback: read %s failed (EIO) mid-evaluation; session kept %d tokens, its snapshot%s "
                       "is the clean one, and the next evaluation equals a fresh session's\n", nth, kept,
                       kept == half ? "" : " (not taken: a chunk completed first)");
            }
        }
        k3_session_free(s);
        k3_model_close(m);
    }
    if (!tried && !fails) { printf("FAIL rollback: no injected failure hit\n"); fails++; }
    free(want);
    free(got);
    return fails;
}

/* ---- device probe in the middle of a conversation ---- */

static int probe_check(const char *dir, const int *ids, int n, const char *mem)
{
    k3_error err;
    k3_options opt = {.mem_bytes = strtoull(mem, NULL, 10) << 20, .ctx_tokens = n};
    float *logits[2];
    double gbps = 0;
    uint64_t read_bytes = 0, rss0 = 0, rss1 = 0;
    int depth = 0, vocab = 0;
    for (int probe = 0; probe < 2; probe++) {
        k3_model *m = k3_model_open(dir, &opt, &err);
        k3_session *s = m ? k3_session_new(m, n, &err) : NULL;
        if (!s) { printf("FAIL probe open: %s\n", err.msg); return 1; }
        k3_model_info info;
        k3_model_get_info(m, &info);
        vocab = info.vocab_size;
        logits[probe] = malloc((size_t)n * vocab * sizeof(float));
        if (k3_session_eval(s, ids, n / 2, logits[probe], &err)) { printf("FAIL probe eval: %s\n", err.msg); return 1; }
        k3_stats st;
        k3_stats_read(m, &st);
        rss0 = st.rss_bytes;
        k3_device_probe dp;
        if (probe && k3_model_probe_device(m, 0.3, &dp, &err)) {
            printf("FAIL probe: %s\n", err.msg);
            return 1;
        }
        if (probe) {
            gbps = dp.gbps;
            read_bytes = dp.read_bytes;
            depth = dp.depth;
        }
        k3_stats_read(m, &st);
        rss1 = st.rss_bytes;
        if (k3_session_eval(s, ids + n / 2, n - n / 2, logits[probe] + (size_t)(n / 2) * vocab, &err)) {
            printf("FAIL probe eval: %s\n", err.msg);
            return 1;
        }
        k3_session_free(s);
        k3_model_close(m);
    }
    /* the experts whose slots the probe borrowed were read back */
    const int same = !memcmp(logits[0], logits[1], (size_t)n * vocab * sizeof(float));
    printf("%s device probe mid-conversation (%.2f GB/s, %d x %.2f MiB reads in cache slots): %s "
           "(RSS %+.1f MiB across the probe)\n", same && gbps > 0 ? "PASS" : "FAIL", gbps, depth,
           read_bytes / 1048576.0, same ? "logits identical to no probe" : "logits differ after the probe",
           ((double)rss1 - (double)rss0) / 1048576.0);
    free(logits[0]);
    free(logits[1]);
    return !same || gbps <= 0;
}

/* ---- statistics ----------------------------------------------------------- */

#define LOW_SIDE 0xFFFFFFF0ull          /* just below 4 GiB */
#define HIGH_SIDE 0x100000010ull        /* just above */

typedef struct stats_race {
    k3_model *m;
    int stop;            /* __atomic: the reader tells the writer to stop */
    uint64_t writes;
} stats_race;

/* Flip a counter across the 4 GiB boundary and append records whose every
 * field is derived from their index. */
static void *stats_writer(void *arg)
{
    stats_race *r = arg;
    k3_stats *st = &r->m->stats;
    for (uint64_t i = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE); i++) {
        stats_set64(&st->bytes_read_experts, i & 1 ? HIGH_SIDE : LOW_SIDE);
        stats_set64(&st->read_busy_ns, i & 1 ? LOW_SIDE : HIGH_SIDE);
        k3_token_record rec = {.index = i, .n_tokens = (uint32_t)i, .phase = (uint32_t)(i >> 32),
                               .bytes_trunk = i * 3, .bytes_experts = ~i, .expert_lookups = (uint32_t)(i * 7),
                               .expert_hits = (uint32_t)(i * 5), .ms = (float)(i & 0xffff)};
        stats_record(st, &rec);
        r->writes = i;
    }
    return NULL;
}

static int stats_torn_check(void)
{
    stats_race r = {.m = calloc(1, sizeof(k3_model))};
    r.m->stats.bytes_read_experts = LOW_SIDE;
    r.m->stats.read_busy_ns = HIGH_SIDE;
    pthread_t t;
    pthread_create(&t, NULL, stats_writer, &r);
    k3_stats *out = malloc(sizeof *out);
    uint64_t torn = 0, bad_records = 0, reads = 0, records_checked = 0, first_bad = 0;
    const uint64_t t_end = k3_now_ns() + 1500000000ull;
    while (k3_now_ns() < t_end) {
        k3_stats_read(r.m, out);
        reads++;
        const uint64_t a = out->bytes_read_experts, b = out->read_busy_ns;
        if ((a != LOW_SIDE && a != HIGH_SIDE) || (b != LOW_SIDE && b != HIGH_SIDE)) {
            if (!torn++) first_bad = a != LOW_SIDE && a != HIGH_SIDE ? a : b;
        }
        for (uint32_t i = 0; i < out->n_valid; i++) {
            const k3_token_record *x = &out->records[i];
            const uint64_t k = x->index;
            records_checked++;
            if (x->n_tokens != (uint32_t)k || x->phase != (uint32_t)(k >> 32) || x->bytes_trunk != k * 3 ||
                x->bytes_experts != ~k || x->expert_lookups != (uint32_t)(k * 7) ||
                x->expert_hits != (uint32_t)(k * 5) || x->ms != (float)(k & 0xffff) ||
                (i > 0 && k != out->records[i - 1].index + 1) || k >= out->n_records)
                bad_records++;
        }
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    int fails = 0;
    if (torn) {
        printf("FAIL stats: %llu of %llu reads saw a counter value never written (e.g. 0x%llx): torn 64-bit fields\n",
               (unsigned long long)torn, (unsigned long long)reads, (unsigned long long)first_bad);
        fails++;
    } else {
        printf("PASS stats: %llu reads during %llu writes across 4 GiB: no torn counter\n",
               (unsigned long long)reads, (unsigned long long)r.writes);
    }
    if (bad_records || !records_checked) {
        printf("FAIL stats: %llu of %llu records read were torn or out of order\n", (unsigned long long)bad_records,
               (unsigned long long)records_checked);
        fails++;
    } else {
        printf("PASS stats: %llu records read during appends, none torn, each run consecutive\n",
               (unsigned long long)records_checked);
    }
    free(out);
    free(r.m);
    return fails;
}

typedef struct stream_reader {
    const k3_model *m;
    int stop;            /* __atomic: the evaluating thread tells the reader to stop */
    uint64_t reads, backwards, jumps;
    char first[200];
} stream_reader;

static void *stats_hammer(void *arg)
{
    stream_reader *r = arg;
    k3_stats *prev = malloc(sizeof *prev), *cur = malloc(sizeof *cur);
    k3_stats_read(r->m, prev);
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        k3_stats_read(r->m, cur);
        r->reads++;
        const struct { const char *name; uint64_t a, b; } f[] = {
            {"bytes_read_trunk", prev->bytes_read_trunk, cur->bytes_read_trunk},
            {"bytes_read_experts", prev->bytes_read_experts, cur->bytes_read_experts},
            {"bytes_read_other", prev->bytes_read_other, cur->bytes_read_other},
            {"reads_done", prev->reads_done, cur->reads_done},
            {"read_busy_ns", prev->read_busy_ns, cur->read_busy_ns},
            {"expert_lookups", prev->expert_lookups, cur->expert_lookups},
            {"expert_hits", prev->expert_hits, cur->expert_hits},
            {"n_records", prev->n_records, cur->n_records}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            if (f[i].b < f[i].a && !r->backwards++ && !r->jumps)
                snprintf(r->first, sizeof r->first, "%s went from %llu to %llu", f[i].name,
                         (unsigned long long)f[i].a, (unsigned long long)f[i].b);
            if (f[i].b >= f[i].a + (4ull << 30) && !r->jumps++ && !r->backwards)
                snprintf(r->first, sizeof r->first, "%s jumped from %llu to %llu", f[i].name,
                         (unsigned long long)f[i].a, (unsigned long long)f[i].b);
        }
        k3_stats *t = prev;
        prev = cur;
        cur = t;
    }
    free(prev);
    free(cur);
    return NULL;
}

static int stats_stream_check(const char *dir, const int *ids, int n, const char *mem)
{
    k3_error err;
    /* compute threads as the command line sets them (OMP_NUM_THREADS, else all
     * cores): the ThreadSanitizer run gives 1 */
    const char *omp = getenv("OMP_NUM_THREADS");
    k3_options opt = {.mem_bytes = strtoull(mem, NULL, 10) << 20, .ctx_tokens = n,
                      .n_threads = omp ? atoi(omp) : 0};
    k3_model *m = k3_model_open(dir, &opt, &err);
    k3_session *s = m ? k3_session_new(m, n, &err) : NULL;
    if (!s) { printf("FAIL stats stream open: %s\n", err.msg); return 1; }
    /* start the byte counters just below 4 GiB, so reads carry them across */
    stats_add(&m->stats.bytes_read_experts, (4ull << 30) - (m->stats.bytes_read_experts + (1 << 20)));
    stats_add(&m->stats.read_busy_ns, (4ull << 30) - (m->stats.read_busy_ns + 1000));
    stream_reader r = {.m = m};
    pthread_t t;
    pthread_create(&t, NULL, stats_hammer, &r);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = k3_session_eval(s, ids + i, 1, NULL, &err);
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    k3_stats st;
    k3_stats_read(m, &st);
    int fails = 0;
    if (rc) {
        printf("FAIL stats stream eval: %s\n", err.msg);
        fails++;
    } else if (r.backwards || r.jumps || st.bytes_read_experts < (4ull << 30)) {
        printf("FAIL stats while streaming: %llu backwards, %llu jumps >= 4 GiB in %llu reads (%s)%s\n",
               (unsigned long long)r.backwards, (unsigned long long)r.jumps, (unsigned long long)r.reads, r.first,
               st.bytes_read_experts < (4ull << 30) ? "; the counter never crossed 4 GiB" : "");
        fails++;
    } else {
        printf("PASS stats while streaming: %llu reads by another thread, counters crossed 4 GiB, "
               "none went backwards or jumped\n", (unsigned long long)r.reads);
    }
    k3_session_free(s);
    k3_model_close(m);
    return fails;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "stats-torn")) return stats_torn_check() ? 1 : 0;
    if (argc < 4) {
        fprintf(stderr, "usage: tool_trust threads|rollback|probe|stats-stream MODEL \"ids\" [MEM_MIB | thread counts \"1,5,3\"] | stats-torn\n");
        return 2;
    }
    int n, *ids = parse_ids(argv[3], &n), rc = 1;
    if (!strcmp(argv[1], "threads")) rc = threads_check(argv[2], ids, n, argc >= 5 ? argv[4] : "1,5,3");
    else if (!strcmp(argv[1], "rollback") && argc == 5) rc = rollback_check(argv[2], ids, n, argv[4]);
    else if (!strcmp(argv[1], "probe") && argc == 5) rc = probe_check(argv[2], ids, n, argv[4]);
    else if (!strcmp(argv[1], "stats-stream") && argc == 5) rc = stats_stream_check(argv[2], ids, n, argv[4]);
    else fprintf(stderr, "tool_trust: unknown check '%s'\n", argv[1]);
    free(ids);
    return rc ? 1 : 0;
}
