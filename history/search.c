/* search.c - full-text search over message text.
 *
 * The user's words are plain text, not FTS syntax, with two exceptions
 * people expect: `rout*` (a word ending in `*`) matches words starting with
 * "rout", and a bare `OR` between two words matches either. Every word
 * becomes a double-quoted FTS5 string (inner quotes doubled), so `don't`,
 * `a AND b`, `NEAR(`, `-x`, a lone `*` and a lone `"` mean what they look
 * like; the words are ANDed and ranked by bm25. When the query with the
 * operators finds nothing, the all-literal query is tried (so `OR` and
 * `x*` can still be found as text). Words with no
 * letters or digits tokenize to nothing, so when FTS finds nothing we fall
 * back to a case-insensitive substring match (LIKE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

#define SNIPPET_TOKENS 12
#define SUBSTRING_CONTEXT 30

/* Quote every word: `it's "x` -> `"it's" """x"`. */
static char *fts_quote_words(const char *query)
{
    char *out = malloc(strlen(query) * 3 + 3);
    if (!out) return NULL;
    size_t o = 0;
    const char *p = query;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        if (o) out[o++] = ' ';
        out[o++] = '"';
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            if (*p == '"') out[o++] = '"';
            out[o++] = *p++;
        }
        out[o++] = '"';
    }
    out[o] = 0;
    return out;
}

/* The user's words with the two operators people type: a trailing `*` is a
 * prefix search (`rout*` -> `"rout"*`) and a bare `OR` between two words
 * joins them; everything else is quoted as in fts_quote_words. NULL when
 * nothing is an operator (the literal query says it all). */
static char *fts_operator_words(const char *query)
{
    char *copy = strdup(query), *out = malloc(strlen(query) * 3 + 8);
    if (!copy || !out) { free(copy); free(out); return NULL; }
    char *words[256];
    int n = 0, ops = 0;
    for (char *save = NULL, *w = strtok_r(copy, " \t\n\r", &save); w && n < 256; w = strtok_r(NULL, " \t\n\r", &save))
        words[n++] = w;
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        const char *w = words[i];
        size_t len = strlen(w);
        if (!strcmp(w, "OR") && i > 0 && i + 1 < n && strcmp(words[i - 1], "OR") && strcmp(words[i + 1], "OR")) {
            o += (size_t)sprintf(out + o, " OR");
            ops++;
            continue;
        }
        int prefix = len > 1 && w[len - 1] == '*' && w[len - 2] != '*';
        if (o) out[o++] = ' ';
        out[o++] = '"';
        for (size_t k = 0; k < len - (size_t)prefix; k++) {
            if (w[k] == '"') out[o++] = '"';
            out[o++] = w[k];
        }
        out[o++] = '"';
        if (prefix) { out[o++] = '*'; ops++; }
    }
    out[o] = 0;
    free(copy);
    if (!ops) { free(out); return NULL; }
    return out;
}

/* Escape LIKE wildcards so the query is matched literally. */
static char *like_pattern(const char *query)
{
    char *out = malloc(strlen(query) * 2 + 3);
    if (!out) return NULL;
    size_t o = 0;
    out[o++] = '%';
    for (const char *p = query; *p; p++) {
        if (*p == '%' || *p == '_' || *p == '\\') out[o++] = '\\';
        out[o++] = *p;
    }
    out[o++] = '%';
    out[o] = 0;
    return out;
}

/* See history.h. */
void history_hits_free(history_hit *hits, size_t n)
{
    for (size_t i = 0; hits && i < n; i++) {
        free(hits[i].title);
        free(hits[i].snippet);
    }
    free(hits);
}

/* Both queries select: message id, conversation id, seq, role, created,
 * uid, title, snippet, score. */
static int collect_hits(history *h, sqlite3_stmt *st, history_hit **out, size_t *n_out, history_error *err)
{
    history_hit *hits = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            history_hit *grown = realloc(hits, cap * sizeof *hits);
            if (!grown) break;
            hits = grown;
        }
        history_hit *x = &hits[n];
        memset(x, 0, sizeof *x);
        x->message_id = sqlite3_column_int64(st, 0);
        x->conversation_id = sqlite3_column_int64(st, 1);
        x->seq = sqlite3_column_int64(st, 2);
        snprintf(x->role, sizeof x->role, "%s", sqlite3_column_text(st, 3) ? (const char *)sqlite3_column_text(st, 3) : "");
        x->created_ms = sqlite3_column_int64(st, 4);
        snprintf(x->uid, sizeof x->uid, "%s", sqlite3_column_text(st, 5) ? (const char *)sqlite3_column_text(st, 5) : "");
        x->title = hist_col_text(st, 6, 1);
        x->snippet = hist_col_text(st, 7, 1);
        x->score = sqlite3_column_double(st, 8);
        n++;
        if (!x->title || !x->snippet) break;
    }
    if (rc != SQLITE_DONE) {
        history_hits_free(hits, n);
        return rc == SQLITE_ROW ? hist_err(err, "%s: out of memory", h->path) : hist_db_err(h, err, "searching");
    }
    *out = hits;
    *n_out = n;
    return 0;
}

/* Ranked full-text search; an FTS error is treated as "no hits" so the
 * substring fallback still answers. */
static int search_fts(history *h, const char *fts_query, int limit, const char *on, const char *off,
                      history_hit **out, size_t *n_out, history_error *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT m.id, m.conversation_id, m.seq, m.role, m.created_ms, c.uid, c.title,"
             " snippet(messages_fts, 0, ?2, ?3, '\xE2\x80\xA6', %d), bm25(messages_fts)"
             " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
             " JOIN conversations c ON c.id = m.conversation_id"
             " WHERE messages_fts MATCH ?1 ORDER BY bm25(messages_fts), m.id DESC LIMIT ?4",
             SNIPPET_TOKENS);
    sqlite3_stmt *st = hist_prepare(h, sql, err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, fts_query, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, on, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, off, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, limit);
    history_error ignored;
    int rc = collect_hits(h, st, out, n_out, &ignored);
    sqlite3_finalize(st);
    if (rc) { *out = NULL; *n_out = 0; }
    return 0;
}

/* Substring search with a snippet cut around the first match by character
 * positions (instr/substr count characters, so UTF-8 is never split). */
static int search_like(history *h, const char *query, int limit, const char *on, const char *off,
                       history_hit **out, size_t *n_out, history_error *err)
{
    char *pattern = like_pattern(query);
    if (!pattern) return hist_err(err, "%s: out of memory", h->path);
    char sql[1400];
    snprintf(sql, sizeof sql,
             "SELECT m.id, m.conversation_id, m.seq, m.role, m.created_ms, c.uid, c.title,"
             " CASE WHEN pos > %d THEN '\xE2\x80\xA6' ELSE '' END"
             " || substr(m.content, max(1, pos - %d), min(pos, %d + 1) - 1) || ?3"
             " || substr(m.content, pos, length(?2)) || ?4"
             " || substr(m.content, pos + length(?2), %d)"
             " || CASE WHEN length(m.content) >= pos + length(?2) + %d THEN '\xE2\x80\xA6' ELSE '' END,"
             " 0.0"
             " FROM (SELECT id, instr(lower(content), lower(?2)) AS pos FROM messages"
             "       WHERE content LIKE ?1 ESCAPE '\\') AS found"
             " JOIN messages m ON m.id = found.id JOIN conversations c ON c.id = m.conversation_id"
             " WHERE pos > 0 ORDER BY m.id DESC LIMIT ?5",
             SUBSTRING_CONTEXT + 1, SUBSTRING_CONTEXT, SUBSTRING_CONTEXT, SUBSTRING_CONTEXT, SUBSTRING_CONTEXT);
    sqlite3_stmt *st = hist_prepare(h, sql, err);
    if (!st) { free(pattern); return -1; }
    sqlite3_bind_text(st, 1, pattern, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, query, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, on, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, off, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, limit);
    int rc = collect_hits(h, st, out, n_out, err);
    sqlite3_finalize(st);
    free(pattern);
    return rc;
}

/* See history.h. */
int history_msg_search(history *h, const char *query, int limit, const char *mark_on, const char *mark_off,
                   history_hit **out, size_t *n_out, int *used_substring, history_error *err)
{
    *out = NULL;
    *n_out = 0;
    if (used_substring) *used_substring = 0;
    if (!query) query = "";
    const char *q = query;
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
    if (!*q) return hist_err(err, "history: empty search query");
    if (limit <= 0) limit = 20;
    if (!mark_on) mark_on = "[";
    if (!mark_off) mark_off = "]";
    char *ops = fts_operator_words(query);       /* rout* and a OR b, when typed */
    if (ops) {
        int rc = search_fts(h, ops, limit, mark_on, mark_off, out, n_out, err);
        free(ops);
        if (rc || *n_out) return rc;
    }
    char *fts = fts_quote_words(query);
    if (!fts) return hist_err(err, "%s: out of memory", h->path);
    int rc = search_fts(h, fts, limit, mark_on, mark_off, out, n_out, err);
    free(fts);
    if (rc || *n_out) return rc;
    if (used_substring) *used_substring = 1;
    char *trimmed = strdup(q);
    if (!trimmed) return hist_err(err, "%s: out of memory", h->path);
    size_t len = strlen(trimmed);
    while (len && (trimmed[len - 1] == ' ' || trimmed[len - 1] == '\t' || trimmed[len - 1] == '\n' || trimmed[len - 1] == '\r'))
        trimmed[--len] = 0;
    rc = search_like(h, trimmed, limit, mark_on, mark_off, out, n_out, err);
    free(trimmed);
    return rc;
}
