/* plain.c - see plain.h. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "line_input.h"
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
} plain_ui;

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

int plain_chat_run(conversation *c, int json, const char *resume_hint)
{
    plain_ui ui = {json};
    int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (tty) fprintf(stderr, "k3 chat: conversation %s. Ctrl-C stops an answer; Ctrl-D quits.\n",
                     conversation_uid(c));
    line_input_open(tty);
    int rc = 0;
    char *line;
    while ((line = line_input_read(tty, "> "))) {
        if (!*line) { free(line); continue; }
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
        if (r.error && r.error_msg[0])      /* a remote failure: one line, the conversation goes on */
            fprintf(stderr, "k3: %s\n", r.error_msg);
        if (json) {
            print_json(c, &r);
        } else if (conversation_remote(c)) {
            fprintf(stderr, "k3: turn %d: %s: ttft %.0f ms, %d tokens at %.2f tok/s, inter-token p50 %.1f ms p90 %.1f ms, "
                    "%.1f kB/s%s%s\n", r.turn, conversation_remote_model(c), r.ttft_ms, r.generated_tokens,
                    r.decode_tok_s, r.itl_p50_ms, r.itl_p90_ms, r.net_bytes_s / 1e3,
                    r.interrupted ? " (interrupted)" : "", r.error ? " (failed; the partial answer is kept)" : "");
        } else {
            fprintf(stderr, "k3: turn %d: prefilled %d tokens in %.0f ms, ttft %.0f ms, %d tokens at %.2f tok/s%s\n",
                    r.turn, r.prefilled_tokens, r.prefill_ms, r.ttft_ms, r.generated_tokens, r.decode_tok_s,
                    r.interrupted ? " (interrupted)" : r.context_full ? " (context full)" : "");
        }
        if (r.context_full)
            fprintf(stderr, "k3: the context is full: start a new conversation (or raise --ctx)\n");
        turn_result_free(&r);
    }
    line_input_close(tty);
    fprintf(stderr, "k3: conversation saved; resume with: %s --resume %s\n", resume_hint, conversation_uid(c));
    return rc;
}
