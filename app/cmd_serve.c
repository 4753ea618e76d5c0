/* cmd_serve.c - `k3 serve MODEL`: the OpenAI-compatible server (serve.h).
 *
 * Safe by default: it listens on 127.0.0.1; another address needs an API
 * key, read from an environment variable (never from the command line,
 * where `ps` shows it). The kept prompt states (--state-cache) come out of
 * the --mem budget, so the process stays within what it was given. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "options.h"
#include "serve.h"

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) { (void)sig; stop_requested = 1; }

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 serve [MODEL] [options]\n\n"
               "An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (stream or\n"
               "not), GET /v1/models, /health, /metrics (Prometheus). One generation at a time; others wait.\n\n"
               "  --host ADDR          address to listen on (default 127.0.0.1); any other than loopback\n"
               "                       needs --api-key-env\n"
               "  --port N             port (default 8080; 0 = any free port, printed on stderr)\n"
               "  --api-key-env VAR    require 'Authorization: Bearer $VAR' on every endpoint but /health\n"
               "  --model-name NAME    the model id clients send (default: the directory's name)\n"
               "  --ctx N              context limit in tokens, prompt + answer (default 4096)\n"
               "  --max-tokens N       largest max_tokens a request may ask (default 4096)\n"
               "  --queue N            requests that may wait; past it 429 (default 16)\n"
               "  --max-body SIZE      largest request body (default 1M)\n"
               "  --state-cache SIZE   memory for kept prompt states (state reuse; default 256M, 0 = off);\n"
               "                       taken out of --mem when a budget is given\n"
               "  --state-cache-entries N   at most N kept states (default 8)\n"
               "  --quiet              no per-request log line on stderr\n");
    cli_print_options(f, OPTS_MODEL);
}

/* 1 if host is a loopback address (127.0.0.0/8, ::1) or "localhost". */
static int is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost")) return 1;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    const char *model_dir = NULL, *host = "127.0.0.1", *key_env = NULL, *name = NULL;
    long long port = 8080, ctx = 4096, max_tokens = 4096, queue = 16, entries = 8;
    int64_t max_body = 1 << 20, state_cache = 256ll << 20;
    int quiet = 0;
    cli_settings set;
    cli_settings_defaults(&set);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        int mo = cli_parse_option(argc, argv, &i, OPTS_MODEL, &set);
        if (mo < 0) return K3_EXIT_USAGE;
        if (mo) continue;
        if (!strcmp(a, "--host") && more) host = argv[++i];
        else if (!strcmp(a, "--api-key-env") && more) key_env = argv[++i];
        else if (!strcmp(a, "--model-name") && more) name = argv[++i];
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--port") && more) {
            if (cli_parse_int(a, argv[++i], 0, 65535, &port)) return K3_EXIT_USAGE;
        } else if (!strcmp(a, "--ctx") && more) {
            if (cli_parse_int(a, argv[++i], 2, 1 << 24, &ctx)) return K3_EXIT_USAGE;
        } else if (!strcmp(a, "--max-tokens") && more) {
            if (cli_parse_int(a, argv[++i], 1, 1 << 24, &max_tokens)) return K3_EXIT_USAGE;
        } else if (!strcmp(a, "--queue") && more) {
            if (cli_parse_int(a, argv[++i], 0, 1024, &queue)) return K3_EXIT_USAGE;
        } else if (!strcmp(a, "--state-cache-entries") && more) {
            if (cli_parse_int(a, argv[++i], 1, SERVE_STATE_SLOTS, &entries)) return K3_EXIT_USAGE;
        } else if ((!strcmp(a, "--max-body") || !strcmp(a, "--state-cache")) && more) {
            const char *v = argv[++i];
            int64_t b = strcmp(v, "0") ? k3_parse_size(v) : 0;
            if (b < 0 || (b == 0 && !strcmp(a, "--max-body"))) {
                cli_error("%s: expected a size such as 1M, got '%s'", a, v);
                return K3_EXIT_USAGE;
            }
            if (!strcmp(a, "--max-body")) max_body = b;
            else state_cache = b;
        } else if (a[0] == '-') { cli_error("serve: unknown option or missing value '%s' (see k3 serve --help)", a); return K3_EXIT_USAGE; }
        else if (!model_dir) model_dir = a;
        else { cli_error("serve: unexpected argument '%s'", a); return K3_EXIT_USAGE; }
    }
    const char *key = NULL;
    if (key_env) {
        key = getenv(key_env);
        if (!key || !*key) { cli_error("serve: --api-key-env %s: the variable is not set or empty", key_env); return K3_EXIT_USAGE; }
    }
    if (!is_loopback(host) && !key) {
        cli_error("serve: --host %s is not a loopback address: give --api-key-env VAR so that only holders of the key "
                  "can use it", host);
        return K3_EXIT_USAGE;
    }
    if (!model_dir) model_dir = cli_default_model();
    k3_options opt = set.model;
    opt.need_tokenizer = 1;
    if (opt.mem_bytes && state_cache) {
        if ((uint64_t)state_cache * 4 > opt.mem_bytes) state_cache = (int64_t)(opt.mem_bytes / 4);
        opt.mem_bytes -= (uint64_t)state_cache;
    }
    opt.ctx_tokens = (int)ctx;
    static serve sv;   /* lives as long as the process; connection threads point at it */
    k3_error err;
    sv.model = k3_model_open(model_dir, &opt, &err);
    if (!sv.model) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
    if (name) snprintf(sv.model_name, sizeof sv.model_name, "%s", name);
    else {
        size_t n = strlen(model_dir);
        while (n > 1 && model_dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && model_dir[b - 1] != '/') b--;
        snprintf(sv.model_name, sizeof sv.model_name, "%.*s", (int)(n - b), model_dir + b);
    }
    sv.api_key = key;
    sv.ctx_tokens = (int)ctx;
    sv.max_tokens_limit = (int)(max_tokens < ctx - 1 ? max_tokens : ctx - 1);
    sv.queue_max = (int)queue;
    sv.n_threads = opt.n_threads;
    sv.max_body_bytes = (size_t)max_body;
    sv.state_cache_bytes = (size_t)state_cache;
    sv.state_cache_entries = (int)entries;
    sv.verbose = !quiet;
    sv.draft = set.draft;
    static const double ttft_s[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
    static const double tok_s[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
    static const double e2e_s[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
    serve_hist_init(&sv.ttft, ttft_s, 13);
    serve_hist_init(&sv.itl, tok_s, 13);
    serve_hist_init(&sv.e2e, e2e_s, 12);
    if (serve_engine_start(&sv, &err)) { cli_error("%s", err.msg); k3_model_close(sv.model); return K3_EXIT_ERROR; }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = serve_http_run(&sv, host, (int)port, &stop_requested, &err);
    if (rc) {
        cli_error("%s", err.msg);
        serve_engine_stop(&sv);
    }
    k3_model_close(sv.model);
    return rc ? K3_EXIT_ERROR : K3_EXIT_OK;
}
