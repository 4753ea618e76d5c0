/* cmd_gen.c - `k3 gen`: the command line of the synthetic checkpoint writer
 * (offline/gen.c does the work). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "k3_offline.h"
#include "options.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 gen OUT_DIR --preset NAME [--seed N] [--dtype bf16|f32] [--shards K] [--force]\n"
               "       k3 gen OUT_DIR --tokenizer-corpus FILE [--n-base N]\n\n"
               "Writes a synthetic Kimi Linear checkpoint in Hugging Face layout: config.json,\n"
               "K safetensors shards (+ model.safetensors.index.json when K > 1), tiktoken.model,\n"
               "tokenizer_config.json and generation_config.json. Weights are deterministic per\n"
               "seed and tensor name (independent of --shards). OUT_DIR must be new or empty;\n"
               "--force replaces a model k3 gen wrote, never another.\n"
               "  tiny  ~0.4 MB   hidden 64, 4 layers, 8 experts top-2\n"
               "  small ~28 MB    hidden 256, 8 layers, 16 experts top-4\n"
               "  demo  ~560 MB   hidden 768, 12 layers, 24 experts top-4\n"
               "  k3-tiny ~1 MB   Kimi K3 layout: 7 layers, AttnRes blocks of 2, last two MLA, MXFP4 experts\n"
               "  k3-sim  ~3.9 GB Kimi K3 proportions: 12 layers, 256 experts top-16, 1.2 MiB MXFP4 pages\n"
               "  k3-16g  ~15 GB  K3-shaped benchmark model: 24 layers, hidden 3072, 128 experts top-16\n"
               "  k3-real-widths  ~24.5 GB  Kimi K3 at its real widths, 2 layers (KDA + dense, MLA + 896\n"
               "          MXFP4 experts of 17.5 MB), the real vocabulary's head (benchmarks only)\n"
               "  kl-4g   ~3.9 GB Kimi Linear for the bench against llama.cpp: hidden 2048, 6 layers,\n"
               "          56 experts top-8 (benchmarks only)\n"
               "With --tokenizer-corpus, only a Kimi K3 tokenizer is written.\n\n");
    cli_print_options(f, OPTS_GEN);
}

/* k3 gen writes config.json, the tokenizer and the shards over whatever is
 * there: a copied real model would be left half replaced and broken. So a
 * non-empty OUT_DIR needs --force, and even then only a model k3 gen wrote
 * (its config.json says "k3_random_weights": true) is replaced. 0 when
 * OUT_DIR may be written, else -1 after a one-line error. */
static int check_out_dir(const char *out, int force)
{
    DIR *d = opendir(out);
    if (!d) {
        if (errno == ENOENT) return 0;
        cli_error("gen: %s: %s", out, strerror(errno));
        return -1;
    }
    int n_entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n_entries++;
    closedir(d);
    if (!n_entries) return 0;
    if (!force) {
        cli_error("gen: %s is not empty (%d entr%s): give an empty or new directory, or --force to replace a "
                  "model k3 gen wrote", out, n_entries, n_entries == 1 ? "y" : "ies");
        return -1;
    }
    char config_path[4200];
    snprintf(config_path, sizeof config_path, "%s/config.json", out);
    FILE *f = fopen(config_path, "r");
    if (!f) return 0;                        /* no model there: a tokenizer, scratch files */
    fclose(f);
    json_t *config = json_load_file(config_path, 0, NULL);
    int ours = config && json_is_true(json_object_get(config, "k3_random_weights"));
    json_decref(config);
    if (!ours) {
        cli_error("gen: %s holds a model k3 gen did not write (its config.json has no \"k3_random_weights\": true); "
                  "not replacing it, even with --force", out);
        return -1;
    }
    return 0;
}

int cmd_gen(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    cli_settings set;
    cli_settings_defaults(&set);
    const char *out = NULL;
    int n_args;
    if (cli_parse_args("gen", argc, argv, OPTS_GEN, &set, &out, 1, &n_args)) return K3_EXIT_USAGE;
    const char *corpus = set.gen.tokenizer_corpus;
    const int n_base = set.gen.n_base;
    if (out && check_out_dir(out, set.gen.force)) return K3_EXIT_ERROR;
    if (out && corpus && !set.gen.preset) {
        k3_error err;
        if (k3_gen_tokenizer(out, n_base, corpus, &err)) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
        fprintf(stderr, "k3: wrote %s: a Kimi K3 tokenizer, %d BPE ranks learned from %s\n", out, n_base, corpus);
        return K3_EXIT_OK;
    }
    if (!out || !set.gen.preset || corpus) {
        cli_error("gen: OUT_DIR and --preset are required (see k3 gen --help)");
        return K3_EXIT_USAGE;
    }
    const cli_gen_settings *g = &set.gen;
    k3_gen_opts o = {.preset = g->preset, .seed = g->seed, .f32 = g->f32, .shards = g->shards};
    k3_gen_result r;
    k3_error err;
    if (k3_gen_model(out, &o, &r, &err)) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
    fprintf(stderr, "k3: wrote %s: preset %s, %.1f MB of weights in %d shard%s\n", out, g->preset,
            r.weight_bytes / 1e6, g->shards, g->shards > 1 ? "s" : "");
    return K3_EXIT_OK;
}
