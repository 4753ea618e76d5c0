/* history.h - the conversation history store: the only door the chat front
 * ends and `k3 history` use. SQLite stays behind it (docs/ARCHITECTURE.md, "History").
 *
 * One database file holds conversations, their messages (with status, token
 * counts, timings and engine stats), a full-text index over message text and
 * rows describing engine state snapshots; the snapshot files themselves live
 * in the directory "<database>.snapshots/" beside it.
 *
 * Durability rules the callers can rely on:
 *  - every history_* call that writes commits its own transaction before it
 *    returns (BEGIN IMMEDIATE, synchronous=FULL), so a kill -9 afterwards
 *    never loses that write;
 *  - a second process may use the same database at the same time: writers
 *    wait for each other instead of failing with "database is locked".
 *
 * Errors: functions returning int return 0 (or a count / 1 = found) on
 * success and -1 on failure; functions returning an id return it (> 0) or
 * -1. On failure *err holds one line naming the file and what is wrong.
 * A history handle is used by one thread at a time. */
#ifndef K3_HISTORY_H
#define K3_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct history history;

typedef struct history_error {
    char msg[512];
} history_error;

/* Printable id of a conversation: 8 lowercase hex digits, random, stable.
 * Users may type any unique prefix of it. */
#define HISTORY_UID_LEN 8

/* Fixed SQLite application_id of our database files ("k3HC"). */
#define HISTORY_APPLICATION_ID 0x6B334843
/* Schema version this build writes (PRAGMA user_version). */
#define HISTORY_SCHEMA_VERSION 7

/* ---- opening --------------------------------------------------------- */

enum {
    HISTORY_OPEN_EXISTING = 1,   /* fail instead of creating a missing database */
    HISTORY_OPEN_READONLY = 2,   /* only read (list, show, search, export): works on a read-only
                                  * file or directory; implies EXISTING; no migration, no snapshots */
};

/* Open (creating if needed, mode 0600) the database at path, or at the
 * default path when path is NULL. Applies migrations, refuses foreign or
 * newer files, and cleans the snapshot directory when no other process has
 * the database open. */
history *history_open(const char *path, unsigned flags, history_error *err);
void history_close(history *h);

/* The default database path: $XDG_DATA_HOME/k3/history.db, else
 * ~/.local/share/k3/history.db. Does not create anything. */
int history_default_path(char *buf, size_t cap, history_error *err);

const char *history_path(const history *h);
const char *history_snapshot_dir(const history *h);

/* ---- conversations --------------------------------------------------- */

typedef struct history_conversation {
    int64_t id;                          /* integer row id */
    char uid[HISTORY_UID_LEN + 1];       /* what users type */
    char *title;                         /* "" until set (or the first user line) */
    char *model_path;
    char *model_fingerprint;
    char *model_type;                    /* the weights' type ("BF16 + MXFP4 experts"; k3_model_info
                                          * .type_label), "" when not known (before v7, a server) */
    char *system_prompt;
    char *sampling_json;                 /* JSON object text, "{}" by default */
    int64_t created_ms, updated_ms;      /* Unix time in milliseconds */
    int64_t n_messages;                  /* all messages */
    int64_t n_turns;                     /* user messages */
} history_conversation;

/* Create a conversation. fields may be NULL; of it only the text fields are
 * read (NULL text = default). If out is not NULL it receives the new row
 * (free with history_conv_free). Returns the id or -1. */
int64_t history_conv_create(history *h, const history_conversation *fields,
                            history_conversation *out, history_error *err);

/* Change one field; each bumps updated_ms. sampling_json must be a JSON
 * object (stored compact). */
int history_conv_set_title(history *h, int64_t id, const char *title, history_error *err);
int history_conv_set_system(history *h, int64_t id, const char *system_prompt, history_error *err);
int history_conv_set_sampling(history *h, int64_t id, const char *sampling_json, history_error *err);
int history_conv_set_model(history *h, int64_t id, const char *model_path,
                           const char *model_fingerprint, const char *model_type, history_error *err);

/* Look up by integer id, or by what a user typed: "last" (most recently
 * updated) or a unique uid prefix. Ambiguous / unknown refs are errors
 * naming the candidates. */
int history_conv_get(history *h, int64_t id, history_conversation *out, history_error *err);
int history_conv_find(history *h, const char *ref, history_conversation *out, history_error *err);

/* Most recently updated first; limit <= 0 = all. */
int history_conv_list(history *h, int limit, history_conversation **out, size_t *n_out,
                      history_error *err);

/* Delete a conversation with its messages, snapshot rows and files. */
int history_conv_delete(history *h, int64_t id, history_error *err);

/* One writer per conversation: take an exclusive lock on it for this
 * handle (releasing the one it held), held until history_conv_unlock, the
 * next lock or close (or the process's death: it is a file lock on
 * "<uid>.writer" in the snapshot directory, which records the holder's pid).
 * Fails with a message naming the other process when one holds it. */
int history_conv_lock(history *h, const history_conversation *c, history_error *err);
void history_conv_unlock(history *h);

void history_conv_free(history_conversation *c);            /* the strings only */
void history_conv_list_free(history_conversation *list, size_t n);

/* ---- messages -------------------------------------------------------- */

typedef enum history_status {
    HISTORY_COMPLETE = 0,
    HISTORY_INTERRUPTED = 1,
    HISTORY_ERROR = 2,
} history_status;

typedef struct history_message {
    int64_t id;                  /* set by the store */
    int64_t conversation_id;     /* set by the store */
    int64_t seq;                 /* 1, 2, ... within the conversation; set by the store */
    char role[16];               /* "system" "user" "assistant" "tool" */
    char *content;
    history_status status;
    int64_t prompt_tokens;       /* -1 = unknown */
    int64_t generated_tokens;    /* -1 = unknown */
    double ttft_ms;              /* < 0 = unknown */
    double prefill_ms;
    double decode_ms;
    char *engine_stats_json;     /* JSON object text or NULL */
    int64_t created_ms;          /* 0 on add = now */
    int32_t *token_ids;          /* the exact ids the model consumed for this message
                                  * (framing included), or NULL; borrowed on add,
                                  * owned by lists */
    int64_t n_token_ids;
    char *sampling_json;         /* an answer's sampling (JSON object text) or NULL; borrowed on add */
    int in_progress;             /* 1 = an answer written while it streamed that never finished:
                                  * the chat was killed mid-answer (shown as incomplete) */
    char *reasoning;             /* a thinking model's reasoning before this answer (shown, exported,
                                  * never re-sent as answer text), or NULL; borrowed on add */
} history_message;

/* A message with every optional field unknown; content is borrowed. */
history_message history_message_make(const char *role, const char *content, history_status status);

/* Append a message in its own committed transaction and return its id.
 * Invalid UTF-8 in content is replaced by U+FFFD (never refused). The first
 * user message titles an untitled conversation. */
int64_t history_msg_add(history *h, int64_t conversation_id, const history_message *m,
                        history_error *err);

/* Rewrite a stored message's content, status, counts, timings, stats,
 * token ids, sampling and in_progress flag (its seq, role and time stay) in
 * its own committed transaction: an answer is inserted with in_progress = 1
 * when it starts and rewritten as it grows, so a kill -9 loses at most the
 * last second of it. */
int history_msg_update(history *h, int64_t message_id, const history_message *m, history_error *err);

/* All messages of a conversation in order (for show, export, re-prefill). */
int history_msg_list(history *h, int64_t conversation_id, history_message **out, size_t *n_out,
                     history_error *err);
void history_msg_list_free(history_message *list, size_t n);

/* Drop the message with this id and every later one of its conversation
 * (with their snapshot rows, then files), for /undo, /retry and /edit.
 * Returns the number of messages removed or -1. */
int history_msg_truncate(history *h, int64_t conversation_id, int64_t from_message_id,
                         history_error *err);

const char *history_status_name(history_status s);
/* Parse "complete" / "interrupted" / "error"; -1 if none. */
int history_status_parse(const char *name);

/* Engine stats as the compact JSON object stored with a message
 * (negative = omitted). Free with free(). */
char *history_stats_json(int64_t bytes_read, double hit_rate, int64_t peak_rss_bytes);

/* ---- remote backends (history/backend.c) ------------------------------ */

/* Record that a conversation talks to an OpenAI-compatible server (endpoint
 * URL and model name; "" "" = a local model). The API key is never stored. */
int history_conv_set_backend(history *h, int64_t id, const char *endpoint, const char *model, history_error *err);
/* The recorded backend (malloc'd strings, "" for a local model). */
int history_conv_get_backend(history *h, int64_t id, char **endpoint, char **model, history_error *err);

/* ---- state snapshots ------------------------------------------------- */

/* What a snapshot is valid for. */
typedef struct history_snapshot_key {
    int64_t conversation_id;
    int64_t message_id;          /* the state includes everything up to this message */
    int64_t n_tokens;
    const char *model_fingerprint;
    int format_version;          /* engine state file format */
} history_snapshot_key;

typedef struct history_snapshot {
    int64_t id, conversation_id, message_id, n_tokens;
    char *model_fingerprint;
    int format_version;
    char *path;                  /* the file, inside history_snapshot_dir() */
    int64_t bytes;
    char checksum[32];           /* "mix64:<16 hex>" */
    int64_t created_ms;
} history_snapshot;

/* Create an empty temp file (0600) in the snapshot directory for the engine
 * to write the state into. *tmp_path_out is malloc'd. */
int history_snapshot_begin(history *h, char **tmp_path_out, history_error *err);

/* fsync the temp file, rename it to its final name, fsync the directory and
 * then commit its row; older snapshots of the conversation are removed
 * afterwards. The temp file is consumed either way (on failure it is
 * deleted). Returns the snapshot id or -1. */
int64_t history_snapshot_commit(history *h, const char *tmp_path, const history_snapshot_key *key,
                                history_error *err);

/* Delete an unused temp file from history_snapshot_begin. */
void history_snapshot_discard(history *h, const char *tmp_path);

/* The newest snapshot of the conversation matching model fingerprint and
 * format version whose file exists with the recorded size. Returns 1 found,
 * 0 none, -1 error. */
int history_snapshot_latest(history *h, int64_t conversation_id, const char *model_fingerprint,
                            int format_version, history_snapshot *out, history_error *err);

/* The same among snapshots of messages with seq <= max_seq: the state to
 * start from when the record is rebuilt up to that message. */
int history_snapshot_latest_upto(history *h, int64_t conversation_id, int64_t max_seq,
                                 const char *model_fingerprint, int format_version,
                                 history_snapshot *out, history_error *err);

/* Recompute the file's checksum; 0 if it matches. */
int history_snapshot_verify(const history_snapshot *s, history_error *err);
void history_snapshot_free(history_snapshot *s);

/* ---- search ---------------------------------------------------------- */

typedef struct history_hit {
    int64_t conversation_id, message_id, seq;
    char uid[HISTORY_UID_LEN + 1];
    char *title;
    char role[16];
    char *snippet;               /* matched words between the markers */
    double score;                /* bm25, lower is better; 0 for substring hits */
    int64_t created_ms;
} history_hit;

/* Search message text. The query is plain text: quotes, apostrophes and FTS
 * operators match literally, except `word*` (prefix) and `a OR b` (either),
 * which are tried first, then literally. Ranked by bm25; when the full-text index finds
 * nothing (e.g. a query of punctuation only) it falls back to a substring
 * match and sets *used_substring (may be NULL). Markers NULL = "[" "]". */
int history_msg_search(history *h, const char *query, int limit, const char *mark_on,
                   const char *mark_off, history_hit **out, size_t *n_out, int *used_substring,
                   history_error *err);
void history_hits_free(history_hit *hits, size_t n);

/* ---- export / import / check ----------------------------------------- */

typedef enum history_format { HISTORY_MARKDOWN, HISTORY_JSON } history_format;

int history_export(history *h, int64_t conversation_id, history_format fmt, FILE *out,
                   history_error *err);
/* The same into a malloc'd string (NULL on error). */
char *history_export_string(history *h, int64_t conversation_id, history_format fmt,
                            history_error *err);

/* Import one conversation from our JSON export. Keeps its uid when free in
 * this database (else picks a new one). source names the input in errors.
 * Returns the new conversation id, HISTORY_IMPORT_ALREADY_STORED when a
 * conversation with the file's uid holds the same messages (nothing is
 * written; out describes that one), or -1. */
#define HISTORY_IMPORT_ALREADY_STORED (-2)
int64_t history_import_json(history *h, const char *json_text, const char *source,
                            history_conversation *out, history_error *err);

/* `history list --json`: a JSON array of the conversations, most recently
 * updated first (limit <= 0 = all): id, title, model, times, counts. */
int history_list_json(history *h, int limit, FILE *out, history_error *err);
/* `history search --json`: the hits as a JSON array. */
int history_hits_json(const history_hit *hits, size_t n, FILE *out);

/* Integrity check of the database, the full-text index, foreign keys and
 * snapshot files. Returns 0 healthy, 1 problems (described in *report,
 * malloc'd, one per line), -1 error. */
int history_check(history *h, char **report, history_error *err);

#endif
