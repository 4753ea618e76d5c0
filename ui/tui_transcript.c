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
    t->wrapped_lines[t->n_lines++] = (tui_line){entry, part, first, off, len, MD_NONE, 0, off};
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

/* Columns of s[i] as drawn: a bold marker takes none. */
static int md_char(const char *s, size_t i, size_t end, int markers, int *cols)
{
    if (markers && md_is_bold_marker(s, i, end)) { *cols = 0; return 2; }
    uint32_t cp;
    int len = tui_utf8_decode(s + i, end - i, &cp);
    *cols = tui_cp_width(cp);
    return len;
}

/* Wrap one markdown source range into lines of at most avail columns: at the
 * last space that fits (hard = anywhere, for code), bold markers taking no
 * room. Every line is tagged with its kind for drawing. */
static void wrap_md_range(tui_transcript *t, int entry, const md_line *ml, size_t start, size_t end, int avail,
                          int hard, int markers)
{
    if (avail < 1) avail = 1;
    size_t pos = start;
    do {
        size_t i = pos, space_end = 0;
        int w = 0, cw;
        while (i < end) {
            int len = md_char(t->entries[entry].text, i, end, markers, &cw);
            if (w + cw > avail) break;
            w += cw;
            i += (size_t)len;
            if (t->entries[entry].text[i - 1] == ' ') space_end = i;
        }
        size_t stop = i;
        if (i < end) {
            if (!hard && space_end > pos) stop = space_end;
            else if (i == pos) stop = pos + (size_t)md_char(t->entries[entry].text, i, end, markers, &cw);
        }
        push_line(t, entry, TL_TEXT, 0, pos, stop - pos);
        tui_line *L = &t->wrapped_lines[t->n_lines - 1];
        L->md = ml->kind;
        L->level = ml->level;
        L->src_start = start;
        pos = stop;
    } while (pos < end);
}

/* An answer rendered: code blocks as boxes (a top line with the language,
 * verbatim lines, a bottom line), headings and paragraphs word-wrapped. */
static void wrap_markdown(tui_transcript *t, int entry, int width)
{
    const tui_entry *e = &t->entries[entry];
    const char *s = e->text ? e->text : "";
    size_t n = e->len, pos = 0;
    int in_fence = 0;
    md_line ml;
    do {
        size_t next = md_next_line(s, n, pos, &in_fence, &ml);
        switch (ml.kind) {
        case MD_FENCE_OPEN:
        case MD_FENCE_CLOSE:
            push_line(t, entry, TL_TEXT, 0, ml.body, ml.body_end - ml.body);
            t->wrapped_lines[t->n_lines - 1].md = ml.kind;
            break;
        case MD_CODE:
            wrap_md_range(t, entry, &ml, ml.start, ml.end, width - 4, 1, 0);
            break;
        case MD_HEADING:
            wrap_md_range(t, entry, &ml, ml.body, ml.body_end, width, 0, 0);
            break;
        default:
            wrap_md_range(t, entry, &ml, ml.start, ml.end, width, 0, md_line_has_bold(s, ml.start, ml.end));
            break;
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

/* One rendered answer line: box parts in the dim colour, headings bold
 * (and underlined at level 1), paragraphs with **bold** spans. */
static void draw_md_line(const tui_transcript *t, WINDOW *w, const tui_line *L, const char *s, size_t n)
{
    const int uni = tui_glyph()->unicode, width = t->width;
    attr_t dim = tui_attr(TR_DIM);
    if (L->md == MD_FENCE_OPEN || L->md == MD_FENCE_CLOSE) {
        int top = L->md == MD_FENCE_OPEN;
        wattrset(w, dim);
        waddstr(w, top ? (uni ? "\u250c" : "+") : (uni ? "\u2514" : "+"));
        int used = 1;
        if (top && L->len) {
            put_rule(w, 1);
            waddch(w, ' ');
            wattrset(w, dim | A_BOLD);
            used += 2 + tui_put_text(w, s + L->off, L->len, width - 6);
            wattrset(w, dim);
            waddch(w, ' ');
            used++;
        }
        if (width - used - 1 > 0) put_rule(w, width - used - 1);
        waddstr(w, top ? (uni ? "\u2510" : "+") : (uni ? "\u2518" : "+"));
        return;
    }
    if (L->md == MD_CODE) {
        const char *bar = uni ? "\u2502" : "|";
        int y = getcury(w);
        wattrset(w, dim);
        waddstr(w, bar);
        waddch(w, ' ');
        wattrset(w, A_NORMAL);
        tui_put_text(w, s + L->off, L->len, width - 4);
        wattrset(w, dim);
        mvwaddstr(w, y, width - 1, bar);
        return;
    }
    if (L->md == MD_HEADING) {
        wattrset(w, A_BOLD | (L->level == 1 ? A_UNDERLINE : 0));
        tui_put_text(w, s + L->off, L->len, width);
        return;
    }
    /* paragraph: bold state at the start of this wrapped piece, then toggles */
    size_t line_end = L->off + L->len;
    while (line_end < n && s[line_end] != '\n') line_end++;
    int markers = md_line_has_bold(s, L->src_start, line_end), bold = 0;
    for (size_t i = L->src_start; markers && i < L->off; i++)
        if (md_is_bold_marker(s, i, line_end)) { bold = !bold; i++; }
    size_t i = L->off, seg = i, end = L->off + L->len;
    int used = 0;
    while (i <= end) {
        int at_marker = i < end && markers && md_is_bold_marker(s, i, end);
        if (i == end || at_marker) {
            wattrset(w, bold ? A_BOLD : A_NORMAL);
            used += tui_put_text(w, s + seg, i - seg, width - used);
            if (i == end) break;
            bold = !bold;
            i += 2;
            seg = i;
            continue;
        }
        uint32_t cp;
        i += (size_t)tui_utf8_decode(s + i, end - i, &cp);
    }
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
