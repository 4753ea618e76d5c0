/* remote_cli.h - the --endpoint side of `k3 run` and `k3 bench`
 * (chat/remote.h does the talking). */
#ifndef K3_REMOTE_CLI_H
#define K3_REMOTE_CLI_H

/* The options every --endpoint command shares (rows of options.c, group
 * OPTS_REMOTE; defaults from there). */
typedef struct remote_cli {
    const char *endpoint;        /* NULL = local engine */
    const char *model;           /* --model NAME (NULL = the server's first) */
    const char *api_key_env;     /* --api-key-env VAR */
    const char *ca_cert;         /* --ca-cert FILE: the CA of an https:// server (else the system's) */
    int timeout_s;               /* --timeout S */
    int retries;                 /* --retries N: retries of a 429 */
} remote_cli;

struct remote;
/* remote_open with the options' key and CA; NULL after printing one line. */
struct remote *remote_cli_open(const remote_cli *o, const char *key);
/* The key from the named variable: NULL if none asked; "" + message if unset. */
const char *remote_cli_key(const remote_cli *o, int *bad);

/* `k3 run --endpoint`: chat 1 (--chat, or a system prompt) sends a chat
 * request, else a raw completion. temp < 0, top_p <= 0 and seed < 0 are
 * not sent (the user did not set them). */
int run_remote(const remote_cli *o, const char *prompt, const char *system, int chat, int max_new, double temp,
               double top_p, long long seed);
/* `k3 bench --endpoint URL [--requests N] [--tokens N] [--prompt TEXT] [--json]`
 * (the OPTS_REMOTE and OPTS_BENCH_REMOTE rows). */
int cmd_bench_remote(int argc, char **argv);

/* cmd_chat_remote.c: the backend a stored conversation recorded ("" = local). */
int chat_remote_backend_of(const char *db_path, const char *ref, char **endpoint, char **model);
struct k3_sampler;
/* sampling_given: options.h's bits of the sampling typed (only those are sent). */
int chat_remote_run(const remote_cli *ro, const char *db_path, const char *resume, const char *system, int json,
                    int plain, int lines, int raw, int max_new, const struct k3_sampler *sampler, int sampling_given);

#endif
