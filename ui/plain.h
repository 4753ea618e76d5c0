/* plain.h - the line-oriented chat front end: one user message per input
 * line (GNU readline on a terminal; """ opens a multi-line message), or
 * all of a piped stdin as one message; the answer streamed to stdout, stats
 * on stderr, or one JSON object per turn with --json (and per token with
 * --stream). Used when stdin or stdout is not a terminal, or with --plain. */
#ifndef K3_PLAIN_H
#define K3_PLAIN_H

#include "conversation.h"

typedef struct plain_options {
    int json;                    /* --json: one JSON object per turn instead of the text */
    int stream;                  /* --json --stream: one JSON object per token as well */
    int lines;                   /* --lines: piped input is one message per line */
    const char *resume_hint;     /* "k3 chat MODEL --db FILE" for the exit message */
} plain_options;

/* Runs until end of input; returns the process exit code. When stdin is
 * not a terminal, all of it is one message (as llm), unless o->lines. */
int plain_chat_run(conversation *c, const plain_options *o);

#endif
