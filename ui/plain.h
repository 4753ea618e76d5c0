/* plain.h - the line-oriented chat front end: one user message per input
 * line (GNU readline on a terminal; """ opens a multi-line message), or
 * all of a piped stdin as one message (unless --lines); the answer streamed
 * to stdout (per token as JSON with --json --stream), stats
 * and command output on stderr, or one JSON object per turn with --json.
 * Lines starting with / are the same commands as in the full screen
 * (chat/commands.c) unless raw is set. Used when stdin or stdout is not a
 * terminal, or with --plain. */
#ifndef K3_PLAIN_H
#define K3_PLAIN_H

#include "conversation.h"
#include "history.h"

typedef struct plain_options {
    int json;                    /* one JSON object per turn on stdout */
    int raw;                     /* every line is text for the model, even "/..." */
    const char *system;          /* the system prompt for /new */
    const char *resume_hint;     /* "k3 chat MODEL --db FILE": printed on exit with --resume ID */
    int stream;                  /* --json --stream: one JSON object per token as well */
    int lines;                   /* --lines: piped input is one message per line */
    const char *model_dir;       /* for /show */
} plain_options;

/* The exit code when a message went unanswered (invalid UTF-8, over the
 * context, a server's failure, a """ block never closed), a command said an
 * error (unknown /command typed on a terminal, /resume of an unknown id), or
 * a pipe held nothing to answer; the same number as K3_EXIT_NOT_ANSWERED
 * (app/cli.h). */
#define PLAIN_EXIT_NOT_ANSWERED 3

/* Re-prefill progress on stderr (n/N and a bar), for conversation_resume. */
void plain_show_progress(void *user, int done, int total);

/* Runs until end of input or /quit; returns the process exit code: 0 when
 * every message was answered and every command ran, PLAIN_EXIT_NOT_ANSWERED,
 * 1 on a failure that ends the chat, 130 when an answer was cut by Ctrl-C,
 * 143 on SIGTERM. A piped stdin of several lines is one message (as llm)
 * unless opt->lines; a single piped line is taken as typed when it names a
 * known command, else it is a message ("/usr/bin is ..."). */
int plain_chat_run(conversation *c, history *db, const plain_options *opt);

#endif
