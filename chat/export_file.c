/* export_file.c - see export_file.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "export_file.h"
#include "k3_util.h"

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

/* Refuse an existing file without force, then write through k3_output: a
 * regular file atomically (random O_EXCL temp beside it, 0600 when new,
 * fsync, rename; a symlink is written through to its target), a device or
 * FIFO directly, never replaced. */
long chat_export_file(history *h, int64_t id, history_format fmt, const char *path, int force, char *used,
                      size_t cap, k3_error *err)
{
    char full[4096];
    chat_expand_home(path, full, sizeof full);
    snprintf(used, cap, "%s", full);
    struct stat sb;
    int existed = lstat(full, &sb) == 0;
    if (!force && existed)
        return k3_err(err, "%s: the file exists (use --force to overwrite it)", full);
    history_error herr;
    char *text = history_export_string(h, id, fmt, &herr);
    if (!text) return k3_err(err, "%s", herr.msg);
    if (fmt == HISTORY_MARKDOWN) strip_controls(text);
    size_t n = strlen(text);
    k3_output out;
    if (k3_output_open(&out, full, err)) {
        free(text);
        return -1;
    }
    if (out.tmp && !existed) fchmod(fileno(out.f), 0600);   /* a conversation is private */
    int ok = fwrite(text, 1, n, out.f) == n;
    free(text);
    if (!ok) {
        k3_output_abort(&out);
        return k3_err(err, "%s: write failed: %s", full, strerror(errno));
    }
    return k3_output_close(&out, err) ? -1 : (long)n;
}
