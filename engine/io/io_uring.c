/* io_uring.c - the reader's io_uring back end (--io-backend uring): one
 * thread keeps up to io->depth reads in the ring. liburing is optional: the
 * Makefile defines K3_HAVE_URING when its header is installed, and without
 * it this back end only says it is not built in. This is the one file that
 * knows liburing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "io_backend.h"

#ifdef K3_HAVE_URING   /* set by the Makefile when liburing is installed */
#include <liburing.h>

/* io_uring: keep up to depth reads in the ring; resubmit the rest of a
 * short read; poll the queue between completions. */
static void *uring_thread(void *arg)
{
    k3_io *io = arg;
    struct io_uring *ring = io->backend_state;
    for (;;) {
        pthread_mutex_lock(&io->lock);
        while (!io->n_queued && !io->in_flight && !io->stopping) pthread_cond_wait(&io->work, &io->lock);
        if (io->stopping && !io->n_queued && !io->in_flight) { pthread_mutex_unlock(&io->lock); break; }
        int submitted = 0;
        while (io->n_queued && io->in_flight < io->depth) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
            if (!sqe) break;
            k3_io_req *r = io_pop_locked(io);
            io_begin_read_locked(io);
            int inject = io_injected_failure_locked(io);
            if (inject) {
                r->err_no = inject;
                io_uring_prep_nop(sqe);
                io_uring_sqe_set_data(sqe, (void *)((uintptr_t)r | 1));
            } else {
                uint64_t want = r->bytes - r->got;
                if (io->max_piece && want > io->max_piece) want = io->max_piece;
                io_uring_prep_read(sqe, r->fd, (char *)r->dst + r->got, (unsigned)want, r->offset + r->got);
                io_uring_sqe_set_data(sqe, r);
            }
            submitted++;
        }
        pthread_mutex_unlock(&io->lock);
        if (submitted) io_uring_submit(ring);
        struct io_uring_cqe *cqe;
        /* wait at most 1 ms for a completion, then look at the queue again:
         * new requests arrive without a wake-up of the ring, and 1 ms is
         * below one expert read on NVMe (~0.5-2 ms for 1-17 MB) yet long
         * enough that an idle reader costs no measurable CPU */
        struct __kernel_timespec ts = {0, 1000000};
        if (io_uring_wait_cqe_timeout(ring, &cqe, &ts) != 0) continue;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe) {
            seen++;
            uintptr_t tag = (uintptr_t)io_uring_cqe_get_data(cqe);
            k3_io_req *r = (k3_io_req *)(tag & ~(uintptr_t)1);
            int res = cqe->res, failed = 0, resubmit = 0;
            if (tag & 1) failed = 1;
            else if (res == -EINTR || res == -EAGAIN) resubmit = 1;
            else if (res < 0) { r->err_no = -res; failed = 1; }
            else if (res == 0) failed = r->got < r->need_bytes;
            else {
                r->got += (uint64_t)res;
                if (r->got < r->bytes) resubmit = 1;
            }
            pthread_mutex_lock(&io->lock);
            if (resubmit && io_reserve_queue_locked(io, 1)) {   /* no room to requeue: fail it */
                r->err_no = ENOMEM;
                io_end_read_locked(io, r, 1);
            } else if (resubmit) {      /* the remainder: first of its kind again */
                io_add_busy_time_locked(io);
                io->in_flight--;
                int at = 0;
                while (at < io->n_queued && io_rank(io->queue[at]) < io_rank(r)) at++;
                io_insert_at_locked(io, at, r);
            } else {
                io_end_read_locked(io, r, failed);
            }
            pthread_mutex_unlock(&io->lock);
        }
        io_uring_cq_advance(ring, seen);
    }
    return NULL;
}
/* Make the ring (twice the depth of entries: a short read's remainder may
 * be queued while the rest are in flight) and its one thread. */
static int uring_start(k3_io *io, k3_error *err)
{
    struct io_uring *ring = calloc(1, sizeof *ring);
    if (!ring) return k3_err(err, "out of memory");
    int rc = io_uring_queue_init((unsigned)io->depth * 2, ring, 0);
    if (rc < 0) {
        free(ring);
        return k3_err(err, "io_uring unavailable (%s); use --io-backend pool", strerror(-rc));
    }
    io->backend_state = ring;
    rc = pthread_create(&io->threads[0], NULL, uring_thread, io);
    if (rc)
        return k3_err(err, "cannot start the io_uring completion thread: %s (a pids limit on this container?)",
                      strerror(rc));
    io->n_threads = 1;
    return 0;
}

/* The ring, once its thread has been joined. */
static void uring_release(k3_io *io)
{
    struct io_uring *ring = io->backend_state;
    if (!ring) return;
    io_uring_queue_exit(ring);
    free(ring);
    io->backend_state = NULL;
}
#else
/* Built without liburing: the back end exists only to say so. */
static int uring_start(k3_io *io, k3_error *err)
{
    (void)io;
    return k3_err(err, "io_uring is not built in (liburing was absent at build time); use --io-backend pool");
}

static void uring_release(k3_io *io) { (void)io; }
#endif

const io_backend_ops io_uring_ops = {.name = "io_uring", .start = uring_start, .release = uring_release};
