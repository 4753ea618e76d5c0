/* markdown.h - the little markdown the chat renders in answers: fenced code
 * blocks (``` or ~~~, with a language label), ATX headings (# to ######),
 * tables (| a | b | over |---|---|), and inline **bold**, *italic* or
 * _italic_, `code` and [links](url). It only classifies source lines and
 * finds markers; the transcript decides how they look. The text itself is
 * never changed (the store keeps what the model wrote; /raw shows it). */
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
    MD_TABLE_ROW,                /* a table's row (md_table_at finds tables; md_next_line never returns it) */
    MD_TABLE_RULE,               /* the |---|---| line under a table's header row */
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

/* How each byte of a paragraph line is drawn (md_inline_styles): style
 * bits, or HIDDEN for a marker (no column) and SPACE for the ']' between a
 * link's text and its url (one blank column). */
enum {
    MD_ST_BOLD = 1,              /* **bold** */
    MD_ST_ITALIC = 2,            /* *italic*, _italic_ */
    MD_ST_CODE = 4,              /* `code` (nothing inside is markdown) */
    MD_ST_LINK = 8,              /* the text of [text](url) */
    MD_ST_URL = 16,              /* its (url), kept visible */
    MD_ST_HIDDEN = 32,           /* a marker: ` ** * _ [ */
    MD_ST_SPACE = 64,            /* drawn as one space */
};

/* The style of every byte of the line s[start..end) into styles[0..end -
 * start): code spans first (a backtick run closed by a run of the same
 * length), then links, then ** pairs, then * and _ pairs (an opener before
 * a non-space, a closer after one; _ only at word boundaries, so
 * snake_case stays). A marker without its partner is text. */
void md_inline_styles(const char *s, size_t start, size_t end, unsigned char *styles);

/* 1 when a table starts at the line at pos: a row ("| a | b |") followed by
 * a rule ("|---|:--:|"); *table_end is the position after its last row
 * (the rows go on while lines start with '|'). */
int md_table_at(const char *s, size_t n, size_t pos, size_t *table_end);

/* The cells of the table line s[start..end), trimmed: up to max_cells
 * (start, end) pairs. Returns the number of cells. */
int md_table_cells(const char *s, size_t start, size_t end, size_t *cell_start, size_t *cell_end, int max_cells);

/* Is the line s[start..end) a table's rule (cells of '-' with ':' ends)? */
int md_table_is_rule(const char *s, size_t start, size_t end);

/* The n-th fenced code block (1 = the first) of the text s[0..n): its
 * lines between the fences, *start and *end. 0 when found, -1 when the
 * text has fewer blocks (for /copy N, /copy code). */
int md_code_block(const char *s, size_t n, int which, size_t *start, size_t *end);

#endif
