/* manifest_tables.c - read tables.bin, the per-tensor, per-layer and
 * per-page records of a packed directory (layout in manifest.h).
 *
 * The records are decoded in chunks straight into the manifest's compact
 * arrays: the memory used is those arrays plus one 1 MiB buffer, whatever the
 * model's size (less for a small model: the buffer is never larger than the
 * file). Every count is checked against the file's real size before
 * anything is allocated, and the file's FNV-1a must equal both its header and
 * manifest.json before a record is trusted. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "manifest_tables.h"
#include "k3_util.h"

#define CHUNK_BYTES ((size_t)1 << 20)   /* read at most this much at a time */

/* Little-endian fields of a record. */
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* The open file, where the next section starts, and the running checksum. */
typedef struct tables_file {
    int fd;
    const char *path;
    uint64_t at;
    uint64_t hash;
    uint8_t *buf;                 /* the records' read buffer */
    size_t buf_bytes;             /* CHUNK_BYTES, or the whole file when smaller */
} tables_file;

/* The next n bytes of the file (n <= tf->buf_bytes) into tf->buf, hashed. */
static int read_next(tables_file *tf, size_t n, k3_error *err)
{
    if (k3_pread_full(tf->fd, tf->buf, n, tf->at, tf->path, err)) return -1;
    tf->hash = k3_fnv1a64(tf->hash, tf->buf, n);
    tf->at += n;
    return 0;
}

/* One 88-byte tensor record into t (name set later). */
static int decode_tensor(const uint8_t *r, int i, const k3_tables_expect *want, k3_manifest_tensor *t,
                         const char *path, k3_error *err)
{
    t->offset = le64(r);
    t->bytes = le64(r + 8);
    for (int d = 0; d < K3_MANIFEST_MAX_DIMS; d++) t->shape[d] = (int64_t)le64(r + 16 + 8 * d);
    unsigned dtype = r[80], ndim = r[81], file = r[82];
    t->layer = t->expert = -1;
    if (dtype >= (unsigned)want->n_dtypes)
        return k3_err(err, "%s: tensor %d: dtype index %u, but manifest.json lists %d dtypes", path, i, dtype,
                      want->n_dtypes);
    if (ndim > K3_MANIFEST_MAX_DIMS)
        return k3_err(err, "%s: tensor %d: %u dimensions (at most %d)", path, i, ndim, K3_MANIFEST_MAX_DIMS);
    if (file >= K3_PK_NFILES) return k3_err(err, "%s: tensor %d: file %u is not one of 0..3", path, i, file);
    for (int d = 0; d < K3_MANIFEST_MAX_DIMS; d++)
        if (t->shape[d] < 0 || t->shape[d] > (int64_t)1 << 40 || (d >= (int)ndim && t->shape[d] != 0))
            return k3_err(err, "%s: tensor %d: shape[%d] = %lld is out of range", path, i, d, (long long)t->shape[d]);
    for (int k = 83; k < 88; k++)
        if (r[k]) return k3_err(err, "%s: tensor %d: reserved byte %d is not zero", path, i, k);
    t->dtype = want->dtypes[dtype];
    t->qtype = want->qtypes[dtype];
    t->ndim = (uint8_t)ndim;
    t->file = (uint8_t)file;
    return 0;
}

/* n records of rec_bytes each, in chunks, handed to decode one by one. */
typedef int (*decode_fn)(const uint8_t *r, int i, void *ctx, k3_error *err);
static int read_records(tables_file *tf, int n, size_t rec_bytes, decode_fn decode, void *ctx, k3_error *err)
{
    size_t per_chunk = tf->buf_bytes / rec_bytes;
    for (int i = 0; i < n;) {
        size_t k = (size_t)(n - i) < per_chunk ? (size_t)(n - i) : per_chunk;
        if (read_next(tf, k * rec_bytes, err)) return -1;
        for (size_t j = 0; j < k; j++, i++)
            if (decode(tf->buf + j * rec_bytes, i, ctx, err)) return -1;
    }
    return 0;
}

typedef struct decode_ctx {
    k3_manifest *m;
    const k3_tables_expect *want;
    k3_manifest_page *pages;
    const char *path;
} decode_ctx;

/* Adapters from read_records to the three record kinds. */
static int tensor_record(const uint8_t *r, int i, void *ctx, k3_error *err)
{
    decode_ctx *c = ctx;
    return decode_tensor(r, i, c->want, &c->m->tensors[i], c->path, err);
}

static int layer_record(const uint8_t *r, int i, void *ctx, k3_error *err)
{
    (void)err;
    decode_ctx *c = ctx;
    c->m->layers[i] = (k3_manifest_layer){le64(r), le64(r + 8), 0};
    return 0;
}

static int page_record(const uint8_t *r, int i, void *ctx, k3_error *err)
{
    decode_ctx *c = ctx;
    uint32_t layer = le32(r), expert = le32(r + 4);
    if (layer > 0xffff || expert > 0xfffff)
        return k3_err(err, "%s: page %d: (layer %u, expert %u) is out of range", c->path, i, layer, expert);
    c->pages[i] = (k3_manifest_page){(int32_t)layer, (int32_t)expert, le64(r + 8)};
    return 0;
}

/* The names block: exactly n_tensors non-empty NUL-terminated names. */
static int read_names(tables_file *tf, k3_manifest *m, uint64_t names_bytes, k3_error *err)
{
    m->names_ = malloc(names_bytes ? names_bytes : 1);
    if (!m->names_) return k3_err(err, "%s: out of memory for %llu bytes of names", tf->path,
                                  (unsigned long long)names_bytes);
    for (uint64_t done = 0; done < names_bytes;) {
        size_t n = names_bytes - done < CHUNK_BYTES ? (size_t)(names_bytes - done) : CHUNK_BYTES;
        if (k3_pread_full(tf->fd, m->names_ + done, n, tf->at, tf->path, err)) return -1;
        tf->hash = k3_fnv1a64(tf->hash, m->names_ + done, n);
        tf->at += n;
        done += n;
    }
    uint64_t pos = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const char *name = m->names_ + pos;
        const char *nul = memchr(name, 0, names_bytes - pos);
        if (!nul) return k3_err(err, "%s: the name of tensor %d is not NUL-terminated", tf->path, i);
        if (nul == name) return k3_err(err, "%s: the name of tensor %d is empty", tf->path, i);
        m->tensors[i].name = name;
        pos += (uint64_t)(nul - name) + 1;
    }
    if (pos != names_bytes)
        return k3_err(err, "%s: %llu bytes after the last name", tf->path, (unsigned long long)(names_bytes - pos));
    return 0;
}

/* The header's fields, checked against the file's size before any allocation. */
static int read_header(tables_file *tf, const k3_tables_expect *want, uint64_t file_bytes, uint32_t counts[3],
                       uint64_t *names_bytes, uint64_t *checksum, k3_error *err)
{
    const char *path = tf->path;
    if (file_bytes < K3_TABLES_HEADER_BYTES)
        return k3_err(err, "%s: %llu bytes, shorter than its %u-byte header", path, (unsigned long long)file_bytes,
                      K3_TABLES_HEADER_BYTES);
    if (k3_pread_full(tf->fd, tf->buf, K3_TABLES_HEADER_BYTES, 0, path, err)) return -1;
    const uint8_t *h = tf->buf;
    if (memcmp(h, K3_TABLES_MAGIC, 8)) return k3_err(err, "%s: not a k3 tables file (bad magic)", path);
    if (le32(h + 8) != K3_TABLES_VERSION)
        return k3_err(err, "%s: version %u is not supported (this build reads version %u)", path, le32(h + 8),
                      K3_TABLES_VERSION);
    if (le32(h + 12) != K3_TABLES_HEADER_BYTES || le32(h + 28) != K3_TABLES_TENSOR_BYTES)
        return k3_err(err, "%s: header of %u bytes with %u-byte tensor records (expected %u and %u)", path,
                      le32(h + 12), le32(h + 28), K3_TABLES_HEADER_BYTES, K3_TABLES_TENSOR_BYTES);
    for (int k = 48; k < 64; k++)
        if (h[k]) return k3_err(err, "%s: reserved header byte %d is not zero", path, k);
    counts[0] = le32(h + 16);
    counts[1] = le32(h + 20);
    counts[2] = le32(h + 24);
    *names_bytes = le64(h + 32);
    *checksum = le64(h + 40);
    if (counts[0] > INT32_MAX / 2 || counts[1] > 1 << 16 || counts[2] > INT32_MAX / 2)
        return k3_err(err, "%s: %u tensors, %u layers, %u pages: too many", path, counts[0], counts[1], counts[2]);
    uint64_t body = (uint64_t)counts[0] * K3_TABLES_TENSOR_BYTES + (uint64_t)counts[1] * K3_TABLES_LAYER_BYTES +
                    (uint64_t)counts[2] * K3_TABLES_PAGE_BYTES;
    if (*names_bytes > file_bytes || body + *names_bytes != file_bytes - K3_TABLES_HEADER_BYTES)
        return k3_err(err, "%s: %llu bytes, but its header describes %u tensors, %u layers, %u pages and %llu bytes "
                      "of names (truncated or modified?)", path, (unsigned long long)file_bytes, counts[0],
                      counts[1], counts[2], (unsigned long long)*names_bytes);
    if (file_bytes != want->bytes)
        return k3_err(err, "%s: %llu bytes but manifest.json records %llu (from another pack?)", path,
                      (unsigned long long)file_bytes, (unsigned long long)want->bytes);
    if (*checksum != want->checksum)
        return k3_err(err, "%s: checksum %016llx in its header, manifest.json records %016llx (from another pack?)",
                      path, (unsigned long long)*checksum, (unsigned long long)want->checksum);
    tf->at = K3_TABLES_HEADER_BYTES;
    return 0;
}

/* Header, allocations sized by it, the three record sections, the names, then
 * the checksum over all of it. */
static int read_tables(tables_file *tf, k3_manifest *m, const k3_tables_expect *want, k3_manifest_page **pages,
                       int *n_pages, k3_error *err)
{
    struct stat st;
    if (fstat(tf->fd, &st) != 0) return k3_err(err, "%s: %s", tf->path, strerror(errno));
    uint32_t counts[3] = {0, 0, 0};
    uint64_t names_bytes = 0, checksum = 0;
    tf->buf_bytes = (uint64_t)st.st_size < CHUNK_BYTES ? (size_t)st.st_size : CHUNK_BYTES;
    if (tf->buf_bytes < K3_TABLES_HEADER_BYTES + K3_TABLES_TENSOR_BYTES)
        tf->buf_bytes = K3_TABLES_HEADER_BYTES + K3_TABLES_TENSOR_BYTES;   /* a header, then a record */
    if (!(tf->buf = malloc(tf->buf_bytes))) return k3_err(err, "%s: out of memory", tf->path);
    if (read_header(tf, want, (uint64_t)st.st_size, counts, &names_bytes, &checksum, err)) return -1;
    m->tensors = calloc(counts[0] ? counts[0] : 1, sizeof *m->tensors);
    m->layers = calloc(counts[1] ? counts[1] : 1, sizeof *m->layers);
    *pages = malloc((counts[2] ? counts[2] : 1) * sizeof **pages);
    if (!m->tensors || !m->layers || !*pages)
        return k3_err(err, "%s: out of memory for %u tensors", tf->path, counts[0]);
    decode_ctx c = {m, want, *pages, tf->path};
    if (read_records(tf, (int)counts[0], K3_TABLES_TENSOR_BYTES, tensor_record, &c, err) ||
        read_records(tf, (int)counts[1], K3_TABLES_LAYER_BYTES, layer_record, &c, err) ||
        read_records(tf, (int)counts[2], K3_TABLES_PAGE_BYTES, page_record, &c, err))
        return -1;
    m->n_tensors = (int)counts[0];
    m->n_layers = (int)counts[1];
    *n_pages = (int)counts[2];
    if (read_names(tf, m, names_bytes, err)) return -1;
    if (tf->hash != checksum)
        return k3_err(err, "%s: checksum %016llx does not match its header (%016llx): the file is corrupt", tf->path,
                      (unsigned long long)tf->hash, (unsigned long long)checksum);
    return 0;
}

/* Open, read, close: see manifest_tables.h. */
int k3_manifest_tables_read(k3_manifest *m, const k3_tables_expect *want, k3_manifest_page **pages, int *n_pages,
                            k3_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", m->dir, K3_TABLES_FILE);
    tables_file tf = {.fd = -1, .path = path, .at = 0, .hash = K3_FNV_INIT, .buf = NULL, .buf_bytes = 0};
    int rc = -1;
    tf.fd = k3_open_regular(path, O_RDONLY, err);
    if (tf.fd >= 0) {
        rc = read_tables(&tf, m, want, pages, n_pages, err);
        close(tf.fd);
    }
    free(tf.buf);
    return rc;
}
