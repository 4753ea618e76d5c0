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

/* The command's own paragraph; the option lines come from the table. */
static void usage(FILE *f)
{
    fprintf(f, "usage: k3 serve [MODEL] [options]\n\n"
               "An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (stream or\n"
               "not), GET /v1/models, /health, /metrics (Prometheus). One generation at a time; others wait.\n"
               "--ctx is the context limit of a request, prompt + answer.\n\n");
    cli_print_options(f, OPTS_SERVE | OPTS_CONTEXT | OPTS_MODEL);
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

/* Where --mem goes, said once at start: the engine's share by use, the kept
 * prompt states, and what requests may hold (bodies and parses, bounded). */
static void print_memory_plan(serve *sv, uint64_t budget_bytes, uint64_t request_bytes)
{
    k3_stats st;
    k3_stats_read(sv->model, &st);
    const double mib = 1048576.0;
    char budget[64];
    if (budget_bytes) snprintf(budget, sizeof budget, "--mem %.0f MiB", budget_bytes / mib);
    else snprintf(budget, sizeof budget, "no --mem budget");
    fprintf(stderr,
            "k3 serve: memory plan (%s): engine: trunk %.1f MiB, ring %.1f MiB, expert cache %.1f MiB, state %.1f MiB, "
            "other %.1f MiB; state cache (prompt-state reuse) %.1f MiB in at most %d entries%s; requests %.1f MiB "
            "(%d bodies of --max-body %.1f MiB in flight, %d parses at once); connections %d, %u per address, "
            "a request must arrive within %d s\n",
            budget, st.pinned_trunk_bytes / mib, st.ring_bytes / mib, st.expert_cache_bytes / mib, st.state_bytes / mib,
            st.other_bytes / mib, sv->state_cache_bytes / mib, sv->state_cache_entries,
            sv->state_cache_bytes ? " (--state-cache 0 gives it to the expert cache)" : "", request_bytes / mib,
            SERVE_BODIES_IN_FLIGHT, sv->max_body_bytes / mib, SERVE_PARSE_SLOTS, sv->queue_max + 32,
            sv->per_address_limit, sv->request_timeout_s);
}

/* The engine's "use --mem NM or more" counts its own share only: say the
 * whole --mem that leaves it that much beside the requests' reserve and
 * (when on) the state cache's quarter. */
static void say_whole_budget(k3_error *err, uint64_t budget_bytes, uint64_t request_bytes, int state_cache_on)
{
    const char *at = strstr(err->msg, "use --mem ");
    unsigned long long engine_mib = at ? strtoull(at + 10, NULL, 10) : 0;
    if (!budget_bytes || !engine_mib || !strstr(at, "M or more")) return;
    const unsigned long long whole_mib =
        (request_bytes + 1048575) / 1048576 + (state_cache_on ? (engine_mib * 4 + 2) / 3 : engine_mib) + 1;
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n,
             " for the engine; k3 serve also sets aside %.1f MiB for requests%s: use --mem %lluM or more",
             request_bytes / 1048576.0, state_cache_on ? " and a quarter of the rest for the state cache" : "",
             whole_mib);
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    const char *model_dir = NULL;
    cli_settings set;
    cli_settings_defaults(&set);
    int n_args;
    if (cli_parse_args("serve", argc, argv, OPTS_SERVE | OPTS_CONTEXT | OPTS_MODEL, &set, &model_dir, 1, &n_args))
        return K3_EXIT_USAGE;
    const cli_serve_settings *so = &set.serve;
    const char *host = so->host, *key_env = so->key_env, *name = so->model_name;
    const int ctx = set.model.ctx_tokens;
    uint64_t state_cache = so->state_cache_bytes;
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
    char model_dir_buf[4096];
    if (!(model_dir = cli_model_dir(model_dir, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;
    k3_options opt = set.model;
    opt.need_tokenizer = 1;
    const uint64_t budget_bytes = opt.mem_bytes;
    const uint64_t request_bytes = serve_request_reserve_bytes((size_t)so->max_body_bytes);
    if (opt.mem_bytes)   /* the requests are counted against --mem (too little: the engine says how much) */
        opt.mem_bytes = opt.mem_bytes > request_bytes + (1u << 20) ? opt.mem_bytes - request_bytes : 1u << 20;
    if (opt.mem_bytes && state_cache) {
        if (state_cache * 4 > opt.mem_bytes) state_cache = opt.mem_bytes / 4;
        opt.mem_bytes -= state_cache;
    }
    static serve sv;   /* lives as long as the process; connection threads point at it */
    k3_error err;
    sv.model = k3_model_open(model_dir, &opt, &err);
    if (!sv.model) {
        say_whole_budget(&err, budget_bytes, request_bytes, state_cache > 0);
        cli_error("%s", err.msg);
        return K3_EXIT_ERROR;
    }
    if (name) snprintf(sv.model_name, sizeof sv.model_name, "%s", name);
    else {
        size_t n = strlen(model_dir);
        while (n > 1 && model_dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && model_dir[b - 1] != '/') b--;
        snprintf(sv.model_name, sizeof sv.model_name, "%.*s", (int)(n - b), model_dir + b);
    }
    sv.api_key = key;
    sv.ctx_tokens = ctx;
    sv.max_tokens_limit = so->max_tokens < ctx - 1 ? so->max_tokens : ctx - 1;
    sv.queue_max = so->queue;
    sv.n_threads = opt.n_threads;
    sv.max_body_bytes = (size_t)so->max_body_bytes;
    sv.state_cache_bytes = (size_t)state_cache;
    sv.state_cache_entries = so->state_cache_entries;
    sv.verbose = !so->quiet;
    sv.draft = set.draft;
    sv.think = cli_think_effort(set.think);
    if (sv.think && !k3_model_can_think(sv.model)) {
        cli_error("serve: --think %s: this model has no thinking mode (only Kimi K3 models think)", sv.think);
        k3_model_close(sv.model);
        return K3_EXIT_ERROR;
    }
    sv.request_timeout_s = so->request_timeout_s;
    sv.per_address_limit = (unsigned)(so->queue + 32) / 2 > 4 ? (unsigned)(so->queue + 32) / 2 : 4;
    sv.body_bytes_cap = SERVE_BODIES_IN_FLIGHT * (size_t)so->max_body_bytes;
    print_memory_plan(&sv, budget_bytes, request_bytes);
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
    int rc = serve_http_run(&sv, host, so->port, &stop_requested, &err);
    if (rc) {
        cli_error("%s", err.msg);
        serve_engine_stop(&sv);
    }
    k3_model_close(sv.model);
    return rc ? K3_EXIT_ERROR : K3_EXIT_OK;
}
