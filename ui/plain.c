/* plain.c - see plain.h. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "line_input.h"
#include "multiline.h"
#include "plain.h"

static volatile sig_atomic_t interrupted, generating;

/* Ctrl-C stops an answer at a token boundary; at the prompt it exits
 * (everything already committed is safe in the database). */
static void on_sigint(int sig)
{
    (void)sig;
    if (generating) {
        interrupted = 1;
    } else {
        static const char nl[] = "\n";
        ssize_t w = write(STDERR_FILENO, nl, 1);
        (void)w;
        _exit(130);
    }
}

typedef struct plain_ui {
    int json;
    k3_model *model;             /* for the per-token counters of --stream */
    uint64_t t0_ns, prev_ns;     /* when the message was sent, the previous token */
    uint64_t prev_bytes, prev_lookups, prev_hits;
    k3_stats stats;              /* scratch for k3_stats_read */
} plain_ui;

/* Disk bytes and expert lookups/hits so far (the engine's running totals). */
static void read_counters(plain_ui *ui, uint64_t *bytes, uint64_t *lookups, uint64_t *hits)
{
    k3_stats_read(ui->model, &ui->stats);
    *bytes = ui->stats.bytes_read_trunk + ui->stats.bytes_read_experts + ui->stats.bytes_read_other;
    *lookups = ui->stats.expert_lookups;
    *hits = ui->stats.expert_hits;
}

/* --json --stream: one object per token for scripts that watch per-token
 * behaviour. t_ms = since the message was sent, ms = this token (the first
 * includes the prompt), bytes_read and hit = this token's disk bytes and
 * expert-cache hit rate (null without expert lookups). */
static void stream_token(void *user, int id, const char *text, size_t len)
{
    plain_ui *ui = user;
    uint64_t now = k3_now_ns(), bytes, lookups, hits;
    read_counters(ui, &bytes, &lookups, &hits);
    uint64_t dl = lookups - ui->prev_lookups, dh = hits - ui->prev_hits;
    json_t *o = json_object();
    json_object_set_new(o, "text", json_stringn(text, len));
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "t_ms", json_real((double)(now - ui->t0_ns) / 1e6));
    json_object_set_new(o, "ms", json_real((double)(now - ui->prev_ns) / 1e6));
    json_object_set_new(o, "bytes_read", json_integer((json_int_t)(bytes - ui->prev_bytes)));
    json_object_set_new(o, "hit", dl ? json_real((double)dh / (double)dl) : json_null());
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (line) printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(o);
    ui->prev_ns = now;
    ui->prev_bytes = bytes;
    ui->prev_lookups = lookups;
    ui->prev_hits = hits;
}

/* All of a piped stdin as one message (as llm does), trailing newlines
 * dropped; NULL when it is empty. */
static char *read_all_stdin(void)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *g = realloc(buf, cap * 2);
            if (!g) { free(buf); return NULL; }
            buf = g;
            cap *= 2;
        }
    }
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) len--;
    buf[len] = 0;
    if (!len) { free(buf); return NULL; }
    return buf;
}

static void stream_text(void *user, const char *text, size_t len)
{
    plain_ui *ui = user;
    if (ui->json) return;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* The per-turn JSON line of --json. */
static void print_json(conversation *c, const turn_result *r)
{
    json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s}", "conversation_id", conversation_uid(c),
                          "turn", r->turn, "prefilled_tokens", r->prefilled_tokens, "generated_tokens",
                          r->generated_tokens, "ttft_ms", r->ttft_ms, "decode_tok_s", r->decode_tok_s,
                          "resumed_from_snapshot", conversation_resumed_from_snapshot(c), "status",
                          r->status, "text", r->text ? r->text : "");
    char *line = json_dumps(o, JSON_COMPACT);
    printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(o);
}

int plain_chat_run(conversation *c, const plain_options *o)
{
    const int json = o->json;
    const char *resume_hint = o->resume_hint;
    plain_ui ui = {.json = json, .model = k3_session_model(conversation_session(c))};
    if (o->stream) conversation_set_token_observer(c, stream_token);
    int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int whole_stdin = !isatty(STDIN_FILENO) && !o->lines;
    multiline ml = {0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (tty) fprintf(stderr, "k3 chat: conversation %s. Ctrl-C stops an answer; Ctrl-D quits.\n",
                     conversation_uid(c));
    line_input_open(tty);
    int rc = 0;
    char *input;
    int stdin_done = 0;
    while (!stdin_done && (input = whole_stdin ? read_all_stdin() : line_input_read(tty, ml.open ? "... " : "> "))) {
        stdin_done = whole_stdin;
        char *line = input;
        if (!whole_stdin) {                 /* """ blocks: collect until closed */
            int mrc = multiline_feed(&ml, input, &line);
            free(input);
            if (mrc <= 0) continue;
        }
        if (!*line) { free(line); continue; }
        ui.t0_ns = ui.prev_ns = k3_now_ns();
        read_counters(&ui, &ui.prev_bytes, &ui.prev_lookups, &ui.prev_hits);
        turn_result r;
        k3_error err;
        interrupted = 0;
        generating = 1;
        int t = conversation_turn(c, line, &interrupted, stream_text, &ui, &r, &err);
        generating = 0;
        free(line);
        if (t == 1) {                       /* not sent: say why, go on */
            fprintf(stderr, "k3: %s\n", err.msg);
            continue;
        }
        if (!json) { fputc('\n', stdout); fflush(stdout); }
        if (t < 0) {
            fprintf(stderr, "k3: %s\n", err.msg);
            turn_result_free(&r);
            rc = 1;
            break;
        }
        if (json) {
            print_json(c, &r);
        } else {
            fprintf(stderr, "k3: turn %d: prefilled %d tokens in %.0f ms, ttft %.0f ms, %d tokens at %.2f tok/s%s\n",
                    r.turn, r.prefilled_tokens, r.prefill_ms, r.ttft_ms, r.generated_tokens, r.decode_tok_s,
                    r.interrupted ? " (interrupted)" : r.context_full ? " (context full)" : "");
        }
        if (r.context_full)
            fprintf(stderr, "k3: the context is full: start a new conversation (or raise --ctx)\n");
        turn_result_free(&r);
    }
    if (ml.open) fprintf(stderr, "k3: input ended inside a \"\"\" block; that message was not sent\n");
    multiline_free(&ml);
    line_input_close(tty);
    fprintf(stderr, "k3: conversation saved; resume with: %s --resume %s\n", resume_hint, conversation_uid(c));
    return rc;
}
