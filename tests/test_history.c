/* test_history.c - unit tests of the history store (history/history.h).
 *
 * Each test works in its own temporary directory under /tmp and prints
 * PASS/FAIL lines (tests/test.h). Covered: schema creation and reopen,
 * migrations from user_version 0 and 1, refusal of foreign / newer /
 * garbage / corrupt files, message order and fields, search with quotes,
 * apostrophes and FTS operators, snippets and the substring fallback,
 * Markdown and JSON export with the JSON import round trip, id prefixes,
 * delete cascade, snapshots (commit, supersede, orphan and stale cleanup,
 * the lock that protects other processes), file modes and the default
 * path, and two processes writing at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "test.h"
#include "internal.h"

static char tmp_root[64];

/* A fresh path under this run's temp directory. */
static const char *tmp_path(const char *name)
{
    static char buf[8][256];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 256, "%s/%s", tmp_root, name);
    return p;
}

/* rm -rf without a shell, for the temp directory at the end. */
static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[1024];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Write bytes to a file (fixtures: garbage, orphans, snapshot contents). */
static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* Cleanup checks ask whether a file is (still) there. */
static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Run SQL on a raw connection (building old or foreign databases by hand). */
static int raw_exec(const char *db_path, const char *sql)
{
    sqlite3 *db;
    if (sqlite3_open(db_path, &db) != SQLITE_OK) { sqlite3_close(db); return -1; }
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc == SQLITE_OK ? 0 : -1;
}

/* One integer from a raw connection (-1 on error). */
static int64_t raw_int(const char *db_path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* A conversation with a few messages of every kind, for several tests. */
static int64_t make_sample(history *h, const char *title)
{
    history_error err;
    history_conversation f = {.title = (char *)title, .model_path = "models/demo", .model_fingerprint = "fp1",
                              .system_prompt = "You are terse.", .sampling_json = "{\"temperature\": 0.7, \"top_p\": 0.95}"};
    int64_t id = history_conv_create(h, &f, NULL, &err);
    if (id < 0) return -1;
    history_message u = history_message_make("user", "Why don't cats like water?", HISTORY_COMPLETE);
    history_message a = history_message_make("assistant", "Cats are not built for swimming; wet fur is heavy.", HISTORY_COMPLETE);
    a.prompt_tokens = 12;
    a.generated_tokens = 34;
    a.ttft_ms = 120.5;
    a.prefill_ms = 100;
    a.decode_ms = 2000;
    a.engine_stats_json = history_stats_json(123456, 0.75, 1 << 20);
    history_message i = history_message_make("assistant", "Partial answ", HISTORY_INTERRUPTED);
    int ok = history_msg_add(h, id, &u, &err) > 0 && history_msg_add(h, id, &a, &err) > 0 &&
             history_msg_add(h, id, &i, &err) > 0;
    free(a.engine_stats_json);
    return ok ? id : -1;
}

/* Schema creation, identification stamps, and data surviving a reopen. */
static void test_create_reopen(void)
{
    TEST_BEGIN("history_create_reopen");
    const char *path = tmp_path("create.db");
    history_error err;
    history *h = history_open(path, 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t id = make_sample(h, "first");
    CHECK(id > 0, "sample: %s", err.msg);
    history_close(h);
    CHECK(raw_int(path, "PRAGMA application_id") == HISTORY_APPLICATION_ID, "application_id not set");
    CHECK(raw_int(path, "PRAGMA user_version") == HISTORY_SCHEMA_VERSION, "user_version not %d", HISTORY_SCHEMA_VERSION);
    CHECK(raw_int(path, "SELECT count(*) FROM messages") == 3, "messages not on disk");
    h = history_open(path, HISTORY_OPEN_EXISTING, &err);
    CHECK(h != NULL, "reopen: %s", err.msg);
    if (h) {
        history_conversation c;
        CHECK(history_conv_get(h, id, &c, &err) == 0, "get: %s", err.msg);
        if (!test_current_failed) {
            CHECK(!strcmp(c.title, "first") && c.n_messages == 3 && c.n_turns == 1, "row: '%s' %lld %lld", c.title,
                  (long long)c.n_messages, (long long)c.n_turns);
            CHECK(!strcmp(c.sampling_json, "{\"temperature\":0.7,\"top_p\":0.95}"), "sampling stored as '%s'", c.sampling_json);
            history_conv_free(&c);
        }
        history_close(h);
    }
    CHECK(history_open(tmp_path("missing.db"), HISTORY_OPEN_EXISTING, &err) == NULL && strstr(err.msg, "no such"),
          "OPEN_EXISTING on a missing file: '%s'", err.msg);
    TEST_END();
}

/* user_version 0 (an empty SQLite file) and 1 (no FTS, no snapshots) both
 * migrate to the current version without losing rows; FTS is rebuilt. */
static void test_migrations(void)
{
    TEST_BEGIN("history_migrations");
    const char *empty = tmp_path("v0.db");
    CHECK(raw_exec(empty, "PRAGMA user_version") == 0, "making an empty database");
    history_error err;
    history *h = history_open(empty, HISTORY_OPEN_EXISTING, &err);
    CHECK(h != NULL, "open v0: %s", err.msg);
    history_close(h);
    CHECK(raw_int(empty, "PRAGMA user_version") == HISTORY_SCHEMA_VERSION, "v0 not migrated");

    const char *v1 = tmp_path("v1.db");
    sqlite3 *db;
    char msg[256] = "";
    int built = sqlite3_open(v1, &db) == SQLITE_OK && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
                hist_migrate(db, 0, 1, msg, sizeof msg) == 0 &&
                sqlite3_exec(db, "INSERT INTO conversations (uid, title, created_ms, updated_ms) VALUES ('0123abcd', 'old', 1, 2);"
                                 "INSERT INTO messages (conversation_id, seq, role, content, created_ms)"
                                 "  VALUES (1, 1, 'user', 'legacy zebra text', 1);"
                                 "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(db);
    CHECK(built, "building a v1 database: %s", msg);
    CHECK(raw_int(v1, "PRAGMA user_version") == 1, "v1 fixture has the wrong version");
    h = history_open(v1, HISTORY_OPEN_EXISTING, &err);
    CHECK(h != NULL, "open v1: %s", err.msg);
    if (h) {
        history_hit *hits;
        size_t n;
        CHECK(history_msg_search(h, "zebra", 10, NULL, NULL, &hits, &n, NULL, &err) == 0 && n == 1,
              "old message not found by FTS after migration (%zu hits)", n);
        if (!test_current_failed) history_hits_free(hits, n);
        history_conversation c;
        CHECK(history_conv_find(h, "0123", &c, &err) == 0, "old conversation: %s", err.msg);
        if (!test_current_failed) history_conv_free(&c);
        history_close(h);
    }
    CHECK(raw_int(v1, "PRAGMA user_version") == HISTORY_SCHEMA_VERSION, "v1 not migrated");

    /* v3, the schema before per-answer sampling: its rows read back (no
     * sampling, not in progress) and new answers carry their sampling */
    const char *v3 = tmp_path("v3.db");
    built = sqlite3_open(v3, &db) == SQLITE_OK && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK &&
            hist_migrate(db, 0, 3, msg, sizeof msg) == 0 &&
            sqlite3_exec(db, "INSERT INTO conversations (uid, title, sampling_json, created_ms, updated_ms)"
                             "  VALUES ('4567abcd', 'v3', '{\"temperature\":0}', 1, 2);"
                             "INSERT INTO messages (conversation_id, seq, role, content, created_ms)"
                             "  VALUES (1, 1, 'user', 'hello', 1), (1, 2, 'assistant', 'hi', 1);"
                             "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(db);
    CHECK(built && raw_int(v3, "PRAGMA user_version") == 3, "building a v3 database: %s", msg);
    h = history_open(v3, HISTORY_OPEN_EXISTING, &err);
    CHECK(h != NULL, "open v3: %s", err.msg);
    if (h) {
        history_message *msgs = NULL;
        size_t n = 0;
        CHECK(history_msg_list(h, 1, &msgs, &n, &err) == 0 && n == 2 && !msgs[1].sampling_json && !msgs[1].in_progress &&
              !strcmp(msgs[1].content, "hi"), "v3 messages after migration (%zu)", n);
        history_msg_list_free(msgs, n);
        history_message m = history_message_make("assistant", "again", HISTORY_COMPLETE);
        m.sampling_json = "{\"temperature\":0.7}";
        CHECK(history_msg_add(h, 1, &m, &err) > 0 && history_msg_list(h, 1, &msgs, &n, &err) == 0 && n == 3 &&
              msgs[2].sampling_json && !strcmp(msgs[2].sampling_json, "{\"temperature\":0.7}"),
              "per-answer sampling after migration: %s", n == 3 && msgs[2].sampling_json ? msgs[2].sampling_json : err.msg);
        history_msg_list_free(msgs, n);
        history_close(h);
    }
    CHECK(raw_int(v3, "PRAGMA user_version") == HISTORY_SCHEMA_VERSION, "v3 not migrated");
    TEST_END();
}

/* The SQLite header's write version byte: 1 = rollback journal, 2 = WAL. */
static int header_journal_byte(const char *path)
{
    unsigned char hdr[20];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    return n == sizeof hdr ? hdr[18] : -1;
}

/* Foreign, newer, garbage and non-file inputs are refused with one line and
 * left untouched (not even switched to WAL). */
static void test_refusals(void)
{
    TEST_BEGIN("history_refuses_foreign_files");
    history_error err;
    const char *foreign = tmp_path("foreign.db");
    raw_exec(foreign, "PRAGMA application_id = 305419896; CREATE TABLE t(x); INSERT INTO t VALUES (1);");
    CHECK(history_open(foreign, 0, &err) == NULL && strstr(err.msg, "not a k3 history database") && strstr(err.msg, foreign),
          "foreign application_id: '%s'", err.msg);
    CHECK(header_journal_byte(foreign) == 1, "foreign file was modified (switched to WAL)");

    const char *other = tmp_path("other_app.db");
    raw_exec(other, "CREATE TABLE notes(x); INSERT INTO notes VALUES ('keep me');");
    CHECK(history_open(other, 0, &err) == NULL && strstr(err.msg, "not a k3 history database"),
          "database of another app without application_id: '%s'", err.msg);
    CHECK(raw_int(other, "SELECT count(*) FROM notes") == 1, "other app's data changed");

    const char *newer = tmp_path("newer.db");
    history *h = history_open(newer, 0, &err);
    history_close(h);
    raw_exec(newer, "PRAGMA user_version = 99");
    CHECK(history_open(newer, 0, &err) == NULL && strstr(err.msg, "newer"), "newer schema: '%s'", err.msg);
    CHECK(raw_int(newer, "PRAGMA user_version") == 99, "newer database was modified");

    const char *garbage = tmp_path("garbage.db");
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)("garbage!"[i % 8] ^ (i / 8 & 0x55));
    write_file(garbage, junk, sizeof junk);
    CHECK(history_open(garbage, 0, &err) == NULL && strstr(err.msg, "not a SQLite database") && strstr(err.msg, garbage) &&
          !strchr(err.msg, '\n'), "garbage file: '%s'", err.msg);
    struct stat st;
    CHECK(stat(garbage, &st) == 0 && st.st_size == (off_t)sizeof junk, "garbage file was modified");

    CHECK(history_open(tmp_root, 0, &err) == NULL && strstr(err.msg, "directory"), "a directory: '%s'", err.msg);
    CHECK(history_open(tmp_path("no/such/dir/x.db"), 0, &err) == NULL && strstr(err.msg, "cannot create"),
          "missing parent directory: '%s'", err.msg);
    TEST_END();
}

/* Damage in the middle of a real database: every call returns an error or
 * a report, none crashes. */
static void test_corrupt(void)
{
    TEST_BEGIN("history_corrupt_file_no_crash");
    const char *path = tmp_path("corrupt.db");
    history_error err;
    history *h = history_open(path, 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    int64_t id = history_conv_create(h, NULL, NULL, &err);
    for (int i = 0; i < 60 && id > 0; i++) {
        history_message m = history_message_make("user", big, HISTORY_COMPLETE);
        history_msg_add(h, id, &m, &err);
    }
    history_close(h);
    int fd = open(path, O_WRONLY);
    char noise[4096];
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (char)(i * 7 + 3);
    for (off_t page = 2; page < 40; page += 3) pwrite(fd, noise, sizeof noise, page * 4096);
    close(fd);
    h = history_open(path, 0, &err);
    if (h) {
        char *report = NULL;
        int rc = history_check(h, &report, &err);
        CHECK(rc != 0, "check did not notice the damage");
        free(report);
        history_conversation *list;
        size_t n;
        if (history_conv_list(h, 0, &list, &n, &err) == 0) history_conv_list_free(list, n);
        history_message *msgs;
        if (history_msg_list(h, id, &msgs, &n, &err) == 0) history_msg_list_free(msgs, n);
        history_close(h);
    } else {
        CHECK(strstr(err.msg, path) && !strchr(err.msg, '\n'), "error does not name the file: '%s'", err.msg);
    }
    TEST_END();
}

/* Order, every stored field, statuses, auto title, UTF-8 repair, refusals. */
static void test_messages(void)
{
    TEST_BEGIN("history_messages_order_status_fields");
    history_error err;
    history *h = history_open(tmp_path("messages.db"), 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t id = make_sample(h, NULL);
    CHECK(id > 0, "sample: %s", err.msg);
    history_message bad = history_message_make("assistant", "cut \xE4\xB8", HISTORY_ERROR);
    CHECK(history_msg_add(h, id, &bad, &err) > 0, "invalid UTF-8 refused: %s", err.msg);
    history_message *msgs = NULL;
    size_t n = 0;
    CHECK(history_msg_list(h, id, &msgs, &n, &err) == 0 && n == 4, "list: %zu messages (%s)", n, err.msg);
    if (n == 4) {
        for (size_t i = 0; i < n; i++) CHECK(msgs[i].seq == (int64_t)i + 1, "seq %zu is %lld", i, (long long)msgs[i].seq);
        CHECK(!strcmp(msgs[0].role, "user") && msgs[0].prompt_tokens == -1 && msgs[0].ttft_ms < 0 && !msgs[0].engine_stats_json,
              "user message fields");
        CHECK(msgs[1].status == HISTORY_COMPLETE && msgs[1].prompt_tokens == 12 && msgs[1].generated_tokens == 34 &&
              msgs[1].ttft_ms == 120.5 && msgs[1].prefill_ms == 100 && msgs[1].decode_ms == 2000, "answer numbers");
        CHECK(msgs[1].engine_stats_json && !strcmp(msgs[1].engine_stats_json, "{\"bytes_read\":123456,\"hit_rate\":0.75,\"peak_rss_bytes\":1048576}"),
              "engine stats '%s'", msgs[1].engine_stats_json ? msgs[1].engine_stats_json : "(null)");
        CHECK(msgs[2].status == HISTORY_INTERRUPTED && !strcmp(msgs[2].content, "Partial answ"), "interrupted message");
        CHECK(msgs[3].status == HISTORY_ERROR && !strcmp(msgs[3].content, "cut \xEF\xBF\xBD\xEF\xBF\xBD"), "repaired text '%s'", msgs[3].content);
    }
    history_msg_list_free(msgs, n);
    history_conversation c;
    CHECK(history_conv_get(h, id, &c, &err) == 0 && !strcmp(c.title, "Why don't cats like water?"), "auto title");
    if (!test_current_failed) history_conv_free(&c);
    history_message wrong = history_message_make("robot", "x", HISTORY_COMPLETE);
    CHECK(history_msg_add(h, id, &wrong, &err) < 0 && strstr(err.msg, "robot"), "bad role accepted");
    history_message orphan = history_message_make("user", "x", HISTORY_COMPLETE);
    CHECK(history_msg_add(h, 999999, &orphan, &err) < 0 && strstr(err.msg, "no conversation"), "missing conversation: '%s'", err.msg);
    history_message stats = history_message_make("assistant", "x", HISTORY_COMPLETE);
    stats.engine_stats_json = "[1,2";
    CHECK(history_msg_add(h, id, &stats, &err) < 0 && strstr(err.msg, "engine stats"), "bad stats JSON: '%s'", err.msg);
    CHECK(history_conv_set_sampling(h, id, "not json", &err) < 0, "bad sampling JSON accepted");
    CHECK(history_conv_set_system(h, id, "Be kind.", &err) == 0 && history_conv_set_title(h, id, "renamed", &err) == 0 &&
          history_conv_set_model(h, id, "models/other", "fp2", "Q4_K_M", &err) == 0, "setters: %s", err.msg);
    CHECK(history_conv_get(h, id, &c, &err) == 0 && !strcmp(c.system_prompt, "Be kind.") && !strcmp(c.title, "renamed") &&
          !strcmp(c.model_fingerprint, "fp2") && !strcmp(c.model_type, "Q4_K_M"), "setters not stored");
    if (!test_current_failed) history_conv_free(&c);
    history_close(h);
    TEST_END();
}

/* Run a search and report whether some hit's snippet contains want. */
static int search_has(history *h, const char *query, const char *want, size_t *n_out, int *substring)
{
    history_hit *hits;
    size_t n;
    history_error err;
    if (history_msg_search(h, query, 20, "<", ">", &hits, &n, substring, &err)) {
        fprintf(stderr, "search '%s': %s\n", query, err.msg);
        return -1;
    }
    int found = 0;
    for (size_t i = 0; i < n; i++)
        if (strstr(hits[i].snippet, want)) found = 1;
    if (n_out) *n_out = n;
    history_hits_free(hits, n);
    return found;
}

/* User text is plain text: quotes, apostrophes and FTS syntax never error
 * and match literally, except `word*` (prefix) and `a OR b` (either), which
 * people expect; punctuation-only queries use the substring path. */
static void test_search(void)
{
    TEST_BEGIN("history_search_plain_text");
    history_error err;
    history *h = history_open(tmp_path("search.db"), 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t id = history_conv_create(h, NULL, NULL, &err);
    const char *texts[] = {
        "I don't know why.",
        "the a and b case is here",
        "only cats here",
        "is it near(the) door?",
        "2 * 3 = 6 and star",
        "minus -x flag",
        "an \"unbalanced quote",
        "what?! really",
        "apple",
        "a long message that mentions apple once among many other words to dilute it quite a lot",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        history_message m = history_message_make(i % 2 ? "assistant" : "user", texts[i], HISTORY_COMPLETE);
        CHECK(history_msg_add(h, id, &m, &err) > 0, "add: %s", err.msg);
    }
    size_t n;
    int sub;
    CHECK(search_has(h, "don't", "<don't>", &n, &sub) == 1 && !sub, "apostrophe");
    CHECK(search_has(h, "a AND b", "<a> <and> <b>", &n, &sub) == 1 && n == 1, "AND as a word (%zu hits)", n);
    CHECK(search_has(h, "cats OR dogs", "<cats>", &n, &sub) == 1 && n == 1 && !sub, "a OR b matches either");
    CHECK(search_has(h, "ca*", "<cats>", &n, &sub) == 1 && !sub, "ca* is a prefix search");
    CHECK(search_has(h, "dogs OR", "", &n, &sub) == 0 && n == 0, "a trailing OR is a word (no hits)");
    CHECK(search_has(h, "OR cats", "", &n, &sub) == 0 && n == 0, "a leading OR is a word (no hits)");
    CHECK(search_has(h, "NEAR(", "<near>", &n, &sub) == 1, "NEAR(");
    CHECK(search_has(h, "*", "<*>", &n, &sub) == 1 && sub, "lone * via substring");
    CHECK(search_has(h, "-x", "<x>", &n, &sub) == 1 && !sub, "-x");
    CHECK(search_has(h, "\"unbalanced", "<unbalanced>", &n, &sub) == 1, "unbalanced quote");
    CHECK(search_has(h, "?!", "what<?!>", &n, &sub) == 1 && sub, "punctuation only falls back to substring");
    CHECK(search_has(h, "\"", "<\">", &n, &sub) == 1 && sub, "a lone double quote");
    CHECK(search_has(h, "zzzz", "", &n, &sub) == 0 && n == 0, "no match gives no hits");
    history_hit *hits;
    CHECK(history_msg_search(h, "apple", 10, NULL, NULL, &hits, &n, NULL, &err) == 0 && n == 2, "apple: %zu hits", n);
    if (!test_current_failed) {
        CHECK(!strcmp(hits[0].snippet, "[apple]") && hits[0].score <= hits[1].score, "bm25 order: '%s' %g %g", hits[0].snippet,
              hits[0].score, hits[1].score);
        CHECK(hits[0].seq == 9 && hits[0].conversation_id == id && !strcmp(hits[0].role, "user"), "hit fields");
        history_hits_free(hits, n);
    }
    CHECK(history_msg_search(h, "   ", 10, NULL, NULL, &hits, &n, NULL, &err) < 0, "empty query accepted");
    history_close(h);
    TEST_END();
}

/* Markdown has the headings; JSON export -> import -> export is identical;
 * broken imports are refused whole. */
static void test_export_import(void)
{
    TEST_BEGIN("history_export_import_roundtrip");
    history_error err;
    history *h = history_open(tmp_path("export.db"), 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t id = make_sample(h, "Export me");
    char *md = history_export_string(h, id, HISTORY_MARKDOWN, &err);
    CHECK(md && strstr(md, "# Export me\n") && strstr(md, "## System prompt\n\nYou are terse.") &&
          strstr(md, "## Assistant (interrupted)") && strstr(md, "TTFT 12") && strstr(md, "(17.0 tok/s)"), "markdown:\n%s", md ? md : err.msg);
    free(md);
    char *json1 = history_export_string(h, id, HISTORY_JSON, &err);
    CHECK(json1 != NULL, "json export: %s", err.msg);
    history *h2 = history_open(tmp_path("import.db"), 0, &err);
    CHECK(h2 != NULL, "open second: %s", err.msg);
    if (json1 && h2) {
        history_conversation c;
        int64_t id2 = history_import_json(h2, json1, "x.json", &c, &err);
        CHECK(id2 > 0, "import: %s", err.msg);
        if (id2 > 0) {
            char *json2 = history_export_string(h2, id2, HISTORY_JSON, &err);
            CHECK(json2 && !strcmp(json1, json2), "round trip differs:\n%s\n---\n%s", json1, json2 ? json2 : err.msg);
            free(json2);
            history_conv_free(&c);
        }
        /* the same file again: already stored, nothing written (issue 30: no silent duplicate) */
        int64_t id3 = history_import_json(h2, json1, "x.json", &c, &err);
        CHECK(id3 == HISTORY_IMPORT_ALREADY_STORED && c.id == id2, "second import of the same file: %lld: %s",
              (long long)id3, err.msg);
        if (id3 == HISTORY_IMPORT_ALREADY_STORED) history_conv_free(&c);
        /* the same uid with other messages is another conversation: imported under a new uid */
        char *edited = strdup(json1);
        char *hello = edited ? strstr(edited, "\"content\": \"") : NULL;
        int64_t id4 = -1;
        if (hello) {
            hello[12] = 'X';                     /* the first message's text changes */
            id4 = history_import_json(h2, edited, "edited.json", &c, &err);
            if (id4 > 0) history_conv_free(&c);
        }
        CHECK(hello && id4 > 0 && id4 != id2, "an edited export with the same uid: %lld: %s", (long long)id4, err.msg);
        free(edited);
    }
    if (h2) {
        int64_t before = 0;
        history_conversation *list;
        size_t n;
        if (history_conv_list(h2, 0, &list, &n, &err) == 0) { before = (int64_t)n; history_conv_list_free(list, n); }
        CHECK(history_import_json(h2, "{not json", "bad.json", NULL, &err) < 0 && strstr(err.msg, "bad.json"), "invalid JSON: '%s'", err.msg);
        CHECK(history_import_json(h2, "{\"format\":\"other\"}", "o.json", NULL, &err) < 0, "foreign JSON accepted");
        const char *bad_role = "{\"format\":\"k3-history\",\"version\":1,\"messages\":[{\"role\":\"user\",\"content\":\"ok\"},"
                               "{\"role\":\"robot\",\"content\":\"x\"}]}";
        CHECK(history_import_json(h2, bad_role, "r.json", NULL, &err) < 0 && strstr(err.msg, "messages[1].role"), "bad role: '%s'", err.msg);
        if (history_conv_list(h2, 0, &list, &n, &err) == 0) {
            CHECK((int64_t)n == before, "a failed import left a conversation behind");
            history_conv_list_free(list, n);
        }
        history_close(h2);
    }
    free(json1);
    history_close(h);
    TEST_END();
}

/* Ambiguous prefixes name the candidates; "last" is the latest updated. */
static void test_id_prefix(void)
{
    TEST_BEGIN("history_id_prefix");
    history_error err;
    history *h = history_open(tmp_path("prefix.db"), 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    history_conversation c;
    CHECK(history_conv_find(h, "last", &c, &err) < 0 && strstr(err.msg, "no conversation with a message"), "last on empty: '%s'", err.msg);
    /* 17 uids over 16 first digits: two must share one. */
    history_conversation made[17];
    int n_made = 0;
    for (int i = 0; i < 17; i++) if (history_conv_create(h, NULL, &made[n_made], &err) > 0) n_made++;
    CHECK(n_made == 17, "create: %s", err.msg);
    char shared[2] = "";
    for (int i = 0; i < n_made && !*shared; i++)
        for (int j = i + 1; j < n_made; j++)
            if (made[i].uid[0] == made[j].uid[0]) { shared[0] = made[i].uid[0]; break; }
    CHECK(history_conv_find(h, shared, &c, &err) < 0 && strstr(err.msg, "ambiguous"), "ambiguous prefix '%s': '%s'", shared, err.msg);
    for (int i = 0; i < n_made; i++) {
        char upper[HISTORY_UID_LEN + 1];
        for (int k = 0; k <= HISTORY_UID_LEN; k++) upper[k] = (char)(made[i].uid[k] >= 'a' ? made[i].uid[k] - 32 : made[i].uid[k]);
        if (history_conv_find(h, upper, &c, &err) == 0) {
            CHECK(c.id == made[i].id, "full uid found the wrong conversation");
            history_conv_free(&c);
        } else {
            CHECK(0, "full uid %s: %s", upper, err.msg);
        }
    }
    history_message m = history_message_make("user", "bump", HISTORY_COMPLETE);
    usleep(2000);
    history_msg_add(h, made[3].id, &m, &err);
    CHECK(history_conv_find(h, "last", &c, &err) == 0 && c.id == made[3].id, "last is not the latest updated");
    if (!test_current_failed) history_conv_free(&c);
    history_conversation empty;                  /* newer but without a message: never "last" */
    usleep(2000);
    CHECK(history_conv_create(h, NULL, &empty, &err) > 0 && history_conv_find(h, "last", &c, &err) == 0 &&
          c.id == made[3].id, "last picked a conversation without messages");
    if (!test_current_failed) { history_conv_free(&c); history_conv_free(&empty); }
    CHECK(history_conv_find(h, "xyz", &c, &err) < 0 && strstr(err.msg, "not a conversation id"), "non-hex: '%s'", err.msg);
    CHECK(history_conv_find(h, "123456789", &c, &err) < 0, "too long accepted");
    for (int i = 0; i < n_made; i++) history_conv_free(&made[i]);
    history_close(h);
    TEST_END();
}

/* Write a snapshot of n bytes of value v for (conv, msg). */
static int64_t put_snapshot(history *h, int64_t conv, int64_t msg, int fill, size_t n, const char *fp)
{
    history_error err;
    char *tmp = NULL;
    if (history_snapshot_begin(h, &tmp, &err)) return -1;
    char *data = malloc(n);
    memset(data, fill, n);
    int ok = write_file(tmp, data, n) == 0;
    free(data);
    history_snapshot_key key = {.conversation_id = conv, .message_id = msg, .n_tokens = (int64_t)n,
                                .model_fingerprint = fp, .format_version = 3};
    int64_t id = ok ? history_snapshot_commit(h, tmp, &key, &err) : -1;
    if (id < 0) fprintf(stderr, "snapshot: %s\n", err.msg);
    free(tmp);
    return id;
}

/* Count files in the snapshot directory (excluding . .. and the lock). */
static int count_snapshot_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

/* Deleting a conversation removes messages, FTS entries, snapshot rows and files. */
static void test_delete_cascade(void)
{
    TEST_BEGIN("history_rm_cascade");
    history_error err;
    const char *path = tmp_path("rm.db");
    history *h = history_open(path, 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t keep = make_sample(h, "keep"), gone = make_sample(h, "gone");
    history_message *msgs;
    size_t n;
    history_msg_list(h, gone, &msgs, &n, &err);
    int64_t sid = n ? put_snapshot(h, gone, msgs[n - 1].id, 7, 5000, "fp1") : -1;
    history_msg_list_free(msgs, n);
    CHECK(sid > 0, "snapshot");
    CHECK(count_snapshot_files(history_snapshot_dir(h)) == 1, "snapshot file missing");
    CHECK(history_conv_delete(h, gone, &err) == 0, "delete: %s", err.msg);
    CHECK(count_snapshot_files(history_snapshot_dir(h)) == 0, "snapshot file not removed");
    history_conversation c;
    CHECK(history_conv_get(h, gone, &c, &err) < 0, "conversation still there");
    CHECK(history_msg_list(h, gone, &msgs, &n, &err) == 0 && n == 0, "messages still there");
    history_msg_list_free(msgs, n);
    CHECK(search_has(h, "cats", "", &n, NULL) >= 0 && n == 2, "FTS still finds deleted messages (%zu hits, want 2)", n);
    CHECK(history_conv_delete(h, gone, &err) < 0, "deleting twice succeeded");
    char *report = NULL;
    CHECK(history_check(h, &report, &err) == 0, "check after delete: %s", report ? report : err.msg);
    free(report);
    CHECK(history_conv_get(h, keep, &c, &err) == 0 && c.n_messages == 3, "other conversation damaged");
    if (!test_current_failed) history_conv_free(&c);
    history_close(h);
    CHECK(raw_int(path, "SELECT count(*) FROM snapshots") == 0, "snapshot rows left");
    TEST_END();
}

/* Commit, supersede, latest-by-key, verify; then orphans, temp files and
 * stale rows are cleaned on reopen, but only when no other handle is open. */
static void test_snapshots(void)
{
    TEST_BEGIN("history_snapshots_and_cleanup");
    history_error err;
    const char *path = tmp_path("snap.db");
    history *h = history_open(path, 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t conv = make_sample(h, "snap"), other = make_sample(h, "other");
    history_message *msgs;
    size_t n;
    history_msg_list(h, conv, &msgs, &n, &err);
    int64_t m1 = msgs[0].id, m2 = msgs[1].id;
    history_msg_list_free(msgs, n);
    const char *dir = history_snapshot_dir(h);

    int64_t s1 = put_snapshot(h, conv, m1, 1, 10000, "fp1");
    history_snapshot s;
    CHECK(s1 > 0 && history_snapshot_latest(h, conv, "fp1", 3, &s, &err) == 1 && s.id == s1 && s.message_id == m1 &&
          s.bytes == 10000, "first snapshot");
    if (s1 > 0) {
        CHECK(history_snapshot_verify(&s, &err) == 0, "verify: %s", err.msg);
        struct stat st;
        CHECK(stat(s.path, &st) == 0 && (st.st_mode & 0777) == 0600, "snapshot file mode %o", st.st_mode & 0777);
        history_snapshot_free(&s);
    }
    int64_t s2 = put_snapshot(h, conv, m2, 2, 20000, "fp1");
    CHECK(s2 > 0 && history_snapshot_latest(h, conv, "fp1", 3, &s, &err) == 1 && s.id == s2, "second snapshot");
    if (!test_current_failed) history_snapshot_free(&s);
    CHECK(count_snapshot_files(dir) == 2, "the previous turn's snapshot (for /undo) not kept (%d files)", count_snapshot_files(dir));
    for (int i = 0; i < 4; i++) put_snapshot(h, conv, i % 2 ? m2 : m1, 1 + i % 2, 1000 + i, "fp1");
    CHECK(count_snapshot_files(dir) == 4, "superseded files beyond the newest 4 not removed (%d files)", count_snapshot_files(dir));
    CHECK(history_snapshot_latest(h, conv, "fp-other", 3, &s, &err) == 0, "wrong fingerprint matched");
    CHECK(history_snapshot_latest(h, conv, "fp1", 4, &s, &err) == 0, "wrong format version matched");
    history_snapshot_key wrong = {.conversation_id = conv, .message_id = 999999, .n_tokens = 1,
                                  .model_fingerprint = "fp1", .format_version = 3};
    char *tmp = NULL;
    CHECK(history_snapshot_begin(h, &tmp, &err) == 0 && history_snapshot_commit(h, tmp, &wrong, &err) < 0 && !file_exists(tmp),
          "commit for a missing message: '%s'", err.msg);
    free(tmp);
    CHECK(history_snapshot_commit(h, path, &wrong, &err) < 0 && file_exists(path), "a foreign path was accepted");

    /* Damage: flip a byte, verify must notice. */
    CHECK(history_snapshot_latest(h, conv, "fp1", 3, &s, &err) == 1, "latest");
    if (!test_current_failed) {
        int fd = open(s.path, O_WRONLY);
        pwrite(fd, "X", 1, 500);
        close(fd);
        CHECK(history_snapshot_verify(&s, &err) < 0 && strstr(err.msg, "checksum"), "damaged file verified: '%s'", err.msg);
        history_snapshot_free(&s);
    }

    /* Other conversation's snapshot, then make its file vanish (stale row). */
    history_msg_list(h, other, &msgs, &n, &err);
    int64_t so = put_snapshot(h, other, msgs[0].id, 3, 3000, "fp1");
    history_msg_list_free(msgs, n);
    CHECK(so > 0 && history_snapshot_latest(h, other, "fp1", 3, &s, &err) == 1, "other snapshot");
    char stale_path[512] = "";
    if (!test_current_failed) { snprintf(stale_path, sizeof stale_path, "%s", s.path); history_snapshot_free(&s); }
    unlink(stale_path);

    char orphan[512], temp[512], notes[512];
    snprintf(orphan, sizeof orphan, "%s/deadbeef-0000000000000000.k3state", dir);
    snprintf(temp, sizeof temp, "%s/tmp-0123456789abcdef.part", dir);
    snprintf(notes, sizeof notes, "%s/notes.txt", dir);
    write_file(orphan, "o", 1);
    write_file(temp, "t", 1);
    write_file(notes, "n", 1);

    /* While h is open another open must not clean (h may be mid-commit). */
    history *h2 = history_open(path, 0, &err);
    CHECK(h2 && file_exists(orphan) && file_exists(temp), "cleanup ran while another handle was open");
    history_close(h2);
    history_close(h);

    h = history_open(path, 0, &err);
    CHECK(h != NULL, "reopen: %s", err.msg);
    CHECK(!file_exists(orphan) && !file_exists(temp), "orphan or temp file survived reopen");
    CHECK(file_exists(notes), "a file that is not ours was deleted");
    CHECK(h && history_snapshot_latest(h, other, "fp1", 3, &s, &err) == 0, "stale row still returned");
    CHECK(raw_int(path, "SELECT count(*) FROM snapshots") == 4, "stale row not deleted (the 4 of conv remain)");
    history_close(h);
    TEST_END();
}

/* A snapshot row's file_name comes from a database anyone can edit: a name
 * like "../../../../tmp/victim" must never be read, returned as a path or
 * deleted (superseding the snapshot, or cleanup on open). */
static void test_snapshot_names_from_db(void)
{
    TEST_BEGIN("history_snapshot_file_name_is_not_a_path");
    history_error err;
    const char *path = tmp_path("names.db");
    history *h = history_open(path, 0, &err);
    CHECK(h != NULL, "open: %s", err.msg);
    if (!h) { TEST_END(); return; }
    int64_t conv = make_sample(h, "names");
    history_message *msgs;
    size_t n;
    history_msg_list(h, conv, &msgs, &n, &err);
    int64_t m1 = n > 1 ? msgs[0].id : -1, m2 = n > 1 ? msgs[1].id : -1;
    history_msg_list_free(msgs, n);
    char victim[300], victim2[300], evil[400], sql[800];
    snprintf(victim, sizeof victim, "%s/victim", tmp_root);
    snprintf(victim2, sizeof victim2, "%s/victim2", tmp_root);
    write_file(victim, "precious", 8);
    write_file(victim2, "precious", 8);
    /* the snapshot dir is <tmp_root>/names.db.snapshots; tmp_root is /tmp/... */
    snprintf(evil, sizeof evil, "../../../..%s/victim", tmp_root);
    int64_t s1 = put_snapshot(h, conv, m1, 1, 1000, "fp1");
    CHECK(s1 > 0, "snapshot");
    snprintf(sql, sizeof sql, "UPDATE snapshots SET file_name = '%s', bytes = 8 WHERE id = %lld", evil, (long long)s1);
    CHECK(raw_exec(path, sql) == 0, "edit the row");
    history_snapshot s;
    int got = history_snapshot_latest(h, conv, "fp1", 3, &s, &err);
    CHECK(got == 0, "a row naming %s was returned (%d)", evil, got);
    if (got == 1) history_snapshot_free(&s);
    /* newer snapshots supersede s1 (the newest few are kept): its row is dropped */
    int64_t s2 = -1;
    for (int k = 0; k <= atoi(HIST_SNAPSHOTS_KEPT_STR); k++) s2 = put_snapshot(h, conv, m2, 2 + k, 1000, "fp1");
    CHECK(s2 > 0, "newer snapshots");
    CHECK(file_exists(victim), "superseding the snapshot deleted %s", victim);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM snapshots WHERE id = %lld", (long long)s1);
    CHECK(raw_int(path, sql) == 0, "the superseded row was kept");
    snprintf(sql, sizeof sql, "UPDATE snapshots SET file_name = '../victim2' WHERE id = %lld", (long long)s2);
    CHECK(raw_exec(path, sql) == 0, "edit the newest row");
    history_close(h);
    h = history_open(path, 0, &err);                        /* cleanup of stale rows and orphans */
    CHECK(h != NULL, "reopen: %s", err.msg);
    CHECK(file_exists(victim) && file_exists(victim2), "reopening deleted a file outside the snapshot directory");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM snapshots WHERE id = %lld", (long long)s2);
    CHECK(raw_int(path, sql) == 0, "a row naming a file outside was not dropped as stale");
    history_close(h);
    TEST_END();
}

/* Permissions of everything we create, and the XDG / HOME default path. */
static void test_modes_and_default_path(void)
{
    TEST_BEGIN("history_file_modes_default_path");
    history_error err;
    char xdg[300];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp_root);
    setenv("XDG_DATA_HOME", xdg, 1);
    char want[400], got[400];
    snprintf(want, sizeof want, "%s/k3/history.db", xdg);
    CHECK(history_default_path(got, sizeof got, &err) == 0 && !strcmp(got, want), "default path '%s'", got);
    history *h = history_open(NULL, 0, &err);
    CHECK(h != NULL && !strcmp(history_path(h), want), "open default: %s", err.msg);
    if (h) {
        int64_t id = make_sample(h, "modes");
        CHECK(id > 0, "write");
        const char *suffixes[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char p[500];
            struct stat st;
            snprintf(p, sizeof p, "%s%s", want, suffixes[i]);
            CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600, "%s mode %o", p, st.st_mode & 0777);
        }
        struct stat st;
        char dir[400];
        snprintf(dir, sizeof dir, "%s/k3", xdg);
        CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "data dir mode %o", st.st_mode & 0777);
        CHECK(stat(history_snapshot_dir(h), &st) == 0 && (st.st_mode & 0777) == 0700, "snapshot dir mode %o", st.st_mode & 0777);
        history_close(h);
    }
    setenv("XDG_DATA_HOME", "relative/ignored", 1);
    setenv("HOME", tmp_root, 1);
    snprintf(want, sizeof want, "%s/.local/share/k3/history.db", tmp_root);
    CHECK(history_default_path(got, sizeof got, &err) == 0 && !strcmp(got, want), "HOME fallback '%s'", got);
    unsetenv("XDG_DATA_HOME");
    TEST_END();
}

/* Child body for the concurrency test: wait for the start signal, then add
 * count messages; exit status 0 only if every add succeeded. */
static void concurrent_writer(const char *path, int64_t conv, int count, int start_fd)
{
    char go;
    if (read(start_fd, &go, 1) != 1) _exit(3);
    history_error err;
    history *h = history_open(path, 0, &err);
    if (!h) { fprintf(stderr, "child open: %s\n", err.msg); _exit(1); }
    for (int i = 0; i < count; i++) {
        char text[64];
        snprintf(text, sizeof text, "pid %d message %d", (int)getpid(), i);
        history_message m = history_message_make(i % 2 ? "assistant" : "user", text, HISTORY_COMPLETE);
        if (history_msg_add(h, conv, &m, &err) < 0) { fprintf(stderr, "child add: %s\n", err.msg); _exit(2); }
    }
    history_close(h);
    _exit(0);
}

/* Two processes append 200 messages each to the same conversation at the
 * same moment: no busy failures, no lost or duplicated seq. */
static void test_two_processes(void)
{
    TEST_BEGIN("history_two_processes_concurrent");
    const char *path = tmp_path("concurrent.db");
    history_error err;
    history *h = history_open(path, 0, &err);
    int64_t conv = h ? history_conv_create(h, NULL, NULL, &err) : -1;
    history_close(h);
    CHECK(conv > 0, "setup: %s", err.msg);
    int fds[2];
    if (pipe(fds) != 0) { CHECK(0, "pipe"); TEST_END(); return; }
    fflush(stdout);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) { close(fds[1]); concurrent_writer(path, conv, 200, fds[0]); }
    }
    close(fds[0]);
    if (write(fds[1], "go", 2) != 2) CHECK(0, "start signal");
    close(fds[1]);
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(kids[k], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed (status %d)", k, status);
    }
    CHECK(raw_int(path, "SELECT count(*) FROM messages") == 400, "message count %lld", (long long)raw_int(path, "SELECT count(*) FROM messages"));
    CHECK(raw_int(path, "SELECT count(DISTINCT seq) FROM messages WHERE seq BETWEEN 1 AND 400") == 400, "seq not 1..400");
    h = history_open(path, 0, &err);
    char *report = NULL;
    CHECK(h && history_check(h, &report, &err) == 0, "check: %s", report ? report : err.msg);
    free(report);
    history_close(h);
    TEST_END();
}

/* All tests share one temp directory, removed when everything passed. */
int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/k3-test-history-XXXXXX");
    if (!mkdtemp(tmp_root)) { printf("FAIL history_setup: mkdtemp: %s\n", strerror(errno)); return 1; }
    test_create_reopen();
    test_migrations();
    test_refusals();
    test_corrupt();
    test_messages();
    test_search();
    test_export_import();
    test_id_prefix();
    test_delete_cascade();
    test_snapshots();
    test_snapshot_names_from_db();
    test_modes_and_default_path();
    test_two_processes();
    if (!test_failures_total) remove_tree(tmp_root);
    else fprintf(stderr, "test_history: files kept in %s\n", tmp_root);
    TEST_EXIT();
}
