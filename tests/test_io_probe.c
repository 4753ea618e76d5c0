/* test_io_probe.c - the reader's order, and the device probe's sample (engine/io/io.c,
 * k3_io_probe): a first call reads random places; a second call given the
 * first's read count as its cycle reads exactly those places again, round
 * and round, never a new one. That is what makes `gbps` "the sample read
 * again" (decode re-reads the pages it evicted) apart from
 * `first_read_gbps` (pages nobody read lately), which a host's cache can
 * make tenfold apart. Each 4 KiB page of the file holds its own index, so
 * every read's place can be seen in its buffer; checked for the pread pool
 * and, where built, io_uring. And the queue itself, without a reader:
 * read-ahead guesses last, a promoted guess among the urgent reads, a
 * cancelled read off the queue. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io.h"
#include "io_backend.h"
#include "test.h"

#define PAGES 4096                         /* 16 MiB file */
#define READ_BYTES (4 * K3_IO_ALIGN)       /* each read: 4 pages */

/* The page index a read's buffer starts with. */
static uint64_t stamp(const uint8_t *buf)
{
    uint64_t v;
    memcpy(&v, buf, sizeof v);
    return v;
}

/* 1 if every buffer of the last wave starts at a page in seen[0..n). */
static int all_seen(uint8_t *const *bufs, int depth, const uint64_t *seen, int n)
{
    for (int i = 0; i < depth; i++) {
        int found = 0;
        for (int k = 0; k < n && !found; k++) found = stamp(bufs[i]) == seen[k];
        if (!found) return 0;
    }
    return 1;
}

/* path: the stamped file, NULL when it could not be written. */
static void check_backend(k3_io_backend backend, const char *path, const char *name)
{
    char test_name[96];
    snprintf(test_name, sizeof test_name, "probe_reads_its_sample_again_%s", name);
    TEST_BEGIN(test_name);
    if (!path) {
        CHECK(0, "cannot write the test file in /tmp");
        TEST_END();
        return;
    }
    k3_stats *st = calloc(1, sizeof *st);
    k3_error err = {0};
    k3_io *io = st ? k3_io_open(backend, 4, st, &err) : NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    const int depth = 3;
    uint8_t *mem = aligned_alloc(K3_IO_ALIGN, (size_t)READ_BYTES * depth);
    uint8_t *bufs[3] = {mem, mem + READ_BYTES, mem + 2 * READ_BYTES};
    CHECK(io && fd >= 0 && mem, "setup: %s", err.msg);
    if (io && fd >= 0 && mem) {
        const uint64_t file_bytes = (uint64_t)PAGES * K3_IO_ALIGN, seed = 0x243F6A8885A308D3ull;
        /* the first reading: zero seconds is one wave of `depth` reads */
        double first_gbps = 0, again_gbps = 0;
        uint64_t n_first = 0, n_again = 0;
        int rc = k3_io_probe(io, fd, path, file_bytes, READ_BYTES, bufs, depth, 0, seed, 0, &first_gbps, &n_first, &err);
        CHECK(rc == 0 && n_first == (uint64_t)depth && first_gbps > 0, "first reading: rc %d, %llu reads, %.3f GB/s: %s",
              rc, (unsigned long long)n_first, first_gbps, err.msg);
        uint64_t sample[3];
        for (int i = 0; i < depth; i++) sample[i] = stamp(bufs[i]);
        CHECK(sample[0] != sample[1] || sample[1] != sample[2], "the first reading read one place %d times", depth);
        /* again, with a wave (2) that does not divide the sample (3): the
         * waves go round it, and every read lands on a page of the sample */
        int outside = 0, waves = 0;
        for (int w = 0; w < 40 && rc == 0; w++, waves++) {
            rc = k3_io_probe(io, fd, path, file_bytes, READ_BYTES, bufs, 2, 0.001 * (w % 4), seed, n_first, &again_gbps,
                             &n_again, &err);
            outside += !all_seen(bufs, 2, sample, depth);
        }
        CHECK(rc == 0 && outside == 0, "%d of %d waves read outside the sample: %s", outside, waves, err.msg);
        /* a timed reading again goes on for its time, round the sample */
        rc = k3_io_probe(io, fd, path, file_bytes, READ_BYTES, bufs, depth, 0.05, seed, n_first, &again_gbps, &n_again,
                         &err);
        CHECK(rc == 0 && n_again > n_first && again_gbps > 0 && all_seen(bufs, depth, sample, depth),
              "timed reading again: rc %d, %llu reads (sample %llu), %.3f GB/s", rc, (unsigned long long)n_again,
              (unsigned long long)n_first, again_gbps);
        /* without a cycle the reads go on to new places (what a first reading is) */
        int new_place = 0;
        for (int w = 0; w < 40 && rc == 0 && !new_place; w++) {
            rc = k3_io_probe(io, fd, path, file_bytes, READ_BYTES, bufs, depth, 0.002, seed, 0, &again_gbps, NULL, &err);
            new_place = !all_seen(bufs, depth, sample, depth);
        }
        CHECK(rc == 0 && new_place, "without a cycle the probe never left the first wave's places");
    }
    if (fd >= 0) close(fd);
    free(mem);
    k3_io_close(io);
    free(st);
    TEST_END();
}

/* The reader's order (io.c, before()): an expert page goes out before the
 * trunk reads already queued, and the trunk's reads go out in the order
 * they came, not by offset. Seen without timing: the first read the reader
 * issues is made to fail (k3_io_inject_failure), and every request of one
 * k3_io_submit is queued before the reader takes any. */
static void check_order(k3_io_backend backend, const char *path, const char *name)
{
    char test_name[96];
    snprintf(test_name, sizeof test_name, "urgent_reads_go_first_trunk_in_order_%s", name);
    TEST_BEGIN(test_name);
    k3_stats *st = calloc(1, sizeof *st);
    k3_error err = {0};
    k3_io *io = st && path ? k3_io_open(backend, 1, st, &err) : NULL;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    uint8_t *mem = aligned_alloc(K3_IO_ALIGN, (size_t)READ_BYTES * 4);
    CHECK(io && fd >= 0 && mem, "setup: %s", err.msg);
    if (io && fd >= 0 && mem) {
        /* round 1: three trunk reads at descending offsets, then an expert
         * page at the highest offset; round 2: the trunk reads alone */
        const k3_read_kind kinds[4] = {K3_READ_TRUNK, K3_READ_TRUNK, K3_READ_TRUNK, K3_READ_EXPERT};
        const uint64_t pages[4] = {64, 32, 16, 128};
        for (int round = 0; round < 2; round++) {
            const int n = round == 0 ? 4 : 3;
            k3_io_req reqs[4], *ptrs[4];
            for (int i = 0; i < n; i++) {
                reqs[i] = (k3_io_req){.fd = fd, .path = path, .offset = pages[i] * K3_IO_ALIGN, .bytes = READ_BYTES,
                                      .need_bytes = READ_BYTES, .dst = mem + (size_t)i * READ_BYTES, .kind = kinds[i]};
                ptrs[i] = &reqs[i];
            }
            k3_io_inject_failure(io, 1, EIO);
            k3_io_submit(io, ptrs, n);
            int failed = -1, n_failed = 0;
            for (int i = 0; i < n; i++)
                if (k3_io_wait(io, &reqs[i], NULL)) { failed = i; n_failed++; }
            const int want = round == 0 ? 3 : 0;
            CHECK(n_failed == 1 && failed == want,
                  "round %d: the first read issued was request %d (%d failed), expected %d (%s)", round + 1, failed,
                  n_failed, want, round == 0 ? "the expert page" : "the first trunk read queued");
            for (int i = 0; i < n; i++)
                if (i != failed)
                    CHECK(stamp(mem + (size_t)i * READ_BYTES) == pages[i], "round %d: request %d read the wrong page",
                          round + 1, i);
        }
    }
    if (fd >= 0) close(fd);
    free(mem);
    k3_io_close(io);
    free(st);
    TEST_END();
}

/* A reader with no threads: the queue alone, to look at its order
 * (k3_io_submit, k3_io_promote and k3_io_cancel only touch the queue). */
static void queue_only(k3_io *io, k3_stats *st)
{
    memset(io, 0, sizeof *io);
    io->stats = st;
    pthread_mutex_init(&io->lock, NULL);
    pthread_cond_init(&io->work, NULL);
    pthread_cond_init(&io->done, NULL);
}

static void queue_only_free(k3_io *io)
{
    free(io->queue);
    pthread_mutex_destroy(&io->lock);
    pthread_cond_destroy(&io->work);
    pthread_cond_destroy(&io->done);
}

/* 1 if the queue holds exactly want[0..n), in that order. */
static int queue_is(const k3_io *io, k3_io_req *const *want, int n)
{
    if (io->n_queued != n) return 0;
    for (int i = 0; i < n; i++)
        if (io->queue[i] != want[i]) return 0;
    return 1;
}

/* Read-ahead guesses (K3_READ_AHEAD) go after the urgent reads and the
 * trunk's, each kind in the order it came (not by offset: an expert's
 * reads stay together); promoted, a guess goes behind the urgent reads and
 * before the trunk's, and promoting anything else changes nothing. */
static void check_read_ahead_order(void)
{
    TEST_BEGIN("read_ahead_goes_last_promote_moves_it_up");
    k3_stats *st = calloc(1, sizeof *st);
    k3_io io;
    queue_only(&io, st);
    k3_io_req a = {.offset = 10 * K3_IO_ALIGN, .kind = K3_READ_AHEAD};
    k3_io_req t1 = {.offset = 90 * K3_IO_ALIGN, .kind = K3_READ_TRUNK};
    k3_io_req e = {.offset = 50 * K3_IO_ALIGN, .kind = K3_READ_EXPERT};
    k3_io_req t2 = {.offset = 20 * K3_IO_ALIGN, .kind = K3_READ_TRUNK};
    k3_io_req b = {.offset = 5 * K3_IO_ALIGN, .kind = K3_READ_AHEAD};
    k3_io_req *in[] = {&a, &t1, &e, &t2, &b};
    k3_io_submit(&io, in, 5);
    k3_io_req *submitted[] = {&e, &t1, &t2, &a, &b};
    CHECK(queue_is(&io, submitted, 5), "after submit: the queue is not expert, trunk x2 in order, guesses in order");
    k3_io_promote(&io, &b);
    k3_io_req *promoted[] = {&e, &b, &t1, &t2, &a};
    CHECK(queue_is(&io, promoted, 5) && b.kind == K3_READ_EXPERT,
          "a promoted guess did not go between the expert read and the trunk's (kind %d)", (int)b.kind);
    k3_io_req e2 = {.offset = 1 * K3_IO_ALIGN, .kind = K3_READ_EXPERT}, *more[] = {&e2};
    k3_io_submit(&io, more, 1);
    k3_io_req *fifo[] = {&e, &b, &e2, &t1, &t2, &a};
    CHECK(queue_is(&io, fifo, 6), "an expert read at a lower offset went before the urgent reads queued earlier");
    k3_io_promote(&io, &t1);
    k3_io_promote(&io, &e);
    CHECK(queue_is(&io, fifo, 6) && t1.kind == K3_READ_TRUNK, "promoting a trunk or an expert read moved it");
    queue_only_free(&io);
    free(st);
    TEST_END();
}

/* A cancelled read that was still queued leaves the queue and ends failed
 * (ECANCELED), so waiting on it returns at once with an error naming the
 * file; one that is no longer queued (done) keeps its state. */
static void check_cancel(void)
{
    TEST_BEGIN("cancel_takes_a_queued_read_off_the_queue");
    k3_stats *st = calloc(1, sizeof *st);
    k3_io io;
    queue_only(&io, st);
    k3_io_req g = {.path = "guess.bin", .offset = 0, .bytes = K3_IO_ALIGN, .kind = K3_READ_AHEAD};
    k3_io_req t = {.path = "trunk.bin", .offset = K3_IO_ALIGN, .bytes = K3_IO_ALIGN, .kind = K3_READ_TRUNK};
    k3_io_req *in[] = {&g, &t};
    k3_io_submit(&io, in, 2);
    k3_io_cancel(&io, &g);
    k3_io_req *left[] = {&t};
    k3_error err = {0};
    CHECK(queue_is(&io, left, 1), "the cancelled read is still queued (%d queued)", io.n_queued);
    CHECK(k3_io_wait(&io, &g, &err) == -1 && g.err_no == ECANCELED && strstr(err.msg, "guess.bin"),
          "waiting on the cancelled read: err_no %d, message '%s'", g.err_no, err.msg);
    k3_io_req done = {.kind = K3_READ_AHEAD, .state = 1};
    k3_io_cancel(&io, &done);
    CHECK(done.state == 1 && io.n_queued == 1, "cancelling a read that is not queued changed it (state %d)", done.state);
    queue_only_free(&io);
    free(st);
    TEST_END();
}

int main(void)
{
    char path[] = "/tmp/k3-test-io-probe-XXXXXX";
    int fd = mkstemp(path);
    uint8_t *page = calloc(1, K3_IO_ALIGN);
    int ok = fd >= 0 && page;
    for (uint64_t i = 0; ok && i < PAGES; i++) {
        memcpy(page, &i, sizeof i);
        ok = write(fd, page, K3_IO_ALIGN) == K3_IO_ALIGN;
    }
    if (fd >= 0) close(fd);
    free(page);
    check_backend(K3_IO_POOL, ok ? path : NULL, "pool");
    check_order(K3_IO_POOL, ok ? path : NULL, "pool");
#ifdef K3_HAVE_URING
    check_backend(K3_IO_URING, ok ? path : NULL, "uring");
    check_order(K3_IO_URING, ok ? path : NULL, "uring");
#endif
    unlink(path);
    check_read_ahead_order();
    check_cancel();
    TEST_EXIT();
}
