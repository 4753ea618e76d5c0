/* options.h - the one table of command-line options: the model, runtime and
 * sampling options that several commands share (--mem, --io, --io-backend,
 * --io-depth, --cache-policy, --prefetch, --trace, --threads, --ctx, -n,
 * --temp, --top-k, --top-p, --min-p, --seed, --draft), the --endpoint options of the
 * remote commands, and each command's own (plan, serve, chat, run, eval,
 * bench, bench --endpoint, tokenize, history, gen, pack): name, type, default, bounds and help in one
 * row each, as in Redis's config table. The table feeds the parser, every
 * command's --help, `k3 help options` and docs/OPTIONS.md's list (checked by
 * tests/t_docs.sh); tests/t_options.sh checks that no command parses an
 * option outside it. */
#ifndef K3_OPTIONS_H
#define K3_OPTIONS_H

#include <stdio.h>
#include "k3.h"
#include "remote_cli.h"

/* Which rows a command accepts. */
enum {
    OPTS_MODEL = 1,      /* how the model is held and read: every model-loading command */
    OPTS_CONTEXT = 2,    /* --ctx: commands that keep a session */
    OPTS_GENERATE = 4,   /* -n and the sampler: commands that generate */
    OPTS_ALL = 7,
    OPTS_GEN = 8,        /* k3 gen: the synthetic checkpoint writer */
    OPTS_PACK = 16,      /* k3 pack: the packed layout writer */
    OPTS_PLAN = 32,      /* k3 plan: the prediction's own inputs */
    OPTS_SERVE = 64,     /* k3 serve: the HTTP server */
    OPTS_REMOTE = 128,   /* --endpoint and what goes with it: run, chat, bench */
    OPTS_CHAT = 256,     /* k3 chat: the conversation and its front end */
    OPTS_RUN = 512,      /* k3 run: the prompt */
    OPTS_EVAL = 1024,    /* k3 eval: ids in, logits out */
    OPTS_BENCH_REMOTE = 2048,  /* k3 bench --endpoint: the requests */
    OPTS_TOKENIZE = 4096,      /* k3 tokenize: what to encode or decode */
    OPTS_HISTORY = 8192,       /* k3 history and its subcommands */
    OPTS_BENCH = 16384         /* k3 bench on a local model */
};

/* What `k3 gen` options set. */
typedef struct cli_gen_settings {
    const char *preset;      /* NULL until given: required */
    uint64_t seed;
    int f32;                 /* --dtype f32 */
    int shards;
    const char *tokenizer_corpus;   /* --tokenizer-corpus FILE: only a tokenizer, learned from FILE */
    int n_base;              /* --n-base N: its base vocabulary (N - 256 merges) */
    int force;               /* --force: write into a non-empty OUT_DIR (a model k3 gen wrote) */
} cli_gen_settings;

/* What `k3 pack` options set (copied into k3_pack_opts). */
typedef struct cli_pack_settings {
    int force, progress;
    long long buffer_mib;
    double throttle_mb_s;    /* 0 = unlimited */
    int sample_tensors;
    const char *verify_dir;  /* --verify / --check DIR, or NULL */
    long long simulate_free_bytes;   /* -1 = not simulated */
    const char *trunk_type, *experts_type;   /* --trunk, --experts: a block type, or NULL */
} cli_pack_settings;

/* What `k3 plan` options set (--ctx, --threads, --trace, --cache-policy
 * come from the shared rows). */
typedef struct cli_plan_settings {
    double disk_gbps;        /* 0 = probe (--disk auto) */
    double trunk_gbps;       /* --disk-trunk; 0 = as --disk when given, else probe */
    int trunk_auto;          /* --disk-trunk auto: probe even when --disk is given */
    int prompt_tokens, cores, reprobe;
    const char *rates_path;  /* --rates FILE instead of this machine's probe */
    uint64_t fixed_bytes;    /* 0 = estimated */
} cli_plan_settings;

/* What `k3 serve` options set (--ctx is the shared row). */
typedef struct cli_serve_settings {
    const char *host, *key_env, *model_name;   /* model_name NULL = the directory's name */
    int port, max_tokens, queue, state_cache_entries, quiet;
    int request_timeout_s;   /* --request-timeout: a request's headers and body must arrive within it */
    uint64_t max_body_bytes, state_cache_bytes;
} cli_serve_settings;

/* What `k3 chat`'s own options set. */
typedef struct cli_chat_settings {
    const char *resume;
    int plain, lines, stream, raw;
} cli_chat_settings;

/* What `k3 run`'s own options set. */
typedef struct cli_run_settings {
    const char *prompt, *prompt_file;
    int chat;
} cli_run_settings;

/* What `k3 eval`'s own options set. */
typedef struct cli_eval_settings {
    const char *ids, *logits_path;
    const char *text_file;   /* --text-file: the ids of a text (needs the tokenizer) */
    const char *save_base;   /* --save-base: write a KL base file */
    const char *kl_base;     /* --kl-base: compare with a KL base file */
} cli_eval_settings;

/* What `k3 bench`'s own options set (on a local model). */
typedef struct cli_bench_settings {
    int tokens, prompt_tokens;
    int no_probe, no_token_by_token, no_resident, no_warm_prompt;
    double resident_s_per_token;   /* given instead of measured (0 = measure) */
    int draft_rounds;        /* rounds of the speculative decoding pass (0 = --no-draft) */
} cli_bench_settings;

/* What `k3 bench --endpoint` options set. */
typedef struct cli_bench_remote_settings {
    int requests, tokens;
    const char *prompt;
} cli_bench_remote_settings;

/* What `k3 tokenize` does: one of its four options, which take turns. */
typedef enum { TOKENIZE_NONE, TOKENIZE_TEXT, TOKENIZE_TEXT_FILE, TOKENIZE_CHAT, TOKENIZE_DECODE } cli_tokenize_mode;
typedef struct cli_tokenize_settings {
    cli_tokenize_mode mode;
    const char *arg;         /* TEXT, FILE, FILE.json or IDS */
    const char *opt;         /* the option that set the mode */
} cli_tokenize_settings;

/* What `k3 history` options set (--db and --json are shared rows). */
typedef struct cli_history_settings {
    int help;
    const char *format;      /* export --format md|markdown|json */
    const char *output;      /* export -o FILE */
    int force;               /* export --force: replace an existing file */
    int yes;                 /* rm --yes: no question */
    int limit;               /* list/search --limit (0 = the subcommand's default) */
    int n;                   /* stress --n (test only; 0 = 1000) */
    const char *ids_file;    /* check --ids (test only) */
} cli_history_settings;

/* What the options set. */
typedef struct cli_settings {
    k3_options model;        /* ctx_tokens is --ctx */
    k3_sampler sampler;      /* temperature, top_k, top_p, min_p, seed */
    int max_new;             /* -n */
    int draft;               /* --draft: DRAFT_NONE or DRAFT_NGRAM (chat/draft.h) */
    int sampling_given;      /* typed on the command line: temp 1, top-k 2, top-p 4, min-p 8,
                              * seed 16 (they override a resumed conversation's sampling) */
    int think;               /* --think: 0 off, 1 low, 2 medium, 3 high, 4 max (cli_think_effort) */
    const char *system;      /* --system TEXT: chat, run */
    const char *db_path;     /* --db FILE: chat, history (NULL = the default database) */
    int json;                /* --json: plan, chat, history, bench, eval --kl-base */
    const char *trunk_type;  /* --trunk TYPE: plan (predict) and pack (write) the trunk at a type */
    const char *expert_type; /* --experts TYPE: the same for the routed experts */
    remote_cli remote;       /* --endpoint ... */
    cli_gen_settings gen;
    cli_pack_settings pack;
    cli_plan_settings plan;
    cli_serve_settings serve;
    cli_chat_settings chat;
    cli_run_settings run;
    cli_eval_settings eval;
    cli_bench_settings bench;
    cli_bench_remote_settings bench_remote;
    cli_tokenize_settings tokenize;
    cli_history_settings history;
} cli_settings;

/* --think's setting as the chat format's effort: NULL (off), "low",
 * "medium", "high" or "max". */
const char *cli_think_effort(int think);

/* Every row's default applied (then a command may change one, e.g. chat's
 * longer answers). */
void cli_settings_defaults(cli_settings *s);

/* If argv[*i] is an option of the groups, consume it (and its value), set it
 * and return 1; 0 if it is not one of them; -1 on a bad or missing value
 * (message printed). */
int cli_parse_option(int argc, char **argv, int *i, unsigned groups, cli_settings *s);

/* A command's whole command line: every argv[1..] is an option of the
 * groups (consumed by cli_parse_option) or one of at most max_args
 * positional arguments, stored in args[] (count in *n_args); everything
 * after "--" is positional (text that starts with '-'). 0, or -1 after one
 * line naming the unknown option or the extra argument. */
int cli_parse_args(const char *cmd, int argc, char **argv, unsigned groups, cli_settings *s, const char **args,
                   int max_args, int *n_args);

/* The --help lines of the groups' options. */
void cli_print_options(FILE *f, unsigned groups);

/* The options as Markdown tables: the shared ones, then each command's
 * (docs/OPTIONS.md; `k3 help options`). */
void cli_print_options_markdown(FILE *f);

#endif
