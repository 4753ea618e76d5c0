/* tokenizer_gen.c - learn a small BPE vocabulary from a built-in
 * multilingual text and write it in the real Kimi tokenizer layout
 * (tiktoken.model + tokenizer_config.json), for synthetic models. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "k3.h"
#include "k3_util.h"
#include "pretokenize.h"
#include "strtab.h"
#include "tokenizer_gen.h"

/* The learning text: English prose, chat words, code with tabs and
 * indentation, digits, Chinese, Japanese, accented Latin, emoji and runs of
 * whitespace, so every script the tests use gets some merges. */
static const char learning_text[] =
    "The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox "
    "ran off into the woods before anyone could say a word about it.\n"
    "A language model reads text as a sequence of tokens. Each token is a small piece of "
    "a word, a whole word, a number or a symbol. The model predicts the next token, then the "
    "next one, until it decides to stop. Short common words like the, and, of, to, in, is, it, "
    "that, for, on, with, as, was, at, by, this, from, or, an, be, are, have, not, but, what, "
    "all, were, when, we, there, can, your, which, their, said, if, do, will, each, about, how, "
    "up, out, them, then, she, many, some, so, these, would, other, into, has, more, her, two, "
    "like, him, see, time, could, no, make, than, first, been, its, who, now, people, my, made, "
    "over, did, down, only, way, find, use, may, water, long, little, very, after, words, called, "
    "just, where, most, know, get, through, back, much, before, go, good, new, write, our, used, "
    "me, man, too, any, day, same, right, look, think, also, around, another, came, come, work, "
    "three, word, must, because, does, part, even, place, well, such, here, take, why, things, "
    "help, put, years, different, away, again, off, went, old, number, great, tell, men, say, "
    "small, every, found, still, between, name, should, home, big, give, air, line, set, own, "
    "under, read, last, never, us, left, end, along, while, might, next, sound, below, saw, "
    "something, thought, both, few, those, always, looked, show, large, often, together, asked, "
    "house, don't, world, going, want, school, important, until, form, food, keep, children.\n"
    "I'm sure you're right, but we'll see. They've said it's fine; she'd agree and he'll call. "
    "I'LL BE THERE AT NOON, DON'T WORRY. You'd think the weather wouldn't matter, yet it does.\n"
    "\n"
    "<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|>"
    "<|im_user|>user<|im_middle|>What is the capital of France?<|im_end|>"
    "<|im_assistant|>assistant<|im_middle|>The capital of France is Paris.<|im_end|>\n"
    "system user assistant tool system user assistant tool\n"
    "Please summarize the following paragraph in one sentence. Then translate it into French, "
    "German and Spanish. Finally, list three questions a student might ask about it.\n"
    "\n"
    "#include <stdio.h>\n"
    "#include <stdlib.h>\n"
    "\n"
    "/* Sum the first n squares. */\n"
    "static long sum_squares(int n)\n"
    "{\n"
    "\tlong total = 0;\n"
    "\tfor (int i = 1; i <= n; i++) {\n"
    "\t\ttotal += (long)i * i;\n"
    "\t}\n"
    "\treturn total;\n"
    "}\n"
    "\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "\tint n = argc > 1 ? atoi(argv[1]) : 10;\n"
    "\tprintf(\"sum of squares up to %d is %ld\\n\", n, sum_squares(n));\n"
    "\treturn 0;\n"
    "}\n"
    "\n"
    "def tokenize(text: str) -> list[int]:\n"
    "    \"\"\"Split text into pieces and merge each piece by rank.\"\"\"\n"
    "    ids = []\n"
    "    for piece in pattern.findall(text):\n"
    "        if piece in ranks:\n"
    "            ids.append(ranks[piece])\n"
    "        else:\n"
    "            ids.extend(byte_pair_encode(piece, ranks))\n"
    "    return ids\n"
    "\n"
    "class Model:\n"
    "    def __init__(self, config):\n"
    "        self.hidden_size = config[\"hidden_size\"]\n"
    "        self.num_layers = config.get(\"num_hidden_layers\", 4)\n"
    "        self.vocab_size = config['vocab_size']\n"
    "\n"
    "    def forward(self, input_ids, cache=None):\n"
    "        return self.lm_head(self.norm(self.layers(self.embed(input_ids), cache)))\n"
    "\n"
    "{\"model_type\": \"kimi_linear\", \"vocab_size\": 163840, \"hidden_size\": 2304, "
    "\"num_attention_heads\": 32, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false}\n"
    "SELECT id, name, created_at FROM messages WHERE conversation_id = ? ORDER BY id DESC LIMIT 20;\n"
    "for (size_t i = 0; i < n; i++) x[i] = a * x[i] + b;   // axpy\n"
    "if (rc != 0 && errno == EINTR) { continue; } else if (rc < 0) { return -1; }\n"
    "git commit -m \"Fix the off-by-one error in the tokenizer\" && make test\n"
    "https://example.com/path/to/page?query=value&lang=en#section-2\n"
    "user@example.org, admin@test.net; C:\\Users\\Public\\Documents\\notes.txt\n"
    "\n"
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 16 20 24 32 42 64 99 100 128 256 512 1000 1024 2048 "
    "4096 8192 65536 123456789 3.14159 2.71828 1e-6 -273.15 +42 50% $19.99 EUR 1,000,000 "
    "2024-05-17 12:34:56 v1.2.3 0x7fff 0b1010 #123 (555) 123-4567 1st 2nd 3rd 4th 1990s\n"
    "In 2023 the team trained 48 models on 1.4 trillion tokens over 90 days using 2048 GPUs.\n"
    "\n"
    "人工智能是计算机科学的一个分支，它试图理解智能的实质，并生产出一种新的能以人类智能相似的方式做出反应的智能机器。"
    "语言模型通过学习大量文本来预测下一个词。今天天气很好，我们去公园散步吧。"
    "中华人民共和国成立于一九四九年，首都是北京。上海是中国最大的城市之一，人口超过两千万。"
    "这个问题很有意思，我需要仔细想一想再回答你。请用中文回答下面的问题。"
    "你好，世界！我是一个人工智能助手，很高兴认识你。谢谢你的帮助，再见。\n"
    "机器学习、深度学习和自然语言处理是现代人工智能的重要组成部分。数据、算法和算力缺一不可。\n"
    "\n"
    "日本語の文章もここに入れます。今日はとても良い天気ですね。東京は日本の首都です。"
    "私は毎朝コーヒーを飲みます。ありがとうございます。すみません、駅はどこですか？"
    "カタカナのことば：コンピューター、インターネット、プログラム、データ、モデル、トークン。"
    "ひらがなとカタカナと漢字をまぜて書くのが日本語のふつうの書き方です。\n"
    "한국어 문장도 조금 넣습니다. 안녕하세요, 만나서 반갑습니다.\n"
    "\n"
    "Français : Où est la bibliothèque ? Je voudrais un café crème, s'il vous plaît. "
    "L'été dernier, nous sommes allés à la mer ; c'était très agréable. Élève, naïve, Noël, "
    "garçon, déjà, être, forêt, hôpital, coïncidence.\n"
    "Deutsch: Über den Wolken muss die Freiheit wohl grenzenlos sein. Die Größe der Straße "
    "überrascht mich. Schön, dass Sie da sind! Fußgänger, Mädchen, Brötchen, Äpfel, Öl.\n"
    "Español: ¿Dónde está la estación? ¡Qué día tan bonito! El niño comió una piña en "
    "la montaña. Canción, corazón, mañana, árbol, según, pingüino.\n"
    "Português: Não sei se você já viu a situação. Ação, coração, informação, avó, maçã.\n"
    "Tiếng Việt: Xin chào, tôi là một trợ lý. Cảm ơn bạn rất nhiều. Việt Nam đẹp lắm.\n"
    "Polski: Zażółć gęślą jaźń. Dziękuję bardzo. Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.\n"
    "Русский: Привет, как дела? Я люблю читать книги и пить чай. Спасибо большое!\n"
    "Ελληνικά: Καλημέρα, τι κάνεις; Ευχαριστώ πολύ. العربية: مرحبا بالعالم. עברית: שלום עולם.\n"
    "\n"
    "Emoji: 😀 😃 😄 😁 😆 😅 😂 🤣 😊 😇 🙂 🙃 😉 😍 🥰 😘 🤔 🤖 🚀 🌍 🌟 🔥 💡 ✅ ❌ ⭐ ❤️ 👍 👋 🎉 "
    "🍕 🍣 ☕ 🐱 🐶 🦊 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 🇯🇵 🇨🇳 — great job! 🎉🎉🎉 Thanks 🙏\n"
    "Symbols: → ← ↑ ↓ ≤ ≥ ≠ ± × ÷ ∑ ∫ √ ∞ π λ µ ° € £ ¥ © ® ™ … « » “quoted” ‘single’ — – • ·\n"
    "Punctuation runs: !!! ??? ... --- === *** ### /// ((( ))) [[[ ]]] {{{ }}} <<< >>> ;;; :::\n"
    "\n"
    "Whitespace runs:    four spaces,        eight spaces,\t\ttwo tabs, and a blank line below.\n"
    "\n"
    "\n"
    "    indented line one\n"
    "        indented line two\n"
    "            indented line three\n"
    "  \n"
    "\r\n"
    "Windows line ending above.\r\n"
    "Trailing spaces here.   \n"
    "a   b\n\n  c\n"
    "\n"
    "Once upon a time, in a small village by the sea, there lived an old fisherman and his "
    "daughter. Every morning they went out on their boat before sunrise, and every evening they "
    "came home with a basket full of fish. One day a storm rose suddenly over the water. The waves "
    "grew taller than the mast, and the wind tore at the sail. The daughter held the rope while "
    "her father steered toward the lighthouse. When they finally reached the harbor, the whole "
    "village was waiting for them on the pier, cheering and waving lanterns in the rain.\n"
    "Science explains how the world works; engineering uses that knowledge to build useful "
    "things. Computers store information as bits, which are grouped into bytes. A byte holds "
    "eight bits and can represent 256 different values. Text is stored by encoding characters "
    "as bytes, and UTF-8 is the most widely used encoding today.\n"
    "Questions and answers: What time is it? It is half past three. Where are you going? "
    "I am going to the library to return some books. How much does it cost? It costs twelve "
    "dollars and fifty cents. Why is the sky blue? Because air scatters blue light more than "
    "red light.\n";

/* ------------------------------------------------------ growable storage */

/* The vocabulary being learned: token bytes plus a hash from bytes to id. */
typedef struct {
    uint8_t *arena;
    size_t arena_n, arena_cap;
    size_t *off;
    size_t *len;
    int n, cap;
    k3_strtab ids;       /* token bytes -> id */
} gen_vocab;

/* The bytes of token id (the key the id table compares). */
static const void *vocab_key(const void *owner, int32_t id, size_t *len)
{
    const gen_vocab *v = owner;
    *len = v->len[id];
    return v->arena + v->off[id];
}

/* Id of a byte string already in the vocabulary, or -1. */
static int vocab_find(const gen_vocab *v, const uint8_t *s, size_t n)
{
    return k3_strtab_find(&v->ids, s, n, vocab_key, v);
}

/* Append a new token (caller checked it is absent). Returns its id or -1. */
static int vocab_add(gen_vocab *v, const uint8_t *s, size_t n)
{
    if (v->arena_n + n > v->arena_cap) {
        size_t cap = v->arena_cap * 2 + n;
        uint8_t *grown = realloc(v->arena, cap);
        if (!grown) return -1;
        v->arena = grown;
        v->arena_cap = cap;
    }
    memcpy(v->arena + v->arena_n, s, n);
    int id = v->n++;
    v->off[id] = v->arena_n;
    v->len[id] = n;
    v->arena_n += n;
    k3_strtab_insert(&v->ids, id, vocab_key, v);   /* absent: always inserted */
    return id;
}

/* All tables sized once for n_base tokens (the hash at most half full). */
static int vocab_init(gen_vocab *v, int n_base)
{
    v->cap = n_base;
    v->arena_cap = 4096;
    v->arena = malloc(v->arena_cap);
    v->off = malloc((size_t)n_base * sizeof *v->off);
    v->len = malloc((size_t)n_base * sizeof *v->len);
    if (!v->arena || !v->off || !v->len || k3_strtab_init(&v->ids, (size_t)n_base)) return -1;
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        if (vocab_add(v, &byte, 1) < 0) return -1;
    }
    return 0;
}

/* Frees whatever vocab_init managed to allocate. */
static void vocab_free(gen_vocab *v)
{
    free(v->arena);
    free(v->off);
    free(v->len);
    k3_strtab_free(&v->ids);
}

/* The pre-tokenised learning text: distinct words (as current symbol ids)
 * with their occurrence counts, in order of first appearance. */
typedef struct {
    int32_t *syms;        /* all words' symbols back to back */
    size_t *start;        /* [n_words] */
    size_t *n_syms;       /* [n_words] current length */
    long *count;          /* [n_words] */
    size_t n_words, cap_words, syms_n, syms_cap;
    uint8_t *bytes;       /* each word's bytes, at the same offsets as syms (the table's keys) */
    k3_strtab words;      /* word bytes -> word index; rebuilt larger when full */
} gen_corpus;

/* strtab key of word w: its bytes as first read (merges change syms, not these). */
static const void *corpus_key(const void *owner, int32_t w, size_t *len)
{
    const gen_corpus *c = owner;
    *len = c->n_syms[w];
    return c->bytes + c->start[w];
}

/* The word table sized for twice as many words, every word re-inserted.
 * Returns 1 when out of memory. */
static int corpus_grow_table(gen_corpus *c)
{
    k3_strtab t;
    if (k3_strtab_init(&t, c->words.n_max ? c->words.n_max * 2 : 1024)) return 1;
    for (size_t w = 0; w < c->n_words; w++) k3_strtab_insert(&t, (int32_t)w, corpus_key, c);
    k3_strtab_free(&c->words);
    c->words = t;
    return 0;
}

/* k3_pretok_split callback: add a pre-token, or count it again. Distinct
 * words are found through the string table, so a corpus of megabytes takes
 * seconds. Returns 1 when out of memory (pre-tokenizer failures are -1). */
static int corpus_add_word(void *ud, const char *piece, size_t len)
{
    gen_corpus *c = ud;
    if (c->n_words >= c->words.n_max && corpus_grow_table(c)) return 1;
    if (c->n_words >= (size_t)INT32_MAX) return 1;
    int32_t w = k3_strtab_find(&c->words, piece, len, corpus_key, c);
    if (w >= 0) {
        c->count[w]++;
        return 0;
    }
    if (c->n_words == c->cap_words) {
        size_t cap = c->cap_words ? c->cap_words * 2 : 256;
        size_t *start = realloc(c->start, cap * sizeof *start);
        if (start) c->start = start;
        size_t *n_syms = realloc(c->n_syms, cap * sizeof *n_syms);
        if (n_syms) c->n_syms = n_syms;
        long *count = realloc(c->count, cap * sizeof *count);
        if (count) c->count = count;
        if (!start || !n_syms || !count) return 1;
        c->cap_words = cap;
    }
    if (c->syms_n + len > c->syms_cap) {
        size_t cap = c->syms_cap * 2 + len + 1024;
        int32_t *syms = realloc(c->syms, cap * sizeof *syms);
        if (syms) c->syms = syms;
        uint8_t *bytes = realloc(c->bytes, cap);
        if (bytes) c->bytes = bytes;
        if (!syms || !bytes) return 1;
        c->syms_cap = cap;
    }
    c->start[c->n_words] = c->syms_n;
    c->n_syms[c->n_words] = len;
    c->count[c->n_words] = 1;
    memcpy(c->bytes + c->syms_n, piece, len);
    for (size_t k = 0; k < len; k++) c->syms[c->syms_n++] = (uint8_t)piece[k];
    k3_strtab_insert(&c->words, (int32_t)c->n_words, corpus_key, c);
    c->n_words++;
    return 0;
}

/* Frees the corpus tables (any state). */
static void corpus_free(gen_corpus *c)
{
    free(c->syms);
    free(c->start);
    free(c->n_syms);
    free(c->count);
    free(c->bytes);
    k3_strtab_free(&c->words);
}

/* Pair counts for one round, reset by bumping a generation stamp. */
typedef struct {
    uint64_t *key;
    long *count;
    uint32_t *stamp;
    size_t mask;
    uint32_t gen;
} pair_table;

/* Count every adjacent symbol pair (weighted by word count) and return the
 * most frequent; ties go to the smallest (left id, right id), so the output
 * is deterministic. Returns 0 if no pair is left. */
static int best_pair(const gen_corpus *c, pair_table *pt, int32_t *a, int32_t *b)
{
    pt->gen++;
    long best_count = 0;
    uint64_t best_key = 0;
    for (size_t w = 0; w < c->n_words; w++) {
        const int32_t *s = c->syms + c->start[w];
        for (size_t k = 0; k + 1 < c->n_syms[w]; k++) {
            uint64_t key = ((uint64_t)(uint32_t)s[k] << 32) | (uint32_t)s[k + 1];
            size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & pt->mask;
            while (pt->stamp[i] == pt->gen && pt->key[i] != key) i = (i + 1) & pt->mask;
            if (pt->stamp[i] != pt->gen) {
                pt->stamp[i] = pt->gen;
                pt->key[i] = key;
                pt->count[i] = 0;
            }
            long n = pt->count[i] += c->count[w];
            if (n > best_count || (n == best_count && key < best_key)) {
                best_count = n;
                best_key = key;
            }
        }
    }
    if (!best_count) return 0;
    *a = (int32_t)(best_key >> 32);
    *b = (int32_t)(best_key & 0xffffffffu);
    return 1;
}

/* Replace every non-overlapping (a, b), left to right, by `merged`. */
static void apply_merge(gen_corpus *c, int32_t a, int32_t b, int32_t merged)
{
    for (size_t w = 0; w < c->n_words; w++) {
        int32_t *s = c->syms + c->start[w];
        size_t n = c->n_syms[w], out = 0;
        for (size_t k = 0; k < n; k++) {
            if (k + 1 < n && s[k] == a && s[k + 1] == b) {
                s[out++] = merged;
                k++;
            } else {
                s[out++] = s[k];
            }
        }
        c->n_syms[w] = out;
    }
}

/* Greedy BPE on the corpus until the vocabulary is full or no pair is left. */
static int learn_merges(gen_vocab *v, gen_corpus *c, int n_base)
{
    pair_table pt = {0};
    size_t slots = 1;
    while (slots < c->syms_n * 2 + 16) slots <<= 1;
    pt.key = malloc(slots * sizeof *pt.key);
    pt.count = malloc(slots * sizeof *pt.count);
    pt.stamp = calloc(slots, sizeof *pt.stamp);
    pt.mask = slots - 1;
    int rc = (pt.key && pt.count && pt.stamp) ? 0 : -1;
    uint8_t *joined = NULL;
    size_t joined_cap = 0;
    int32_t a, b;
    while (rc == 0 && v->n < n_base && best_pair(c, &pt, &a, &b)) {
        size_t n = v->len[a] + v->len[b];
        if (n > joined_cap) {
            uint8_t *grown = realloc(joined, n * 2);
            if (!grown) { rc = -1; break; }
            joined = grown;
            joined_cap = n * 2;
        }
        memcpy(joined, v->arena + v->off[a], v->len[a]);
        memcpy(joined + v->len[a], v->arena + v->off[b], v->len[b]);
        int id = vocab_find(v, joined, n);   /* same bytes reached by another split */
        if (id < 0 && (id = vocab_add(v, joined, n)) < 0) rc = -1;
        else apply_merge(c, a, b, id);
    }
    free(joined);
    free(pt.key);
    free(pt.count);
    free(pt.stamp);
    return rc;
}

/* If the text runs out of pairs, fill the remaining ranks with unused
 * two-byte strings: printable ASCII first, then any bytes. */
static int fill_vocab(gen_vocab *v, int n_base)
{
    for (int pass = 0; pass < 2 && v->n < n_base; pass++) {
        int lo = pass ? 0 : 0x21, hi = pass ? 0xff : 0x7e;
        for (int x = lo; x <= hi && v->n < n_base; x++)
            for (int y = lo; y <= hi && v->n < n_base; y++) {
                uint8_t pair[2] = {(uint8_t)x, (uint8_t)y};
                if (vocab_find(v, pair, 2) < 0 && vocab_add(v, pair, 2) < 0) return -1;
            }
    }
    for (int x = 256; v->n < n_base && x < v->n; x++)   /* then longer concatenations */
        for (int y = 0; y < 256 && v->n < n_base; y++) {
            uint8_t buf[4096];
            if (v->len[x] + 1 > sizeof buf) break;
            memcpy(buf, v->arena + v->off[x], v->len[x]);
            buf[v->len[x]] = (uint8_t)y;
            if (vocab_find(v, buf, v->len[x] + 1) < 0 && vocab_add(v, buf, v->len[x] + 1) < 0)
                return -1;
        }
    return v->n == n_base ? 0 : -1;
}

/* ----------------------------------------------------------------- output */

/* Standard base64 with padding, as tiktoken.model stores token bytes. */
static void put_base64(FILE *f, const uint8_t *s, size_t n)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t bits = (uint32_t)s[i] << 16;
        if (i + 1 < n) bits |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) bits |= s[i + 2];
        fputc(alphabet[(bits >> 18) & 63], f);
        fputc(alphabet[(bits >> 12) & 63], f);
        fputc(i + 1 < n ? alphabet[(bits >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? alphabet[bits & 63] : '=', f);
    }
}

/* Through k3_output (temp file, fsync, rename), so a crash never leaves
 * half a file. */
static int write_vocab_file(const gen_vocab *v, const char *path, k3_error *err)
{
    k3_output out;
    k3_error e;
    if (k3_output_open(&out, path, &e)) {
        *err = e;
        return -1;
    }
    for (int id = 0; id < v->n; id++) {
        put_base64(out.f, v->arena + v->off[id], v->len[id]);
        fprintf(out.f, " %d\n", id);
    }
    if (k3_output_close(&out, &e)) {
        *err = e;
        return -1;
    }
    return 0;
}

/* Named special tokens at their real offsets from n_base (docs/MODEL.md, "Tokenizer and chat format"). */
static const struct { int offset; const char *name; } gen_specials[] = {
    {0, "[BOS]"}, {1, "[EOS]"}, {2, "<|im_end|>"}, {3, "<|im_user|>"}, {4, "<|im_assistant|>"},
    {6, "<|start_header_id|>"}, {7, "<|end_header_id|>"}, {9, "[EOT]"}, {10, "<|im_system|>"},
    {11, "<|tool_calls_section_begin|>"}, {12, "<|tool_calls_section_end|>"},
    {13, "<|tool_call_begin|>"}, {14, "<|tool_call_argument_begin|>"}, {15, "<|tool_call_end|>"},
    {17, "<|im_middle|>"}, {254, "[UNK]"}, {255, "[PAD]"},
};

/* tokenizer_config.json in the Hugging Face shape the loader (and HF) read. */
static int write_config_file(int n_base, const char *path, k3_error *err)
{
    json_t *root = json_object(), *decoder = json_object();
    if (!root || !decoder) goto oom;
    for (size_t i = 0; i < sizeof gen_specials / sizeof gen_specials[0]; i++) {
        char key[24];
        snprintf(key, sizeof key, "%d", n_base + gen_specials[i].offset);
        json_t *entry = json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "content", gen_specials[i].name,
                                  "lstrip", 0, "normalized", 0, "rstrip", 0, "single_word", 0,
                                  "special", 1);
        if (!entry || json_object_set_new(decoder, key, entry)) goto oom;
    }
    if (json_object_set_new(root, "added_tokens_decoder", decoder)) { decoder = NULL; goto oom; }
    decoder = NULL;
    if (json_object_set_new(root, "bos_token", json_string("[BOS]")) ||
        json_object_set_new(root, "eos_token", json_string("[EOS]")) ||
        json_object_set_new(root, "pad_token", json_string("[PAD]")) ||
        json_object_set_new(root, "unk_token", json_string("[UNK]")) ||
        json_object_set_new(root, "model_max_length", json_integer(1048576)) ||
        json_object_set_new(root, "tokenizer_class", json_string("TikTokenTokenizer")))
        goto oom;
    k3_output out;
    k3_error e;
    int rc = k3_output_open(&out, path, &e);
    if (rc == 0 && json_dumpf(root, out.f, JSON_INDENT(2))) {
        k3_output_abort(&out);
        rc = k3_err(&e, "%s: write failed", path);
    } else if (rc == 0) {
        rc = k3_output_close(&out, &e);
    }
    json_decref(root);
    if (rc) *err = e;
    return rc;
oom:
    json_decref(decoder);
    json_decref(root);
    k3_err(err, "%s: out of memory", path);
    return -1;
}

/* Learn, fill if the text ran out of pairs, then write both files. The same
 * n_base always gives byte-identical files. */
int k3_tokenizer_generate(const char *dir, int n_base, k3_error *err)
{
    return k3_tokenizer_generate_from(dir, n_base, learning_text, sizeof learning_text - 1, err);
}

/* The same learning on a caller's text (a trained model's corpus). */
int k3_tokenizer_generate_from(const char *dir, int n_base, const char *text, size_t text_len, k3_error *err)
{
    if (n_base < 256 || n_base > (1 << 24)) {
        k3_err(err, "tokenizer: n_base %d must be in 256..%d", n_base, 1 << 24);
        return -1;
    }
    if (strlen(dir) > 4000) {
        k3_err(err, "tokenizer: directory name too long");
        return -1;
    }
    if (mkdir(dir, 0755) && errno != EEXIST) {
        k3_err(err, "%s: %s", dir, strerror(errno));
        return -1;
    }
    gen_vocab v = {0};
    gen_corpus c = {0};
    int rc = -1;
    k3_pretok *p = k3_pretok_new(err);
    if (!p) return -1;
    if (vocab_init(&v, n_base)) goto oom;
    int split = k3_pretok_split(p, text, text_len, corpus_add_word, &c, err);
    if (split > 0) goto oom;
    if (split < 0) goto done;
    if (learn_merges(&v, &c, n_base) || fill_vocab(&v, n_base)) goto oom;
    char path[4096 + 32];
    snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    if (write_vocab_file(&v, path, err)) goto done;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (write_config_file(n_base, path, err)) goto done;
    rc = 0;
    goto done;
oom:
    k3_err(err, "tokenizer: out of memory while learning merges");
done:
    corpus_free(&c);
    vocab_free(&v);
    k3_pretok_free(p);
    return rc;
}
