/* manifest.c - bounds-checked reader of a packed directory's manifest.json
 * (see manifest.h); the per-unit tables come from tables.bin
 * (manifest_tables.c).
 *
 * The JSON is parsed with jansson, the one JSON library of the project. It
 * is small whatever the model's size (no per-tensor entries), so its tree
 * costs nothing; the tables that used to make a manifest of the real K3's
 * size a 108 MB document peaking at 723 MiB are fixed-size binary records
 * read straight into the compact arrays (docs/PERFORMANCE.md, "Manifest").
 * Every allocation sized by the files' contents is bounded by what they
 * describe: the expert-page table has exactly one entry per listed page. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "manifest.h"
#include "manifest_tables.h"
#include "k3_util.h"

/* A manifest is a few KiB plus the model's config.json; 64 MiB is far past any
 * real one and still refuses a wrong file before jansson builds a tree of it. */
#define K3_MANIFEST_MAX_BYTES ((size_t)64 << 20)

static const char *const file_names[K3_PK_NFILES] = {"trunk.bin", "experts.bin", "embed.bin", "head.bin"};

/* The file names, shared with the writer, so the two cannot disagree on spelling. */
const char *k3_pk_file_name(k3_pk_file f) { return (unsigned)f < K3_PK_NFILES ? file_names[f] : "?"; }

/* ---------------------------------------------------------------- loading */

typedef struct load_state {
    k3_manifest *m;
    const char *mpath;            /* manifest.json, for messages */
    k3_error *err;
    k3_tables_expect tables;      /* what tables.bin must be */
    k3_manifest_page *pages;
    int n_pages;
    const char *embed_name, *norm_name, *lm_head_name;   /* inside the JSON tree */
    int64_t n_layers_moe, n_experts_decl;
    int tied;
    int64_t version;              /* 2, or 3 when block types may appear */
} load_state;

/* One line naming manifest.json and the problem. Returns -1. */
static int fail(load_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(load_state *s, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return k3_err(s->err, "%s: %s", s->mpath, msg);
}

/* obj[key], or a refusal saying which object lacks it. */
static json_t *member(load_state *s, json_t *obj, const char *key, const char *where)
{
    json_t *v = json_object_get(obj, key);
    if (!v) fail(s, "%s lacks \"%s\"", where, key);
    return v;
}

/* An integer in [lo, hi]; a fraction or another type is refused by name. */
static int get_int(load_state *s, json_t *v, const char *what, int64_t lo, int64_t hi, int64_t *out)
{
    if (json_is_real(v)) return fail(s, "%s: expected an integer, got a fraction", what);
    if (!json_is_integer(v)) return fail(s, "%s: expected an integer", what);
    int64_t x = (int64_t)json_integer_value(v);
    if (x < lo || x > hi)
        return fail(s, "%s: %lld is out of range [%lld, %lld]", what, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

/* A byte count or offset: a non-negative integer. */
static int get_uint(load_state *s, json_t *v, const char *what, uint64_t *out)
{
    int64_t x;
    if (get_int(s, v, what, 0, INT64_MAX, &x)) return -1;
    *out = (uint64_t)x;
    return 0;
}

/* A string member; NULL (with the refusal) if absent or not a string. */
static const char *get_string(load_state *s, json_t *obj, const char *key, const char *where)
{
    json_t *v = member(s, obj, key, where);
    if (!v) return NULL;
    if (!json_is_string(v)) { fail(s, "%s.%s: expected a string", where, key); return NULL; }
    return json_string_value(v);
}

/* obj[key] as an object, with the refusal otherwise. */
static json_t *get_object(load_state *s, json_t *obj, const char *key, const char *where)
{
    json_t *v = member(s, obj, key, where);
    if (v && !json_is_object(v)) {
        fail(s, "\"%s\" must be an object", key);
        return NULL;
    }
    return v;
}

/* Sixteen lowercase-or-uppercase hex digits. */
static int parse_hex64(const char *s, uint64_t *out)
{
    if (strlen(s) != 16) return -1;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        int c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* "tables": {bytes, checksum, dtypes: ["BF16", ...]}: what tables.bin must be.
 * A name that is no safetensors dtype may be a GGUF block type ("Q8_0") of a
 * version 3 manifest: K3_DT_GGML with that qtype. */
static int parse_tables(load_state *s, json_t *tb)
{
    const char *where = "\"tables\"";
    json_t *bytes = member(s, tb, "bytes", where);
    if (!bytes || get_uint(s, bytes, "tables.bytes", &s->tables.bytes)) return -1;
    const char *sum = get_string(s, tb, "checksum", where);
    if (!sum) return -1;
    if (parse_hex64(sum, &s->tables.checksum)) return fail(s, "tables.checksum: expected 16 hex digits");
    json_t *dtypes = member(s, tb, "dtypes", where);
    if (!dtypes) return -1;
    if (!json_is_array(dtypes) || json_array_size(dtypes) > K3_TABLES_MAX_DTYPES)
        return fail(s, "tables.dtypes must be an array of at most %d dtype names", K3_TABLES_MAX_DTYPES);
    size_t i;
    json_t *d;
    json_array_foreach(dtypes, i, d) {
        k3_dtype *dt = &s->tables.dtypes[i];
        const char *name = json_is_string(d) ? json_string_value(d) : "?";
        const k3_quant_type *qt = json_is_string(d) ? k3_quant_type_by_name(name) : NULL;
        s->tables.qtypes[i] = NULL;
        if (qt && qt->block_elems > 1) {
            if (s->version < 3)
                return fail(s, "tables.dtypes[%zu]: block type \"%s\" in a version %lld manifest (block types "
                            "need version 3)", i, name, (long long)s->version);
            *dt = K3_DT_GGML;
            s->tables.qtypes[i] = qt;
        } else if (!json_is_string(d) || k3_dtype_parse(name, dt) != 0 || k3_dtype_size(*dt) == 0) {
            return fail(s, "tables.dtypes[%zu]: unsupported dtype \"%s\"", i, name);
        }
    }
    s->tables.n_dtypes = (int)json_array_size(dtypes);
    return 0;
}

/* "experts": {page_bytes, n_layers_moe, [n_experts]}; the pages are in tables.bin. */
static int parse_experts(load_state *s, json_t *ex)
{
    const char *where = "\"experts\"";
    json_t *pb = member(s, ex, "page_bytes", where), *nl = pb ? member(s, ex, "n_layers_moe", where) : NULL;
    if (!nl) return -1;
    if (get_uint(s, pb, "experts.page_bytes", &s->m->page_bytes) ||
        get_int(s, nl, "experts.n_layers_moe", 0, 1 << 16, &s->n_layers_moe))
        return -1;
    json_t *ne = json_object_get(ex, "n_experts");
    if (ne && get_int(s, ne, "experts.n_experts", 0, 1 << 20, &s->n_experts_decl)) return -1;
    return 0;
}

/* "embed": {name, row_bytes, rows, dtype} */
static int parse_embed(load_state *s, json_t *em)
{
    const char *where = "\"embed\"";
    k3_manifest *m = s->m;
    if (!(s->embed_name = get_string(s, em, "name", where))) return -1;
    json_t *rb = member(s, em, "row_bytes", where), *rows = rb ? member(s, em, "rows", where) : NULL;
    if (!rows) return -1;
    const char *dtype = get_string(s, em, "dtype", where);
    if (!dtype) return -1;
    if (get_uint(s, rb, "embed.row_bytes", &m->embed_row_bytes) ||
        get_int(s, rows, "embed.rows", 1, INT32_MAX, &m->embed_rows))
        return -1;
    m->embed_qtype = NULL;
    if (k3_dtype_parse(dtype, &m->embed_dtype) == 0) return 0;
    if (!(m->embed_qtype = k3_quant_type_by_name(dtype)))   /* a GGUF's table: its block type */
        return fail(s, "embed.dtype: unsupported dtype \"%s\"", dtype);
    m->embed_dtype = K3_DT_GGML;
    return 0;
}

/* "head": {norm, lm_head, tied} */
static int parse_head(load_state *s, json_t *hd)
{
    const char *where = "\"head\"";
    if (!(s->norm_name = get_string(s, hd, "norm", where)) || !(s->lm_head_name = get_string(s, hd, "lm_head", where)))
        return -1;
    json_t *tied = member(s, hd, "tied", where);
    if (!tied) return -1;
    if (!json_is_boolean(tied)) return fail(s, "head.tied: expected true or false");
    s->tied = json_is_true(tied);
    return 0;
}

/* "files": {"trunk.bin": N, ...} or "checksums": {"trunk.bin": "hex", ...} */
static int parse_files(load_state *s, json_t *obj, int checksums)
{
    char where[32], field[96];
    snprintf(where, sizeof where, "\"%s\"", checksums ? "checksums" : "files");
    for (int f = 0; f < K3_PK_NFILES; f++) {
        json_t *v = member(s, obj, file_names[f], where);
        if (!v) return -1;
        snprintf(field, sizeof field, "%s.%s", checksums ? "checksums" : "files", file_names[f]);
        if (!checksums) {
            if (get_uint(s, v, field, &s->m->file_bytes[f])) return -1;
        } else if (!json_is_string(v) || parse_hex64(json_string_value(v), &s->m->checksum[f])) {
            return fail(s, "%s: expected 16 hex digits", field);
        }
    }
    return 0;
}

/* "source": {fingerprint, shards: [...]} */
static int parse_source(load_state *s, json_t *src)
{
    const char *fp = get_string(s, src, "fingerprint", "\"source\"");
    if (!fp) return -1;
    if (parse_hex64(fp, &s->m->fingerprint)) return fail(s, "source.fingerprint: expected 16 hex digits");
    json_t *shards = member(s, src, "shards", "\"source\"");
    if (!shards) return -1;
    if (!json_is_array(shards)) return fail(s, "source.shards must be an array");
    return 0;
}

/* The "config" object, as compact JSON text in its own key order. */
static int parse_config(load_state *s, json_t *cfg)
{
    s->m->config_json = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s->m->config_json) return fail(s, "out of memory");
    s->m->config_len = strlen(s->m->config_json);
    return 0;
}

/* "format", "version" and "alignment": what this build reads. */
static int check_format(load_state *s, json_t *root)
{
    static const char *const keys[] = {"format", "version", "alignment", "source", "config", "tables",
                                       "experts", "embed", "head", "files", "checksums"};
    json_t *f = json_object_get(root, "format");
    if (!f) return fail(s, "missing required key \"format\"");
    if (!json_is_string(f) || strcmp(json_string_value(f), K3_PACK_FORMAT))
        return fail(s, "\"format\" is \"%s\", expected \"%s\"", json_is_string(f) ? json_string_value(f) : "?",
                    K3_PACK_FORMAT);
    int64_t v;
    json_t *ver = json_object_get(root, "version");
    if (!ver) return fail(s, "missing required key \"version\"");
    if (get_int(s, ver, "version", INT64_MIN, INT64_MAX, &v)) return -1;
    if (v >= 1 && v < K3_PACK_VERSION_PLAIN)
        return fail(s, "packed with format version %lld (its tables inside manifest.json), which this build no "
                    "longer reads: re-pack it with `k3 pack SRC %s --force`", (long long)v, s->m->dir);
    if (v != K3_PACK_VERSION && v != K3_PACK_VERSION_PLAIN)
        return fail(s, "version %lld is not supported (this build reads versions %d and %d)", (long long)v,
                    K3_PACK_VERSION_PLAIN, K3_PACK_VERSION);
    s->version = v;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!json_object_get(root, keys[i])) return fail(s, "missing required key \"%s\"", keys[i]);
    if (get_int(s, json_object_get(root, "alignment"), "alignment", INT64_MIN, INT64_MAX, &v)) return -1;
    if (v != K3_PACK_ALIGN) return fail(s, "alignment %lld is not supported (expected %u)", (long long)v, K3_PACK_ALIGN);
    return 0;
}

/* The whole document: the tables are filled from the tree; unknown keys are
 * ignored. */
static int parse_document(load_state *s, json_t *root)
{
    if (!json_is_object(root)) return fail(s, "manifest.json must hold a JSON object");
    if (check_format(s, root)) return -1;
    json_t *v;
    if (!(v = get_object(s, root, "source", "the manifest")) || parse_source(s, v)) return -1;
    if (!(v = get_object(s, root, "config", "the manifest")) || parse_config(s, v)) return -1;
    if (!(v = get_object(s, root, "tables", "the manifest")) || parse_tables(s, v)) return -1;
    if (!(v = get_object(s, root, "experts", "the manifest")) || parse_experts(s, v)) return -1;
    if (!(v = get_object(s, root, "embed", "the manifest")) || parse_embed(s, v)) return -1;
    if (!(v = get_object(s, root, "head", "the manifest")) || parse_head(s, v)) return -1;
    if (!(v = get_object(s, root, "files", "the manifest")) || parse_files(s, v, 0)) return -1;
    if (!(v = get_object(s, root, "checksums", "the manifest")) || parse_files(s, v, 1)) return -1;
    return 0;
}

/* manifest.json as a jansson tree (duplicate keys refused), or NULL with a
 * one-line message giving the line and byte of a syntax error. */
static json_t *load_json(const char *path, k3_error *err)
{
    char *text;
    size_t len;
    if (k3_read_file(path, K3_MANIFEST_MAX_BYTES, &text, &len, err)) return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root) {
        if (strstr(jerr.text, "duplicate"))
            k3_err(err, "%s: line %d: a key appears twice (%s)", path, jerr.line, jerr.text);
        else
            k3_err(err, "%s: not valid JSON at line %d, byte %d: %s", path, jerr.line, jerr.position, jerr.text);
    }
    return root;
}

/* qsort helpers for the overlap checks. */
static const k3_manifest_tensor *sort_tensors_base;
/* Order by (file, offset) to find overlapping tensors in one pass. */
static int cmp_tensor_pos(const void *a, const void *b)
{
    const k3_manifest_tensor *x = &sort_tensors_base[*(const int *)a], *y = &sort_tensors_base[*(const int *)b];
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

/* Order pages by (layer, expert) to find missing and repeated ones. */
static int cmp_page_layer_expert(const void *a, const void *b)
{
    const k3_manifest_page *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return (x->expert > y->expert) - (x->expert < y->expert);
}

/* Order pages by offset to find overlaps and to map tensors to pages. */
static int cmp_page_offset(const void *a, const void *b)
{
    const k3_manifest_page *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* The four files exist with the recorded sizes, each a multiple of the alignment. */
static int check_files(load_state *s, const char *mpath, k3_error *err)
{
    k3_manifest *m = s->m;
    for (int f = 0; f < K3_PK_NFILES; f++) {
        char path[4200];
        k3_manifest_path(m, (k3_pk_file)f, path, sizeof path);
        struct stat st;
        if (stat(path, &st) != 0)
            return k3_err(err, "%s: %s (listed in manifest.json)", path, strerror(errno));
        if (!S_ISREG(st.st_mode)) return k3_err(err, "%s: not a regular file", path);
        if ((uint64_t)st.st_size != m->file_bytes[f])
            return k3_err(err, "%s: file has %llu bytes but manifest.json records %llu (truncated or "
                          "modified?)", path, (unsigned long long)st.st_size, (unsigned long long)m->file_bytes[f]);
        if (m->file_bytes[f] % K3_PACK_ALIGN)
            return k3_err(err, "%s: files.%s = %llu is not a multiple of %u", mpath, file_names[f],
                          (unsigned long long)m->file_bytes[f], K3_PACK_ALIGN);
    }
    return 0;
}

/* A tensor's name (the key the name lookup compares). */
static const void *tensor_name_key(const void *owner, int32_t i, size_t *len)
{
    const k3_manifest *m = owner;
    *len = strlen(m->tensors[i].name);
    return m->tensors[i].name;
}

/* Names into the lookup table (no name twice); every tensor's bytes equal
 * dtype x shape and lie inside its file, aligned. */
static int check_tensors(load_state *s, const char *tpath, k3_error *err)
{
    k3_manifest *m = s->m;
    if (k3_strtab_init(&m->by_name_, (size_t)m->n_tensors)) return k3_err(err, "%s: out of memory", tpath);
    for (int i = 0; i < m->n_tensors; i++) {
        k3_manifest_tensor *t = &m->tensors[i];
        if (k3_strtab_insert(&m->by_name_, i, tensor_name_key, m) >= 0)
            return k3_err(err, "%s: tensor '%s' is listed twice", tpath, t->name);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[d])
                return k3_err(err, "%s: tensor '%s' shape is too large", tpath, t->name);
            numel *= (uint64_t)t->shape[d];
        }
        if (t->qtype) {
            uint64_t need = 0;
            int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
            if (row % t->qtype->block_elems || k3_quant_bytes(t->qtype, numel, &need))
                return k3_err(err, "%s: tensor '%s' rows of %lld weights are not whole %s blocks of %u", tpath,
                              t->name, (long long)row, t->qtype->name, t->qtype->block_elems);
            if (need != t->bytes)
                return k3_err(err, "%s: tensor '%s' has %llu bytes but %s x shape needs %llu", tpath, t->name,
                              (unsigned long long)t->bytes, t->qtype->name, (unsigned long long)need);
        } else if (numel * k3_dtype_size(t->dtype) != t->bytes) {
            return k3_err(err, "%s: tensor '%s' has %llu bytes but dtype %s x shape needs %llu", tpath, t->name,
                          (unsigned long long)t->bytes, k3_dtype_name(t->dtype),
                          (unsigned long long)(numel * k3_dtype_size(t->dtype)));
        }
        uint64_t fb = m->file_bytes[t->file];
        if (t->bytes > fb || t->offset > fb - t->bytes)
            return k3_err(err, "%s: tensor '%s' [%llu, +%llu) runs past the end of %s (%llu bytes)", tpath,
                          t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes,
                          file_names[t->file], (unsigned long long)fb);
        if (t->offset % K3_PACK_TENSOR_ALIGN)
            return k3_err(err, "%s: tensor '%s' offset %llu in %s is not %u-byte aligned", tpath, t->name,
                          (unsigned long long)t->offset, file_names[t->file], K3_PACK_TENSOR_ALIGN);
    }
    return 0;
}

/* Layer runs: aligned, inside trunk.bin, in forward order, disjoint. */
static int check_layers(load_state *s, const char *tpath, k3_error *err)
{
    k3_manifest *m = s->m;
    if (m->n_layers < 1) return k3_err(err, "%s: no layers", tpath);
    for (int l = 0; l < m->n_layers; l++) {
        const k3_manifest_layer *L = &m->layers[l];
        if (L->trunk_offset % K3_PACK_ALIGN || L->trunk_bytes % K3_PACK_ALIGN)
            return k3_err(err, "%s: layers[%d] run [%llu, +%llu) is not %u-byte aligned", tpath, l,
                          (unsigned long long)L->trunk_offset, (unsigned long long)L->trunk_bytes, K3_PACK_ALIGN);
        if (L->trunk_bytes > m->file_bytes[K3_PK_TRUNK] ||
            L->trunk_offset > m->file_bytes[K3_PK_TRUNK] - L->trunk_bytes)
            return k3_err(err, "%s: layers[%d] run [%llu, +%llu) runs past the end of trunk.bin (%llu bytes)",
                          tpath, l, (unsigned long long)L->trunk_offset, (unsigned long long)L->trunk_bytes,
                          (unsigned long long)m->file_bytes[K3_PK_TRUNK]);
        if (l > 0 && L->trunk_offset < m->layers[l - 1].trunk_offset + m->layers[l - 1].trunk_bytes)
            return k3_err(err, "%s: layers[%d] run starts at %llu, inside or before layers[%d]'s run", tpath, l,
                          (unsigned long long)L->trunk_offset, l - 1);
    }
    return 0;
}

/* Expert pages: aligned, inside experts.bin, every MoE layer listing experts
 * 0..n-1 once, no two overlapping; then the page table, one entry per page. */
static int check_pages(load_state *s, const char *tpath, k3_error *err)
{
    k3_manifest *m = s->m;
    if (s->n_pages > 0) {
        if (m->page_bytes == 0 || m->page_bytes % K3_PACK_ALIGN)
            return k3_err(err, "%s: experts.page_bytes %llu is not a positive multiple of %u", s->mpath,
                          (unsigned long long)m->page_bytes, K3_PACK_ALIGN);
        int max_e = 0;
        for (int i = 0; i < s->n_pages; i++) {
            const k3_manifest_page *p = &s->pages[i];
            if (p->layer >= m->n_layers)
                return k3_err(err, "%s: page %d names layer %d but there are %d layers", tpath, i,
                              p->layer, m->n_layers);
            if (p->offset % K3_PACK_ALIGN)
                return k3_err(err, "%s: page %d (layer %d, expert %d) offset %llu is not %u-byte "
                              "aligned", tpath, i, p->layer, p->expert, (unsigned long long)p->offset, K3_PACK_ALIGN);
            if (m->page_bytes > m->file_bytes[K3_PK_EXPERTS] ||
                p->offset > m->file_bytes[K3_PK_EXPERTS] - m->page_bytes)
                return k3_err(err, "%s: page %d (layer %d, expert %d) [%llu, +%llu) runs past the end "
                              "of experts.bin (%llu bytes)", tpath, i, p->layer, p->expert,
                              (unsigned long long)p->offset, (unsigned long long)m->page_bytes,
                              (unsigned long long)m->file_bytes[K3_PK_EXPERTS]);
            if (p->expert + 1 > max_e) max_e = p->expert + 1;
            m->layers[p->layer].n_experts++;
        }
        /* Every MoE layer must list experts 0..max_e-1 exactly once. Check
         * that on the pages sorted by (layer, expert) before allocating: the
         * table is then exactly one entry per listed page, never sized by an
         * expert id the file merely names (issue 10, defect 4). */
        qsort(s->pages, (size_t)s->n_pages, sizeof *s->pages, cmp_page_layer_expert);
        int moe = 0;
        for (int i = 0, l = -1, next_e = 0; i <= s->n_pages; i++) {
            const k3_manifest_page *p = i < s->n_pages ? &s->pages[i] : NULL;
            if (!p || p->layer != l) {                   /* a layer's run of pages ends */
                if (l >= 0 && next_e < max_e)
                    return k3_err(err, "%s: the expert pages lack (layer %d, expert %d)", tpath, l, next_e);
                if (!p) break;
                l = p->layer;
                next_e = 0;
                moe++;
            }
            if (p->expert < next_e)
                return k3_err(err, "%s: the expert pages list (layer %d, expert %d) twice", tpath, p->layer, p->expert);
            if (p->expert > next_e)
                return k3_err(err, "%s: the expert pages lack (layer %d, expert %d)", tpath, p->layer, next_e);
            next_e++;
        }
        if (s->n_experts_decl && s->n_experts_decl != max_e)
            return k3_err(err, "%s: experts.n_experts is %lld but tables.bin's pages name experts 0..%d", s->mpath,
                          (long long)s->n_experts_decl, max_e - 1);
        if (moe != s->n_layers_moe)
            return k3_err(err, "%s: experts.n_layers_moe is %lld but tables.bin's pages cover %d layers", s->mpath,
                          (long long)s->n_layers_moe, moe);
        assert((uint64_t)moe * (uint64_t)max_e == (uint64_t)s->n_pages);
        m->n_experts = max_e;
        m->moe_row = malloc((size_t)m->n_layers * sizeof *m->moe_row);
        m->page_offsets = malloc((size_t)s->n_pages * sizeof *m->page_offsets);
        if (!m->moe_row || !m->page_offsets) return k3_err(err, "%s: out of memory", tpath);
        for (int l = 0, row = 0; l < m->n_layers; l++) m->moe_row[l] = m->layers[l].n_experts ? row++ : -1;
        for (int i = 0; i < s->n_pages; i++)
            m->page_offsets[(size_t)m->moe_row[s->pages[i].layer] * max_e + s->pages[i].expert] = s->pages[i].offset;
        qsort(s->pages, (size_t)s->n_pages, sizeof *s->pages, cmp_page_offset);
        for (int i = 1; i < s->n_pages; i++)
            if (s->pages[i].offset < s->pages[i - 1].offset + m->page_bytes)
                return k3_err(err, "%s: expert pages (layer %d, expert %d) and (layer %d, expert %d) overlap "
                              "in experts.bin", tpath, s->pages[i - 1].layer, s->pages[i - 1].expert,
                              s->pages[i].layer, s->pages[i].expert);
    } else if (s->n_layers_moe != 0) {
        return k3_err(err, "%s: experts.n_layers_moe is %lld but tables.bin lists no pages", s->mpath,
                      (long long)s->n_layers_moe);
    }
    m->n_pages = s->n_pages;
    m->n_layers_moe = (int)s->n_layers_moe;
    return 0;
}

/* Each trunk tensor lies inside one layer run and each expert tensor inside
 * one page (which gives their layer and expert). */
static int check_membership(load_state *s, const char *tpath, k3_error *err)
{
    k3_manifest *m = s->m;
    for (int i = 0; i < m->n_tensors; i++) {
        k3_manifest_tensor *t = &m->tensors[i];
        if (t->file == K3_PK_TRUNK) {
            int lo = 0, hi = m->n_layers - 1, found = -1;
            while (lo <= hi) {
                int mid = (lo + hi) / 2;
                if (m->layers[mid].trunk_offset <= t->offset) { found = mid; lo = mid + 1; }
                else hi = mid - 1;
            }
            if (found < 0 || t->offset + t->bytes > m->layers[found].trunk_offset + m->layers[found].trunk_bytes)
                return k3_err(err, "%s: tensor '%s' [%llu, +%llu) in trunk.bin is not inside one layer run", tpath,
                              t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes);
            t->layer = found;
        } else if (t->file == K3_PK_EXPERTS) {
            int lo = 0, hi = s->n_pages - 1, found = -1;
            while (lo <= hi) {
                int mid = (lo + hi) / 2;
                if (s->pages[mid].offset <= t->offset) { found = mid; lo = mid + 1; }
                else hi = mid - 1;
            }
            if (found < 0 || t->offset + t->bytes > s->pages[found].offset + m->page_bytes)
                return k3_err(err, "%s: tensor '%s' [%llu, +%llu) in experts.bin is not inside one expert page",
                              tpath, t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes);
            t->layer = s->pages[found].layer;
            t->expert = s->pages[found].expert;
        }
    }
    return 0;
}

/* No two tensors overlap in a file. */
static int check_overlaps(load_state *s, const char *tpath, k3_error *err)
{
    k3_manifest *m = s->m;
    if (m->n_tensors > 1) {
        int *order = malloc((size_t)m->n_tensors * sizeof *order);
        if (!order) return k3_err(err, "%s: out of memory", tpath);
        for (int i = 0; i < m->n_tensors; i++) order[i] = i;
        sort_tensors_base = m->tensors;
        qsort(order, (size_t)m->n_tensors, sizeof *order, cmp_tensor_pos);
        for (int i = 1; i < m->n_tensors; i++) {
            const k3_manifest_tensor *a = &m->tensors[order[i - 1]], *b = &m->tensors[order[i]];
            if (a->file == b->file && a->bytes && b->bytes && a->offset + a->bytes > b->offset) {
                k3_err(err, "%s: tensors '%s' and '%s' overlap in %s", tpath, a->name, b->name, file_names[a->file]);
                free(order);
                return -1;
            }
        }
        free(order);
    }
    return 0;
}

/* The embedding, final norm and head name tensors of the table, consistently. */
static int check_head(load_state *s, const char *mpath, k3_error *err)
{
    k3_manifest *m = s->m;
    m->embed = k3_manifest_find(m, s->embed_name);
    if (!m->embed) return k3_err(err, "%s: embed.name '%s' is not in the tensor table", mpath, s->embed_name);
    if (m->embed->file != K3_PK_EMBED || m->embed->offset != 0)
        return k3_err(err, "%s: the embedding '%s' must start at offset 0 of embed.bin", mpath, s->embed_name);
    if (m->embed->dtype != m->embed_dtype || m->embed->qtype != m->embed_qtype || m->embed_row_bytes == 0 ||
        m->embed_row_bytes * (uint64_t)m->embed_rows != m->embed->bytes || m->embed->ndim < 1 ||
        m->embed->shape[0] != m->embed_rows)
        return k3_err(err, "%s: embed rows %lld x row_bytes %llu (%s) do not match tensor '%s'", mpath,
                      (long long)m->embed_rows, (unsigned long long)m->embed_row_bytes,
                      k3_dtype_name(m->embed_dtype), s->embed_name);
    m->final_norm = k3_manifest_find(m, s->norm_name);
    if (!m->final_norm) return k3_err(err, "%s: head.norm '%s' is not in the tensor table", mpath, s->norm_name);
    m->lm_head = k3_manifest_find(m, s->lm_head_name);
    if (!m->lm_head) return k3_err(err, "%s: head.lm_head '%s' is not in the tensor table", mpath, s->lm_head_name);
    m->tied = s->tied;
    if (m->tied && m->lm_head != m->embed)
        return k3_err(err, "%s: head.tied is true but head.lm_head is not the embedding", mpath);
    return 0;
}

/* Everything that is not syntax: sizes on disk, bounds, alignment, overlap,
 * membership of each tensor in its run or page, name lookups. */
static int check_manifest(load_state *s, const char *mpath, k3_error *err)
{
    char tpath[4200];
    snprintf(tpath, sizeof tpath, "%s/%s", s->m->dir, K3_TABLES_FILE);
    if (check_files(s, mpath, err)) return -1;
    if (check_tensors(s, tpath, err)) return -1;
    if (check_layers(s, tpath, err)) return -1;
    if (check_pages(s, tpath, err)) return -1;
    if (check_membership(s, tpath, err)) return -1;
    if (check_overlaps(s, tpath, err)) return -1;
    if (check_head(s, mpath, err)) return -1;
    return 0;
}

/* Parse, then check against the files on disk; on any failure out is left empty. */
int k3_manifest_load(const char *dir, k3_manifest *out, k3_error *err)
{
    memset(out, 0, sizeof *out);
    load_state *s = calloc(1, sizeof *s);
    if (!s) return k3_err(err, "out of memory");
    s->m = out;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    out->dir = strndup(dir, dl);
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", out->dir ? out->dir : dir);
    int rc = -1;
    struct stat st;
    if (!out->dir) {
        k3_err(err, "out of memory");
    } else if (stat(out->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        k3_err(err, "%s: not a directory", out->dir);
    } else if (stat(mpath, &st) != 0) {
        k3_err(err, "%s: not a packed model directory (no manifest.json; an interrupted `k3 pack`?)", out->dir);
    } else {
        json_t *root = load_json(mpath, err);
        if (root) {
            s->mpath = mpath;
            s->err = err;
            rc = parse_document(s, root);
            if (rc == 0) rc = k3_manifest_tables_read(out, &s->tables, &s->pages, &s->n_pages, err);
            if (rc == 0) rc = check_manifest(s, mpath, err);
            json_decref(root);        /* after the checks: the head's names point into it */
        }
    }
    free(s->pages);
    free(s);
    if (rc) k3_manifest_free(out);
    return rc;
}

/* Everything load allocated; safe on an emptied manifest. */
void k3_manifest_free(k3_manifest *m)
{
    if (!m) return;
    free(m->dir);
    free(m->config_json);
    free(m->tensors);
    free(m->layers);
    free(m->page_offsets);
    free(m->moe_row);
    free(m->names_);
    k3_strtab_free(&m->by_name_);
    memset(m, 0, sizeof *m);
}

/* The name lookup built at load (names are unique). */
const k3_manifest_tensor *k3_manifest_find(const k3_manifest *m, const char *name)
{
    int32_t i = k3_strtab_find(&m->by_name_, name, strlen(name), tensor_name_key, m);
    return i < 0 ? NULL : &m->tensors[i];
}

/* The run the reader fetches in one read per layer. */
int k3_manifest_layer_extent(const k3_manifest *m, int layer, uint64_t *offset, uint64_t *bytes)
{
    if (layer < 0 || layer >= m->n_layers) return -1;
    *offset = m->layers[layer].trunk_offset;
    *bytes = m->layers[layer].trunk_bytes;
    return 0;
}

/* O(1) page lookup: the reader issues one read per expert. */
int64_t k3_manifest_expert_page(const k3_manifest *m, int layer, int expert)
{
    if (layer < 0 || layer >= m->n_layers || expert < 0 || expert >= m->n_experts || !m->page_offsets) return -1;
    if (m->moe_row[layer] < 0) return -1;
    return (int64_t)m->page_offsets[(size_t)m->moe_row[layer] * m->n_experts + expert];
}

/* DIR/trunk.bin etc., so callers never spell the names. */
void k3_manifest_path(const k3_manifest *m, k3_pk_file f, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", m->dir, k3_pk_file_name(f));
}

/* Full re-read against the recorded FNV-1a: detects corruption after packing. */
int k3_manifest_verify_checksums(const k3_manifest *m, void *buf, size_t len, k3_error *err)
{
    void *own = NULL;
    if (!buf || len < 4096) {
        len = 8u << 20;
        buf = own = malloc(len);
        if (!buf) return k3_err(err, "out of memory");
    }
    int rc = 0;
    for (int f = 0; f < K3_PK_NFILES && rc == 0; f++) {
        char path[4200];
        k3_manifest_path(m, (k3_pk_file)f, path, sizeof path);
        int fd = k3_open_regular(path, O_RDONLY, err);
        if (fd < 0) { rc = -1; break; }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        uint64_t h = K3_FNV_INIT, done = 0;
        for (;;) {
            ssize_t n = read(fd, buf, len);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { rc = k3_err(err, "%s: read error at byte %llu: %s", path, (unsigned long long)done,
                                     strerror(errno)); break; }
            if (n == 0) break;
            h = k3_fnv1a64(h, buf, (size_t)n);
            done += (uint64_t)n;
        }
        close(fd);
        if (rc == 0 && done != m->file_bytes[f])
            rc = k3_err(err, "%s: read %llu bytes, manifest.json records %llu", path, (unsigned long long)done,
                        (unsigned long long)m->file_bytes[f]);
        if (rc == 0 && h != m->checksum[f])
            rc = k3_err(err, "%s: checksum %016llx does not match manifest.json (%016llx): the file is corrupt",
                        path, (unsigned long long)h, (unsigned long long)m->checksum[f]);
    }
    free(own);
    return rc;
}

/* Cheap gate for loaders: "format" and "version" of a small JSON file. An
 * older version counts, so loading says to re-pack and `k3 pack --force`
 * may replace it. */
int k3_is_packed_dir(const char *dir)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    if (dl >= 8 && !strncmp(dir + dl - 8, ".partial", 8)) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%.*s/manifest.json", (int)dl, dir);
    json_t *root = load_json(path, NULL);
    json_t *format = json_object_get(root, "format"), *version = json_object_get(root, "version");
    int format_ok = json_is_string(format) && !strcmp(json_string_value(format), K3_PACK_FORMAT);
    int version_ok = json_is_integer(version) && json_integer_value(version) >= 1 &&
                     json_integer_value(version) <= K3_PACK_VERSION;
    json_decref(root);
    return format_ok && version_ok;
}
