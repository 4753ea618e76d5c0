/* chat_front_end.h - which front end a chat opens: the full screen on a
 * terminal, the line mode otherwise (and for --plain, --json, TERM=dumb). */
#ifndef K3_CHAT_FRONT_END_H
#define K3_CHAT_FRONT_END_H

#include "conversation.h"
#include "history.h"
#include "plain.h"
#include "tui.h"

/* Run the chat on c (m is the local model, NULL for a server) and return
 * its exit code; the same choice for a local model and an --endpoint. */
int chat_front_end_run(conversation *c, k3_model *m, history *db, int plain, int json,
                       const tui_options *topt, const plain_options *popt);

#endif
