/* gguf_vocab.c - k3's tokenizer from the vocabulary a GGUF carries
 * (gguf_vocab.h; docs/MODEL.md, "The vocabulary in a GGUF"). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include "gguf.h"
#include "gguf_checkpoint.h"
#include "gguf_vocab.h"
#include "k3_tokenizer.h"
#include "tokenizer_build.h"

/* llama.cpp's token types (tokenizer.ggml.token_type). */
enum { TOKEN_NORMAL = 1, TOKEN_CONTROL = 3, TOKEN_UNUSED = 5 };

#define MAX_TOKEN_BYTES 4096   /* a bound for one token or special name, far above any real one */

/* A required string key equal to `want`: the tokenizer kind and the
 * pre-tokenizer are the two things k3 does not read from the file but knows
 * (Kimi's byte-level BPE and regex), so anything else is refused. */
static int expect_string(const gguf_part *part, const char *key, const char *want, const char *what,
                         k3_error *err)
{
    const gguf_kv *kv = gguf_part_find_kv(part, key);
    const char *s;
    size_t len;
    if (!kv) return k3_err(err, "%s: no %s (the file carries no vocabulary k3 reads)", what, key);
    if (gguf_kv_string(kv, &s, &len))
        return k3_err(err, "%s: %s is a %s, not a string", what, key, gguf_value_type_name(kv->type));
    if (len == strlen(want) && !memcmp(s, want, len)) return 0;
    char shown[41];   /* the file's value, kept to one printable line */
    size_t n = len < sizeof shown - 1 ? len : sizeof shown - 1;
    for (size_t i = 0; i < n; i++) shown[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    shown[n] = 0;
    return k3_err(err, "%s: %s is \"%s\"; k3 reads only \"%s\" (Kimi's tiktoken vocabulary)", what, key, shown,
                  want);
}

/* A required array key of `want` element kind (strings or numbers). */
static const gguf_kv *expect_array(const gguf_part *part, const char *key, int of_strings, const char *what,
                                   k3_error *err)
{
    const gguf_kv *kv = gguf_part_find_kv(part, key);
    if (!kv) {
        k3_err(err, "%s: no %s", what, key);
        return NULL;
    }
    int strings = kv->type == GGUF_ARRAY && kv->array_type == GGUF_STRING;
    int numbers = kv->type == GGUF_ARRAY && kv->array_type != GGUF_STRING && kv->array_type != GGUF_ARRAY &&
                  kv->array_type != GGUF_F32 && kv->array_type != GGUF_F64;
    if (of_strings ? !strings : !numbers) {
        k3_err(err, "%s: %s is not an array of %s", what, key, of_strings ? "strings" : "integers");
        return NULL;
    }
    return kv;
}

/* The token types decide the layout: ids 0..n_base-1 normal (the BPE
 * ranks), then only control tokens (the specials, by name) and unused ones
 * ("[PADi]": an id with no token). Sets *n_base and *n_names (the special
 * slots up to the last control token). */
static int read_layout(const gguf_kv *types, uint64_t n_tokens, int *n_base, int *n_names, const char *what,
                       k3_error *err)
{
    uint64_t base = 0, last_control = 0;
    int seen_control = 0;
    for (uint64_t i = 0; i < n_tokens; i++) {
        double d;
        gguf_kv_array_number(types, i, &d);   /* an integer array of n_tokens: checked by the caller */
        int type = d == TOKEN_NORMAL ? TOKEN_NORMAL : d == TOKEN_CONTROL ? TOKEN_CONTROL
                                                    : d == TOKEN_UNUSED ? TOKEN_UNUSED : 0;
        if (type == TOKEN_NORMAL && base == i) {
            base++;
            continue;
        }
        if (type == TOKEN_NORMAL || !type)
            return k3_err(err, "%s: tokenizer.ggml.token_type[%llu] is %.0f after the specials start at id "
                          "%llu; k3 reads normal tokens (1) that are tiktoken ranks, then control (3) and "
                          "unused (5) ones", what, (unsigned long long)i, d, (unsigned long long)base);
        if (type == TOKEN_CONTROL) {
            seen_control = 1;
            last_control = i;
        }
    }
    if (base < 256 || base > K3_TOKENIZER_MAX_BASE)
        return k3_err(err, "%s: %llu normal tokens before the first special (expected 256..%d: every byte "
                      "and the merges)", what, (unsigned long long)base, K3_TOKENIZER_MAX_BASE);
    if (seen_control && last_control - base >= K3_TOKENIZER_MAX_SPECIALS)
        return k3_err(err, "%s: control token %llu is past the special range %llu..%llu", what,
                      (unsigned long long)last_control, (unsigned long long)base,
                      (unsigned long long)base + K3_TOKENIZER_MAX_SPECIALS - 1);
    *n_base = (int)base;
    *n_names = seen_control ? (int)(last_control - base + 1) : 0;
    return 0;
}

/* The base tokens' bytes, decoded from their spelling into one buffer. */
static int decode_base_tokens(const gguf_kv *tokens, int n_base, uint8_t **bytes_out, size_t **offsets_out,
                              const char *what, k3_error *err)
{
    size_t total = 0;
    for (int i = 0; i < n_base; i++) {
        const char *s;
        size_t len;
        gguf_kv_array_string(tokens, (uint64_t)i, &s, &len);
        total += len;   /* each string lies inside the header: no overflow */
    }
    uint8_t *bytes = malloc(total ? total : 1);
    size_t *offsets = malloc(((size_t)n_base + 1) * sizeof *offsets);
    if (!bytes || !offsets) {
        free(bytes);
        free(offsets);
        return k3_err(err, "%s: out of memory", what);
    }
    size_t w = 0;
    for (int i = 0; i < n_base; i++) {
        const char *s;
        size_t len;
        gguf_kv_array_string(tokens, (uint64_t)i, &s, &len);
        long n = len <= MAX_TOKEN_BYTES * 2 ? k3_byte_spelling_decode(s, len, bytes + w) : -1;
        if (n <= 0) {
            free(bytes);
            free(offsets);
            return k3_err(err, "%s: tokenizer.ggml.tokens[%d] is %s (%zu bytes)", what, i,
                          len == 0 ? "empty" : len > MAX_TOKEN_BYTES * 2 ? "too long"
                                               : "not in GPT-2's byte-to-unicode spelling", len);
        }
        offsets[i] = w;
        w += (size_t)n;
    }
    offsets[n_base] = w;
    *bytes_out = bytes;
    *offsets_out = offsets;
    return 0;
}

/* The special slots' names: control tokens as written (the converter
 * writes a special's text itself, not its byte spelling); unused slots stay
 * unnamed, and get tiktoken's reserved name as in tokenizer_config.json's
 * absence. */
static const char **special_names(const gguf_kv *tokens, const gguf_kv *types, int n_base, int n_names,
                                  char **store, const char *what, k3_error *err)
{
    const char **names = calloc((size_t)n_names + 1, sizeof *names);
    size_t total = 0;
    for (int s = 0; s < n_names; s++) {
        const char *str;
        size_t len;
        gguf_kv_array_string(tokens, (uint64_t)(n_base + s), &str, &len);
        total += len + 1;
    }
    char *buf = malloc(total + 1);
    if (!names || !buf) {
        free(names);
        free(buf);
        k3_err(err, "%s: out of memory", what);
        return NULL;
    }
    size_t w = 0;
    for (int s = 0; s < n_names; s++) {
        double d;
        const char *str;
        size_t len;
        gguf_kv_array_number(types, (uint64_t)(n_base + s), &d);
        if (d != TOKEN_CONTROL) continue;
        gguf_kv_array_string(tokens, (uint64_t)(n_base + s), &str, &len);
        if (len == 0 || len > MAX_TOKEN_BYTES || memchr(str, 0, len)) {
            k3_err(err, "%s: special token %d's name is %s", what, n_base + s,
                   len == 0 ? "empty" : len > MAX_TOKEN_BYTES ? "too long" : "not text (holds a NUL)");
            free(names);
            free(buf);
            return NULL;
        }
        memcpy(buf + w, str, len);
        buf[w + len] = 0;
        names[s] = buf + w;
        w += len + 1;
    }
    *store = buf;
    return names;
}

/* The merges are redundant for k3 (ids are ranks) but say whether they
 * are: the converter writes, in rank order, each token's last merge "A B"
 * under lower ranks. So every merge must join two tokens into a token of a
 * higher rank than both, the results' ranks increasing along the list. A
 * vocabulary whose ids were renumbered, or merges from another tokenizer,
 * fails here. Every merge is checked (about 160,000 lookups for Kimi). */
static int check_merges(const gguf_part *part, const k3_tokenizer *t, const char *what, k3_error *err)
{
    const gguf_kv *merges = expect_array(part, "tokenizer.ggml.merges", 1, what, err);
    if (!merges) return -1;
    int n_base = k3_tokenizer_n_base(t);
    if (merges->count > (uint64_t)n_base - 256)   /* at most one per token of two or more bytes */
        return k3_err(err, "%s: %llu merges for %d tokens (at most %d)", what, (unsigned long long)merges->count,
                      n_base, n_base - 256);
    uint8_t *buf = malloc(2 * MAX_TOKEN_BYTES + 2);
    if (!buf) return k3_err(err, "%s: out of memory", what);
    int rc = 0, last = -1;
    for (uint64_t m = 0; m < merges->count && rc == 0; m++) {
        const char *s, *space;
        size_t len;
        gguf_kv_array_string(merges, m, &s, &len);
        space = len <= 2 * MAX_TOKEN_BYTES ? memchr(s, ' ', len) : NULL;
        long a = space ? k3_byte_spelling_decode(s, (size_t)(space - s), buf) : -1;
        long b = a > 0 ? k3_byte_spelling_decode(space + 1, len - (size_t)(space - s) - 1, buf + a) : -1;
        int ra = a > 0 ? k3_tokenizer_rank(t, buf, (size_t)a) : -1;
        int rb = b > 0 ? k3_tokenizer_rank(t, buf + a, (size_t)b) : -1;
        int rab = ra >= 0 && rb >= 0 ? k3_tokenizer_rank(t, buf, (size_t)(a + b)) : -1;
        if (rab < 0)
            rc = k3_err(err, "%s: tokenizer.ggml.merges[%llu] is not two tokens joining into a token", what,
                        (unsigned long long)m);
        else if (rab <= ra || rab <= rb || rab <= last)
            rc = k3_err(err, "%s: tokenizer.ggml.merges[%llu] makes token %d from %d and %d after token %d: "
                        "the ids are not the tiktoken ranks k3 merges by", what, (unsigned long long)m, rab,
                        ra, rb, last);
        last = rab;
    }
    free(buf);
    return rc;
}

/* The whole reading, from one part's key/values so the fuzzer can run it on
 * a header alone: the kind, the layout the types give, the tokens decoded,
 * the tokenizer built, then the merges checked against its ranks. */
k3_tokenizer *gguf_tokenizer_from_part(const gguf_part *part, const char *what, k3_error *err)
{
    if (expect_string(part, "tokenizer.ggml.model", "gpt2", what, err) ||
        expect_string(part, "tokenizer.ggml.pre", "kimi-k2", what, err))
        return NULL;
    const gguf_kv *tokens = expect_array(part, "tokenizer.ggml.tokens", 1, what, err);
    const gguf_kv *types = tokens ? expect_array(part, "tokenizer.ggml.token_type", 0, what, err) : NULL;
    if (!types) return NULL;
    if (types->count != tokens->count) {
        k3_err(err, "%s: %llu token types for %llu tokens", what, (unsigned long long)types->count,
               (unsigned long long)tokens->count);
        return NULL;
    }
    int n_base = 0, n_names = 0;
    if (read_layout(types, tokens->count, &n_base, &n_names, what, err)) return NULL;
    uint8_t *bytes = NULL;
    size_t *offsets = NULL;
    char *name_store = NULL;
    const char **names = NULL;
    k3_tokenizer *t = NULL;
    if (decode_base_tokens(tokens, n_base, &bytes, &offsets, what, err) == 0 &&
        (names = special_names(tokens, types, n_base, n_names, &name_store, what, err))) {
        k3_vocab_arrays v = {.n_base = n_base, .bytes = bytes, .offsets = offsets, .n_names = n_names,
                             .special_names = names};
        t = k3_tokenizer_from_arrays(&v, what, err);
    }
    free(bytes);
    free(offsets);
    free(names);
    free(name_store);
    if (t && check_merges(part, t, what, err)) {
        k3_tokenizer_free(t);
        t = NULL;
    }
    return t;
}

/* The model's metadata, hence its vocabulary, is in the first part of a
 * split set. */
k3_tokenizer *gguf_tokenizer_open(const gguf_file *g, const char *what, k3_error *err)
{
    if (g->n_parts < 1) {
        k3_err(err, "%s: no GGUF part", what);
        return NULL;
    }
    return gguf_tokenizer_from_part(&g->parts[0], what, err);
}

/* include/k3_tokenizer.h: open the GGUF (a file, a split set, a folder) for
 * its vocabulary alone (k3 tokenize). */
k3_tokenizer *k3_tokenizer_load_gguf(const char *path, k3_error *err)
{
    gguf_file g;
    if (gguf_open(&g, path, err)) return NULL;
    k3_tokenizer *t = gguf_tokenizer_open(&g, g.parts[0].path, err);
    gguf_close(&g);
    return t;
}

/* Where a model's tokenizer is (path: a model folder or a GGUF), the one
 * rule for model open and k3 tokenize: 1 a tiktoken.model in the folder
 * (into file: the folder), 2 the GGUF's own vocabulary (the path), 3 a pack
 * of a GGUF's tokenizer.gguf (its path), 0 none (the folder). */
static int tokenizer_source(const char *path, char *file, size_t len)
{
    char folder[3800];
    gguf_model_folder(path, folder, sizeof folder);
    snprintf(file, len, "%s/tiktoken.model", folder);
    if (access(file, F_OK) == 0) { snprintf(file, len, "%s", folder); return 1; }
    if (gguf_is_model_path(path)) { snprintf(file, len, "%s", path); return 2; }
    snprintf(file, len, "%s/tokenizer.gguf", folder);
    if (access(file, F_OK) == 0) return 3;
    snprintf(file, len, "%s", folder);
    return 0;
}

/* include/k3_tokenizer.h */
k3_tokenizer *k3_tokenizer_load_model(const char *path, k3_error *err)
{
    char file[4000];
    const int source = tokenizer_source(path, file, sizeof file);
    if (source == 2 || source == 3) return k3_tokenizer_load_gguf(file, err);
    return k3_tokenizer_load(file, err);       /* none: names the missing tiktoken.model */
}

int k3_tokenizer_model_has(const char *path)
{
    char file[4000];
    return tokenizer_source(path, file, sizeof file) != 0;
}
