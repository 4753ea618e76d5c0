/* cmd_run_remote.c - `k3 run --endpoint URL` and `k3 bench --endpoint URL`:
 * the same prompt and figures as the local commands, against any
 * OpenAI-compatible server, so a local streaming run and a cluster can be
 * compared side by side (TTFT, tokens/s, inter-token percentiles). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "options.h"
#include "remote.h"
#include "remote_cli.h"

const char *remote_cli_key(const remote_cli *o, int *bad)
{
    *bad = 0;
    if (!o->api_key_env) return NULL;
    const char *k = getenv(o->api_key_env);
    if (!k || !*k) {
        cli_error("--api-key-env %s: the variable is not set or empty", o->api_key_env);
        *bad = 1;
    }
    return k;
}

static void print_notice(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "k3: %s\n", line);
}

remote *remote_cli_open(const remote_cli *o, const char *key)
{
    k3_error err;
    remote *r = remote_open(o->endpoint, key, &err);
    if (!r) { cli_error("%s", err.msg); return NULL; }
    if (o->ca_cert && remote_set_ca_cert(r, o->ca_cert, &err)) {
        cli_error("%s", err.msg);
        remote_close(r);
        return NULL;
    }
    return r;
}

/* Open the endpoint and settle the model name. */
static remote *open_remote(const remote_cli *o, char *model, size_t len)
{
    int bad;
    const char *key = remote_cli_key(o, &bad);
    if (bad) return NULL;
    k3_error err;
    remote *r = remote_cli_open(o, key);
    if (!r) return NULL;
    if (remote_pick_model(r, o->model, model, len, &err)) {
        cli_error("%s", err.msg);
        remote_close(r);
        return NULL;
    }
    return r;
}

static remote_params params_of(const remote_cli *o, int max_new, double temp, double top_p, long long seed)
{
    return (remote_params){.temperature = temp, .top_p = top_p, .seed = seed, .max_tokens = max_new,
                           .timeout_s = o->timeout_s, .max_retries = o->retries};
}

/* A rate the run could see, or why not. */
static void format_rate(const remote_result *res, char *out, size_t len)
{
    if (res->tok_s > 0) snprintf(out, len, "%.2f tok/s%s", res->tok_s, res->tok_s_from_server ? " (the server's timing)" : "");
    else snprintf(out, len, "tok/s not measurable (the answer came in %d pieces)", res->n_chunks + res->n_reasoning_chunks);
}

int run_remote(const remote_cli *o, const char *prompt, const char *system, int chat, int max_new, double temp,
               double top_p, long long seed)
{
    char model[256];
    remote *r = open_remote(o, model, sizeof model);
    if (!r) return K3_EXIT_ERROR;
    k3_chat_msg msgs[2];
    int n = 0;
    if (system) msgs[n++] = (k3_chat_msg){"system", system, NULL};
    msgs[n++] = (k3_chat_msg){"user", prompt, NULL};
    remote_params p = params_of(o, max_new, temp, top_p, seed);
    p.on_reasoning = cli_print_reasoning;
    cli_catch_sigint();
    remote_result res;
    k3_error err;
    int rc = chat || system
                 ? remote_chat(r, model, msgs, n, &p, &cli_interrupted, cli_print_answer, print_notice, NULL, &res, &err)
                 : remote_complete(r, model, prompt, &p, &cli_interrupted, cli_print_answer, print_notice, NULL, &res, &err);
    cli_close_reasoning();
    fputc('\n', stdout);
    fflush(stdout);
    if (rc) cli_error("%s", err.msg);
    char rate[96];
    format_rate(&res, rate, sizeof rate);
    if (!rc || res.n_chunks) fprintf(stderr, "k3: %s (%s): prompt %d tokens (%d cached); ttft %.0f ms; generated %d tokens, %s; "
                    "inter-token p50 %.1f ms p90 %.1f ms; %llu bytes%s\n",
            remote_url(r), model, res.prompt_tokens, res.cached_tokens > 0 ? res.cached_tokens : 0, res.ttft_ms,
            res.completion_tokens >= 0 ? res.completion_tokens : res.n_chunks + res.n_reasoning_chunks, rate,
            res.itl_p50_ms, res.itl_p90_ms, (unsigned long long)res.bytes_in, res.interrupted ? " (interrupted)" : "");
    const int out_of_tokens = !rc && res.length_in_reasoning;
    if (out_of_tokens)
        cli_error("%s (%s): the answer ran out of tokens while still reasoning (finish_reason length, %d reasoning "
                  "pieces, no answer): raise -n", remote_url(r), model, res.n_reasoning_chunks);
    const int interrupted = res.interrupted;
    remote_result_free(&res);
    remote_close(r);
    return rc || out_of_tokens ? K3_EXIT_ERROR : interrupted ? K3_EXIT_INTERRUPTED : K3_EXIT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int bench_remote(const remote_cli *o, int n_requests, int max_new, const char *prompt, int json)
{
    char model[256];
    remote *r = open_remote(o, model, sizeof model);
    if (!r) return K3_EXIT_ERROR;
    cli_catch_sigint();
    double *ttft = calloc((size_t)n_requests, sizeof *ttft), *p50 = calloc((size_t)n_requests, sizeof *p50);
    double *p90 = calloc((size_t)n_requests, sizeof *p90), tok_s_sum = 0;
    int done = 0, tokens = 0, rc = K3_EXIT_OK, n_rates = 0;   /* n_rates: requests whose rate could be measured */
    for (int i = 0; i < n_requests && !cli_interrupted && ttft && p50 && p90; i++) {
        k3_chat_msg msg = {"user", prompt, NULL};
        remote_params p = params_of(o, max_new, -1, 0, -1);   /* the server's own sampling defaults */
        remote_result res;
        k3_error err;
        if (remote_chat(r, model, &msg, 1, &p, &cli_interrupted, NULL, print_notice, NULL, &res, &err)) {
            cli_error("%s", err.msg);
            remote_result_free(&res);
            rc = K3_EXIT_ERROR;
            break;
        }
        ttft[done] = res.ttft_ms;
        p50[done] = res.itl_p50_ms;
        p90[done] = res.itl_p90_ms;
        if (res.tok_s > 0) { tok_s_sum += res.tok_s; n_rates++; }
        tokens += res.completion_tokens >= 0 ? res.completion_tokens : res.n_chunks;
        done++;
        char rate[96];
        format_rate(&res, rate, sizeof rate);
        if (!json)
            fprintf(stderr, "k3 bench: request %d: ttft %.1f ms, %s, inter-token p50 %.2f ms p90 %.2f ms\n", i + 1,
                    res.ttft_ms, rate, res.itl_p50_ms, res.itl_p90_ms);
        remote_result_free(&res);
    }
    if (done) {
        qsort(ttft, (size_t)done, sizeof *ttft, cmp_double);
        qsort(p50, (size_t)done, sizeof *p50, cmp_double);
        qsort(p90, (size_t)done, sizeof *p90, cmp_double);
        double t50 = ttft[(done - 1) / 2], t90 = ttft[(int)((done - 1) * 0.9)];
        char rate_json[48] = "null", rate_text[96];
        if (n_rates) {
            snprintf(rate_json, sizeof rate_json, "%.3f", tok_s_sum / n_rates);
            snprintf(rate_text, sizeof rate_text, "%.2f tok/s (mean of the %d requests with a measurable rate)",
                     tok_s_sum / n_rates, n_rates);
        } else {
            snprintf(rate_text, sizeof rate_text, "tok/s not measurable (every answer came in one or two pieces)");
        }
        if (json)
            printf("{\"endpoint\":\"%s\",\"model\":\"%s\",\"requests\":%d,\"tokens\":%d,\"ttft_ms_p50\":%.2f,"
                   "\"ttft_ms_p90\":%.2f,\"tok_s\":%s,\"tok_s_requests\":%d,\"itl_ms_p50\":%.3f,\"itl_ms_p90\":%.3f}\n",
                   remote_url(r), model, done, tokens, t50, t90, rate_json, n_rates, p50[(done - 1) / 2],
                   p90[(done - 1) / 2]);
        else
            printf("%s (%s): %d requests, %d tokens: TTFT p50 %.1f ms p90 %.1f ms; %s; inter-token p50 %.2f ms "
                   "p90 %.2f ms (medians over requests)\n",
                   remote_url(r), model, done, tokens, t50, t90, rate_text, p50[(done - 1) / 2], p90[(done - 1) / 2]);
    }
    free(ttft);
    free(p50);
    free(p90);
    remote_close(r);
    return cli_interrupted ? K3_EXIT_INTERRUPTED : rc;
}

/* `k3 bench --endpoint URL`: its own options (no model is loaded). */
int cmd_bench_remote(int argc, char **argv)
{
    cli_settings set;
    cli_settings_defaults(&set);
    int n_args;
    if (cli_parse_args("bench", argc, argv, OPTS_REMOTE | OPTS_BENCH_REMOTE, &set, NULL, 0, &n_args))
        return K3_EXIT_USAGE;
    const cli_bench_remote_settings *b = &set.bench_remote;
    return bench_remote(&set.remote, b->requests, b->tokens, b->prompt, set.json);
}
