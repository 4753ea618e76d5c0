/* output.c - the one way k3 writes a file the user named (see k3_output in
 * k3.h): eval --logits, history export -o, --trace, /export.
 *
 * A regular file (or a name that does not exist yet) is written to a temp
 * file made with O_EXCL and a random name in the same directory, fsync'd
 * and renamed over the target, so a crash or a full disk never leaves a
 * half-written file in place of a good one. A symlink is followed and its
 * target replaced the same way (the link stays). Anything else (a device
 * such as /dev/null or /dev/full, a FIFO, a terminal, "-" for stdout) is
 * written directly: renaming over it would destroy a device node or a pipe
 * someone is reading. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "k3.h"
#include "k3_util.h"

/* Follow symlinks to the file that will really be written. A dangling link
 * resolves to the name it points at (created by the rename). Returns a
 * malloc'd path. */
static char *resolve_target(const char *path, k3_error *err)
{
    char *cur = strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode)) return cur;
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) { k3_err(err, "%s: %s", cur, strerror(errno)); free(cur); return NULL; }
        link[n] = 0;
        char *next = NULL;
        if (link[0] == '/') {
            next = strdup(link);
        } else {
            const char *slash = strrchr(cur, '/');
            int dl = slash ? (int)(slash - cur) : 0;
            if (asprintf(&next, "%.*s%s%s", dl, cur, slash ? "/" : "", link) < 0) next = NULL;
        }
        free(cur);
        cur = next;
    }
    if (cur) { k3_err(err, "%s: too many levels of symbolic links", path); free(cur); return NULL; }
    k3_err(err, "%s: out of memory", path);
    return NULL;
}

/* See k3.h. */
int k3_output_open(k3_output *o, const char *path, k3_error *err)
{
    memset(o, 0, sizeof *o);
    if (!path || !*path) return k3_err(err, "output file name is empty");
    if (!strcmp(path, "-")) {
        o->f = stdout;
        o->direct = 1;
        o->path = strdup("-");
        return o->path ? 0 : k3_err(err, "out of memory");
    }
    char *target = resolve_target(path, err);
    if (!target) return -1;
    o->path = target;
    struct stat st;
    int exists = stat(target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        k3_output_abort(o);
        return k3_err(err, "%s: is a directory", path);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        o->direct = 1;
        o->f = fopen(target, "w");
        if (!o->f) {
            k3_err(err, "%s: %s", path, strerror(errno));
            k3_output_abort(o);
            return -1;
        }
        return 0;
    }
    const char *slash = strrchr(target, '/');
    int dl = slash ? (int)(slash - target) : 0;
    if (asprintf(&o->tmp, "%.*s%s.%s.XXXXXX", dl, target, slash ? "/" : "", slash ? slash + 1 : target) < 0) {
        o->tmp = NULL;
        k3_output_abort(o);
        return k3_err(err, "%s: out of memory", path);
    }
    int fd = mkostemp(o->tmp, O_CLOEXEC);   /* O_EXCL, random suffix */
    if (fd < 0) {
        k3_err(err, "%s: cannot create a temp file next to it: %s", path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        k3_output_abort(o);
        return -1;
    }
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    fchmod(fd, mode);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        k3_err(err, "%s: %s", o->tmp, strerror(errno));
        close(fd);
        k3_output_abort(o);
        return -1;
    }
    return 0;
}

/* See k3.h. Every failure (a full disk shows up at fflush or fsync) is
 * reported, and the target is then left as it was. */
int k3_output_close(k3_output *o, k3_error *err)
{
    if (!o->f) { k3_output_abort(o); return k3_err(err, "output was not open"); }
    int rc = 0;
    const char *name = o->path;
    if (fflush(o->f) != 0 || ferror(o->f))
        rc = k3_err(err, "%s: write failed: %s", name, strerror(errno ? errno : EIO));
    if (rc == 0 && o->tmp && fsync(fileno(o->f)) != 0)
        rc = k3_err(err, "%s: write failed: %s", name, strerror(errno));
    if (o->f != stdout) {
        if (fclose(o->f) != 0 && rc == 0) rc = k3_err(err, "%s: write failed: %s", name, strerror(errno));
    }
    o->f = NULL;
    if (rc == 0 && o->tmp) {
        if (rename(o->tmp, o->path) != 0) {
            rc = k3_err(err, "%s: cannot replace it: %s", name, strerror(errno));
        } else {
            free(o->tmp);
            o->tmp = NULL;
            char *dir = strdup(o->path), *slash = dir ? strrchr(dir, '/') : NULL;
            if (dir) {
                if (slash) *slash = 0;
                int dfd = open(slash ? (*dir ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) { fsync(dfd); close(dfd); }
            }
            free(dir);
        }
    }
    k3_output_abort(o);
    return rc;
}

/* See k3.h. */
void k3_output_abort(k3_output *o)
{
    if (o->f && o->f != stdout) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
}
