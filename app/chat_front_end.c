/* chat_front_end.c - see chat_front_end.h. */
#include <unistd.h>
#include "chat_front_end.h"

/* Curses only when both ends are a terminal and no line format was asked
 * for; a terminal curses cannot drive falls back to the line mode. */
int chat_front_end_run(conversation *c, k3_model *m, history *db, int plain, int json,
                       const tui_options *topt, const plain_options *popt)
{
    if (!plain && !json && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
        int rc = tui_chat_run(c, m, db, topt);
        if (rc != TUI_UNAVAILABLE) return rc;
    }
    return plain_chat_run(c, db, popt);
}
