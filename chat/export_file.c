/* export_file.c - see export_file.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "export_file.h"

void chat_expand_home(const char *path, char *out, size_t cap)
{
    const char *home = getenv("HOME");
    if (path[0] == '~' && (path[1] == '/' || path[1] == 0) && home && *home)
        snprintf(out, cap, "%s%s", home, path + 1);
    else
        snprintf(out, cap, "%s", path);
}

/* Control bytes become spaces (newlines and tabs stay), as `history show`
 * prints them. */
static void strip_controls(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) *p = ' ';
}

/* Write everything, then fsync: a file that exists is complete. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return fsync(fd);
}

/* A private temp file beside the target, then link() (which refuses to
 * replace a file, atomically) or, with force, rename(). */
long chat_export_file(history *h, int64_t id, history_format fmt, const char *path, int force, char *used,
                      size_t cap, k3_error *err)
{
    char full[4096], tmp[4200];
    chat_expand_home(path, full, sizeof full);
    snprintf(used, cap, "%s", full);
    struct stat sb;
    if (!force && lstat(full, &sb) == 0)
        return k3_err(err, "%s: the file exists (use --force to overwrite it)", full);
    history_error herr;
    char *text = history_export_string(h, id, fmt, &herr);
    if (!text) return k3_err(err, "%s", herr.msg);
    if (fmt == HISTORY_MARKDOWN) strip_controls(text);
    size_t n = strlen(text);
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", full, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(text);
        return k3_err(err, "%s: %s", full, strerror(errno));
    }
    int rc = write_all(fd, text, n);
    int saved = errno;
    free(text);
    if (close(fd) != 0 && rc == 0) { rc = -1; saved = errno; }
    if (rc) {
        unlink(tmp);
        return k3_err(err, "%s: write failed: %s", tmp, strerror(saved));
    }
    if (force) rc = rename(tmp, full);
    else if ((rc = link(tmp, full)) == 0) unlink(tmp);
    else if ((errno == EPERM || errno == ENOTSUP) && lstat(full, &sb) != 0)
        rc = rename(tmp, full);                      /* no hard links here (vfat, some FUSE) */
    if (rc) {
        saved = errno;
        unlink(tmp);
        if (saved == EEXIST) return k3_err(err, "%s: the file exists (use --force to overwrite it)", full);
        return k3_err(err, "%s: %s", full, strerror(saved));
    }
    return (long)n;
}
