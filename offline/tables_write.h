/* tables_write.h - write a packed directory's tables.bin (the layout is in
 * engine/formats/manifest.h): `k3 pack` and the manifest tests. */
#ifndef K3_TABLES_WRITE_H
#define K3_TABLES_WRITE_H

#include "manifest.h"

/* What manifest.json must record about the tables just written. */
typedef struct k3_tables_written {
    uint64_t bytes;
    uint64_t checksum;
    int n_dtypes;
    k3_dtype dtypes[K3_TABLES_MAX_DTYPES];   /* in the order the records index them */
    const k3_quant_type *qtypes[K3_TABLES_MAX_DTYPES];   /* block type of a K3_DT_GGML entry */
} k3_tables_written;

/* Write path (fsync'd) from the tensors (name, offset, bytes, dtype, shape,
 * file), the layer runs and the expert pages. The dtype list is the distinct
 * dtypes (a block type counting as its own) in order of first use. 0, or -1 with err naming path. */
int k3_tables_write(const char *path, const k3_manifest_tensor *tensors, int n_tensors,
                    const k3_manifest_layer *layers, int n_layers, const k3_manifest_page *pages, int n_pages,
                    k3_tables_written *out, k3_error *err);

/* manifest.json's "tables" object for what was written, e.g.
 * {"bytes": 4096, "checksum": "...", "dtypes": ["BF16"]}, into buf. */
void k3_tables_json(const k3_tables_written *w, char *buf, size_t cap);

#endif
