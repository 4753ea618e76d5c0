/* io_backend.h - inside engine/io/ only: the reader's state shared by the
 * queue (io.c) and its two back ends, a pool of pread threads
 * (io_pool.c) and io_uring (io_uring.c). Each back end is a small table of
 * functions (io_backend_ops), as Redis's event loop picks its epoll or
 * kqueue file, so the optional liburing sits in one file. */
#ifndef K3_IO_BACKEND_H
#define K3_IO_BACKEND_H

#include <pthread.h>
#include "io.h"

#define K3_IO_MAX_THREADS 32

struct k3_io {
    k3_io_backend backend;
    const struct io_backend_ops *ops;
    int depth;
    k3_stats *stats;
    pthread_mutex_t lock;
    pthread_cond_t work;          /* queue not empty or stopping */
    pthread_cond_t done;          /* some request finished */
    k3_io_req **queue;            /* in io_before()'s order */
    int n_queued, cap_queued;
    int in_flight;
    uint64_t busy_since_ns;
    int stopping;
    int n_threads;
    pthread_t threads[K3_IO_MAX_THREADS];
    void *backend_state;          /* the back end's own (io_uring's ring) */
    int inject_countdown, inject_errno;
    uint64_t max_piece;           /* test hook: cap each read call (forces short reads) */
};

/* A back end: start its threads (io->n_threads of io->threads, reading
 * io->depth at a time) or fail with err set; release its own state after
 * the threads have been joined. */
typedef struct io_backend_ops {
    const char *name;
    int (*start)(k3_io *io, k3_error *err);
    void (*release)(k3_io *io);
} io_backend_ops;

extern const io_backend_ops io_pool_ops;
extern const io_backend_ops io_uring_ops;

/* The queue, for the back ends; every _locked function wants io->lock held. */
int io_rank(const k3_io_req *r);
k3_io_req *io_pop_locked(k3_io *io);
int io_reserve_queue_locked(k3_io *io, int more);
void io_insert_at_locked(k3_io *io, int at, k3_io_req *r);
void io_begin_read_locked(k3_io *io);
void io_add_busy_time_locked(k3_io *io);
void io_end_read_locked(k3_io *io, k3_io_req *r, int failed);
int io_injected_failure_locked(k3_io *io);

#endif
