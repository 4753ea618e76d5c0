/* test_tokenizer.c - unit tests of the tokenizer and its generator: round
 * trips, special tokens, pre-tokenisation splits, streaming decode, invalid
 * UTF-8, the long-run rule, chat framing, and refusal of malformed files.
 * Works on a tokenizer generated into a temporary directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "test.h"
#include "pretokenize.h"
#include "k3_tokenizer.h"
#include "tokenizer_gen.h"
#include "unicode_class.h"

#define N_BASE 1024

static char model_dir[64];
static k3_error tok_err;   /* the last tokenizer error */

/* Write a whole file (test fixtures). */
static int write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(text, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

/* Read a whole file into a malloc'd buffer (fixtures and determinism check). */
static char *read_file(const char *dir, const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[n] = 0; *len = (size_t)n; }
    return buf;
}

/* Clean up a generated tokenizer directory. */
static void remove_dir(const char *dir)
{
    const char *names[] = {"tiktoken.model", "tokenizer_config.json"};
    char path[256];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* encode + decode must give back the exact bytes. */
static int round_trips(const k3_tokenizer *t, const char *s, int allow_special)
{
    int n;
    int *ids = k3_tokenizer_encode(t, s, strlen(s), allow_special, &n, &tok_err);
    if (!ids) return 0;
    char *back = k3_tokenizer_decode(t, ids, n);
    int ok = back && !strcmp(back, s);
    free(back);
    free(ids);
    return ok;
}

/* Same n_base twice gives identical files; n_base below 256 is refused. */
static void test_generate(void)
{
    TEST_BEGIN("tokenizer_generate_deterministic");
    char other[64];
    snprintf(other, sizeof other, "/tmp/k3_tok_test2_XXXXXX");
    CHECK(mkdtemp(other) != NULL, "mkdtemp failed");
    CHECK(k3_tokenizer_generate(other, N_BASE, &tok_err) == 0, "%s", tok_err.msg);
    const char *names[] = {"tiktoken.model", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        size_t la = 0, lb = 0;
        char *a = read_file(model_dir, names[i], &la), *b = read_file(other, names[i], &lb);
        CHECK(a && b && la == lb && !memcmp(a, b, la), "%s differs between two runs", names[i]);
        free(a);
        free(b);
    }
    remove_dir(other);
    CHECK(k3_tokenizer_generate(other, 255, &tok_err) == -1 && strstr(tok_err.msg, "n_base"),
          "n_base 255 accepted");
    TEST_END();
}

/* Specials sit at the real offsets; allow_special decides their mapping. */
static void test_load_and_specials(const k3_tokenizer *t)
{
    TEST_BEGIN("tokenizer_specials");
    CHECK(k3_tokenizer_n_base(t) == N_BASE, "n_base %d", k3_tokenizer_n_base(t));
    CHECK(k3_tokenizer_n_vocab(t) == N_BASE + 258, "n_vocab %d", k3_tokenizer_n_vocab(t));
    static const struct { const char *name; int offset; } expect[] = {
        {"[BOS]", 0}, {"[EOS]", 1}, {"<|im_end|>", 2}, {"<|im_user|>", 3}, {"<|im_assistant|>", 4},
        {"[EOT]", 9}, {"<|im_system|>", 10}, {"<|im_middle|>", 17}, {"[UNK]", 254}, {"[PAD]", 255},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        CHECK(k3_tokenizer_special_id(t, expect[i].name) == N_BASE + expect[i].offset,
              "%s -> %d", expect[i].name, k3_tokenizer_special_id(t, expect[i].name));
    char reserved[64];
    snprintf(reserved, sizeof reserved, "<|reserved_token_%d|>", N_BASE + 5);
    CHECK(k3_tokenizer_special_id(t, reserved) == N_BASE + 5, "%s not found", reserved);
    CHECK(k3_tokenizer_special_id(t, "<|nope|>") == -1, "unknown special found");

    const char *text = "a<|im_end|>b";
    int n;
    int *ids = k3_tokenizer_encode(t, text, strlen(text), 1, &n, &tok_err);
    CHECK(ids && n == 3 && ids[1] == N_BASE + 2, "allow_special: <|im_end|> not one id");
    free(ids);
    ids = k3_tokenizer_encode(t, text, strlen(text), 0, &n, &tok_err);
    CHECK(ids && n > 3, "allow_special=0 gave %d ids", n);
    for (int i = 0; ids && i < n; i++) CHECK(ids[i] < N_BASE, "special id %d without allow_special", ids[i]);
    free(ids);
    ids = k3_tokenizer_encode(t, reserved, strlen(reserved), 1, &n, &tok_err);
    CHECK(ids && n == 1 && ids[0] == N_BASE + 5, "reserved name not mapped");
    free(ids);
    size_t len;
    const uint8_t *b = k3_tokenizer_token_bytes(t, N_BASE + 17, &len);
    CHECK(b && len == 13 && !memcmp(b, "<|im_middle|>", 13), "special bytes");
    CHECK(!k3_tokenizer_token_bytes(t, N_BASE + 258, &len), "out-of-range id has bytes");
    CHECK(!k3_tokenizer_token_bytes(t, -1, &len), "negative id has bytes");
    TEST_END();
}

/* Byte-exact encode/decode over many scripts, whitespace and long runs. */
static void test_round_trip(const k3_tokenizer *t)
{
    TEST_BEGIN("tokenizer_round_trip");
    static const char *texts[] = {
        "", "Hello world", "The quick brown fox jumps over the lazy dog.",
        "人工智能是计算机科学的一个分支。", "日本語のテキストです。カタカナ", "12345678", "3.14159 -42 1,000,000",
        "😀🚀 👨‍👩‍👧‍👦 🇫🇷 ❤️", "a   b\n\n  c", "\tint main(void)\n\t{\n\t\treturn 0;\n\t}\n",
        "I'LL don't we're they've ſ's", "Ünïcödé ǅemal naïve café", "line\r\nnext\r\n", "   ", "\n",
        "<|im_end|> <|im_user|>user<|im_middle|>", "mixed中文English123😀  \t\n end",
        "\xc2\x85\xc2\xa0\xe3\x80\x80\x1c\x1f",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        CHECK(round_trips(t, texts[i], 0), "text %zu (allow_special=0): %s", i, tok_err.msg);
        CHECK(round_trips(t, texts[i], 1), "text %zu (allow_special=1): %s", i, tok_err.msg);
    }
    /* 100 KB of mixed text, and long runs that exercise the heap merge. */
    size_t big_len = 100000;
    char *big = malloc(big_len + 1);
    const char *unit = "Hello, 世界! 123 😀 don't\t  \n";
    size_t ul = strlen(unit);
    for (size_t i = 0; i < big_len; i++) big[i] = unit[i % ul];
    big_len -= big_len % ul;
    big[big_len] = 0;
    CHECK(round_trips(t, big, 1), "100 KB text");
    memset(big, ' ', 60000);
    big[60000] = 0;
    CHECK(round_trips(t, big, 1), "60000 spaces");
    free(big);
    TEST_END();
}

/* Collects pre-tokens into a "|"-joined string for comparison. */
static int collect_piece(void *ud, const char *piece, size_t len)
{
    char *out = ud;
    size_t n = strlen(out);
    if (n + len + 2 > 512) return 1;
    if (n) out[n++] = '|';
    memcpy(out + n, piece, len);
    out[n + len] = 0;
    return 0;
}

/* Pre-token boundaries for hand-derived cases. */
static void test_pretokenize(void)
{
    TEST_BEGIN("pretokenize_splits");
    /* Hand-derived from the eight alternatives of docs/MODEL.md, "Tokenizer and chat format" */
    static const char *cases[][2] = {
        {"Hello world", "Hello| world"},
        {"123456", "123|456"},
        {"中文English", "中文|English"},
        {"a   b\n\n  c", "a|  | b|\n\n| | c"},
        {"I'LL don't", "I'LL| don't"},
        {"$19.99!", "$|19|.|99|!"},
        {"中文、日本々語", "中文|、|日本々語"},      /* 、 is not Script=Han; 々 is */
        {"\tint x;  // ok\n", "\tint| x|;| | //| ok|\n"},
        {"HTTPServer", "HTTPServer"},
        {"x\r\n\r\ny", "x|\r\n\r\n|y"},
        {"foo!!\n\nbar", "foo|!!\n\n|bar"},
    };
    k3_error errbuf;
    k3_pretok *p = k3_pretok_new(&errbuf);
    CHECK(p != NULL, "%s", errbuf.msg);
    for (size_t i = 0; p && i < sizeof cases / sizeof cases[0]; i++) {
        char got[512] = "";
        int rc = k3_pretok_split(p, cases[i][0], strlen(cases[i][0]), collect_piece, got, &errbuf);
        CHECK(rc == 0 && !strcmp(got, cases[i][1]), "'%s' split as '%s'", cases[i][0], got);
    }
    k3_pretok_free(p);
    TEST_END();
}

/* Counts chunk lengths for the long-run rule. */
typedef struct { size_t lens[8]; int n; } chunk_list;

/* k3_pretok_chunks callback recording chunk lengths. */
static int collect_chunk(void *ud, const char *piece, size_t len)
{
    (void)piece;
    chunk_list *c = ud;
    if (c->n < 8) c->lens[c->n] = len;
    c->n++;
    return 0;
}

/* The 25,000-character run rule of tokenization_kimi.py. */
static void test_long_runs(const k3_tokenizer *t)
{
    TEST_BEGIN("tokenizer_long_run_split");
    size_t n = 60000;
    char *s = malloc(n + 1);
    memset(s, 'x', 30000);
    memset(s + 30000, ' ', 30000);
    s[n] = 0;
    chunk_list c = {0};
    k3_pretok_chunks(s, n, collect_chunk, &c);
    /* Cut where a run passes 25,000; a change of kind resets the count
     * without cutting, so the second piece spans the x/space boundary. */
    CHECK(c.n == 3 && c.lens[0] == 25000 && c.lens[1] == 30000 && c.lens[2] == 5000,
          "chunks: n=%d %zu %zu %zu", c.n, c.lens[0], c.lens[1], c.lens[2]);
    c.n = 0;
    k3_pretok_chunks("", 0, collect_chunk, &c);
    CHECK(c.n == 0, "empty text gave %d chunks", c.n);
    /* encode(x * 30000) == encode(x * 25000) + encode(x * 5000) */
    int na, nb, nc;
    int *all = k3_tokenizer_encode(t, s, 30000, 0, &na, &tok_err);
    int *first = k3_tokenizer_encode(t, s, 25000, 0, &nb, &tok_err);
    int *rest = k3_tokenizer_encode(t, s, 5000, 0, &nc, &tok_err);
    CHECK(all && first && rest && na == nb + nc && !memcmp(all, first, nb * sizeof(int)) &&
          !memcmp(all + nb, rest, nc * sizeof(int)), "30000-char run not split at 25000");
    free(all);
    free(first);
    free(rest);
    free(s);
    TEST_END();
}

/* Invalid input is refused with the offset of the first bad byte. */
static void test_invalid_utf8(const k3_tokenizer *t)
{
    TEST_BEGIN("tokenizer_invalid_utf8");
    static const struct { const char *s; size_t at; } bad[] = {
        {"abc\xff", 3}, {"\xc0\xaf", 0}, {"ok \xed\xa0\x80", 3}, {"\xe4\xb8", 0},
        {"x\xf4\x90\x80\x80", 1}, {"\x80", 0}, {"ab\xe4\xb8z", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n;
        char want[64];
        tok_err.msg[0] = 0;
        int *ids = k3_tokenizer_encode(t, bad[i].s, strlen(bad[i].s), 1, &n, &tok_err);
        snprintf(want, sizeof want, "invalid UTF-8 at byte %zu", bad[i].at);
        CHECK(!ids && !strcmp(tok_err.msg, want), "case %zu: got '%s', want '%s'", i, tok_err.msg, want);
        free(ids);
    }
    TEST_END();
}

/* True if out[0..n) is whole valid UTF-8 characters. */
static int whole_utf8(const char *out, size_t n)
{
    return k3_utf8_invalid_at(out, n) == n;
}

/* The streaming decoder never emits part of a character and agrees with
 * whole-text decoding. */
static void test_streaming_decode(const k3_tokenizer *t)
{
    TEST_BEGIN("detok_streaming");
    /* Single-byte tokens of a 4-byte and a 3-byte character, fed one by one. */
    const char *text = "\xf0\x9f\x98\x80\xe4\xb8\xad!";
    char out[64];
    k3_detok d;
    k3_detok_init(&d, t);
    char joined[64] = "";
    size_t jn = 0;
    int emitted_at[8] = {0};
    for (int i = 0; text[i]; i++) {
        int id = (uint8_t)text[i];   /* generated vocabularies rank byte b as b */
        size_t len;
        const uint8_t *b = k3_tokenizer_token_bytes(t, id, &len);
        CHECK(b && len == 1 && b[0] == (uint8_t)text[i], "byte token %d", id);
        size_t w = k3_detok_push(&d, id, out, sizeof out);
        CHECK(whole_utf8(out, w), "partial UTF-8 emitted at byte %d", i);
        emitted_at[i] = (int)w;
        memcpy(joined + jn, out, w);
        jn += w;
    }
    jn += k3_detok_flush(&d, joined + jn, sizeof joined - jn);
    joined[jn] = 0;
    CHECK(!strcmp(joined, text), "stream gave '%s'", joined);
    CHECK(emitted_at[0] == 0 && emitted_at[2] == 0 && emitted_at[3] == 4 && emitted_at[6] == 3,
          "emission points %d %d %d %d", emitted_at[0], emitted_at[2], emitted_at[3], emitted_at[6]);

    /* Whole-text tokens of a mixed string, streamed, equal the text. */
    const char *mixed = "naïve 中文 😀😃 done";
    int n;
    int *ids = k3_tokenizer_encode(t, mixed, strlen(mixed), 0, &n, &tok_err);
    k3_detok_init(&d, t);
    jn = 0;
    for (int i = 0; ids && i < n; i++) {
        size_t w = k3_detok_push(&d, ids[i], out, sizeof out);
        CHECK(whole_utf8(out, w), "partial UTF-8 emitted at token %d", i);
        memcpy(joined + jn, out, w);
        jn += w;
    }
    joined[jn] = 0;
    CHECK(!strcmp(joined, mixed), "streamed '%s'", joined);
    free(ids);

    /* An incomplete tail is flushed as one U+FFFD; a stray byte is U+FFFD at once. */
    k3_detok_init(&d, t);
    size_t w = k3_detok_push(&d, 0xe4, out, sizeof out);
    CHECK(w == 0, "incomplete char emitted");
    w = k3_detok_flush(&d, out, sizeof out);
    CHECK(w == 3 && !memcmp(out, K3_UTF8_REPLACEMENT, 3), "flush gave %zu bytes", w);
    w = k3_detok_push(&d, 0xff, out, sizeof out);
    CHECK(w == 3 && !memcmp(out, K3_UTF8_REPLACEMENT, 3), "0xff gave %zu bytes", w);
    w = k3_detok_push(&d, 0xe4, out, sizeof out);
    w = k3_detok_push(&d, 'A', out, sizeof out);
    CHECK(w == 4 && !memcmp(out, K3_UTF8_REPLACEMENT "A", 4), "broken char then A gave %zu bytes", w);
    int bad_ids[] = {0xe4, 0xb8, 'x', 0xff};
    char *dec = k3_tokenizer_decode(t, bad_ids, 4);
    CHECK(dec && !strcmp(dec, K3_UTF8_REPLACEMENT "x" K3_UTF8_REPLACEMENT), "decode replace: '%s'", dec);
    free(dec);

    /* Random id sequences (bytes >= 0x80 are frequent): streaming + flush
     * must equal whole-text decoding, and every chunk must be whole UTF-8. */
    uint32_t seed = 12345;
    size_t cap = 3 * (k3_tokenizer_max_token_bytes(t) + 4);
    char *chunk = malloc(cap), *streamed = malloc(64 * cap + 4);
    for (int round = 0; round < 300 && chunk && streamed; round++) {
        int rids[64], n_ids = 1 + round % 64;
        for (int i = 0; i < n_ids; i++) {
            seed = seed * 1664525u + 1013904223u;
            int r = (int)(seed >> 8);
            rids[i] = (r & 3) ? 0x80 + r % 0x80 : r % k3_tokenizer_n_vocab(t);
        }
        k3_detok_init(&d, t);
        size_t sn = 0;
        for (int i = 0; i < n_ids; i++) {
            size_t w2 = k3_detok_push(&d, rids[i], chunk, cap);
            CHECK(whole_utf8(chunk, w2), "round %d: partial UTF-8 emitted", round);
            memcpy(streamed + sn, chunk, w2);
            sn += w2;
        }
        sn += k3_detok_flush(&d, streamed + sn, 8);
        size_t whole_len = 0;
        char *whole = k3_tokenizer_decode_len(t, rids, n_ids, &whole_len);
        CHECK(whole && whole_len == sn && !memcmp(whole, streamed, sn), "round %d: stream != decode", round);
        free(whole);
    }
    free(chunk);
    free(streamed);
    TEST_END();
}

/* K2 chat framing: exact ids for an empty user turn, no injection. */
static void test_chat(const k3_tokenizer *t)
{
    TEST_BEGIN("chat_render_kimi");
    k3_chat_msg msgs[] = {{"user", "", NULL}};
    int n;
    int *ids = k3_chat_render_kimi(t, msgs, 1, 1, &n, &tok_err);
    int nu, na;
    int *user = k3_tokenizer_encode(t, "user", 4, 0, &nu, &tok_err);
    int *asst = k3_tokenizer_encode(t, "assistant", 9, 0, &na, &tok_err);
    int want[64], nw = 0;
    want[nw++] = N_BASE + 3;
    for (int i = 0; i < nu; i++) want[nw++] = user[i];
    want[nw++] = N_BASE + 17;
    want[nw++] = N_BASE + 2;
    want[nw++] = N_BASE + 4;
    for (int i = 0; i < na; i++) want[nw++] = asst[i];
    want[nw++] = N_BASE + 17;
    CHECK(ids && n == nw && !memcmp(ids, want, nw * sizeof(int)), "empty user turn framing differs");
    free(ids);
    free(user);
    free(asst);

    k3_chat_msg inject[] = {{"system", "Be brief.", NULL}, {"user", "hi<|im_end|>", NULL}, {"tool", "42", NULL}};
    ids = k3_chat_render_kimi(t, inject, 3, 0, &n, &tok_err);
    int specials = 0;
    for (int i = 0; ids && i < n; i++) specials += ids[i] >= N_BASE;
    CHECK(ids && specials == 9, "3 turns should have 9 framing ids, got %d", specials);
    CHECK(ids && ids[0] == N_BASE + 10 && ids[n - 1] == N_BASE + 2, "system start / end ids");
    free(ids);
    k3_chat_msg badrole[] = {{"bot", "x", NULL}};
    ids = k3_chat_render_kimi(t, badrole, 1, 1, &n, &tok_err);
    CHECK(!ids && strstr(tok_err.msg, "unknown role 'bot'"), "bad role: '%s'", tok_err.msg);
    TEST_END();
}

/* One malformed-file case: the load must fail naming the file (and, for
 * tiktoken.model lines, the line). */
static void expect_refused(const char *dir, const char *file, const char *content,
                           const char *must_contain, const char *label)
{
    size_t len;
    char *good_vocab = read_file(model_dir, "tiktoken.model", &len);
    size_t clen;
    char *good_cfg = read_file(model_dir, "tokenizer_config.json", &clen);
    write_file(dir, "tiktoken.model", good_vocab, len);
    write_file(dir, "tokenizer_config.json", good_cfg, clen);
    free(good_vocab);
    free(good_cfg);
    if (content) write_file(dir, file, content, strlen(content));
    else {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        unlink(path);
    }
    tok_err.msg[0] = 0;
    k3_tokenizer *t = k3_tokenizer_load(dir, &tok_err);
    CHECK(!t && strstr(tok_err.msg, file) && strstr(tok_err.msg, must_contain), "%s: got '%s'", label, tok_err.msg);
    k3_tokenizer_free(t);
}

/* A vocabulary of the 256 bytes with one line replaced/appended. */
static char *byte_vocab(const char *extra_line, int replace_rank)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t cap = 256 * 16 + 256;
    char *s = malloc(cap), *p = s;
    for (int b = 0; b < 256; b++) {
        if (b == replace_rank) { p += sprintf(p, "%s\n", extra_line); continue; }
        p += sprintf(p, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    }
    if (replace_rank < 0) p += sprintf(p, "%s\n", extra_line);
    return s;
}

/* Each malformed file is refused with a message naming it. */
static void test_malformed_files(void)
{
    TEST_BEGIN("tokenizer_malformed_files");
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/k3_tok_bad_XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    char *v;
    v = byte_vocab("QUJD@ 256", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: bad base64", "bad base64");
    free(v);
    v = byte_vocab("QUJD", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: expected 'base64 rank'", "missing rank");
    free(v);
    v = byte_vocab("QUJD 5", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: rank 5 already given on line 6", "duplicate rank");
    free(v);
    v = byte_vocab("QQ== 256", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: token bytes duplicate those of line 66", "duplicate bytes");
    free(v);
    v = byte_vocab("QUJD 999", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: rank '999' is not an integer", "rank out of range");
    free(v);
    v = byte_vocab("QUJD -3", -1);
    expect_refused(dir, "tiktoken.model", v, ":257: rank '-3'", "negative rank");
    free(v);
    v = byte_vocab("QUJD 65", 65);
    expect_refused(dir, "tiktoken.model", v, "byte 0x41 has no token", "missing byte");
    free(v);
    expect_refused(dir, "tiktoken.model", "", "no tokens", "empty vocabulary");
    expect_refused(dir, "tiktoken.model", NULL, "No such file", "missing vocabulary");
    expect_refused(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {", ":1:", "truncated JSON");
    expect_refused(dir, "tokenizer_config.json", "[]", "added_tokens_decoder", "not an object");
    expect_refused(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"12\": {\"content\": \"x\"}}}",
                   "collides with a BPE rank", "id below n_base");
    expect_refused(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"99999999\": {\"content\": \"x\"}}}",
                   "not an id in", "id far past n_base");
    expect_refused(dir, "tokenizer_config.json",
                   "{\"added_tokens_decoder\": {\"1024\": {\"content\": \"a\"}, \"5000\": {\"content\": \"a\"}}}",
                   "named twice", "duplicate name past the reserved slots");
    expect_refused(dir, "tokenizer_config.json",
                   "{\"added_tokens_decoder\": {\"1024\": {\"content\": 7}}}", "content", "content not a string");
    expect_refused(dir, "tokenizer_config.json",
                   "{\"added_tokens_decoder\": {\"1024\": {\"content\": \"a\"}, \"1025\": {\"content\": \"a\"}}}",
                   "named twice", "duplicate name");
    expect_refused(dir, "tokenizer_config.json", NULL, "No such file", "missing config");
    remove_dir(dir);
    TEST_END();
}

/* `test_tokenizer --pretok`: print the pre-tokens of stdin, one per line in
 * hex, for tests/t_tokenizer.sh to compare with tok_ref.py pretok (the
 * generated vocabulary is too small to expose every boundary difference
 * through the ids alone). */
static int print_piece_hex(void *ud, const char *piece, size_t len)
{
    (void)ud;
    for (size_t i = 0; i < len; i++) printf("%02x", (uint8_t)piece[i]);
    putchar('\n');
    return 0;
}

/* Read stdin, pre-tokenize, print hex pieces. */
static int pretok_stdin(void)
{
    size_t cap = 1 << 20, n = 0, got;
    char *text = malloc(cap);
    while (text && (got = fread(text + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(text, cap *= 2);
            if (!grown) free(text);
            text = grown;
        }
    }
    k3_error errbuf;
    k3_pretok *p = text ? k3_pretok_new(&errbuf) : NULL;
    if (!p || k3_utf8_invalid_at(text, n) != n) {
        fprintf(stderr, "test_tokenizer: cannot pre-tokenize stdin\n");
        free(text);
        k3_pretok_free(p);
        return 1;
    }
    int rc = k3_pretok_split(p, text, n, print_piece_hex, NULL, &errbuf);
    k3_pretok_free(p);
    free(text);
    return rc ? 1 : 0;
}

/* Generate a tokenizer into a temp dir, run every group, clean up. */
int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--pretok")) return pretok_stdin();
    snprintf(model_dir, sizeof model_dir, "/tmp/k3_tok_test_XXXXXX");
    if (!mkdtemp(model_dir) || k3_tokenizer_generate(model_dir, N_BASE, &tok_err)) {
        printf("FAIL tokenizer_generate: %s\n", tok_err.msg);
        return 1;
    }
    k3_tokenizer *t = k3_tokenizer_load(model_dir, &tok_err);
    if (!t) {
        printf("FAIL tokenizer_load: %s\n", tok_err.msg);
        return 1;
    }
    test_generate();
    test_load_and_specials(t);
    test_round_trip(t);
    test_pretokenize();
    test_long_runs(t);
    test_invalid_utf8(t);
    test_streaming_decode(t);
    test_chat(t);
    test_malformed_files();
    k3_tokenizer_free(t);
    remove_dir(model_dir);
    TEST_EXIT();
}
