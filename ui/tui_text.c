/* tui_text.c - UTF-8 for the screen: our own decoder (so invalid bytes and
 * a non-UTF-8 locale cannot derail drawing), display widths, and drawing
 * that never splits a character and never sends control bytes to the
 * terminal. */
#include <stdio.h>
#include <string.h>
#include <wchar.h>
#include "tui_text.h"

/* Decode by hand: mbrtowc depends on the locale, and the transcript is
 * always UTF-8 whatever the locale says. Overlongs, surrogates and cut
 * sequences are one invalid byte each, shown as U+FFFD. */
int tui_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) { *cp = 0; return 0; }
    unsigned c = u[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = 0xFFFD; return 1; }
    if ((size_t)len > n) { *cp = 0xFFFD; return 1; }
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (u[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = 0xFFFD; return 1; }
    *cp = v;
    return len;
}

/* Streaming pieces may end inside a character; the caller holds the tail
 * back until the rest arrives, so a character is never drawn in halves. */
size_t tui_utf8_whole(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && (u[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return n;                         /* only continuation bytes: invalid, pass on */
    unsigned c = u[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (c < 0xC0) return n;                       /* ASCII last */
    if (back + 1 < need) return i - 1;            /* the lead byte's sequence is cut */
    return n;
}

/* Invisible format characters (zero-width joiners and spaces, direction
 * marks, variation selectors, tags, BOM): terminals disagree on whether they
 * take a cell, which would shift everything right of them, so they are not
 * drawn at all. */
static int invisible_format(uint32_t cp)
{
    return (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) ||
           (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF || cp == 0x00AD || (cp >= 0xE0000 && cp <= 0xE01EF);
}

/* Width of a code point as the terminal will draw it; anything wcwidth
 * calls unprintable is drawn as one '?' (see tui_put_text). */
int tui_cp_width(uint32_t cp)
{
    if (invisible_format(cp)) return 0;
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) return 1;
    if (cp < 0x7F) return 1;
    if (!tui_text_unicode()) return 1;
    int w = wcwidth((wchar_t)cp);
    return w < 0 ? 1 : w;
}

/* Sum of widths, for aligning text. */
int tui_text_width(const char *s, size_t n)
{
    int w = 0;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        i += (size_t)tui_utf8_decode(s + i, n - i, &cp);
        w += tui_cp_width(cp);
    }
    return w;
}

/* The longest prefix that fits, for clipping labels and status fields. */
size_t tui_text_fit(const char *s, size_t n, int max_cols)
{
    int w = 0;
    uint32_t cp;
    size_t i = 0;
    while (i < n) {
        int len = tui_utf8_decode(s + i, n - i, &cp);
        int cw = tui_cp_width(cp);
        if (w + cw > max_cols) break;
        w += cw;
        i += (size_t)len;
    }
    return i;
}

/* One place that turns text into cells: controls and (in ASCII mode)
 * non-ASCII become '?', unprintables become U+FFFD, and nothing past
 * max_cols or the window edge is drawn, so a wide character is never cut. */
int tui_put_text(WINDOW *w, const char *s, size_t n, int max_cols)
{
    int y, x, h, wd;
    getyx(w, y, x);
    getmaxyx(w, h, wd);
    (void)h;
    (void)y;
    if (max_cols > wd - x) max_cols = wd - x;
    int used = 0;
    uint32_t cp;
    const int unicode = tui_text_unicode();
    for (size_t i = 0; i < n;) {
        int len = tui_utf8_decode(s + i, n - i, &cp);
        int cw = tui_cp_width(cp);
        if (used + cw > max_cols) break;
        if (invisible_format(cp)) {
            /* not drawn (see invisible_format) */
        } else if (cw == 0 && used == 0 && x == 0) {
            /* a combining mark with nothing to combine with: dropped */
        } else if (cp == '\t') {
            waddch(w, ' ');
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || (!unicode && cp >= 0x80)) {
            waddch(w, '?');
        } else if (cp < 0x80) {
            waddch(w, (chtype)cp);
        } else if (wcwidth((wchar_t)cp) < 0) {
            waddstr(w, "\xEF\xBF\xBD");
        } else {
            waddnstr(w, s + i, len);
        }
        used += cw;
        i += (size_t)len;
    }
    return used;
}

/* tui_put_text for C strings. */
int tui_put(WINDOW *w, const char *s, int max_cols)
{
    return tui_put_text(w, s, strlen(s), max_cols);
}
