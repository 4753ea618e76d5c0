/* io_pool.c - the reader's default back end: io->depth threads, each
 * taking the first request of the queue and reading it with pread. Simple,
 * works everywhere, and as fast as io_uring at the depths k3 uses. */
#include <assert.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "io_backend.h"

/* The pread loop of one request: retry EINTR and short reads until
 * need_bytes have arrived or the file ends. */
static int read_fully(k3_io_req *r, uint64_t max_piece)
{
    while (r->got < r->bytes) {
        uint64_t want = r->bytes - r->got;
        if (max_piece && want > max_piece) want = max_piece;
        ssize_t n = pread(r->fd, (char *)r->dst + r->got, want, (off_t)(r->offset + r->got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno;
        if (n == 0) break;                      /* end of file */
        r->got += (uint64_t)n;
    }
    assert(r->got <= r->bytes);
    return r->got >= r->need_bytes ? 0 : -1;   /* -1: ended early */
}

/* One reader: take the first request, read it whole, report it. */
static void *pool_thread(void *arg)
{
    k3_io *io = arg;
    pthread_mutex_lock(&io->lock);
    for (;;) {
        while (!io->n_queued && !io->stopping) pthread_cond_wait(&io->work, &io->lock);
        if (io->stopping && !io->n_queued) break;
        k3_io_req *r = io_pop_locked(io);
        io_begin_read_locked(io);
        int inject = io_injected_failure_locked(io);
        pthread_mutex_unlock(&io->lock);
        int rc = inject ? inject : read_fully(r, io->max_piece);
        r->err_no = rc > 0 ? rc : 0;
        pthread_mutex_lock(&io->lock);
        io_end_read_locked(io, r, rc != 0);
    }
    pthread_mutex_unlock(&io->lock);
    return NULL;
}

/* As many readers as can start (a pids limit may allow fewer than the
 * depth: the queue then waits for the ones there are). */
static int pool_start(k3_io *io, k3_error *err)
{
    int rc = 0;
    while (io->n_threads < io->depth &&
           (rc = pthread_create(&io->threads[io->n_threads], NULL, pool_thread, io)) == 0)
        io->n_threads++;
    if (io->n_threads == 0)
        return k3_err(err, "cannot start a reader thread: %s (a pids limit on this container?)", strerror(rc));
    return 0;
}

/* The pool keeps nothing beside its threads. */
static void pool_release(k3_io *io) { (void)io; }

const io_backend_ops io_pool_ops = {.name = "pread-pool", .start = pool_start, .release = pool_release};
