/* read_load.c - see read_load.h. One thread calls k3_io_probe in short
 * waves (20 ms) until told to stop, counting the bytes its reads brought. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io.h"
#include "read_load.h"
#include "stats.h"
#include "k3_util.h"

struct read_load {
    char path[4096];
    uint64_t file_bytes, read_bytes, seed;
    int fd;
    k3_stats *stats;
    k3_io *io;
    uint8_t *mem;
    pthread_t thread;
    int running;
    int stop;                     /* atomic */
    uint64_t bytes;               /* read since start (the thread's, read after the join) */
};

enum { LOAD_DEPTH = 4, LOAD_SAMPLE_READS = 64 };

read_load *read_load_open(const char *path, uint64_t file_bytes, uint64_t read_bytes, k3_error *err)
{
    read_load *l = calloc(1, sizeof *l);
    if (!l) { k3_err(err, "out of memory"); return NULL; }
    snprintf(l->path, sizeof l->path, "%s", path);
    l->file_bytes = file_bytes;
    l->read_bytes = (read_bytes + K3_IO_ALIGN - 1) / K3_IO_ALIGN * K3_IO_ALIGN;
    l->seed = k3_now_ns() | 1;
    l->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (l->fd < 0) l->fd = open(path, O_RDONLY | O_CLOEXEC);
    l->stats = calloc(1, sizeof *l->stats);
    l->mem = aligned_alloc(K3_IO_ALIGN, (size_t)l->read_bytes * LOAD_DEPTH);
    if (l->fd < 0) k3_err(err, "%s: %s", path, strerror(errno));
    else if (!l->stats || !l->mem) k3_err(err, "out of memory");
    else l->io = k3_io_open(K3_IO_POOL, LOAD_DEPTH, l->stats, err);
    if (!l->io) { read_load_close(l); return NULL; }
    return l;
}

static void *load_thread(void *arg)
{
    read_load *l = arg;
    uint8_t *bufs[LOAD_DEPTH];
    for (int i = 0; i < LOAD_DEPTH; i++) bufs[i] = l->mem + (size_t)i * l->read_bytes;
    while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
        uint64_t reads = 0;
        double gbps;
        k3_error err;
        if (k3_io_probe(l->io, l->fd, l->path, l->file_bytes, l->read_bytes, bufs, LOAD_DEPTH, 0.02, l->seed,
                        LOAD_SAMPLE_READS, &gbps, &reads, &err))
            break;                                  /* a failed read: the load ends, its bytes count */
        l->bytes += reads * l->read_bytes;
    }
    return NULL;
}

static void load_start(void *ctx)
{
    read_load *l = ctx;
    l->bytes = 0;
    __atomic_store_n(&l->stop, 0, __ATOMIC_RELEASE);
    l->running = pthread_create(&l->thread, NULL, load_thread, l) == 0;
}

static uint64_t load_stop(void *ctx)
{
    read_load *l = ctx;
    if (!l->running) return 0;
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    pthread_join(l->thread, NULL);
    l->running = 0;
    return l->bytes;
}

k3_plan_reader read_load_reader(read_load *l) { return (k3_plan_reader){load_start, load_stop, l}; }

void read_load_close(read_load *l)
{
    if (!l) return;
    load_stop(l);
    k3_io_close(l->io);
    if (l->fd >= 0) close(l->fd);
    free(l->mem);
    free(l->stats);
    free(l);
}
