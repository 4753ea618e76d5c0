/* k3_util.h - the engine's small utilities that the front ends share: the
 * one clock, size parsing, whole-file reads, atomic output files, exact
 * preads, the test hooks and the one hash. Part of the door (include/). */
#ifndef K3_UTIL_H
#define K3_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "k3_error.h"

/* The engine's monotonic clock, in nanoseconds (the one clock every layer uses). */
uint64_t k3_now_ns(void);

/* The numeric kernels this binary was built with, chosen at compile time by
 * the Makefile's ARCH: "x86-64-v3 (AVX2 FMA F16C)", "aarch64 (NEON)" or
 * "generic (portable C)". All give bit-identical logits. */
const char *k3_kernels_name(void);

/* "8G", "512M", "1.5G", "2000000000": bytes, or -1. */
int64_t k3_parse_size(const char *s);

/* Read a whole file from outside into a NUL-terminated malloc'd buffer.
 * Refuses anything but a regular file (a FIFO, /dev/zero, a directory: one
 * clear error, no hang) and any file over max_bytes (checked before
 * allocating). *len excludes the NUL. Returns 0, or -1 with err set. */
int k3_read_file(const char *path, size_t max_bytes, char **out, size_t *len, k3_error *err);

/* Writing a file the user named (eval --logits, export -o, --trace): a
 * regular file (or a new name) is written atomically (a temp file created
 * O_EXCL with a random name in the same directory, fsync, rename; a symlink
 * is followed and its target replaced); a device, a FIFO or "-" (stdout) is
 * written directly, never replaced. Write to o->f, then k3_output_close,
 * which reports any failed write (a full disk, /dev/full) and only then
 * puts the file in place; k3_output_abort leaves the target untouched. */
typedef struct k3_output {
    FILE *f;
    char *path;     /* the file really written (symlinks resolved) */
    char *tmp;      /* the temp file; NULL when written directly */
    int direct;
} k3_output;
int k3_output_open(k3_output *o, const char *path, k3_error *err);
int k3_output_close(k3_output *o, k3_error *err);
void k3_output_abort(k3_output *o);

/* The documented size limits of whole-file reads (README "Limits"). */
#define K3_MAX_CONFIG_BYTES     (16u << 20)   /* config.json, tokenizer_config.json, index */
#define K3_MAX_TOKENIZER_BYTES  (64u << 20)   /* tiktoken.model */
#define K3_MAX_PROMPT_BYTES     (16u << 20)   /* --prompt-file, --text-file, --chat FILE */
#define K3_MAX_IMPORT_BYTES     (256u << 20)  /* history import */

/* Exactly n bytes at offset off of fd (EINTR and short reads retried); a file
 * that ends early is an error naming path. */
int k3_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, k3_error *err);

/* Test hooks (engine/base/test_hooks.c lists them): the only environment the
 * engine reads; 0 when unset. */
int k3_test_hook(const char *name);
const char *k3_test_hook_text(const char *name);

/* FNV-1a 64, continued from h (start with K3_FNV_INIT): names, fingerprints,
 * file checksums. k3_fnv1a64_str hashes a string from K3_FNV_INIT. */
#define K3_FNV_INIT 1469598103934665603ull
#define K3_FNV_PRIME 1099511628211ull
uint64_t k3_fnv1a64(uint64_t h, const void *data, size_t n);
uint64_t k3_fnv1a64_str(const char *s);

#endif
