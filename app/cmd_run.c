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
#include <unistd.h>
#include "cli.h"
#include "remote_cli.h"
#include "generate.h"
#include "k3.h"
#include "k3_util.h"
#include "options.h"

/* The command's own lines; the options come from the table. */
static void usage(FILE *f)
{
    fprintf(f, "usage: k3 run [MODEL] -p TEXT [options]\n       CMD | k3 run [MODEL] [-p INSTRUCTION] [options]\n\n");
    cli_print_options(f, OPTS_RUN | OPTS_ALL);
    fprintf(f, "With --endpoint the prompt goes, as one user message, to an OpenAI-compatible server:\n");
    cli_print_options(f, OPTS_REMOTE);
    fprintf(f, "Text goes to stdout, statistics to stderr. Stops at the end-of-message token, [EOS] or [EOT].\n");
}

/* The prompt as `llm` takes it: -p TEXT, --prompt-file FILE (- is stdin),
 * or piped stdin alone; -p with piped text is the instruction, a blank
 * line, then the text (`cat notes.txt | k3 run -p "summarise"`). 0 and a
 * malloc'd *text_out, or the exit code after a one-line error. */
static int gather_prompt(const char *prompt, const char *prompt_file, char **text_out, size_t *len_out)
{
    if (prompt && prompt_file) {
        cli_error("run: give one of -p TEXT or --prompt-file FILE, not both (piped stdin goes after -p TEXT)");
        return K3_EXIT_USAGE;
    }
    if (prompt_file && strcmp(prompt_file, "-"))
        return (*text_out = cli_read_file(prompt_file, K3_MAX_PROMPT_BYTES, len_out)) ? K3_EXIT_OK : K3_EXIT_ERROR;
    int use_stdin = prompt_file || cli_stdin_has_text();
    if (!use_stdin && !prompt) {
        cli_error("run: no prompt: give -p TEXT or --prompt-file FILE, or pipe the text in (echo hi | k3 run)");
        return K3_EXIT_USAGE;
    }
    size_t piped_len = 0;
    char *piped = use_stdin ? cli_read_stdin(K3_MAX_PROMPT_BYTES, &piped_len) : NULL;
    if (use_stdin && !piped) return K3_EXIT_ERROR;
    while (piped_len && (piped[piped_len - 1] == '\n' || piped[piped_len - 1] == '\r')) piped[--piped_len] = 0;
    if (!prompt) {
        if (!piped_len) {
            cli_error("run: stdin is empty: nothing to answer");
            free(piped);
            return K3_EXIT_USAGE;
        }
        *text_out = piped;
        *len_out = piped_len;
        return K3_EXIT_OK;
    }
    size_t prompt_len = strlen(prompt), len = prompt_len + (piped_len ? 2 + piped_len : 0);
    char *text = malloc(len + 1);
    if (!text) { cli_error("run: out of memory"); free(piped); return K3_EXIT_ERROR; }
    memcpy(text, prompt, prompt_len);
    if (piped_len) {
        memcpy(text + prompt_len, "\n\n", 2);
        memcpy(text + prompt_len + 2, piped, piped_len);
    }
    text[len] = 0;
    free(piped);
    *text_out = text;
    *len_out = len;
    return K3_EXIT_OK;
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
    const char *prompt_file = set.run.prompt_file, *system = set.system;
    const int chat = set.run.chat;
    const char *think = cli_think_effort(set.think);
    if (think && !chat) {
        cli_error("run: --think renders a chat: use it with --chat");
        return K3_EXIT_USAGE;
    }
    const remote_cli remote_opt = set.remote;
    size_t prompt_len = 0;
    char *prompt_text = NULL;
    int prompt_rc = gather_prompt(set.run.prompt, prompt_file, &prompt_text, &prompt_len);
    if (prompt_rc) return prompt_rc;
    const char *prompt = prompt_text;
    if (remote_opt.endpoint) {   /* an OpenAI-compatible server instead of a local model */
        if (think) {
            cli_error("run: --think is for a local Kimi K3 model: an endpoint's server decides how its model thinks");
            free(prompt_text);
            return K3_EXIT_USAGE;
        }
        if (model_dir) {
            cli_error("run: give either MODEL or --endpoint URL, not both");
            free(prompt_text);
            return K3_EXIT_USAGE;
        }
        const int given = set.sampling_given;   /* only what was typed goes to the server */
        int rc = run_remote(&remote_opt, prompt, system, chat, (int)set.max_new,
                            given & 1 ? set.sampler.temperature : -1, given & 4 ? set.sampler.top_p : 0,
                            given & 16 ? (long long)set.sampler.seed : -1);
        free(prompt_text);
        return rc;
    }
    if (!model_dir) model_dir = cli_default_model();
    char model_dir_buf[4096];
    model_dir = cli_model_dir(model_dir, model_dir_buf, sizeof model_dir_buf);   /* a path, or a name: k3-mini */
    if (!model_dir) { free(prompt_text); return K3_EXIT_ERROR; }

    k3_error err;
    k3_options opt = set.model;
    opt.need_tokenizer = 1;
    const long long max_new = set.max_new, ctx = set.model.ctx_tokens;
    k3_model *m = k3_model_open(model_dir, &opt, &err);
    if (!m) { cli_error("%s", err.msg); free(prompt_text); return K3_EXIT_ERROR; }
    cli_print_plan(m);
    const k3_tokenizer *tok = k3_model_tokenizer(m);
    int n_prompt = 0, *ids;
    if (chat) {
        k3_chat_msg msgs[2];
        int n_msgs = 0;
        if (system) msgs[n_msgs++] = (k3_chat_msg){"system", system, NULL};
        msgs[n_msgs++] = (k3_chat_msg){"user", prompt, NULL};
        ids = k3_model_render_chat_think(m, msgs, n_msgs, 1, think, &n_prompt, &err);
        if (!ids) cli_error("%s: %s", prompt_file ? prompt_file : "prompt", err.msg);
    } else {
        ids = k3_tokenizer_encode(tok, prompt, prompt_len, 1, &n_prompt, &err);
        if (!ids) cli_error("%s: %s", prompt_file ? prompt_file : "prompt", err.msg);
    }
    free(prompt_text);
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
        int grc = think ? generate_thinking(s, &sp, stops, n_stops, (int)max_new, set.draft, &cli_interrupted,
                                            cli_print_reasoning, cli_print_answer, NULL, NULL, &res, &err)
                        : generate_answer(s, &sp, stops, n_stops, (int)max_new, set.draft, &cli_interrupted, cli_print_text,
                                          NULL, NULL, &res, &err);
        if (grc) {
            cli_error("%s", err.msg);
            rc = K3_EXIT_ERROR;
        }
        cli_close_reasoning();   /* it ended while thinking */
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
                : res.length_limit && res.think_open ? " (length limit reached while thinking: no answer; -n raises it)"
                : res.length_limit ? " (length limit reached: -n raises it)"
                : res.loop_period ? " (stopped: the answer repeated itself)" : "");
    }
    if (rc == K3_EXIT_OK && res.think_open && res.length_limit) rc = K3_EXIT_ERROR;   /* no answer at all */
    free(res.text);
    free(res.reasoning);
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
