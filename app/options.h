/* options.h - the one table of command-line options: the model, runtime and
 * sampling options that several commands share (--mem, --io, --io-backend,
 * --io-depth, --cache-policy, --prefetch, --trace, --threads, --ctx, -n,
 * --temp, --top-k, --top-p, --min-p, --seed, --draft) and those of the offline tools
 * `k3 gen` and `k3 pack`: name, type, default, bounds and help in one row
 * each, as in Redis's config table. The table feeds the parser, every
 * command's --help, `k3 help options` and README's option list (checked by
 * tests/t_docs.sh). */
#ifndef K3_OPTIONS_H
#define K3_OPTIONS_H

#include <stdio.h>
#include "k3.h"

/* Which rows a command accepts. */
enum {
    OPTS_MODEL = 1,      /* how the model is held and read: every model-loading command */
    OPTS_CONTEXT = 2,    /* --ctx: commands that keep a session */
    OPTS_GENERATE = 4,   /* -n and the sampler: commands that generate */
    OPTS_ALL = 7,
    OPTS_GEN = 8,        /* k3 gen: the synthetic checkpoint writer */
    OPTS_PACK = 16       /* k3 pack: the packed layout writer */
};

/* What `k3 gen` options set. */
typedef struct cli_gen_settings {
    const char *preset;      /* NULL until given: required */
    uint64_t seed;
    int f32;                 /* --dtype f32 */
    int shards;
} cli_gen_settings;

/* What `k3 pack` options set (copied into k3_pack_opts). */
typedef struct cli_pack_settings {
    int force, progress;
    long long buffer_mib;
    double throttle_mb_s;    /* 0 = unlimited */
    int sample_tensors;
    const char *verify_dir;  /* --verify / --check DIR, or NULL */
    long long simulate_free_bytes;   /* -1 = not simulated */
} cli_pack_settings;

/* What the shared options set. */
typedef struct cli_settings {
    k3_options model;        /* ctx_tokens is --ctx */
    k3_sampler sampler;      /* temperature, top_k, top_p, min_p, seed */
    int max_new;             /* -n */
    int draft;               /* --draft: DRAFT_NONE or DRAFT_NGRAM (chat/draft.h) */
    int sampling_given;      /* typed on the command line: temp 1, top-k 2, top-p 4, min-p 8,
                              * seed 16 (they override a resumed conversation's sampling) */
    cli_gen_settings gen;
    cli_pack_settings pack;
} cli_settings;

/* Every row's default applied (then a command may change one, e.g. chat's
 * longer answers). */
void cli_settings_defaults(cli_settings *s);

/* If argv[*i] is an option of the groups, consume it (and its value), set it
 * and return 1; 0 if it is not one of them; -1 on a bad or missing value
 * (message printed). */
int cli_parse_option(int argc, char **argv, int *i, unsigned groups, cli_settings *s);

/* The --help lines of the groups' options. */
void cli_print_options(FILE *f, unsigned groups);

/* The options as Markdown tables: the shared ones, then gen's and pack's
 * (README's list; `k3 help options`). */
void cli_print_options_markdown(FILE *f);

#endif
