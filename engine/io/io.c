/* io.c - see io.h. One queue (urgent reads first, see io_before()) feeds a
 * back end from the table below: a pool of pread threads (io_pool.c) or one
 * io_uring thread (io_uring.c); completions wake waiters through a
 * condition variable. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "io_backend.h"
#include "stats.h"
#include "k3_util.h"

/* The back ends, by k3_io_backend. */
static const io_backend_ops *const backends[] = {[K3_IO_POOL] = &io_pool_ops, [K3_IO_URING] = &io_uring_ops};

const char *k3_io_backend_name(k3_io_backend b) { return backends[b == K3_IO_URING]->name; }

/* Called with the lock held: a read starts / ends (busy time, in-flight gauge). */
void io_begin_read_locked(k3_io *io)
{
    if (io->in_flight++ == 0) io->busy_since_ns = k3_now_ns();
    stats_set32(&io->stats->reads_in_flight, (uint32_t)io->in_flight);
}

/* Lock held, a read in flight: the busy time up to now goes into the
 * stats at every completion, not only when the reader falls idle: a ring
 * that streams the trunk keeps reads in flight for a whole decode pass, and
 * a snapshot taken meanwhile must see its busy time. */
void io_add_busy_time_locked(k3_io *io)
{
    const uint64_t now = k3_now_ns();
    stats_add(&io->stats->read_busy_ns, now - io->busy_since_ns);
    io->busy_since_ns = now;
}

void io_end_read_locked(k3_io *io, k3_io_req *r, int failed)
{
    assert(io->in_flight > 0);            /* every end matches a begin */
    io_add_busy_time_locked(io);
    io->in_flight--;
    stats_set32(&io->stats->reads_in_flight, (uint32_t)io->in_flight);
    uint64_t *counter = r->kind == K3_READ_TRUNK ? &io->stats->bytes_read_trunk
                      : r->kind == K3_READ_EXPERT || r->kind == K3_READ_AHEAD ? &io->stats->bytes_read_experts
                                                                              : &io->stats->bytes_read_other;
    stats_add(counter, r->got);
    stats_add(&io->stats->reads_done, 1);
    __atomic_store_n(&r->state, failed ? -1 : 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&io->done);
}

/* Room for `more` queued requests (lock held); 0, or -1 when out of memory
 * (the queue is unchanged). */
int io_reserve_queue_locked(k3_io *io, int more)
{
    if (io->n_queued + more <= io->cap_queued) return 0;
    int cap = io->cap_queued ? io->cap_queued : 64;
    while (io->n_queued + more > cap) cap *= 2;
    k3_io_req **g = realloc(io->queue, (size_t)cap * sizeof *g);
    if (!g) return -1;
    io->queue = g;
    io->cap_queued = cap;
    return 0;
}

/* The queue's order. A routed expert's page (or an embedding row, or a
 * probe's read) is wanted by the layer running now; a trunk unit is the
 * ring reading ahead for a later layer; a read-ahead guess is an expert
 * page a later layer may want. So the urgent reads (rank 0) go before every
 * trunk read (rank 1) not yet issued, and the guesses (rank 2) after both,
 * so a wrong guess never delays a read that is needed. Within a rank the
 * reads keep the order they came in: the trunk's is the order the layers
 * need them, and an expert's reads (a GGUF stores its three matrices far
 * apart) are queued together, so the experts arrive one by one and the
 * first can be computed while the next is read; in file order, every
 * gate came before any down matrix and no expert was whole until the last
 * reads. When the trunk's reads came first, a layer's expert misses waited
 * for the whole next unit (k3-16g at its smallest budget: 32 ms a layer,
 * against 12 for the pages themselves). */
int io_rank(const k3_io_req *r)
{
    return r->kind == K3_READ_TRUNK ? 1 : r->kind == K3_READ_AHEAD ? 2 : 0;
}

static int io_before(const k3_io_req *a, const k3_io_req *b) { return io_rank(a) < io_rank(b); }

/* Put r in the queue at position at (lock held, room reserved). */
void io_insert_at_locked(k3_io *io, int at, k3_io_req *r)
{
    assert(at >= 0 && at <= io->n_queued && io->n_queued < io->cap_queued);   /* room was reserved */
    memmove(io->queue + at + 1, io->queue + at, (size_t)(io->n_queued - at) * sizeof *io->queue);
    io->queue[at] = r;
    io->n_queued++;
}

/* Put r in the queue at its place (lock held, room reserved). */
static void insert_locked(k3_io *io, k3_io_req *r)
{
    int at = io->n_queued;
    while (at > 0 && io_before(r, io->queue[at - 1])) at--;
    io_insert_at_locked(io, at, r);
}

/* Test hook: does this read fail on purpose? (lock held) */
int io_injected_failure_locked(k3_io *io)
{
    if (io->inject_countdown > 0 && --io->inject_countdown == 0) return io->inject_errno;
    return 0;
}

/* Pop the first request (lock held). */
k3_io_req *io_pop_locked(k3_io *io)
{
    if (!io->n_queued) return NULL;
    assert(io->n_queued <= io->cap_queued);
    k3_io_req *r = io->queue[0];
    memmove(io->queue, io->queue + 1, (size_t)(--io->n_queued) * sizeof *io->queue);
    return r;
}

k3_io *k3_io_open(k3_io_backend backend, int depth, k3_stats *stats, k3_error *err)
{
    k3_io *io = calloc(1, sizeof *io);
    if (!io) { k3_err(err, "out of memory"); return NULL; }
    io->backend = backend;
    io->depth = depth < 1 ? 1 : depth > K3_IO_MAX_THREADS ? K3_IO_MAX_THREADS : depth;
    io->stats = stats;
    /* test hook (test_hooks.c): reads in 12 KiB pieces, so every request
     * goes through the short-read path */
    if (k3_test_hook("K3_TEST_SHORT_READS") == 1) io->max_piece = 3 * K3_IO_ALIGN;
    pthread_mutex_init(&io->lock, NULL);
    pthread_cond_init(&io->work, NULL);
    pthread_cond_init(&io->done, NULL);
    io->ops = backends[backend == K3_IO_URING];
    if (io->ops->start(io, err)) {
        k3_io_close(io);
        return NULL;
    }
    return io;
}

void k3_io_close(k3_io *io)
{
    if (!io) return;
    pthread_mutex_lock(&io->lock);
    io->stopping = 1;
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->lock);
    for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
    io->ops->release(io);
    free(io->queue);
    pthread_mutex_destroy(&io->lock);
    pthread_cond_destroy(&io->work);
    pthread_cond_destroy(&io->done);
    free(io);
}

void k3_io_submit(k3_io *io, k3_io_req **reqs, int n)
{
    pthread_mutex_lock(&io->lock);
    if (io_reserve_queue_locked(io, n)) {    /* out of memory: the requests fail, k3_io_wait says so */
        for (int i = 0; i < n; i++) {
            reqs[i]->got = 0;
            reqs[i]->err_no = ENOMEM;
            __atomic_store_n(&reqs[i]->state, -1, __ATOMIC_RELEASE);
        }
        pthread_cond_broadcast(&io->done);
        pthread_mutex_unlock(&io->lock);
        return;
    }
    for (int i = 0; i < n; i++) {
        k3_io_req *r = reqs[i];
        r->state = 0;
        r->got = 0;
        r->err_no = 0;
        insert_locked(io, r);
    }
    pthread_cond_broadcast(&io->work);
    pthread_mutex_unlock(&io->lock);
}

void k3_io_promote(k3_io *io, k3_io_req *req)
{
    pthread_mutex_lock(&io->lock);
    for (int at = 0; at < io->n_queued; at++) {
        if (io->queue[at] != req) continue;
        if (req->kind == K3_READ_AHEAD) {
            memmove(io->queue + at, io->queue + at + 1, (size_t)(io->n_queued - at - 1) * sizeof *io->queue);
            io->n_queued--;
            req->kind = K3_READ_EXPERT;
            insert_locked(io, req);      /* room: it was in the queue a moment ago */
        }
        break;
    }
    pthread_mutex_unlock(&io->lock);
}

void k3_io_cancel(k3_io *io, k3_io_req *req)
{
    pthread_mutex_lock(&io->lock);
    for (int at = 0; at < io->n_queued; at++) {
        if (io->queue[at] != req) continue;
        memmove(io->queue + at, io->queue + at + 1, (size_t)(io->n_queued - at - 1) * sizeof *io->queue);
        io->n_queued--;
        req->err_no = ECANCELED;
        __atomic_store_n(&req->state, -1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&io->done);
        break;
    }
    pthread_mutex_unlock(&io->lock);
}

int k3_io_wait(k3_io *io, k3_io_req *req, k3_error *err)
{
    if (__atomic_load_n(&req->state, __ATOMIC_ACQUIRE) == 0) {
        pthread_mutex_lock(&io->lock);
        while (__atomic_load_n(&req->state, __ATOMIC_ACQUIRE) == 0) pthread_cond_wait(&io->done, &io->lock);
        pthread_mutex_unlock(&io->lock);
    }
    if (req->state > 0) return 0;
    if (req->err_no)
        return k3_err(err, "%s: read of %llu bytes at offset %llu failed: %s", req->path,
                      (unsigned long long)req->bytes, (unsigned long long)req->offset, strerror(req->err_no));
    return k3_err(err, "%s: file ended after %llu of %llu bytes at offset %llu (truncated?)", req->path,
                  (unsigned long long)req->got, (unsigned long long)req->need_bytes,
                  (unsigned long long)req->offset);
}

void k3_io_inject_failure(k3_io *io, int nth, int e)
{
    pthread_mutex_lock(&io->lock);
    io->inject_countdown = nth;
    io->inject_errno = e;
    pthread_mutex_unlock(&io->lock);
}

int k3_io_probe(k3_io *io, int fd, const char *path, uint64_t file_bytes, uint64_t size, uint8_t *const *bufs,
                int depth, double seconds, uint64_t seed, uint64_t cycle_reads, double *gbps, uint64_t *reads,
                k3_error *err)
{
    const int d = depth < 1 ? 1 : depth > 64 ? 64 : depth;
    if (!size || size > file_bytes) return k3_err(err, "%s: too small to probe", path);
    k3_io_req reqs[64];
    uint64_t rng = seed | 1, done_bytes = 0, n_reads = 0;
    const uint64_t windows = (file_bytes - size) / K3_IO_ALIGN + 1;
    const uint64_t t0 = k3_now_ns();
    double elapsed = 0;
    int rc = 0;
    do {
        k3_io_req *ptrs[64];
        for (int i = 0; i < d; i++) {
            if (cycle_reads && n_reads % cycle_reads == 0) rng = seed | 1;   /* the sample again */
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            n_reads++;
            reqs[i] = (k3_io_req){.fd = fd, .path = path, .offset = (rng % windows) * K3_IO_ALIGN, .bytes = size,
                                  .need_bytes = size, .dst = bufs[i], .kind = K3_READ_OTHER};
            ptrs[i] = &reqs[i];
        }
        k3_io_submit(io, ptrs, d);
        for (int i = 0; i < d; i++)          /* wait for all: the caller reuses bufs */
            if (k3_io_wait(io, &reqs[i], rc ? NULL : err)) rc = -1;
        done_bytes += size * (uint64_t)d;
        elapsed = (k3_now_ns() - t0) * 1e-9;
    } while (elapsed < seconds && rc == 0);
    if (rc) return -1;
    *gbps = done_bytes / elapsed / 1e9;
    if (reads) *reads = n_reads;
    return 0;
}
