/* pretokenize.c - chunking and the Kimi pre-tokenisation regex (PCRE2). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "pretokenize.h"
#include "unicode_class.h"

/* Unicode White_Space, which is what \s means in Rust regex (tiktoken) and
 * in Python's `regex` module. PCRE2's \s differs (no U+0085; U+180E). */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
           "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] as the complement of every
 * other general category, plus Han. */
#define UPPER "[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]"
/* [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]] likewise. */
#define LOWER "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]"
#define CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"

/* The eight alternatives of docs/MODEL.md, "Tokenizer and chat format", in order. */
static const char kimi_pattern[] =
    "\\p{sc:Han}+"
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTRACTION
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*" CONTRACTION
    "|\\p{N}{1,3}"
    "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?![^" WS "])"
    "|[" WS "]+";

struct k3_pretok {
    pcre2_code *code;
};

/* Compile once per tokenizer; JIT makes 100 KB of text a few milliseconds. */
k3_pretok *k3_pretok_new(k3_error *err)
{
    int errcode;
    PCRE2_SIZE erroff;
    k3_pretok *p = calloc(1, sizeof *p);
    if (!p) {
        k3_err(err, "pre-tokenizer: out of memory");
        return NULL;
    }
    p->code = pcre2_compile((PCRE2_SPTR)kimi_pattern, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &errcode, &erroff, NULL);
    if (!p->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        k3_err(err, "pre-tokenizer regex: %s at offset %zu", (char *)msg, (size_t)erroff);
        free(p);
        return NULL;
    }
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    return p;
}

/* Accepts NULL, like free(). */
void k3_pretok_free(k3_pretok *p)
{
    if (!p) return;
    pcre2_code_free(p->code);
    free(p);
}

static k3_pretok *shared_pretok;
static k3_error shared_pretok_err;

static void compile_shared(void) { shared_pretok = k3_pretok_new(&shared_pretok_err); }

/* Compiling with JIT costs milliseconds; a process that loads many
 * tokenizers (a server, the fuzzer, the tests) pays it once. */
const k3_pretok *k3_pretok_shared(k3_error *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, compile_shared);
    if (!shared_pretok && err) *err = shared_pretok_err;
    return shared_pretok;
}

/* Like tiktoken's find_iter: each match in order; characters no alternative
 * matches (none exist for this pattern) would be skipped. */
int k3_pretok_split(const k3_pretok *p, const char *text, size_t len,
                    k3_piece_fn fn, void *ud, k3_error *err)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code, NULL);
    if (!md) {
        k3_err(err, "pre-tokenizer: out of memory");
        return -1;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t pos = 0;
    int rc = 0;
    while (pos < len) {
        int m = pcre2_match(p->code, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(m, msg, sizeof msg);
            k3_err(err, "pre-tokenizer: %s", (char *)msg);
            rc = -1;
            break;
        }
        size_t start = ov[0], end = ov[1];
        if (end <= start) { /* cannot happen (no alternative matches empty); never loop */
            size_t n;
            k3_utf8_decode_valid((const uint8_t *)text + start, &n);
            pos = start + n;
            continue;
        }
        rc = fn(ud, text + start, end - start);
        if (rc) break;
        pos = end;
    }
    pcre2_match_data_free(md);
    return rc;
}

/* tokenization_kimi.py _split_whitespaces_or_nonwhitespaces on one chunk:
 * a new piece starts where the current same-kind run would exceed the limit. */
static int split_long_runs(const char *text, size_t len, k3_piece_fn fn, void *ud)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t piece_start = 0, run_chars = 0, i = 0;
    int run_is_space = 0;
    if (len > 0) {
        size_t n;
        run_is_space = k3_unicode_is_py_space(k3_utf8_decode_valid(s, &n));
    }
    while (i < len) {
        size_t n;
        int is_space = k3_unicode_is_py_space(k3_utf8_decode_valid(s + i, &n));
        if (is_space != run_is_space) {
            run_chars = 1;
            run_is_space = is_space;
        } else if (++run_chars > K3_PRETOK_MAX_RUN_CHARS) {
            int rc = fn(ud, text + piece_start, i - piece_start);
            if (rc) return rc;
            piece_start = i;
            run_chars = 1;
        }
        i += n;
    }
    return fn(ud, text + piece_start, len - piece_start);
}

/* The outer 400,000-code-point loop of tokenization_kimi.py encode(). */
int k3_pretok_chunks(const char *text, size_t len, k3_piece_fn fn, void *ud)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t chunk_start = 0;
    while (chunk_start < len) {
        size_t i = chunk_start, chars = 0;
        while (i < len && chars < K3_PRETOK_MAX_CHUNK_CHARS) {
            size_t n;
            k3_utf8_decode_valid(s + i, &n);
            i += n;
            chars++;
        }
        int rc = split_long_runs(text + chunk_start, i - chunk_start, fn, ud);
        if (rc) return rc;
        chunk_start = i;
    }
    return 0;
}
