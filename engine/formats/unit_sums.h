/* unit_sums.h - per-unit checksums of a packed model (units.sum).
 *
 * manifest.json records one checksum per file, which only a full re-read can
 * check. `k3 pack` also writes units.sum: one line per unit the runtime
 * reads as a whole (each layer's trunk run, each routed expert page, the
 * embedding and head files) with the FNV-1a 64 of the whole unit and of its
 * first 4 KiB. `k3 pack --verify DIR` checks every unit in full and names
 * the first one that differs; loading a packed model checks a sample (the
 * first 4 KiB of every trunk run, of the embedding and head files and of up
 * to 256 expert pages spread over the file), so weights overwritten in place
 * are refused instead of silently giving garbage. A directory packed before
 * units.sum existed loads without the check. */
#ifndef K3_UNIT_SUMS_H
#define K3_UNIT_SUMS_H

#include "k3_error.h"
#include "manifest.h"

#define K3_UNIT_SUMS_FILE "units.sum"
#define K3_UNIT_SUMS_HEAD_BYTES 4096u

/* Hash every unit of the packed model m and write m->dir/units.sum. */
int k3_unit_sums_write(const k3_manifest *m, k3_error *err);

/* Check m's units against units.sum: every unit in full (sample = 0) or
 * the cheap load-time sample (sample = 1). 0 when they match or there is
 * no units.sum; -1 with err naming the file and unit otherwise. */
int k3_unit_sums_check(const k3_manifest *m, int sample, k3_error *err);

#endif
