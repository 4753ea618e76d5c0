/* prefault.c - fault an arena's pages in ahead of use, in the background.
 *
 * Why: memory touched for the first time is slow on a VM that hands freed
 * memory back to its host (about 0.5 GB/s here, against 2 GB/s for the
 * disk). The expert cache's slots are first touched by the reads of the
 * first misses, so the first answers after opening pay the host's first
 * touch on top of the disk, on the reader threads, beside the compute:
 * k3 bench measured decode at 97-99% hits 25-65% slower than the plan, its
 * reads at 0.22-0.27 GB/s where the probe gave 1.8, in a 16-token run
 * whose every miss landed in a slot never used. Faulting the arena in
 * while the CPU idles (the user typing, the model waiting for the disk)
 * moves that cost off the answer's path.
 *
 * How: madvise(MADV_POPULATE_WRITE) 2 MiB at a time (the huge page size,
 * so a huge page is allocated whole), from a SCHED_IDLE thread. It faults
 * pages in writable without writing them: a slot the reader is filling at
 * the same moment keeps its bytes, and a page already present is left as
 * it is. Stopping waits for the 2 MiB in progress at most. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "huge_pages.h"
#include "prefault.h"
#include "k3.h"
#include "k3_util.h"

struct k3_prefault {
    uint8_t *mem;
    size_t bytes;
    pthread_t thread;
    atomic_int stop;
    atomic_uint_fast64_t done_bytes;
    uint64_t t0_ns, t1_ns;        /* start; done (t1 written before `finished`) */
    atomic_int finished;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

/* 2 MiB pieces from the start (the order the cache hands out its slots). */
static void *prefault_thread(void *arg)
{
    k3_prefault *p = arg;
    struct sched_param none = {0};
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);   /* best effort: else it is merely one more thread */
    int failed = 0;
    for (size_t off = 0; off < p->bytes && !failed && !atomic_load(&p->stop); off += K3_HUGE_PAGE_BYTES) {
        const size_t n = p->bytes - off < K3_HUGE_PAGE_BYTES ? p->bytes - off : K3_HUGE_PAGE_BYTES;
        /* EINTR and EAGAIN are tried again (a few times); anything else
         * (ENOMEM: no memory to fault in) ends it, and the first reads
         * fault the rest in as before */
        int tries = 0;
        while (madvise(p->mem + off, n, MADV_POPULATE_WRITE) != 0)
            if ((errno != EINTR && errno != EAGAIN) || ++tries == 4) { failed = 1; break; }
        if (!failed) atomic_fetch_add(&p->done_bytes, n);
    }
    pthread_mutex_lock(&p->lock);
    p->t1_ns = k3_now_ns();
    atomic_store(&p->finished, 1);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

k3_prefault *k3_prefault_start(void *mem, size_t bytes)
{
    if (!mem || !bytes) return NULL;
    /* the page that holds mem: madvise wants page-aligned starts */
    const uintptr_t page = 4096, start = (uintptr_t)mem & ~(page - 1);
    bytes += (uintptr_t)mem - start;
    /* the first piece tells whether the kernel knows MADV_POPULATE_WRITE
     * (EINVAL before 5.14): nothing is started when it does not */
    const size_t first = bytes < page ? bytes : page;
    if (madvise((void *)start, first, MADV_POPULATE_WRITE) != 0) return NULL;
    k3_prefault *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->mem = (uint8_t *)start;
    p->bytes = bytes;
    p->t0_ns = k3_now_ns();
    atomic_init(&p->stop, 0);
    atomic_init(&p->done_bytes, 0);
    atomic_init(&p->finished, 0);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    /* created with every signal blocked that another thread should take
     * (Ctrl-C, the terminal's resize, ...); faults still reach their handler */
    sigset_t block, old;
    sigfillset(&block);
    const int synchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++) sigdelset(&block, synchronous[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    const int rc = pthread_create(&p->thread, NULL, prefault_thread, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
        return NULL;
    }
    return p;
}

void k3_prefault_wait(k3_prefault *p, uint64_t *bytes, double *seconds)
{
    *bytes = 0;
    *seconds = 0;
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    while (!atomic_load(&p->finished)) pthread_cond_wait(&p->cond, &p->lock);
    *seconds = (p->t1_ns - p->t0_ns) * 1e-9;
    pthread_mutex_unlock(&p->lock);
    *bytes = atomic_load(&p->done_bytes);
}

uint64_t k3_prefault_done_bytes(const k3_prefault *p)
{
    return p ? atomic_load(&p->done_bytes) : 0;
}

void k3_prefault_stop(k3_prefault *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
