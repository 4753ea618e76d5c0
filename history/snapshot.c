/* snapshot.c - engine state snapshots: files in "<db>.snapshots/", rows in
 * the snapshots table. The order of operations is what makes a crash at any
 * moment harmless: temp file -> fsync -> rename -> fsync dir -> commit row.
 * A file without a row is an orphan and a row without its file is stale;
 * both are removed when a database is opened by the only process using it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

#define CHECKSUM_BUF (1 << 20)

/* One 64-bit lane of the checksum: multiply-rotate mixing, as in common
 * fast non-cryptographic hashes. This only has to catch truncated or
 * damaged files, not adversaries. */
static uint64_t mix_lane(uint64_t acc, uint64_t word)
{
    acc += word * 0xC2B2AE3D27D4EB4Full;
    acc = (acc << 31) | (acc >> 33);
    return acc * 0x9E3779B185EBCA87ull;
}

/* Final avalanche so every input bit affects every output bit. */
static uint64_t mix_final(uint64_t x)
{
    x ^= x >> 33; x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33; x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

/* A whole-file checksum fast enough for 0.6 GB state files (four
 * independent lanes over 8-byte words, tail bytes folded in, length last). */
int hist_file_checksum(const char *path, char out[32], int64_t *bytes, history_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hist_err(err, "%s: %s", path, strerror(errno));
    unsigned char *buf = malloc(CHECKSUM_BUF);
    if (!buf) { close(fd); return hist_err(err, "%s: out of memory", path); }
    uint64_t lane[4] = {1, 2, 3, 4}, total = 0, tail = 0;
    size_t have = 0;
    for (;;) {
        ssize_t got = read(fd, buf + have, CHECKSUM_BUF - have);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) { free(buf); close(fd); return hist_err(err, "%s: read failed: %s", path, strerror(errno)); }
        have += (size_t)got;
        total += (uint64_t)got;
        size_t whole = got == 0 ? have : have - have % 32;
        size_t i = 0;
        for (; i + 32 <= whole; i += 32)
            for (int l = 0; l < 4; l++) {
                uint64_t w;
                memcpy(&w, buf + i + 8 * l, 8);
                lane[l] = mix_lane(lane[l], w);
            }
        if (got == 0) {
            for (; i < have; i++) tail = mix_lane(tail, buf[i]);
            break;
        }
        memmove(buf, buf + i, have - i);
        have -= i;
    }
    free(buf);
    close(fd);
    uint64_t h = mix_final(lane[0] ^ mix_final(lane[1]) ^ (mix_final(lane[2]) << 1) ^ (mix_final(lane[3]) << 2) ^ tail ^ total);
    snprintf(out, 32, "mix64:%016llx", (unsigned long long)h);
    *bytes = (int64_t)total;
    return 0;
}

/* rename() is durable only once the directory entry is on disk. */
static int fsync_dir(const char *dir, history_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return hist_err(err, "%s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    return rc ? hist_err(err, "%s: fsync failed: %s", dir, strerror(e)) : 0;
}

/* The file's data must be on disk before its new name can be. */
static int fsync_file(const char *path, history_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return hist_err(err, "%s: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    return rc ? hist_err(err, "%s: fsync failed: %s", path, strerror(e)) : 0;
}

/* See history.h. O_EXCL so two processes can never share a temp file. */
int history_snapshot_begin(history *h, char **tmp_path_out, history_error *err)
{
    *tmp_path_out = NULL;
    if (h->lock_fd < 0) return hist_err(err, "%s: snapshot directory is not usable", h->snap_dir);
    for (int attempt = 0; attempt < 8; attempt++) {
        char rnd[17], *path = NULL;
        hist_random_hex(rnd, 16);
        if (asprintf(&path, "%s/" HIST_TMP_PREFIX "%s" HIST_TMP_SUFFIX, h->snap_dir, rnd) < 0)
            return hist_err(err, "%s: out of memory", h->snap_dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
            *tmp_path_out = path;
            return 0;
        }
        int e = errno;
        free(path);
        if (e != EEXIST) return hist_err(err, "%s: cannot create a snapshot file: %s", h->snap_dir, strerror(e));
    }
    return hist_err(err, "%s: cannot pick a free snapshot file name", h->snap_dir);
}

/* Only files we handed out may be renamed into the store. */
static int is_our_temp(const history *h, const char *tmp_path)
{
    size_t dl = strlen(h->snap_dir), tl = strlen(tmp_path);
    const char *name = tmp_path + dl + 1;
    return tl > dl + 1 && !strncmp(tmp_path, h->snap_dir, dl) && tmp_path[dl] == '/' &&
           !strchr(name, '/') && !strncmp(name, HIST_TMP_PREFIX, strlen(HIST_TMP_PREFIX)) &&
           strlen(name) > strlen(HIST_TMP_SUFFIX) &&
           !strcmp(name + strlen(name) - strlen(HIST_TMP_SUFFIX), HIST_TMP_SUFFIX);
}

/* See history.h. */
void history_snapshot_discard(history *h, const char *tmp_path)
{
    if (tmp_path && is_our_temp(h, tmp_path)) unlink(tmp_path);
}

/* Insert the row for an already durable file; returns the new id. */
static int64_t insert_snapshot_row(history *h, const history_snapshot_key *key, const char *file_name,
                                   int64_t bytes, const char *checksum, history_error *err)
{
    if (hist_begin(h, err)) return -1;
    sqlite3_stmt *st = hist_prepare(h,
        "INSERT INTO snapshots (conversation_id, message_id, n_tokens, model_fingerprint,"
        " format_version, file_name, bytes, checksum, created_ms)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 FROM messages WHERE id = ?2 AND conversation_id = ?1", err);
    if (!st) { hist_rollback(h); return -1; }
    sqlite3_bind_int64(st, 1, key->conversation_id);
    sqlite3_bind_int64(st, 2, key->message_id);
    sqlite3_bind_int64(st, 3, key->n_tokens);
    sqlite3_bind_text(st, 4, key->model_fingerprint ? key->model_fingerprint : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, key->format_version);
    sqlite3_bind_text(st, 6, file_name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, bytes);
    sqlite3_bind_text(st, 8, checksum, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, hist_now_ms());
    int rc = hist_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) { hist_db_err(h, err, "recording a snapshot"); hist_rollback(h); return -1; }
    if (sqlite3_changes(h->db) == 0) {
        hist_rollback(h);
        return hist_err(err, "%s: message %lld is not in conversation %lld", h->path,
                        (long long)key->message_id, (long long)key->conversation_id);
    }
    int64_t id = sqlite3_last_insert_rowid(h->db);
    return hist_commit(h, err) ? -1 : id;
}

/* The path of a snapshot file from the name stored in its row. The name
 * comes from the database, which anyone may edit: only a bare name of the
 * form we create ("<uid>-<hex>.k3state": letters, digits, '-' and '_', no
 * '/', no leading '.') is turned into a path inside the snapshot directory,
 * so a row can never make us read or delete a file elsewhere. NULL if the
 * name is not one of ours (or out of memory). */
static char *snapshot_path(const history *h, const unsigned char *name)
{
    if (!name) return NULL;
    size_t n = strlen((const char *)name), sl = strlen(HIST_SNAP_SUFFIX);
    if (n <= sl || n > 255 || strcmp((const char *)name + n - sl, HIST_SNAP_SUFFIX)) return NULL;
    for (size_t i = 0; i < n - sl; i++) {
        unsigned char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_'))
            return NULL;
    }
    char *path = NULL;
    return asprintf(&path, "%s/%s", h->snap_dir, (const char *)name) < 0 ? NULL : path;
}

/* Older snapshots of the conversation are superseded by the new one, except
 * the few newest (HIST_SNAPSHOTS_KEPT_STR), from which /undo and /retry restore
 * the state at an earlier turn boundary: drop the rest's rows, commit, then
 * their files (a crash leaves only orphans). */
static void drop_older_snapshots(history *h, int64_t conv_id, int64_t keep_id)
{
    if (hist_begin(h, NULL)) return;
    sqlite3_stmt *st = hist_prepare(h, "DELETE FROM snapshots WHERE conversation_id = ?1 AND id <> ?2 AND id NOT IN (SELECT id FROM snapshots"
        " WHERE conversation_id = ?1 ORDER BY id DESC LIMIT " HIST_SNAPSHOTS_KEPT_STR ") RETURNING file_name", NULL);
    if (!st) { hist_rollback(h); return; }
    sqlite3_bind_int64(st, 1, conv_id);
    sqlite3_bind_int64(st, 2, keep_id);
    char **names = NULL;
    size_t n = 0;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        char **grown = realloc(names, (n + 1) * sizeof *names);
        if (!grown) break;
        names = grown;
        if (!(names[n] = snapshot_path(h, sqlite3_column_text(st, 0)))) continue;   /* not ours: drop the row only */
        n++;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE && hist_commit(h, NULL) == 0)
        for (size_t i = 0; i < n; i++) unlink(names[i]);
    else
        hist_rollback(h);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The conversation's uid starts the file name so a person browsing the
 * directory can tell whose state a file holds. */
static char *final_snapshot_name(history *h, int64_t conv_id, history_error *err)
{
    history_conversation c;
    int found = hist_conv_load(h, conv_id, &c, err);
    if (found <= 0) {
        if (found == 0) hist_err(err, "%s: no conversation with id %lld", h->path, (long long)conv_id);
        return NULL;
    }
    char rnd[17], *name = NULL;
    hist_random_hex(rnd, 16);
    if (asprintf(&name, "%s-%s" HIST_SNAP_SUFFIX, c.uid, rnd) < 0) name = NULL;
    history_conv_free(&c);
    if (!name) hist_err(err, "%s: out of memory", h->path);
    return name;
}

/* See history.h. */
int64_t history_snapshot_commit(history *h, const char *tmp_path, const history_snapshot_key *key, history_error *err)
{
    if (!tmp_path || !is_our_temp(h, tmp_path))
        return hist_err(err, "%s: not a snapshot temp file from history_snapshot_begin", tmp_path ? tmp_path : "(null)");
    char checksum[32], *name = NULL, *final_path = NULL;
    int64_t bytes = 0, id = -1;
    if (fsync_file(tmp_path, err) || hist_file_checksum(tmp_path, checksum, &bytes, err)) goto fail;
    if (!(name = final_snapshot_name(h, key->conversation_id, err))) goto fail;
    if (asprintf(&final_path, "%s/%s", h->snap_dir, name) < 0) { final_path = NULL; hist_err(err, "%s: out of memory", h->path); goto fail; }
    if (rename(tmp_path, final_path) != 0) { hist_err(err, "%s: cannot rename to %s: %s", tmp_path, final_path, strerror(errno)); goto fail; }
    if (fsync_dir(h->snap_dir, err) || (id = insert_snapshot_row(h, key, name, bytes, checksum, err)) < 0) {
        unlink(final_path);
        goto out;
    }
    drop_older_snapshots(h, key->conversation_id, id);
    goto out;
fail:
    unlink(tmp_path);
out:
    free(name);
    free(final_path);
    return id;
}

/* See history.h. */
void history_snapshot_free(history_snapshot *s)
{
    if (!s) return;
    free(s->model_fingerprint);
    free(s->path);
    s->model_fingerprint = s->path = NULL;
}

/* Fill a snapshot from a row (column order of the latest query). Returns 0,
 * 1 if the row names a file that is not one of ours (skip it), -1 if out of memory. */
static int read_snapshot_row(history *h, sqlite3_stmt *st, history_snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->id = sqlite3_column_int64(st, 0);
    s->conversation_id = sqlite3_column_int64(st, 1);
    s->message_id = sqlite3_column_int64(st, 2);
    s->n_tokens = sqlite3_column_int64(st, 3);
    s->model_fingerprint = hist_col_text(st, 4, 1);
    s->format_version = sqlite3_column_int(st, 5);
    s->path = snapshot_path(h, sqlite3_column_text(st, 6));
    s->bytes = sqlite3_column_int64(st, 7);
    snprintf(s->checksum, sizeof s->checksum, "%s", sqlite3_column_text(st, 8) ? (const char *)sqlite3_column_text(st, 8) : "");
    s->created_ms = sqlite3_column_int64(st, 9);
    if (!s->model_fingerprint) { history_snapshot_free(s); return -1; }
    return s->path ? 0 : 1;
}

/* Newest by position in the conversation (the later the message, the less
 * to re-prefill), skipping rows whose file is gone or has the wrong size. */
int history_snapshot_latest_upto(history *h, int64_t conversation_id, int64_t max_seq, const char *model_fingerprint,
                                 int format_version, history_snapshot *out, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h,
        "SELECT s.id, s.conversation_id, s.message_id, s.n_tokens, s.model_fingerprint, s.format_version,"
        " s.file_name, s.bytes, s.checksum, s.created_ms FROM snapshots s JOIN messages m ON m.id = s.message_id"
        " WHERE s.conversation_id = ? AND s.model_fingerprint = ? AND s.format_version = ? AND m.seq <= ?"
        " ORDER BY m.seq DESC, s.id DESC", err);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, conversation_id);
    sqlite3_bind_text(st, 2, model_fingerprint ? model_fingerprint : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, format_version);
    sqlite3_bind_int64(st, 4, max_seq);
    int rc, found = 0;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        int bad = read_snapshot_row(h, st, out);
        if (bad < 0) { found = hist_err(err, "%s: out of memory", h->path); break; }
        struct stat sb;
        if (bad == 0 && stat(out->path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == out->bytes) { found = 1; break; }
        history_snapshot_free(out);
    }
    sqlite3_finalize(st);
    if (found == 0 && rc != SQLITE_DONE) return hist_db_err(h, err, "finding a snapshot");
    return found;
}

/* See history.h. */
int history_snapshot_latest(history *h, int64_t conversation_id, const char *model_fingerprint, int format_version,
                            history_snapshot *out, history_error *err)
{
    return history_snapshot_latest_upto(h, conversation_id, INT64_MAX, model_fingerprint, format_version, out, err);
}

/* See history.h. */
int history_snapshot_verify(const history_snapshot *s, history_error *err)
{
    char sum[32];
    int64_t bytes = 0;
    if (hist_file_checksum(s->path, sum, &bytes, err)) return -1;
    if (bytes != s->bytes) return hist_err(err, "%s: snapshot is %lld bytes, expected %lld", s->path, (long long)bytes, (long long)s->bytes);
    if (strcmp(sum, s->checksum)) return hist_err(err, "%s: snapshot checksum mismatch (damaged file)", s->path);
    return 0;
}

/* Our file names only: never delete something a person put there. */
static int is_snapshot_file_name(const char *name)
{
    size_t n = strlen(name), sl = strlen(HIST_SNAP_SUFFIX), tl = strlen(HIST_TMP_SUFFIX);
    if (n > tl && !strncmp(name, HIST_TMP_PREFIX, strlen(HIST_TMP_PREFIX)) && !strcmp(name + n - tl, HIST_TMP_SUFFIX)) return 1;
    return n > sl && !strcmp(name + n - sl, HIST_SNAP_SUFFIX);
}

/* Is this file name recorded in the snapshots table? */
static int has_row(sqlite3_stmt *lookup, const char *name)
{
    sqlite3_reset(lookup);
    sqlite3_bind_text(lookup, 1, name, -1, SQLITE_STATIC);
    int rc = hist_step(lookup);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Delete temp files and files without a row. */
static int remove_orphan_files(history *h, history_error *err)
{
    DIR *d = opendir(h->snap_dir);
    if (!d) return hist_err(err, "%s: %s", h->snap_dir, strerror(errno));
    sqlite3_stmt *lookup = hist_prepare(h, "SELECT 1 FROM snapshots WHERE file_name = ?", err);
    if (!lookup) { closedir(d); return -1; }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!is_snapshot_file_name(e->d_name)) continue;
        int temp = !strncmp(e->d_name, HIST_TMP_PREFIX, strlen(HIST_TMP_PREFIX));
        int known = temp ? 0 : has_row(lookup, e->d_name);
        if (known < 0) { rc = hist_db_err(h, err, "checking snapshot files"); break; }
        if (!known) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", h->snap_dir, e->d_name);
            unlink(path);
        }
    }
    sqlite3_finalize(lookup);
    closedir(d);
    return rc;
}

/* Delete rows whose file is missing (a copied database without its
 * directory, a file removed by hand): they can never be loaded. */
static int remove_stale_rows(history *h, history_error *err)
{
    sqlite3_stmt *st = hist_prepare(h, "SELECT id, file_name FROM snapshots", err);
    if (!st) return -1;
    int64_t *stale = NULL;
    size_t n = 0;
    int rc;
    while ((rc = hist_step(st)) == SQLITE_ROW) {
        char *path = snapshot_path(h, sqlite3_column_text(st, 1));
        int present = path && access(path, F_OK) == 0;   /* a name not ours is stale too */
        free(path);
        if (present) continue;
        int64_t *grown = realloc(stale, (n + 1) * sizeof *stale);
        if (!grown) break;
        stale = grown;
        stale[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE || n == 0) {
        free(stale);
        return rc == SQLITE_DONE ? 0 : hist_db_err(h, err, "checking snapshot rows");
    }
    int result = -1;
    if (hist_begin(h, err) == 0) {
        sqlite3_stmt *del = hist_prepare(h, "DELETE FROM snapshots WHERE id = ?", err);
        int ok = del != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            sqlite3_reset(del);
            sqlite3_bind_int64(del, 1, stale[i]);
            ok = hist_step(del) == SQLITE_DONE;
        }
        sqlite3_finalize(del);
        if (ok) result = hist_commit(h, err);
        else { hist_db_err(h, err, "removing stale snapshot rows"); hist_rollback(h); }
    }
    free(stale);
    return result;
}

/* Called by history_open with the directory locked exclusively. */
int hist_snapshot_cleanup(history *h, history_error *err)
{
    int a = remove_orphan_files(h, err);
    int b = remove_stale_rows(h, err);
    return a || b ? -1 : 0;
}
