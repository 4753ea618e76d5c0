/* cmd_chat.c - `k3 chat`: a multi-turn conversation kept in the engine
 * between turns and stored in the history database as it happens.
 *
 * This file is the line-oriented front end ("plain" mode): each line of
 * stdin is one user message (read with GNU readline when stdin is a
 * terminal), the answer streams to stdout, statistics go to stderr, and
 * --json prints one JSON object per turn instead. The session keeps the KDA
 * states and the MLA cache, so turn N prefills only its own tokens. After
 * each answer the state is snapshotted next to the database; --resume
 * restores it (or re-prefills the stored transcript when the snapshot is
 * missing, from another model, or damaged). */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "generate.h"
#include "history/history.h"
#include "line_input.h"
#include "k3.h"

static volatile sig_atomic_t interrupted, generating;

/* Ctrl-C stops an answer at a token boundary; at the prompt it exits. */
static void on_sigint(int sig)
{
    (void)sig;
    if (generating) {
        interrupted = 1;
    } else {
        static const char nl[] = "\n";
        ssize_t w = write(STDERR_FILENO, nl, 1);
        (void)w;
        _exit(K3_EXIT_INTERRUPTED);
    }
}

typedef struct chat_options {
    const char *model_dir, *db_path, *resume, *system;
    int json, max_new, ctx, threads;
    k3_sampler sampler;
} chat_options;

typedef struct chat_state {
    chat_options opt;
    k3_model *model;
    k3_session *session;
    history *db;
    history_conversation conv;
    int turn;
    int im_end;                  /* id closing every message */
    int stops[8], n_stops;
    int resumed_from_snapshot;
} chat_state;

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 chat [MODEL] [options]\n\n"
               "A multi-turn conversation: each line is one user message; state is kept between turns\n"
               "and every conversation is stored (k3 history lists them).\n"
               "  --resume ID|last     continue a stored conversation (from its state snapshot when valid)\n"
               "  --system TEXT        system message for a new conversation\n"
               "  --db FILE            history database (default $XDG_DATA_HOME/k3/history.db)\n"
               "  --plain              line mode (the default when stdin or stdout is not a terminal)\n"
               "  --json               one JSON object per turn on stdout instead of the text\n"
               "  -n, --max-tokens N   answer length limit (default 512)\n"
               "  --ctx N              context limit in tokens (default 4096)\n"
               "  --temp T --top-k K --top-p P --min-p P --seed S   sampling, as in k3 run\n"
               "  --threads N          compute threads\n"
               "Ctrl-C stops an answer (kept, marked interrupted); Ctrl-C at the prompt or Ctrl-D exits.\n");
}

static int parse_options(int argc, char **argv, chat_options *o)
{
    long long v;
    double d;
    memset(o, 0, sizeof *o);
    o->max_new = 512;
    o->ctx = 4096;
    o->sampler.temperature = 0;
    o->sampler.top_p = 1;
    o->sampler.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--resume") && more) o->resume = argv[++i];
        else if (!strcmp(a, "--system") && more) o->system = argv[++i];
        else if (!strcmp(a, "--db") && more) o->db_path = argv[++i];
        else if (!strcmp(a, "--plain")) continue;
        else if (!strcmp(a, "--json")) o->json = 1;
        else if ((!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) && more) {
            if (cli_parse_int(a, argv[++i], 1, 1 << 24, &v)) return -1;
            o->max_new = (int)v;
        } else if (!strcmp(a, "--ctx") && more) {
            if (cli_parse_int(a, argv[++i], 16, 1 << 24, &v)) return -1;
            o->ctx = (int)v;
        } else if (!strcmp(a, "--threads") && more) {
            if (cli_parse_int(a, argv[++i], 1, 1024, &v)) return -1;
            o->threads = (int)v;
        } else if (!strcmp(a, "--top-k") && more) {
            if (cli_parse_int(a, argv[++i], 0, 1 << 24, &v)) return -1;
            o->sampler.top_k = (int)v;
        } else if (!strcmp(a, "--seed") && more) {
            if (cli_parse_int(a, argv[++i], 0, INT64_MAX, &v)) return -1;
            o->sampler.seed = (uint64_t)v;
        } else if (!strcmp(a, "--temp") && more) {
            if (cli_parse_float(a, argv[++i], 0, 100, &d)) return -1;
            o->sampler.temperature = (float)d;
        } else if (!strcmp(a, "--top-p") && more) {
            if (cli_parse_float(a, argv[++i], 0, 1, &d)) return -1;
            o->sampler.top_p = (float)d;
        } else if (!strcmp(a, "--min-p") && more) {
            if (cli_parse_float(a, argv[++i], 0, 1, &d)) return -1;
            o->sampler.min_p = (float)d;
        } else if (a[0] == '-') {
            cli_error("chat: unknown option or missing value '%s' (see k3 chat --help)", a);
            return -1;
        } else if (!o->model_dir) {
            o->model_dir = a;
        } else {
            cli_error("chat: unexpected argument '%s'", a);
            return -1;
        }
    }
    if (!o->model_dir) o->model_dir = cli_default_model();
    return 0;
}

/* The sampling parameters as stored with the conversation. */
static char *sampling_json(const k3_sampler *sp)
{
    json_t *o = json_pack("{s:f,s:i,s:f,s:f,s:I}", "temperature", (double)sp->temperature, "top_k",
                          sp->top_k, "top_p", (double)sp->top_p, "min_p", (double)sp->min_p, "seed",
                          (json_int_t)sp->seed);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* Snapshot the session after a completed turn (temp file, fsync, rename, row). */
static void save_snapshot(chat_state *cs, int64_t message_id)
{
    history_error herr;
    k3_error err;
    char *tmp = NULL;
    if (history_snapshot_begin(cs->db, &tmp, &herr)) {
        cli_error("warning: no state snapshot: %s", herr.msg);
        return;
    }
    if (k3_session_save(cs->session, tmp, &err)) {
        cli_error("warning: no state snapshot: %s", err.msg);
        history_snapshot_discard(cs->db, tmp);
        free(tmp);
        return;
    }
    history_snapshot_key key = {cs->conv.id, message_id, k3_session_n_tokens(cs->session),
                                k3_model_fingerprint(cs->model), K3_SESSION_FORMAT_VERSION};
    if (history_snapshot_commit(cs->db, tmp, &key, &herr) < 0)
        cli_error("warning: no state snapshot: %s", herr.msg);
    free(tmp);
}

/* Rebuild the session from the stored transcript: every message rendered
 * and closed, as the turns had left it. */
static int reprefill(chat_state *cs, history_message *msgs, size_t n)
{
    k3_chat_msg *cm = calloc(n + 1, sizeof *cm);
    int nm = 0;
    if (!cm) return -1;
    if (cs->conv.system_prompt && *cs->conv.system_prompt) cm[nm++] = (k3_chat_msg){"system", cs->conv.system_prompt};
    for (size_t i = 0; i < n; i++)
        if (strcmp(msgs[i].role, "system")) cm[nm++] = (k3_chat_msg){msgs[i].role, msgs[i].content};
    char emsg[512];
    int n_ids = 0;
    int *ids = nm ? k3_chat_render_kimi(k3_model_tokenizer(cs->model), cm, nm, 0, &n_ids, emsg, sizeof emsg) : NULL;
    free(cm);
    if (nm && !ids) { cli_error("resume: %s", emsg); return -1; }
    if (n_ids > k3_session_max_tokens(cs->session)) {
        cli_error("resume: the stored conversation has %d tokens, more than --ctx %d", n_ids,
                  k3_session_max_tokens(cs->session));
        free(ids);
        return -1;
    }
    k3_error err;
    double t0 = generate_now_s();
    int rc = 0;
    for (int done = 0; done < n_ids && rc == 0;) {
        int step = n_ids - done < 256 ? n_ids - done : 256;
        rc = k3_session_eval(cs->session, ids + done, step, NULL, &err);
        done += step;
        fprintf(stderr, "\rk3: re-prefilling the conversation: %d/%d tokens", done, n_ids);
    }
    if (n_ids) fprintf(stderr, " (%.1f s)\n", generate_now_s() - t0);
    if (rc) cli_error("resume: %s", err.msg);
    free(ids);
    return rc;
}

/* Continue a stored conversation: snapshot if valid, else re-prefill. */
static int resume(chat_state *cs)
{
    history_error herr;
    if (history_conv_find(cs->db, cs->opt.resume, &cs->conv, &herr)) {
        cli_error("%s", herr.msg);
        return -1;
    }
    history_message *msgs = NULL;
    size_t n = 0;
    if (history_msg_list(cs->db, cs->conv.id, &msgs, &n, &herr)) { cli_error("%s", herr.msg); return -1; }
    for (size_t i = 0; i < n; i++) cs->turn += !strcmp(msgs[i].role, "user");
    history_snapshot snap;
    int found = history_snapshot_latest(cs->db, cs->conv.id, k3_model_fingerprint(cs->model),
                                        K3_SESSION_FORMAT_VERSION, &snap, &herr);
    int ok = 0;
    if (found == 1) {
        k3_error err;
        if (n == 0 || snap.message_id != msgs[n - 1].id)
            fprintf(stderr, "k3: snapshot is older than the last message; re-prefilling\n");
        else if (history_snapshot_verify(&snap, &herr))
            fprintf(stderr, "k3: snapshot unusable (%s); re-prefilling\n", herr.msg);
        else if (k3_session_load(cs->session, snap.path, &err))
            fprintf(stderr, "k3: snapshot unusable (%s); re-prefilling\n", err.msg);
        else
            ok = 1;
        history_snapshot_free(&snap);
    } else if (n) {
        fprintf(stderr, "k3: no snapshot for this model; re-prefilling\n");
    }
    int rc = 0;
    if (ok) {
        cs->resumed_from_snapshot = 1;
        fprintf(stderr, "k3: resumed conversation %s from its snapshot (%d tokens, no re-prefill)\n",
                cs->conv.uid, k3_session_n_tokens(cs->session));
    } else {
        k3_session_reset(cs->session);
        rc = reprefill(cs, msgs, n);
    }
    history_msg_list_free(msgs, n);
    return rc;
}

static void stream_text(void *user, const char *text, size_t len)
{
    chat_state *cs = user;
    if (cs->opt.json) return;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* One turn: commit the user message, prefill its tokens, stream the answer,
 * commit the answer, close the turn in the session and snapshot. */
static int chat_turn(chat_state *cs, const char *line)
{
    history_error herr;
    k3_error err;
    const k3_tokenizer *tok = k3_model_tokenizer(cs->model);
    char emsg[512];
    /* the new tokens: (system on the first turn) + user message + generation prompt */
    k3_chat_msg msgs[2];
    int nm = 0;
    if (k3_session_n_tokens(cs->session) == 0 && cs->conv.system_prompt && *cs->conv.system_prompt)
        msgs[nm++] = (k3_chat_msg){"system", cs->conv.system_prompt};
    msgs[nm++] = (k3_chat_msg){"user", line};
    int n_ids = 0;
    int *ids = k3_chat_render_kimi(tok, msgs, nm, 1, &n_ids, emsg, sizeof emsg);
    if (!ids) { cli_error("message not sent: %s", emsg); return 0; }
    int used = k3_session_n_tokens(cs->session), limit = k3_session_max_tokens(cs->session);
    if (used + n_ids + 1 > limit) {
        cli_error("message not sent: it needs %d tokens but only %d of the context limit %d are left "
                  "(start a new chat or raise --ctx)", n_ids, limit - used - 1, limit);
        free(ids);
        return 0;
    }
    history_message um = history_message_make("user", line, HISTORY_COMPLETE);
    um.prompt_tokens = n_ids;
    if (history_msg_add(cs->db, cs->conv.id, &um, &herr) < 0) {
        cli_error("%s", herr.msg);
        free(ids);
        return -1;
    }
    cs->turn++;
    interrupted = 0;
    generating = 1;
    double t0 = generate_now_s();
    int rc = k3_session_eval(cs->session, ids, n_ids, NULL, &err);
    double prefill_s = generate_now_s() - t0;
    free(ids);
    generate_result res = {0};
    if (rc == 0)
        rc = generate_answer(cs->session, &cs->opt.sampler, cs->stops, cs->n_stops, cs->opt.max_new,
                             &interrupted, stream_text, cs, &res, &err);
    generating = 0;
    if (rc) cli_error("%s", err.msg);
    if (!cs->opt.json) { fputc('\n', stdout); fflush(stdout); }
    double ttft_ms = (prefill_s + res.first_token_s) * 1e3;
    double decode_tok_s = res.n_generated > 1 ? (res.n_generated - 1) / res.decode_s : 0;
    history_message am = history_message_make("assistant", res.text ? res.text : "",
                                              rc ? HISTORY_ERROR : interrupted ? HISTORY_INTERRUPTED
                                                                               : HISTORY_COMPLETE);
    am.prompt_tokens = n_ids;
    am.generated_tokens = res.n_generated;
    am.ttft_ms = ttft_ms;
    am.prefill_ms = prefill_s * 1e3;
    am.decode_ms = res.decode_s * 1e3;
    int64_t am_id = history_msg_add(cs->db, cs->conv.id, &am, &herr);
    if (am_id < 0) cli_error("%s", herr.msg);
    if (cs->opt.json) {
        json_t *o = json_pack("{s:s,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:s}", "conversation_id", cs->conv.uid,
                              "turn", cs->turn, "prefilled_tokens", n_ids, "generated_tokens",
                              res.n_generated, "ttft_ms", ttft_ms, "decode_tok_s", decode_tok_s,
                              "resumed_from_snapshot", cs->resumed_from_snapshot, "status",
                              history_status_name(am.status), "text", res.text ? res.text : "");
        char *line_out = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        printf("%s\n", line_out);
        fflush(stdout);
        free(line_out);
        json_decref(o);
    } else {
        fprintf(stderr, "k3: turn %d: prefilled %d tokens (%.1f tok/s), ttft %.0f ms, %d tokens at %.2f tok/s%s\n",
                cs->turn, n_ids, n_ids / (prefill_s > 0 ? prefill_s : 1e-9), ttft_ms, res.n_generated,
                decode_tok_s, interrupted ? " (interrupted)" : res.context_full ? " (context full)" : "");
    }
    /* close the turn in the session: the pending token and <|im_end|> */
    int close_ids[2], n_close = 0;
    if (res.pending_token >= 0) close_ids[n_close++] = res.pending_token;
    close_ids[n_close++] = cs->im_end;
    if (k3_session_n_tokens(cs->session) + n_close <= limit && rc == 0 &&
        k3_session_eval(cs->session, close_ids, n_close, NULL, &err) == 0) {
        if (am_id > 0) save_snapshot(cs, am_id);
    } else if (rc == 0) {
        cli_error("the context is full (%d tokens): start a new chat (or raise --ctx)", limit);
    }
    free(res.text);
    interrupted = 0;
    return rc ? -1 : 0;
}

int cmd_chat(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    chat_state cs;
    memset(&cs, 0, sizeof cs);
    if (parse_options(argc, argv, &cs.opt)) return K3_EXIT_USAGE;
    k3_error err;
    history_error herr;
    k3_options kopt = {.n_threads = cs.opt.threads, .need_tokenizer = 1};
    cs.model = k3_model_open(cs.opt.model_dir, &kopt, &err);
    if (!cs.model) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
    int rc = K3_EXIT_ERROR;
    k3_model_info info;
    k3_model_get_info(cs.model, &info);
    cs.im_end = k3_tokenizer_special_id(k3_model_tokenizer(cs.model), "<|im_end|>");
    cs.n_stops = k3_model_stop_ids(cs.model, cs.stops, 8);
    if (cs.im_end < 0) { cli_error("%s: tokenizer has no <|im_end|> token", cs.opt.model_dir); goto out; }
    if (!(cs.session = k3_session_new(cs.model, cs.opt.ctx, &err))) { cli_error("%s", err.msg); goto out; }
    if (k3_sampler_init(&cs.opt.sampler, info.vocab_size)) { cli_error("out of memory"); goto out; }
    if (!(cs.db = history_open(cs.opt.db_path, 0, &herr))) { cli_error("%s", herr.msg); goto out; }
    if (cs.opt.resume) {
        if (resume(&cs)) goto out;
    } else {
        char *sj = sampling_json(&cs.opt.sampler);
        history_conversation fields = {.model_path = (char *)cs.opt.model_dir,
                                       .model_fingerprint = (char *)k3_model_fingerprint(cs.model),
                                       .system_prompt = (char *)cs.opt.system, .sampling_json = sj};
        int64_t id = history_conv_create(cs.db, &fields, &cs.conv, &herr);
        free(sj);
        if (id < 0) { cli_error("%s", herr.msg); goto out; }
    }
    signal(SIGINT, on_sigint);
    int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (tty) fprintf(stderr, "k3 chat: conversation %s on %s. Ctrl-D or Ctrl-C at the prompt quits.\n",
                     cs.conv.uid, cs.opt.model_dir);
    rc = K3_EXIT_OK;
    char *line;
    line_input_open(tty);
    while ((line = line_input_read(tty, "> "))) {
        int r = *line ? chat_turn(&cs, line) : 0;
        free(line);
        if (r) { rc = K3_EXIT_ERROR; break; }
    }
    line_input_close(tty);
    fprintf(stderr, "k3: conversation saved; resume with: k3 chat %s --resume %s%s%s\n", cs.opt.model_dir,
            cs.conv.uid, cs.opt.db_path ? " --db " : "", cs.opt.db_path ? cs.opt.db_path : "");
out:
    if (cs.db) history_close(cs.db);
    history_conv_free(&cs.conv);
    k3_sampler_free(&cs.opt.sampler);
    k3_session_free(cs.session);
    k3_model_close(cs.model);
    return rc;
}
