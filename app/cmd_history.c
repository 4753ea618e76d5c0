/* cmd_history.c - `k3 history`: list, show, search, export, import and
 * delete stored conversations (history/history.h does the work).
 *
 * Every subcommand accepts --db FILE (default: the chat's database) and
 * --help. Exit codes: 0 ok, 1 error (bad id, unreadable database), 2 usage.
 * Two hidden subcommands exist for the test suite: `stress` appends
 * messages in a loop printing each committed id, `check` verifies a
 * database (and optionally that listed ids are present). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "export_file.h"
#include "history.h"
#include "k3.h"
#include "k3_util.h"
#include "options.h"

/* What a subcommand gets: the table's history rows (options.c) and the
 * positional arguments after the subcommand. */
typedef struct history_args {
    const char *db;              /* --db FILE or NULL for the default */
    const char *pos[64];         /* positional arguments after the subcommand */
    int n_pos;
    const char *format;          /* export --format */
    const char *output;          /* export -o */
    long long limit;             /* list/search --limit */
    long long n;                 /* stress --n */
    const char *ids_file;        /* check --ids */
    int json;                    /* list/show/search --json */
    int force;                   /* export --force: replace an existing file */
    int yes;                     /* rm --yes: no question */
} history_args;

/* The text for `k3 history --help` and for each subcommand's --help. */
static void usage(FILE *f, const char *sub)
{
    if (!sub || !strcmp(sub, "list"))
        fprintf(f, "usage: k3 history list [--limit N] [--json] [--db FILE]\n"
                   "  Conversations, most recently updated first: id, updated, turns, model, title.\n"
                   "  --json prints them as one JSON array (as llm logs --json).\n");
    if (!sub || !strcmp(sub, "show"))
        fprintf(f, "usage: k3 history show ID [--json] [--db FILE]\n"
                   "  Print a conversation. ID is a unique prefix of the id shown by list, or 'last'.\n"
                   "  --json prints it as the JSON export does (every message with its numbers).\n");
    if (!sub || !strcmp(sub, "search"))
        fprintf(f, "usage: k3 history search TEXT... [--limit N] [--json] [--db FILE]\n"
                   "  Full-text search of all messages, best matches first, with snippets. TEXT is\n"
                   "  plain text, except: rout* matches words starting with rout, and a OR b matches\n"
                   "  either (when that finds nothing, they are searched literally); quotes and AND,\n"
                   "  NEAR are matched literally; text starting with - goes after --, e.g.\n"
                   "  k3 history search -- -x. --json prints the hits as a JSON array ([match] marked).\n");
    if (!sub || !strcmp(sub, "export"))
        fprintf(f, "usage: k3 history export ID --format md|json [-o FILE [--force]] [--db FILE]\n"
                   "  Write a conversation as Markdown or JSON (JSON can be imported again). -o writes a\n"
                   "  private file (mode 0600) and never replaces one unless --force; \"~/\" is your home.\n");
    if (!sub || !strcmp(sub, "import"))
        fprintf(f, "usage: k3 history import FILE.json [--db FILE]\n"
                   "  Add a conversation from a JSON export (keeps its id if it is free).\n");
    if (!sub || !strcmp(sub, "rm"))
        fprintf(f, "usage: k3 history rm ID [--yes] [--db FILE]\n"
                   "  Delete a conversation with its messages and saved engine states. ID needs at least\n"
                   "  4 characters (or 'last'); on a terminal k3 asks first, elsewhere --yes is required.\n");
    if (!sub) {
        fprintf(f, "\nOptions (before or after the subcommand):\n");
        cli_print_options(f, OPTS_HISTORY);
    }
}

/* Parse everything after the subcommand name (argv[0]) into a, on top of
 * the options given before it (set); returns 0, or 2 on bad usage. */
static int parse_args(const char *sub, int argc, char **argv, cli_settings *set, history_args *a)
{
    memset(a, 0, sizeof *a);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "history %s", sub);
    if (cli_parse_args(cmd, argc, argv, OPTS_HISTORY, set, a->pos, 64, &a->n_pos)) return K3_EXIT_USAGE;
    const cli_history_settings *h = &set->history;
    a->db = set->db_path;
    a->json = set->json;
    a->format = h->format;
    a->output = h->output;
    a->limit = h->limit;
    a->n = h->n;
    a->ids_file = h->ids_file;
    a->force = h->force;
    a->yes = h->yes;
    return 0;
}

/* How a subcommand uses the database. */
enum { DB_READ, DB_CREATE, DB_WRITE };

/* Open the database or print why not. Reading subcommands open it
 * read-only (they work on a read-only file or directory) and never create
 * it; writing ones say when the file or its directory is the problem. */
static history *open_db(const history_args *a, int mode)
{
    history_error err;
    unsigned flags = mode == DB_READ ? HISTORY_OPEN_READONLY : mode == DB_WRITE ? HISTORY_OPEN_EXISTING : 0;
    history *h = history_open(a->db, flags, &err);
    if (!h) cli_error("%s", err.msg);
    return h;
}

/* Local time to the minute, for lists people scan. */
static void local_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M", &tm)) snprintf(buf, cap, "?");
}

/* Print text for a terminal: control characters (which could be escape
 * sequences from a model or an imported file) become spaces, except
 * newlines and tabs when keep_lines. At most max_chars characters (0 = all). */
static void print_clean(FILE *f, const char *s, int keep_lines, size_t max_chars)
{
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xC0) != 0x80 && max_chars && ++chars > max_chars) {
            fputs("\xE2\x80\xA6", f);
            return;
        }
        int ctl = *p < 0x20 || *p == 0x7f;
        if (ctl && !(keep_lines && (*p == '\n' || *p == '\t'))) fputc(' ', f);
        else fputc(*p, f);
    }
}

/* The model directory's last component is what tells models apart in a list. */
static const char *model_short(const char *path)
{
    if (!*path) return "-";
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    const char *slash = NULL;
    for (size_t i = 0; i + 1 < n; i++) if (path[i] == '/') slash = path + i;
    return slash ? slash + 1 : path;
}

/* `list`: one line per conversation. A missing default database is just
 * "nothing yet", not an error. */
static int sub_list(const history_args *a)
{
    if (a->n_pos) { cli_error("history list: unexpected argument '%s'", a->pos[0]); return K3_EXIT_USAGE; }
    if (!a->db) {
        char path[4096];
        history_error err;
        struct stat st;
        if (history_default_path(path, sizeof path, &err) == 0 && stat(path, &st) != 0 && errno == ENOENT) {
            fprintf(stderr, "k3: no conversations yet (%s does not exist)\n", path);
            return K3_EXIT_OK;
        }
    }
    history *h = open_db(a, DB_READ);
    if (!h) return K3_EXIT_ERROR;
    history_conversation *list;
    size_t n;
    history_error err;
    if (a->json) {                       /* one JSON array, even when empty */
        int rc = history_list_json(h, (int)a->limit, stdout, &err);
        if (rc) cli_error("%s", err.msg);
        history_close(h);
        return rc ? K3_EXIT_ERROR : K3_EXIT_OK;
    }
    if (history_conv_list(h, (int)a->limit, &list, &n, &err)) {
        cli_error("%s", err.msg);
        history_close(h);
        return K3_EXIT_ERROR;
    }
    if (n == 0) fprintf(stderr, "k3: no conversations yet in %s\n", history_path(h));
    else printf("%-8s  %-16s  %5s  %-20s  %s\n", "ID", "UPDATED", "TURNS", "MODEL", "TITLE");
    for (size_t i = 0; i < n; i++) {
        char when[32];
        local_time(list[i].updated_ms, when, sizeof when);
        const char *model = !strncmp(list[i].model_fingerprint, "remote:", 7) ? list[i].model_fingerprint + 7   /* an endpoint's model name */
                                                                               : model_short(list[i].model_path);
        printf("%-8s  %-16s  %5lld  %-20.20s  ", list[i].uid, when, (long long)list[i].n_turns, model);
        print_clean(stdout, *list[i].title ? list[i].title : "(untitled)", 0, 60);
        putchar('\n');
    }
    history_conv_list_free(list, n);
    history_close(h);
    return K3_EXIT_OK;
}

/* Resolve ID (prefix or "last") or print why it does not name one conversation. */
static int find_conv(history *h, const char *ref, history_conversation *c)
{
    history_error err;
    if (history_conv_find(h, ref, c, &err)) { cli_error("%s", err.msg); return -1; }
    return 0;
}

/* The numbers recorded with a message, on its header line. */
static void print_msg_stats(const history_message *m)
{
    if (m->prompt_tokens >= 0) printf("  %lld prompt tok", (long long)m->prompt_tokens);
    if (m->generated_tokens >= 0) printf("  %lld gen tok", (long long)m->generated_tokens);
    if (m->ttft_ms >= 0) printf("  TTFT %.0f ms", m->ttft_ms);
    if (m->decode_ms > 0 && m->generated_tokens > 0) printf("  %.1f tok/s", (double)m->generated_tokens * 1000.0 / m->decode_ms);
}

/* `show ID`: header, system prompt, then every message. */
static int sub_show(const history_args *a)
{
    if (a->n_pos != 1) { usage(stderr, "show"); return K3_EXIT_USAGE; }
    history *h = open_db(a, DB_READ);
    if (!h) return K3_EXIT_ERROR;
    history_conversation c;
    if (find_conv(h, a->pos[0], &c)) { history_close(h); return K3_EXIT_ERROR; }
    history_message *msgs;
    size_t n;
    history_error err;
    int rc = K3_EXIT_ERROR;
    if (a->json) {                       /* the JSON export, to stdout */
        if (history_export(h, c.id, HISTORY_JSON, stdout, &err)) cli_error("%s", err.msg);
        else rc = K3_EXIT_OK;
        history_conv_free(&c);
        history_close(h);
        return rc;
    }
    if (history_msg_list(h, c.id, &msgs, &n, &err)) {
        cli_error("%s", err.msg);
    } else {
        char created[32], updated[32];
        local_time(c.created_ms, created, sizeof created);
        local_time(c.updated_ms, updated, sizeof updated);
        printf("conversation %s: ", c.uid);
        print_clean(stdout, *c.title ? c.title : "(untitled)", 0, 0);
        printf("\nmodel: %s%s%s%s%s%s\ncreated %s, updated %s, %zu messages\n", *c.model_path ? c.model_path : "-",
               *c.model_fingerprint ? " (" : "", c.model_fingerprint, *c.model_fingerprint ? ")" : "",
               *c.model_type ? ", type " : "", c.model_type, created, updated, n);
        if (strcmp(c.sampling_json, "{}")) printf("sampling (current setting): %s\n", c.sampling_json);
        if (*c.system_prompt) { printf("system: "); print_clean(stdout, c.system_prompt, 1, 0); putchar('\n'); }
        for (size_t i = 0; i < n; i++) {
            printf("\n[%lld] %s", (long long)msgs[i].seq, msgs[i].role);
            if (msgs[i].in_progress) printf(" (incomplete: the chat stopped while answering)");
            else if (msgs[i].status != HISTORY_COMPLETE) printf(" (%s)", history_status_name(msgs[i].status));
            print_msg_stats(&msgs[i]);
            if (msgs[i].sampling_json) printf("  sampling %s", msgs[i].sampling_json);
            putchar('\n');
            if (msgs[i].reasoning) {
                printf("(reasoning) ");
                print_clean(stdout, msgs[i].reasoning, 1, 0);
                printf("\n(answer) ");
            }
            print_clean(stdout, msgs[i].content, 1, 0);
            putchar('\n');
        }
        rc = K3_EXIT_OK;
        history_msg_list_free(msgs, n);
    }
    history_conv_free(&c);
    history_close(h);
    return rc;
}

/* Snippet markers: control characters that cleaned text cannot contain as
 * visible output, turned into bold (terminal) or brackets when printed. */
#define SNIPPET_ON "\x01"
#define SNIPPET_OFF "\x02"

/* A search snippet on one line with its matches highlighted. */
static void print_snippet(const char *s, int tty)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == 1) fputs(tty ? "\x1b[1m" : "[", stdout);
        else if (*p == 2) fputs(tty ? "\x1b[0m" : "]", stdout);
        else if (*p < 0x20 || *p == 0x7f) putchar(' ');
        else putchar(*p);
    }
}

/* `search TEXT...`: the words are joined with spaces and searched as plain text. */
static int sub_search(const history_args *a)
{
    if (a->n_pos < 1) { usage(stderr, "search"); return K3_EXIT_USAGE; }
    char query[4096] = "";
    for (int i = 0; i < a->n_pos; i++) {
        size_t len = strlen(query);
        snprintf(query + len, sizeof query - len, "%s%s", i ? " " : "", a->pos[i]);
    }
    history *h = open_db(a, DB_READ);
    if (!h) return K3_EXIT_ERROR;
    int tty = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    history_hit *hits;
    size_t n;
    int substring = 0;
    history_error err;
    if (history_msg_search(h, query, a->limit ? (int)a->limit : 20, a->json ? "[" : SNIPPET_ON,
                           a->json ? "]" : SNIPPET_OFF, &hits, &n, &substring, &err)) {
        cli_error("%s", err.msg);
        history_close(h);
        return K3_EXIT_ERROR;
    }
    if (a->json) {
        int rc = history_hits_json(hits, n, stdout);
        if (rc) cli_error("stdout: write failed");
        history_hits_free(hits, n);
        history_close(h);
        return rc ? K3_EXIT_ERROR : K3_EXIT_OK;
    }
    if (n == 0) fprintf(stderr, "k3: no messages match '%s'\n", query);
    else if (substring) fprintf(stderr, "k3: no word matches; showing messages containing the text\n");
    for (size_t i = 0; i < n; i++) {
        char when[32];
        local_time(hits[i].created_ms, when, sizeof when);
        printf("%s  #%lld %-9s %s  ", hits[i].uid, (long long)hits[i].seq, hits[i].role, when);
        print_clean(stdout, *hits[i].title ? hits[i].title : "(untitled)", 0, 50);
        printf("\n    ");
        print_snippet(hits[i].snippet, tty);
        putchar('\n');
    }
    history_hits_free(hits, n);
    history_close(h);
    return K3_EXIT_OK;
}

/* Write the export through the shared helper (temp file, 0600, no
 * overwrite without --force), so -o never leaves a half-written file. */
static int export_to_file(history *h, int64_t id, history_format fmt, const char *path, int force)
{
    char used[4096];
    k3_error err;
    if (chat_export_file(h, id, fmt, path, force, used, sizeof used, &err) < 0) {
        cli_error("history export: %s", err.msg);
        return -1;
    }
    return 0;
}

/* `export ID --format md|json [-o FILE]`. */
static int sub_export(const history_args *a)
{
    if (a->n_pos != 1 || !a->format) { usage(stderr, "export"); return K3_EXIT_USAGE; }
    history_format fmt = strcmp(a->format, "json") ? HISTORY_MARKDOWN : HISTORY_JSON;   /* the table allows md, markdown, json */
    history *h = open_db(a, DB_READ);
    if (!h) return K3_EXIT_ERROR;
    history_conversation c;
    int rc = K3_EXIT_ERROR;
    if (find_conv(h, a->pos[0], &c) == 0) {
        if (a->output && strcmp(a->output, "-")) {
            if (export_to_file(h, c.id, fmt, a->output, a->force) == 0) rc = K3_EXIT_OK;
        } else {
            history_error err;
            if (history_export(h, c.id, fmt, stdout, &err)) cli_error("%s", err.msg);
            else if (fflush(stdout) != 0) cli_error("stdout: write failed");
            else rc = K3_EXIT_OK;
        }
        history_conv_free(&c);
    }
    history_close(h);
    return rc;
}

/* `import FILE.json`: one conversation from our JSON export. */
static int sub_import(const history_args *a)
{
    if (a->n_pos != 1) { usage(stderr, "import"); return K3_EXIT_USAGE; }
    char *text = cli_read_file(a->pos[0], K3_MAX_IMPORT_BYTES, NULL);
    if (!text) return K3_EXIT_ERROR;
    history *h = open_db(a, DB_CREATE);
    int rc = K3_EXIT_ERROR;
    if (h) {
        history_conversation c;
        history_error err;
        int64_t id = history_import_json(h, text, a->pos[0], &c, &err);
        if (id == HISTORY_IMPORT_ALREADY_STORED) {
            printf("already stored: conversation %s has the same %lld messages; nothing imported\n", c.uid,
                   (long long)c.n_messages);
            history_conv_free(&c);
            rc = K3_EXIT_OK;
        } else if (id < 0) {
            cli_error("%s", err.msg);
        } else {
            printf("imported %s (%lld messages)\n", c.uid, (long long)c.n_messages);
            history_conv_free(&c);
            rc = K3_EXIT_OK;
        }
        history_close(h);
    }
    free(text);
    return rc;
}

/* Ask on the terminal; anything but y/yes is no. */
static int confirm(const char *question)
{
    fprintf(stderr, "%s [y/N] ", question);
    fflush(stderr);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return !strcmp(line, "y\n") || !strcmp(line, "yes\n") || !strcmp(line, "Y\n");
}

/* `rm ID`: the conversation, its messages and its snapshot files. A
 * one-character prefix matches too easily: at least 4 (or 'last'), and a
 * question on a terminal or --yes elsewhere. */
static int sub_rm(const history_args *a)
{
    if (a->n_pos != 1) { usage(stderr, "rm"); return K3_EXIT_USAGE; }
    if (strlen(a->pos[0]) < 4 && strcmp(a->pos[0], "last")) {
        cli_error("history rm: '%s' is too short: give at least 4 characters of the id (k3 history list shows them)", a->pos[0]);
        return K3_EXIT_USAGE;
    }
    if (!a->yes && !isatty(STDIN_FILENO)) {
        cli_error("history rm: add --yes to delete without a terminal to ask on");
        return K3_EXIT_USAGE;
    }
    history *h = open_db(a, DB_WRITE);
    if (!h) return K3_EXIT_ERROR;
    history_conversation c;
    int rc = K3_EXIT_ERROR;
    if (find_conv(h, a->pos[0], &c) == 0) {
        history_error err;
        char q[256];
        snprintf(q, sizeof q, "delete conversation %s (%lld messages)?", c.uid, (long long)c.n_messages);
        if (!a->yes && !confirm(q)) {
            fprintf(stderr, "k3: nothing deleted\n");
            rc = K3_EXIT_ERROR;
        } else if (history_conv_delete(h, c.id, &err)) cli_error("%s", err.msg);
        else {
            printf("deleted %s (%lld messages): ", c.uid, (long long)c.n_messages);
            print_clean(stdout, *c.title ? c.title : "(untitled)", 0, 60);
            putchar('\n');
            rc = K3_EXIT_OK;
        }
        history_conv_free(&c);
    }
    history_close(h);
    return rc;
}

/* Hidden, for tests/t_history.sh: append --n messages to a new conversation,
 * printing "committed ID" after each commit and taking a small snapshot
 * every 10 messages, so a kill -9 can land anywhere in the write path. */
static int sub_stress(const history_args *a)
{
    history *h = open_db(a, DB_CREATE);
    if (!h) return K3_EXIT_ERROR;
    history_error err;
    history_conversation fields = {.title = "stress", .model_path = "models/stress", .model_fingerprint = "fp-stress"};
    int64_t conv = history_conv_create(h, &fields, NULL, &err);
    long long n = a->n ? a->n : 1000;
    static char state[64 * 1024];
    for (long long i = 0; conv > 0 && i < n; i++) {
        char text[128];
        snprintf(text, sizeof text, "stress message %lld from pid %ld: don't stop", i, (long)getpid());
        history_message m = history_message_make(i % 2 ? "assistant" : "user", text, HISTORY_COMPLETE);
        int64_t id = history_msg_add(h, conv, &m, &err);
        if (id < 0) { conv = -1; break; }
        printf("committed %lld\n", (long long)id);
        fflush(stdout);
        if (i % 10 != 9) continue;
        char *tmp = NULL;
        if (history_snapshot_begin(h, &tmp, &err)) { conv = -1; break; }
        FILE *f = fopen(tmp, "wb");
        memset(state, (int)(i & 0xff), sizeof state);
        int ok = f && fwrite(state, 1, sizeof state, f) == sizeof state;
        if (f && fclose(f) != 0) ok = 0;
        history_snapshot_key key = {.conversation_id = conv, .message_id = id, .n_tokens = i + 1,
                                    .model_fingerprint = "fp-stress", .format_version = 1};
        if (!ok) { history_snapshot_discard(h, tmp); free(tmp); snprintf(err.msg, sizeof err.msg, "stress: cannot write snapshot"); conv = -1; break; }
        int64_t sid = history_snapshot_commit(h, tmp, &key, &err);
        free(tmp);
        if (sid < 0) { conv = -1; break; }
    }
    if (conv < 0) cli_error("%s", err.msg);
    history_close(h);
    return conv < 0 ? K3_EXIT_ERROR : K3_EXIT_OK;
}

/* qsort/bsearch order for message ids. */
static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* All message ids in the database, sorted (for `check --ids`). */
static int64_t *all_message_ids(history *h, size_t *n_out)
{
    history_conversation *convs;
    size_t n_conv, n = 0;
    history_error err;
    int64_t *ids = NULL;
    *n_out = 0;
    if (history_conv_list(h, 0, &convs, &n_conv, &err)) { cli_error("%s", err.msg); return NULL; }
    int ok = 1;
    for (size_t i = 0; ok && i < n_conv; i++) {
        history_message *msgs;
        size_t nm;
        if (history_msg_list(h, convs[i].id, &msgs, &nm, &err)) { cli_error("%s", err.msg); ok = 0; break; }
        int64_t *grown = realloc(ids, (n + nm + 1) * sizeof *ids);
        if (!grown) ok = 0;
        else {
            ids = grown;
            for (size_t j = 0; j < nm; j++) ids[n++] = msgs[j].id;
        }
        history_msg_list_free(msgs, nm);
    }
    history_conv_list_free(convs, n_conv);
    if (!ok) { free(ids); return NULL; }
    if (!ids) ids = malloc(sizeof *ids);
    if (ids) qsort(ids, n, sizeof *ids, cmp_i64);
    *n_out = n;
    return ids;
}

/* Every "committed ID" line of the file must name a message in the database. */
static int check_ids(history *h, const char *path)
{
    char *text = cli_read_file(path, K3_MAX_IMPORT_BYTES, NULL);
    if (!text) return -1;
    size_t n_ids;
    int64_t *ids = all_message_ids(h, &n_ids);
    int missing = 0, checked = 0;
    for (char *line = text; ids && line && *line;) {
        char *next = strchr(line, '\n');
        if (!next) break;  /* an unterminated last line was never completely reported */
        *next = 0;
        long long v;
        if (sscanf(line, "committed %lld", &v) == 1) {
            int64_t key = v;
            checked++;
            if (!bsearch(&key, ids, n_ids, sizeof *ids, cmp_i64)) {
                if (missing++ < 5) cli_error("%s: committed message %lld is missing", history_path(h), v);
            }
        }
        line = next + 1;
    }
    free(text);
    if (!ids) return -1;
    free(ids);
    printf("%d committed ids checked, %d missing\n", checked, missing);
    return missing ? -1 : 0;
}

/* Hidden, for tests: open (which cleans snapshots), run history_check, and
 * optionally verify committed ids. */
static int sub_check(const history_args *a)
{
    history *h = open_db(a, DB_WRITE);
    if (!h) return K3_EXIT_ERROR;
    char *report = NULL;
    history_error err;
    int rc = history_check(h, &report, &err);
    if (rc < 0) cli_error("%s", err.msg);
    else if (rc > 0) fprintf(stderr, "k3: %s: problems found:\n%s", history_path(h), report);
    else printf("ok\n");
    free(report);
    if (rc == 0 && a->ids_file && check_ids(h, a->ids_file)) rc = 1;
    history_close(h);
    return rc ? K3_EXIT_ERROR : K3_EXIT_OK;
}

/* Dispatch `k3 history SUB ...`. */
int cmd_history(int argc, char **argv)
{
    static const struct { const char *name; int (*fn)(const history_args *); int hidden; } subs[] = {
        {"list", sub_list, 0},          {"show", sub_show, 0},   {"search", sub_search, 0},
        {"export", sub_export, 0},  {"import", sub_import, 0}, {"rm", sub_rm, 0},
        {"stress", sub_stress, 1},      {"check", sub_check, 1},
    };
    cli_settings set;
    cli_settings_defaults(&set);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {   /* options before the subcommand: `k3 history --db FILE list` */
        int r = cli_parse_option(argc, argv, &i, OPTS_HISTORY, &set);
        if (r < 0) return K3_EXIT_USAGE;
        if (r == 0) {
            cli_error("history: unknown option '%s' (see k3 history --help)", argv[i]);
            return K3_EXIT_USAGE;
        }
    }
    if (i >= argc || set.history.help || !strcmp(argv[i], "help")) {
        int asked = set.history.help || i < argc;
        usage(asked ? stdout : stderr, NULL);
        return asked ? K3_EXIT_OK : K3_EXIT_USAGE;
    }
    const char *sub = argv[i];
    for (size_t k = 0; k < sizeof subs / sizeof subs[0]; k++) {
        if (strcmp(sub, subs[k].name)) continue;
        history_args a;
        int rc = parse_args(sub, argc - i, argv + i, &set, &a);
        if (rc) return rc;
        if (set.history.help) { usage(stdout, subs[k].hidden ? NULL : sub); return K3_EXIT_OK; }
        return subs[k].fn(&a);
    }
    cli_error("history: unknown subcommand '%s' (list, show, search, export, import, rm)", sub);
    return K3_EXIT_USAGE;
}
