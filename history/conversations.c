/* conversations.c - conversations and their messages: create, update, find
 * by what a user typed, list, delete (with snapshot files), append and read
 * messages. Every write is one short BEGIN IMMEDIATE transaction. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <jansson.h>
#include "internal.h"

#define TITLE_MAX_CHARS 60

/* The columns every conversation query selects, in the order load_conv reads. */
#define CONV_COLUMNS                                                                          \
    "c.id, c.uid, c.title, c.model_path, c.model_fingerprint, c.system_prompt, "             \
    "c.sampling_json, c.created_ms, c.updated_ms, "                                          \
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), "                     \
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user'), "  \
    "c.model_type"

/* Fill a conversation from a row selected with CONV_COLUMNS. */
static int read_conv_row(sqlite3_stmt *st, history_conversation *c)
{
    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(st, 0);
    snprintf(c->uid, sizeof c->uid, "%s", sqlite3_column_text(st, 1) ? (const char *)sqlite3_column_text(st, 1) : "");
    c->title = hist_col_text(st, 2, 1);
    c->model_path = hist_col_text(st, 3, 1);
    c->model_fingerprint = hist_col_text(st, 4, 1);
    c->system_prompt = hist_col_text(st, 5, 1);
    c->sampling_json = hist_col_text(st, 6, 1);
    c->created_ms = sqlite3_column_int64(st, 7);
    c->updated_ms = sqlite3_column_int64(st, 8);
    c->n_messages = sqlite3_column_int64(st, 9);
    c->n_turns = sqlite3_column_int64(st, 10);
    c->model_type = hist_col_text(st, 11, 1);
    if (!c->title || !c->model_path || !c->model_fingerprint || !c->model_type || !c->system_prompt ||
        !c->sampling_json) {
        history_conv_free(c);
        return -1;
    }
    return 0;
}

/* See history.h. */
void history_conv_free(history_conversation *c)
{
    if (!c) return;
    free(c->title);
    free(c->model_path);
    free(c->model_fingerprint);
    free(c->model_type);
    free(c->system_prompt);
    free(c->sampling_json);
    c->title = c->model_path = c->model_fingerprint = c->model_type = c->system_prompt = c->sampling_json = NULL;
}

/* See history.h. */
void history_conv_list_free(history_conversation *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) history_conv_free(&list[i]);
    free(list);
}

/* Shared by get, find and the export: one row by integer id. */
int hist_conv_load(history *h, int64_t id, history_conversation *out, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, "SELECT " CONV_COLUMNS " FROM conversations c WHERE c.id = ?", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = hist_step(st), found = -1;
    if (rc == SQLITE_ROW) {
        found = read_conv_row(st, out) ? hist_err(err, "%s: out of memory", h->path) : 1;
    } else if (rc == SQLITE_DONE) {
        found = 0;
    } else {
        hist_db_err(h, err, "reading a conversation");
    }
    sqlite3_finalize(st);
    return found;
}

/* See history.h. */
int history_conv_get(history *h, int64_t id, history_conversation *out, history_error *err)
{
    int found = hist_conv_load(h, id, out, err);
    if (found == 0) return hist_err(err, "%s: no conversation with id %lld", h->path, (long long)id);
    return found < 0 ? -1 : 0;
}

/* Users type "last" or a prefix of the uid (any case); anything else is not
 * an id, which we say instead of searching. */
int history_conv_find(history *h, const char *ref, history_conversation *out, history_error *err)
{
    if (!ref || !*ref) return hist_err(err, "history: empty conversation id");
    if (!strcmp(ref, "last")) {
        int64_t id = 0;
        /* the last conversation somebody wrote in: an empty one (from an older
         * k3, or emptied by /undo) is never what "last" means */
        sqlite3_stmt *st = hist_prepare(h, "SELECT c.id FROM conversations c WHERE EXISTS (SELECT 1 FROM messages m"
                                           " WHERE m.conversation_id = c.id) ORDER BY c.updated_ms DESC, c.id DESC LIMIT 1", err);
        if (!st) return -1;
        int rc = hist_step(st);
        if (rc == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (rc == SQLITE_DONE) return hist_err(err, "%s: no conversation with a message yet", h->path);
        if (rc != SQLITE_ROW) return hist_db_err(h, err, "finding the last conversation");
        return history_conv_get(h, id, out, err);
    }
    char prefix[HISTORY_UID_LEN + 1];
    size_t n = strlen(ref);
    if (n > HISTORY_UID_LEN) return hist_err(err, "history: '%s' is not a conversation id (ids are %d hex digits)", ref, HISTORY_UID_LEN);
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)ref[i]))
            return hist_err(err, "history: '%s' is not a conversation id (expected hex digits or 'last')", ref);
        prefix[i] = (char)tolower((unsigned char)ref[i]);
    }
    prefix[n] = 0;
    sqlite3_stmt *st = hist_prepare(h, "SELECT id, uid FROM conversations WHERE substr(uid, 1, ?) = ? ORDER BY uid LIMIT 4", err);
    if (!st) return -1;
    sqlite3_bind_int(st, 1, (int)n);
    sqlite3_bind_text(st, 2, prefix, -1, SQLITE_TRANSIENT);
    int64_t id = 0;
    int count = 0, rc;
    char names[64] = "";
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        if (count++ == 0) id = sqlite3_column_int64(st, 0);
        if (count <= 3) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof names - len, "%s%s", count > 1 ? ", " : "", sqlite3_column_text(st, 1));
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return hist_db_err(h, err, "finding a conversation");
    if (count == 0) return hist_err(err, "%s: no conversation with id '%s'", h->path, ref);
    if (count > 1) return hist_err(err, "history: id '%s' is ambiguous (matches %s%s); type more digits", ref, names, count > 3 ? ", ..." : "");
    return history_conv_get(h, id, out, err);
}

/* Every row of a prepared statement, read by read_row into a growing array
 * of elem_bytes records: the one loop behind the list functions. The
 * statement is finalized; on failure (out of memory, a bad row, a database
 * error) what was read is freed by free_list and err says what failed. */
static int collect_rows(history *h, sqlite3_stmt *st, size_t elem_bytes,
                        int (*read_row)(sqlite3_stmt *, void *), void (*free_list)(void *, size_t),
                        const char *what, void **out, size_t *n_out, history_error *err)
{
    char *list = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char *grown = realloc(list, cap * elem_bytes);
            if (!grown) break;
            list = grown;
        }
        if (read_row(st, list + n * elem_bytes)) break;
        n++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free_list(list, n);
        return rc == SQLITE_ROW ? hist_err(err, "%s: out of memory", h->path) : hist_db_err(h, err, what);
    }
    *out = list;
    *n_out = n;
    return 0;
}

static int read_msg_row(sqlite3_stmt *st, history_message *m);
static int read_conv_row_any(sqlite3_stmt *st, void *row) { return read_conv_row(st, row); }
static int read_msg_row_any(sqlite3_stmt *st, void *row) { return read_msg_row(st, row); }
static void free_conv_list_any(void *list, size_t n) { history_conv_list_free(list, n); }
static void free_msg_list_any(void *list, size_t n) { history_msg_list_free(list, n); }

/* See history.h. */
int history_conv_list(history *h, int limit, history_conversation **out, size_t *n_out, history_error *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st = hist_prepare(h, "SELECT " CONV_COLUMNS " FROM conversations c ORDER BY c.updated_ms DESC, c.id DESC LIMIT ?", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, limit > 0 ? limit : -1);
    void *list;
    size_t n;
    if (collect_rows(h, st, sizeof(history_conversation), read_conv_row_any, free_conv_list_any,
                     "listing conversations", &list, &n, err))
        return -1;
    *out = list;
    *n_out = n;
    return 0;
}

/* Insert the row; a uid collision (1 in 4 billion per pair) just retries. */
int64_t history_conv_create(history *h, const history_conversation *fields, history_conversation *out, history_error *err)
{
    const char *title = fields && fields->title ? fields->title : "";
    const char *model_path = fields && fields->model_path ? fields->model_path : "";
    const char *fingerprint = fields && fields->model_fingerprint ? fields->model_fingerprint : "";
    const char *model_type = fields && fields->model_type ? fields->model_type : "";
    const char *system = fields && fields->system_prompt ? fields->system_prompt : "";
    char *sampling = hist_json_object_compact(fields && fields->sampling_json ? fields->sampling_json : "{}",
                                              "sampling parameters", err);
    if (!sampling) return -1;
    char *clean_title = hist_utf8_clean(title), *clean_system = hist_utf8_clean(system);
    char *clean_model = hist_utf8_clean(model_path), *clean_fp = hist_utf8_clean(fingerprint);
    char *clean_type = hist_utf8_clean(model_type);
    int64_t id = -1;
    if (!clean_title || !clean_system || !clean_model || !clean_fp || !clean_type) { hist_err(err, "%s: out of memory", h->path); goto done; }
    for (int attempt = 0; attempt < 8 && id < 0; attempt++) {
        char uid[HISTORY_UID_LEN + 1];
        hist_random_hex(uid, HISTORY_UID_LEN);
        if (hist_begin(h, err)) goto done;
        sqlite3_stmt *st = hist_prepare(h,
            "INSERT INTO conversations (uid, title, model_path, model_fingerprint, system_prompt,"
            " sampling_json, created_ms, updated_ms, model_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (uid) DO NOTHING", err);
        if (!st) { hist_rollback(h); goto done; }
        int64_t now = hist_now_ms();
        sqlite3_bind_text(st, 1, uid, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, clean_title, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, clean_model, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, clean_fp, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, clean_system, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, sampling, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, now);
        sqlite3_bind_int64(st, 8, now);
        sqlite3_bind_text(st, 9, clean_type, -1, SQLITE_STATIC);
        int rc = hist_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) { hist_db_err(h, err, "creating a conversation"); hist_rollback(h); goto done; }
        int64_t new_id = sqlite3_changes(h->db) ? sqlite3_last_insert_rowid(h->db) : -1;
        if (hist_commit(h, err)) goto done;
        id = new_id;
    }
    if (id < 0) { hist_err(err, "%s: could not pick a free conversation id", h->path); goto done; }
    if (out && history_conv_get(h, id, out, err)) id = -1;
done:
    free(sampling);
    free(clean_title);
    free(clean_system);
    free(clean_model);
    free(clean_fp);
    free(clean_type);
    return id;
}

/* One UPDATE of one conversation in its own transaction; used by the setters. */
static int update_conv(history *h, int64_t id, const char *sql, const char *a, const char *b, const char *c,
                       history_error *err)
{
    if (hist_begin(h, err)) return -1;
    sqlite3_stmt *st = hist_prepare(h, sql, err);
    if (!st) { hist_rollback(h); return -1; }
    sqlite3_bind_int64(st, 1, hist_now_ms());
    sqlite3_bind_int64(st, 2, id);
    sqlite3_bind_text(st, 3, a, -1, SQLITE_STATIC);
    if (b) sqlite3_bind_text(st, 4, b, -1, SQLITE_STATIC);
    if (c) sqlite3_bind_text(st, 5, c, -1, SQLITE_STATIC);
    int rc = hist_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) { hist_db_err(h, err, "updating a conversation"); hist_rollback(h); return -1; }
    if (sqlite3_changes(h->db) == 0) {
        hist_rollback(h);
        return hist_err(err, "%s: no conversation with id %lld", h->path, (long long)id);
    }
    return hist_commit(h, err);
}

/* Setters clean their text first so nothing invalid reaches FTS or JSON. */
static int set_text_field(history *h, int64_t id, const char *sql, const char *text, history_error *err)
{
    char *clean = hist_utf8_clean(text ? text : "");
    if (!clean) return hist_err(err, "%s: out of memory", h->path);
    int rc = update_conv(h, id, sql, clean, NULL, NULL, err);
    free(clean);
    return rc;
}

/* See history.h. */
int history_conv_set_title(history *h, int64_t id, const char *title, history_error *err)
{
    return set_text_field(h, id, "UPDATE conversations SET updated_ms = max(updated_ms, ?1), title = ?3 WHERE id = ?2", title, err);
}

/* See history.h. */
int history_conv_set_system(history *h, int64_t id, const char *system_prompt, history_error *err)
{
    return set_text_field(h, id, "UPDATE conversations SET updated_ms = max(updated_ms, ?1), system_prompt = ?3 WHERE id = ?2", system_prompt, err);
}

/* See history.h. */
int history_conv_set_sampling(history *h, int64_t id, const char *sampling_json, history_error *err)
{
    char *compact = hist_json_object_compact(sampling_json ? sampling_json : "{}", "sampling parameters", err);
    if (!compact) return -1;
    int rc = update_conv(h, id, "UPDATE conversations SET updated_ms = max(updated_ms, ?1), sampling_json = ?3 WHERE id = ?2", compact, NULL, NULL,
                         err);
    free(compact);
    return rc;
}

/* See history.h. */
int history_conv_set_model(history *h, int64_t id, const char *model_path, const char *model_fingerprint,
                           const char *model_type, history_error *err)
{
    char *path = hist_utf8_clean(model_path ? model_path : ""), *fp = hist_utf8_clean(model_fingerprint ? model_fingerprint : "");
    char *type = hist_utf8_clean(model_type ? model_type : "");
    int rc = path && fp && type ? update_conv(h, id, "UPDATE conversations SET updated_ms = max(updated_ms, ?1), model_path = ?3,"
                                              " model_fingerprint = ?4, model_type = ?5 WHERE id = ?2", path, fp, type, err)
                                : hist_err(err, "%s: out of memory", h->path);
    free(path);
    free(fp);
    free(type);
    return rc;
}

/* See history.h. The lock file names the holder so the refusal can say who. */
int history_conv_lock(history *h, const history_conversation *c, history_error *err)
{
    history_conv_unlock(h);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.writer", h->snap_dir, c->uid);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return 0;                  /* no snapshot directory: nothing to coordinate with */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char who[64] = "";
        ssize_t n = pread(fd, who, sizeof who - 1, 0);
        who[n > 0 ? n : 0] = 0;
        who[strcspn(who, "\n")] = 0;
        close(fd);
        return hist_err(err, "conversation %s is open for writing in another k3 (%s); close it there first, or "
                        "start a new conversation (two writers would interleave their turns)",
                        c->uid, *who ? who : "pid unknown");
    }
    char who[64];
    int len = snprintf(who, sizeof who, "pid %ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, who, (size_t)len, 0) != len) { /* the lock is what matters */ }
    h->conv_lock_fd = fd;
    return 0;
}

void history_conv_unlock(history *h)
{
    if (h->conv_lock_fd >= 0) close(h->conv_lock_fd);   /* the lock goes with the descriptor */
    h->conv_lock_fd = -1;
}

/* Names of a conversation's snapshot files, read before its rows go away. */
static int snapshot_files_of(history *h, int64_t conv_id, char ***names, size_t *n, history_error *err)
{
    *names = NULL;
    *n = 0;
    sqlite3_stmt *st = hist_prepare(h, "SELECT file_name FROM snapshots WHERE conversation_id = ?", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, conv_id);
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        char **grown = realloc(*names, (*n + 1) * sizeof **names);
        if (!grown) break;
        *names = grown;
        char *path = NULL;
        if (asprintf(&path, "%s/%s", h->snap_dir, sqlite3_column_text(st, 0)) < 0) break;
        (*names)[(*n)++] = path;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "listing snapshots");
}

/* Rows first (cascade to messages, FTS via triggers, snapshot rows), files
 * after the commit: a crash in between leaves orphan files that the next
 * open removes, never a row pointing at a missing file. */
int history_conv_delete(history *h, int64_t id, history_error *err)
{
    if (hist_begin(h, err)) return -1;
    char **files = NULL;
    size_t n_files = 0;
    int rc = -1;
    if (snapshot_files_of(h, id, &files, &n_files, err)) goto fail;
    sqlite3_stmt *st = hist_prepare(h, "DELETE FROM conversations WHERE id = ?", err);
    if (!st) goto fail;
    sqlite3_bind_int64(st, 1, id);
    int step = hist_step(st);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) { hist_db_err(h, err, "deleting a conversation"); goto fail; }
    if (sqlite3_changes(h->db) == 0) { hist_err(err, "%s: no conversation with id %lld", h->path, (long long)id); goto fail; }
    if (hist_commit(h, err)) goto out;
    for (size_t i = 0; i < n_files; i++) unlink(files[i]);
    rc = 0;
    goto out;
fail:
    hist_rollback(h);
out:
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    return rc;
}

/* ---- messages -------------------------------------------------------- */

/* See history.h. */
history_message history_message_make(const char *role, const char *content, history_status status)
{
    history_message m;
    memset(&m, 0, sizeof m);
    snprintf(m.role, sizeof m.role, "%s", role ? role : "");
    m.content = (char *)content;
    m.status = status;
    m.prompt_tokens = m.generated_tokens = -1;
    m.ttft_ms = m.prefill_ms = m.decode_ms = -1;
    return m;
}

/* See history.h. */
const char *history_status_name(history_status s)
{
    switch (s) {
    case HISTORY_COMPLETE: return "complete";
    case HISTORY_INTERRUPTED: return "interrupted";
    case HISTORY_ERROR: return "error";
    }
    return "complete";
}

/* See history.h. */
int history_status_parse(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "complete")) return HISTORY_COMPLETE;
    if (!strcmp(name, "interrupted")) return HISTORY_INTERRUPTED;
    if (!strcmp(name, "error")) return HISTORY_ERROR;
    return -1;
}

/* See history.h. */
char *history_stats_json(int64_t bytes_read, double hit_rate, int64_t peak_rss_bytes)
{
    json_t *o = json_object();
    if (!o) return NULL;
    if (bytes_read >= 0) json_object_set_new(o, "bytes_read", json_integer(bytes_read));
    if (hit_rate >= 0) json_object_set_new(o, "hit_rate", json_real(hit_rate));
    if (peak_rss_bytes >= 0) json_object_set_new(o, "peak_rss_bytes", json_integer(peak_rss_bytes));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15));
    json_decref(o);
    return s;
}

/* Only the four roles the chat format knows are stored. */
static int role_ok(const char *role)
{
    return !strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "tool");
}

/* A short title from the first line of the first user message, cut on a
 * character boundary. */
static char *title_from(const char *content)
{
    while (*content == ' ' || *content == '\t' || *content == '\n' || *content == '\r') content++;
    size_t bytes = 0, chars = 0;
    while (content[bytes] && content[bytes] != '\n' && content[bytes] != '\r' && chars < TITLE_MAX_CHARS) {
        bytes++;
        while ((content[bytes] & 0xC0) == 0x80) bytes++;
        chars++;
    }
    int cut = content[bytes] && content[bytes] != '\n' && content[bytes] != '\r';
    while (bytes > 0 && (content[bytes - 1] == ' ' || content[bytes - 1] == '\t')) bytes--;
    char *t = malloc(bytes + 4);
    if (!t) return NULL;
    memcpy(t, content, bytes);
    strcpy(t + bytes, cut ? "\xE2\x80\xA6" : "");
    return t;
}

/* Bind an optional integer / real (negative = unknown = NULL). */
static void bind_opt_int(sqlite3_stmt *st, int i, int64_t v)
{
    if (v >= 0) sqlite3_bind_int64(st, i, v); else sqlite3_bind_null(st, i);
}

/* The same for timings (milliseconds as REAL). */
static void bind_opt_real(sqlite3_stmt *st, int i, double v)
{
    if (v >= 0) sqlite3_bind_double(st, i, v); else sqlite3_bind_null(st, i);
}

/* Bind a message's fields as ?2 .. ?15 (the numbering the insert and the
 * update share). Returns the token-id blob to free after the step, or NULL
 * (*oom set when it could not be made). */
static uint8_t *bind_msg_fields(sqlite3_stmt *st, const history_message *m, const char *content, const char *stats,
                                int *oom)
{
    sqlite3_bind_text(st, 2, m->role, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, content, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, history_status_name(m->status), -1, SQLITE_STATIC);
    bind_opt_int(st, 5, m->prompt_tokens);
    bind_opt_int(st, 6, m->generated_tokens);
    bind_opt_real(st, 7, m->ttft_ms);
    bind_opt_real(st, 8, m->prefill_ms);
    bind_opt_real(st, 9, m->decode_ms);
    if (stats) sqlite3_bind_text(st, 10, stats, -1, SQLITE_STATIC); else sqlite3_bind_null(st, 10);
    sqlite3_bind_int64(st, 11, m->created_ms > 0 ? m->created_ms : hist_now_ms());
    if (m->sampling_json) sqlite3_bind_text(st, 13, m->sampling_json, -1, SQLITE_STATIC); else sqlite3_bind_null(st, 13);
    sqlite3_bind_int(st, 14, m->in_progress != 0);
    if (m->reasoning && *m->reasoning) sqlite3_bind_text(st, 15, m->reasoning, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, 15);
    uint8_t *blob = NULL;
    if (m->token_ids && m->n_token_ids > 0) {      /* int32 little-endian, whatever the host */
        blob = malloc((size_t)m->n_token_ids * 4);
        if (!blob) { *oom = 1; return NULL; }
        for (int64_t i = 0; i < m->n_token_ids; i++)
            for (int b = 0; b < 4; b++) blob[i * 4 + b] = (uint8_t)((uint32_t)m->token_ids[i] >> (8 * b));
        sqlite3_bind_blob(st, 12, blob, (int)(m->n_token_ids * 4), SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, 12);
    }
    return blob;
}

/* The insert itself, inside the caller's transaction: seq is computed under
 * the write lock so concurrent writers never collide. */
int64_t hist_msg_insert(history *h, int64_t conv_id, const history_message *m, const char *content,
                        const char *stats, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h,
        "INSERT INTO messages (conversation_id, seq, role, content, status, prompt_tokens,"
        " generated_tokens, ttft_ms, prefill_ms, decode_ms, engine_stats_json, created_ms, token_ids,"
        " sampling_json, in_progress, reasoning)"
        " VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM messages WHERE conversation_id = ?1),"
        " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, conv_id);
    int oom = 0;
    uint8_t *blob = bind_msg_fields(st, m, content, stats, &oom);
    if (oom) { sqlite3_finalize(st); return hist_err(err, "%s: out of memory", h->path); }
    int rc = hist_step(st);
    free(blob);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        if ((sqlite3_extended_errcode(h->db)) == SQLITE_CONSTRAINT_FOREIGNKEY)
            return hist_err(err, "%s: no conversation with id %lld", h->path, (long long)conv_id);
        return hist_db_err(h, err, "adding a message");
    }
    return sqlite3_last_insert_rowid(h->db);
}

/* Bump updated_ms and give an untitled conversation its title. */
static int touch_conv(history *h, int64_t conv_id, const char *title, int64_t when, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h,
        "UPDATE conversations SET updated_ms = max(updated_ms, ?1),"
        " title = CASE WHEN title = '' AND ?3 IS NOT NULL THEN ?3 ELSE title END WHERE id = ?2", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, when);
    sqlite3_bind_int64(st, 2, conv_id);
    if (title) sqlite3_bind_text(st, 3, title, -1, SQLITE_STATIC); else sqlite3_bind_null(st, 3);
    int rc = hist_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "updating a conversation");
}

/* Validate and normalise outside the transaction, then insert + touch +
 * commit: when this returns an id the message is on disk. */
int64_t history_msg_add(history *h, int64_t conversation_id, const history_message *m, history_error *err)
{
    if (!role_ok(m->role)) return hist_err(err, "history: message role '%s' is not system, user, assistant or tool", m->role);
    if (history_status_parse(history_status_name(m->status)) != (int)m->status)
        return hist_err(err, "history: message status %d is not complete, interrupted or error", (int)m->status);
    char *content = hist_utf8_clean(m->content ? m->content : "");
    char *stats = NULL, *title = NULL;
    int64_t id = -1;
    if (!content) { hist_err(err, "%s: out of memory", h->path); goto done; }
    if (m->engine_stats_json && !(stats = hist_json_object_compact(m->engine_stats_json, "engine stats", err))) goto done;
    if (!strcmp(m->role, "user") && !(title = title_from(content))) { hist_err(err, "%s: out of memory", h->path); goto done; }
    if (hist_begin(h, err)) goto done;
    int64_t new_id = hist_msg_insert(h, conversation_id, m, content, stats, err);
    if (new_id < 0 || touch_conv(h, conversation_id, title, hist_now_ms(), err)) { hist_rollback(h); goto done; }
    if (hist_commit(h, err)) goto done;
    id = new_id;
done:
    free(content);
    free(stats);
    free(title);
    return id;
}

/* Rows first (snapshot rows of the dropped messages go with them by
 * cascade, the FTS index by trigger), files after the commit, as for a
 * whole conversation. */
int history_msg_truncate(history *h, int64_t conversation_id, int64_t from_message_id, history_error *err)
{
    if (hist_begin(h, err)) return -1;
    char **files = NULL;
    size_t n_files = 0;
    int rc = -1;
    sqlite3_stmt *st = hist_prepare(h,
        "SELECT s.file_name FROM snapshots s JOIN messages m ON m.id = s.message_id WHERE s.conversation_id = ?1"
        " AND m.seq >= (SELECT seq FROM messages WHERE id = ?2 AND conversation_id = ?1)", err);
    if (!st) goto fail;
    sqlite3_bind_int64(st, 1, conversation_id);
    sqlite3_bind_int64(st, 2, from_message_id);
    int step;
    while ((step = hist_step(st)) == SQLITE_ROW) {
        char **grown = realloc(files, (n_files + 1) * sizeof *files);
        if (!grown) break;
        files = grown;
        if (asprintf(&files[n_files], "%s/%s", h->snap_dir, sqlite3_column_text(st, 0)) < 0) break;
        n_files++;
    }
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) { hist_db_err(h, err, "listing snapshots"); goto fail; }
    st = hist_prepare(h, "DELETE FROM messages WHERE conversation_id = ?1"
                         " AND seq >= (SELECT seq FROM messages WHERE id = ?2 AND conversation_id = ?1)", err);
    if (!st) goto fail;
    sqlite3_bind_int64(st, 1, conversation_id);
    sqlite3_bind_int64(st, 2, from_message_id);
    step = hist_step(st);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) { hist_db_err(h, err, "deleting messages"); goto fail; }
    int removed = sqlite3_changes(h->db);
    if (touch_conv(h, conversation_id, NULL, hist_now_ms(), err)) goto fail;
    if (hist_commit(h, err)) goto out;
    for (size_t i = 0; i < n_files; i++) unlink(files[i]);
    rc = removed;
    goto out;
fail:
    hist_rollback(h);
out:
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    return rc;
}

/* Same validation as an add; the row keeps its seq, role and time. Used
 * for an answer that is written while it streams. */
int history_msg_update(history *h, int64_t message_id, const history_message *m, history_error *err)
{
    if (history_status_parse(history_status_name(m->status)) != (int)m->status)
        return hist_err(err, "history: message status %d is not complete, interrupted or error", (int)m->status);
    char *content = hist_utf8_clean(m->content ? m->content : "");
    char *stats = NULL;
    int rc = -1;
    if (!content) { hist_err(err, "%s: out of memory", h->path); goto done; }
    if (m->engine_stats_json && !(stats = hist_json_object_compact(m->engine_stats_json, "engine stats", err))) goto done;
    if (hist_begin(h, err)) goto done;
    sqlite3_stmt *st = hist_prepare(h,
        "UPDATE messages SET content = ?3, status = ?4, prompt_tokens = ?5, generated_tokens = ?6, ttft_ms = ?7,"
        " prefill_ms = ?8, decode_ms = ?9, engine_stats_json = ?10, token_ids = ?12, sampling_json = ?13,"
        " in_progress = ?14, reasoning = ?15 WHERE id = ?1 RETURNING conversation_id", err);
    if (!st) { hist_rollback(h); goto done; }
    sqlite3_bind_int64(st, 1, message_id);
    int oom = 0;
    uint8_t *blob = bind_msg_fields(st, m, content, stats, &oom);
    if (oom) { sqlite3_finalize(st); hist_rollback(h); hist_err(err, "%s: out of memory", h->path); goto done; }
    int step = hist_step(st);
    int64_t conv_id = step == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    if (step == SQLITE_ROW) step = hist_step(st);
    free(blob);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) { hist_db_err(h, err, "updating a message"); hist_rollback(h); goto done; }
    if (conv_id < 0) { hist_err(err, "%s: no message with id %lld", h->path, (long long)message_id); hist_rollback(h); goto done; }
    if (touch_conv(h, conv_id, NULL, hist_now_ms(), err)) { hist_rollback(h); goto done; }
    if (hist_commit(h, err) == 0) rc = 0;
done:
    free(content);
    free(stats);
    return rc;
}

/* See history.h. */
void history_msg_list_free(history_message *list, size_t n)
{
    for (size_t i = 0; list && i < n; i++) {
        free(list[i].content);
        free(list[i].engine_stats_json);
        free(list[i].token_ids);
        free(list[i].sampling_json);
        free(list[i].reasoning);
    }
    free(list);
}

/* One message row (column order of history_msg_list's SELECT). */
static int read_msg_row(sqlite3_stmt *st, history_message *m)
{
    memset(m, 0, sizeof *m);
    m->id = sqlite3_column_int64(st, 0);
    m->conversation_id = sqlite3_column_int64(st, 1);
    m->seq = sqlite3_column_int64(st, 2);
    snprintf(m->role, sizeof m->role, "%s", sqlite3_column_text(st, 3) ? (const char *)sqlite3_column_text(st, 3) : "");
    m->content = hist_col_text(st, 4, 1);
    int status = history_status_parse((const char *)sqlite3_column_text(st, 5));
    m->status = status < 0 ? HISTORY_COMPLETE : (history_status)status;
    m->prompt_tokens = sqlite3_column_type(st, 6) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 6);
    m->generated_tokens = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 7);
    m->ttft_ms = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 8);
    m->prefill_ms = sqlite3_column_type(st, 9) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 9);
    m->decode_ms = sqlite3_column_type(st, 10) == SQLITE_NULL ? -1 : sqlite3_column_double(st, 10);
    m->engine_stats_json = hist_col_text(st, 11, 0);
    m->created_ms = sqlite3_column_int64(st, 12);
    int blob_bytes = sqlite3_column_bytes(st, 13);
    const uint8_t *blob = sqlite3_column_blob(st, 13);
    if (blob && blob_bytes >= 4 && blob_bytes % 4 == 0) {
        m->n_token_ids = blob_bytes / 4;
        m->token_ids = malloc((size_t)blob_bytes);
        if (m->token_ids)
            for (int64_t i = 0; i < m->n_token_ids; i++)
                m->token_ids[i] = (int32_t)((uint32_t)blob[i * 4] | (uint32_t)blob[i * 4 + 1] << 8 |
                                            (uint32_t)blob[i * 4 + 2] << 16 | (uint32_t)blob[i * 4 + 3] << 24);
        else
            m->n_token_ids = 0;
    }
    m->sampling_json = hist_col_text(st, 14, 0);
    m->in_progress = sqlite3_column_int(st, 15);
    m->reasoning = hist_col_text(st, 16, 0);
    if (!m->content || (sqlite3_column_type(st, 11) != SQLITE_NULL && !m->engine_stats_json)) {
        free(m->content);
        free(m->engine_stats_json);
        free(m->token_ids);
        free(m->sampling_json);
        free(m->reasoning);
        return -1;
    }
    return 0;
}

/* See history.h. */
int history_msg_list(history *h, int64_t conversation_id, history_message **out, size_t *n_out, history_error *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st = hist_prepare(h,
        "SELECT id, conversation_id, seq, role, content, status, prompt_tokens, generated_tokens,"
        " ttft_ms, prefill_ms, decode_ms, engine_stats_json, created_ms, token_ids, sampling_json, in_progress,"
        " reasoning FROM messages WHERE conversation_id = ? ORDER BY seq", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, conversation_id);
    void *list;
    size_t n;
    if (collect_rows(h, st, sizeof(history_message), read_msg_row_any, free_msg_list_any,
                     "reading messages", &list, &n, err))
        return -1;
    *out = list;
    *n_out = n;
    return 0;
}
