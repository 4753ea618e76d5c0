/* cmd_run.c - `k3 run`: generate text from a prompt.
 *
 * The answer streams to stdout as it is produced (whole UTF-8 characters
 * only); timings go to stderr: prompt tokens, prompt tok/s, time to first
 * token, decode tok/s. Ctrl-C stops generation at a token boundary and still
 * prints the stats (exit code 130). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "remote_cli.h"
#include "generate.h"
#include "k3.h"
#include "options.h"

/* The command's own lines; the options come from the table. */
static void usage(FILE *f)
{
    fprintf(f, "usage: k3 run [MODEL] -p TEXT [options]\n\n");
    cli_print_options(f, OPTS_RUN | OPTS_ALL);
    fprintf(f, "With --endpoint the prompt goes, as one user message, to an OpenAI-compatible server:\n");
    cli_print_options(f, OPTS_REMOTE);
    fprintf(f, "Text goes to stdout, statistics to stderr. Stops at the end-of-message token, [EOS] or [EOT].\n");
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    const char *model_dir = NULL;
    cli_settings set;
    cli_settings_defaults(&set);
    int n_args;
    if (cli_parse_args("run", argc, argv, OPTS_RUN | OPTS_ALL | OPTS_REMOTE, &set, &model_dir, 1, &n_args))
        return K3_EXIT_USAGE;
    const char *prompt = set.run.prompt, *prompt_file = set.run.prompt_file, *system = set.system;
    const int chat = set.run.chat;
    const remote_cli remote_opt = set.remote;
    if (!prompt == !prompt_file) {
        cli_error("run: give exactly one of -p TEXT or --prompt-file FILE");
        return K3_EXIT_USAGE;
    }
    if (remote_opt.endpoint) {   /* an OpenAI-compatible server instead of a local model */
        if (model_dir) { cli_error("run: give either MODEL or --endpoint URL, not both"); return K3_EXIT_USAGE; }
        size_t text_len;
        char *text = prompt_file ? cli_read_file(prompt_file, K3_MAX_PROMPT_BYTES, &text_len) : NULL;
        if (prompt_file && !text) return K3_EXIT_ERROR;
        const int given = set.sampling_given;   /* only what was typed goes to the server */
        int rc = run_remote(&remote_opt, text ? text : prompt, system, chat, (int)set.max_new,
                            given & 1 ? set.sampler.temperature : -1, given & 4 ? set.sampler.top_p : 0,
                            given & 16 ? (long long)set.sampler.seed : -1);
        free(text);
        return rc;
    }
    if (!model_dir) model_dir = cli_default_model();
    char model_dir_buf[4096];
    model_dir = cli_model_dir(model_dir, model_dir_buf, sizeof model_dir_buf);   /* .../config.json means its directory */
    char *file_text = NULL;
    size_t prompt_len;
    if (prompt_file) {
        if (!(file_text = cli_read_file(prompt_file, K3_MAX_PROMPT_BYTES, &prompt_len))) return K3_EXIT_ERROR;
        prompt = file_text;
    } else {
        prompt_len = strlen(prompt);
    }

    k3_error err;
    k3_options opt = set.model;
    opt.need_tokenizer = 1;
    const long long max_new = set.max_new, ctx = set.model.ctx_tokens;
    k3_model *m = k3_model_open(model_dir, &opt, &err);
    if (!m) { cli_error("%s", err.msg); free(file_text); return K3_EXIT_ERROR; }
    cli_print_plan(m);
    const k3_tokenizer *tok = k3_model_tokenizer(m);
    int n_prompt = 0, *ids;
    if (chat) {
        k3_chat_msg msgs[2];
        int n_msgs = 0;
        if (system) msgs[n_msgs++] = (k3_chat_msg){"system", system};
        msgs[n_msgs++] = (k3_chat_msg){"user", prompt};
        ids = k3_model_render_chat(m, msgs, n_msgs, 1, &n_prompt, &err);
        if (!ids) cli_error("%s: %s", prompt_file ? prompt_file : "prompt", err.msg);
    } else {
        ids = k3_tokenizer_encode(tok, prompt, prompt_len, 1, &n_prompt, &err);
        if (!ids) cli_error("%s: %s", prompt_file ? prompt_file : "prompt", err.msg);
    }
    free(file_text);
    if (!ids) { k3_model_close(m); return K3_EXIT_ERROR; }
    if (n_prompt == 0) { cli_error("run: the prompt is empty"); free(ids); k3_model_close(m); return K3_EXIT_USAGE; }
    if (n_prompt + max_new > ctx) {
        cli_error("run: the prompt (%d tokens) plus -n %lld exceeds the context limit of %lld tokens (--ctx)",
                  n_prompt, max_new, ctx);
        free(ids);
        k3_model_close(m);
        return K3_EXIT_ERROR;
    }
    k3_session *s = k3_session_new(m, (int)ctx, &err);
    k3_model_info info;
    k3_model_get_info(m, &info);
    k3_sampler sp = set.sampler;
    if (!s || k3_sampler_init(&sp, info.vocab_size)) {
        cli_error("%s", s ? "out of memory" : err.msg);
        free(ids);
        k3_session_free(s);
        k3_model_close(m);
        return K3_EXIT_ERROR;
    }
    int stops[8], n_stops = k3_model_stop_ids(m, stops, 8);
    cli_catch_sigint();

    int rc = K3_EXIT_OK;
    double t0 = (k3_now_ns() / 1e9);
    generate_result res = {0};
    if (k3_session_eval(s, ids, n_prompt, NULL, &err)) {
        cli_error("%s", err.msg);
        rc = K3_EXIT_ERROR;
    } else {
        double prompt_s = (k3_now_ns() / 1e9) - t0;
        if (generate_answer(s, &sp, stops, n_stops, (int)max_new, set.draft, &cli_interrupted, cli_print_text, NULL, NULL, &res, &err)) {
            cli_error("%s", err.msg);
            rc = K3_EXIT_ERROR;
        }
        fputc('\n', stdout);
        fflush(stdout);
        char drafts[96] = "";
        if (res.n_drafted)
            snprintf(drafts, sizeof drafts, "; drafts %d of %d kept, %.2f tokens/pass", res.n_draft_kept, res.n_drafted,
                     res.n_passes ? (double)(res.n_generated - 1) / res.n_passes : 0.0);
        fprintf(stderr, "k3: prompt %d tokens, %.1f tok/s; ttft %.0f ms; generated %d tokens, %.2f tok/s (%.2f per CPU second)%s%s\n",
                n_prompt, n_prompt / (prompt_s > 0 ? prompt_s : 1e-9), (prompt_s + res.first_token_s) * 1e3,
                res.n_generated, res.n_generated > 1 ? (res.n_generated - 1) / res.decode_s : 0.0,
                res.n_generated > 1 && res.decode_cpu_s > 0 ? (res.n_generated - 1) / res.decode_cpu_s : 0.0, drafts,
                cli_interrupted ? " (interrupted)" : res.context_full ? " (context full)"
                : res.length_limit ? " (length limit reached: -n raises it)" : "");
    }
    free(res.text);
    free(res.ids);
    if (cli_interrupted && rc == K3_EXIT_OK) rc = K3_EXIT_INTERRUPTED;
    k3_sampler_free(&sp);
    free(ids);
    k3_session_free(s);
    k3_error ferr;
    if (k3_model_finish(m, &ferr)) { cli_error("%s", ferr.msg); if (rc == K3_EXIT_OK) rc = K3_EXIT_ERROR; }
    k3_model_close(m);
    return rc;
}
