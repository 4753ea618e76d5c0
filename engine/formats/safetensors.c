/* safetensors.c - bounds-checked safetensors header parsing and the tensor
 * index across shards (see safetensors.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "k3.h"
#include "k3_util.h"
#include "safetensors.h"

int64_t st_tensor_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Offsets must not overlap: sort a copy of this shard's tensors by start. */
static int compare_by_offset(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Read a JSON integer that must be a non-negative int64. */
static int json_nonneg(json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    if (i < 0) return -1;
    *out = (uint64_t)i;
    return 0;
}

/* Parse one header entry (name -> {dtype, shape, data_offsets}) into t. */
static int parse_entry(const char *what, const char *name, json_t *entry, uint64_t data_start,
                       uint64_t data_bytes, st_tensor *t, k3_error *err)
{
    if (!json_is_object(entry))
        return k3_err(err, "%s: header entry '%s' is not an object", what, name);
    json_t *dt = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offs = json_object_get(entry, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs))
        return k3_err(err, "%s: tensor '%s' lacks dtype, shape or data_offsets", what, name);
    if (k3_dtype_parse(json_string_value(dt), &t->dtype) != 0)
        t->dtype = K3_DT_OPAQUE;          /* refused later only if a loader needs it */
    size_t ndim = json_array_size(shape);
    if (ndim > ST_MAX_DIMS)
        return k3_err(err, "%s: tensor '%s' has %zu dimensions (max %d)", what, name, ndim, ST_MAX_DIMS);
    t->ndim = (int)ndim;
    uint64_t numel = 1;
    for (size_t i = 0; i < ndim; i++) {
        uint64_t d;
        if (json_nonneg(json_array_get(shape, i), &d) != 0 || d > (1ull << 40))
            return k3_err(err, "%s: tensor '%s' has an invalid shape", what, name);
        t->shape[i] = (int64_t)d;
        if (d && numel > UINT64_MAX / d / 8)
            return k3_err(err, "%s: tensor '%s' shape is too large", what, name);
        numel *= d;
    }
    uint64_t begin, end;
    if (json_array_size(offs) != 2 || json_nonneg(json_array_get(offs, 0), &begin) != 0 ||
        json_nonneg(json_array_get(offs, 1), &end) != 0 || begin > end)
        return k3_err(err, "%s: tensor '%s' has invalid data_offsets", what, name);
    if (end > data_bytes)
        return k3_err(err, "%s: tensor '%s' data_offsets [%llu, %llu] run past the end of the "
                      "data (%llu bytes; file truncated?)", what, name, (unsigned long long)begin,
                      (unsigned long long)end, (unsigned long long)data_bytes);
    uint64_t want = t->dtype == K3_DT_OPAQUE ? end - begin : numel * k3_dtype_size(t->dtype);
    if (end - begin != want)
        return k3_err(err, "%s: tensor '%s' has %llu data bytes but dtype %s x shape needs %llu",
                      what, name, (unsigned long long)(end - begin),
                      k3_dtype_name(t->dtype), (unsigned long long)want);
    t->file_offset = data_start + begin;
    t->nbytes = want;
    return 0;
}

/* The tensors must tile the data area exactly, as the reference loader
 * checks: sorted by offset, the first starts at 0, each starts where the
 * previous ended (no gap, no overlap), the last ends at the end of the file.
 * A header length a few bytes short (padding eaten, JSON still valid) moves
 * every tensor and leaves bytes over at the end: refused here. */
static int check_tiling(st_tensor *t, int m, uint64_t data_start, uint64_t file_bytes,
                        const char *what, k3_error *err)
{
    st_tensor **order = malloc((size_t)(m ? m : 1) * sizeof *order);
    if (!order) return k3_err(err, "%s: out of memory", what);
    for (int i = 0; i < m; i++) order[i] = &t[i];
    qsort(order, (size_t)m, sizeof *order, compare_by_offset);
    uint64_t at = data_start;
    int rc = 0;
    for (int i = 0; i < m && rc == 0; i++) {
        const st_tensor *b = order[i];
        if (b->file_offset < at)
            rc = k3_err(err, "%s: tensors '%s' and '%s' overlap in the data area", what,
                        order[i - 1]->name, b->name);
        else if (b->file_offset > at)
            rc = k3_err(err, "%s: %llu unused bytes before tensor '%s' in the data area "
                        "(header length wrong?)", what,
                        (unsigned long long)(b->file_offset - at), b->name);
        at = b->file_offset + b->nbytes;
    }
    if (rc == 0 && at != file_bytes)
        rc = k3_err(err, "%s: the tensors end %llu bytes before the end of the file "
                    "(header length wrong or file has trailing bytes)", what,
                    (unsigned long long)(file_bytes - at));
    free(order);
    return rc;
}

int st_parse_header(const uint8_t *buf, size_t len, uint64_t file_bytes, int shard,
                    const char *what, st_tensor **tensors, int *n, k3_error *err)
{
    if (file_bytes < 8 || len < 8)
        return k3_err(err, "%s: file too short for a safetensors header (%llu bytes)", what,
                      (unsigned long long)file_bytes);
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; i--) header_bytes = (header_bytes << 8) | buf[i];
    if (header_bytes > file_bytes - 8)
        return k3_err(err, "%s: header length %llu runs past the end of the file (%llu bytes)",
                      what, (unsigned long long)header_bytes, (unsigned long long)file_bytes);
    if (header_bytes > ST_MAX_HEADER_BYTES)
        return k3_err(err, "%s: header length %llu is implausibly large", what,
                      (unsigned long long)header_bytes);
    if (header_bytes > len - 8)
        return k3_err(err, "%s: header not fully read", what);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, header_bytes, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return k3_err(err, "%s: header is not valid JSON (%s at byte %d)", what, jerr.text,
                      jerr.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return k3_err(err, "%s: header is not a JSON object", what);
    }
    uint64_t data_start = 8 + header_bytes, data_bytes = file_bytes - data_start;
    size_t count = json_object_size(root);
    st_tensor *grown = realloc(*tensors, (size_t)(*n + (int)count + 1) * sizeof **tensors);
    if (!grown) {
        json_decref(root);
        return k3_err(err, "%s: out of memory", what);
    }
    *tensors = grown;
    int first = *n, rc = 0;
    const char *name;
    json_t *entry;
    json_object_foreach(root, name, entry) {
        if (!strcmp(name, "__metadata__")) continue;
        st_tensor *t = &(*tensors)[*n];
        memset(t, 0, sizeof *t);
        if (parse_entry(what, name, entry, data_start, data_bytes, t, err) != 0) { rc = -1; break; }
        t->name = strdup(name);
        t->shard = shard;
        if (!t->name) { rc = k3_err(err, "%s: out of memory", what); break; }
        (*n)++;
    }
    json_decref(root);
    if (rc == 0) rc = check_tiling(*tensors + first, *n - first, data_start, file_bytes, what, err);
    return rc;
}

/* The one spelling of what a shard's file name looks like. */
int st_is_shard_name(const char *name)
{
    size_t l = strlen(name);
    return l > 12 && !strcmp(name + l - 12, ".safetensors");
}

/* Stops at the first shard; an unreadable directory has none. */
int st_dir_has_shards(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) found = st_is_shard_name(e->d_name);
    closedir(d);
    return found;
}

/* A tensor's name (the key the lookup compares). */
static const void *tensor_name_key(const void *owner, int32_t k, size_t *len)
{
    const st_index *ix = owner;
    *len = strlen(ix->tensors[k].name);
    return ix->tensors[k].name;
}

const st_tensor *st_find(const st_index *ix, const char *name)
{
    int32_t k = k3_strtab_find(&ix->by_name, name, strlen(name), tensor_name_key, ix);
    return k < 0 ? NULL : &ix->tensors[k];
}

/* Build the name lookup; refuses a name defined in two shards. */
int st_index_build_lookup(st_index *ix, k3_error *err)
{
    k3_strtab_free(&ix->by_name);
    if (k3_strtab_init(&ix->by_name, (size_t)ix->n_tensors)) return k3_err(err, "out of memory");
    for (int k = 0; k < ix->n_tensors; k++) {
        int32_t first = k3_strtab_insert(&ix->by_name, k, tensor_name_key, ix);
        if (first >= 0)
            return k3_err(err, "%s: tensor '%s' is also defined in %s", ix->shards[ix->tensors[k].shard].path,
                          ix->tensors[k].name, ix->shards[ix->tensors[first].shard].path);
    }
    return 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Shard file names: from the index's weight_map if there is one (index_text
 * when given, else the file), else every *.safetensors in the directory,
 * sorted. Returns a malloc'd array of malloc'd names. */
static char **list_shards(const char *dir, const char *index_text, size_t index_len, int *n_out,
                          json_t **weight_map_out, k3_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    *weight_map_out = NULL;
    char **names = NULL;
    int n = 0;
    if (index_text || access(path, F_OK) == 0) {
        json_error_t jerr;
        char *text = NULL;
        size_t text_len = 0;
        if (!index_text && k3_read_file(path, K3_MAX_CONFIG_BYTES, &text, &text_len, err)) return NULL;
        json_t *root = index_text ? json_loadb(index_text, index_len, JSON_REJECT_DUPLICATES, &jerr)
                                  : json_loadb(text, text_len, JSON_REJECT_DUPLICATES, &jerr);
        free(text);
        if (!root) {
            k3_err(err, "%s: not valid JSON (%s, line %d)", path, jerr.text, jerr.line);
            return NULL;
        }
        json_t *map = json_object_get(root, "weight_map");
        if (!json_is_object(map) || json_object_size(map) == 0) {
            json_decref(root);
            k3_err(err, "%s: missing or empty \"weight_map\" object", path);
            return NULL;
        }
        const char *key;
        json_t *val;
        json_object_foreach(map, key, val) {
            const char *file = json_string_value(val);
            if (!file || !*file || strchr(file, '/') || strstr(file, "..")) {
                k3_err(err, "%s: weight_map entry for '%s' is not a plain file name", path, key);
                json_decref(root);   /* after the message: key points into root */
                for (int i = 0; i < n; i++) free(names[i]);
                free(names);
                return NULL;
            }
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = !strcmp(names[i], file);
            if (!seen) {
                char **g = realloc(names, (size_t)(n + 1) * sizeof *names);
                if (!g || !(g[n] = strdup(file))) {
                    if (g) names = g;
                    k3_err(err, "%s: out of memory", path);
                    json_decref(root);
                    for (int i = 0; i < n; i++) free(names[i]);
                    free(names);
                    return NULL;
                }
                names = g;
                n++;
            }
        }
        *weight_map_out = json_incref(map);
        json_decref(root);
    } else {
        DIR *d = opendir(dir);
        if (!d) {
            k3_err(err, "%s: cannot open directory: %s", dir, strerror(errno));
            return NULL;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (st_is_shard_name(e->d_name)) {
                char **g = realloc(names, (size_t)(n + 1) * sizeof *names);
                if (!g) break;
                names = g;
                names[n++] = strdup(e->d_name);
            }
        }
        closedir(d);
        if (n == 0) {
            k3_err(err, "%s: no *.safetensors files found", dir);
            free(names);
            return NULL;
        }
    }
    qsort(names, (size_t)n, sizeof *names, compare_strings);
    *n_out = n;
    return names;
}

/* Open one shard: stat it and read its header. */
static int open_shard(st_index *ix, int s, k3_error *err)
{
    st_shard *sh = &ix->shards[s];
    sh->fd = k3_open_regular(sh->path, O_RDONLY, err);
    if (sh->fd < 0) return -1;
    struct stat st;
    if (fstat(sh->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return k3_err(err, "%s: not a regular file", sh->path);
    sh->file_bytes = (uint64_t)st.st_size;
    uint8_t len_bytes[8];
    if (sh->file_bytes < 8 || pread(sh->fd, len_bytes, 8, 0) != 8)
        return k3_err(err, "%s: file too short for a safetensors header (%llu bytes)", sh->path,
                      (unsigned long long)sh->file_bytes);
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; i--) header_bytes = (header_bytes << 8) | len_bytes[i];
    if (header_bytes > sh->file_bytes - 8)
        return k3_err(err, "%s: header length %llu runs past the end of the file (%llu bytes)",
                      sh->path, (unsigned long long)header_bytes,
                      (unsigned long long)sh->file_bytes);
    if (header_bytes > ST_MAX_HEADER_BYTES)
        return k3_err(err, "%s: header length %llu is implausibly large", sh->path,
                      (unsigned long long)header_bytes);
    size_t len = (size_t)header_bytes + 8;
    uint8_t *buf = malloc(len);
    if (!buf) return k3_err(err, "%s: out of memory", sh->path);
    if (k3_pread_full(sh->fd, buf, len, 0, sh->path, err)) {
        free(buf);
        return -1;
    }
    int rc = st_parse_header(buf, len, sh->file_bytes, s, sh->path, &ix->tensors, &ix->n_tensors, err);
    free(buf);
    return rc;
}

int st_index_open(st_index *ix, const char *dir, k3_error *err)
{
    return st_index_open_text(ix, dir, NULL, 0, err);
}

int st_index_open_text(st_index *ix, const char *dir, const char *index_text, size_t index_len, k3_error *err)
{
    memset(ix, 0, sizeof *ix);
    json_t *weight_map = NULL;
    int n_names = 0;
    char **names = list_shards(dir, index_text, index_len, &n_names, &weight_map, err);
    if (!names) return -1;
    int rc = 0;
    ix->shards = calloc((size_t)n_names, sizeof *ix->shards);
    if (!ix->shards) rc = k3_err(err, "out of memory");
    for (int i = 0; i < n_names && rc == 0; i++) {
        size_t l = strlen(dir) + strlen(names[i]) + 2;
        ix->shards[i].path = malloc(l);
        ix->shards[i].fd = -1;
        ix->n_shards = i + 1;
        if (!ix->shards[i].path) { rc = k3_err(err, "out of memory"); break; }
        snprintf(ix->shards[i].path, l, "%s/%s", dir, names[i]);
        rc = open_shard(ix, i, err);
    }
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    if (rc == 0) rc = st_index_build_lookup(ix, err);
    /* Every tensor the index names must be in the shard it names. */
    if (rc == 0 && weight_map) {
        const char *key;
        json_t *val;
        json_object_foreach(weight_map, key, val) {
            const st_tensor *t = st_find(ix, key);
            const char *want = json_string_value(val);
            if (!t) {
                rc = k3_err(err, "%s/model.safetensors.index.json: tensor '%s' is listed in %s "
                            "but not found there", dir, key, want);
                break;
            }
            const char *have = strrchr(ix->shards[t->shard].path, '/') + 1;
            if (strcmp(have, want)) {
                rc = k3_err(err, "%s/model.safetensors.index.json: tensor '%s' is listed in %s "
                            "but found in %s", dir, key, want, have);
                break;
            }
        }
    }
    json_decref(weight_map);
    if (rc) st_index_close(ix);
    return rc;
}

void st_index_close(st_index *ix)
{
    for (int i = 0; i < ix->n_shards; i++) {
        if (ix->shards[i].fd >= 0) close(ix->shards[i].fd);
        free(ix->shards[i].path);
    }
    for (int i = 0; i < ix->n_tensors; i++) free(ix->tensors[i].name);
    free(ix->shards);
    free(ix->tensors);
    k3_strtab_free(&ix->by_name);
    memset(ix, 0, sizeof *ix);
}

/* The hashing of st_shard_fingerprint, through a caller's buffer; total is
 * the header's size, or 0 to read a safetensors header's from its first 8
 * bytes. */
static int shard_fingerprint(int fd, const char *path, uint64_t file_bytes, uint64_t total, uint64_t *h, uint8_t *buf,
                             size_t buf_bytes, k3_error *err)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    *h = k3_fnv1a64(*h, base, strlen(base));
    uint8_t size_le[8];
    for (int i = 0; i < 8; i++) size_le[i] = (uint8_t)(file_bytes >> (8 * i));
    *h = k3_fnv1a64(*h, size_le, 8);
    if (file_bytes < 8 || total > file_bytes) return k3_err(err, "%s: too short", path);
    if (!total) {
        if (k3_pread_full(fd, buf, 8, 0, path, err)) return -1;
        uint64_t header = 0;
        for (int i = 7; i >= 0; i--) header = (header << 8) | buf[i];
        if (header > file_bytes - 8) return k3_err(err, "%s: header length past the end of the file", path);
        total = 8 + header;
    }
    uint64_t off = 0;
    while (off < total) {
        size_t n = total - off < buf_bytes ? (size_t)(total - off) : buf_bytes;
        if (k3_pread_full(fd, buf, n, off, path, err)) return -1;
        *h = k3_fnv1a64(*h, buf, n);
        off += n;
    }
    const uint64_t data = file_bytes - total, sample = data < 4096 ? data : 4096;
    for (int k = 0; k < 4 && sample; k++) {
        uint64_t at = total + (data - sample) * (uint64_t)k / 3;
        if (k3_pread_full(fd, buf, (size_t)sample, at, path, err)) return -1;
        *h = k3_fnv1a64(*h, buf, (size_t)sample);
    }
    return 0;
}

/* The buffer is on the heap: 64 KiB on the stack was a crash under a small
 * stack limit (ulimit -s 64). */
int st_file_fingerprint(int fd, const char *path, uint64_t file_bytes, uint64_t header_bytes, uint64_t *h,
                        k3_error *err)
{
    const size_t buf_bytes = 65536;
    uint8_t *buf = malloc(buf_bytes);
    if (!buf) return k3_err(err, "out of memory");
    int rc = shard_fingerprint(fd, path, file_bytes, header_bytes, h, buf, buf_bytes, err);
    free(buf);
    return rc;
}

int st_shard_fingerprint(int fd, const char *path, uint64_t file_bytes, uint64_t *h, k3_error *err)
{
    return st_file_fingerprint(fd, path, file_bytes, 0, h, err);
}
