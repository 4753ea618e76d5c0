/* tokenizer.c - Kimi tiktoken-style tokenizer: loading tiktoken.model and
 * tokenizer_config.json, byte-level BPE by lowest rank, special tokens,
 * decoding (whole and streaming) and the Kimi K2 chat framing. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pretokenize.h"
#include "strtab.h"
#include "k3.h"
#include "k3_util.h"
#include "k3_tokenizer.h"
#include "tokenizer_build.h"
#include "unicode_class.h"

#define K3_N_SPECIAL K3_TOKENIZER_MIN_SPECIALS  /* the least number of special ids */
#define K3_MAX_SPECIAL K3_TOKENIZER_MAX_SPECIALS /* added tokens may sit anywhere in n_base .. n_base + this */

struct k3_tokenizer {
    int n_base;
    uint8_t *arena;          /* bytes of every base token, back to back */
    size_t *tok_off;         /* [n_base] offset into arena */
    uint32_t *tok_len;       /* [n_base] */
    k3_strtab ranks;         /* token bytes -> rank */
    int byte_rank[256];
    int n_special;                      /* ids n_base .. n_base + n_special - 1 */
    char **special;                     /* [n_special] NUL-terminated names */
    size_t *special_len;                /* [n_special] */
    uint8_t special_first[256];         /* 1 if some special starts with this byte */
    size_t max_token_bytes;
    size_t max_base_bytes;              /* longest base token (specials come on top) */
    const k3_pretok *pretok;     /* the process's shared compiled regex */
};

/* A growable id list; every encode path appends through it. */
typedef struct {
    int *ids;
    size_t n, cap;
} id_vec;

/* Appending is the only allocation in encode; failure is reported, not fatal. */
static int vec_push(id_vec *v, int id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int *grown = realloc(v->ids, cap * sizeof *grown);
        if (!grown) return -1;
        v->ids = grown;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return 0;
}

/* ---------------------------------------------------------------- lookup */

/* The bytes of rank r (the key the rank table compares). */
static const void *token_key(const void *owner, int32_t r, size_t *len)
{
    const k3_tokenizer *t = owner;
    *len = t->tok_len[r];
    return t->arena + t->tok_off[r];
}

/* Rank of a byte string, or -1: the one question BPE keeps asking. */
static int rank_of(const k3_tokenizer *t, const uint8_t *s, size_t n)
{
    return k3_strtab_find(&t->ranks, s, n, token_key, t);
}

/* Insert rank r; returns the rank already holding the same bytes, or -1. */
static int rank_insert(k3_tokenizer *t, int r)
{
    return k3_strtab_insert(&t->ranks, r, token_key, t);
}

/* ------------------------------------------------------------- file input */

/* Whole-file read for the two tokenizer files: regular files only, capped
 * (k3_read_file), with the message in this file's error convention. */
static char *read_whole_file(const char *path, size_t max_bytes, size_t *len_out, k3_error *err)
{
    k3_error e;
    char *buf = NULL;
    if (k3_read_file(path, max_bytes, &buf, len_out, &e)) {
        k3_err(err, "%s", e.msg);
        return NULL;
    }
    return buf;
}

/* Value of one base64 character, or -1. */
static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict standard base64 (padding required), so a corrupt vocabulary line
 * is reported rather than silently decoded to different bytes. Returns the
 * decoded length or -1. */
static long b64_decode(const char *s, size_t n, uint8_t *out)
{
    if (n == 0 || n % 4) return -1;
    long w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) { v[k] = 0; pad++; continue; }
            if (pad) return -1;
            v[k] = b64_value(s[i + k]);
            if (v[k] < 0) return -1;
        }
        uint32_t bits = ((uint32_t)v[0] << 18) | ((uint32_t)v[1] << 12) | ((uint32_t)v[2] << 6) | (uint32_t)v[3];
        out[w++] = (uint8_t)(bits >> 16);
        if (pad < 2) out[w++] = (uint8_t)(bits >> 8);
        if (pad < 1) out[w++] = (uint8_t)bits;
    }
    return w;
}

/* A field of a bad line for an error message: at most 24 bytes, with
 * non-printable bytes as \xNN so the message stays one readable line. */
static const char *printable_field(const char *s, size_t n, char *buf, size_t cap)
{
    size_t w = 0;
    for (size_t i = 0; i < n && i < 24 && w + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) buf[w++] = (char)c;
        else w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", c);
    }
    buf[w] = 0;
    return buf;
}

/* One line of tiktoken.model, split into its two fields. */
typedef struct {
    const char *b64, *rank;
    size_t b64_len, rank_len;
} vocab_line;

/* "base64 rank" with any spaces/tabs around (Python's str.split()). Returns
 * 0, or -1 if the line does not have exactly two fields. */
static int split_vocab_line(const char *s, size_t n, vocab_line *out)
{
    size_t i = 0;
    const char *field[2];
    size_t flen[2];
    for (int f = 0; f < 2; f++) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i == n) return -1;
        field[f] = s + i;
        while (i < n && s[i] != ' ' && s[i] != '\t') i++;
        flen[f] = (size_t)(s + i - field[f]);
    }
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i != n) return -1;
    out->b64 = field[0]; out->b64_len = flen[0];
    out->rank = field[1]; out->rank_len = flen[1];
    return 0;
}

/* Every byte must be a token of its own, so BPE can always start from
 * single bytes; both vocabulary sources end with this check. */
static int find_byte_ranks(k3_tokenizer *t, const char *path, k3_error *err)
{
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        t->byte_rank[b] = rank_of(t, &byte, 1);
        if (t->byte_rank[b] < 0)
            return k3_err(err, "%s: byte 0x%02x has no token (all 256 single bytes need a rank)", path, b);
    }
    return 0;
}

/* Parse tiktoken.model into the arena, ranks and hash table, checking every
 * line: base64, rank range, duplicate ranks and duplicate byte strings. */
static int load_vocab(k3_tokenizer *t, const char *text, size_t len, const char *path, k3_error *err)
{
    int rc = -1;
    int *line_of_rank = NULL;
    size_t n_lines = 0;
    for (size_t i = 0; i < len;) {   /* count non-blank lines = number of tokens */
        const char *nl = memchr(text + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - text) : len, le = e;
        if (le > i && text[le - 1] == '\r') le--;
        if (le > i) n_lines++;
        i = e + 1;
    }
    if (n_lines == 0) {
        k3_err(err, "%s: no tokens in file", path);
        goto done;
    }
    if (n_lines > INT_MAX / 2) {
        k3_err(err, "%s: too many tokens (%zu)", path, n_lines);
        goto done;
    }
    t->n_base = (int)n_lines;
    t->arena = malloc(len / 4 * 3 + 4);
    t->tok_off = calloc(n_lines, sizeof *t->tok_off);
    t->tok_len = calloc(n_lines, sizeof *t->tok_len);
    line_of_rank = calloc(n_lines, sizeof *line_of_rank);
    if (!t->arena || !t->tok_off || !t->tok_len || k3_strtab_init(&t->ranks, n_lines) || !line_of_rank) {
        k3_err(err, "%s: out of memory", path);
        goto done;
    }
    size_t arena_used = 0;
    int lineno = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - text) : len, le = e;
        const char *line = text + i;
        lineno++;
        i = e + 1;
        if (le > (size_t)(line - text) && text[le - 1] == '\r') le--;
        size_t line_len = le - (size_t)(line - text);
        if (line_len == 0) continue;
        vocab_line vl;
        if (split_vocab_line(line, line_len, &vl)) {
            k3_err(err, "%s:%d: expected 'base64 rank'", path, lineno);
            goto done;
        }
        long nbytes = b64_decode(vl.b64, vl.b64_len, t->arena + arena_used);
        if (nbytes <= 0) {
            char shown[128];
            k3_err(err, "%s:%d: bad base64 '%s'", path, lineno,
                     printable_field(vl.b64, vl.b64_len, shown, sizeof shown));
            goto done;
        }
        long long rank = 0;
        for (size_t k = 0; k < vl.rank_len; k++) {
            if (vl.rank[k] < '0' || vl.rank[k] > '9' || rank > (long long)n_lines) {
                rank = -1;
                break;
            }
            rank = rank * 10 + (vl.rank[k] - '0');
        }
        if (rank < 0 || rank >= (long long)n_lines) {
            char shown[128];
            k3_err(err, "%s:%d: rank '%s' is not an integer in 0..%zu (one per token line)",
                     path, lineno, printable_field(vl.rank, vl.rank_len, shown, sizeof shown), n_lines - 1);
            goto done;
        }
        if (line_of_rank[rank]) {
            k3_err(err, "%s:%d: rank %lld already given on line %d", path, lineno, rank,
                     line_of_rank[rank]);
            goto done;
        }
        line_of_rank[rank] = lineno;
        t->tok_off[rank] = arena_used;
        t->tok_len[rank] = (uint32_t)nbytes;
        int dup = rank_insert(t, (int)rank);
        if (dup >= 0) {
            k3_err(err, "%s:%d: token bytes duplicate those of line %d", path, lineno,
                     line_of_rank[dup]);
            goto done;
        }
        arena_used += (size_t)nbytes;
        if ((size_t)nbytes > t->max_base_bytes) t->max_base_bytes = (size_t)nbytes;
    }
    rc = find_byte_ranks(t, path, err);
done:
    free(line_of_rank);
    return rc;
}

/* Parse an added_tokens_decoder key: a decimal id at or above n_base (below
 * it is a BPE rank) and below n_base + K3_MAX_SPECIAL. Hugging Face's
 * tokenizer registers every entry as an added token, wherever it sits, so
 * any such id is accepted; the model checks it is below vocab_size. */
static int parse_special_key(const char *key, int n_base, int *slot)
{
    long long v = 0;
    if (!*key) return -1;
    for (const char *p = key; *p; p++) {
        if (*p < '0' || *p > '9' || v > (long long)INT_MAX) return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < n_base) return -2;
    if (v >= (long long)n_base + K3_MAX_SPECIAL) return -1;
    *slot = (int)(v - n_base);
    return 0;
}

/* qsort_r order of special slots by name, for the duplicate check. */
static int compare_special_names(const void *a, const void *b, void *user)
{
    const k3_tokenizer *t = user;
    return strcmp(t->special[*(const int *)a], t->special[*(const int *)b]);
}

/* Forget the special-token table (a fresh table is parsed next). */
static void drop_specials(k3_tokenizer *t)
{
    for (int s = 0; t->special && s < t->n_special; s++) free(t->special[s]);
    free(t->special);
    free(t->special_len);
    t->special = NULL;
    t->special_len = NULL;
    t->n_special = 0;
    memset(t->special_first, 0, sizeof t->special_first);
    t->max_token_bytes = t->max_base_bytes;
}

/* The end of every special table, whatever filled it: unnamed slots get
 * tokenization_kimi.py's "<|reserved_token_{id}|>", then the lengths, the
 * first-byte filter and the duplicate-name check. 0, or -1 with err set. */
static int finish_specials(k3_tokenizer *t, const char *path, k3_error *err)
{
    for (int s = 0; s < t->n_special; s++) {
        if (!t->special[s]) {
            char name[48];
            snprintf(name, sizeof name, "<|reserved_token_%d|>", t->n_base + s);
            if (!(t->special[s] = strdup(name))) goto oom;
        }
        t->special_len[s] = strlen(t->special[s]);
        t->special_first[(uint8_t)t->special[s][0]] = 1;
        if (t->special_len[s] > t->max_token_bytes) t->max_token_bytes = t->special_len[s];
    }
    /* duplicate names: sort the slots by name (n log n: the table may be large) */
    int *order = malloc((size_t)t->n_special * sizeof *order);
    if (!order) goto oom;
    for (int s = 0; s < t->n_special; s++) order[s] = s;
    qsort_r(order, (size_t)t->n_special, sizeof *order, compare_special_names, t);
    for (int i = 1; i < t->n_special; i++)
        if (!strcmp(t->special[order[i - 1]], t->special[order[i]])) {
            int a = order[i - 1] < order[i] ? order[i - 1] : order[i], b = order[i - 1] ^ order[i] ^ a;
            k3_err(err, "%s: special token \"%.40s\" named twice (ids %d and %d)",
                     path, t->special[a], t->n_base + a, t->n_base + b);
            free(order);
            return -1;
        }
    free(order);
    return 0;
oom:
    return k3_err(err, "%s: out of memory", path);
}

/* Special-token names: added_tokens_decoder entries, then the tokenization_kimi.py
 * default "<|reserved_token_{id}|>" for every unnamed slot. */
static int load_specials(k3_tokenizer *t, const char *text, size_t text_len, const char *path, k3_error *err)
{
    json_error_t jerr;
    drop_specials(t);
    json_t *root = json_loadb(text, text_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        k3_err(err, "%s:%d: %s", path, jerr.line, jerr.text);
        return -1;
    }
    int rc = -1;
    json_t *decoder = json_is_object(root) ? json_object_get(root, "added_tokens_decoder") : NULL;
    if (!json_is_object(decoder)) {
        k3_err(err, "%s: no \"added_tokens_decoder\" object", path);
        goto done;
    }
    const char *key;
    json_t *entry;
    /* first pass: the ids, which size the special table */
    t->n_special = K3_N_SPECIAL;
    json_object_foreach(decoder, key, entry) {
        int slot, bad = parse_special_key(key, t->n_base, &slot);
        if (bad == -2) {
            k3_err(err, "%s: added_tokens_decoder key \"%.40s\" collides with a BPE rank of "
                     "tiktoken.model (ranks 0..%d)", path, key, t->n_base - 1);
            goto done;
        }
        if (bad) {
            k3_err(err, "%s: added_tokens_decoder key \"%.40s\" is not an id in %d..%d",
                     path, key, t->n_base, t->n_base + K3_MAX_SPECIAL - 1);
            goto done;
        }
        if (slot + 1 > t->n_special) t->n_special = slot + 1;
    }
    t->special = calloc((size_t)t->n_special, sizeof *t->special);
    t->special_len = calloc((size_t)t->n_special, sizeof *t->special_len);
    if (!t->special || !t->special_len) goto oom;
    json_object_foreach(decoder, key, entry) {
        int slot = 0;
        parse_special_key(key, t->n_base, &slot);   /* checked in the first pass */
        json_t *content = json_is_object(entry) ? json_object_get(entry, "content") : NULL;
        if (!json_is_string(content) || json_string_length(content) == 0 ||
            memchr(json_string_value(content), 0, json_string_length(content))) {
            k3_err(err, "%s: added_tokens_decoder[\"%s\"] needs a non-empty \"content\" string",
                     path, key);
            goto done;
        }
        free(t->special[slot]);   /* keys like "766" and "0766" name one id */
        if (!(t->special[slot] = strdup(json_string_value(content)))) goto oom;
    }
    rc = finish_specials(t, path, err);
    goto done;
oom:
    k3_err(err, "%s: out of memory", path);
done:
    json_decref(root);
    return rc;
}

/* Both files are needed: the model's ids above n_base only make sense with
 * the special names, and chat framing needs them. */
k3_tokenizer *k3_tokenizer_load(const char *dir, k3_error *err)
{
    size_t plen = strlen(dir) + 32, vocab_len = 0, config_len = 0;
    char *path = malloc(plen), *vocab = NULL, *config = NULL;
    k3_tokenizer *t = NULL;
    if (!path) {
        k3_err(err, "%s: out of memory", dir);
        return NULL;
    }
    snprintf(path, plen, "%s/tiktoken.model", dir);
    if ((vocab = read_whole_file(path, K3_MAX_TOKENIZER_BYTES, &vocab_len, err))) {
        snprintf(path, plen, "%s/tokenizer_config.json", dir);
        if ((config = read_whole_file(path, K3_MAX_CONFIG_BYTES, &config_len, err)))
            t = k3_tokenizer_parse(vocab, vocab_len, config, config_len, dir, err);
    }
    free(vocab);
    free(config);
    free(path);
    return t;
}

/* The parsing itself, from memory, so the fuzzer and the loader run the same
 * code without a file per input. */
k3_tokenizer *k3_tokenizer_parse(const char *vocab, size_t vocab_len, const char *config,
                                 size_t config_len, const char *dir, k3_error *err)
{
    k3_tokenizer *t = calloc(1, sizeof *t);
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    if (!t || !path) {
        k3_err(err, "%s: out of memory", dir);
        free(t);
        free(path);
        return NULL;
    }
    snprintf(path, plen, "%s/tiktoken.model", dir);
    int ok = load_vocab(t, vocab, vocab_len, path, err) == 0;
    free(path);
    if (ok) ok = k3_tokenizer_parse_specials(t, config, config_len, dir, err) == 0;
    if (ok) ok = (t->pretok = k3_pretok_shared(err)) != NULL;
    if (!ok) {
        k3_tokenizer_free(t);
        return NULL;
    }
    return t;
}

/* See k3_tokenizer.h: the second half of k3_tokenizer_parse on its own. */
int k3_tokenizer_parse_specials(k3_tokenizer *t, const char *config, size_t config_len, const char *dir,
                                k3_error *err)
{
    size_t plen = strlen(dir) + 32;
    char *path = malloc(plen);
    if (!path) return k3_err(err, "%s: out of memory", dir);
    snprintf(path, plen, "%s/tokenizer_config.json", dir);
    int rc = load_specials(t, config, config_len, path, err);
    free(path);
    return rc;
}

/* See tokenizer_build.h: the same tokenizer as k3_tokenizer_parse from
 * arrays (a GGUF's vocabulary), through the same duplicate, single-byte and
 * special-table checks, with ids in messages where the file path had lines. */
k3_tokenizer *k3_tokenizer_from_arrays(const k3_vocab_arrays *v, const char *what, k3_error *err)
{
    if (v->n_base < 1 || v->n_base > K3_TOKENIZER_MAX_BASE) {
        k3_err(err, "%s: %d base tokens (expected 1..%d)", what, v->n_base, K3_TOKENIZER_MAX_BASE);
        return NULL;
    }
    if (v->n_names < 0 || v->n_names > K3_MAX_SPECIAL) {
        k3_err(err, "%s: %d special tokens (at most %d)", what, v->n_names, K3_MAX_SPECIAL);
        return NULL;
    }
    size_t n = (size_t)v->n_base;
    for (size_t r = 0; r < n; r++)
        if (v->offsets[r + 1] <= v->offsets[r] || v->offsets[r + 1] - v->offsets[r] > UINT32_MAX) {
            k3_err(err, "%s: token %zu is empty", what, r);
            return NULL;
        }
    k3_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        k3_err(err, "%s: out of memory", what);
        return NULL;
    }
    size_t total = v->offsets[n] - v->offsets[0];
    t->n_base = v->n_base;
    t->arena = malloc(total ? total : 1);
    t->tok_off = calloc(n, sizeof *t->tok_off);
    t->tok_len = calloc(n, sizeof *t->tok_len);
    if (!t->arena || !t->tok_off || !t->tok_len || k3_strtab_init(&t->ranks, n)) goto oom;
    memcpy(t->arena, v->bytes + v->offsets[0], total);
    for (size_t r = 0; r < n; r++) {
        size_t len = v->offsets[r + 1] - v->offsets[r];   /* 1..UINT32_MAX: checked above */
        t->tok_off[r] = v->offsets[r] - v->offsets[0];
        t->tok_len[r] = (uint32_t)len;
        int dup = rank_insert(t, (int)r);
        if (dup >= 0) {
            k3_err(err, "%s: token %zu has the same bytes as token %d", what, r, dup);
            goto fail;
        }
        if (len > t->max_base_bytes) t->max_base_bytes = len;
    }
    if (find_byte_ranks(t, what, err)) goto fail;
    t->max_token_bytes = t->max_base_bytes;
    t->n_special = v->n_names > K3_N_SPECIAL ? v->n_names : K3_N_SPECIAL;
    t->special = calloc((size_t)t->n_special, sizeof *t->special);
    t->special_len = calloc((size_t)t->n_special, sizeof *t->special_len);
    if (!t->special || !t->special_len) goto oom;
    for (int s = 0; s < v->n_names; s++) {
        const char *name = v->special_names[s];
        if (!name) continue;
        if (!*name) {
            k3_err(err, "%s: special token %d has an empty name", what, t->n_base + s);
            goto fail;
        }
        if (!(t->special[s] = strdup(name))) goto oom;
    }
    if (finish_specials(t, what, err)) goto fail;
    if (!(t->pretok = k3_pretok_shared(err))) goto fail;
    return t;
oom:
    k3_err(err, "%s: out of memory", what);
fail:
    k3_tokenizer_free(t);
    return NULL;
}

/* See tokenizer_build.h: the rank table's lookup, for checking a file's
 * merges against the ranks. */
int k3_tokenizer_rank(const k3_tokenizer *t, const uint8_t *bytes, size_t len)
{
    return rank_of(t, bytes, len);
}

/* Safe on a half-loaded tokenizer (load failures end here). */
void k3_tokenizer_free(k3_tokenizer *t)
{
    if (!t) return;
    free(t->arena);
    free(t->tok_off);
    free(t->tok_len);
    k3_strtab_free(&t->ranks);
    for (int s = 0; t->special && s < t->n_special; s++) free(t->special[s]);
    free(t->special);
    free(t->special_len);
    free(t);
}

/* Sizes callers need: base ranks, all ids, longest token (for detok buffers). */
int k3_tokenizer_n_base(const k3_tokenizer *t) { return t->n_base; }
int k3_tokenizer_n_vocab(const k3_tokenizer *t) { return t->n_base + t->n_special; }
size_t k3_tokenizer_max_token_bytes(const k3_tokenizer *t) { return t->max_token_bytes; }

/* Linear over the special names (258 in shipped models): called a handful of
 * times per chat render. */
int k3_tokenizer_special_id(const k3_tokenizer *t, const char *text)
{
    for (int s = 0; s < t->n_special; s++)
        if (!strcmp(t->special[s], text)) return t->n_base + s;
    return -1;
}

/* Base ids map to their bytes, special ids to their names: tiktoken decodes
 * a special token as its text. */
const uint8_t *k3_tokenizer_token_bytes(const k3_tokenizer *t, int id, size_t *len)
{
    if (id >= 0 && id < t->n_base) {
        *len = t->tok_len[id];
        return t->arena + t->tok_off[id];
    }
    if (id >= t->n_base && id < t->n_base + t->n_special) {
        *len = t->special_len[id - t->n_base];
        return (const uint8_t *)t->special[id - t->n_base];
    }
    *len = 0;
    return NULL;
}

/* -------------------------------------------------------------------- BPE */

/* Per-encode scratch for the merge heap, grown to the longest piece. */
typedef struct {
    int32_t *next, *prev;
    uint32_t *stamp;
    struct heap_item { int32_t rank, pos; uint32_t stamp; } *heap;
    size_t cap, heap_n;
} bpe_scratch;

/* Heap order: rank first, then position (leftmost wins ties). */
static int heap_less(const struct heap_item *a, const struct heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

/* Min-heap on (rank, position): the lowest rank wins and, among equal ranks,
 * the leftmost pair, exactly tiktoken's _byte_pair_merge choice. */
static void heap_push(bpe_scratch *b, int32_t rank, int32_t pos, uint32_t stamp)
{
    size_t i = b->heap_n++;
    b->heap[i] = (struct heap_item){rank, pos, stamp};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&b->heap[i], &b->heap[p])) break;
        struct heap_item tmp = b->heap[i]; b->heap[i] = b->heap[p]; b->heap[p] = tmp;
        i = p;
    }
}

/* Remove and return the minimum entry (caller checks heap_n > 0). */
static struct heap_item heap_pop(bpe_scratch *b)
{
    struct heap_item top = b->heap[0];
    b->heap[0] = b->heap[--b->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < b->heap_n && heap_less(&b->heap[l], &b->heap[m])) m = l;
        if (r < b->heap_n && heap_less(&b->heap[r], &b->heap[m])) m = r;
        if (m == i) break;
        struct heap_item tmp = b->heap[i]; b->heap[i] = b->heap[m]; b->heap[m] = tmp;
        i = m;
    }
    return top;
}

/* Room for a piece of n bytes: each merge pushes at most two heap entries. */
static int scratch_reserve(bpe_scratch *b, size_t n)
{
    if (n <= b->cap) return 0;
    size_t cap = n < 64 ? 64 : n;
    int32_t *next = realloc(b->next, (cap + 1) * sizeof *next);
    if (next) b->next = next;
    int32_t *prev = realloc(b->prev, (cap + 1) * sizeof *prev);
    if (prev) b->prev = prev;
    uint32_t *stamp = realloc(b->stamp, (cap + 1) * sizeof *stamp);
    if (stamp) b->stamp = stamp;
    struct heap_item *heap = realloc(b->heap, 3 * cap * sizeof *heap);
    if (heap) b->heap = heap;
    if (!next || !prev || !stamp || !heap) return -1;
    b->cap = cap;
    return 0;
}

/* Rank of the pair starting at part `pos` (the part and its successor). */
static int32_t pair_rank(const k3_tokenizer *t, const bpe_scratch *b, const uint8_t *p,
                         size_t n, int32_t pos)
{
    int32_t mid = b->next[pos];
    if ((size_t)mid >= n) return -1;
    int32_t end = b->next[mid];
    return rank_of(t, p + pos, (size_t)(end - pos));
}

/* Byte-level BPE of one pre-token: repeatedly merge the adjacent pair whose
 * concatenation has the lowest rank. O(n log n) with lazy heap deletion, so
 * a 25,000-character run is not quadratic. */
static int bpe_piece(const k3_tokenizer *t, bpe_scratch *b, const uint8_t *p, size_t n, id_vec *out)
{
    if (n == 1) return vec_push(out, t->byte_rank[p[0]]);
    int whole = rank_of(t, p, n);
    if (whole >= 0) return vec_push(out, whole);
    if (scratch_reserve(b, n)) return -1;
    b->heap_n = 0;
    for (size_t i = 0; i <= n; i++) {
        b->next[i] = (int32_t)i + 1;
        b->prev[i] = (int32_t)i - 1;
        b->stamp[i] = 0;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int32_t r = rank_of(t, p + i, 2);
        if (r >= 0) heap_push(b, r, (int32_t)i, 0);
    }
    while (b->heap_n > 0) {
        struct heap_item it = heap_pop(b);
        if (b->stamp[it.pos] != it.stamp || b->prev[it.pos] == -2) continue;   /* stale */
        int32_t i = it.pos, j = b->next[i];
        b->next[i] = b->next[j];
        if ((size_t)b->next[j] < n) b->prev[b->next[j]] = i;
        b->prev[j] = -2;                     /* j is merged away */
        int32_t r = pair_rank(t, b, p, n, i);
        b->stamp[i]++;
        if (r >= 0) heap_push(b, r, i, b->stamp[i]);
        int32_t k = b->prev[i];
        if (k >= 0) {
            r = pair_rank(t, b, p, n, k);
            b->stamp[k]++;
            if (r >= 0) heap_push(b, r, k, b->stamp[k]);
        }
    }
    for (size_t i = 0; i < n; i = (size_t)b->next[i]) {
        int r = rank_of(t, p + i, (size_t)b->next[i] - i);
        if (r < 0 || vec_push(out, r)) return -1; /* r < 0 impossible: parts are ranked */
    }
    return 0;
}

/* ----------------------------------------------------------------- encode */

typedef struct {
    const k3_tokenizer *tok;
    bpe_scratch scratch;
    id_vec out;
    int allow_special;
    k3_error *err;
} encode_state;

/* k3_pretok_split callback: one regex piece through BPE. */
static int encode_piece(void *ud, const char *piece, size_t len)
{
    encode_state *st = ud;
    if (bpe_piece(st->tok, &st->scratch, (const uint8_t *)piece, len, &st->out)) {
        k3_err(st->err, "tokenizer: out of memory");
        return -1;
    }
    return 0;
}

/* Leftmost special-token occurrence at or after `from` (longest name wins
 * at one position); returns its start or len. */
static size_t find_special(const k3_tokenizer *t, const char *s, size_t len, size_t from, int *slot)
{
    for (size_t i = from; i < len; i++) {
        if (!t->special_first[(uint8_t)s[i]]) continue;
        size_t best_len = 0;
        for (int q = 0; q < t->n_special; q++) {
            size_t n = t->special_len[q];
            if (n > best_len && n <= len - i && !memcmp(s + i, t->special[q], n)) {
                best_len = n;
                *slot = q;
            }
        }
        if (best_len) return i;
    }
    return len;
}

/* k3_pretok_chunks callback: tiktoken's encode() on one chunk - split at
 * special tokens (when allowed), the regex on the text between them. */
static int encode_chunk(void *ud, const char *s, size_t len)
{
    encode_state *st = ud;
    size_t pos = 0;
    while (pos < len) {
        int slot = -1;
        size_t end = st->allow_special ? find_special(st->tok, s, len, pos, &slot) : len;
        if (end > pos) {
            int rc = k3_pretok_split(st->tok->pretok, s + pos, end - pos, encode_piece, st,
                                     st->err);
            if (rc) return rc;
        }
        if (end == len) break;
        if (vec_push(&st->out, st->tok->n_base + slot)) {
            k3_err(st->err, "tokenizer: out of memory");
            return -1;
        }
        pos = end + st->tok->special_len[slot];
    }
    return 0;
}

/* Validate once (so PCRE2 can skip its own per-call check, which would make
 * long texts quadratic), then chunk, split at specials, regex, BPE. */
int *k3_tokenizer_encode(const k3_tokenizer *t, const char *text, size_t len,
                         int allow_special, int *n_out, k3_error *err)
{
    size_t bad = k3_utf8_invalid_at(text, len);
    if (bad < len) {
        k3_err(err, "invalid UTF-8 at byte %zu", bad);
        return NULL;
    }
    encode_state st = {.tok = t, .allow_special = allow_special, .err = err};
    int rc = k3_pretok_chunks(text, len, encode_chunk, &st);
    free(st.scratch.next);
    free(st.scratch.prev);
    free(st.scratch.stamp);
    free(st.scratch.heap);
    if (rc == 0 && st.out.n > INT_MAX) {
        k3_err(err, "tokenizer: text too long");
        rc = -1;
    }
    if (rc == 0 && !st.out.ids && !(st.out.ids = malloc(sizeof(int)))) {
        k3_err(err, "tokenizer: out of memory");
        rc = -1;
    }
    if (rc) {
        free(st.out.ids);
        return NULL;
    }
    *n_out = (int)st.out.n;
    return st.out.ids;
}

/* ----------------------------------------------------------------- decode */

/* Copy `n` bytes if they fit; decoders never write past the caller's buffer. */
static size_t emit(char *out, size_t outcap, size_t w, const void *src, size_t n)
{
    if (w + n > outcap) return w;
    memcpy(out + w, src, n);
    return w + n;
}

/* Replacement-decode s; a valid-but-incomplete tail is either replaced
 * (final) or left for the caller (*held = its length). */
static size_t decode_bytes(const uint8_t *s, size_t len, int final, char *out, size_t outcap,
                           size_t w, size_t *held)
{
    size_t i = 0;
    *held = 0;
    while (i < len) {
        size_t n;
        k3_utf8_kind kind = k3_utf8_next(s + i, len - i, &n);
        if (kind == K3_UTF8_OK) {
            w = emit(out, outcap, w, s + i, n);
        } else if (kind == K3_UTF8_BAD || final) {
            w = emit(out, outcap, w, K3_UTF8_REPLACEMENT, 3);
        } else {
            *held = n;
            break;
        }
        i += n;
    }
    return w;
}

/* NUL-terminated convenience form for callers that only want a C string. */
char *k3_tokenizer_decode(const k3_tokenizer *t, const int *ids, int n)
{
    size_t len;
    return k3_tokenizer_decode_len(t, ids, n, &len);
}

/* Concatenate all token bytes first, then replacement-decode once, so a
 * character split across tokens decodes as in Python. */
char *k3_tokenizer_decode_len(const k3_tokenizer *t, const int *ids, int n, size_t *len_out)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        total += k3_tokenizer_token_bytes(t, ids[i], &len) ? len : 3;
    }
    uint8_t *bytes = malloc(total + 1);
    size_t outcap = total * 3 + 1;
    char *out = malloc(outcap);
    if (!bytes || !out) {
        free(bytes);
        free(out);
        return NULL;
    }
    size_t w = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const uint8_t *b = k3_tokenizer_token_bytes(t, ids[i], &len);
        if (!b) { b = (const uint8_t *)K3_UTF8_REPLACEMENT; len = 3; }   /* unknown id */
        memcpy(bytes + w, b, len);
        w += len;
    }
    size_t held;
    size_t o = decode_bytes(bytes, w, 1, out, outcap - 1, 0, &held);
    out[o] = 0;
    *len_out = o;
    free(bytes);
    return out;
}

/* A fresh stream: nothing pending. */
void k3_detok_init(k3_detok *d, const k3_tokenizer *t)
{
    d->tok = t;
    d->n_pending = 0;
}

/* Streaming: characters that started in earlier tokens are finished first
 * from a small head buffer (pending bytes + the token's first 4 bytes);
 * the rest of the token is decoded in place; an incomplete tail is kept. */
size_t k3_detok_push(k3_detok *d, int id, char *out, size_t outcap)
{
    size_t len;
    const uint8_t *b = k3_tokenizer_token_bytes(d->tok, id, &len);
    if (!b) { b = (const uint8_t *)K3_UTF8_REPLACEMENT; len = 3; }
    size_t w = 0, i = 0;
    if (d->n_pending > 0) {
        uint8_t head[8];
        size_t np = (size_t)d->n_pending, take = len < 4 ? len : 4, hl = np + take, p = 0;
        memcpy(head, d->pending, np);
        memcpy(head + np, b, take);
        d->n_pending = 0;
        while (p < np) {
            size_t n;
            k3_utf8_kind kind = k3_utf8_next(head + p, hl - p, &n);
            if (kind == K3_UTF8_SHORT) {            /* token too short to finish it */
                memcpy(d->pending, head + p, n);
                d->n_pending = (int)n;
                return w;
            }
            if (kind == K3_UTF8_OK) w = emit(out, outcap, w, head + p, n);
            else w = emit(out, outcap, w, K3_UTF8_REPLACEMENT, 3);
            p += n;
        }
        i = p - np;
    }
    size_t held;
    w = decode_bytes(b + i, len - i, 0, out, outcap, w, &held);
    if (held) {
        memcpy(d->pending, b + len - held, held);
        d->n_pending = (int)held;
    }
    return w;
}

/* End of stream: a held incomplete character can never complete, so it
 * becomes one U+FFFD (as Python decodes a truncated tail). */
size_t k3_detok_flush(k3_detok *d, char *out, size_t outcap)
{
    size_t held, w = decode_bytes(d->pending, (size_t)d->n_pending, 1, out, outcap, 0, &held);
    d->n_pending = 0;
    return w;
}

/* ------------------------------------------------------------------- chat */

/* Append one special token by name; the framing names must exist. */
static int push_special(const k3_tokenizer *t, id_vec *v, const char *name, k3_error *err)
{
    int id = k3_tokenizer_special_id(t, name);
    if (id < 0) {
        k3_err(err, "tokenizer_config.json: no special token %s for the chat framing", name);
        return -1;
    }
    if (vec_push(v, id)) {
        k3_err(err, "tokenizer: out of memory");
        return -1;
    }
    return 0;
}

/* Append ordinary text (never special tokens: users cannot inject framing). */
static int push_text(const k3_tokenizer *t, id_vec *v, const char *text, k3_error *err)
{
    int n;
    int *ids = k3_tokenizer_encode(t, text, strlen(text), 0, &n, err);
    if (!ids) return -1;
    for (int i = 0; i < n; i++)
        if (vec_push(v, ids[i])) {
            free(ids);
            k3_err(err, "tokenizer: out of memory");
            return -1;
        }
    free(ids);
    return 0;
}

/* One turn header: <|im_X|>ROLE<|im_middle|>. */
static int push_header(const k3_tokenizer *t, id_vec *v, const char *start, const char *role,
                       k3_error *err)
{
    if (push_special(t, v, start, err)) return -1;
    if (push_text(t, v, role, err)) return -1;
    return push_special(t, v, "<|im_middle|>", err);
}

/* K2 framing (docs/MODEL.md, "Tokenizer and chat format"): <|im_X|>ROLE<|im_middle|>CONTENT<|im_end|> per
 * message, role names as ordinary text, tool turns under <|im_system|>. */
int *k3_chat_render_kimi(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                         int add_generation_prompt, int *n_out, k3_error *err)
{
    id_vec v = {0};
    for (int m = 0; m < n_msgs; m++) {
        const char *role = msgs[m].role ? msgs[m].role : "";
        const char *start;
        if (!strcmp(role, "system") || !strcmp(role, "tool")) start = "<|im_system|>";
        else if (!strcmp(role, "user")) start = "<|im_user|>";
        else if (!strcmp(role, "assistant")) start = "<|im_assistant|>";
        else {
            k3_err(err, "message %d: unknown role '%.40s' (expected system, user, assistant or tool)",
                     m + 1, role);
            goto fail;
        }
        if (push_header(t, &v, start, role, err)) goto fail;
        k3_error sub;
        if (push_text(t, &v, msgs[m].content ? msgs[m].content : "", &sub)) {
            k3_err(err, "message %d: %s", m + 1, sub.msg);
            goto fail;
        }
        if (push_special(t, &v, "<|im_end|>", err)) goto fail;
    }
    if (add_generation_prompt && push_header(t, &v, "<|im_assistant|>", "assistant", err))
        goto fail;
    if (!v.ids && !(v.ids = malloc(sizeof(int)))) {
        k3_err(err, "tokenizer: out of memory");
        goto fail;
    }
    *n_out = (int)v.n;
    return v.ids;
fail:
    free(v.ids);
    return NULL;
}
