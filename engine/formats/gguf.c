/* gguf.c - the bounds-checked GGUF header reader and split sets (see gguf.h).
 *
 * The parser walks the header with a cursor over a buffer holding the
 * file's first bytes. Every read first asks for its bytes: past the end of
 * the file is an error; past the end of the buffer (the file goes on) asks
 * the caller to read more and start again. Counts are checked against the
 * bytes they need before anything is allocated for them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "gguf.h"
#include "k3.h"

typedef struct cursor {
    const uint8_t *buf;
    uint64_t len;          /* bytes in buf (never more than file_bytes) */
    uint64_t at;
    uint64_t file_bytes;
    const char *what;
    k3_error *err;
    int need_more;         /* set when buf ended but the file goes on */
} cursor;

static const uint8_t value_type_bytes[GGUF_VALUE_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_value_type_name(uint32_t t)
{
    static const char *const names[GGUF_VALUE_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return t < GGUF_VALUE_TYPE_COUNT ? names[t] : "?";
}

/* Make n more bytes readable at the cursor: 0, or -1 (an error past the end
 * of the file or the header limit; need_more when only the buffer ended). */
static int want(cursor *c, uint64_t n, const char *reading)
{
    if (n > c->file_bytes - c->at)
        return k3_err(c->err, "%s: %s at byte %llu runs past the end of the file (%llu bytes; truncated?)",
                      c->what, reading, (unsigned long long)c->at, (unsigned long long)c->file_bytes);
    if (c->at + n > GGUF_MAX_HEADER_BYTES)
        return k3_err(c->err, "%s: %s at byte %llu: the header would exceed %llu MiB", c->what, reading,
                      (unsigned long long)c->at, GGUF_MAX_HEADER_BYTES >> 20);
    if (n > c->len - c->at) {
        c->need_more = 1;
        return -1;
    }
    return 0;
}

/* Little-endian reads of n <= 8 bytes at the cursor (want() done). */
static uint64_t take_le(cursor *c, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | c->buf[c->at + (uint64_t)i];
    c->at += (uint64_t)n;
    return v;
}

/* A u32 / u64 field; `reading` names it in the error. */
static int read_u32(cursor *c, uint32_t *out, const char *reading)
{
    if (want(c, 4, reading)) return -1;
    *out = (uint32_t)take_le(c, 4);
    return 0;
}

static int read_u64(cursor *c, uint64_t *out, const char *reading)
{
    if (want(c, 8, reading)) return -1;
    *out = take_le(c, 8);
    return 0;
}

/* A string: u64 length, then the bytes; *s points into the buffer. */
static int read_string(cursor *c, const uint8_t **s, uint64_t *len, const char *reading)
{
    if (read_u64(c, len, reading)) return -1;
    if (want(c, *len, reading)) return -1;
    *s = c->buf + c->at;
    c->at += *len;
    return 0;
}

/* A key or tensor name: 1..max_bytes bytes, no NUL; a NUL-terminated copy. */
static int read_name(cursor *c, uint64_t max_bytes, char **out, const char *reading)
{
    const uint8_t *s;
    uint64_t len;
    if (read_string(c, &s, &len, reading)) return -1;
    if (len == 0 || len > max_bytes)
        return k3_err(c->err, "%s: %s at byte %llu is %llu bytes long (1 to %llu allowed)", c->what, reading,
                      (unsigned long long)(c->at - len - 8), (unsigned long long)len,
                      (unsigned long long)max_bytes);
    if (memchr(s, 0, len))
        return k3_err(c->err, "%s: %s at byte %llu holds a NUL byte", c->what, reading,
                      (unsigned long long)(c->at - len - 8));
    *out = malloc(len + 1);
    if (!*out) return k3_err(c->err, "%s: out of memory", c->what);
    memcpy(*out, s, len);
    (*out)[len] = 0;
    return 0;
}

/* Skip one value of type t (nested arrays to GGUF_MAX_ARRAY_DEPTH), checking
 * every length. */
static int skip_value(cursor *c, uint32_t t, int depth, const char *key);

/* An array's element type, count and elements, checked and skipped; for an
 * array of strings, each element's offset from the first when
 * string_offsets is not NULL (the caller frees it). */
static int skip_array(cursor *c, int depth, const char *key, uint32_t *elem_type, uint64_t *count,
                      uint64_t **string_offsets)
{
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return k3_err(c->err, "%s: key '%s': arrays nested deeper than %d", c->what, key, GGUF_MAX_ARRAY_DEPTH);
    if (read_u32(c, elem_type, "an array's element type")) return -1;
    if (*elem_type >= GGUF_VALUE_TYPE_COUNT)
        return k3_err(c->err, "%s: key '%s': array element type %u is not a GGUF value type", c->what, key,
                      *elem_type);
    if (read_u64(c, count, "an array's length")) return -1;
    /* each element takes at least this many bytes: the count must fit in the file */
    uint64_t min_bytes = *elem_type == GGUF_STRING ? 8 : *elem_type == GGUF_ARRAY ? 12
                                                         : value_type_bytes[*elem_type];
    if (*count > (c->file_bytes - c->at) / min_bytes)
        return k3_err(c->err, "%s: key '%s': array of %llu %s elements at byte %llu runs past the end of the file",
                      c->what, key, (unsigned long long)*count, gguf_value_type_name(*elem_type),
                      (unsigned long long)c->at);
    if (*elem_type != GGUF_STRING && *elem_type != GGUF_ARRAY) {
        if (want(c, *count * min_bytes, "an array")) return -1;
        c->at += *count * min_bytes;
        return 0;
    }
    /* variable-size elements: the buffer must hold the minimum before any allocation */
    if (want(c, *count * min_bytes, "an array")) return -1;
    uint64_t *offsets = NULL;
    if (string_offsets && *elem_type == GGUF_STRING) {
        offsets = malloc((size_t)(*count ? *count : 1) * sizeof *offsets);
        if (!offsets) return k3_err(c->err, "%s: out of memory", c->what);
    }
    const uint64_t first = c->at;
    for (uint64_t i = 0; i < *count; i++) {
        if (offsets) offsets[i] = c->at - first;
        if (skip_value(c, *elem_type, depth + 1, key)) {
            free(offsets);
            return -1;
        }
    }
    if (string_offsets) *string_offsets = offsets;
    return 0;
}

/* See the declaration above: one value checked and stepped over. */
static int skip_value(cursor *c, uint32_t t, int depth, const char *key)
{
    if (t == GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        return read_string(c, &s, &len, "a string value");
    }
    if (t == GGUF_ARRAY) {
        uint32_t elem_type;
        uint64_t count;
        return skip_array(c, depth, key, &elem_type, &count, NULL);
    }
    if (want(c, value_type_bytes[t], "a value")) return -1;
    if (t == GGUF_BOOL && c->buf[c->at] > 1)
        return k3_err(c->err, "%s: key '%s': bool value %u at byte %llu (0 or 1 allowed)", c->what, key,
                      c->buf[c->at], (unsigned long long)c->at);
    c->at += value_type_bytes[t];
    return 0;
}

/* One key/value into kv (its value located, not copied). */
static int read_kv(cursor *c, gguf_kv *kv)
{
    char *key = NULL;
    if (read_name(c, GGUF_MAX_KEY_BYTES, &key, "a metadata key")) return -1;
    kv->key = key;
    uint32_t t;
    if (read_u32(c, &t, "a value type")) return -1;
    if (t >= GGUF_VALUE_TYPE_COUNT)
        return k3_err(c->err, "%s: key '%s' has value type %u, not a GGUF value type", c->what, key, t);
    kv->type = (gguf_value_type)t;
    kv->count = 1;
    if (t == GGUF_STRING) {
        uint64_t len;
        if (read_u64(c, &len, "a string value") || want(c, len, "a string value")) return -1;
        kv->value = c->buf + c->at;
        kv->count = len;
        c->at += len;
        return 0;
    }
    if (t == GGUF_ARRAY) {
        uint32_t elem_type;
        uint64_t count;
        const uint64_t start = c->at;
        if (skip_array(c, 1, key, &elem_type, &count, &kv->string_offsets)) return -1;
        kv->array_type = (gguf_value_type)elem_type;
        kv->count = count;
        kv->value = c->buf + start + 12;
        return 0;
    }
    kv->value = c->buf + c->at;
    return skip_value(c, t, 0, key);
}

/* A kv's key (the key the duplicate check compares). */
static const void *kv_key(const void *owner, int32_t k, size_t *len)
{
    const gguf_kv *kvs = owner;
    *len = strlen(kvs[k].key);
    return kvs[k].key;
}

/* The tensors must not share bytes: sorted by offset, each starts at or
 * after the end of the one before. */
static int compare_tensor_offsets(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* Sort a part's tensors by offset (a copy of pointers) and refuse the
 * first pair that shares bytes. */
static int check_no_overlap(gguf_tensor *t, int64_t m, const char *what, k3_error *err)
{
    gguf_tensor **order = malloc((size_t)(m ? m : 1) * sizeof *order);
    if (!order) return k3_err(err, "%s: out of memory", what);
    for (int64_t i = 0; i < m; i++) order[i] = &t[i];
    qsort(order, (size_t)m, sizeof *order, compare_tensor_offsets);
    int rc = 0;
    for (int64_t i = 1; i < m && rc == 0; i++)
        if (order[i]->file_offset < order[i - 1]->file_offset + order[i - 1]->bytes)
            rc = k3_err(err, "%s: tensors '%s' and '%s' overlap in the data section", what,
                        order[i - 1]->name, order[i]->name);
    free(order);
    return rc;
}

/* One tensor info: name, dims, type, offset; checked against the type. */
static int read_tensor_info(cursor *c, uint32_t alignment, gguf_tensor *t)
{
    if (read_name(c, GGUF_MAX_NAME_BYTES, &t->name, "a tensor name")) return -1;
    uint32_t n_dims;
    if (read_u32(c, &n_dims, "a tensor's dimension count")) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return k3_err(c->err, "%s: tensor '%s' has %u dimensions (1 to %d allowed)", c->what, t->name, n_dims,
                      GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t numel = 1;
    for (uint32_t i = 0; i < n_dims; i++) {
        uint64_t d;
        if (read_u64(c, &d, "a tensor dimension")) return -1;
        if (d > (1ull << 40) || (d && numel > (1ull << 60) / d))
            return k3_err(c->err, "%s: tensor '%s' dimension %u is %llu: too large", c->what, t->name, i,
                          (unsigned long long)d);
        t->dims[i] = (int64_t)d;
        numel *= d;
    }
    for (int i = (int)n_dims; i < GGUF_MAX_DIMS; i++) t->dims[i] = 1;
    uint32_t type_id;
    uint64_t offset;
    if (read_u32(c, &type_id, "a tensor type") || read_u64(c, &offset, "a tensor offset")) return -1;
    t->type = k3_quant_type_by_id(type_id);
    if (!t->type) {
        const char *known = k3_ggml_type_name(type_id);
        if (known)
            return k3_err(c->err, "%s: tensor '%s' has type %s (ggml type %u), which k3 does not read", c->what,
                          t->name, known, type_id);
        return k3_err(c->err, "%s: tensor '%s' has ggml type %u, not a ggml type", c->what, t->name, type_id);
    }
    if (t->dims[0] % t->type->block_elems)
        return k3_err(c->err, "%s: tensor '%s' rows of %lld weights are not whole %s blocks of %u", c->what,
                      t->name, (long long)t->dims[0], t->type->name, t->type->block_elems);
    if (k3_quant_bytes(t->type, numel, &t->bytes))
        return k3_err(c->err, "%s: tensor '%s' is too large", c->what, t->name);
    if (offset % alignment)
        return k3_err(c->err, "%s: tensor '%s' offset %llu is not a multiple of the alignment %u", c->what,
                      t->name, (unsigned long long)offset, alignment);
    t->file_offset = offset;    /* relative until the data start is known */
    return 0;
}

/* Keys and string offsets are the part's own allocations; the values stay
 * in the header buffer. */
void gguf_part_free_kvs(gguf_part *part)
{
    for (int64_t i = 0; i < part->n_kvs; i++) {
        free((char *)part->kvs[i].key);
        free(part->kvs[i].string_offsets);
    }
    free(part->kvs);
    part->kvs = NULL;
    part->n_kvs = 0;
}

/* The header's fixed start: magic, version, the two counts. */
static int read_preamble(cursor *c, gguf_part *part, uint64_t *n_tensors, uint64_t *n_kv)
{
    if (want(c, 4, "the magic")) return -1;
    if (memcmp(c->buf, "GGUF", 4))
        return k3_err(c->err, "%s: not a GGUF file (it does not start with \"GGUF\")", c->what);
    c->at = 4;
    if (read_u32(c, &part->version, "the version")) return -1;
    if (part->version && (part->version & 0xFFFF) == 0)
        return k3_err(c->err, "%s: GGUF version 0x%08x: a big-endian file? k3 reads little-endian GGUF", c->what,
                      part->version);
    if (part->version != 2 && part->version != 3)
        return k3_err(c->err, "%s: GGUF version %u is not supported (2 and 3 are)", c->what, part->version);
    if (read_u64(c, n_tensors, "the tensor count") || read_u64(c, n_kv, "the metadata count")) return -1;
    const uint64_t left = c->file_bytes - c->at;
    /* at least a 1-byte key (8 + 1), a type (4) and a 1-byte value; a tensor
     * info is at least a 1-byte name, 1 dimension, a type and an offset */
    if (*n_kv > left / 14)
        return k3_err(c->err, "%s: %llu metadata entries cannot fit in the file's %llu bytes", c->what,
                      (unsigned long long)*n_kv, (unsigned long long)c->file_bytes);
    if (*n_tensors > left / 33)
        return k3_err(c->err, "%s: %llu tensors cannot fit in the file's %llu bytes", c->what,
                      (unsigned long long)*n_tensors, (unsigned long long)c->file_bytes);
    return 0;
}

/* The metadata of one part, with duplicate keys refused and the alignment
 * read; fills part->kvs. */
static int read_metadata(cursor *c, gguf_part *part, uint64_t n_kv)
{
    if (want(c, n_kv * 14, "the metadata")) return -1;   /* the buffer holds the minimum */
    part->kvs = calloc((size_t)(n_kv ? n_kv : 1), sizeof *part->kvs);
    if (!part->kvs) return k3_err(c->err, "%s: out of memory", c->what);
    for (uint64_t i = 0; i < n_kv; i++) {
        part->n_kvs = (int64_t)i + 1;
        part->kvs[i].header_at = c->at;
        if (read_kv(c, &part->kvs[i])) return -1;
        part->kvs[i].header_bytes = c->at - part->kvs[i].header_at;
    }
    k3_strtab keys;
    if (k3_strtab_init(&keys, (size_t)n_kv)) return k3_err(c->err, "%s: out of memory", c->what);
    int rc = 0;
    for (uint64_t i = 0; i < n_kv && rc == 0; i++)
        if (k3_strtab_insert(&keys, (int32_t)i, kv_key, part->kvs) >= 0)
            rc = k3_err(c->err, "%s: metadata key '%s' appears twice", c->what, part->kvs[i].key);
    k3_strtab_free(&keys);
    if (rc) return rc;
    part->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *a = gguf_part_find_kv(part, "general.alignment");
    if (a) {
        if (a->type != GGUF_U32)
            return k3_err(c->err, "%s: general.alignment is a %s, not a u32", c->what, gguf_value_type_name(a->type));
        uint64_t v;
        gguf_kv_uint(a, &v);
        if (v == 0 || (v & (v - 1)))
            return k3_err(c->err, "%s: general.alignment %llu is not a power of two", c->what, (unsigned long long)v);
        part->alignment = (uint32_t)v;
    }
    return 0;
}

int gguf_parse(const uint8_t *buf, size_t len, uint64_t file_bytes, int part_no, const char *what,
               gguf_part *part, gguf_tensor **tensors, int64_t *n, k3_error *err)
{
    cursor c = {.buf = buf, .len = len < file_bytes ? len : file_bytes, .at = 0, .file_bytes = file_bytes,
                .what = what, .err = err, .need_more = 0};
    const int64_t first = *n;
    part->kvs = NULL;
    part->n_kvs = 0;
    part->header = NULL;
    part->file_bytes = file_bytes;
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = read_preamble(&c, part, &n_tensors, &n_kv);
    if (rc == 0) rc = read_metadata(&c, part, n_kv);
    if (rc == 0 && want(&c, n_tensors * 33, "the tensor infos") == 0) {
        gguf_tensor *grown = realloc(*tensors, (size_t)(first + (int64_t)n_tensors + 1) * sizeof **tensors);
        if (!grown) rc = k3_err(err, "%s: out of memory", what);
        else *tensors = grown;
        for (uint64_t i = 0; i < n_tensors && rc == 0; i++) {
            gguf_tensor *t = &(*tensors)[*n];
            memset(t, 0, sizeof *t);
            t->part = part_no;
            (*n)++;
            rc = read_tensor_info(&c, part->alignment, t);
        }
    } else if (rc == 0) {
        rc = -1;
    }
    if (rc == 0) {
        part->n_tensors = (int64_t)n_tensors;
        part->data_start = (c.at + part->alignment - 1) / part->alignment * part->alignment;
        part->header_bytes = c.at;
        if (n_tensors && part->data_start > file_bytes)
            rc = k3_err(err, "%s: the data section would start at byte %llu, past the end of the file (%llu bytes)",
                        what, (unsigned long long)part->data_start, (unsigned long long)file_bytes);
        const uint64_t data_bytes = file_bytes - (part->data_start < file_bytes ? part->data_start : file_bytes);
        for (int64_t i = first; i < *n && rc == 0; i++) {
            gguf_tensor *t = &(*tensors)[i];
            if (t->file_offset > data_bytes || t->bytes > data_bytes - t->file_offset)
                rc = k3_err(err, "%s: tensor '%s' (%llu bytes at data offset %llu) runs past the end of the file "
                            "(data section %llu bytes; truncated?)", what, t->name, (unsigned long long)t->bytes,
                            (unsigned long long)t->file_offset, (unsigned long long)data_bytes);
            t->file_offset += part->data_start;
        }
        if (rc == 0) rc = check_no_overlap(*tensors + first, *n - first, what, err);
    }
    if (rc != 0) {
        for (int64_t i = first; i < *n; i++) free((*tensors)[i].name);
        *n = first;
        gguf_part_free_kvs(part);
        if (c.need_more) return 1;
    }
    return rc;
}

/* A linear search: a model has tens of keys and loaders ask once each. */
const gguf_kv *gguf_part_find_kv(const gguf_part *part, const char *key)
{
    for (int64_t i = 0; i < part->n_kvs; i++)
        if (!strcmp(part->kvs[i].key, key)) return &part->kvs[i];
    return NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key)
{
    return g->n_parts ? gguf_part_find_kv(&g->parts[0], key) : NULL;
}

/* Little-endian integer of n bytes at p. */
static uint64_t le_at(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* A number of type t at p as double (0 when t is not numeric: the callers
 * check the type first). */
static int number_at(uint32_t t, const uint8_t *p, double *out)
{
    uint64_t u = t < GGUF_VALUE_TYPE_COUNT && value_type_bytes[t] ? le_at(p, value_type_bytes[t]) : 0;
    switch (t) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: case GGUF_BOOL:
        *out = (double)u; return 0;
    case GGUF_I8: *out = (int8_t)u; return 0;
    case GGUF_I16: *out = (int16_t)u; return 0;
    case GGUF_I32: *out = (int32_t)u; return 0;
    case GGUF_I64: *out = (double)(int64_t)u; return 0;
    case GGUF_F32: { uint32_t b = (uint32_t)u; float f; memcpy(&f, &b, 4); *out = f; return 0; }
    case GGUF_F64: memcpy(out, &u, 8); return 0;
    default: return -1;
    }
}

int gguf_kv_uint(const gguf_kv *kv, uint64_t *out)
{
    if (kv->type != GGUF_U8 && kv->type != GGUF_U16 && kv->type != GGUF_U32 && kv->type != GGUF_U64) return -1;
    *out = le_at(kv->value, value_type_bytes[kv->type]);
    return 0;
}

int gguf_kv_int(const gguf_kv *kv, int64_t *out)
{
    uint64_t u;
    if (gguf_kv_uint(kv, &u) == 0) {
        if (u > INT64_MAX) return -1;
        *out = (int64_t)u;
        return 0;
    }
    if (kv->type != GGUF_I8 && kv->type != GGUF_I16 && kv->type != GGUF_I32 && kv->type != GGUF_I64) return -1;
    const int bits = 8 * value_type_bytes[kv->type];
    u = le_at(kv->value, value_type_bytes[kv->type]);
    if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~0ull << bits;   /* sign-extend */
    *out = (int64_t)u;
    return 0;
}

int gguf_kv_f64(const gguf_kv *kv, double *out)
{
    if (kv->type != GGUF_F32 && kv->type != GGUF_F64) return -1;
    return number_at(kv->type, kv->value, out);
}

int gguf_kv_string(const gguf_kv *kv, const char **s, size_t *len)
{
    if (kv->type != GGUF_STRING) return -1;
    *s = (const char *)kv->value;
    *len = (size_t)kv->count;
    return 0;
}

int gguf_kv_array_string(const gguf_kv *kv, uint64_t i, const char **s, size_t *len)
{
    if (kv->type != GGUF_ARRAY || kv->array_type != GGUF_STRING || i >= kv->count || !kv->string_offsets)
        return -1;
    const uint8_t *p = kv->value + kv->string_offsets[i];
    *len = (size_t)le_at(p, 8);
    *s = (const char *)p + 8;
    return 0;
}

int gguf_kv_array_number(const gguf_kv *kv, uint64_t i, double *out)
{
    if (kv->type != GGUF_ARRAY || i >= kv->count || kv->array_type == GGUF_STRING || kv->array_type == GGUF_ARRAY)
        return -1;
    return number_at(kv->array_type, kv->value + i * value_type_bytes[kv->array_type], out);
}

/* A tensor's name (the key the lookup compares). */
static const void *tensor_name_key(const void *owner, int32_t k, size_t *len)
{
    const gguf_file *g = owner;
    *len = strlen(g->tensors[k].name);
    return g->tensors[k].name;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    int32_t k = k3_strtab_find(&g->by_name, name, strlen(name), tensor_name_key, g);
    return k < 0 ? NULL : &g->tensors[k];
}

/* The name lookup over every part; refuses a name given twice. */
int gguf_file_build_lookup(gguf_file *g, k3_error *err)
{
    if (g->n_tensors > INT32_MAX) return k3_err(err, "%s: too many tensors", g->parts[0].path);
    if (k3_strtab_init(&g->by_name, (size_t)g->n_tensors)) return k3_err(err, "out of memory");
    for (int64_t k = 0; k < g->n_tensors; k++) {
        int32_t first = k3_strtab_insert(&g->by_name, (int32_t)k, tensor_name_key, g);
        if (first >= 0 && g->tensors[first].part == g->tensors[k].part)
            return k3_err(err, "%s: tensor '%s' is given twice", g->parts[g->tensors[k].part].path,
                          g->tensors[k].name);
        if (first >= 0)
            return k3_err(err, "%s: tensor '%s' is given twice (also in %s)", g->parts[g->tensors[k].part].path,
                          g->tensors[k].name, g->parts[g->tensors[first].part].path);
    }
    return 0;
}

void gguf_close(gguf_file *g)
{
    for (int i = 0; i < g->n_parts; i++) {
        gguf_part *p = &g->parts[i];
        gguf_part_free_kvs(p);
        free(p->header);
        free(p->path);
        if (p->fd >= 0) close(p->fd);
    }
    free(g->parts);
    for (int64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->tensors);
    k3_strtab_free(&g->by_name);
    memset(g, 0, sizeof *g);
}

/* Open one file as part part_no of g: read its first bytes, growing the
 * buffer until the whole header is in it. */
static int open_part(gguf_file *g, const char *path, k3_error *err)
{
    gguf_part *grown = realloc(g->parts, (size_t)(g->n_parts + 1) * sizeof *grown);
    if (!grown) return k3_err(err, "%s: out of memory", path);
    g->parts = grown;
    gguf_part *p = &g->parts[g->n_parts];
    memset(p, 0, sizeof *p);
    p->fd = -1;
    p->path = strdup(path);
    if (!p->path) return k3_err(err, "%s: out of memory", path);
    g->n_parts++;
    p->fd = k3_open_regular(path, O_RDONLY, err);
    if (p->fd < 0) return -1;
    struct stat st;
    if (fstat(p->fd, &st)) return k3_err(err, "%s: %s", path, strerror(errno));
    p->file_bytes = (uint64_t)st.st_size;
    uint64_t buf_bytes = 1u << 20;
    for (;;) {
        if (buf_bytes > p->file_bytes) buf_bytes = p->file_bytes;
        if (buf_bytes > GGUF_MAX_HEADER_BYTES) buf_bytes = GGUF_MAX_HEADER_BYTES;
        uint8_t *buf = realloc(p->header, (size_t)(buf_bytes ? buf_bytes : 1));
        if (!buf) return k3_err(err, "%s: out of memory", path);
        p->header = NULL;
        if (k3_pread_full(p->fd, buf, (size_t)buf_bytes, 0, path, err)) {
            free(buf);
            return -1;
        }
        int rc = gguf_parse(buf, (size_t)buf_bytes, p->file_bytes, g->n_parts - 1, path, p, &g->tensors,
                            &g->n_tensors, err);
        p->header = buf;
        if (rc <= 0) return rc;
        buf_bytes *= 2;   /* the header goes on past the buffer: read more */
    }
}

int gguf_split_name(const char *name, int *part_no, int *n_parts, size_t *prefix_len)
{
    /* PREFIX-NNNNN-of-MMMMM.gguf: the tail is 20 characters, the prefix not empty */
    size_t l = strlen(name);
    if (l < 21) return 0;
    const char *t = name + l - 20;
    int a = 0, b = 0;
    if (t[0] != '-' || strncmp(t + 6, "-of-", 4) || strcmp(t + 15, ".gguf")) return 0;
    for (int i = 1; i <= 5; i++) {
        if (t[i] < '0' || t[i] > '9' || t[9 + i] < '0' || t[9 + i] > '9') return 0;
        a = a * 10 + (t[i] - '0');
        b = b * 10 + (t[9 + i] - '0');
    }
    if (a < 1 || b < 1 || a > b) return 0;
    *part_no = a;
    *n_parts = b;
    *prefix_len = l - 20;
    return 1;
}

/* An integer key of a part, when present: 1 and *v; 0 when absent; -1 and
 * err when present with a non-integer type. */
static int part_int_key(const gguf_part *p, const char *key, int64_t *v, k3_error *err)
{
    const gguf_kv *kv = gguf_part_find_kv(p, key);
    if (!kv) return 0;
    if (gguf_kv_int(kv, v)) return k3_err(err, "%s: %s is a %s, not an integer", p->path, key,
                                          gguf_value_type_name(kv->type));
    return 1;
}

/* Every part of a split set says which part it is, of how many, and the
 * set's tensor count; the parts' tensors add up to it. */
static int check_split_keys(gguf_file *g, k3_error *err)
{
    int64_t total = -1;
    for (int i = 0; i < g->n_parts; i++) {
        gguf_part *p = &g->parts[i];
        int64_t no, count, tensors;
        int has_no = part_int_key(p, "split.no", &no, err), has_count = part_int_key(p, "split.count", &count, err);
        int has_tensors = part_int_key(p, "split.tensors.count", &tensors, err);
        if (has_no < 0 || has_count < 0 || has_tensors < 0) return -1;
        if (!has_no || !has_count || !has_tensors)
            return k3_err(err, "%s: part %d of a %d-part split set lacks split.no, split.count or "
                          "split.tensors.count", p->path, i + 1, g->n_parts);
        if (no != i || count != g->n_parts)
            return k3_err(err, "%s: named part %d of %d, but its metadata says split.no %lld of split.count %lld "
                          "(a part from another set?)", p->path, i + 1, g->n_parts, (long long)no, (long long)count);
        if (total >= 0 && tensors != total)
            return k3_err(err, "%s: split.tensors.count %lld, but part 1 says %lld (a part from another set?)",
                          p->path, (long long)tensors, (long long)total);
        total = tensors;
    }
    if (total != g->n_tensors)
        return k3_err(err, "%s: split.tensors.count is %lld, but the %d parts hold %lld tensors", g->parts[0].path,
                      (long long)total, g->n_parts, (long long)g->n_tensors);
    return 0;
}

/* Open the file at path, or every part of the split set it belongs to. */
static int open_file_or_set(gguf_file *g, const char *path, k3_error *err)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    int part_no, n_parts;
    size_t prefix_len;
    if (!gguf_split_name(base, &part_no, &n_parts, &prefix_len)) {
        if (open_part(g, path, err)) return -1;
        int64_t count;
        int has = part_int_key(&g->parts[0], "split.count", &count, err);
        if (has < 0) return -1;
        if (has && count > 1)
            return k3_err(err, "%s: its metadata says it is one part of a %lld-part split set, but its name is not "
                          "PREFIX-0000i-of-0000N.gguf (rename the parts as gguf-split wrote them)", path,
                          (long long)count);
        return gguf_file_build_lookup(g, err);
    }
    if (n_parts > GGUF_MAX_SPLIT_PARTS)
        return k3_err(err, "%s: a split set of %d parts (at most %d)", path, n_parts, GGUF_MAX_SPLIT_PARTS);
    const size_t dir_len = (size_t)(base - path), stem_len = dir_len + prefix_len;
    char *part_path = malloc(stem_len + 32);
    if (!part_path) return k3_err(err, "%s: out of memory", path);
    int rc = 0;
    for (int i = 1; i <= n_parts && rc == 0; i++) {
        memcpy(part_path, path, stem_len);
        snprintf(part_path + stem_len, 32, "-%05d-of-%05d.gguf", i, n_parts);
        if (access(part_path, F_OK))
            rc = k3_err(err, "%s: part %d of the %d-part split set is missing", part_path, i, n_parts);
        else
            rc = open_part(g, part_path, err);
    }
    free(part_path);
    if (rc == 0) rc = check_split_keys(g, err);
    if (rc == 0) rc = gguf_file_build_lookup(g, err);
    return rc;
}

/* A folder: its one .gguf file, or the first part of its one split set. */
static int open_folder(gguf_file *g, const char *dir, k3_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return k3_err(err, "%s: %s", dir, strerror(errno));
    char first_part[1024] = "", single[1024] = "";
    int n_gguf = 0, n_first_parts = 0, n_other_parts = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".gguf") || l >= sizeof single) continue;
        int no, count;
        size_t prefix_len;
        n_gguf++;
        if (!gguf_split_name(e->d_name, &no, &count, &prefix_len)) snprintf(single, sizeof single, "%s", e->d_name);
        else if (no == 1) { n_first_parts++; snprintf(first_part, sizeof first_part, "%s", e->d_name); }
        else n_other_parts++;
    }
    closedir(d);
    const char *pick = NULL;
    if (n_gguf == 1 && single[0]) pick = single;
    else if (n_first_parts == 1 && n_gguf == 1 + n_other_parts) pick = first_part;
    if (!pick) {
        if (n_gguf == 0) return k3_err(err, "%s: no .gguf file in this folder", dir);
        return k3_err(err, "%s: the folder holds %d .gguf files that are not one file or one split set "
                      "(name the file to open)", dir, n_gguf);
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, pick) >= sizeof path)
        return k3_err(err, "%s: path too long", dir);
    return open_file_or_set(g, path, err);
}

int gguf_open(gguf_file *g, const char *path, k3_error *err)
{
    memset(g, 0, sizeof *g);
    struct stat st;
    if (stat(path, &st)) return k3_err(err, "%s: %s", path, strerror(errno));
    int rc = S_ISDIR(st.st_mode) ? open_folder(g, path, err) : open_file_or_set(g, path, err);
    if (rc) gguf_close(g);
    return rc;
}
