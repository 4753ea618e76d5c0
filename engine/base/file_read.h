/* file_read.h - opening files that come from outside (model directories,
 * user-named inputs) without hanging or running out of memory.
 *
 * A FIFO, a device or a directory put in place of a model file must give
 * one clear error, never block in open() or read forever: these helpers
 * open with O_NONBLOCK, check S_ISREG with fstat, and only then read.
 * k3_read_file (whole files, in k3.h) is built on them. */
#ifndef K3_FILE_READ_H
#define K3_FILE_READ_H

#include <stdio.h>
#include "k3_error.h"
#include "k3_util.h"

/* open(path, flags | O_NONBLOCK | O_CLOEXEC), refuse anything but a regular
 * file, then clear O_NONBLOCK. Returns the fd, or -1 with err filled. */
int k3_open_regular(const char *path, int flags, k3_error *err);

/* The same as a read-only stdio stream. */
FILE *k3_fopen_regular(const char *path, k3_error *err);

/* The "Key: N kB" field of a /proc file (meminfo, status, smaps_rollup) in
 * bytes; 0 when the file or the field is missing. key includes the colon. */
unsigned long long k3_proc_kib_field_bytes(const char *path, const char *key);

#endif
