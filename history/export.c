/* export.c - a conversation out as Markdown (to read) or JSON (to keep or
 * move), JSON back in, and the health check of a database.
 *
 * The JSON form holds everything a conversation is except the database's
 * internal integer ids and snapshot files (caches the engine can rebuild),
 * so export -> import -> export gives the same bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "internal.h"

#define EXPORT_FORMAT_NAME "k3-history"
#define EXPORT_FORMAT_VERSION 1
#define JSON_FLAGS (JSON_INDENT(2) | JSON_REAL_PRECISION(15))

/* "2025-01-31 14:05:09 UTC": readable and independent of the reader's zone. */
static void format_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(buf, cap, "%lld ms", (long long)ms);
}

/* Capitalised role for Markdown headings. */
static const char *role_heading(const char *role)
{
    if (!strcmp(role, "system")) return "System";
    if (!strcmp(role, "user")) return "User";
    if (!strcmp(role, "assistant")) return "Assistant";
    if (!strcmp(role, "tool")) return "Tool";
    return role;
}

/* The per-answer numbers in one italic line; nothing when none are known. */
static void md_stats_line(FILE *f, const history_message *m)
{
    char line[400] = "";
    size_t n = 0;
#define ADD(...) do { n += (size_t)snprintf(line + n, n < sizeof line ? sizeof line - n : 0, __VA_ARGS__); } while (0)
    if (m->prompt_tokens >= 0) ADD("%s%lld prompt tokens", n ? " · " : "", (long long)m->prompt_tokens);
    if (m->generated_tokens >= 0) ADD("%s%lld generated", n ? " · " : "", (long long)m->generated_tokens);
    if (m->ttft_ms >= 0) ADD("%sTTFT %.0f ms", n ? " · " : "", m->ttft_ms);
    if (m->prefill_ms >= 0) ADD("%sprefill %.0f ms", n ? " · " : "", m->prefill_ms);
    if (m->decode_ms >= 0) ADD("%sdecode %.0f ms", n ? " · " : "", m->decode_ms);
    if (m->decode_ms > 0 && m->generated_tokens > 0)
        ADD(" (%.1f tok/s)", (double)m->generated_tokens * 1000.0 / m->decode_ms);
#undef ADD
    if (n) fprintf(f, "*%s*\n\n", line);
}

/* Markdown for people: a header list, then one section per message. */
static int export_markdown(const history_conversation *c, const history_message *msgs, size_t n, FILE *f)
{
    char created[64], updated[64];
    format_time(c->created_ms, created, sizeof created);
    format_time(c->updated_ms, updated, sizeof updated);
    fprintf(f, "# %s\n\n", *c->title ? c->title : "(untitled)");
    fprintf(f, "- id: `%s`\n", c->uid);
    if (*c->model_path) fprintf(f, "- model: `%s`\n", c->model_path);
    if (*c->model_fingerprint) fprintf(f, "- model fingerprint: `%s`\n", c->model_fingerprint);
    if (*c->model_type) fprintf(f, "- model type: %s\n", c->model_type);
    fprintf(f, "- created: %s\n- updated: %s\n", created, updated);
    if (strcmp(c->sampling_json, "{}")) fprintf(f, "- sampling (current setting): `%s`\n", c->sampling_json);
    fputc('\n', f);
    if (*c->system_prompt) fprintf(f, "## System prompt\n\n%s\n\n", c->system_prompt);
    for (size_t i = 0; i < n; i++) {
        const history_message *m = &msgs[i];
        fprintf(f, "## %s", role_heading(m->role));
        if (m->in_progress) fprintf(f, " (incomplete: the chat stopped while answering)");
        else if (m->status != HISTORY_COMPLETE) fprintf(f, " (%s)", history_status_name(m->status));
        if (m->reasoning) fprintf(f, "\n\n<details><summary>reasoning</summary>\n\n%s\n\n</details>", m->reasoning);
        fprintf(f, "\n\n%s\n\n", m->content);
        if (m->sampling_json) fprintf(f, "*sampling: `%s`*\n\n", m->sampling_json);
        md_stats_line(f, m);
    }
    return ferror(f) ? -1 : 0;
}

/* NULL for unknown numbers keeps "unknown" distinct from zero. */
static json_t *opt_int(int64_t v) { return v >= 0 ? json_integer(v) : json_null(); }
/* The same for timings. */
static json_t *opt_real(double v) { return v >= 0 ? json_real(v) : json_null(); }

/* Stored JSON text back into a value for embedding (never fails loudly:
 * the store only keeps valid objects). */
static json_t *embedded_json(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    return j ? j : json_null();
}

/* One message as a JSON object. */
static json_t *message_json(const history_message *m)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "seq", json_integer(m->seq));
    json_object_set_new(o, "role", json_string(m->role));
    json_object_set_new(o, "status", json_string(history_status_name(m->status)));
    json_object_set_new(o, "content", json_string(m->content));
    json_object_set_new(o, "created_ms", json_integer(m->created_ms));
    json_object_set_new(o, "prompt_tokens", opt_int(m->prompt_tokens));
    json_object_set_new(o, "generated_tokens", opt_int(m->generated_tokens));
    json_object_set_new(o, "ttft_ms", opt_real(m->ttft_ms));
    json_object_set_new(o, "prefill_ms", opt_real(m->prefill_ms));
    json_object_set_new(o, "decode_ms", opt_real(m->decode_ms));
    json_object_set_new(o, "engine_stats", embedded_json(m->engine_stats_json));
    if (m->sampling_json) json_object_set_new(o, "sampling", embedded_json(m->sampling_json));
    if (m->in_progress) json_object_set_new(o, "incomplete", json_true());
    if (m->reasoning) json_object_set_new(o, "reasoning", json_string(m->reasoning));
    return o;
}

/* The whole conversation as one JSON document. */
static json_t *conversation_json(const history_conversation *c, const history_message *msgs, size_t n)
{
    json_t *o = json_object(), *arr = json_array();
    if (!o || !arr) { json_decref(o); json_decref(arr); return NULL; }
    json_object_set_new(o, "format", json_string(EXPORT_FORMAT_NAME));
    json_object_set_new(o, "version", json_integer(EXPORT_FORMAT_VERSION));
    json_object_set_new(o, "id", json_string(c->uid));
    json_object_set_new(o, "title", json_string(c->title));
    json_object_set_new(o, "model_path", json_string(c->model_path));
    json_object_set_new(o, "model_fingerprint", json_string(c->model_fingerprint));
    json_object_set_new(o, "model_type", json_string(c->model_type));
    json_object_set_new(o, "system_prompt", json_string(c->system_prompt));
    json_object_set_new(o, "sampling", embedded_json(c->sampling_json));
    json_object_set_new(o, "created_ms", json_integer(c->created_ms));
    json_object_set_new(o, "updated_ms", json_integer(c->updated_ms));
    for (size_t i = 0; i < n; i++) {
        json_t *m = message_json(&msgs[i]);
        if (!m || json_array_append_new(arr, m)) { json_decref(o); json_decref(arr); return NULL; }
    }
    json_object_set_new(o, "messages", arr);
    return o;
}

/* See history.h. */
int history_export(history *h, int64_t conversation_id, history_format fmt, FILE *out, history_error *err)
{
    history_conversation c;
    if (history_conv_get(h, conversation_id, &c, err)) return -1;
    history_message *msgs = NULL;
    size_t n = 0;
    int rc = -1;
    if (history_msg_list(h, conversation_id, &msgs, &n, err)) goto done;
    if (fmt == HISTORY_MARKDOWN) {
        rc = export_markdown(&c, msgs, n, out);
    } else {
        json_t *doc = conversation_json(&c, msgs, n);
        rc = doc && json_dumpf(doc, out, JSON_FLAGS) == 0 && fputc('\n', out) != EOF ? 0 : -1;
        json_decref(doc);
    }
    if (rc) hist_err(err, "%s: export of conversation %s failed (out of memory or write error)", h->path, c.uid);
done:
    history_msg_list_free(msgs, n);
    history_conv_free(&c);
    return rc;
}

/* See history.h. */
char *history_export_string(history *h, int64_t conversation_id, history_format fmt, history_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) { hist_err(err, "%s: out of memory", h->path); return NULL; }
    int rc = history_export(h, conversation_id, fmt, f, err);
    if (fclose(f) != 0 && rc == 0) rc = hist_err(err, "%s: out of memory", h->path);
    if (rc) { free(buf); return NULL; }
    return buf;
}

/* ---- import ---------------------------------------------------------- */

/* Optional string member: absent/null -> "", other types are an error. */
static int get_string(json_t *o, const char *key, const char **out, const char *source, const char *where, history_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = ""; return 0; }
    if (!json_is_string(v)) return hist_err(err, "%s: %s%s: expected a string", source, where, key);
    *out = json_string_value(v);
    return 0;
}

/* Largest value accepted for any number in an import: counts and
 * milliseconds are stored as int64, and converting a double past that range
 * is undefined; 2^53 keeps every accepted value exact. */
#define IMPORT_MAX_NUMBER 9007199254740992.0

/* Optional non-negative number member: absent/null -> -1; a value over
 * IMPORT_MAX_NUMBER (e.g. 1e300) is refused. */
static int get_number(json_t *o, const char *key, double *out, const char *source, const char *where, history_error *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = -1; return 0; }
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > IMPORT_MAX_NUMBER)
        return hist_err(err, "%s: %s%s: expected a number in 0..2^53 or null", source, where, key);
    *out = json_number_value(v);
    return 0;
}

/* Optional JSON object member as compact text (NULL when absent/null). */
static int get_object_text(json_t *o, const char *key, char **out, const char *source, const char *where, history_error *err)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return hist_err(err, "%s: %s%s: expected a JSON object", source, where, key);
    *out = json_dumps(v, JSON_COMPACT | JSON_REAL_PRECISION(15));
    return *out ? 0 : hist_err(err, "%s: out of memory", source);
}

/* One message object from the file, inserted inside the import transaction. */
static int import_message(history *h, int64_t conv_id, json_t *jm, size_t index, const char *source, history_error *err)
{
    char where[48];
    snprintf(where, sizeof where, "messages[%zu].", index);
    if (!json_is_object(jm)) return hist_err(err, "%s: messages[%zu]: expected an object", source, index);
    const char *role = "", *content = "", *status_name = "";
    double prompt, generated, ttft, prefill, decode, created;
    if (get_string(jm, "role", &role, source, where, err) || get_string(jm, "content", &content, source, where, err) ||
        get_string(jm, "status", &status_name, source, where, err) ||
        get_number(jm, "prompt_tokens", &prompt, source, where, err) ||
        get_number(jm, "generated_tokens", &generated, source, where, err) ||
        get_number(jm, "ttft_ms", &ttft, source, where, err) || get_number(jm, "prefill_ms", &prefill, source, where, err) ||
        get_number(jm, "decode_ms", &decode, source, where, err) || get_number(jm, "created_ms", &created, source, where, err))
        return -1;
    int status = *status_name ? history_status_parse(status_name) : HISTORY_COMPLETE;
    if (status < 0) return hist_err(err, "%s: %sstatus: '%s' is not complete, interrupted or error", source, where, status_name);
    history_message m = history_message_make(role, content, (history_status)status);
    if (strcmp(m.role, "system") && strcmp(m.role, "user") && strcmp(m.role, "assistant") && strcmp(m.role, "tool"))
        return hist_err(err, "%s: %srole: '%s' is not system, user, assistant or tool", source, where, role);
    m.prompt_tokens = (int64_t)prompt;
    m.generated_tokens = (int64_t)generated;
    m.ttft_ms = ttft;
    m.prefill_ms = prefill;
    m.decode_ms = decode;
    m.created_ms = created > 0 ? (int64_t)created : 0;
    const char *reasoning = "";
    if (get_string(jm, "reasoning", &reasoning, source, where, err)) return -1;
    char *clean_reasoning = *reasoning ? hist_utf8_clean(reasoning) : NULL;
    m.reasoning = clean_reasoning;
    char *stats = NULL, *clean = hist_utf8_clean(content);
    int rc = -1;
    if (!clean) hist_err(err, "%s: out of memory", source);
    else if (get_object_text(jm, "engine_stats", &stats, source, where, err) == 0)
        rc = hist_msg_insert(h, conv_id, &m, clean, stats, err) < 0 ? -1 : 0;
    free(stats);
    free(clean);
    free(clean_reasoning);
    return rc;
}

/* The conversation row, keeping the file's uid unless it is taken (or not
 * a valid uid), and its timestamps. */
static int64_t import_conversation_row(history *h, json_t *doc, const char *source, history_error *err)
{
    const char *uid = "", *title = "", *model_path = "", *fingerprint = "", *model_type = "", *system = "";
    double created, updated;
    char *sampling = NULL;
    if (get_string(doc, "id", &uid, source, "", err) || get_string(doc, "title", &title, source, "", err) ||
        get_string(doc, "model_path", &model_path, source, "", err) ||
        get_string(doc, "model_fingerprint", &fingerprint, source, "", err) ||
        get_string(doc, "model_type", &model_type, source, "", err) ||      /* absent before v7: "" */
        get_string(doc, "system_prompt", &system, source, "", err) ||
        get_number(doc, "created_ms", &created, source, "", err) || get_number(doc, "updated_ms", &updated, source, "", err) ||
        get_object_text(doc, "sampling", &sampling, source, "", err))
        return -1;
    int64_t now = hist_now_ms(), id = -1;
    int uid_ok = strlen(uid) == HISTORY_UID_LEN && strspn(uid, "0123456789abcdef") == HISTORY_UID_LEN;
    for (int attempt = 0; attempt < 8 && id < 0; attempt++) {
        char fresh[HISTORY_UID_LEN + 1];
        hist_random_hex(fresh, HISTORY_UID_LEN);
        sqlite3_stmt *st = hist_prepare(h,
            "INSERT INTO conversations (uid, title, model_path, model_fingerprint, system_prompt,"
            " sampling_json, created_ms, updated_ms, model_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (uid) DO NOTHING", err);
        if (!st) break;
        sqlite3_bind_text(st, 1, attempt == 0 && uid_ok ? uid : fresh, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, title, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, model_path, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, fingerprint, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, system, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, sampling ? sampling : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, created > 0 ? (int64_t)created : now);
        sqlite3_bind_int64(st, 8, updated > 0 ? (int64_t)updated : now);
        sqlite3_bind_text(st, 9, model_type, -1, SQLITE_STATIC);
        int rc = hist_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) { hist_db_err(h, err, "importing a conversation"); break; }
        if (sqlite3_changes(h->db)) id = sqlite3_last_insert_rowid(h->db);
    }
    free(sampling);
    if (id < 0 && err && !*err->msg) hist_err(err, "%s: could not pick a free conversation id", h->path);
    return id;
}

/* Importing the same export twice made a silent duplicate. The file's
 * conversation is already here when a conversation with its uid holds the
 * same messages (roles and texts, in order): its id, 0 when not, -1 on a
 * database error. */
static int64_t import_already_stored(history *h, json_t *doc, json_t *messages, history_error *err)
{
    json_t *uid = json_object_get(doc, "id");
    if (!json_is_string(uid)) return 0;
    sqlite3_stmt *st = hist_prepare(h, "SELECT m.role, m.content, c.id FROM messages m JOIN conversations c ON "
                                       "c.id = m.conversation_id WHERE c.uid = ? ORDER BY m.id", err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, json_string_value(uid), -1, SQLITE_TRANSIENT);
    size_t n = 0;
    int64_t id = 0;
    int same = 1, rc;
    while ((rc = hist_step(st)) == SQLITE_ROW && same) {
        json_t *jm = json_array_get(messages, n++);
        const char *role = json_string_value(json_object_get(jm, "role"));
        const char *content = json_string_value(json_object_get(jm, "content"));
        char *clean = content ? hist_utf8_clean(content) : NULL;
        same = role && clean && !strcmp(role, (const char *)sqlite3_column_text(st, 0)) &&
               !strcmp(clean, (const char *)sqlite3_column_text(st, 1));
        free(clean);
        id = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return hist_db_err(h, err, "looking for an imported conversation");
    return same && n > 0 && n == json_array_size(messages) ? id : 0;
}

/* Everything in one transaction: an import either fully lands or not at all. */
int64_t history_import_json(history *h, const char *json_text, const char *source, history_conversation *out, history_error *err)
{
    if (!source) source = "import";
    if (err) err->msg[0] = 0;
    json_error_t jerr;
    json_t *doc = json_loads(json_text, 0, &jerr);
    if (!doc) return hist_err(err, "%s: invalid JSON at line %d: %s", source, jerr.line, jerr.text);
    int64_t id = -1;
    json_t *format = json_object_get(doc, "format"), *version = json_object_get(doc, "version");
    json_t *messages = json_object_get(doc, "messages");
    if (!json_is_object(doc) || !json_is_string(format) || strcmp(json_string_value(format), EXPORT_FORMAT_NAME)) {
        hist_err(err, "%s: not a k3 history export (\"format\": \"%s\" missing)", source, EXPORT_FORMAT_NAME);
        goto done;
    }
    if (!json_is_integer(version) || json_integer_value(version) > EXPORT_FORMAT_VERSION) {
        hist_err(err, "%s: export version is missing or newer than this k3 understands (%d)", source, EXPORT_FORMAT_VERSION);
        goto done;
    }
    if (!json_is_array(messages)) { hist_err(err, "%s: messages: expected an array", source); goto done; }
    int64_t stored = import_already_stored(h, doc, messages, err);
    if (stored < 0) goto done;
    if (stored > 0) {
        id = out && history_conv_get(h, stored, out, err) ? -1 : HISTORY_IMPORT_ALREADY_STORED;
        goto done;
    }
    if (hist_begin(h, err)) goto done;
    int64_t new_id = import_conversation_row(h, doc, source, err);
    for (size_t i = 0; new_id > 0 && i < json_array_size(messages); i++)
        if (import_message(h, new_id, json_array_get(messages, i), i, source, err)) new_id = -1;
    if (new_id < 0) { hist_rollback(h); goto done; }
    if (hist_commit(h, err)) goto done;
    id = new_id;
    if (out && history_conv_get(h, id, out, err)) id = -1;
done:
    json_decref(doc);
    return id;
}

/* ---- check ----------------------------------------------------------- */

/* Append one problem line to the report. */
static void report_add(char **report, size_t *len, const char *line)
{
    size_t add = strlen(line) + 1;
    char *grown = realloc(*report, *len + add + 1);
    if (!grown) return;
    *report = grown;
    memcpy(*report + *len, line, add - 1);
    (*report)[*len + add - 1] = '\n';
    *len += add;
    (*report)[*len] = 0;
}

/* SQLite's own page-level check; every row but a single "ok" is a problem. */
static int check_integrity(history *h, char **report, size_t *len, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, "PRAGMA integrity_check", err);
    if (!st) return -1;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        const char *line = (const char *)sqlite3_column_text(st, 0);
        if (line && strcmp(line, "ok")) report_add(report, len, line);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "integrity check");
}

/* Rows whose parent is missing would mean foreign keys were off somewhere. */
static int check_foreign_keys(history *h, char **report, size_t *len, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, "PRAGMA foreign_key_check", err);
    if (!st) return -1;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        char line[200];
        snprintf(line, sizeof line, "foreign key: %s row %lld refers to a missing %s row",
                 sqlite3_column_text(st, 0), (long long)sqlite3_column_int64(st, 1), sqlite3_column_text(st, 2));
        report_add(report, len, line);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "foreign key check");
}

/* The full-text index must agree with the messages table. */
static void check_fts(history *h, char **report, size_t *len)
{
    if (sqlite3_exec(h->db, "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)", NULL, NULL, NULL) != SQLITE_OK) {
        char line[300];
        snprintf(line, sizeof line, "full-text index: %s", sqlite3_errmsg(h->db));
        report_add(report, len, line);
    }
}

/* Every snapshot row must point at a file with the recorded size and checksum. */
static int check_snapshots(history *h, char **report, size_t *len, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, "SELECT file_name, bytes, checksum FROM snapshots", err);
    if (!st) return -1;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        history_snapshot s;
        memset(&s, 0, sizeof s);
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", h->snap_dir, sqlite3_column_text(st, 0));
        s.path = path;
        s.bytes = sqlite3_column_int64(st, 1);
        snprintf(s.checksum, sizeof s.checksum, "%s", sqlite3_column_text(st, 2));
        history_error e;
        if (history_snapshot_verify(&s, &e)) report_add(report, len, e.msg);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "snapshot check");
}

/* See history.h. */
int history_check(history *h, char **report, history_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (check_integrity(h, &text, &len, err) || check_foreign_keys(h, &text, &len, err)) { free(text); return -1; }
    check_fts(h, &text, &len);
    if (check_snapshots(h, &text, &len, err)) { free(text); return -1; }
    *report = text;
    return text ? 1 : 0;
}

/* Milliseconds as ISO 8601 UTC, for people reading the JSON. */
static json_t *utc_string(int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char buf[32];
    if (!gmtime_r(&t, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm)) return json_null();
    return json_string(buf);
}

/* Print a JSON value (a line per document, as llm logs --json does). */
static int dump_json(json_t *v, FILE *out)
{
    if (!v) return -1;
    int rc = json_dumpf(v, out, JSON_FLAGS) == 0 && fputc('\n', out) != EOF ? 0 : -1;
    json_decref(v);
    return rc;
}

/* See history.h. */
int history_list_json(history *h, int limit, FILE *out, history_error *err)
{
    history_conversation *list = NULL;
    size_t n = 0;
    if (history_conv_list(h, limit, &list, &n, err)) return -1;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const history_conversation *c = &list[i];
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(c->uid));
        json_object_set_new(o, "title", json_string(c->title));
        json_object_set_new(o, "model_path", json_string(c->model_path));
        json_object_set_new(o, "model_fingerprint", json_string(c->model_fingerprint));
        json_object_set_new(o, "model_type", json_string(c->model_type));
        json_object_set_new(o, "created_ms", json_integer(c->created_ms));
        json_object_set_new(o, "updated_ms", json_integer(c->updated_ms));
        json_object_set_new(o, "updated_utc", utc_string(c->updated_ms));
        json_object_set_new(o, "turns", json_integer(c->n_turns));
        json_object_set_new(o, "messages", json_integer(c->n_messages));
        json_array_append_new(arr, o);
    }
    history_conv_list_free(list, n);
    if (dump_json(arr, out)) return hist_err(err, "%s: cannot write the list (out of memory or output error)", h->path);
    return 0;
}

/* See history.h. */
int history_hits_json(const history_hit *hits, size_t n, FILE *out)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "conversation_id", json_string(hits[i].uid));
        json_object_set_new(o, "title", json_string(hits[i].title ? hits[i].title : ""));
        json_object_set_new(o, "seq", json_integer(hits[i].seq));
        json_object_set_new(o, "role", json_string(hits[i].role));
        json_object_set_new(o, "snippet", json_string(hits[i].snippet ? hits[i].snippet : ""));
        json_object_set_new(o, "score", json_real(hits[i].score));
        json_object_set_new(o, "created_ms", json_integer(hits[i].created_ms));
        json_object_set_new(o, "created_utc", utc_string(hits[i].created_ms));
        json_array_append_new(arr, o);
    }
    return dump_json(arr, out);
}
