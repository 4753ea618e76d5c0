/* plain.h - the line-oriented chat front end: one user message per input
 * line (GNU readline on a terminal), the answer streamed to stdout, stats
 * on stderr, or one JSON object per turn with --json. Used when stdin or
 * stdout is not a terminal, or with --plain. */
#ifndef K3_PLAIN_H
#define K3_PLAIN_H

#include "conversation.h"

/* Runs until end of input; returns the process exit code. */
int plain_chat_run(conversation *c, int json, const char *resume_hint);

#endif
