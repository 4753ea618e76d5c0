/* tui_transcript.c - the conversation as the screen shows it: a list of
 * entries (user messages, answers, notices), word-wrapped into screen lines
 * by display width, drawn bottom-aligned with a scroll offset. Only the
 * entry being streamed is re-wrapped as tokens arrive. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "markdown.h"
#include "tui_internal.h"
#include "text_append.h"

/* At exit. */
void tui_transcript_free(tui_transcript *t)
{
    tui_transcript_clear(t);
    free(t->entries);
    free(t->wrapped_lines);
    memset(t, 0, sizeof *t);
}

/* For /clear, /new and /resume: entries go, the line arrays are reused. */
void tui_transcript_clear(tui_transcript *t)
{
    for (int i = 0; i < t->n_entries; i++) {
        free(t->entries[i].text);
        free(t->entries[i].footer);
        free(t->entries[i].reasoning);
    }
    t->n_entries = 0;
    t->n_lines = 0;
    t->wrapped_entries = 0;
    t->scroll = 0;
}

/* Everything from entry e on must be wrapped again. */
static void invalidate_from(tui_transcript *t, int e)
{
    if (e < t->wrapped_entries) {
        t->n_lines = t->entries[e].first_line;
        t->wrapped_entries = e;
    }
}

/* Entries are only appended (or the last one dropped), so wrapping stays incremental. */
int tui_transcript_add(tui_transcript *t, tui_entry_kind kind, const char *text)
{
    if (t->n_entries == t->cap_entries) {
        int cap = t->cap_entries ? t->cap_entries * 2 : 64;
        tui_entry *g = realloc(t->entries, (size_t)cap * sizeof *g);
        if (!g) return -1;
        t->entries = g;
        t->cap_entries = cap;
    }
    tui_entry *e = &t->entries[t->n_entries];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    t->n_entries++;
    if (text && *text) tui_transcript_append(t, t->n_entries - 1, text, strlen(text));
    return t->n_entries - 1;
}

/* Notices and errors from commands and the controller. */
void tui_transcript_notice(tui_transcript *t, tui_entry_kind kind, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    tui_transcript_add(t, kind, s);
    free(s);
}

/* Streaming: grow an entry; only it (and what follows) is wrapped again. */
void tui_transcript_append(tui_transcript *t, int entry, const char *text, size_t len)
{
    if (entry < 0 || entry >= t->n_entries || len == 0) return;
    tui_entry *e = &t->entries[entry];
    if (text_append(&e->text, &e->len, &e->cap, text, len)) return;
    invalidate_from(t, entry);
}

/* Streaming reasoning: kept apart from the answer's text so it is drawn dim
 * above it and can be collapsed; only this entry (and what follows) is
 * wrapped again. */
void tui_transcript_append_reasoning(tui_transcript *t, int entry, const char *text, size_t len)
{
    if (entry < 0 || entry >= t->n_entries || len == 0) return;
    tui_entry *e = &t->entries[entry];
    if (text_append(&e->reasoning, &e->reasoning_len, &e->reasoning_cap, text, len)) return;
    invalidate_from(t, entry);
}

/* How the answer ended (tokens, speed, interrupted) under it. */
void tui_transcript_set_footer(tui_transcript *t, int entry, const char *footer)
{
    if (entry < 0 || entry >= t->n_entries) return;
    free(t->entries[entry].footer);
    t->entries[entry].footer = footer ? strdup(footer) : NULL;
    invalidate_from(t, entry);
}

/* A message the controller refused to send leaves no empty answer behind. */
void tui_transcript_pop(tui_transcript *t)
{
    if (t->n_entries == 0) return;
    invalidate_from(t, t->n_entries - 1);
    tui_entry *e = &t->entries[--t->n_entries];
    free(e->text);
    free(e->footer);
    free(e->reasoning);
}

/* PgUp/PgDn move by a screen less one line, so a line of context stays. */
void tui_transcript_page(tui_transcript *t, int pages)
{
    int step = t->view_rows > 2 ? t->view_rows - 1 : 1;
    t->scroll += pages * step;
    if (t->scroll < 0) t->scroll = 0;
}

/* Screen lines grow in one array. */
static int push_line(tui_transcript *t, int entry, tui_line_part part, int first, size_t off, size_t len)
{
    if (t->n_lines == t->cap_lines) {
        int cap = t->cap_lines ? t->cap_lines * 2 : 256;
        tui_line *g = realloc(t->wrapped_lines, (size_t)cap * sizeof *g);
        if (!g) return -1;
        t->wrapped_lines = g;
        t->cap_lines = cap;
    }
    t->wrapped_lines[t->n_lines++] = (tui_line){.entry = entry, .part = part, .first = first, .off = off, .len = len,
                                                         .md = MD_NONE, .level = 0, .src_start = off};
    return 0;
}

/* /reasoning: the same entries wrapped again, reasoning whole or one line. */
void tui_transcript_set_reasoning_collapsed(tui_transcript *t, int collapsed)
{
    t->reasoning_collapsed = collapsed;
    t->width = 0;                                /* forces a full rewrap at the next draw */
}

/* /raw: the same entries wrapped again another way. */
void tui_transcript_set_raw(tui_transcript *t, int raw)
{
    t->raw = raw;
    t->width = 0;                                /* forces a full rewrap at the next draw */
}

/* Columns of s[i] as drawn and its length in bytes: a marker (styles[i -
 * base] hidden) takes none, the ']' of a link one. */
static int md_char(const char *s, size_t i, size_t end, const unsigned char *styles, size_t base, int *cols)
{
    uint32_t cp;
    int len = tui_utf8_decode(s + i, end - i, &cp);
    unsigned char st = styles ? styles[i - base] : 0;
    *cols = st & MD_ST_HIDDEN ? 0 : st & MD_ST_SPACE ? 1 : tui_cp_width(cp);
    return st & (MD_ST_HIDDEN | MD_ST_SPACE) ? 1 : len;
}

/* Wrap one markdown source range into lines of at most avail columns: at the
 * last space that fits (hard = anywhere, for code), markers taking no room
 * (styles of the line from ml->start, or NULL). Every line is tagged with
 * its kind for drawing. */
static void wrap_md_range(tui_transcript *t, int entry, const md_line *ml, size_t start, size_t end, int avail,
                          int hard, const unsigned char *styles)
{
    const char *s = t->entries[entry].text;
    if (avail < 1) avail = 1;
    size_t pos = start;
    do {
        size_t i = pos, space_end = 0;
        int w = 0, cw;
        while (i < end) {
            int len = md_char(s, i, end, styles, ml->start, &cw);
            if (w + cw > avail) break;
            w += cw;
            i += (size_t)len;
            if (s[i - 1] == ' ' || (styles && styles[i - 1 - ml->start] & MD_ST_SPACE)) space_end = i;
        }
        size_t stop = i;
        if (i < end) {
            if (!hard && space_end > pos) stop = space_end;
            else if (i == pos) stop = pos + (size_t)md_char(s, i, end, styles, ml->start, &cw);
        }
        push_line(t, entry, TL_TEXT, 0, pos, stop - pos);
        tui_line *L = &t->wrapped_lines[t->n_lines - 1];
        L->md = ml->kind;
        L->level = ml->level;
        L->src_start = ml->start;
        pos = stop;
    } while (pos < end);
}

/* The most columns a table may have, and its column widths. */
#define MD_TABLE_MAX_COLS 32

/* Display widths of a table's columns (the widest cell of each), and the
 * number of columns. */
static int table_widths(const char *s, size_t n, size_t start, int *widths)
{
    size_t end, cs[MD_TABLE_MAX_COLS], ce[MD_TABLE_MAX_COLS];
    int n_cols = 0;
    if (!md_table_at(s, n, start, &end)) return 0;
    memset(widths, 0, MD_TABLE_MAX_COLS * sizeof *widths);
    for (size_t p = start; p < end;) {
        size_t e = p;
        while (e < n && s[e] != '\n') e++;
        if (!md_table_is_rule(s, p, e)) {
            int k = md_table_cells(s, p, e, cs, ce, MD_TABLE_MAX_COLS);
            for (int c = 0; c < k; c++) {
                int w = tui_text_width(s + cs[c], ce[c] - cs[c]);
                if (w > widths[c]) widths[c] = w;
            }
            if (k > n_cols) n_cols = k;
        }
        p = e < n ? e + 1 : n;
    }
    for (int c = 0; c < n_cols; c++)
        if (widths[c] < 3) widths[c] = 3;        /* room for a rule of at least --- */
    return n_cols;
}

/* A table as aligned columns when it fits the width: one screen line per
 * source line; *pos moves past it. 0 when there is no table at *pos or it
 * is too wide (then its lines wrap as text). */
static int wrap_table(tui_transcript *t, int entry, size_t *pos, int width)
{
    const tui_entry *e = &t->entries[entry];
    int widths[MD_TABLE_MAX_COLS];
    size_t end;
    int n_cols = table_widths(e->text, e->len, *pos, widths);
    if (!n_cols || !md_table_at(e->text, e->len, *pos, &end)) return 0;
    int total = 3 * (n_cols - 1);
    for (int c = 0; c < n_cols; c++) total += widths[c];
    if (total > width) return 0;
    for (size_t p = *pos; p < end;) {
        size_t le = p;
        while (le < e->len && e->text[le] != '\n') le++;
        push_line(t, entry, TL_TEXT, 0, p, le - p);
        tui_line *L = &t->wrapped_lines[t->n_lines - 1];
        L->md = md_table_is_rule(e->text, p, le) ? MD_TABLE_RULE : MD_TABLE_ROW;
        L->level = p == *pos;                    /* the header row */
        L->src_start = *pos;                     /* the table's start: draw finds its widths there */
        p = le < e->len ? le + 1 : e->len;
    }
    *pos = end;
    return 1;
}

/* An answer rendered: code blocks between two rules (the code itself at
 * column 0, nothing beside it, so a mouse selection takes only code),
 * tables as aligned columns, headings and paragraphs word-wrapped. */
static void wrap_markdown(tui_transcript *t, int entry, int width)
{
    const tui_entry *e = &t->entries[entry];
    const char *s = e->text ? e->text : "";
    size_t n = e->len, pos = 0;
    int in_fence = 0;
    md_line ml;
    do {
        if (!in_fence && wrap_table(t, entry, &pos, width)) continue;
        size_t next = md_next_line(s, n, pos, &in_fence, &ml);
        switch (ml.kind) {
        case MD_FENCE_OPEN:
        case MD_FENCE_CLOSE:
            push_line(t, entry, TL_TEXT, 0, ml.body, ml.body_end - ml.body);
            t->wrapped_lines[t->n_lines - 1].md = ml.kind;
            break;
        case MD_CODE:
            wrap_md_range(t, entry, &ml, ml.start, ml.end, width, 1, NULL);
            break;
        case MD_HEADING:
            wrap_md_range(t, entry, &ml, ml.body, ml.body_end, width, 0, NULL);
            break;
        default: {
            unsigned char *styles = ml.end > ml.start ? malloc(ml.end - ml.start) : NULL;
            if (styles) md_inline_styles(s, ml.start, ml.end, styles);
            wrap_md_range(t, entry, &ml, ml.start, ml.end, width, 0, styles);
            free(styles);
            break;
        }
        }
        pos = next;
    } while (pos < n);
}

/* What goes in front of an entry's first line, and how far its other lines
 * are indented. */
static const char *entry_prefix(tui_entry_kind k, int *indent)
{
    const tui_glyphs *gl = tui_glyph();
    *indent = 2;
    switch (k) {
    case TE_USER: return gl->unicode ? "\u203a " : "> ";
    case TE_ASSISTANT: *indent = 0; return "";
    case TE_SYSTEM: return gl->unicode ? "\u2699 " : "S ";
    case TE_NOTICE: return gl->unicode ? "\u00b7 " : "* ";
    case TE_ERROR: return "! ";
    }
    return "";
}

/* Word-wrap one text (entry text or footer) into lines of at most width
 * columns: break after the last space that fits, else before the character
 * that does not; '\n' always breaks. An empty text still gets one line. */
static void wrap_text(tui_transcript *t, int entry, tui_line_part part, const char *s, size_t n,
                      int prefix_w, int indent, int width)
{
    size_t pos = 0;
    int first = 1;
    for (;;) {
        int avail = width - (first ? prefix_w : indent);
        if (avail < 1) avail = 1;
        size_t i = pos, space_end = 0;
        int w = 0;
        uint32_t cp;
        while (i < n && s[i] != '\n') {
            int len = tui_utf8_decode(s + i, n - i, &cp);
            int cw = tui_cp_width(cp);
            if (w + cw > avail) break;
            w += cw;
            i += (size_t)len;
            if (cp == ' ') space_end = i;
        }
        size_t end = i;
        if (i < n && s[i] != '\n') {                 /* line full */
            if (space_end > pos) end = space_end;
            else if (i == pos) end = pos + (size_t)tui_utf8_decode(s + i, n - i, &cp);  /* too wide: force */
        }
        push_line(t, entry, part, first && part == TL_TEXT, pos, end - pos);
        first = 0;
        pos = end;
        if (pos < n && s[pos] == '\n') {
            pos++;
            if (pos == n) {                          /* trailing newline: the cursor line */
                push_line(t, entry, part, 0, pos, 0);
                return;
            }
        } else if (pos >= n) {
            return;
        }
    }
}

/* Bring the line list up to date for the given width. Returns how many
 * lines were added at the bottom (negative if it shrank). */
static int rewrap(tui_transcript *t, int width)
{
    int before = t->n_lines;
    if (width != t->width) {
        t->width = width;
        t->n_lines = 0;
        t->wrapped_entries = 0;
        before = -1;                                 /* everything moved */
    }
    for (int e = t->wrapped_entries; e < t->n_entries; e++) {
        tui_entry *en = &t->entries[e];
        en->first_line = t->n_lines;
        int notice = en->kind == TE_NOTICE || en->kind == TE_ERROR;
        int prev_notice = e > 0 && (t->entries[e - 1].kind == TE_NOTICE || t->entries[e - 1].kind == TE_ERROR);
        if (e > 0 && !(notice && prev_notice)) push_line(t, e, TL_BLANK, 0, 0, 0);
        int indent;
        const char *prefix = entry_prefix(en->kind, &indent);
        int pw = tui_text_width(prefix, strlen(prefix));
        if (en->reasoning_len) {                     /* a thinking model's reasoning, dim, above its answer */
            const int before_reasoning = t->n_lines;
            wrap_text(t, e, TL_REASONING, en->reasoning, en->reasoning_len, indent + 2, indent + 2, width);
            if (t->reasoning_collapsed && t->n_lines > before_reasoning + 1) t->n_lines = before_reasoning + 1;
        }
        if (en->kind == TE_ASSISTANT && !t->raw && en->len) wrap_markdown(t, e, width);
        else wrap_text(t, e, TL_TEXT, en->text ? en->text : "", en->len, pw, indent, width);
        if (en->footer) wrap_text(t, e, TL_FOOTER, en->footer, strlen(en->footer), indent, indent, width);
    }
    t->wrapped_entries = t->n_entries;
    return before < 0 ? 0 : t->n_lines - before;
}

/* Who said it decides the colour. */
static attr_t entry_attr(tui_entry_kind k)
{
    switch (k) {
    case TE_USER: return tui_attr(TR_USER);
    case TE_SYSTEM: return tui_attr(TR_DIM);
    case TE_NOTICE: return tui_attr(TR_NOTICE);
    case TE_ERROR: return tui_attr(TR_ERROR);
    default: return A_NORMAL;
    }
}

/* A horizontal rule of n cells. */
static void put_rule(WINDOW *w, int n)
{
    const char *h = tui_glyph()->hline;
    for (int i = 0; i < n; i++) waddstr(w, h);
}

/* The attributes of an inline style (markdown.h, MD_ST_*). */
static attr_t style_attr(unsigned char st)
{
    attr_t a = A_NORMAL;
    if (st & MD_ST_BOLD) a |= A_BOLD;
    if (st & MD_ST_ITALIC) a |= tui_italic_attr();
    if (st & MD_ST_CODE) a |= tui_term_colour() ? tui_attr(TR_CODE) : A_REVERSE;
    if (st & MD_ST_LINK) a |= A_UNDERLINE;
    if (st & MD_ST_URL) a |= tui_attr(TR_DIM);
    return a;
}

/* One row of a table: cells padded to the column widths, " │ " between
 * them (dim); the rule under the header as ─ and ┼. */
static void draw_table_line(const tui_transcript *t, WINDOW *w, const tui_line *L, const char *s, size_t n)
{
    int widths[MD_TABLE_MAX_COLS];
    int n_cols = table_widths(s, n, L->src_start, widths);
    const int uni = tui_glyph()->unicode;
    attr_t dim = tui_attr(TR_DIM);
    size_t cs[MD_TABLE_MAX_COLS], ce[MD_TABLE_MAX_COLS];
    int k = md_table_cells(s, L->off, L->off + L->len, cs, ce, MD_TABLE_MAX_COLS), used = 0;
    for (int c = 0; c < n_cols && used < t->width; c++) {
        if (c) {
            wattrset(w, dim);
            waddstr(w, L->md == MD_TABLE_RULE ? (uni ? "\u2500\u253c\u2500" : "-+-") : (uni ? " \u2502 " : " | "));
            used += 3;
        }
        if (L->md == MD_TABLE_RULE) {
            wattrset(w, dim);
            put_rule(w, widths[c]);
        } else {
            wattrset(w, L->level ? A_BOLD : A_NORMAL);
            int cw = c < k ? tui_put_text(w, s + cs[c], ce[c] - cs[c], widths[c]) : 0;
            for (; cw < widths[c] && c < n_cols - 1; cw++) waddch(w, ' ');
        }
        used += widths[c];
    }
}

/* One rendered answer line: code between dim rules (the top one with the
 * language), code lines in the code colour at column 0, headings bold (and
 * underlined at level 1), tables in columns, paragraphs with their inline
 * styles and without the markers. */
static void draw_md_line(const tui_transcript *t, WINDOW *w, const tui_line *L, const char *s, size_t n)
{
    const int width = t->width;
    attr_t dim = tui_attr(TR_DIM);
    if (L->md == MD_FENCE_OPEN || L->md == MD_FENCE_CLOSE) {
        wattrset(w, dim);
        int used = 0;
        if (L->md == MD_FENCE_OPEN && L->len) {
            put_rule(w, 2);
            waddch(w, ' ');
            wattrset(w, dim | A_BOLD);
            used = 4 + tui_put_text(w, s + L->off, L->len, width - 6);
            wattrset(w, dim);
            waddch(w, ' ');
        }
        if (width - used > 0) put_rule(w, width - used);
        return;
    }
    if (L->md == MD_CODE) {
        wattrset(w, tui_term_colour() ? tui_attr(TR_CODE) : A_NORMAL);
        tui_put_text(w, s + L->off, L->len, width);
        return;
    }
    if (L->md == MD_HEADING) {
        wattrset(w, A_BOLD | (L->level == 1 ? A_UNDERLINE : 0));
        tui_put_text(w, s + L->off, L->len, width);
        return;
    }
    if (L->md == MD_TABLE_ROW || L->md == MD_TABLE_RULE) {
        draw_table_line(t, w, L, s, n);
        return;
    }
    /* paragraph: the styles of the whole source line, drawn in runs */
    size_t line_end = L->off + L->len;
    while (line_end < n && s[line_end] != '\n') line_end++;
    unsigned char *styles = line_end > L->src_start ? malloc(line_end - L->src_start) : NULL;
    if (!styles) {
        tui_put_text(w, s + L->off, L->len, width);
        return;
    }
    md_inline_styles(s, L->src_start, line_end, styles);
    size_t i = L->off, end = L->off + L->len;
    int used = 0;
    while (i < end && used < width) {
        unsigned char st = styles[i - L->src_start];
        if (st & MD_ST_HIDDEN) { i++; continue; }
        if (st & MD_ST_SPACE) {
            wattrset(w, A_NORMAL);
            waddch(w, ' ');
            used++;
            i++;
            continue;
        }
        size_t j = i;
        while (j < end && styles[j - L->src_start] == st) j++;
        wattrset(w, style_attr(st));
        used += tui_put_text(w, s + i, j - i, width - used);
        i = j;
    }
    free(styles);
}

/* Bottom-aligned drawing: the newest line sits on the last row unless the
 * user scrolled up; while scrolled, new text does not move the view. */
void tui_transcript_draw(tui_transcript *t, WINDOW *w)
{
    int rows, cols;
    getmaxyx(w, rows, cols);
    int added = rewrap(t, cols - t->right_margin > 10 ? cols - t->right_margin : cols);
    if (t->scroll > 0 && added > 0) t->scroll += added;
    int max_scroll = t->n_lines > rows ? t->n_lines - rows : 0;
    if (t->scroll > max_scroll) t->scroll = max_scroll;
    t->view_rows = rows;
    werase(w);
    int bottom = t->n_lines - 1 - t->scroll;
    int top = bottom - rows + 1;
    for (int r = 0; r < rows; r++) {
        int li = top + r;
        if (li < 0 || li >= t->n_lines) continue;
        const tui_line *L = &t->wrapped_lines[li];
        if (L->part == TL_BLANK) continue;
        const tui_entry *e = &t->entries[L->entry];
        int indent;
        const char *prefix = entry_prefix(e->kind, &indent);
        wmove(w, r, 0);
        attr_t a = L->part == TL_FOOTER || L->part == TL_REASONING ? tui_attr(TR_DIM) : entry_attr(e->kind);
        wattrset(w, a);
        int used = 0;
        if (L->first) used = tui_put(w, prefix, cols);
        else if (L->part == TL_REASONING) { wmove(w, r, indent + 2); used = indent + 2; }
        else if (L->part == TL_FOOTER || indent) { wmove(w, r, indent); used = indent; }
        const char *src = L->part == TL_FOOTER ? e->footer : L->part == TL_REASONING ? e->reasoning : e->text;
        if (L->md != MD_NONE && src) draw_md_line(t, w, L, src, e->len);
        else if (src) tui_put_text(w, src + L->off, L->len, t->width - used);
        wattrset(w, A_NORMAL);
    }
    wnoutrefresh(w);
}
