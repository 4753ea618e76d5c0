/* store.c - opening the history database: the default path, file creation
 * with private permissions, connection pragmas, identification (our
 * application_id, a schema version we understand), migrations, and the
 * shared helpers (errors, transactions, retries) the other files use. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "internal.h"

#define BUSY_TIMEOUT_MS 5000
#define BUSY_RETRIES 200          /* extra retries for busy codes the handler does not wait on */
#define BUSY_RETRY_SLEEP_MS 25

/* ---- small shared helpers -------------------------------------------- */

/* One formatted line into the caller's error; -1 so `return hist_err(...)` reads well. */
int hist_err(history_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* SQLite failures always name the database file and the operation. */
int hist_db_err(history *h, history_error *err, const char *what)
{
    int code = sqlite3_extended_errcode(h->db) & 0xff;
    if (code == SQLITE_NOTADB)
        return hist_err(err, "%s: not a SQLite database (wrong file, or damaged beyond repair)", h->path);
    if (code == SQLITE_CORRUPT)
        return hist_err(err, "%s: the database is corrupt (%s: %s)", h->path, what, sqlite3_errmsg(h->db));
    return hist_err(err, "%s: %s: %s", h->path, what, sqlite3_errmsg(h->db));
}

/* Wall-clock milliseconds: timestamps are shown to people and sorted on. */
int64_t hist_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Random hex for uids and file names; getrandom cannot fail for small sizes
 * after boot, but fall back to time and pid mixing rather than abort. */
void hist_random_hex(char *buf, size_t n)
{
    unsigned char raw[64];
    size_t need = (n + 1) / 2;
    if (need > sizeof raw) need = sizeof raw;
    if (getrandom(raw, need, 0) != (ssize_t)need) {
        uint64_t x = (uint64_t)hist_now_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
        for (size_t i = 0; i < need; i++) {
            x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
            raw[i] = (unsigned char)x;
        }
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n && i / 2 < sizeof raw; i++)
        buf[i] = hex[(raw[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    buf[n] = 0;
}

/* Sleep between busy retries without pulling in nanosleep boilerplate everywhere. */
static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* busy_timeout covers most waits, but some busy codes (WAL recovery, a
 * stale read snapshot) return at once; outside a transaction it is safe to
 * reset and try the statement again. */
int hist_step(sqlite3_stmt *st)
{
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_step(st);
        int primary = rc & 0xff;
        if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || attempt >= BUSY_RETRIES ||
            !sqlite3_get_autocommit(sqlite3_db_handle(st)))
            return rc;
        sqlite3_reset(st);
        sleep_ms(BUSY_RETRY_SLEEP_MS);
    }
}

/* Prepare with the error reported against the database file. */
sqlite3_stmt *hist_prepare(history *h, const char *sql, history_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK) {
        hist_db_err(h, err, "preparing a query");
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

/* Statements without rows (DDL, pragmas that return nothing, BEGIN/COMMIT). */
int hist_exec(history *h, const char *sql, history_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(h->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int code = sqlite3_extended_errcode(h->db) & 0xff;
        if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
            hist_db_err(h, err, sql);
        else
            hist_err(err, "%s: %s", h->path, msg ? msg : sqlite3_errmsg(h->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* Every write goes through BEGIN IMMEDIATE so it takes the write lock up
 * front (waiting via busy_timeout) instead of failing later with
 * SQLITE_BUSY_SNAPSHOT; retry a few times for long-running other writers. */
int hist_begin(history *h, history_error *err)
{
    assert(sqlite3_get_autocommit(h->db));   /* no write nests in another: each one commits or rolls back */
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(h->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        int primary = rc & 0xff;
        if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || attempt >= BUSY_RETRIES)
            return hist_db_err(h, err, "starting a write transaction");
        sleep_ms(BUSY_RETRY_SLEEP_MS);
    }
}

/* COMMIT can in rare cases report busy; the transaction stays open then, so
 * retrying is correct. On a real failure roll back so the handle stays usable. */
int hist_commit(history *h, history_error *err)
{
    assert(!sqlite3_get_autocommit(h->db));  /* a hist_begin is open */
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        int primary = rc & 0xff;
        if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || attempt >= BUSY_RETRIES) {
            hist_db_err(h, err, "committing");
            hist_rollback(h);
            return -1;
        }
        sleep_ms(BUSY_RETRY_SLEEP_MS);
    }
}

/* Error paths call this; it is harmless when no transaction is open. */
void hist_rollback(history *h)
{
    if (!sqlite3_get_autocommit(h->db))
        sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Copy a text column out before the statement moves on. */
char *hist_col_text(sqlite3_stmt *st, int col, int empty_for_null)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t) return empty_for_null ? hist_strdup("") : NULL;
    return hist_strdup((const char *)t);
}

/* strdup that tolerates NULL (callers check the result for allocation failure). */
char *hist_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Length of the valid UTF-8 sequence at p, or 0 if it is not valid
 * (overlongs, surrogates and values past U+10FFFF are invalid). */
static size_t utf8_valid_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0;
        if (c == 0xED && p[1] >= 0xA0) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if ((p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0;
        if (c == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

/* Text must be valid UTF-8 for FTS and JSON export; an interrupted answer
 * may end mid-character, so repair instead of refusing (never lose text). */
char *hist_utf8_clean(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        size_t n = utf8_valid_len(p);
        if (n) {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            p++;
        }
    }
    out[o] = 0;
    return out;
}

/* Sampling params and engine stats are stored as compact JSON objects so the
 * export can embed them; reject anything else with a message naming it. */
char *hist_json_object_compact(const char *text, const char *what, history_error *err)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    if (!j) {
        hist_err(err, "%s: invalid JSON at line %d: %s", what, jerr.line, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        hist_err(err, "%s: expected a JSON object", what);
        return NULL;
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(j);
    if (!s) hist_err(err, "%s: out of memory", what);
    return s;
}

/* ---- schema and migrations ------------------------------------------- */

/* Step i brings user_version i to i + 1. Never edit a released step: add a
 * new one. v1: conversations and messages. v2: the full-text index (rebuilt
 * from existing messages) and state snapshot rows. v3: each message's exact
 * token ids (int32 little-endian), so a resume can re-prefill exactly. v4:
 * the sampling each answer was made with (the conversation's own
 * sampling_json is the current setting), and in_progress = 1 on an answer
 * row still being written as it streams (a crash leaves it so). v5: the
 * remote backend (endpoint, model) of a conversation (`k3 chat --endpoint`).
 * v6: an answer's reasoning (a thinking model's delta.reasoning), kept
 * beside its content, never in it. v7: the model's weight type ("BF16 +
 * MXFP4 experts", a GGUF's "Q4_K_M"); '' on older rows. */
static const char *const migration_steps[HISTORY_SCHEMA_VERSION] = {
    "CREATE TABLE conversations ("
    "  id INTEGER PRIMARY KEY,"
    "  uid TEXT NOT NULL UNIQUE,"
    "  title TEXT NOT NULL DEFAULT '',"
    "  model_path TEXT NOT NULL DEFAULT '',"
    "  model_fingerprint TEXT NOT NULL DEFAULT '',"
    "  system_prompt TEXT NOT NULL DEFAULT '',"
    "  sampling_json TEXT NOT NULL DEFAULT '{}',"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"
    "CREATE INDEX conversations_by_update ON conversations(updated_ms, id);"
    "CREATE TABLE messages ("
    "  id INTEGER PRIMARY KEY,"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL,"
    "  role TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),"
    "  content TEXT NOT NULL,"
    "  status TEXT NOT NULL DEFAULT 'complete'"
    "    CHECK (status IN ('complete','interrupted','error')),"
    "  prompt_tokens INTEGER,"
    "  generated_tokens INTEGER,"
    "  ttft_ms REAL,"
    "  prefill_ms REAL,"
    "  decode_ms REAL,"
    "  engine_stats_json TEXT,"
    "  created_ms INTEGER NOT NULL,"
    "  UNIQUE (conversation_id, seq));",

    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages',"
    "  content_rowid='id', tokenize='unicode61 remove_diacritics 2');"
    "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN"
    "  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;"
    "CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)"
    "    VALUES ('delete', old.id, old.content); END;"
    "CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN"
    "  INSERT INTO messages_fts(messages_fts, rowid, content)"
    "    VALUES ('delete', old.id, old.content);"
    "  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;"
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');"
    "CREATE TABLE snapshots ("
    "  id INTEGER PRIMARY KEY,"
    "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    "  message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,"
    "  n_tokens INTEGER NOT NULL CHECK (n_tokens >= 0),"
    "  model_fingerprint TEXT NOT NULL,"
    "  format_version INTEGER NOT NULL,"
    "  file_name TEXT NOT NULL UNIQUE,"
    "  bytes INTEGER NOT NULL,"
    "  checksum TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL);"
    "CREATE INDEX snapshots_by_conversation ON snapshots(conversation_id, id);"
    "CREATE INDEX snapshots_by_message ON snapshots(message_id);",

    "ALTER TABLE messages ADD COLUMN token_ids BLOB;",

    "ALTER TABLE messages ADD COLUMN sampling_json TEXT;"
    "ALTER TABLE messages ADD COLUMN in_progress INTEGER NOT NULL DEFAULT 0;",

    /* v5: the backend a conversation talks to when it is not a local model
     * (`k3 chat --endpoint`): the server URL and its model name. */
    "ALTER TABLE conversations ADD COLUMN backend_endpoint TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE conversations ADD COLUMN backend_model TEXT NOT NULL DEFAULT '';",

    /* v6: a thinking model's reasoning before an answer (NULL = none). */
    "ALTER TABLE messages ADD COLUMN reasoning TEXT;",

    /* v7: the weights' type of the conversation's model (k3_model_info.type_label). */
    "ALTER TABLE conversations ADD COLUMN model_type TEXT NOT NULL DEFAULT '';",
};

/* Apply steps from..to-1 and stamp the version and our application id; the
 * caller owns the transaction so a crash leaves the old version intact. */
int hist_migrate(sqlite3 *db, int from_version, int to_version, char *errbuf, size_t errcap)
{
    for (int v = from_version; v < to_version; v++) {
        char *msg = NULL;
        if (sqlite3_exec(db, migration_steps[v], NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(errbuf, errcap, "migrating the schema to version %d: %s", v + 1,
                     msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            return -1;
        }
    }
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d;", to_version,
             (int)HISTORY_APPLICATION_ID);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(errbuf, errcap, "setting the schema version: %s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

/* ---- opening --------------------------------------------------------- */

/* XDG says relative XDG_DATA_HOME values are to be ignored. */
int history_default_path(char *buf, size_t cap, history_error *err)
{
    const char *xdg = getenv("XDG_DATA_HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(buf, cap, "%s/k3/history.db", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home || !*home)
            return hist_err(err, "history: cannot find the home directory (set HOME or use --db FILE)");
        n = snprintf(buf, cap, "%s/.local/share/k3/history.db", home);
    }
    if (n < 0 || (size_t)n >= cap) return hist_err(err, "history: default database path is too long");
    return 0;
}

/* mkdir -p of the directories above path, private (0700) as XDG asks. */
static int make_parent_dirs(const char *path, history_error *err)
{
    char *dir = strdup(path);
    if (!dir) return hist_err(err, "%s: out of memory", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            hist_err(err, "%s: cannot create directory: %s", dir, strerror(errno));
            free(dir);
            return -1;
        }
        *p = '/';
    }
    free(dir);
    return 0;
}

/* Create a missing database file ourselves with mode 0600 so SQLite, which
 * gives the -wal and -shm files the database file's mode, never creates
 * anything readable by others. */
static int ensure_db_file(const char *path, unsigned flags, history_error *err)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return hist_err(err, "%s: is a directory, not a history database", path);
        return 0;
    }
    if (errno != ENOENT) return hist_err(err, "%s: %s", path, strerror(errno));
    if (flags & (HISTORY_OPEN_EXISTING | HISTORY_OPEN_READONLY)) return hist_err(err, "%s: no such history database", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return hist_err(err, "%s: cannot create: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return 0;
}

/* Run a single-value integer query (pragmas, counts). */
static int query_int(history *h, const char *sql, int64_t *out, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, sql, err);
    if (!st) return -1;
    int rc = hist_step(st);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE) hist_db_err(h, err, sql);
    sqlite3_finalize(st);
    return (rc == SQLITE_ROW || rc == SQLITE_DONE) ? 0 : -1;
}

/* The per-connection settings SQLite does not remember in the file. */
static int connect_db(history *h, unsigned flags, history_error *err)
{
    int rc;
    if (flags & HISTORY_OPEN_READONLY) {
        /* a plain read-only open still needs the -shm file of a WAL database
         * (created beside it); when the directory does not allow that, read
         * the file as immutable (a cleanly closed database holds everything) */
        rc = sqlite3_open_v2(h->path, &h->db, SQLITE_OPEN_READONLY, NULL);
        if (rc == SQLITE_OK && sqlite3_exec(h->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
            sqlite3_close_v2(h->db);
            h->db = NULL;
            char *uri = sqlite3_mprintf("file:%s?immutable=1", h->path);
            rc = uri ? sqlite3_open_v2(uri, &h->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) : SQLITE_NOMEM;
            sqlite3_free(uri);
        }
    } else {
        rc = sqlite3_open_v2(h->path, &h->db, SQLITE_OPEN_READWRITE, NULL);
    }
    if (rc != SQLITE_OK) {
        hist_err(err, "%s: cannot open: %s", h->path, h->db ? sqlite3_errmsg(h->db) : "out of memory");
        return -1;
    }
    sqlite3_extended_result_codes(h->db, 1);
    sqlite3_busy_timeout(h->db, BUSY_TIMEOUT_MS);
    int64_t fk = 0;
    if (hist_exec(h, "PRAGMA foreign_keys = ON", err) ||
        query_int(h, "PRAGMA foreign_keys", &fk, err))
        return -1;
    if (fk != 1) return hist_err(err, "%s: this SQLite cannot enforce foreign keys", h->path);
    return 0;
}

/* Refuse anything that is not ours or is newer than us before changing a
 * single byte of it (journal mode included). An empty file is adopted. */
static int identify_db(history *h, int64_t *version, history_error *err)
{
    int64_t app = 0, objects = 0;
    if (query_int(h, "PRAGMA application_id", &app, err) ||
        query_int(h, "PRAGMA user_version", version, err) ||
        query_int(h, "SELECT count(*) FROM sqlite_master", &objects, err))
        return -1;
    int empty = (app == 0 && *version == 0 && objects == 0);
    if ((uint32_t)app != HISTORY_APPLICATION_ID && !empty)
        return hist_err(err, "%s: not a k3 history database (application_id 0x%08x, expected 0x%08x)",
                        h->path, (unsigned)app, (unsigned)HISTORY_APPLICATION_ID);
    if (*version > HISTORY_SCHEMA_VERSION)
        return hist_err(err, "%s: schema version %lld is newer than this k3 understands (%d); "
                        "use a newer k3", h->path, (long long)*version, HISTORY_SCHEMA_VERSION);
    return 0;
}

/* WAL lets readers and the writer overlap; FULL sync because we commit once
 * per message, not per token, and a committed message must survive. */
static int set_journal(history *h, history_error *err)
{
    for (int attempt = 0;; attempt++) {
        sqlite3_stmt *st = hist_prepare(h, "PRAGMA journal_mode = WAL", err);
        if (!st) return -1;
        int rc = hist_step(st);
        char mode[16] = "";
        if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
            snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW && !strcmp(mode, "wal")) break;
        if (rc != SQLITE_ROW && (rc & 0xff) != SQLITE_BUSY) return hist_db_err(h, err, "enabling WAL");
        if (attempt >= BUSY_RETRIES)
            return hist_err(err, "%s: cannot switch to WAL journal mode (got '%s')", h->path, mode);
        sleep_ms(BUSY_RETRY_SLEEP_MS);
    }
    return hist_exec(h, "PRAGMA synchronous = FULL", err);
}

/* Migrate under the write lock, re-reading the version inside it since
 * another process may have migrated while we waited. */
static int migrate_db(history *h, int64_t version, history_error *err)
{
    if (version >= HISTORY_SCHEMA_VERSION) return 0;
    if (hist_begin(h, err)) return -1;
    if (query_int(h, "PRAGMA user_version", &version, err)) {
        hist_rollback(h);
        return -1;
    }
    if (version < HISTORY_SCHEMA_VERSION) {
        char msg[400];
        if (hist_migrate(h->db, (int)version, HISTORY_SCHEMA_VERSION, msg, sizeof msg)) {
            hist_rollback(h);
            return hist_err(err, "%s: %s", h->path, msg);
        }
    }
    return hist_commit(h, err);
}

/* SQLite already copies the database mode to -wal/-shm; this only repairs
 * files left by an older build or another tool when the database is private. */
static void tighten_sidecar_modes(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || (st.st_mode & 077)) return;
    const char *suffixes[] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        char side[4200];
        snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
        struct stat ss;
        if (stat(side, &ss) == 0 && (ss.st_mode & 077) && ss.st_uid == getuid())
            chmod(side, ss.st_mode & 0700);
    }
}

/* The snapshot directory and its lock: every open holds a shared lock; the
 * cleanup of orphans runs only if we can take it exclusively, i.e. when no
 * other process could be between writing a file and committing its row.
 * Failures here only disable snapshots, so they are not fatal. */
static void open_snapshot_dir(history *h)
{
    if (mkdir(h->snap_dir, 0700) != 0 && errno != EEXIST) return;
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/%s", h->snap_dir, HIST_LOCK_NAME);
    h->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (h->lock_fd < 0) return;
    if (flock(h->lock_fd, LOCK_EX | LOCK_NB) == 0) {
        hist_snapshot_cleanup(h, NULL);
        flock(h->lock_fd, LOCK_SH);
    } else {
        flock(h->lock_fd, LOCK_SH);
    }
}

/* A write that failed on a read-only file or directory: say which is the
 * problem (SQLite says only "attempt to write a readonly database" or
 * "unable to open database file", because it creates -wal and -shm files
 * beside the database). */
static void explain_readonly(const char *path, history_error *err)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    if (access(path, W_OK) != 0 && errno == EACCES)
        hist_err(err, "%s: the database file is read-only (k3 history list/show/search/export can still read it; "
                 "to write, make it writable)", path);
    else if (access(dir, W_OK) != 0)
        hist_err(err, "%s: the directory %s is not writable, and SQLite must create the database's -wal and -shm "
                 "files there (make the directory writable, or use --db in a writable one)", path, dir);
}

/* See history.h. */
history *history_open(const char *path, unsigned flags, history_error *err)
{
    char default_path[4096];
    if (!path) {
        if (history_default_path(default_path, sizeof default_path, err)) return NULL;
        if (!(flags & HISTORY_OPEN_EXISTING) && make_parent_dirs(default_path, err)) return NULL;
        path = default_path;
    }
    if (!*path) { hist_err(err, "history: empty database path"); return NULL; }
    if (ensure_db_file(path, flags, err)) return NULL;
    history *h = calloc(1, sizeof *h);
    if (!h) { hist_err(err, "%s: out of memory", path); return NULL; }
    h->lock_fd = -1;
    h->conv_lock_fd = -1;
    h->path = strdup(path);
    if (h->path && asprintf(&h->snap_dir, "%s.snapshots", path) < 0) h->snap_dir = NULL;
    if (!h->path || !h->snap_dir) {
        hist_err(err, "%s: out of memory", path);
        history_close(h);
        return NULL;
    }
    int64_t version = 0;
    if (flags & HISTORY_OPEN_READONLY) {
        if (connect_db(h, flags, err) || identify_db(h, &version, err)) {
            history_close(h);
            return NULL;
        }
        if (version < HISTORY_SCHEMA_VERSION) {
            hist_err(err, "%s: written by an older k3 (schema %lld); open it once with write access (e.g. k3 chat --db) "
                     "to upgrade it", h->path, (long long)version);
            history_close(h);
            return NULL;
        }
        return h;
    }
    if (connect_db(h, flags, err) || (sqlite3_db_readonly(h->db, "main") == 1 && hist_err(err, "%s: read-only", path)) ||
        identify_db(h, &version, err) || set_journal(h, err) || migrate_db(h, version, err)) {
        explain_readonly(path, err);
        history_close(h);
        return NULL;
    }
    tighten_sidecar_modes(h->path);
    open_snapshot_dir(h);
    return h;
}

/* Closing also releases the snapshot-directory lock. */
void history_close(history *h)
{
    if (!h) return;
    if (h->db) sqlite3_close_v2(h->db);
    if (h->lock_fd >= 0) close(h->lock_fd);
    history_conv_unlock(h);
    free(h->path);
    free(h->snap_dir);
    free(h);
}

/* For messages and for `k3 history` to say which file it used. */
const char *history_path(const history *h)
{
    return h->path;
}

/* Where the engine's state files go (the caller gets paths from snapshot_begin). */
const char *history_snapshot_dir(const history *h)
{
    return h->snap_dir;
}
