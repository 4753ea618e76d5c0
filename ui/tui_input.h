/* tui_input.h - the readline bridge of the terminal chat. GNU readline runs
 * in its callback ("alternate") interface: the UI feeds it bytes it read
 * with curses, readline's own signal, SIGWINCH, terminal-prep and output
 * handling are off, and the input line is drawn by us in a curses window.
 * Kept apart from the history store's header (readline has its own
 * history_* names) and from the rest of the UI state. */
#ifndef K3_TUI_INPUT_H
#define K3_TUI_INPUT_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <curses.h>
#include <stddef.h>

/* Tab completion: candidates for `word` (which spans [start, end) of
 * `line`), as a NULL-terminated malloc'd array of malloc'd strings, or NULL. */
typedef char **(*tui_complete_fn)(void *ctx, const char *line, int start, int end, const char *word);
/* Readline wants to list several completions: show them somewhere. */
typedef void (*tui_matches_fn)(void *ctx, char **matches, int n);

/* Set readline up (history file loaded) with the given prompt. */
void tui_input_open(const char *prompt, tui_complete_fn complete, tui_matches_fn show_matches, void *ctx);
/* Save the history file and uninstall the handler. */
void tui_input_close(void);
/* Give readline bytes typed by the user (escape sequences whole). */
void tui_input_feed(const char *bytes, size_t n);
/* Insert text literally at the cursor (bracketed paste; may hold '\n'). */
void tui_input_insert(const char *text);
/* An accepted line (malloc'd), or NULL when none is waiting. *eof is set
 * when readline reported end of input instead of a line. */
char *tui_input_take_line(int *eof);
int tui_input_is_empty(void);
int tui_input_in_search(void);
/* Ctrl-C: leave a search, or empty the line. */
void tui_input_cancel(void);
/* Replace the line (puts back a message that could not be sent). */
void tui_input_set_text(const char *text);
/* Remember a sent line in the history (and its file, at once). */
void tui_input_remember(const char *line);
/* Rows the prompt and text need at this width (at least 1, at most max_rows). */
int tui_input_rows(int cols, int max_rows);
/* Draw prompt and text into w and leave the cursor at the edit point. */
void tui_input_draw(WINDOW *w);
void tui_input_resize(int rows, int cols);
/* 1 if readline changed the line since the last draw. */
int tui_input_changed(void);

#endif
