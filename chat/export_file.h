/* export_file.h - write a stored conversation to a file for `/export` and
 * `k3 history export -o`: the file is private (mode 0600, like the
 * database), never replaces an existing file unless asked (force), "~/" is
 * the home directory, and Markdown carries no control bytes (a model's
 * escape sequences would replay in whatever terminal shows the file). */
#ifndef K3_EXPORT_FILE_H
#define K3_EXPORT_FILE_H

#include <stddef.h>
#include "history.h"
#include "k3.h"

/* Expand a leading "~" or "~/" to $HOME into out. */
void chat_expand_home(const char *path, char *out, size_t cap);

/* Export conversation id in fmt to path (expanded; the name used is copied
 * into used, cap bytes). Returns the bytes written, or -1 with err set. */
long chat_export_file(history *h, int64_t id, history_format fmt, const char *path, int force, char *used,
                      size_t cap, k3_error *err);

#endif
