/* test_chat_text.c - the chat's text helpers on their own: how ui/markdown.c
 * classifies the lines of an answer (fences with and without a language,
 * ~~~, a block still open while it streams, headings against #hashtags,
 * bold markers only in even counts) and how chat/multiline.c assembles
 * ollama's """ messages. */
#include <string.h>
#include "markdown.h"
#include "multiline.h"
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

    TEST_BEGIN("markdown: bold markers only in pairs");
    const char *p = "a **b** c";
    CHECK(md_line_has_bold(p, 0, strlen(p)), "pair");
    p = "2 ** 3 is 8";
    CHECK(!md_line_has_bold(p, 0, strlen(p)), "a lone ** is text");
    p = "**x** and **y**";
    CHECK(md_line_has_bold(p, 0, strlen(p)), "two pairs");
    CHECK(md_is_bold_marker(p, 0, strlen(p)) && !md_is_bold_marker(p, 2, strlen(p)), "marker positions");
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
