/* tables_write.c - the writer of tables.bin (layout in manifest.h; the
 * reader is engine/formats/manifest_tables.c).
 *
 * The file is built in memory (88 bytes a tensor plus the names: about 60 MB
 * for the real K3, written once by `k3 pack`), its checksum put in the
 * header, then written and fsync'd in one go. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tables_write.h"
#include "k3_util.h"

/* Little-endian stores. */
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Index of dtype (and block type) in w's list, appended on first use; -1 if
 * the list is full. */
static int dtype_index(k3_tables_written *w, k3_dtype dt, const k3_quant_type *qt)
{
    for (int i = 0; i < w->n_dtypes; i++)
        if (w->dtypes[i] == dt && w->qtypes[i] == qt) return i;
    if (w->n_dtypes == K3_TABLES_MAX_DTYPES) return -1;
    w->dtypes[w->n_dtypes] = dt;
    w->qtypes[w->n_dtypes] = qt;
    return w->n_dtypes++;
}

/* Header, records and names into one buffer; the checksum last. */
static uint8_t *encode(const k3_manifest_tensor *tensors, int n_tensors, const k3_manifest_layer *layers, int n_layers,
                       const k3_manifest_page *pages, int n_pages, k3_tables_written *w, const char *path,
                       k3_error *err)
{
    uint64_t names_bytes = 0;
    for (int i = 0; i < n_tensors; i++) names_bytes += strlen(tensors[i].name) + 1;
    uint64_t total = K3_TABLES_HEADER_BYTES + (uint64_t)n_tensors * K3_TABLES_TENSOR_BYTES +
                     (uint64_t)n_layers * K3_TABLES_LAYER_BYTES + (uint64_t)n_pages * K3_TABLES_PAGE_BYTES + names_bytes;
    uint8_t *buf = calloc(1, total);
    if (!buf) { k3_err(err, "%s: out of memory for %llu bytes", path, (unsigned long long)total); return NULL; }
    memcpy(buf, K3_TABLES_MAGIC, 8);
    put32(buf + 8, K3_TABLES_VERSION);
    put32(buf + 12, K3_TABLES_HEADER_BYTES);
    put32(buf + 16, (uint32_t)n_tensors);
    put32(buf + 20, (uint32_t)n_layers);
    put32(buf + 24, (uint32_t)n_pages);
    put32(buf + 28, K3_TABLES_TENSOR_BYTES);
    put64(buf + 32, names_bytes);
    uint8_t *p = buf + K3_TABLES_HEADER_BYTES;
    for (int i = 0; i < n_tensors; i++, p += K3_TABLES_TENSOR_BYTES) {
        const k3_manifest_tensor *t = &tensors[i];
        int dt = dtype_index(w, t->dtype, t->dtype == K3_DT_GGML ? t->qtype : NULL);
        if (dt < 0 || t->ndim > K3_MANIFEST_MAX_DIMS) {
            k3_err(err, "%s: tensor '%s': more than %d dtypes or %d dimensions", path, t->name,
                   K3_TABLES_MAX_DTYPES, K3_MANIFEST_MAX_DIMS);
            free(buf);
            return NULL;
        }
        put64(p, t->offset);
        put64(p + 8, t->bytes);
        for (int d = 0; d < t->ndim; d++) put64(p + 16 + 8 * d, (uint64_t)t->shape[d]);
        p[80] = (uint8_t)dt;
        p[81] = t->ndim;
        p[82] = t->file;
    }
    for (int l = 0; l < n_layers; l++, p += K3_TABLES_LAYER_BYTES) {
        put64(p, layers[l].trunk_offset);
        put64(p + 8, layers[l].trunk_bytes);
    }
    for (int i = 0; i < n_pages; i++, p += K3_TABLES_PAGE_BYTES) {
        put32(p, (uint32_t)pages[i].layer);
        put32(p + 4, (uint32_t)pages[i].expert);
        put64(p + 8, pages[i].offset);
    }
    for (int i = 0; i < n_tensors; i++) {
        size_t l = strlen(tensors[i].name) + 1;
        memcpy(p, tensors[i].name, l);
        p += l;
    }
    w->bytes = total;
    w->checksum = k3_fnv1a64(K3_FNV_INIT, buf + K3_TABLES_HEADER_BYTES, total - K3_TABLES_HEADER_BYTES);
    put64(buf + 40, w->checksum);
    return buf;
}

/* Encode, write, fsync: see tables_write.h. */
int k3_tables_write(const char *path, const k3_manifest_tensor *tensors, int n_tensors,
                    const k3_manifest_layer *layers, int n_layers, const k3_manifest_page *pages, int n_pages,
                    k3_tables_written *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = encode(tensors, n_tensors, layers, n_layers, pages, n_pages, out, path, err);
    if (!buf) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) { free(buf); return k3_err(err, "%s: %s", path, strerror(errno)); }
    int bad = fwrite(buf, 1, out->bytes, f) != out->bytes || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0) bad = 1;
    free(buf);
    if (bad) return k3_err(err, "%s: write failed: %s", path, strerror(e));
    return 0;
}

/* The JSON text manifest.json carries for the tables. */
void k3_tables_json(const k3_tables_written *w, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "{\"bytes\": %llu, \"checksum\": \"%016llx\", \"dtypes\": [",
                                (unsigned long long)w->bytes, (unsigned long long)w->checksum);
    for (int i = 0; i < w->n_dtypes && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s\"%s\"", i ? ", " : "",
                              w->qtypes[i] ? w->qtypes[i]->name : k3_dtype_name(w->dtypes[i]));
    if (n < cap) snprintf(buf + n, cap - n, "]}");
}
