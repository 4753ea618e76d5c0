/* backend.c - which server a conversation talks to (history.h).
 *
 * A conversation driven by `k3 chat --endpoint` records the endpoint URL and
 * the model name (schema v4), so `--resume` goes back to the same server.
 * Only these two strings are stored: never a key. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

int history_conv_set_backend(history *h, int64_t id, const char *endpoint, const char *model, history_error *err)
{
    char *e = hist_utf8_clean(endpoint ? endpoint : ""), *m = hist_utf8_clean(model ? model : "");
    if (!e || !m) {
        free(e);
        free(m);
        return hist_err(err, "%s: out of memory", h->path);
    }
    int rc = -1;
    if (hist_begin(h, err) == 0) {
        sqlite3_stmt *st = hist_prepare(h, "UPDATE conversations SET backend_endpoint = ?1, backend_model = ?2,"
                                           " updated_ms = max(updated_ms, ?3) WHERE id = ?4", err);
        if (st) {
            sqlite3_bind_text(st, 1, e, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 2, m, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 3, hist_now_ms());
            sqlite3_bind_int64(st, 4, id);
            int s = hist_step(st);
            sqlite3_finalize(st);
            if (s != SQLITE_DONE) hist_db_err(h, err, "recording the backend");
            else if (sqlite3_changes(h->db) == 0) hist_err(err, "%s: no conversation with id %lld", h->path, (long long)id);
            else rc = 0;
        }
        if (rc == 0) rc = hist_commit(h, err);
        else hist_rollback(h);
    }
    free(e);
    free(m);
    return rc;
}

int history_conv_get_backend(history *h, int64_t id, char **endpoint, char **model, history_error *err)
{
    *endpoint = *model = NULL;
    sqlite3_stmt *st = hist_prepare(h, "SELECT backend_endpoint, backend_model FROM conversations WHERE id = ?1", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int s = hist_step(st);
    if (s == SQLITE_ROW) {
        *endpoint = hist_col_text(st, 0, 1);
        *model = hist_col_text(st, 1, 1);
    }
    sqlite3_finalize(st);
    if (s != SQLITE_ROW) return hist_err(err, "%s: no conversation with id %lld", h->path, (long long)id);
    if (!*endpoint || !*model) {
        free(*endpoint);
        free(*model);
        *endpoint = *model = NULL;
        return hist_err(err, "%s: out of memory", h->path);
    }
    return 0;
}
