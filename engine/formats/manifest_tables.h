/* manifest_tables.h - the reader of a packed directory's tables.bin (the
 * layout is in manifest.h), used by manifest.c once manifest.json has given
 * the dtype names and the size and checksum the tables must have. */
#ifndef K3_MANIFEST_TABLES_H
#define K3_MANIFEST_TABLES_H

#include "manifest.h"

/* What manifest.json says tables.bin must be. */
typedef struct k3_tables_expect {
    uint64_t bytes;
    uint64_t checksum;
    int n_dtypes;
    k3_dtype dtypes[K3_TABLES_MAX_DTYPES];   /* a record's dtype byte indexes this */
    const k3_quant_type *qtypes[K3_TABLES_MAX_DTYPES];   /* for K3_DT_GGML entries; else NULL */
} k3_tables_expect;

/* Read m->dir/tables.bin into m->tensors (with m->names_), m->layers and a
 * malloc'd page list (*pages, *n_pages), checking its size, header, checksum
 * and every record's fields, but not yet the bounds against the data files
 * (manifest.c does that). 0, or -1 with err naming tables.bin and the problem;
 * what was allocated stays in m and *pages for the caller to free. */
int k3_manifest_tables_read(k3_manifest *m, const k3_tables_expect *want, k3_manifest_page **pages, int *n_pages,
                            k3_error *err);

#endif
