/* chat_xtml.c - the Kimi K3 chat format, XTML (docs/MODEL.md, "XTML chat format").
 *
 *   open(tag, attrs) = <|open|> tag { " key" "=\"" value "\"" }* <|sep|>
 *   close(tag)       = <|close|> tag <|sep|>
 *   user/system      = open(message, role=R) CONTENT close(message) <|end_of_msg|>
 *   assistant        = open(message, role=assistant) open(response) CONTENT
 *                      close(response) close(message) <|end_of_msg|>
 *   generation       = open(message, role=assistant) open(response)
 *
 * Every piece is encoded on its own (segment boundaries are token
 * boundaries: " role", "=\"", "user" and "\"" are separate segments), the
 * structural markers are special ids, and all message text is encoded with
 * special tokens disallowed, so a user cannot forge framing. No BOS.
 *
 * Thinking (k3_chat_render_xtml_think with an effort, as the reference
 * template Kimi-K3.jinja with thinking=true): first an internal system
 * message open(message, role=system type=thinking-effort) saying the
 * effort, then every assistant message as open(think) REASONING close(think)
 * open(response) CONTENT close(response), and the generation prompt opens
 * "think". Thinking off (effort NULL): no such message, no think blocks,
 * the generation prompt opens "response". */
#include <stdlib.h>
#include <string.h>
#include "k3_chat_format.h"

typedef struct id_buffer {
    int *ids;
    int n, cap;
    int failed;
    k3_error *err;
} id_buffer;

static void push_id(id_buffer *b, int id)
{
    if (b->failed) return;
    if (b->n == b->cap) {
        int cap = b->cap ? b->cap * 2 : 256;
        int *g = realloc(b->ids, (size_t)cap * sizeof *g);
        if (!g) { b->failed = 1; k3_err(b->err, "out of memory"); return; }
        b->ids = g;
        b->cap = cap;
    }
    b->ids[b->n++] = id;
}

/* One text segment, specials disallowed. */
static void push_text(id_buffer *b, const k3_tokenizer *t, const char *text, size_t len)
{
    if (b->failed || !len) return;
    int n = 0;
    int *ids = k3_tokenizer_encode(t, text, len, 0, &n, b->err);
    if (!ids) { b->failed = 1; return; }
    for (int i = 0; i < n; i++) push_id(b, ids[i]);
    free(ids);
}

static void push_str(id_buffer *b, const k3_tokenizer *t, const char *s) { push_text(b, t, s, strlen(s)); }

/* Attribute values escape & and ". */
static void push_value(id_buffer *b, const k3_tokenizer *t, const char *v)
{
    size_t n = strlen(v), o = 0;
    char *esc = malloc(n * 6 + 1);
    if (!esc) { b->failed = 1; k3_err(b->err, "out of memory"); return; }
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '&') { memcpy(esc + o, "&amp;", 5); o += 5; }
        else if (v[i] == '"') { memcpy(esc + o, "&quot;", 6); o += 6; }
        else esc[o++] = v[i];
    }
    push_text(b, t, esc, o);
    free(esc);
}

typedef struct xtml_ids { int open, close, sep, end_of_msg; } xtml_ids;

/* One attribute: " key" "=\"" value "\"", each its own segment. */
static void push_attr(id_buffer *b, const k3_tokenizer *t, const char *key, const char *value)
{
    char k[64];
    snprintf(k, sizeof k, " %s", key);
    push_str(b, t, k);
    push_str(b, t, "=\"");
    push_value(b, t, value);
    push_str(b, t, "\"");
}

/* open(tag) with at most one attribute. */
static void push_open(id_buffer *b, const k3_tokenizer *t, const xtml_ids *x, const char *tag,
                      const char *key, const char *value)
{
    push_id(b, x->open);
    push_str(b, t, tag);
    if (key) push_attr(b, t, key, value);
    push_id(b, x->sep);
}

static void push_close(id_buffer *b, const k3_tokenizer *t, const xtml_ids *x, const char *tag)
{
    push_id(b, x->close);
    push_str(b, t, tag);
    push_id(b, x->sep);
}

static int find_ids(const k3_tokenizer *t, xtml_ids *x, k3_error *err)
{
    x->open = k3_tokenizer_special_id(t, "<|open|>");
    x->close = k3_tokenizer_special_id(t, "<|close|>");
    x->sep = k3_tokenizer_special_id(t, "<|sep|>");
    x->end_of_msg = k3_tokenizer_special_id(t, "<|end_of_msg|>");
    if (x->open < 0 || x->close < 0 || x->sep < 0 || x->end_of_msg < 0) {
        k3_err(err, "tokenizer_config.json lacks the XTML tokens <|open|> <|close|> <|sep|> <|end_of_msg|>");
        return -1;
    }
    return 0;
}

int k3_chat_think_effort_valid(const char *effort)
{
    return effort && (!strcmp(effort, "low") || !strcmp(effort, "medium") || !strcmp(effort, "high") ||
                      !strcmp(effort, "max"));
}

/* Is code point c white space to Python's str.strip (what Jinja's trim
 * calls): ASCII \t-\r, \x1c-\x1f and space, U+0085, U+00A0, U+1680,
 * U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static int py_space(unsigned c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point of the UTF-8 sequence at s[0, n) and its length in *len
 * (a malformed byte is itself, one byte long: never white space). */
static unsigned utf8_at(const unsigned char *s, size_t n, size_t *len)
{
    int k = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (k == 0 || (size_t)k > n) { *len = 1; return 0xfffd; }
    unsigned c = k == 1 ? s[0] : s[0] & (0x7f >> k);
    for (int i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) { *len = 1; return 0xfffd; }
        c = c << 6 | (s[i] & 0x3f);
    }
    *len = (size_t)k;
    return c;
}

/* The length of s without the white space around it (Jinja's trim, which
 * is Python's str.strip), from *start. */
static size_t trimmed(const char *str, size_t *start)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), a = 0, e, len;
    while (a < n && py_space(utf8_at(s + a, n - a, &len))) a += len;
    e = a;
    for (size_t i = a; i < n; i += len)          /* the end of the last character that is not white space */
        if (!py_space(utf8_at(s + i, n - i, &len))) e = i + len;
    *start = a;
    return e - a;
}

int *k3_chat_render_xtml(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                         int add_generation_prompt, int *n_out, k3_error *err)
{
    return k3_chat_render_xtml_think(t, msgs, n_msgs, add_generation_prompt, NULL, n_out, err);
}

int *k3_chat_render_xtml_think(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                               int add_generation_prompt, const char *effort, int *n_out, k3_error *err)
{
    xtml_ids x;
    if (find_ids(t, &x, err)) return NULL;
    if (effort && !k3_chat_think_effort_valid(effort)) {
        k3_err(err, "thinking effort '%s' is not one of low, medium, high, max", effort);
        return NULL;
    }
    id_buffer b = {.err = err};
    if (effort) {
        char body[320];
        snprintf(body, sizeof body,
                 "`thinking_effort` guides on how much to think in your thinking channel (not including the "
                 "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
                 "Now the system is invoked with `thinking_effort=%s`.", effort);
        push_id(&b, x.open);
        push_str(&b, t, "message");
        push_attr(&b, t, "role", "system");
        push_attr(&b, t, "type", "thinking-effort");
        push_id(&b, x.sep);
        push_str(&b, t, body);
        push_close(&b, t, &x, "message");
        push_id(&b, x.end_of_msg);
    }
    for (int i = 0; i < n_msgs && !b.failed; i++) {
        const char *role = msgs[i].role, *content = msgs[i].content ? msgs[i].content : "";
        push_open(&b, t, &x, "message", "role", role);
        if (!strcmp(role, "assistant")) {
            if (effort) {
                size_t start, len = trimmed(msgs[i].reasoning ? msgs[i].reasoning : "", &start);
                push_open(&b, t, &x, "think", NULL, NULL);
                push_text(&b, t, msgs[i].reasoning + start, len);
                push_close(&b, t, &x, "think");
            }
            push_open(&b, t, &x, "response", NULL, NULL);
            push_str(&b, t, content);
            push_close(&b, t, &x, "response");
        } else {
            push_str(&b, t, content);
        }
        push_close(&b, t, &x, "message");
        push_id(&b, x.end_of_msg);
    }
    if (add_generation_prompt) {
        push_open(&b, t, &x, "message", "role", "assistant");
        push_open(&b, t, &x, effort ? "think" : "response", NULL, NULL);
    }
    if (b.failed) { free(b.ids); return NULL; }
    if (!b.ids) push_id(&b, 0), b.n = 0;
    *n_out = b.n;
    return b.ids;
}

int k3_chat_xtml_close_ids(const k3_tokenizer *t, int *ids, int max_ids, k3_error *err)
{
    xtml_ids x;
    if (find_ids(t, &x, err)) return -1;
    id_buffer b = {.err = err};
    push_close(&b, t, &x, "response");
    push_close(&b, t, &x, "message");
    push_id(&b, x.end_of_msg);
    int n = b.failed ? -1 : b.n;
    if (n > max_ids) n = k3_err(err, "the XTML closing sequence has %d ids, more than %d", b.n, max_ids);
    if (n > 0) memcpy(ids, b.ids, (size_t)n * sizeof *ids);
    free(b.ids);
    return n;
}

int k3_chat_xtml_think_end_ids(const k3_tokenizer *t, int *ids, int max_ids, k3_error *err)
{
    xtml_ids x;
    if (find_ids(t, &x, err)) return -1;
    id_buffer b = {.err = err};
    push_close(&b, t, &x, "think");
    push_open(&b, t, &x, "response", NULL, NULL);
    int n = b.failed ? -1 : b.n;
    if (n > max_ids) n = k3_err(err, "the XTML think-to-response sequence has %d ids, more than %d", b.n, max_ids);
    if (n > 0) memcpy(ids, b.ids, (size_t)n * sizeof *ids);
    free(b.ids);
    return n;
}
