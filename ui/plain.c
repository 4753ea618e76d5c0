/* plain.c - see plain.h. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"
#include "line_input.h"
#include "multiline.h"
#include "plain.h"
#include "remote.h"
#include "remote_metrics.h"
#include "k3_util.h"

static volatile sig_atomic_t interrupted, generating, terminated;

/* SIGTERM: an answer in progress stops at a token boundary and is stored
 * (as for Ctrl-C), then the chat exits 143 (128 + SIGTERM); at the prompt
 * it exits at once (everything is committed). */
static void on_sigterm(int sig)
{
    (void)sig;
    terminated = 1;
    if (generating) interrupted = 1;
    else _exit(143);
}

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
    size_t prev_text_len;        /* bytes of the answer (or the reasoning) already reported */
    int prev_in_reasoning;       /* the last token reported was reasoning */
    int in_reasoning;            /* the reasoning mark is open (text mode) */
    k3_stats stats;              /* scratch for k3_stats_read */
    int n_failed;                /* messages not answered, commands that said an error: exit PLAIN_EXIT_NOT_ANSWERED */
    int n_done;                  /* messages answered and commands that ran without an error */
    int n_interrupted;           /* answers cut by Ctrl-C: exit 130 */
} plain_ui;

/* Disk bytes and expert lookups/hits so far (the engine's running totals). */
static void read_counters(plain_ui *ui, uint64_t *bytes, uint64_t *lookups, uint64_t *hits)
{
    if (!ui->model) { *bytes = *lookups = *hits = 0; return; }   /* a remote endpoint: no local engine */
    k3_stats_read(ui->model, &ui->stats);
    *bytes = ui->stats.bytes_read_trunk + ui->stats.bytes_read_experts + ui->stats.bytes_read_other;
    *lookups = ui->stats.expert_lookups;
    *hits = ui->stats.expert_hits;
}

/* --json --stream: one object per token for scripts that watch per-token
 * behaviour (called with the answer so far after each token). t_ms = since
 * the message was sent, ms = this token (the first includes the prompt),
 * bytes_read and hit = this token's disk bytes and expert-cache hit rate
 * (null without expert lookups); text = what the token added (empty while
 * a character is incomplete, or for a special token). */
static void stream_token(void *user, const generate_result *g)
{
    plain_ui *ui = user;
    if (g->n_generated <= 0) return;
    uint64_t now = k3_now_ns(), bytes, lookups, hits;
    read_counters(ui, &bytes, &lookups, &hits);
    uint64_t dl = lookups - ui->prev_lookups, dh = hits - ui->prev_hits;
    /* a thinking answer's reasoning tokens carry "reasoning": true */
    const char *t = g->in_reasoning ? g->reasoning : g->text;
    size_t text_len = t ? strlen(t) : 0;
    if (text_len < ui->prev_text_len || g->in_reasoning != ui->prev_in_reasoning) ui->prev_text_len = 0;
    ui->prev_in_reasoning = g->in_reasoning;
    json_t *o = json_object();
    json_object_set_new(o, "text", json_stringn(t ? t + ui->prev_text_len : "", text_len - ui->prev_text_len));
    if (g->in_reasoning) json_object_set_new(o, "reasoning", json_true());
    json_object_set_new(o, "id", json_integer(g->ids[g->n_generated - 1]));
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
    ui->prev_text_len = text_len;
}

/* A turn starts: the per-token figures of --stream count from here. */
static void stream_begin(plain_ui *ui)
{
    ui->t0_ns = ui->prev_ns = k3_now_ns();
    ui->prev_text_len = 0;
    ui->prev_in_reasoning = 0;
    read_counters(ui, &ui->prev_bytes, &ui->prev_lookups, &ui->prev_hits);
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

/* A thinking model's reasoning, marked off from the answer in the text
 * output: "[reasoning] ... [/reasoning]" (--json has it in its own field). */
static void stream_reasoning(void *user, const char *text, size_t len)
{
    plain_ui *ui = user;
    if (ui->json) return;
    if (!ui->in_reasoning) fputs("[reasoning] ", stdout);
    ui->in_reasoning = 1;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

static void stream_text(void *user, const char *text, size_t len)
{
    plain_ui *ui = user;
    if (ui->json) return;
    if (ui->in_reasoning) fputs("\n[/reasoning]\n", stdout);
    ui->in_reasoning = 0;
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
    /* speculative decoding (--draft ngram): drafts verified, kept, and passes over the model */
    json_object_set_new(o, "drafted_tokens", json_integer(r->drafted_tokens));
    json_object_set_new(o, "draft_kept_tokens", json_integer(r->draft_kept_tokens));
    json_object_set_new(o, "decode_passes", json_integer(r->decode_passes));
    if (r->reasoning) json_object_set_new(o, "reasoning", json_string(r->reasoning));
    if (r->length_in_reasoning) json_object_set_new(o, "length_in_reasoning", json_true());
    char *line = json_dumps(o, JSON_COMPACT);
    printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(o);
}

/* The shared commands talk back on stderr (stdout carries only answers). */
static void say(void *user, chat_say_kind kind, const char *text)
{
    plain_ui *ui = user;
    if (kind == CHAT_SAY_ERROR) ui->n_failed++;   /* a script must see that a command failed */
    fprintf(stderr, "%s%s\n", kind == CHAT_SAY_ERROR ? "k3: " : "", text);
}

/* Re-prefill progress: n/N and a bar, redrawn in place on a terminal; to
 * a log (stderr not a terminal) one line when it is done, since redrawn
 * bars there run together into one unreadable line. */
void plain_show_progress(void *user, int done, int total)
{
    (void)user;
    if (total <= 0) return;
    if (!isatty(STDERR_FILENO)) {
        if (done >= total) fprintf(stderr, "k3: prefilled the conversation: %d tokens\n", total);
        return;
    }
    char bar[31];
    int fill = (int)((int64_t)done * 30 / total);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\rk3: prefilling the conversation: %d/%d tokens [%s]%s", done, total, bar,
            done >= total ? "\n" : "");
}

/* The help for line mode: every command of the shared table. */
static void print_help(void)
{
    size_t n;
    const chat_command *cmds = chat_commands(&n);
    fprintf(stderr, "commands (a message starting with / is sent as //text):\n");
    for (size_t i = 0; i < n; i++) {
        char head[64];
        snprintf(head, sizeof head, "/%s %s", cmds[i].name, cmds[i].args);
        fprintf(stderr, "  %-34s %s\n", head, cmds[i].help);
    }
    fprintf(stderr, "Ctrl-C stops an answer; Ctrl-D quits.\n");
}

static void print_remote_figures(conversation *c);

/* The engine counters in one paragraph (/stats); a server's from its /metrics. */
static void print_stats(conversation *c)
{
    k3_stats s;
    if (!conversation_session(c)) {   /* a remote backend: no local engine */
        print_remote_figures(c);
        return;
    }
    k3_stats_read(k3_session_model(conversation_session(c)), &s);
    fprintf(stderr, "engine: %llu tokens prefilled in %.0f ms, %llu decoded in %.0f ms; read %llu bytes "
                    "(trunk %llu, experts %llu); expert cache %llu lookups, %llu hits; rss %llu bytes, peak %llu\n",
            (unsigned long long)s.tokens_prefilled, s.prefill_ms, (unsigned long long)s.tokens_decoded, s.decode_ms,
            (unsigned long long)(s.bytes_read_trunk + s.bytes_read_experts + s.bytes_read_other),
            (unsigned long long)s.bytes_read_trunk, (unsigned long long)s.bytes_read_experts,
            (unsigned long long)s.expert_lookups, (unsigned long long)s.expert_hits,
            (unsigned long long)s.rss_bytes, (unsigned long long)s.peak_rss_bytes);
}

/* The server's own figures after a remote turn, from its /metrics (vLLM,
 * SGLang, k3 serve); what it does not give is named, not shown as zero. */
static void print_remote_figures(conversation *c)
{
    k3_error err;
    size_t len = 0;
    char *text = remote_get_metrics(conversation_remote(c), &len, 3, &err);
    if (!text) {
        fprintf(stderr, "k3: server figures not available (%s)\n", err.msg);
        return;
    }
    static remote_metrics prev;          /* the previous turn's poll: rates between the two */
    static double prev_s;
    static int have_prev;
    const double now_s = k3_now_ns() / 1e9;
    remote_metrics m;
    remote_metrics_parse(text, len, &m);
    free(text);
    if (have_prev) remote_metrics_between(&prev, &m, now_s - prev_s);
    prev = m;
    prev_s = now_s;
    have_prev = 1;
    char line[1024];
    remote_metrics_summary(&m, line, sizeof line);
    fprintf(stderr, "k3: %s\n", line);
}

/* How one turn ended: its text went out as it streamed; now the figures.
 * Returns -1 when the chat cannot go on. */
static int report_turn(conversation *c, const plain_options *opt, plain_ui *ui, int t, turn_result *r,
                       const k3_error *err)
{
    if (t == 1) {                       /* not sent: say why, go on (the exit code tells) */
        fprintf(stderr, "k3: %s\n", err->msg);
        ui->n_failed++;
        return 0;
    }
    if (!opt->json) { fputc('\n', stdout); fflush(stdout); }
    if (t == 0 && r->length_in_reasoning)
        fprintf(stderr, "k3: the answer ran out of tokens while still reasoning (finish_reason length, no answer): "
                        "raise the limit with /set n=N\n");
    if (t < 0) {
        fprintf(stderr, "k3: %s\n", err->msg);
        turn_result_free(r);
        return -1;
    }
    if (r->error && r->error_msg[0])     /* a remote failure: one line, the conversation goes on */
        fprintf(stderr, "k3: %s\n", r->error_msg);
    if (r->error) ui->n_failed++;
    else if (r->interrupted) ui->n_interrupted++;
    else ui->n_done++;
    if (opt->json) {
        print_json(c, r);
    } else if (conversation_remote(c)) {
        fprintf(stderr, "k3: turn %d: %s: ttft %.0f ms, %d tokens at %.2f tok/s, inter-token p50 %.1f ms p90 %.1f ms, "
                "%.1f kB/s%s%s\n", r->turn, conversation_remote_model(c), r->ttft_ms, r->generated_tokens,
                r->decode_tok_s, r->itl_p50_ms, r->itl_p90_ms, r->net_bytes_s / 1e3,
                r->interrupted ? " (interrupted)" : "", r->error ? " (failed; the partial answer is kept)" : "");
        print_remote_figures(c);
    } else {
        fprintf(stderr, "k3: turn %d: prefilled %d tokens in %.0f ms, ttft %.0f ms, %d tokens at %.2f tok/s%s\n",
                r->turn, r->prefilled_tokens, r->prefill_ms, r->ttft_ms, r->generated_tokens, r->decode_tok_s,
                r->interrupted ? " (interrupted)" : r->context_full ? " (context full)"
                : r->length_limit ? " (length limit reached: -n raises it)"
                : r->loop_period ? " (stopped: the answer repeated itself)" : "");
    }
    if (r->context_full)
        fprintf(stderr, "k3: the context is full: start a new conversation (or raise --ctx)\n");
    turn_result_free(r);
    return 0;
}

/* Run one / command line; returns 1 to quit, -1 on a fatal error. A
 * command that said no error counts as done (for the exit code); turns it
 * runs (/retry, /edit) count themselves in report_turn. */
static int run_command_counted(chat_cmd_ctx *x, const plain_options *opt, int tty, plain_ui *ui, const char *line);
static int run_command(chat_cmd_ctx *x, const plain_options *opt, int tty, plain_ui *ui, const char *line)
{
    int failed_before = ui->n_failed, done_before = ui->n_done + ui->n_interrupted;
    int q = run_command_counted(x, opt, tty, ui, line);
    if (ui->n_failed == failed_before && ui->n_done + ui->n_interrupted == done_before) ui->n_done++;
    return q;
}

/* The command itself (run_command counts it). */
static int run_command_counted(chat_cmd_ctx *x, const plain_options *opt, int tty, plain_ui *ui, const char *line)
{
    char args[4096];
    conversation *c = x->conv;
    const chat_command *cmd = chat_command_parse(x, line, args, sizeof args);
    if (!cmd) return 0;
    turn_result r;
    k3_error err;
    int t;
    switch (cmd->run(x, args)) {
    case CHAT_ACT_NONE: return 0;
    case CHAT_ACT_QUIT: return 1;
    case CHAT_ACT_HELP: print_help(); return 0;
    case CHAT_ACT_CLEAR:                 /* k3's meaning, with where ollama's /clear is */
        if (isatty(STDOUT_FILENO)) fputs("\033[H\033[2J", stdout);
        fflush(stdout);
        fprintf(stderr, "screen cleared; the conversation goes on (/new starts an empty one, as ollama's /clear)\n");
        return 0;
    case CHAT_ACT_STATS: print_stats(c); return 0;
    case CHAT_ACT_RAW: fprintf(stderr, "k3: line mode always prints answers as the model wrote them\n"); return 0;
    case CHAT_ACT_REASONING:
        fprintf(stderr, "k3: line mode prints the reasoning whole as it streams, between [reasoning] and [/reasoning]\n");
        return 0;
    case CHAT_ACT_NEW: fprintf(stderr, "k3: new conversation\n"); return 0;
    case CHAT_ACT_RESUME: {
        int from_snapshot = 0;
        int rr = conversation_resume(c, args, plain_show_progress, NULL, &from_snapshot, &err);
        if (rr == 1) {                     /* not resumed: the current conversation goes on */
            fprintf(stderr, "k3: %s\n", err.msg);
            ui->n_failed++;
            return 0;
        }
        if (rr) {
            fprintf(stderr, "k3: %s\n", err.msg);
            ui->n_failed++;
            if (conversation_start(c, x->system, &err)) return -1;
            fprintf(stderr, "k3: started a new conversation instead\n");
            return 0;
        }
        fprintf(stderr, "k3: resumed conversation %s (%d turns%s)\n", conversation_uid(c), conversation_turns(c),
                from_snapshot ? ", from its state snapshot" : "");
        return 0;
    }
    case CHAT_ACT_UNDO:
        t = conversation_undo(c, plain_show_progress, NULL, &err);
        if (t) { fprintf(stderr, "k3: %s\n", err.msg); ui->n_failed++; }
        else if (!conversation_session(c)) fprintf(stderr, "k3: the last exchange was undone\n");   /* a server keeps no state here */
        else fprintf(stderr, "k3: the last exchange was undone (%d tokens of state kept)\n",
                     k3_session_n_tokens(conversation_session(c)));
        return t < 0 ? -1 : 0;
    case CHAT_ACT_RETRY:
        interrupted = 0;
        generating = 1;
        stream_begin(ui);
        t = conversation_retry(c, &interrupted, stream_text, ui, &r, &err);
        generating = 0;
        return report_turn(c, opt, ui, t, &r, &err);
    case CHAT_ACT_EDIT: {
        if (!tty) fprintf(stderr, "k3: /edit: the next line replaces the last message\n");
        char *text = line_input_edit(tty, "edit> ", x->edit_text);
        free(x->edit_text);
        x->edit_text = NULL;
        if (!text) return 1;
        if (!*text) { free(text); fprintf(stderr, "k3: /edit: nothing sent\n"); ui->n_failed++; return 0; }
        interrupted = 0;
        generating = 1;
        stream_begin(ui);
        t = conversation_edit(c, text, &interrupted, stream_text, ui, &r, &err);
        generating = 0;
        free(text);
        return report_turn(c, opt, ui, t, &r, &err);
    }
    }
    return 0;
}

int plain_chat_run(conversation *c, history *db, const plain_options *opt)
{
    plain_ui ui = {.json = opt->json, .in_reasoning = 0,
                   .model = conversation_session(c) ? k3_session_model(conversation_session(c)) : NULL};
    if (opt->stream) conversation_set_token_observer(c, stream_token);
    conversation_set_reasoning_fn(c, stream_reasoning);
    int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int typed = isatty(STDIN_FILENO);     /* else a pipe or a file: only known commands are commands */
    int whole_stdin = !isatty(STDIN_FILENO) && !opt->lines;
    multiline ml = {0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, NULL);
    if (tty) fprintf(stderr, "k3 chat: conversation %s. /help lists commands; Ctrl-C stops an answer; Ctrl-D quits.\n",
                     *conversation_uid(c) ? conversation_uid(c) : "(new)");
    k3_model_info info = {0};
    if (ui.model) k3_model_get_info(ui.model, &info);   /* no local model behind a remote endpoint */
    if (info.random_weights)              /* said once, on stderr, whatever the mode */
        fprintf(stderr, "k3: %s has random weights (k3 gen): its answers are noise; k3 help models says how to get "
                        "a real one\n", opt->model_dir ? opt->model_dir : "this model");
    chat_cmd_ctx x = {.conv = c, .db = db, .model = ui.model, .model_dir = opt->model_dir,
                      .system = opt->system ? strdup(opt->system) : NULL, .say = say, .ui = &ui};
    line_input_open(tty);
    int rc = 0;
    char *input;
    int stdin_done = 0;
    while (!stdin_done && (input = whole_stdin ? read_all_stdin() : line_input_read(tty, ml.open ? "... " : "> "))) {
        stdin_done = whole_stdin;
        /* several piped lines are one message; one line is what it would be typed (a command too) */
        int as_text = whole_stdin && strchr(input, '\n');
        char *line = input;
        if (!whole_stdin) {                 /* """ blocks: collect until closed */
            int mrc = multiline_feed(&ml, input, &line);
            free(input);
            if (mrc <= 0) continue;
        }
        if (!*line) { free(line); continue; }
        if (!opt->raw && !as_text && chat_is_command(line) && (typed || chat_command_find(line))) {
            int q = run_command(&x, opt, tty, &ui, line);
            free(line);
            if (q < 0) rc = 1;
            if (q || terminated) break;
            continue;
        }
        stream_begin(&ui);
        turn_result r;
        k3_error err;
        interrupted = 0;
        generating = 1;
        int doubled_slash = !opt->raw && !as_text && line[0] == '/' && line[1] == '/';   /* "//x" sends "/x" */
        int t = conversation_turn(c, doubled_slash ? line + 1 : line, &interrupted, stream_text, &ui, &r, &err);
        generating = 0;
        free(line);
        if (report_turn(c, opt, &ui, t, &r, &err)) { rc = 1; break; }
        if (terminated) break;
    }
    if (ml.open) {
        fprintf(stderr, "k3: input ended inside a \"\"\" block; that message was not sent\n");
        ui.n_failed++;
    }
    multiline_free(&ml);
    if (terminated) rc = 143;
    line_input_close(tty);
    free(x.system);
    free(x.edit_text);
    if (*conversation_uid(c))
        fprintf(stderr, "k3: conversation saved; resume with: %s --resume %s\n", opt->resume_hint, conversation_uid(c));
    else
        fprintf(stderr, "k3: no message sent, nothing saved\n");
    /* the exit code tells a script whether everything it sent was answered */
    if (rc == 0 && (ui.n_failed || (!typed && !ui.n_done && !ui.n_interrupted))) rc = PLAIN_EXIT_NOT_ANSWERED;
    else if (rc == 0 && ui.n_interrupted) rc = 130;
    return rc;
}
