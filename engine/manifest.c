/* manifest.c - streaming, bounds-checked reader of a packed directory's
 * manifest.json (see manifest.h).
 *
 * The JSON is read with a small pull parser straight from the file: values
 * go into the compact tensor/page tables as they are met, so memory is the
 * tables themselves, never a JSON tree (a JSON tree of a real K3 manifest
 * would be hundreds of MB). The "config" object is kept as verbatim text. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_read.h"
#include "manifest.h"

#define JR_MAX_DEPTH 64
#define JR_MAX_STRING 4096

static const char *const file_names[K3_PK_NFILES] = {"trunk.bin", "experts.bin", "embed.bin", "head.bin"};
static const char *const file_keys[K3_PK_NFILES] = {"trunk", "experts", "embed", "head"};

/* Names shared with the writer, so the two cannot disagree on spelling. */
const char *k3_pk_file_name(k3_pk_file f) { return (unsigned)f < K3_PK_NFILES ? file_names[f] : "?"; }
const char *k3_pk_file_key(k3_pk_file f) { return (unsigned)f < K3_PK_NFILES ? file_keys[f] : "?"; }

/* The checksum the manifest records for each file: byte-serial, so simple to
 * reproduce anywhere (tests, other tools). Unrolled to keep the loop tight. */
uint64_t k3_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    const uint64_t P = 1099511628211ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ p[i]) * P; h = (h ^ p[i + 1]) * P; h = (h ^ p[i + 2]) * P; h = (h ^ p[i + 3]) * P;
        h = (h ^ p[i + 4]) * P; h = (h ^ p[i + 5]) * P; h = (h ^ p[i + 6]) * P; h = (h ^ p[i + 7]) * P;
    }
    for (; i < n; i++) h = (h ^ p[i]) * P;
    return h;
}

/* ---------------------------------------------------------------- pull parser */

typedef struct jr {
    FILE *f;
    int c;                 /* current character, EOF at the end */
    uint64_t pos;          /* its byte offset, for messages */
    const char *what;      /* the file, for messages */
    k3_error *err;
    int failed;
    char *cap;             /* verbatim capture (the config object) */
    size_t cap_len, cap_size;
    int capturing;
} jr;

/* Advance one byte, appending the consumed one to the capture if active. */
static void jr_next(jr *r)
{
    if (r->capturing && r->c != EOF) {
        if (r->cap_len + 2 > r->cap_size) {
            size_t n = r->cap_size ? r->cap_size * 2 : 4096;
            char *g = realloc(r->cap, n);
            if (!g) { r->capturing = 0; r->failed = 1; k3_err(r->err, "%s: out of memory", r->what); return; }
            r->cap = g;
            r->cap_size = n;
        }
        r->cap[r->cap_len++] = (char)r->c;
    }
    r->c = getc_unlocked(r->f);
    r->pos++;
}

/* Record the first error only (later ones are consequences). Returns -1. */
static int jr_fail(jr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jr_fail(jr *r, const char *fmt, ...)
{
    if (r->failed) return -1;
    r->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return k3_err(r->err, "%s: %s", r->what, msg);
}

/* Syntax errors say where, since the file may be huge. */
static int jr_syntax(jr *r, const char *expected)
{
    if (r->c == EOF) return jr_fail(r, "unexpected end of file (truncated?) where %s was expected", expected);
    return jr_fail(r, "byte %llu: expected %s, found '%c'", (unsigned long long)r->pos, expected,
                   r->c >= 32 && r->c < 127 ? r->c : '?');
}

/* Skip JSON whitespace. */
static void jr_ws(jr *r)
{
    while (r->c == ' ' || r->c == '\t' || r->c == '\n' || r->c == '\r') jr_next(r);
}

/* Require one structural character. */
static int jr_expect(jr *r, int ch, const char *what)
{
    jr_ws(r);
    if (r->c != ch) return jr_syntax(r, what);
    jr_next(r);
    return 0;
}

/* Append the UTF-8 encoding of code point cp to buf. */
static int put_utf8(char *buf, size_t cap, size_t *len, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80) { tmp[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { tmp[0] = (char)(0xC0 | (cp >> 6)); tmp[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12)); tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18)); tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); tmp[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
    }
    if (buf) {
        if (*len + n >= cap) return -1;
        memcpy(buf + *len, tmp, n);
    }
    *len += n;
    return 0;
}

/* Four hex digits of a \u escape. */
static int jr_hex4(jr *r, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = r->c, d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return jr_syntax(r, "a hex digit in a \\u escape");
        v = v * 16 + (uint32_t)d;
        jr_next(r);
    }
    *out = v;
    return 0;
}

/* A JSON string into buf (NUL-terminated, at most cap-1 bytes); buf NULL
 * skips it. Refuses control characters and NUL (a name must not truncate). */
static int jr_string(jr *r, char *buf, size_t cap)
{
    jr_ws(r);
    if (r->c != '"') return jr_syntax(r, "a string");
    jr_next(r);
    size_t len = 0;
    for (;;) {
        int c = r->c;
        if (c == EOF) return jr_syntax(r, "the end of a string");
        if (c == '"') { jr_next(r); break; }
        if (c < 0x20) return jr_fail(r, "byte %llu: control character inside a string",
                                     (unsigned long long)r->pos);
        jr_next(r);
        if (c == '\\') {
            int e = r->c;
            jr_next(r);
            uint32_t cp;
            switch (e) {
            case '"': case '\\': case '/': cp = (uint32_t)e; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (jr_hex4(r, &cp)) return -1;
                if (cp >= 0xD800 && cp < 0xDC00) {
                    uint32_t lo;
                    if (r->c != '\\') return jr_syntax(r, "the low half of a surrogate pair");
                    jr_next(r);
                    if (r->c != 'u') return jr_syntax(r, "the low half of a surrogate pair");
                    jr_next(r);
                    if (jr_hex4(r, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return jr_fail(r, "byte %llu: invalid surrogate pair",
                                                                 (unsigned long long)r->pos);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp < 0xE000) {
                    return jr_fail(r, "byte %llu: lone low surrogate", (unsigned long long)r->pos);
                }
                if (cp == 0) return jr_fail(r, "byte %llu: \\u0000 inside a string", (unsigned long long)r->pos);
                break;
            default:
                return jr_fail(r, "byte %llu: invalid escape '\\%c'", (unsigned long long)r->pos,
                               e >= 32 && e < 127 ? e : '?');
            }
            if (put_utf8(buf, cap, &len, cp)) return jr_fail(r, "string longer than %zu bytes", cap - 1);
        } else {
            if (buf) {
                if (len + 1 >= cap) return jr_fail(r, "string longer than %zu bytes", cap - 1);
                buf[len] = (char)c;
            }
            len++;
        }
    }
    if (buf) buf[len] = 0;
    return 0;
}

/* A JSON number that must be an integer in [lo, hi]; `what` names the field. */
static int jr_int(jr *r, const char *what, int64_t lo, int64_t hi, int64_t *out)
{
    jr_ws(r);
    int neg = 0;
    if (r->c == '-') { neg = 1; jr_next(r); }
    if (r->c < '0' || r->c > '9') return jr_fail(r, "%s: expected an integer", what);
    uint64_t v = 0;
    int digits = 0, overflow = 0;
    while (r->c >= '0' && r->c <= '9') {
        if (v > (UINT64_MAX - 9) / 10) overflow = 1;
        else v = v * 10 + (uint64_t)(r->c - '0');
        digits++;
        jr_next(r);
    }
    if (r->c == '.' || r->c == 'e' || r->c == 'E') return jr_fail(r, "%s: expected an integer, got a fraction", what);
    if (overflow || v > (uint64_t)INT64_MAX) return jr_fail(r, "%s: integer out of range", what);
    int64_t s = neg ? -(int64_t)v : (int64_t)v;
    if (s < lo || s > hi)
        return jr_fail(r, "%s: %lld is out of range [%lld, %lld]", what, (long long)s, (long long)lo,
                       (long long)hi);
    (void)digits;
    *out = s;
    return 0;
}

/* Offsets and sizes: non-negative int64. */
static int jr_uint(jr *r, const char *what, uint64_t *out)
{
    int64_t v;
    if (jr_int(r, what, 0, INT64_MAX, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Literal true/false/null. */
static int jr_literal(jr *r, const char *word)
{
    for (const char *p = word; *p; p++) {
        if (r->c != *p) return jr_syntax(r, word);
        jr_next(r);
    }
    return 0;
}

/* true or false (head.tied). */
static int jr_bool(jr *r, const char *what, int *out)
{
    jr_ws(r);
    if (r->c == 't') { *out = 1; return jr_literal(r, "true"); }
    if (r->c == 'f') { *out = 0; return jr_literal(r, "false"); }
    return jr_fail(r, "%s: expected true or false", what);
}

/* Iterate an object: call after the value's '{' was consumed (first=1).
 * Returns 1 with the key read and ':' consumed, 0 at '}', -1 on error. */
static int jr_obj_next(jr *r, int *first, char *key, size_t cap)
{
    jr_ws(r);
    if (r->c == '}') { jr_next(r); return 0; }
    if (!*first) {
        if (r->c != ',') return jr_syntax(r, "',' or '}'");
        jr_next(r);
    }
    *first = 0;
    if (jr_string(r, key, cap)) return -1;
    if (jr_expect(r, ':', "':'")) return -1;
    return 1;
}

/* Iterate an array: 1 if an element follows, 0 at ']', -1 on error. */
static int jr_arr_next(jr *r, int *first)
{
    jr_ws(r);
    if (r->c == ']') { jr_next(r); return 0; }
    if (!*first) {
        if (r->c != ',') return jr_syntax(r, "',' or ']'");
        jr_next(r);
    }
    *first = 0;
    return 1;
}

/* Skip any value (bounded nesting). */
static int jr_skip(jr *r, int depth)
{
    if (depth > JR_MAX_DEPTH) return jr_fail(r, "byte %llu: nesting deeper than %d", (unsigned long long)r->pos,
                                             JR_MAX_DEPTH);
    jr_ws(r);
    int c = r->c, first = 1, k;
    switch (c) {
    case '{':
        jr_next(r);
        while ((k = jr_obj_next(r, &first, NULL, 0)) == 1)
            if (jr_skip(r, depth + 1)) return -1;
        return k;
    case '[':
        jr_next(r);
        while ((k = jr_arr_next(r, &first)) == 1)
            if (jr_skip(r, depth + 1)) return -1;
        return k;
    case '"': return jr_string(r, NULL, 0);
    case 't': return jr_literal(r, "true");
    case 'f': return jr_literal(r, "false");
    case 'n': return jr_literal(r, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            int digits = 0;
            while (r->c == '-' || r->c == '+' || r->c == '.' || r->c == 'e' || r->c == 'E' ||
                   (r->c >= '0' && r->c <= '9')) {
                digits += r->c >= '0' && r->c <= '9';
                jr_next(r);
            }
            return digits ? 0 : jr_syntax(r, "a number");
        }
        return jr_syntax(r, "a JSON value");
    }
}

/* Open a JSON file for pulling. */
static int jr_open(jr *r, const char *path, k3_error *err)
{
    memset(r, 0, sizeof *r);
    r->what = path;
    r->err = err;
    r->f = k3_fopen_regular(path, err);
    if (!r->f) return -1;
    r->c = getc_unlocked(r->f);
    return 0;
}

/* Close the file and drop any capture buffer. */
static void jr_close(jr *r)
{
    if (r->f) fclose(r->f);
    free(r->cap);
    r->f = NULL;
    r->cap = NULL;
}

/* ---------------------------------------------------------------- loading */

typedef struct page_rec { int32_t layer, expert; uint64_t offset; } page_rec;

typedef struct load_state {
    jr r;
    k3_manifest *m;
    size_t *name_off;         /* per tensor, into m->names_ while loading */
    size_t names_len, names_cap;
    int tensors_cap;
    page_rec *pages;
    int n_pages, pages_cap;
    char embed_name[JR_MAX_STRING], norm_name[JR_MAX_STRING], lm_head_name[JR_MAX_STRING];
    int have_file[K3_PK_NFILES], have_sum[K3_PK_NFILES];
    int64_t n_layers_moe, n_experts_decl;
    int tied;
} load_state;

/* FNV-1a of a name: the lookup table's hash. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = K3_FNV_INIT;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Which packed file a "file" value names. */
static int file_from_key(const char *s)
{
    for (int f = 0; f < K3_PK_NFILES; f++)
        if (!strcmp(s, file_keys[f])) return f;
    return -1;
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

/* One entry of "tensors": {name, dtype, shape, file, offset, bytes}. */
static int parse_tensor(load_state *s, int idx)
{
    jr *r = &s->r;
    k3_manifest *m = s->m;
    if (m->n_tensors == s->tensors_cap) {
        int n = s->tensors_cap ? s->tensors_cap * 2 : 1024;
        k3_manifest_tensor *g = realloc(m->tensors, (size_t)n * sizeof *g);
        size_t *o = realloc(s->name_off, (size_t)n * sizeof *o);
        if (g) m->tensors = g;
        if (o) s->name_off = o;
        if (!g || !o) return jr_fail(r, "out of memory");
        s->tensors_cap = n;
    }
    k3_manifest_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->layer = t->expert = -1;
    char key[64], val[JR_MAX_STRING], field[96];
    int first = 1, k, seen = 0;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "tensors[%d]: byte %llu: expected an object", idx, (unsigned long long)r->pos);
    jr_next(r);
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        snprintf(field, sizeof field, "tensors[%d].%s", idx, key);
        if (!strcmp(key, "name")) {
            if (jr_string(r, val, sizeof val)) return -1;
            if (!val[0]) return jr_fail(r, "%s is empty", field);
            size_t l = strlen(val) + 1;
            if (s->names_len + l > s->names_cap) {
                size_t n = s->names_cap ? s->names_cap * 2 : 65536;
                while (n < s->names_len + l) n *= 2;
                char *g = realloc(m->names_, n);
                if (!g) return jr_fail(r, "out of memory");
                m->names_ = g;
                s->names_cap = n;
            }
            memcpy(m->names_ + s->names_len, val, l);
            s->name_off[m->n_tensors] = s->names_len;
            s->names_len += l;
            seen |= 1;
        } else if (!strcmp(key, "dtype")) {
            if (jr_string(r, val, sizeof val)) return -1;
            if (k3_dtype_parse(val, &t->dtype) != 0 || k3_dtype_size(t->dtype) == 0)
                return jr_fail(r, "%s: unsupported dtype \"%s\"", field, val);
            seen |= 2;
        } else if (!strcmp(key, "shape")) {
            jr_ws(r);
            if (r->c != '[') return jr_fail(r, "%s: expected an array", field);
            jr_next(r);
            int af = 1, n = 0;
            while ((k = jr_arr_next(r, &af)) == 1) {
                if (n == K3_MANIFEST_MAX_DIMS)
                    return jr_fail(r, "%s: more than %d dimensions", field, K3_MANIFEST_MAX_DIMS);
                if (jr_int(r, field, 0, (int64_t)1 << 40, &t->shape[n])) return -1;
                n++;
            }
            if (k < 0) return -1;
            t->ndim = (uint8_t)n;
            seen |= 4;
        } else if (!strcmp(key, "file")) {
            if (jr_string(r, val, sizeof val)) return -1;
            int f = file_from_key(val);
            if (f < 0) return jr_fail(r, "%s: \"%s\" is not one of trunk, experts, embed, head", field, val);
            t->file = (uint8_t)f;
            seen |= 8;
        } else if (!strcmp(key, "offset")) {
            if (jr_uint(r, field, &t->offset)) return -1;
            seen |= 16;
        } else if (!strcmp(key, "bytes")) {
            if (jr_uint(r, field, &t->bytes)) return -1;
            seen |= 32;
        } else if (jr_skip(r, 1)) {
            return -1;
        }
    }
    if (k < 0) return -1;
    static const char *const need[] = {"name", "dtype", "shape", "file", "offset", "bytes"};
    for (int i = 0; i < 6; i++)
        if (!(seen & (1 << i))) return jr_fail(r, "tensors[%d] lacks \"%s\"", idx, need[i]);
    m->n_tensors++;
    return 0;
}

/* "tensors": [ ... ] */
static int parse_tensors(load_state *s)
{
    jr *r = &s->r;
    jr_ws(r);
    if (r->c != '[') return jr_fail(r, "\"tensors\" must be an array");
    jr_next(r);
    int first = 1, k, i = 0;
    while ((k = jr_arr_next(r, &first)) == 1)
        if (parse_tensor(s, i++)) return -1;
    return k;
}

/* "layers": [{trunk_offset, trunk_bytes}, ...] */
static int parse_layers(load_state *s)
{
    jr *r = &s->r;
    k3_manifest *m = s->m;
    jr_ws(r);
    if (r->c != '[') return jr_fail(r, "\"layers\" must be an array");
    jr_next(r);
    int first = 1, k, cap = 0;
    while ((k = jr_arr_next(r, &first)) == 1) {
        if (m->n_layers == 1 << 16) return jr_fail(r, "\"layers\" has more than 65536 entries");
        if (m->n_layers == cap) {
            cap = cap ? cap * 2 : 64;
            k3_manifest_layer *g = realloc(m->layers, (size_t)cap * sizeof *g);
            if (!g) return jr_fail(r, "out of memory");
            m->layers = g;
        }
        k3_manifest_layer *L = &m->layers[m->n_layers];
        memset(L, 0, sizeof *L);
        char key[64], field[96];
        int of = 1, seen = 0, idx = m->n_layers;
        jr_ws(r);
        if (r->c != '{') return jr_fail(r, "layers[%d]: byte %llu: expected an object", idx, (unsigned long long)r->pos);
        jr_next(r);
        while ((k = jr_obj_next(r, &of, key, sizeof key)) == 1) {
            snprintf(field, sizeof field, "layers[%d].%s", idx, key);
            if (!strcmp(key, "trunk_offset")) { if (jr_uint(r, field, &L->trunk_offset)) return -1; seen |= 1; }
            else if (!strcmp(key, "trunk_bytes")) { if (jr_uint(r, field, &L->trunk_bytes)) return -1; seen |= 2; }
            else if (jr_skip(r, 1)) return -1;
        }
        if (k < 0) return -1;
        if (!(seen & 1)) return jr_fail(r, "layers[%d] lacks \"trunk_offset\"", idx);
        if (!(seen & 2)) return jr_fail(r, "layers[%d] lacks \"trunk_bytes\"", idx);
        m->n_layers++;
    }
    return k;
}

/* "experts": {page_bytes, n_layers_moe, [n_experts], pages: [[layer, expert, offset], ...]} */
static int parse_experts(load_state *s)
{
    jr *r = &s->r;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"experts\" must be an object");
    jr_next(r);
    char key[64];
    int first = 1, k, seen = 0;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "page_bytes")) {
            if (jr_uint(r, "experts.page_bytes", &s->m->page_bytes)) return -1;
            seen |= 1;
        } else if (!strcmp(key, "n_layers_moe")) {
            if (jr_int(r, "experts.n_layers_moe", 0, 1 << 16, &s->n_layers_moe)) return -1;
            seen |= 2;
        } else if (!strcmp(key, "n_experts")) {
            if (jr_int(r, "experts.n_experts", 0, 1 << 20, &s->n_experts_decl)) return -1;
        } else if (!strcmp(key, "pages")) {
            jr_ws(r);
            if (r->c != '[') return jr_fail(r, "experts.pages must be an array");
            jr_next(r);
            int pf = 1;
            while ((k = jr_arr_next(r, &pf)) == 1) {
                int idx = s->n_pages;
                char field[64];
                snprintf(field, sizeof field, "experts.pages[%d]", idx);
                if (s->n_pages == s->pages_cap) {
                    s->pages_cap = s->pages_cap ? s->pages_cap * 2 : 1024;
                    page_rec *g = realloc(s->pages, (size_t)s->pages_cap * sizeof *g);
                    if (!g) return jr_fail(r, "out of memory");
                    s->pages = g;
                }
                int64_t l, e, off;
                jr_ws(r);
                if (r->c != '[') return jr_fail(r, "%s: expected [layer, expert, offset]", field);
                jr_next(r);
                if (jr_int(r, field, 0, (1 << 16) - 1, &l) || jr_expect(r, ',', "',' in [layer, expert, offset]") ||
                    jr_int(r, field, 0, (1 << 20) - 1, &e) || jr_expect(r, ',', "',' in [layer, expert, offset]") ||
                    jr_int(r, field, 0, INT64_MAX, &off) || jr_expect(r, ']', "']' after [layer, expert, offset]"))
                    return -1;
                s->pages[idx] = (page_rec){(int32_t)l, (int32_t)e, (uint64_t)off};
                s->n_pages++;
            }
            if (k < 0) return -1;
            seen |= 4;
        } else if (jr_skip(r, 1)) {
            return -1;
        }
    }
    if (k < 0) return -1;
    if (!(seen & 1)) return jr_fail(r, "\"experts\" lacks \"page_bytes\"");
    if (!(seen & 2)) return jr_fail(r, "\"experts\" lacks \"n_layers_moe\"");
    if (!(seen & 4)) return jr_fail(r, "\"experts\" lacks \"pages\"");
    return 0;
}

/* "embed": {name, row_bytes, rows, dtype} */
static int parse_embed(load_state *s)
{
    jr *r = &s->r;
    k3_manifest *m = s->m;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"embed\" must be an object");
    jr_next(r);
    char key[64], val[64];
    int first = 1, k, seen = 0;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "name")) { if (jr_string(r, s->embed_name, sizeof s->embed_name)) return -1; seen |= 1; }
        else if (!strcmp(key, "row_bytes")) { if (jr_uint(r, "embed.row_bytes", &m->embed_row_bytes)) return -1; seen |= 2; }
        else if (!strcmp(key, "rows")) { if (jr_int(r, "embed.rows", 1, INT32_MAX, &m->embed_rows)) return -1; seen |= 4; }
        else if (!strcmp(key, "dtype")) {
            if (jr_string(r, val, sizeof val)) return -1;
            if (k3_dtype_parse(val, &m->embed_dtype) != 0) return jr_fail(r, "embed.dtype: unsupported dtype \"%s\"", val);
            seen |= 8;
        } else if (jr_skip(r, 1)) return -1;
    }
    if (k < 0) return -1;
    static const char *const need[] = {"name", "row_bytes", "rows", "dtype"};
    for (int i = 0; i < 4; i++)
        if (!(seen & (1 << i))) return jr_fail(r, "\"embed\" lacks \"%s\"", need[i]);
    return 0;
}

/* "head": {norm, lm_head, tied} */
static int parse_head(load_state *s)
{
    jr *r = &s->r;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"head\" must be an object");
    jr_next(r);
    char key[64];
    int first = 1, k, seen = 0;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "norm")) { if (jr_string(r, s->norm_name, sizeof s->norm_name)) return -1; seen |= 1; }
        else if (!strcmp(key, "lm_head")) { if (jr_string(r, s->lm_head_name, sizeof s->lm_head_name)) return -1; seen |= 2; }
        else if (!strcmp(key, "tied")) { if (jr_bool(r, "head.tied", &s->tied)) return -1; seen |= 4; }
        else if (jr_skip(r, 1)) return -1;
    }
    if (k < 0) return -1;
    static const char *const need[] = {"norm", "lm_head", "tied"};
    for (int i = 0; i < 3; i++)
        if (!(seen & (1 << i))) return jr_fail(r, "\"head\" lacks \"%s\"", need[i]);
    return 0;
}

/* "files": {"trunk.bin": N, ...} or "checksums": {"trunk.bin": "hex", ...} */
static int parse_files(load_state *s, int checksums)
{
    jr *r = &s->r;
    const char *what = checksums ? "checksums" : "files";
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"%s\" must be an object", what);
    jr_next(r);
    char key[64], field[96], val[64];
    int first = 1, k;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        int f = -1;
        for (int i = 0; i < K3_PK_NFILES; i++)
            if (!strcmp(key, file_names[i])) f = i;
        snprintf(field, sizeof field, "%s.%s", what, key);
        if (f < 0) {
            if (jr_skip(r, 1)) return -1;
        } else if (checksums) {
            if (jr_string(r, val, sizeof val)) return -1;
            if (parse_hex64(val, &s->m->checksum[f])) return jr_fail(r, "%s: expected 16 hex digits", field);
            s->have_sum[f] = 1;
        } else {
            if (jr_uint(r, field, &s->m->file_bytes[f])) return -1;
            s->have_file[f] = 1;
        }
    }
    if (k < 0) return -1;
    for (int f = 0; f < K3_PK_NFILES; f++)
        if (!(checksums ? s->have_sum[f] : s->have_file[f]))
            return jr_fail(r, "\"%s\" lacks \"%s\"", what, file_names[f]);
    return 0;
}

/* "source": {fingerprint, shards: [{name, bytes}]} */
static int parse_source(load_state *s)
{
    jr *r = &s->r;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"source\" must be an object");
    jr_next(r);
    char key[64], val[JR_MAX_STRING];
    int first = 1, k, seen = 0;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        if (!strcmp(key, "fingerprint")) {
            if (jr_string(r, val, sizeof val)) return -1;
            if (parse_hex64(val, &s->m->fingerprint)) return jr_fail(r, "source.fingerprint: expected 16 hex digits");
            seen |= 1;
        } else if (!strcmp(key, "shards")) {
            jr_ws(r);
            if (r->c != '[') return jr_fail(r, "source.shards must be an array");
            if (jr_skip(r, 1)) return -1;
            seen |= 2;
        } else if (jr_skip(r, 1)) {
            return -1;
        }
    }
    if (k < 0) return -1;
    if (!(seen & 1)) return jr_fail(r, "\"source\" lacks \"fingerprint\"");
    if (!(seen & 2)) return jr_fail(r, "\"source\" lacks \"shards\"");
    return 0;
}

/* The "config" object, kept verbatim. */
static int parse_config(load_state *s)
{
    jr *r = &s->r;
    jr_ws(r);
    if (r->c != '{') return jr_fail(r, "\"config\" must be an object");
    r->capturing = 1;
    r->cap_len = 0;
    int rc = jr_skip(r, 1);
    r->capturing = 0;
    if (rc || r->failed) return -1;
    s->m->config_json = malloc(r->cap_len + 1);
    if (!s->m->config_json) return jr_fail(r, "out of memory");
    memcpy(s->m->config_json, r->cap, r->cap_len);
    s->m->config_json[r->cap_len] = 0;
    s->m->config_len = r->cap_len;
    return 0;
}

/* The whole document: top-level keys in any order, unknown keys skipped. */
static int parse_document(load_state *s)
{
    jr *r = &s->r;
    if (jr_expect(r, '{', "'{' (manifest.json must hold a JSON object)")) return -1;
    static const char *const keys[] = {"format", "version", "alignment", "source", "config", "tensors",
                                       "layers", "experts", "embed", "head", "files", "checksums"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    int seen[NKEYS] = {0};
    char key[64], val[64];
    int first = 1, k;
    while ((k = jr_obj_next(r, &first, key, sizeof key)) == 1) {
        int which = -1;
        for (int i = 0; i < NKEYS; i++)
            if (!strcmp(key, keys[i])) which = i;
        if (which >= 0 && seen[which]) return jr_fail(r, "key \"%s\" appears twice", key);
        if (which >= 0) seen[which] = 1;
        int64_t v;
        int rc = 0;
        switch (which) {
        case 0:
            if ((rc = jr_string(r, val, sizeof val)) == 0 && strcmp(val, K3_PACK_FORMAT))
                return jr_fail(r, "\"format\" is \"%s\", expected \"%s\"", val, K3_PACK_FORMAT);
            break;
        case 1:
            if ((rc = jr_int(r, "version", INT64_MIN, INT64_MAX, &v)) == 0 && v != K3_PACK_VERSION)
                return jr_fail(r, "version %lld is not supported (this build reads version %d)", (long long)v,
                               K3_PACK_VERSION);
            break;
        case 2:
            if ((rc = jr_int(r, "alignment", INT64_MIN, INT64_MAX, &v)) == 0 && v != K3_PACK_ALIGN)
                return jr_fail(r, "alignment %lld is not supported (expected %u)", (long long)v, K3_PACK_ALIGN);
            break;
        case 3: rc = parse_source(s); break;
        case 4: rc = parse_config(s); break;
        case 5: rc = parse_tensors(s); break;
        case 6: rc = parse_layers(s); break;
        case 7: rc = parse_experts(s); break;
        case 8: rc = parse_embed(s); break;
        case 9: rc = parse_head(s); break;
        case 10: rc = parse_files(s, 0); break;
        case 11: rc = parse_files(s, 1); break;
        default: rc = jr_skip(r, 1); break;
        }
        if (rc) return -1;
    }
    if (k < 0) return -1;
    jr_ws(r);
    if (r->c != EOF) return jr_syntax(r, "the end of the file after the top-level object");
    for (int i = 0; i < NKEYS; i++)
        if (!seen[i]) return jr_fail(r, "missing required key \"%s\"", keys[i]);
    return 0;
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

/* Order pages by offset to find overlaps and to map tensors to pages. */
static int cmp_page_offset(const void *a, const void *b)
{
    const page_rec *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Everything that is not syntax: sizes on disk, bounds, alignment, overlap,
 * membership of each tensor in its run or page, name lookups. */
static int check_manifest(load_state *s, const char *mpath, k3_error *err)
{
    k3_manifest *m = s->m;
    /* files on disk */
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
    /* names, lookup table, per-tensor bounds */
    for (int i = 0; i < m->n_tensors; i++) m->tensors[i].name = m->names_ + s->name_off[i];
    int slots = 16;
    while (slots < m->n_tensors * 2) slots *= 2;
    m->slots_ = malloc((size_t)slots * sizeof *m->slots_);
    if (!m->slots_) return k3_err(err, "%s: out of memory", mpath);
    m->n_slots_ = slots;
    memset(m->slots_, 0xff, (size_t)slots * sizeof *m->slots_);
    for (int i = 0; i < m->n_tensors; i++) {
        k3_manifest_tensor *t = &m->tensors[i];
        uint64_t mask = (uint64_t)slots - 1;
        uint64_t h = name_hash(t->name) & mask;
        for (; m->slots_[h] >= 0; h = (h + 1) & mask)
            if (!strcmp(m->tensors[m->slots_[h]].name, t->name))
                return k3_err(err, "%s: tensor '%s' is listed twice", mpath, t->name);
        m->slots_[h] = i;
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[d])
                return k3_err(err, "%s: tensor '%s' shape is too large", mpath, t->name);
            numel *= (uint64_t)t->shape[d];
        }
        if (numel * k3_dtype_size(t->dtype) != t->bytes)
            return k3_err(err, "%s: tensor '%s' has %llu bytes but dtype %s x shape needs %llu", mpath, t->name,
                          (unsigned long long)t->bytes, k3_dtype_name(t->dtype),
                          (unsigned long long)(numel * k3_dtype_size(t->dtype)));
        uint64_t fb = m->file_bytes[t->file];
        if (t->bytes > fb || t->offset > fb - t->bytes)
            return k3_err(err, "%s: tensor '%s' [%llu, +%llu) runs past the end of %s (%llu bytes)", mpath,
                          t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes,
                          file_names[t->file], (unsigned long long)fb);
        if (t->offset % K3_PACK_TENSOR_ALIGN)
            return k3_err(err, "%s: tensor '%s' offset %llu in %s is not %u-byte aligned", mpath, t->name,
                          (unsigned long long)t->offset, file_names[t->file], K3_PACK_TENSOR_ALIGN);
    }
    /* layer runs: aligned, inside trunk.bin, in forward order, disjoint */
    if (m->n_layers < 1) return k3_err(err, "%s: \"layers\" is empty", mpath);
    for (int l = 0; l < m->n_layers; l++) {
        const k3_manifest_layer *L = &m->layers[l];
        if (L->trunk_offset % K3_PACK_ALIGN || L->trunk_bytes % K3_PACK_ALIGN)
            return k3_err(err, "%s: layers[%d] run [%llu, +%llu) is not %u-byte aligned", mpath, l,
                          (unsigned long long)L->trunk_offset, (unsigned long long)L->trunk_bytes, K3_PACK_ALIGN);
        if (L->trunk_bytes > m->file_bytes[K3_PK_TRUNK] ||
            L->trunk_offset > m->file_bytes[K3_PK_TRUNK] - L->trunk_bytes)
            return k3_err(err, "%s: layers[%d] run [%llu, +%llu) runs past the end of trunk.bin (%llu bytes)",
                          mpath, l, (unsigned long long)L->trunk_offset, (unsigned long long)L->trunk_bytes,
                          (unsigned long long)m->file_bytes[K3_PK_TRUNK]);
        if (l > 0 && L->trunk_offset < m->layers[l - 1].trunk_offset + m->layers[l - 1].trunk_bytes)
            return k3_err(err, "%s: layers[%d] run starts at %llu, inside or before layers[%d]'s run", mpath, l,
                          (unsigned long long)L->trunk_offset, l - 1);
    }
    /* expert pages */
    if (s->n_pages > 0) {
        if (m->page_bytes == 0 || m->page_bytes % K3_PACK_ALIGN)
            return k3_err(err, "%s: experts.page_bytes %llu is not a positive multiple of %u", mpath,
                          (unsigned long long)m->page_bytes, K3_PACK_ALIGN);
        int max_e = 0;
        for (int i = 0; i < s->n_pages; i++) {
            const page_rec *p = &s->pages[i];
            if (p->layer >= m->n_layers)
                return k3_err(err, "%s: experts.pages[%d] names layer %d but there are %d layers", mpath, i,
                              p->layer, m->n_layers);
            if (p->offset % K3_PACK_ALIGN)
                return k3_err(err, "%s: experts.pages[%d] (layer %d, expert %d) offset %llu is not %u-byte "
                              "aligned", mpath, i, p->layer, p->expert, (unsigned long long)p->offset, K3_PACK_ALIGN);
            if (m->page_bytes > m->file_bytes[K3_PK_EXPERTS] ||
                p->offset > m->file_bytes[K3_PK_EXPERTS] - m->page_bytes)
                return k3_err(err, "%s: experts.pages[%d] (layer %d, expert %d) [%llu, +%llu) runs past the end "
                              "of experts.bin (%llu bytes)", mpath, i, p->layer, p->expert,
                              (unsigned long long)p->offset, (unsigned long long)m->page_bytes,
                              (unsigned long long)m->file_bytes[K3_PK_EXPERTS]);
            if (p->expert + 1 > max_e) max_e = p->expert + 1;
        }
        m->n_experts = max_e;
        m->page_offsets = malloc((size_t)m->n_layers * (size_t)max_e * sizeof *m->page_offsets);
        if (!m->page_offsets) return k3_err(err, "%s: out of memory", mpath);
        memset(m->page_offsets, 0xff, (size_t)m->n_layers * (size_t)max_e * sizeof *m->page_offsets);
        for (int i = 0; i < s->n_pages; i++) {
            const page_rec *p = &s->pages[i];
            uint64_t *slot = &m->page_offsets[(size_t)p->layer * max_e + p->expert];
            if (*slot != UINT64_MAX)
                return k3_err(err, "%s: experts.pages lists (layer %d, expert %d) twice", mpath, p->layer, p->expert);
            *slot = p->offset;
            m->layers[p->layer].n_experts++;
        }
        if (s->n_experts_decl && s->n_experts_decl != max_e)
            return k3_err(err, "%s: experts.n_experts is %lld but the pages name experts 0..%d", mpath,
                          (long long)s->n_experts_decl, max_e - 1);
        int moe = 0;
        for (int l = 0; l < m->n_layers; l++) {
            if (!m->layers[l].n_experts) continue;
            moe++;
            if (m->layers[l].n_experts != max_e) {
                for (int e = 0; e < max_e; e++)
                    if (m->page_offsets[(size_t)l * max_e + e] == UINT64_MAX)
                        return k3_err(err, "%s: experts.pages lacks (layer %d, expert %d)", mpath, l, e);
            }
        }
        if (moe != s->n_layers_moe)
            return k3_err(err, "%s: experts.n_layers_moe is %lld but pages cover %d layers", mpath,
                          (long long)s->n_layers_moe, moe);
        qsort(s->pages, (size_t)s->n_pages, sizeof *s->pages, cmp_page_offset);
        for (int i = 1; i < s->n_pages; i++)
            if (s->pages[i].offset < s->pages[i - 1].offset + m->page_bytes)
                return k3_err(err, "%s: expert pages (layer %d, expert %d) and (layer %d, expert %d) overlap "
                              "in experts.bin", mpath, s->pages[i - 1].layer, s->pages[i - 1].expert,
                              s->pages[i].layer, s->pages[i].expert);
    } else if (s->n_layers_moe != 0) {
        return k3_err(err, "%s: experts.n_layers_moe is %lld but there are no pages", mpath,
                      (long long)s->n_layers_moe);
    }
    m->n_pages = s->n_pages;
    m->n_layers_moe = (int)s->n_layers_moe;
    /* each trunk tensor inside one layer run, each expert tensor inside one page */
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
                return k3_err(err, "%s: tensor '%s' [%llu, +%llu) in trunk.bin is not inside one layer run", mpath,
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
                              mpath, t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes);
            t->layer = s->pages[found].layer;
            t->expert = s->pages[found].expert;
        }
    }
    /* tensors do not overlap each other */
    if (m->n_tensors > 1) {
        int *order = malloc((size_t)m->n_tensors * sizeof *order);
        if (!order) return k3_err(err, "%s: out of memory", mpath);
        for (int i = 0; i < m->n_tensors; i++) order[i] = i;
        sort_tensors_base = m->tensors;
        qsort(order, (size_t)m->n_tensors, sizeof *order, cmp_tensor_pos);
        for (int i = 1; i < m->n_tensors; i++) {
            const k3_manifest_tensor *a = &m->tensors[order[i - 1]], *b = &m->tensors[order[i]];
            if (a->file == b->file && a->bytes && b->bytes && a->offset + a->bytes > b->offset) {
                k3_err(err, "%s: tensors '%s' and '%s' overlap in %s", mpath, a->name, b->name, file_names[a->file]);
                free(order);
                return -1;
            }
        }
        free(order);
    }
    /* embedding, final norm, head */
    m->embed = k3_manifest_find(m, s->embed_name);
    if (!m->embed) return k3_err(err, "%s: embed.name '%s' is not in the tensor table", mpath, s->embed_name);
    if (m->embed->file != K3_PK_EMBED || m->embed->offset != 0)
        return k3_err(err, "%s: the embedding '%s' must start at offset 0 of embed.bin", mpath, s->embed_name);
    if (m->embed->dtype != m->embed_dtype || m->embed_row_bytes == 0 ||
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
    } else if (jr_open(&s->r, mpath, err) == 0) {
        rc = parse_document(s);
        if (rc == 0 && ferror(s->r.f)) rc = k3_err(err, "%s: read error", mpath);
        jr_close(&s->r);
        if (rc == 0) rc = check_manifest(s, mpath, err);
    }
    free(s->name_off);
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
    free(m->names_);
    free(m->slots_);
    memset(m, 0, sizeof *m);
}

/* Open-addressing lookup built at load (names are unique). */
const k3_manifest_tensor *k3_manifest_find(const k3_manifest *m, const char *name)
{
    if (!m->n_slots_) return NULL;
    uint64_t mask = (uint64_t)m->n_slots_ - 1;
    for (uint64_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        int k = m->slots_[i];
        if (k < 0) return NULL;
        if (!strcmp(m->tensors[k].name, name)) return &m->tensors[k];
    }
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
    uint64_t o = m->page_offsets[(size_t)layer * m->n_experts + expert];
    return o == UINT64_MAX ? -1 : (int64_t)o;
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

/* Cheap gate for loaders: reads only up to "format" and "version". */
int k3_is_packed_dir(const char *dir)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    if (dl >= 8 && !strncmp(dir + dl - 8, ".partial", 8)) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%.*s/manifest.json", (int)dl, dir);
    jr r;
    if (jr_open(&r, path, NULL)) return 0;
    int first = 1, k, format_ok = 0, version_ok = 0, format_seen = 0, version_seen = 0;
    char key[64], val[64];
    if (jr_expect(&r, '{', "'{'") == 0) {
        while ((!format_seen || !version_seen) && (k = jr_obj_next(&r, &first, key, sizeof key)) == 1) {
            int64_t v;
            if (!strcmp(key, "format")) {
                format_seen = 1;
                if (jr_string(&r, val, sizeof val)) break;
                format_ok = !strcmp(val, K3_PACK_FORMAT);
            } else if (!strcmp(key, "version")) {
                version_seen = 1;
                if (jr_int(&r, "version", INT64_MIN, INT64_MAX, &v)) break;
                version_ok = v == K3_PACK_VERSION;
            } else if (jr_skip(&r, 1)) {
                break;
            }
        }
    }
    jr_close(&r);
    return format_ok && version_ok;
}
