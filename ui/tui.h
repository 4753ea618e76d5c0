/* tui.h - the full-screen terminal chat (ncursesw + GNU readline): a
 * scrollable transcript that streams the answer, a readline input line, a
 * status line, an F-key bar and a live gauge panel (disk reads, expert-cache
 * hit rate, memory split, speeds, per-token I/O timeline). The engine runs
 * each turn on a worker thread so the screen stays live while one token
 * takes seconds. Chosen by `k3 chat` when stdin and stdout are terminals. */
#ifndef K3_TUI_H
#define K3_TUI_H

#include "conversation.h"

/* tui_chat_run's return value when the terminal cannot host curses (e.g.
 * TERM=dumb or an unknown TERM): the caller falls back to the line mode. */
#define TUI_UNAVAILABLE (-1)

typedef struct tui_options {
    const char *model_dir;       /* shown (as its last path component) in the status line */
    const char *system;          /* system prompt used by /new (may be NULL) */
    const char *resume_hint;     /* "k3 chat MODEL --db FILE": printed on exit with --resume ID */
} tui_options;

/* Run the chat on the current terminal until the user quits. c must hold a
 * started or resumed conversation; m is NULL when its answers come from a
 * server (conversation_create_remote): the gauges then show the server's
 * figures. Returns the process exit code, or
 * TUI_UNAVAILABLE before touching the screen when curses cannot start. */
int tui_chat_run(conversation *c, k3_model *m, history *db, const tui_options *opt);

#endif
