/* read_load.h - reads in the background, for timing compute while the disk
 * is read (k3 plan's compute probe, plan_compute.h's k3_plan_reader). */
#ifndef K3_READ_LOAD_H
#define K3_READ_LOAD_H

#include <stdint.h>
#include "k3_error.h"
#include "plan_compute.h"

typedef struct read_load read_load;

/* A load on `path` (file_bytes long): the runtime's reader (pread pool,
 * depth 4, O_DIRECT where the filesystem has it) reading read_bytes at a
 * time from a sample of 64 places round and round, as decode re-reads the
 * pages it evicted. NULL with err set when the file cannot be read. */
read_load *read_load_open(const char *path, uint64_t file_bytes, uint64_t read_bytes, k3_error *err);
/* As a k3_plan_reader: start() starts a thread reading until stop(). */
k3_plan_reader read_load_reader(read_load *l);
void read_load_close(read_load *l);

#endif
