/* cmd_chat_remote.c - `k3 chat --endpoint URL`: the same conversation,
 * store and line front end as a local chat, the answers from an
 * OpenAI-compatible server (chat/remote.h), in the full-screen view on a
 * terminal (its gauges show the server's figures) or the line mode. A conversation records its
 * server, so `k3 chat --resume ID` goes back to it; `--resume` with
 * another backend re-sends the transcript. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "conversation.h"
#include "history.h"
#include "plain.h"
#include "remote.h"
#include "remote_cli.h"
#include "tui.h"
#include "chat_front_end.h"

int chat_remote_backend_of(const char *db_path, const char *ref, char **endpoint, char **model)
{
    history_error herr;
    *endpoint = *model = NULL;
    history *db = history_open(db_path, 0, &herr);
    if (!db) return -1;
    history_conversation row;
    int rc = -1;
    if (history_conv_find(db, ref, &row, &herr) == 0) {
        rc = history_conv_get_backend(db, row.id, endpoint, model, &herr);
        history_conv_free(&row);
    }
    history_close(db);
    return rc;
}

int chat_remote_run(const remote_cli *ro, const char *db_path, const char *resume, const char *system, int json,
                    int plain, int lines, int raw, int max_new, const k3_sampler *sampler, int sampling_given)
{
    int bad;
    const char *key = remote_cli_key(ro, &bad);
    if (bad) return K3_EXIT_USAGE;
    k3_error err;
    history_error herr;
    remote *r = remote_cli_open(ro, key);
    if (!r) return K3_EXIT_ERROR;
    char model[256];
    if (remote_pick_model(r, ro->model, model, sizeof model, &err)) {
        cli_error("%s", err.msg);
        remote_close(r);
        return K3_EXIT_ERROR;
    }
    int rc = K3_EXIT_ERROR;
    conversation *c = NULL;
    history *db = history_open(db_path, 0, &herr);
    if (!db) { cli_error("%s", herr.msg); goto out; }
    c = conversation_create_remote(r, model, db, sampler, max_new, ro->timeout_s, ro->retries, &err);
    if (!c) { cli_error("%s", err.msg); goto out; }
    conversation_set_remote_sampling_given(c, sampling_given);
    if (resume ? conversation_resume(c, resume, NULL, NULL, NULL, &err) != 0 : conversation_start(c, system, &err) != 0) {
        cli_error("%s", err.msg);
        goto out;
    }
    if (resume) fprintf(stderr, "k3: resumed conversation %s against %s (%s): the transcript is re-sent each turn\n",
                        conversation_uid(c), remote_url(r), model);
    char hint[2400];
    snprintf(hint, sizeof hint, "k3 chat --endpoint %s --model %s%s%s%s%s%s%s", remote_url(r), model, db_path ? " --db " : "",
             db_path ? db_path : "", ro->api_key_env ? " --api-key-env " : "", ro->api_key_env ? ro->api_key_env : "",
             ro->ca_cert ? " --ca-cert " : "", ro->ca_cert ? ro->ca_cert : "");
    plain_options popt = {.json = json, .raw = raw, .lines = lines, .system = system, .resume_hint = hint};
    tui_options topt = {.model_dir = remote_url(r), .system = system, .resume_hint = hint};
    rc = chat_front_end_run(c, NULL, db, plain, json, &topt, &popt);   /* the full screen, as for a local model */
out:
    conversation_free(c);
    if (db) history_close(db);
    remote_close(r);
    return rc;
}
