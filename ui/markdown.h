/* markdown.h - the little markdown the chat renders in answers: fenced code
 * blocks (``` or ~~~, with a language label), ATX headings (# to ######)
 * and **bold**. It only classifies source lines and finds markers; the
 * transcript decides how they look. The text itself is never changed (the
 * store keeps what the model wrote; /raw shows it). */
#ifndef K3_MARKDOWN_H
#define K3_MARKDOWN_H

#include <stddef.h>

typedef enum md_kind {
    MD_NONE = 0,                 /* not markdown-rendered (user text, notices, /raw) */
    MD_TEXT,                     /* a paragraph line (may hold **bold**) */
    MD_HEADING,                  /* "# Title": body = the title */
    MD_FENCE_OPEN,               /* "```lang": body = the language label (may be empty) */
    MD_FENCE_CLOSE,              /* "```" closing an open block */
    MD_CODE,                     /* a line inside a code block, drawn verbatim */
} md_kind;

typedef struct md_line {
    md_kind kind;
    size_t start, end;           /* the source line, without its '\n' */
    size_t body, body_end;       /* the part shown: heading title, fence label, else start..end */
    int level;                   /* heading level 1..6 */
} md_line;

/* Classify the source line of s[0..n) that starts at pos; *in_fence is the
 * state between calls (0 at the start of a text). Returns the position of
 * the next line (n at the end). A block still open at the end of the text
 * (an answer being streamed) just has no closing line yet. */
size_t md_next_line(const char *s, size_t n, size_t pos, int *in_fence, md_line *out);

/* 1 when the "**" pairs of the line s[start..end) are bold markers: there is
 * an even, non-zero number of them (an odd count is shown literally). */
int md_line_has_bold(const char *s, size_t start, size_t end);

/* 1 if s[i..end) starts with a "**" marker. */
int md_is_bold_marker(const char *s, size_t i, size_t end);

#endif
