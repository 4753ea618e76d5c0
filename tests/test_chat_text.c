/* test_chat_text.c - the chat's text helpers on their own: how ui/markdown.c
 * classifies the lines of an answer (fences with and without a language,
 * ~~~, a block still open while it streams, headings against #hashtags,
 * inline styles and their markers, tables, the n-th code block), how
 * chat/multiline.c assembles ollama's """ messages, and the disk gauge's
 * sliding-window rate (ui/rate_window.h). */
#include <string.h>
#include "markdown.h"
#include "multiline.h"
#include "rate_window.h"
#include "test.h"

/* Kinds of every line of s, as letters: T text, H heading, O open, C code, E end. */
static void kinds(const char *s, char *out)
{
    size_t n = strlen(s), pos = 0;
    int fence = 0;
    md_line l;
    static const char letter[] = {'-', 'T', 'H', 'O', 'E', 'C'};
    do {
        pos = md_next_line(s, n, pos, &fence, &l);
        *out++ = letter[l.kind];
    } while (pos < n);
    *out = 0;
}

/* The shown part of the first line of s. */
static void body(const char *s, char *out, size_t cap)
{
    int fence = 0;
    md_line l;
    md_next_line(s, strlen(s), 0, &fence, &l);
    snprintf(out, cap, "%.*s", (int)(l.body_end - l.body), s + l.body);
}

/* The style of each byte of p as a letter: . plain, h hidden marker, b
 * bold, i italic, B both, c code, l link text, s its space, u its url. */
static void styles_of(const char *p, char *out)
{
    size_t n = strlen(p);
    unsigned char st[96];
    md_inline_styles(p, 0, n, st);
    for (size_t i = 0; i < n; i++) {
        unsigned char v = st[i];
        out[i] = v & MD_ST_HIDDEN ? 'h' : v & MD_ST_SPACE ? 's' : v & MD_ST_URL ? 'u' : v & MD_ST_CODE ? 'c'
                 : v & MD_ST_LINK ? 'l' : (v & MD_ST_BOLD) && (v & MD_ST_ITALIC) ? 'B' : v & MD_ST_BOLD ? 'b'
                 : v & MD_ST_ITALIC ? 'i' : '.';
    }
    out[n] = 0;
}

int main(void)
{
    char k[64], b[64];

    TEST_BEGIN("markdown: fenced code blocks");
    kinds("a\n```python\nx = 1\n\n```\nb", k);
    CHECK(!strcmp(k, "TOCCET"), "got %s", k);
    body("```python  \nx", b, sizeof b);
    CHECK(!strcmp(b, "python"), "label '%s'", b);
    body("```\nx", b, sizeof b);
    CHECK(!strcmp(b, ""), "empty label '%s'", b);
    kinds("~~~\n```\nstill code\n~~~", k);          /* a ``` inside a ~~~ block is code */
    CHECK(!strcmp(k, "OCCE"), "tilde fence: %s", k);
    kinds("```sh\nls\nmore", k);                      /* streaming: not closed yet */
    CHECK(!strcmp(k, "OCC"), "open block: %s", k);
    kinds("   ```\ncode\n    ```\n```", k);           /* 3 spaces open; 4 spaces do not close */
    CHECK(!strcmp(k, "OCCE"), "indents: %s", k);
    kinds("```\n``` not a close\n```", k);
    CHECK(!strcmp(k, "OCE"), "close with text: %s", k);
    TEST_END();

    TEST_BEGIN("markdown: headings");
    kinds("# One\n###### Six\n####### seven\n#hashtag\n#\ntext", k);
    CHECK(!strcmp(k, "HHTTHT"), "got %s", k);
    body("## Title ##", b, sizeof b);
    CHECK(!strcmp(b, "Title"), "closing #s: '%s'", b);
    body("# C# tips", b, sizeof b);
    CHECK(!strcmp(b, "C# tips"), "inner #: '%s'", b);
    TEST_END();

    TEST_BEGIN("markdown: inline **bold**, *italic*, _italic_, `code`, [links](url)");
    char st[96];
    styles_of("a **b** c", st);
    CHECK(!strcmp(st, "..hhbhh.."), "bold: %s", st);
    styles_of("2 ** 3 is 8 and 2 * 3 * 4", st);
    CHECK(!strcmp(st, "........................."), "lone markers are text: %s", st);
    styles_of("*x* and _y_", st);
    CHECK(!strcmp(st, "hih.....hih"), "italic: %s", st);
    styles_of("snake_case_name", st);
    CHECK(!strcmp(st, "..............."), "snake_case stays: %s", st);
    styles_of("use `a*b*c` here", st);
    CHECK(!strcmp(st, "....hccccch....."), "code span: %s", st);
    styles_of("see [docs](http://x.y) now", st);
    CHECK(!strcmp(st, "....hllllsuuuuuuuuuuuu...."), "link: %s", st);
    styles_of("**bold *both* end**", st);
    CHECK(!strcmp(st, "hhbbbbbhBBBBhbbbbhh"), "italic inside bold: %s", st);
    styles_of("``a ` b`` [x](no url)", st);
    CHECK(!strcmp(st, "hhccccchh............"), "double-backtick span, a link with a space is text: %s", st);
    TEST_END();

    TEST_BEGIN("markdown: tables (a row, a rule, rows) and their cells");
    const char *tb = "| a | bb |\n|---|:--:|\n| 1 | 2 |\ntext";
    size_t tend = 0, cs[8], ce[8];
    CHECK(md_table_at(tb, strlen(tb), 0, &tend) && tend == strlen(tb) - 4, "table end %zu", tend);
    CHECK(md_table_cells(tb, 0, 10, cs, ce, 8) == 2 && ce[1] - cs[1] == 2 && !strncmp(tb + cs[1], "bb", 2),
          "cells of the header");
    CHECK(md_table_is_rule(tb, 11, 21) && !md_table_is_rule(tb, 0, 10), "the rule");
    const char *nt = "| a |\ntext\n";
    CHECK(!md_table_at(nt, strlen(nt), 0, &tend), "a row without a rule is text");
    const char *esc = "| a \\| b | c |";
    CHECK(md_table_cells(esc, 0, strlen(esc), cs, ce, 8) == 2, "an escaped bar stays in its cell");
    TEST_END();

    TEST_BEGIN("markdown: the n-th code block (/copy N, /copy code)");
    const char *cb = "x\n```py\nA\nB\n```\ny\n~~~\nC\n~~~\n```\nopen";
    size_t b0, b1;
    CHECK(md_code_block(cb, strlen(cb), 1, &b0, &b1) == 0 && b1 - b0 == 3 && !strncmp(cb + b0, "A\nB", 3), "first");
    CHECK(md_code_block(cb, strlen(cb), 2, &b0, &b1) == 0 && b1 - b0 == 1 && cb[b0] == 'C', "second");
    CHECK(md_code_block(cb, strlen(cb), 3, &b0, &b1) == 0 && !strncmp(cb + b0, "open", b1 - b0) && b1 - b0 == 4,
          "a block still open at the end");
    CHECK(md_code_block(cb, strlen(cb), 4, &b0, &b1) == -1, "no fourth");
    TEST_END();

    TEST_BEGIN("rate_window: bursty reads give a steady rate; the peak never falls");
    rate_window rw = {0};
    uint64_t total = 0;
    double lo = 1e30, hi = 0, raw_lo = 1e30, raw_hi = 0, peak_before = 0;
    int peak_fell = 0;
    for (int i = 0; i <= 40; i++) {                  /* 20 s, a sample every 0.5 s */
        uint64_t before = total;
        if (i % 2 == 1) total += 70000000;           /* 70 MB in one half-second, none in the next */
        rate_window_add(&rw, i * 0.5, total);
        double r = rate_window_bps(&rw), raw = (double)(total - before) / 0.5;
        if (i >= 10) {
            lo = r < lo ? r : lo;
            hi = r > hi ? r : hi;
            raw_lo = raw < raw_lo ? raw : raw_lo;
            raw_hi = raw > raw_hi ? raw : raw_hi;
        }
        peak_fell |= rw.peak_bps < peak_before;
        peak_before = rw.peak_bps;
    }
    CHECK(lo >= 60e6 && hi <= 80e6, "windowed rate %.1f..%.1f MB/s, want 60..80 (the half-second rate: %.0f..%.0f)",
          lo / 1e6, hi / 1e6, raw_lo / 1e6, raw_hi / 1e6);
    for (int i = 41; i <= 60; i++) rate_window_add(&rw, i * 0.5, total);   /* the reads stop */
    CHECK(rate_window_bps(&rw) == 0 && rw.peak_bps >= hi && !peak_fell, "idle: %.1f MB/s, peak %.1f",
          rate_window_bps(&rw) / 1e6, rw.peak_bps / 1e6);
    rate_window_add(&rw, 30.2, total + 1);           /* closer than 0.5 s to the last sample: not kept */
    CHECK(rw.t_s[rw.n - 1] == 30.0, "a sample 0.2 s after the last was kept");
    TEST_END();

    TEST_BEGIN("multiline: \"\"\" blocks");
    multiline m = {0};
    char *msg = NULL;
    CHECK(multiline_feed(&m, "plain", &msg) == 1 && !strcmp(msg, "plain"), "a plain line passes");
    free(msg);
    CHECK(multiline_feed(&m, "\"\"\"first", &msg) == 0 && !msg, "opens");
    CHECK(multiline_feed(&m, "", &msg) == 0, "an empty line inside");
    CHECK(multiline_feed(&m, "last\"\"\"", &msg) == 1 && !strcmp(msg, "first\n\nlast"), "closes: '%s'", msg ? msg : "");
    free(msg);
    CHECK(multiline_feed(&m, "\"\"\"", &msg) == 0, "opens alone");
    CHECK(multiline_feed(&m, "a", &msg) == 0 && multiline_feed(&m, "\"\"\"", &msg) == 1 && !strcmp(msg, "a"),
          "quotes alone on both ends add no blank lines: '%s'", msg ? msg : "");
    free(msg);
    CHECK(multiline_feed(&m, "\"\"\"one line\"\"\"", &msg) == 1 && !strcmp(msg, "one line"), "one line");
    free(msg);
    CHECK(multiline_feed(&m, "\"\"\"x", &msg) == 0, "opens again");
    multiline_reset(&m);
    CHECK(multiline_feed(&m, "after reset", &msg) == 1 && !strcmp(msg, "after reset"), "reset drops the block");
    free(msg);
    multiline_free(&m);
    TEST_END();

    TEST_EXIT();
}
