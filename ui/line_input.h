/* line_input.h - read one line of user input: GNU readline (editing, history
 * file, Ctrl-R) on a terminal, plain getline on a pipe. Kept apart so that
 * readline's headers (which define history_* names) meet nothing else. */
#ifndef K3_LINE_INPUT_H
#define K3_LINE_INPUT_H

#include <stddef.h>

/* Load the input history file ($XDG_STATE_HOME/k3/input_history or
 * ~/.local/state/k3/input_history) when interactive. */
void line_input_open(int interactive);
/* malloc'd line without its newline, or NULL at end of input. */
char *line_input_read(int interactive, const char *prompt);
/* The same, starting from text already in the line for editing (on a pipe:
 * the next line replaces it). */
char *line_input_edit(int interactive, const char *prompt, const char *text);
/* Save the input history file. */
void line_input_close(int interactive);

/* The input history file's path ($XDG_STATE_HOME/k3/input_history or
 * ~/.local/state/k3/input_history, shared by the line mode and the full-screen
 * chat) into path, its directory created 0700. 0, or -1 when neither
 * variable is set (then there is no history file). */
int line_input_history_path(char *path, size_t cap);

#endif
