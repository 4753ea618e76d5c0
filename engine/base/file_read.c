/* file_read.c - open and read files from outside safely (see file_read.h
 * and k3_read_file in k3.h), and the one exact pread of a known range
 * (k3_pread_full: tensor bytes, headers, checksums). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "k3.h"
#include "k3_util.h"

/* O_NONBLOCK makes open() of a FIFO without a writer return at once; the
 * fstat then refuses it (and devices, directories, sockets). */
int k3_open_regular(const char *path, int flags, k3_error *err)
{
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return k3_err(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return k3_err(err, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return k3_err(err, "%s: not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return k3_err(err, "%s: %s", path, strerror(e));
    }
    return fd;
}

/* Stdio on top of k3_open_regular, for the line and JSON readers. */
FILE *k3_fopen_regular(const char *path, k3_error *err)
{
    int fd = k3_open_regular(path, O_RDONLY, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        k3_err(err, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* See k3.h. The size is checked before anything is allocated, and reading
 * stops at the limit even if the file grows meanwhile. */
int k3_read_file(const char *path, size_t max_bytes, char **out, size_t *len, k3_error *err)
{
    size_t unused_len;
    if (!len) len = &unused_len;          /* the size is optional for callers */
    *out = NULL;
    *len = 0;
    int fd = k3_open_regular(path, O_RDONLY, err);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return k3_err(err, "%s: %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return k3_err(err, "%s: %lld bytes, more than the limit of %zu bytes for this file", path,
                      (long long)st.st_size, max_bytes);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return k3_err(err, "%s: out of memory (%zu bytes)", path, cap);
    }
    for (;;) {
        if (n == cap - 1) {
            if (cap - 1 >= max_bytes) {   /* grew past the limit while we read */
                char probe;
                ssize_t r = read(fd, &probe, 1);
                if (r == 0) break;
                free(buf);
                close(fd);
                return k3_err(err, "%s: more than the limit of %zu bytes for this file", path, max_bytes);
            }
            size_t want = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
            char *g = realloc(buf, want);
            if (!g) {
                free(buf);
                close(fd);
                return k3_err(err, "%s: out of memory", path);
            }
            buf = g;
            cap = want;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return k3_err(err, "%s: read error: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

/* Read exactly n bytes at offset off of fd, or fail naming path: a file that
 * ends early is an error, not a short result. EINTR and short reads retry. */
int k3_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, k3_error *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return k3_err(err, "%s: read error at byte %llu: %s", path, (unsigned long long)(off + got),
                          strerror(errno));
        if (r == 0)
            return k3_err(err, "%s: file ends early (%llu bytes wanted at byte %llu)", path,
                          (unsigned long long)n, (unsigned long long)off);
        got += (size_t)r;
    }
    return 0;
}

/* /proc's memory files all write "Key:   N kB" lines; one reader for them
 * (memory available, resident set, huge pages in use). */
unsigned long long k3_proc_kib_field_bytes(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    const size_t key_len = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, key_len)) { kib = strtoull(line + key_len, NULL, 10); break; }
    fclose(f);
    return kib * 1024;
}
