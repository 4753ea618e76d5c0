/* commands.h - the / commands of the chat: one table for both front ends
 * (the full screen and --plain), so a command means the same thing in each.
 *
 * A command either does its whole job here, talking back through the front
 * end's say() (listing, searching, /set, /system, /export ...), or it
 * checks its arguments and returns an action that only the front end can
 * carry out (show the help view, clear the screen, run a long job such as
 * /resume or /retry on its engine thread, put text in the input line).
 *
 * To add a command: write its run function below the others in commands.c
 * and add a row to the table there; give it an action here only when the
 * front ends must do something themselves. */
#ifndef K3_COMMANDS_H
#define K3_COMMANDS_H

#include <stddef.h>
#include "conversation.h"
#include "history.h"
#include "k3.h"

/* What the front end must do after a command ran. */
typedef enum chat_action {
    CHAT_ACT_NONE = 0,   /* done; any output went through say() */
    CHAT_ACT_QUIT,       /* /quit, /exit */
    CHAT_ACT_HELP,       /* show the help (full screen: the F1 view) */
    CHAT_ACT_CLEAR,      /* forget the screen's transcript (the store keeps it) */
    CHAT_ACT_STATS,      /* the front end's statistics */
    CHAT_ACT_NEW,        /* a new conversation began: the screen starts over */
    CHAT_ACT_RESUME,     /* args name a stored conversation (checked): run conversation_resume */
    CHAT_ACT_RETRY,      /* run conversation_retry (a turn: it streams an answer) */
    CHAT_ACT_UNDO,       /* run conversation_undo, then redraw the transcript */
    CHAT_ACT_EDIT,       /* put chat_cmd_ctx.edit_text in the input line; send it with conversation_edit */
    CHAT_ACT_RAW,        /* /raw: answers as raw text or rendered markdown (toggle) */
    CHAT_ACT_REASONING,  /* /reasoning: a thinking model's reasoning shown whole or collapsed (toggle) */
} chat_action;

typedef enum chat_say_kind { CHAT_SAY_NOTICE, CHAT_SAY_ERROR } chat_say_kind;

/* What a command can reach. The front end fills it once and keeps it. */
typedef struct chat_cmd_ctx {
    conversation *conv;
    history *db;
    k3_model *model;
    char *system;        /* the system prompt for the next new conversation (malloc'd or NULL) */
    char *edit_text;     /* CHAT_ACT_EDIT: the message to edit (malloc'd; the front end frees it) */
    const char *model_dir;   /* the model directory as given (for /show) */
    /* one message for the user: a notice or an error; text may span lines */
    void (*say)(void *ui, chat_say_kind kind, const char *text);
    void *ui;
} chat_cmd_ctx;

typedef struct chat_command {
    const char *name;            /* without the slash */
    const char *args;            /* argument synopsis for help and completion ("" = none) */
    const char *help;            /* one line for /help */
    int needs_store;             /* touches the store or the session: waits while an answer runs */
    chat_action (*run)(chat_cmd_ctx *x, const char *args);
} chat_command;

/* The table, for help views and Tab completion. */
const chat_command *chat_commands(size_t *n);

/* Is this input line a command? "/x" is; "//x" is the message "/x". */
int chat_is_command(const char *line);

/* The known command a "/name args" line names, or NULL, saying nothing: in
 * a pipe only known commands are commands ("/usr/bin is ..." is a message). */
const chat_command *chat_command_find(const char *line);

/* Split "/name args": the command (NULL when unknown: an error was said) and
 * its arguments, trimmed, copied into args. */
const chat_command *chat_command_parse(chat_cmd_ctx *x, const char *line, char *args, size_t cap);

/* printf-style say(). */
void chat_say(chat_cmd_ctx *x, chat_say_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* commands_everyday.c: /show /copy /rename /raw */
chat_action chat_cmd_show(chat_cmd_ctx *x, const char *args);
chat_action chat_cmd_copy(chat_cmd_ctx *x, const char *args);
chat_action chat_cmd_rename(chat_cmd_ctx *x, const char *args);
chat_action chat_cmd_raw(chat_cmd_ctx *x, const char *args);
chat_action chat_cmd_reasoning(chat_cmd_ctx *x, const char *args);
/* /set's arguments as key=value pairs: ollama's "parameter NAME VALUE"
 * becomes "NAME=VALUE", the rest is copied. -1 on a malformed "parameter". */
int chat_set_spelling(const char *args, char *buf, size_t cap);

/* The sampling settings as one line ("temp=0.7 top_p=1 ..."), floats as typed. */
void chat_format_sampling(const k3_sampler *sp, char *buf, size_t cap);

#endif
