/* options.c - the options table (see options.h). One row per option; a row's
 * default is parsed by the same code as a value from the command line, so
 * the default shown in help is the default used. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "k3_offline.h"
#include "options.h"

#define STR_(x) #x
#define STR(x) STR_(x)

typedef enum { OPT_SIZE, OPT_INT, OPT_FLOAT, OPT_CHOICE, OPT_FLAG, OPT_TEXT } opt_type;

/* A parsed value, handed to the row's setter. */
typedef struct opt_value {
    long long i;             /* OPT_SIZE, OPT_INT, OPT_CHOICE (index), OPT_FLAG (1) */
    double d;                /* OPT_FLOAT */
    const char *s;           /* the text as given */
} opt_value;

typedef struct cli_option {
    const char *name, *alias;    /* "--max-tokens", "-n" */
    unsigned group;
    opt_type type;
    const char *value_name;      /* "SIZE", "N" */
    const char *choices;         /* OPT_CHOICE: "direct|buffered" */
    double lo, hi;               /* OPT_INT, OPT_FLOAT, OPT_SIZE bounds (whole numbers are exact
                                  * in a double up to 2^53; --seed's upper end is the exception) */
    const char *def;             /* default as command-line text; NULL = none */
    const char *def_note;        /* how the default reads in help when def is NULL or special */
    int (*set)(cli_settings *s, const opt_value *v);
    const char *help;
} cli_option;

static int set_mem(cli_settings *s, const opt_value *v) { s->model.mem_bytes = (uint64_t)v->i; return 0; }
static int set_io(cli_settings *s, const opt_value *v) { s->model.io_buffered = (int)v->i; return 0; }
static int set_backend(cli_settings *s, const opt_value *v) { s->model.io_uring = (int)v->i; return 0; }
static int set_depth(cli_settings *s, const opt_value *v) { s->model.io_depth = (int)v->i; return 0; }
static int set_prefetch(cli_settings *s, const opt_value *v) { s->model.prefetch = (int)v->i; return 0; }
static int set_chunk(cli_settings *s, const opt_value *v) { s->model.chunk_tokens = (int)v->i; return 0; }
static int set_huge(cli_settings *s, const opt_value *v) { s->model.no_huge_pages = (int)v->i; return 0; }
static int set_trace(cli_settings *s, const opt_value *v) { s->model.trace_path = v->s; return 0; }
static int set_threads(cli_settings *s, const opt_value *v) { s->model.n_threads = (int)v->i; return 0; }
static int set_ctx(cli_settings *s, const opt_value *v) { s->model.ctx_tokens = (int)v->i; return 0; }
static int set_max_new(cli_settings *s, const opt_value *v) { s->max_new = (int)v->i; return 0; }
static int set_temp(cli_settings *s, const opt_value *v)
{
    s->sampler.temperature = (float)v->d;
    s->sampling_given |= 1;
    return 0;
}
static int set_top_k(cli_settings *s, const opt_value *v)
{
    s->sampler.top_k = (int)v->i;
    s->sampling_given |= 2;
    return 0;
}
static int set_top_p(cli_settings *s, const opt_value *v)
{
    s->sampler.top_p = (float)v->d;
    s->sampling_given |= 4;
    return 0;
}
static int set_min_p(cli_settings *s, const opt_value *v)
{
    s->sampler.min_p = (float)v->d;
    s->sampling_given |= 8;
    return 0;
}
static int set_seed(cli_settings *s, const opt_value *v)
{
    s->sampler.seed = (uint64_t)v->i;
    s->sampling_given |= 16;
    return 0;
}

/* k3 gen: the preset names are the generator's (k3_gen_preset_exists). */
static int set_gen_preset(cli_settings *s, const opt_value *v)
{
    if (!k3_gen_preset_exists(v->s)) {
        cli_error("--preset: unknown preset '%s' (%s)", v->s, k3_gen_preset_names());
        return -1;
    }
    s->gen.preset = v->s;
    return 0;
}
static int set_gen_seed(cli_settings *s, const opt_value *v) { s->gen.seed = (uint64_t)v->i; return 0; }
static int set_gen_dtype(cli_settings *s, const opt_value *v) { s->gen.f32 = (int)v->i; return 0; }
static int set_gen_shards(cli_settings *s, const opt_value *v) { s->gen.shards = (int)v->i; return 0; }

/* k3 pack. */
static int set_pack_force(cli_settings *s, const opt_value *v) { s->pack.force = (int)v->i; return 0; }
static int set_pack_progress(cli_settings *s, const opt_value *v) { s->pack.progress = (int)v->i; return 0; }
static int set_pack_buffer(cli_settings *s, const opt_value *v) { s->pack.buffer_mib = v->i; return 0; }
static int set_pack_throttle(cli_settings *s, const opt_value *v) { s->pack.throttle_mb_s = v->d; return 0; }
static int set_pack_sample(cli_settings *s, const opt_value *v) { s->pack.sample_tensors = (int)v->i; return 0; }
static int set_pack_verify(cli_settings *s, const opt_value *v) { s->pack.verify_dir = v->s; return 0; }
static int set_pack_free(cli_settings *s, const opt_value *v) { s->pack.simulate_free_bytes = v->i; return 0; }

/* The policy names are the engine's (k3_cache_policy_parse), not spelled here. */
static int set_cache_policy(cli_settings *s, const opt_value *v)
{
    int p = k3_cache_policy_parse(v->s);
    if (p < 0) {
        cli_error("--cache-policy: expected lru or lfru, got '%s'", v->s);
        return -1;
    }
    s->model.cache_lru = p == K3_CACHE_LRU;
    return 0;
}

static const cli_option options[] = {
    {"--mem", NULL, OPTS_MODEL, OPT_SIZE, "SIZE", NULL, 1, 0, NULL,
     "resident if it fits in 9/10 of available memory; in a memory cgroup, 9/10 of what its limit leaves",
     set_mem,
     "budget for the whole process (e.g. 2G); the rest streams from disk"},
    {"--io", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "direct|buffered", 0, 0, "direct", NULL, set_io,
     "read with O_DIRECT or through the page cache"},
    {"--io-backend", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "pool|uring", 0, 0, "pool", NULL, set_backend,
     "a pool of pread threads or io_uring"},
    {"--io-depth", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 32, STR(K3_IO_DEPTH_DEFAULT), NULL, set_depth,
     "reads in flight"},
    {"--cache-policy", NULL, OPTS_MODEL, OPT_TEXT, NULL, "lru|lfru", 0, 0, "lfru", NULL, set_cache_policy,
     "expert cache eviction"},
    {"--prefetch", NULL, OPTS_MODEL, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_prefetch,
     "read the next layer's predicted experts while the disk is idle"},
    {"--chunk-tokens", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 65536, NULL, "the largest the budget allows",
     set_chunk, "prompt tokens per pass over the weights"},
    {"--huge-pages", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "on|off", 0, 0, "on", NULL, set_huge,
     "large arenas on 2 MiB transparent huge pages"},
    {"--trace", NULL, OPTS_MODEL, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_trace,
     "record routing as lines \"token layer expert\""},
    {"--threads", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 1024, NULL, "all cores", set_threads,
     "compute threads"},
    {"--ctx", NULL, OPTS_CONTEXT, OPT_INT, "N", NULL, 16, 1 << 24, STR(K3_CTX_TOKENS_DEFAULT), NULL, set_ctx,
     "context limit in tokens (the state is planned for it)"},
    {"--max-tokens", "-n", OPTS_GENERATE, OPT_INT, "N", NULL, 0, 1 << 24, "128", "128; chat 512", set_max_new,
     "tokens to generate"},
    {"--temp", NULL, OPTS_GENERATE, OPT_FLOAT, "T", NULL, 0, 100, "0", "0 = greedy", set_temp,
     "sampling temperature"},
    {"--top-k", NULL, OPTS_GENERATE, OPT_INT, "K", NULL, 0, 1 << 24, "0", "0 = off", set_top_k,
     "keep the K most likely tokens"},
    {"--top-p", NULL, OPTS_GENERATE, OPT_FLOAT, "P", NULL, 0, 1, "1", "1 = off", set_top_p,
     "nucleus sampling: the smallest set with mass P"},
    {"--min-p", NULL, OPTS_GENERATE, OPT_FLOAT, "P", NULL, 0, 1, "0", "0 = off", set_min_p,
     "drop tokens below P x p(most likely token)"},
    {"--seed", NULL, OPTS_GENERATE, OPT_INT, "S", NULL, 0, -1, "1", NULL, set_seed,
     "random seed of the sampler"},

    {"--preset", NULL, OPTS_GEN, OPT_TEXT, "NAME", NULL, 0, 0, NULL, "none: required", set_gen_preset,
     "the model to write: tiny, small, demo, k3-tiny, k3-sim, k3-16g, k3-real-widths"},
    {"--seed", NULL, OPTS_GEN, OPT_INT, "N", NULL, 0, -1, "1", NULL, set_gen_seed,
     "seed of the weights (each tensor's values depend on it and the tensor's name only)"},
    {"--dtype", NULL, OPTS_GEN, OPT_CHOICE, NULL, "bf16|f32", 0, 0, "bf16", NULL, set_gen_dtype,
     "dtype of the dense weights"},
    {"--shards", NULL, OPTS_GEN, OPT_INT, "K", NULL, 1, 64, "1", NULL, set_gen_shards,
     "safetensors shards (an index file when K > 1)"},

    {"--force", NULL, OPTS_PACK, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_pack_force,
     "replace DST if it is an existing packed model"},
    {"--progress", NULL, OPTS_PACK, OPT_FLAG, NULL, NULL, 0, 0, NULL, "on a terminal only", set_pack_progress,
     "progress on stderr even when it is not a terminal"},
    {"--buffer", NULL, OPTS_PACK, OPT_INT, "MIB", NULL, 1, 16384, "64", NULL, set_pack_buffer,
     "copy buffer in MiB: the bulk of pack's peak memory"},
    {"--throttle", NULL, OPTS_PACK, OPT_FLOAT, "MB/S", NULL, 0.001, 1e6, NULL, "unlimited", set_pack_throttle,
     "cap the copy rate"},
    {"--sample", NULL, OPTS_PACK, OPT_INT, "N", NULL, 0, 1000000, "16", NULL, set_pack_sample,
     "tensors compared byte for byte with the source after writing"},
    {"--verify", "--check", OPTS_PACK, OPT_TEXT, "DIR", NULL, 0, 0, NULL, "none", set_pack_verify,
     "instead of packing: load DIR (all bounds checks) and re-verify every unit's and file's checksum"},
    {"--simulate-free-bytes", NULL, OPTS_PACK, OPT_INT, "N", NULL, 0, -1, NULL, "off", set_pack_free,
     "TEST ONLY: assume the destination filesystem has N bytes free"},
};
enum { N_OPTIONS = sizeof options / sizeof options[0] };

/* Parse text as row o's value and set it; -1 with a message naming the option. */
static int apply(const cli_option *o, const char *text, cli_settings *s)
{
    opt_value v = {.s = text, .i = 1};
    switch (o->type) {
    case OPT_SIZE: {
        int64_t b = k3_parse_size(text);
        if (b < (int64_t)o->lo) {
            cli_error("%s: expected a size such as 8G or 512M, got '%s'", o->name, text);
            return -1;
        }
        v.i = b;
        break;
    }
    case OPT_INT:   /* hi < 0: any non-negative 64-bit value */
        if (cli_parse_int(o->name, text, (long long)o->lo, o->hi < 0 ? INT64_MAX : (long long)o->hi, &v.i)) return -1;
        break;
    case OPT_FLOAT:
        if (cli_parse_float(o->name, text, o->lo, o->hi, &v.d)) return -1;
        break;
    case OPT_CHOICE: {
        size_t n = strlen(text);
        const char *c = o->choices;
        for (v.i = 0; c; v.i++) {
            if (!strncmp(c, text, n) && (c[n] == '|' || !c[n])) break;
            c = strchr(c, '|');
            if (c) c++;
        }
        if (!c) {
            cli_error("%s: expected %s, got '%s'", o->name, o->choices, text);
            return -1;
        }
        break;
    }
    case OPT_FLAG:
    case OPT_TEXT:
        break;
    }
    return o->set(s, &v);
}

void cli_settings_defaults(cli_settings *s)
{
    memset(s, 0, sizeof *s);
    s->pack.simulate_free_bytes = -1;      /* rows without a default: their "off" */
    for (int i = 0; i < N_OPTIONS; i++)
        if (options[i].def && apply(&options[i], options[i].def, s)) abort();   /* a bad table is a bug */
    s->sampling_given = 0;                 /* defaults are not typed */
}

int cli_parse_option(int argc, char **argv, int *i, unsigned groups, cli_settings *s)
{
    const char *a = argv[*i];
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups) || (strcmp(a, o->name) && !(o->alias && !strcmp(a, o->alias)))) continue;
        if (o->type == OPT_FLAG) return apply(o, "1", s) ? -1 : 1;
        if (*i + 1 >= argc) {
            cli_error("%s needs a value", a);
            return -1;
        }
        return apply(o, argv[++*i], s) ? -1 : 1;
    }
    return 0;
}

/* "--io direct|buffered", "-n, --max-tokens N" */
static void option_label(const cli_option *o, char *buf, size_t len)
{
    const char *value = o->type == OPT_FLAG ? "" : o->value_name ? o->value_name : o->choices;
    snprintf(buf, len, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name, *value ? " " : "",
             value);
}

void cli_print_options(FILE *f, unsigned groups)
{
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups)) continue;
        char label[64];
        option_label(o, label, sizeof label);
        fprintf(f, "  %-24s %s (default %s)\n", label, o->help, o->def_note ? o->def_note : o->def);
    }
}

/* Text for a Markdown table cell: '|' escaped. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

/* One Markdown table of the rows of groups. */
static void print_markdown_table(FILE *f, unsigned groups)
{
    fprintf(f, "| option | meaning | default | range |\n|---|---|---|---|\n");
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups)) continue;
        char label[64], range[64] = "";
        option_label(o, label, sizeof label);
        if (o->type == OPT_INT && o->hi < 0) snprintf(range, sizeof range, "%.0f to 2^63-1", o->lo);
        else if (o->type == OPT_INT) snprintf(range, sizeof range, "%.0f to %.0f", o->lo, o->hi);
        else if (o->type == OPT_FLOAT) snprintf(range, sizeof range, "%g to %g", o->lo, o->hi);
        else if (o->choices) snprintf(range, sizeof range, "%s", o->choices);
        fputs("| `", f);
        md_cell(f, label);
        fprintf(f, "` | %s | %s | ", o->help, o->def_note ? o->def_note : o->def);
        md_cell(f, range);
        fputs(" |\n", f);
    }
}

void cli_print_options_markdown(FILE *f)
{
    print_markdown_table(f, OPTS_ALL);
    fprintf(f, "\n`k3 gen OUT_DIR`:\n\n");
    print_markdown_table(f, OPTS_GEN);
    fprintf(f, "\n`k3 pack SRC DST`:\n\n");
    print_markdown_table(f, OPTS_PACK);
}
