/* markdown.c - see markdown.h. CommonMark's rules, cut down to what model
 * answers use: a fence is ``` or ~~~ after at most 3 spaces, closed by the
 * same fence character alone on a line; a heading is 1-6 '#' then a space;
 * a table is GitHub's (a row, then a rule of dashes); inline markers pair
 * up within one line. */
#include <ctype.h>
#include <string.h>
#include "markdown.h"

/* The fence character of an opening or closing line, or 0. */
static char fence_char(const char *s, size_t start, size_t end, size_t *after)
{
    size_t i = start;
    while (i < end && i - start < 3 && s[i] == ' ') i++;
    if (i + 3 > end) return 0;
    char c = s[i];
    if ((c != '`' && c != '~') || s[i + 1] != c || s[i + 2] != c) return 0;
    i += 3;
    while (i < end && s[i] == c) i++;
    *after = i;
    return c;
}

size_t md_next_line(const char *s, size_t n, size_t pos, int *in_fence, md_line *out)
{
    size_t end = pos;
    while (end < n && s[end] != '\n') end++;
    memset(out, 0, sizeof *out);
    out->start = out->body = pos;
    out->end = out->body_end = end;
    size_t after = 0;
    char fc = fence_char(s, pos, end, &after);
    if (*in_fence) {
        size_t i = after;
        while (i < end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        if (fc == *in_fence && i == end) {
            out->kind = MD_FENCE_CLOSE;
            *in_fence = 0;
        } else {
            out->kind = MD_CODE;
        }
    } else if (fc) {
        out->kind = MD_FENCE_OPEN;
        *in_fence = fc;
        size_t b = after, e = end;
        while (b < e && (s[b] == ' ' || s[b] == '\t')) b++;
        while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) e--;
        out->body = b;
        out->body_end = e;
    } else {
        size_t i = pos;
        while (i < end && s[i] == '#' && i - pos < 7) i++;
        int level = (int)(i - pos);
        if (level >= 1 && level <= 6 && (i == end || s[i] == ' ')) {
            while (i < end && s[i] == ' ') i++;
            size_t e = end;                       /* optional closing #s */
            while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\r')) e--;
            size_t h = e;
            while (h > i && s[h - 1] == '#') h--;
            if (h < e && (h == i || s[h - 1] == ' ')) e = h;
            while (e > i && s[e - 1] == ' ') e--;
            out->kind = MD_HEADING;
            out->level = level;
            out->body = i;
            out->body_end = e;
        } else {
            out->kind = MD_TEXT;
        }
    }
    return end < n ? end + 1 : n;
}

/* Code spans: a run of k backticks up to the next run of exactly k. */
static void mark_code_spans(const char *s, size_t start, size_t end, unsigned char *st)
{
    size_t i = start;
    while (i < end) {
        if (s[i] != '`') { i++; continue; }
        size_t k = 0;
        while (i + k < end && s[i + k] == '`') k++;
        size_t j = i + k, close = 0;
        while (j < end && !close) {
            if (s[j] != '`') { j++; continue; }
            size_t r = 0;
            while (j + r < end && s[j + r] == '`') r++;
            if (r == k) close = j;
            else j += r;
        }
        if (!close) { i += k; continue; }
        for (size_t b = i; b < close + k; b++)
            st[b - start] = b < i + k || b >= close ? MD_ST_HIDDEN : MD_ST_CODE;
        i = close + k;
    }
}

/* A byte no marker, link text or url may be taken from. */
static int taken(const unsigned char *st, size_t at)
{
    return st[at] & (MD_ST_HIDDEN | MD_ST_CODE | MD_ST_URL | MD_ST_SPACE);
}

/* [text](url): the text non-empty, the url without spaces. */
static void mark_links(const char *s, size_t start, size_t end, unsigned char *st)
{
    for (size_t i = start; i < end; i++) {
        if (s[i] != '[' || taken(st, i - start)) continue;
        size_t close = i + 1;
        while (close < end && s[close] != ']' && s[close] != '[' && !taken(st, close - start)) close++;
        if (close >= end || s[close] != ']' || close == i + 1 || close + 1 >= end || s[close + 1] != '(') continue;
        size_t u = close + 2;
        while (u < end && s[u] != ')' && s[u] != ' ' && !taken(st, u - start)) u++;
        if (u >= end || s[u] != ')' || u == close + 2) continue;
        st[i - start] = MD_ST_HIDDEN;
        for (size_t b = i + 1; b < close; b++) st[b - start] |= MD_ST_LINK;
        st[close - start] = MD_ST_SPACE;
        for (size_t b = close + 1; b <= u; b++) st[b - start] = MD_ST_URL;
        i = u;
    }
}

/* Is s[i] a single-character marker c (not part of a doubled one)? */
static int single(const char *s, size_t start, size_t end, size_t i, char c)
{
    return s[i] == c && (i + 1 >= end || s[i + 1] != c) && (i == start || s[i - 1] != c);
}

/* Pairs of one marker (** or * or _) around text that neither starts nor
 * ends with a space; the style goes on what is between. */
static void mark_pairs(const char *s, size_t start, size_t end, unsigned char *st, const char *marker, int style)
{
    const size_t k = strlen(marker);
    const int word = marker[0] == '_';           /* _ only at word boundaries: snake_case stays */
    for (size_t i = start; i + k < end; i++) {
        if (strncmp(s + i, marker, k) || taken(st, i - start) || s[i + k] == ' ') continue;
        if (k == 1 && !single(s, start, end, i, marker[0])) continue;
        if (word && i > start && isalnum((unsigned char)s[i - 1])) continue;
        size_t close = 0;
        for (size_t j = i + k + 1; j + k <= end && !close; j++) {
            if (strncmp(s + j, marker, k) || taken(st, j - start) || s[j - 1] == ' ') continue;
            if (k == 1 && !single(s, start, end, j, marker[0])) continue;
            if (word && j + 1 < end && isalnum((unsigned char)s[j + 1])) continue;
            close = j;
        }
        if (!close) continue;
        for (size_t b = i; b < i + k; b++) st[b - start] = MD_ST_HIDDEN;
        for (size_t b = close; b < close + k; b++) st[b - start] = MD_ST_HIDDEN;
        for (size_t b = i + k; b < close; b++)
            if (!(st[b - start] & (MD_ST_HIDDEN | MD_ST_SPACE))) st[b - start] |= (unsigned char)style;
        i = close + k - 1;
    }
}

void md_inline_styles(const char *s, size_t start, size_t end, unsigned char *styles)
{
    if (end <= start) return;
    memset(styles, 0, end - start);
    mark_code_spans(s, start, end, styles);
    mark_links(s, start, end, styles);
    mark_pairs(s, start, end, styles, "**", MD_ST_BOLD);
    mark_pairs(s, start, end, styles, "*", MD_ST_ITALIC);
    mark_pairs(s, start, end, styles, "_", MD_ST_ITALIC);
}

/* The end of the line that starts at pos. */
static size_t line_end(const char *s, size_t n, size_t pos)
{
    while (pos < n && s[pos] != '\n') pos++;
    return pos;
}

/* A table line starts with '|' after at most 3 spaces. */
static int is_table_line(const char *s, size_t start, size_t end)
{
    size_t i = start;
    while (i < end && i - start < 3 && s[i] == ' ') i++;
    return i < end && s[i] == '|';
}

int md_table_cells(const char *s, size_t start, size_t end, size_t *cell_start, size_t *cell_end, int max_cells)
{
    while (end > start && (s[end - 1] == ' ' || s[end - 1] == '\r')) end--;
    size_t i = start;
    while (i < end && s[i] == ' ') i++;
    if (i < end && s[i] == '|') i++;
    if (end > i && s[end - 1] == '|' && (end - 1 == start || s[end - 2] != '\\')) end--;
    int n = 0;
    while (i <= end && n < max_cells) {
        size_t j = i;
        while (j < end && !(s[j] == '|' && (j == start || s[j - 1] != '\\'))) j++;   /* a backslash-escaped bar is text */
        size_t b = i, e = j;
        while (b < e && s[b] == ' ') b++;
        while (e > b && s[e - 1] == ' ') e--;
        cell_start[n] = b;
        cell_end[n] = e;
        n++;
        if (j >= end) break;
        i = j + 1;
    }
    return n;
}

int md_table_is_rule(const char *s, size_t start, size_t end)
{
    size_t cs[64], ce[64];
    if (!is_table_line(s, start, end)) return 0;
    int n = md_table_cells(s, start, end, cs, ce, 64);
    for (int c = 0; c < n; c++) {
        size_t b = cs[c], e = ce[c], dashes = 0;
        if (b < e && s[b] == ':') b++;
        if (e > b && s[e - 1] == ':') e--;
        for (size_t i = b; i < e; i++, dashes++)
            if (s[i] != '-') return 0;
        if (!dashes) return 0;
    }
    return n > 0;
}

int md_table_at(const char *s, size_t n, size_t pos, size_t *table_end)
{
    size_t e1 = line_end(s, n, pos);
    if (!is_table_line(s, pos, e1) || e1 >= n) return 0;
    size_t p2 = e1 + 1, e2 = line_end(s, n, p2);
    if (!md_table_is_rule(s, p2, e2)) return 0;
    size_t p = e2 < n ? e2 + 1 : n;
    while (p < n) {
        size_t e = line_end(s, n, p);
        if (!is_table_line(s, p, e)) break;
        p = e < n ? e + 1 : n;
    }
    *table_end = p;
    return 1;
}

int md_code_block(const char *s, size_t n, int which, size_t *start, size_t *end)
{
    size_t pos = 0, body = 0;
    int fence = 0, seen = 0;
    md_line l;
    while (pos < n) {
        size_t next = md_next_line(s, n, pos, &fence, &l);
        if (l.kind == MD_FENCE_OPEN) {
            body = next;
        } else if (l.kind == MD_FENCE_CLOSE || (l.kind == MD_CODE && next >= n)) {
            if (++seen == which) {                 /* the lines between the fences, without the last '\n' */
                *start = body;
                *end = l.kind == MD_FENCE_CLOSE ? (l.start > body ? l.start - 1 : body) : l.end;
                return 0;
            }
        }
        pos = next;
    }
    return -1;
}
