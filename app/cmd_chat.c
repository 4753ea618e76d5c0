/* cmd_chat.c - `k3 chat`: parse options, open the model and the history
 * database, start or resume a conversation (chat/conversation.c) and hand it
 * to a front end: the curses UI on a terminal, the line-oriented one when
 * stdin or stdout is not a terminal or with --plain / --json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "remote_cli.h"
#include "history.h"
#include "k3.h"
#include "options.h"
#include "conversation.h"
#include "plain.h"
#include "tui.h"
#include "chat_front_end.h"

typedef struct chat_options {
    const char *model_dir, *db_path, *resume, *system;
    int json, plain, raw, max_new, ctx, lines, stream;
    int draft;                   /* --draft (chat/draft.h) */
    const char *think;           /* --think: NULL = off */
    int sampling_given;          /* bits temp 1, top-k 2, top-p 4, min-p 8, seed 16: typed, so they override a resumed conversation's */
    k3_options model;
    k3_sampler sampler;
    char model_args[512];        /* the model options as typed (--mem 2G ...), for the resume hint */
    remote_cli remote;           /* --endpoint: an OpenAI-compatible server (cmd_chat_remote.c) */
    int model_given;             /* MODEL was on the command line */
} chat_options;

/* The command's own paragraph; the option lines come from the table. */
static void usage(FILE *f)
{
    fprintf(f, "usage: k3 chat [MODEL] [options]\n\n"
               "A multi-turn conversation: each line is one user message (a line starting with \"\"\" opens a\n"
               "multi-line message, a line ending with \"\"\" sends it); state is kept between turns and\n"
               "every conversation is stored (k3 history lists them).\n");
    cli_print_options(f, OPTS_CHAT | OPTS_ALL);
    fprintf(f, "Ctrl-C stops an answer (kept, marked interrupted); Ctrl-C at the prompt or Ctrl-D exits.\n"
               "Exit codes: 0 every message answered, 1 error, 2 usage, 3 (without a terminal) a message not\n"
               "answered, a command that failed or nothing to answer, 130 an answer cut by Ctrl-C (docs/COMMANDS.md).\n"
               "With --endpoint the answers come from an OpenAI-compatible server (the conversation is stored\n"
               "locally and records the server; --resume goes back to it):\n");
    cli_print_options(f, OPTS_REMOTE);
}

/* The table's rows of chat; the model options are also kept as typed, for
 * the resume hint. */
static int parse_options(int argc, char **argv, chat_options *o)
{
    memset(o, 0, sizeof *o);
    cli_settings set;
    cli_settings_defaults(&set);
    set.max_new = 512;            /* a chat answer may run longer than `k3 run`'s default */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int first = i;
        int mo = cli_parse_option(argc, argv, &i, OPTS_MODEL, &set);
        if (mo < 0) return -1;
        if (mo) {                         /* model options go into the resume hint */
            for (int j = first; j <= i; j++) {
                size_t l = strlen(o->model_args);
                snprintf(o->model_args + l, sizeof o->model_args - l, " %s", argv[j]);
            }
            continue;
        }
        int so = cli_parse_option(argc, argv, &i, OPTS_CONTEXT | OPTS_GENERATE | OPTS_CHAT | OPTS_REMOTE, &set);
        if (so < 0) return -1;
        if (so) continue;
        if (a[0] == '-') {
            cli_error("chat: unknown option '%s' (see k3 chat --help)", a);
            return -1;
        } else if (!o->model_dir) {
            o->model_dir = a;
            o->model_given = 1;
        } else {
            cli_error("chat: unexpected argument '%s'", a);
            return -1;
        }
    }
    o->remote = set.remote;
    o->resume = set.chat.resume;
    o->db_path = set.db_path;
    o->system = set.system;
    o->plain = set.chat.plain;
    o->json = set.json;
    o->lines = set.chat.lines;
    o->stream = set.chat.stream;
    o->raw = set.chat.raw;
    if (!o->model_dir) o->model_dir = cli_default_model();
    if (set.max_new < 1) {
        cli_error("chat: -n must be at least 1");
        return -1;
    }
    o->model = set.model;
    o->sampler = set.sampler;
    o->max_new = set.max_new;
    o->draft = set.draft;
    o->think = cli_think_effort(set.think);
    o->ctx = set.model.ctx_tokens;
    o->sampling_given = set.sampling_given;
    if (o->resume && o->system) {
        cli_error("chat: --system applies to a new conversation; a resumed one keeps the system prompt it began with "
                  "(drop --system, or start a new conversation)");
        return -1;
    }
    if (o->stream && !o->json) {
        cli_error("chat: --stream prints JSON per token: use it with --json");
        return -1;
    }
    return 0;
}

int cmd_chat(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    chat_options o;
    if (parse_options(argc, argv, &o)) return K3_EXIT_USAGE;
    char *rec_endpoint = NULL, *rec_model = NULL;
    if (!o.remote.endpoint && o.resume && !o.model_given &&
        chat_remote_backend_of(o.db_path, o.resume, &rec_endpoint, &rec_model) == 0 && rec_endpoint[0]) {
        o.remote.endpoint = rec_endpoint;   /* the conversation's own server */
        if (!o.remote.model) o.remote.model = rec_model;
    }
    if (o.remote.endpoint) {
        if (o.think) {
            cli_error("chat: --think is for a local Kimi K3 model: an endpoint's server decides how its model thinks");
            return K3_EXIT_USAGE;
        }
        if (o.model_given) { cli_error("chat: give either MODEL or --endpoint URL, not both"); return K3_EXIT_USAGE; }
        int rrc = chat_remote_run(&o.remote, o.db_path, o.resume, o.system, o.json, o.plain, o.lines, o.raw,
                                  o.max_new, &o.sampler, o.sampling_given);
        free(rec_endpoint);
        free(rec_model);
        return rrc;
    }
    free(rec_endpoint);
    free(rec_model);
    char model_dir_buf[4096];
    o.model_dir = cli_model_dir(o.model_dir, model_dir_buf, sizeof model_dir_buf);   /* a path, or a name: k3-mini */
    if (!o.model_dir) return K3_EXIT_ERROR;
    k3_error err;
    history_error herr;
    o.model.need_tokenizer = 1;
    o.model.ctx_tokens = o.ctx;
    k3_model *m = k3_model_open(o.model_dir, &o.model, &err);
    if (!m) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
    cli_print_plan(m);
    int rc = K3_EXIT_ERROR;
    conversation *c = NULL;
    history *db = history_open(o.db_path, 0, &herr);
    if (!db) {
        cli_error("%s", herr.msg);
        goto out;
    }
    if (!(c = conversation_create(m, db, o.model_dir, &o.sampler, o.max_new, o.ctx, &err))) {
        cli_error("%s", err.msg);
        goto out;
    }
    conversation_set_draft(c, o.draft);
    if (conversation_set_think(c, o.think, &err) == 1) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (o.resume) {
        int from_snapshot = 0;
        if (conversation_resume(c, o.resume, plain_show_progress, NULL, &from_snapshot, &err)) {
            cli_error("%s", err.msg);
            goto out;
        }
        if (o.sampling_given) {                /* typed options win over the stored sampling */
            k3_sampler *sp = conversation_sampler(c), next = *sp;
            if (o.sampling_given & 1) next.temperature = o.sampler.temperature;
            if (o.sampling_given & 2) next.top_k = o.sampler.top_k;
            if (o.sampling_given & 4) next.top_p = o.sampler.top_p;
            if (o.sampling_given & 8) next.min_p = o.sampler.min_p;
            if (o.sampling_given & 16) next.seed = o.sampler.seed;
            int n_vocab = sp->n_vocab;
            k3_sampler_free(sp);
            *sp = next;
            if (k3_sampler_init(sp, n_vocab) || conversation_store_sampling(c, &err)) {
                cli_error("chat: setting the sampling: %s", err.msg);
                goto out;
            }
        }
        if (from_snapshot)
            fprintf(stderr, "k3: resumed conversation %s from its state snapshot (%d tokens, no re-prefill)\n",
                    conversation_uid(c), k3_session_n_tokens(conversation_session(c)));
    } else if (conversation_start(c, o.system, &err)) {
        cli_error("%s", err.msg);
        goto out;
    }
    /* a command that works as typed: this binary as found from here, and the
     * options the state depends on (memory budget, context) */
    char hint[5200], self[4096], ctx_arg[32] = "";
    cli_self_command(self, sizeof self);
    if (o.ctx != 4096) snprintf(ctx_arg, sizeof ctx_arg, " --ctx %d", o.ctx);
    snprintf(hint, sizeof hint, "%s chat %s%s%s%s%s", self, o.model_dir, o.model_args, ctx_arg, o.db_path ? " --db " : "",
             o.db_path ? o.db_path : "");
    plain_options popt = {.json = o.json, .raw = o.raw, .system = o.system, .resume_hint = hint,
                          .stream = o.stream, .lines = o.lines, .model_dir = o.model_dir};
    tui_options topt = {.model_dir = o.model_dir, .system = o.system, .resume_hint = hint};
    rc = chat_front_end_run(c, m, db, o.plain, o.json, &topt, &popt);
out:
    conversation_free(c);
    if (db) history_close(db);
    k3_error ferr;
    if (k3_model_finish(m, &ferr)) { cli_error("%s", ferr.msg); if (rc == K3_EXIT_OK) rc = K3_EXIT_ERROR; }
    k3_model_close(m);
    return rc;
}
