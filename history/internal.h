/* internal.h - what the files in history/ share and nobody else sees: the
 * handle, transaction and statement helpers, and the schema migrations
 * (tests include this to build an old-version database by hand). */
#ifndef K3_HISTORY_INTERNAL_H
#define K3_HISTORY_INTERNAL_H

#include <sqlite3.h>
#include "history.h"

struct history {
    sqlite3 *db;
    char *path;          /* the database file as given */
    char *snap_dir;      /* "<path>.snapshots" */
    int lock_fd;         /* shared flock on snap_dir/.lock while open; -1 if none */
    int conv_lock_fd;    /* exclusive flock on snap_dir/<uid>.writer: the conversation we write; -1 if none */
};

/* Snapshot file names: final "<uid>-<16 hex>.k3state", temp "tmp-<16 hex>.part". */
#define HIST_SNAP_SUFFIX ".k3state"
#define HIST_TMP_PREFIX "tmp-"
#define HIST_TMP_SUFFIX ".part"
#define HIST_LOCK_NAME ".lock"
/* Snapshots kept per conversation: the newest and the turn boundaries before it. */
#define HIST_SNAPSHOTS_KEPT_STR "4"

/* Format a one-line error into err (NULL allowed); returns -1. */
int hist_err(history_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "<db path>: <what>: <sqlite message>"; returns -1. */
int hist_db_err(history *h, history_error *err, const char *what);

int64_t hist_now_ms(void);
/* Fill buf with n random lowercase hex digits plus NUL. */
void hist_random_hex(char *buf, size_t n);

/* Transactions: BEGIN IMMEDIATE waits (busy_timeout + retries) for other
 * writers; commit retries while busy; rollback never fails loudly. */
int hist_begin(history *h, history_error *err);
int hist_commit(history *h, history_error *err);
void hist_rollback(history *h);

/* sqlite3_step that retries SQLITE_BUSY before the first row. */
int hist_step(sqlite3_stmt *st);
sqlite3_stmt *hist_prepare(history *h, const char *sql, history_error *err);
/* Run SQL with no result rows (several statements allowed). */
int hist_exec(history *h, const char *sql, history_error *err);

/* Column as a malloc'd string; NULL column gives "" when empty_for_null. */
char *hist_col_text(sqlite3_stmt *st, int col, int empty_for_null);
char *hist_strdup(const char *s);

/* A valid UTF-8 copy of s (invalid bytes become U+FFFD). */
char *hist_utf8_clean(const char *s);
/* A compact copy of a JSON object text, or NULL (err set) if not one. */
char *hist_json_object_compact(const char *text, const char *what, history_error *err);

/* Migrations: bring an open connection from its user_version up to target
 * inside the caller's transaction. */
int hist_migrate(sqlite3 *db, int from_version, int to_version, char *errbuf, size_t errcap);

/* Snapshot housekeeping on open (called with the exclusive lock held). */
int hist_snapshot_cleanup(history *h, history_error *err);
/* Checksum of a whole file as "mix64:<16 hex>"; also returns its size. */
int hist_file_checksum(const char *path, char out[32], int64_t *bytes, history_error *err);

/* Insert one message inside the caller's transaction (content already
 * valid UTF-8, stats compact JSON or NULL); seq = last + 1. Returns the id. */
int64_t hist_msg_insert(history *h, int64_t conv_id, const history_message *m, const char *content,
                        const char *stats, history_error *err);

/* Read one conversation row by id (counts included). 1 found, 0 not, -1 error. */
int hist_conv_load(history *h, int64_t id, history_conversation *out, history_error *err);

#endif
