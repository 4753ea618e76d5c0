/* file_read.c - the engine's two ways to get bytes from a file: a whole
 * small file into memory (config.json, tokenizer files, manifests), and an
 * exact pread of a known range (tensor bytes, headers, checksums).
 *
 * Both retry EINTR and short reads, and both fail with one line naming the
 * file, so no caller writes its own loop. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "k3.h"

/* Read exactly n bytes at offset off of fd, or fail naming path: a file that
 * ends early is an error, not a short result. */
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

/* A whole regular file, NUL-terminated, refused above max_bytes before any
 * allocation: a file's size decides what we allocate, so it is checked
 * first (and a FIFO or a directory never blocks or reads as garbage). */
int k3_read_file(const char *path, size_t max_bytes, char **out, size_t *len, k3_error *err)
{
    *out = NULL;
    if (len) *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return k3_err(err, "%s: %lld bytes is larger than the %zu bytes this file may have", path,
                      (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return k3_err(err, "%s: out of memory for %zu bytes", path, n);
    }
    int rc = k3_pread_full(fd, buf, n, 0, path, err);
    close(fd);
    if (rc) {
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}
