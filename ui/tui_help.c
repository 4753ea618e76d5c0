/* tui_help.c - the F1 view: keys, commands and what each gauge means, over
 * the transcript and gauges (status line and key bar stay). PgUp/PgDn
 * scroll it on short terminals; any other key closes it and is not passed
 * on, so nothing is typed by accident. */
#include <string.h>
#include "tui_internal.h"

static const char *const help_lines[] = {
    "#k3 chat - help           (PgUp/PgDn scroll, any other key closes)",
    "",
    "#Keys",
    "  Enter          send the message           Ctrl-J, Alt-Enter  new line",
    "  Ctrl-C         stop the answer (kept, marked interrupted); clear the line;",
    "                 twice on an empty line: quit",
    "  Ctrl-D         quit (on an empty line)    F10  quit",
    "  F1 help        F2 show/hide gauges        PgUp/PgDn  scroll the transcript",
    "  Up/Down        input history              Ctrl-R  search the history",
    "  Tab            complete a /command        Ctrl-L  redraw   Ctrl-Z  suspend",
    "  Pasting (bracketed paste) keeps newlines in the message.",
    "",
    "#Commands",
    "  /help                    this view",
    "  /new                     start a new conversation",
    "  /resume [ID]             list conversations, or continue one (ID prefix or 'last')",
    "  /history                 recent conversations",
    "  /search TEXT             search all stored messages",
    "  /system [TEXT]           show or set the system prompt (a begun conversation keeps its own)",
    "  /set temp=T top_p=P top_k=K min_p=P seed=S n=N   sampling and answer length;",
    "                           also /set parameter temperature 0.7; /set alone shows all",
    "  /show                    the model: architecture, experts, dtype, context, size, plan",
    "  /export md|json [FILE] [--force]   write this conversation (mode 0600; default k3-ID.md)",
    "  /retry                   answer the last message again (current settings)",
    "  /undo                    drop the last message and its answer",
    "  /edit                    edit the last message and send it again",
    "  /copy                    copy the last answer to the clipboard (OSC 52)",
    "  /rename TITLE            rename this conversation",
    "  /raw                     answers as raw text / rendered markdown (toggle)",
    "  /reasoning               a thinking model's reasoning whole / collapsed (toggle)",
    "  \"\"\"                      start or end a multi-line message (as in ollama)",
    "  /stats                   engine and screen statistics",
    "  /clear                   clear the screen's transcript (the store keeps it)",
    "  /quit                    quit (also /exit, /bye)",
    "",
    "#Gauges (F2)",
    "  disk     read rate over >= 0.5 s, sparkline of the last minute; bytes of the",
    "           token being computed (trunk / experts), reads in flight",
    "  cache    expert-cache TRUE hit rate: last 16 tokens and total; one cell per",
    "           layer for this answer (the layer being computed is reversed)",
    "  mem      bar against the budget: pinned trunk, ring, expert cache, state, other",
    "  speed    generation tok/s (last 16 tokens), prompt tok/s, time to first token",
    "  tokens   one column per generated token: height = bytes read, colour = hit",
    "           rate (green >= 70%, yellow >= 50%, red below; without colour, as under",
    "           NO_COLOR: bold below 50%); the live token at right",
    "  A dash means the engine does not report that figure (e.g. no disk reads when",
    "  the weights are fully resident).",
    "",
    "Conversations are saved as they happen; on exit k3 prints how to resume.",
};

/* A temporary window over the middle of the screen; the panes are redrawn whole when it
 * closes, so nothing of it lingers. */
void tui_help_draw(tui *t)
{
    int rows = t->lay.rows - 2, cols = t->lay.cols;
    if (rows < 1) return;
    WINDOW *w = newwin(rows, cols, 1, 0);
    if (!w) return;
    leaveok(w, TRUE);
    int n = (int)(sizeof help_lines / sizeof help_lines[0]);
    int max_top = n > rows ? n - rows + 1 : 0;       /* the last row says there is more */
    if (t->help_top > max_top) t->help_top = max_top;
    if (t->help_top < 0) t->help_top = 0;
    for (int i = 0; i < rows - (n > rows) && t->help_top + i < n; i++) {
        const char *s = help_lines[t->help_top + i];
        wmove(w, i, 1);
        if (*s == '#') {
            wattrset(w, tui_attr(TR_TITLE));
            s++;
        }
        tui_put(w, s, cols - 2);
        wattrset(w, A_NORMAL);
    }
    if (n > rows) {
        wmove(w, rows - 1, 1);
        wattrset(w, tui_attr(TR_DIM));
        tui_put(w, t->help_top < max_top ? "(PgDn for more)" : "(PgUp for the start)", cols - 2);
        wattrset(w, A_NORMAL);
    }
    wnoutrefresh(w);
    delwin(w);
}
