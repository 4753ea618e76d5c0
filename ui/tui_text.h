/* tui_text.h - UTF-8 text on the screen for the terminal chat: decoding,
 * display widths and drawing that never splits a character. Separate so
 * the readline bridge can use it without the rest of the UI state. */
#ifndef K3_TUI_TEXT_H
#define K3_TUI_TEXT_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>
#include <stddef.h>
#include <stdint.h>

/* Decode one UTF-8 character; returns its byte length (>= 1 when n > 0);
 * invalid bytes decode as U+FFFD of length 1. */
int tui_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Bytes of s that form whole characters (a cut multibyte tail is left out). */
size_t tui_utf8_whole(const char *s, size_t n);
/* Columns a code point takes on screen (0, 1 or 2; controls count 1 as '?'). */
int tui_cp_width(uint32_t cp);
/* Columns of a UTF-8 string. */
int tui_text_width(const char *s, size_t n);
/* Bytes of s that fit in max_cols columns (never splitting a character). */
size_t tui_text_fit(const char *s, size_t n, int max_cols);
/* Draw UTF-8 text at the window's cursor, at most max_cols columns;
 * returns the columns drawn. Controls become '?', non-ASCII becomes '?' in
 * ASCII mode. */
int tui_put_text(WINDOW *w, const char *s, size_t n, int max_cols);
/* The same for a NUL-terminated string. */
int tui_put(WINDOW *w, const char *s, int max_cols);

/* 1 when the locale is UTF-8 (Unicode glyphs), 0 for the ASCII fallback. */
int tui_text_unicode(void);

#endif
