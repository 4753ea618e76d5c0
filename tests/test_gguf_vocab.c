/* test_gguf_vocab.c - the tokenizer built from a GGUF's vocabulary
 * (engine/formats/gguf_vocab.c) against the one built from tiktoken.model
 * + tokenizer_config.json, on models/k3-mini and the GGUF that llama.cpp's
 * gguf-py wrote from it (tests/fixtures/gguf/k3mini_vocab.gguf, made by
 * tests/fixtures/gguf/make_vocab_fixture.py): the same sizes, the same bytes
 * for every id, the same ids for every text of the corpus (the tokenizer
 * tests' scripts, code, emoji, specials allowed and not, long runs, a sweep
 * of code points), the same refusal of invalid UTF-8 and the same chat
 * renderings. The tiktoken path's ids are the Hugging Face tokenizer's
 * (tests/t_tokenizer.sh checks them against tests/ref/tok_ref.py), so
 * equal ids here are the reference's. Also GPT-2's byte spelling itself. */
#include <stdlib.h>
#include <string.h>
#include "gguf_vocab.h"
#include "k3_chat_format.h"
#include "k3_tokenizer.h"
#include "test.h"
#include "tokenizer_build.h"

static const char *model_dir = "models/k3-mini";
static const char *fixture = "tests/fixtures/gguf/k3mini_vocab.gguf";

/* The byte map: a bijection onto printable code points, the 68 shifted
 * bytes at U+0100.. in order, and a decode that refuses anything else. */
static void test_byte_spelling(void)
{
    TEST_BEGIN("gguf_vocab_byte_spelling");
    int seen[0x200] = {0};
    uint32_t next_shifted = 0x100;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = k3_byte_spelling_of((uint8_t)b);
        int own = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        CHECK(own ? cp == (uint32_t)b : cp == next_shifted, "byte 0x%02x spelled U+%04X", b, cp);
        if (!own) next_shifted++;
        CHECK(cp < 0x200 && !seen[cp], "U+%04X spells two bytes", cp);
        if (cp < 0x200) seen[cp] = 1;
        char utf8[4];
        size_t n = cp < 0x80 ? 1 : 2;
        if (n == 1) utf8[0] = (char)cp;
        else { utf8[0] = (char)(0xc0 | (cp >> 6)); utf8[1] = (char)(0x80 | (cp & 0x3f)); }
        uint8_t out[4];
        CHECK(k3_byte_spelling_decode(utf8, n, out) == 1 && out[0] == b, "U+%04X does not decode to 0x%02x", cp, b);
    }
    CHECK(next_shifted == 0x144, "%u shifted bytes, expected 68", next_shifted - 0x100);
    uint8_t out[16];
    CHECK(k3_byte_spelling_decode("\xc4\xa0the", 5, out) == 4 && !memcmp(out, " the", 4), "\"Gthe\" is not \" the\"");
    static const char *bad[] = {" ", "a b", "\xc2\xad", "\xc5\x84", "\xe4\xb8\xad", "\xc4", "\xff", "\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(k3_byte_spelling_decode(bad[i], strlen(bad[i]), out) == -1, "bad spelling %zu decoded", i);
    TEST_END();
}

/* Same sizes, the same bytes for every id (and none past the end), the
 * framing specials at the same ids. */
static void test_same_vocabulary(const k3_tokenizer *a, const k3_tokenizer *b)
{
    TEST_BEGIN("gguf_vocab_every_id");
    CHECK(k3_tokenizer_n_base(a) == k3_tokenizer_n_base(b), "n_base %d vs %d", k3_tokenizer_n_base(a),
          k3_tokenizer_n_base(b));
    CHECK(k3_tokenizer_n_vocab(a) == k3_tokenizer_n_vocab(b), "n_vocab %d vs %d", k3_tokenizer_n_vocab(a),
          k3_tokenizer_n_vocab(b));
    CHECK(k3_tokenizer_max_token_bytes(a) == k3_tokenizer_max_token_bytes(b), "max token bytes differ");
    int differ = 0;
    for (int id = -1; id <= k3_tokenizer_n_vocab(a); id++) {
        size_t la = 0, lb = 0;
        const uint8_t *ba = k3_tokenizer_token_bytes(a, id, &la), *bb = k3_tokenizer_token_bytes(b, id, &lb);
        if (!ba != !bb || la != lb || (ba && memcmp(ba, bb, la))) {
            if (!differ) CHECK(0, "token %d differs (%zu vs %zu bytes)", id, la, lb);
            differ++;
        }
    }
    CHECK(differ == 0, "%d ids differ", differ);
    static const char *names[] = {"[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>",
                                  "<|reserved_token_2049|>", "[PAD]"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(k3_tokenizer_special_id(a, names[i]) == k3_tokenizer_special_id(b, names[i]) &&
              k3_tokenizer_special_id(b, names[i]) >= 0, "%s: %d vs %d", names[i],
              k3_tokenizer_special_id(a, names[i]), k3_tokenizer_special_id(b, names[i]));
    TEST_END();
}

/* Encode with both; 1 if the ids (or the refusal) are equal. */
static int same_encoding(const k3_tokenizer *a, const k3_tokenizer *b, const char *text, size_t len,
                         int allow_special, int *n_ids)
{
    k3_error ea = {0}, eb = {0};
    int na = -1, nb = -2;
    int *ia = k3_tokenizer_encode(a, text, len, allow_special, &na, &ea);
    int *ib = k3_tokenizer_encode(b, text, len, allow_special, &nb, &eb);
    int same = (!ia && !ib && !strcmp(ea.msg, eb.msg)) ||
               (ia && ib && na == nb && !memcmp(ia, ib, (size_t)na * sizeof *ia));
    *n_ids = ia ? na : -1;
    free(ia);
    free(ib);
    return same;
}

/* A sweep of code points in letter, digit, space and line contexts (every
 * 7th below U+30000, surrogates skipped), as UTF-8. */
static char *code_point_sweep(size_t *len)
{
    char *s = malloc(0x30000 / 7 * 12 + 16);
    size_t w = 0;
    for (uint32_t cp = 1; cp < 0x30000; cp += 7) {
        if (cp >= 0xd800 && cp < 0xe000) continue;
        s[w++] = 'a';
        if (cp < 0x80) s[w++] = (char)cp;
        else if (cp < 0x800) { s[w++] = (char)(0xc0 | cp >> 6); s[w++] = (char)(0x80 | (cp & 0x3f)); }
        else if (cp < 0x10000) {
            s[w++] = (char)(0xe0 | cp >> 12); s[w++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            s[w++] = (char)(0x80 | (cp & 0x3f));
        } else {
            s[w++] = (char)(0xf0 | cp >> 18); s[w++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            s[w++] = (char)(0x80 | ((cp >> 6) & 0x3f)); s[w++] = (char)(0x80 | (cp & 0x3f));
        }
        s[w++] = cp % 3 ? ' ' : cp % 2 ? '1' : '\n';
    }
    *len = w;
    return s;
}

/* The corpus, with specials allowed (tiktoken's "all") and not (user
 * text: a special's name is plain text then). */
static void test_same_ids(const k3_tokenizer *a, const k3_tokenizer *b)
{
    TEST_BEGIN("gguf_vocab_corpus_ids");
    static const char *texts[] = {
        "", "Hello world", "The quick brown fox jumps over the lazy dog. \"Quotes\" (parens) [x] {y}; a-b_c/d.\n",
        "人工智能是计算机科学的一个分支。中文English混合、日本語のテキスト（カタカナ）ですね。々〆ー 한국어 문장.",
        "12345678 3.14159 -42 +7 1,000,000 2024-05-17T12:34:56Z 0x7fff 1e-6 50% $19.99 ٣٤٥ Ⅻ ½ 12abc34",
        "Emoji 😀😃 🚀🌍 👨‍👩‍👧‍👦 👍🏽 🇫🇷🇯🇵 ❤️ ☕ ✅❌ 🏳️‍🌈 end😀",
        "a   b\n\n  c\t\t\n   \r\n  x  \n\n\n    y \xc2\xa0\xc2\xa0z\xe3\x80\x80w\xc2\x85v\x1cu   ",
        "#include <stdio.h>\n\nint main(int argc, char **argv)\n{\n\tfor (int i = 0; i < argc; i++) {\n"
        "\t\tprintf(\"%s\\n\", argv[i]);\n\t}\n\treturn 0; // done\n}\n\ndef f(x):\n    return {\"k\": [x, x**2]}\n",
        "I'LL do it, don't worry. WE'RE here; they've gone. She'd say it's fine. ſ's 'S 'T'RE x'll Y'D",
        "before<|end_of_msg|>after <|open|>user<|sep|>hi<|close|>[EOS][BOS] <|reserved_token_1900|> <|open <|close|",
        "Français: où est la bibliothèque? Größe, Straße, Ärger. ¿Dónde? Tiếng Việt. Ελληνικά. Привет мир. مرحبا. e\xcc\x81",
        "ok\xff" "bad", "truncated \xe4\xb8",
    };
    int n_ids;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int allow = 0; allow <= 1; allow++)
            CHECK(same_encoding(a, b, texts[i], strlen(texts[i]), allow, &n_ids), "text %zu (allow_special %d)",
                  i, allow);
    CHECK(same_encoding(a, b, texts[9], strlen(texts[9]), 1, &n_ids) && n_ids > 0, "specials text");
    size_t len;
    char *sweep = code_point_sweep(&len);
    CHECK(same_encoding(a, b, sweep, len, 0, &n_ids) && n_ids > 20000, "code-point sweep (%d ids)", n_ids);
    free(sweep);
    size_t long_len = 60000;
    char *runs = malloc(long_len);
    for (size_t i = 0; i < long_len; i++) runs[i] = i < 26000 ? "ab"[i % 2] : i < 52000 ? ' ' : '!';
    CHECK(same_encoding(a, b, runs, long_len, 0, &n_ids), "long runs");
    free(runs);
    TEST_END();
}

/* Decoding every id in order, whole and streamed, gives the same text;
 * the chat renderings give the same ids. */
static void test_same_decode_and_chat(const k3_tokenizer *a, const k3_tokenizer *b)
{
    TEST_BEGIN("gguf_vocab_decode_and_chat");
    int n = k3_tokenizer_n_vocab(a);
    int *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = (i * 7919) % n;
    size_t la, lb;
    char *ta = k3_tokenizer_decode_len(a, ids, n, &la), *tb = k3_tokenizer_decode_len(b, ids, n, &lb);
    CHECK(ta && tb && la == lb && !memcmp(ta, tb, la), "decoded text differs");
    free(ta);
    free(tb);
    k3_detok da, db;
    k3_detok_init(&da, a);
    k3_detok_init(&db, b);
    size_t cap = 3 * (k3_tokenizer_max_token_bytes(a) + 4);
    char *oa = malloc(cap), *ob = malloc(cap);
    int stream_differs = 0;
    for (int i = 0; i < n; i++) {
        size_t wa = k3_detok_push(&da, ids[i], oa, cap), wb = k3_detok_push(&db, ids[i], ob, cap);
        stream_differs += wa != wb || memcmp(oa, ob, wa);
    }
    CHECK(stream_differs == 0, "%d streamed pieces differ", stream_differs);
    free(oa);
    free(ob);
    free(ids);
    k3_chat_msg msgs[] = {{"system", "You are a helpful assistant. 你好!", NULL},
                          {"user", "What is 12345 + 678?\n\tShow <|end_of_msg|> steps.", NULL},
                          {"assistant", "It's 13023. 😀", "adding"}};
    k3_error ea, eb;
    int na, nb;
    int *ra = k3_chat_render_xtml_think(a, msgs, 3, 1, "high", &na, &ea);
    int *rb = k3_chat_render_xtml_think(b, msgs, 3, 1, "high", &nb, &eb);
    CHECK(ra && rb && na == nb && !memcmp(ra, rb, (size_t)na * sizeof *ra), "XTML chat ids differ");
    free(ra);
    free(rb);
    TEST_END();
}

/* What the GGUF path adds: a missing file and a file with no vocabulary
 * are one line naming the file. */
static void test_refusals(void)
{
    TEST_BEGIN("gguf_vocab_refusals");
    k3_error err;
    k3_tokenizer *t = k3_tokenizer_load_gguf("tests/fixtures/gguf/no_such.gguf", &err);
    CHECK(!t && strstr(err.msg, "no_such.gguf"), "missing file: %s", err.msg);
    t = k3_tokenizer_load_gguf("tests/fixtures/gguf/llamacpp_split-00001-of-00003.gguf", &err);
    CHECK(!t && strstr(err.msg, "llamacpp_split-00001-of-00003.gguf: no tokenizer.ggml.model") &&
          !strchr(err.msg, '\n'), "no vocabulary: %s", err.msg);
    t = k3_tokenizer_load_gguf("tests/fixtures/gguf/llamacpp_types.gguf", &err);
    CHECK(!t && strstr(err.msg, "llamacpp_types.gguf: no tokenizer.ggml.pre"), "tokens alone: %s", err.msg);
    TEST_END();
}

int main(void)
{
    test_byte_spelling();
    k3_error err;
    k3_tokenizer *a = k3_tokenizer_load(model_dir, &err);
    if (!a) {
        printf("FAIL gguf_vocab_load: %s\n", err.msg);
        return 1;
    }
    k3_tokenizer *b = k3_tokenizer_load_gguf(fixture, &err);
    if (!b) {
        printf("FAIL gguf_vocab_load: %s\n", err.msg);
        k3_tokenizer_free(a);
        return 1;
    }
    test_same_vocabulary(a, b);
    test_same_ids(a, b);
    test_same_decode_and_chat(a, b);
    test_refusals();
    k3_tokenizer_free(a);
    k3_tokenizer_free(b);
    TEST_EXIT();
}
