/* io.h - the disk reader: many reads in flight, the urgent ones (expert
 * pages, embedding rows) before the trunk ring's read-ahead,
 * completed by a pool of pread threads or by io_uring (--io-backend), with
 * O_DIRECT by default (--io direct|buffered).
 *
 * A request names a file descriptor, an offset and a byte count, and a
 * destination buffer. With O_DIRECT the caller passes offset, length and
 * buffer aligned to K3_IO_ALIGN; `need_bytes` says how many bytes must
 * actually arrive (a window rounded up past the end of the file may come back
 * short). Short reads and EINTR are retried; any other failure (EIO, EOF
 * before need_bytes) marks the request failed with a message naming the file,
 * never silent garbage. Statistics (bytes by kind, reads in flight, busy
 * time) go into the model's k3_stats. */
#ifndef K3_IO_H
#define K3_IO_H

#include <stdint.h>
#include "k3_error.h"
#include "k3.h"

#define K3_IO_ALIGN 4096

typedef enum { K3_IO_POOL = 0, K3_IO_URING = 1 } k3_io_backend;
/* K3_READ_AHEAD: an expert page read on a guess (the next layer's router
 * run early); it goes after everything else and counts as expert bytes. */
typedef enum { K3_READ_TRUNK = 0, K3_READ_EXPERT = 1, K3_READ_OTHER = 2, K3_READ_AHEAD = 3 } k3_read_kind;

typedef struct k3_io_req {
    int fd;
    const char *path;            /* for messages */
    uint64_t offset, bytes, need_bytes;
    void *dst;
    k3_read_kind kind;
    /* set by the reader */
    int state;                   /* 0 queued/in flight, 1 done, -1 failed (atomic) */
    int err_no;
    uint64_t got;
} k3_io_req;

typedef struct k3_io k3_io;

/* depth = reader threads (pool) or queue depth (io_uring). */
k3_io *k3_io_open(k3_io_backend backend, int depth, k3_stats *stats, k3_error *err);
void k3_io_close(k3_io *io);

/* Queue n requests. Urgent ones (expert pages, other reads) go out
 * before any trunk read not yet issued, and read-ahead guesses
 * (K3_READ_AHEAD) after both; within each, in the order they were
 * queued. */
void k3_io_submit(k3_io *io, k3_io_req **reqs, int n);

/* A guess became a need: if req (a K3_READ_AHEAD) is still queued, it
 * becomes an expert read and moves behind the urgent reads queued (before
 * the trunk's); if it is in flight or done, nothing changes. */
void k3_io_promote(k3_io *io, k3_io_req *req);

/* The bytes of req are no longer wanted: if it is still queued it leaves
 * the queue and ends failed (ECANCELED), so a wait on it returns at once;
 * in flight or done, nothing changes. */
void k3_io_cancel(k3_io *io, k3_io_req *req);

/* Block until req is done. 0, or -1 with err naming the file and the cause. */
int k3_io_wait(k3_io *io, k3_io_req *req, k3_error *err);

/* Test hook: make the Nth read from now fail with errno e (0 = off). */
void k3_io_inject_failure(k3_io *io, int nth, int e);

const char *k3_io_backend_name(k3_io_backend b);

/* Device speed for the runtime's own reads: random aligned reads of `size`
 * bytes over fd (file_bytes long), `depth` at a time (at most 64) into
 * bufs[0..depth) (aligned, size bytes each), for `seconds` (at least one
 * wave). The offsets come from a generator seeded with `seed` that starts
 * over every `cycle_reads` reads (0: never), so a second call with the
 * first call's *reads as cycle_reads reads the same places again. GB/s in
 * *gbps, reads made in *reads (may be NULL); 0, or -1 with err set. Every
 * read has finished when it returns. */
int k3_io_probe(k3_io *io, int fd, const char *path, uint64_t file_bytes, uint64_t size, uint8_t *const *bufs,
                int depth, double seconds, uint64_t seed, uint64_t cycle_reads, double *gbps, uint64_t *reads,
                k3_error *err);

#endif
