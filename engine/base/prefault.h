/* prefault.h - fault an arena's pages in ahead of use, in the background
 * (prefault.c). */
#ifndef K3_PREFAULT_H
#define K3_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

typedef struct k3_prefault k3_prefault;

/* Start faulting [mem, mem + bytes) in, from its start, from one thread
 * that runs only when a CPU would otherwise idle (SCHED_IDLE). Page
 * contents are never written (MADV_POPULATE_WRITE), so other threads may
 * read into the arena meanwhile. NULL when nothing was started: a kernel
 * without MADV_POPULATE_WRITE (before Linux 5.14), or no thread; the pages
 * are then faulted in by their first use, as without this. */
k3_prefault *k3_prefault_start(void *mem, size_t bytes);

/* Block until it is done (or stopped); bytes faulted in and the seconds
 * from start to done. NULL p: 0 and 0. */
void k3_prefault_wait(k3_prefault *p, uint64_t *bytes, double *seconds);

/* Bytes faulted in so far (NULL p: 0). */
uint64_t k3_prefault_done_bytes(const k3_prefault *p);

/* Stop at the next 2 MiB, join the thread, free p. NULL p: nothing. */
void k3_prefault_stop(k3_prefault *p);

#endif
