/* cmd_models.c - `k3 models [DIR...]`: the model directories k3 can open
 * (each with a config.json), with size on disk, type and architecture, so people
 * find what they downloaded; and `k3 help models`: how to get a real model
 * (the demo's weights are random). Nothing is loaded: config.json, file
 * sizes (chat/model_facts.c) and the tensor headers for the type. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "k3.h"
#include "model_facts.h"

/* `k3 help models`: docs/RUNNING.md, "Getting a real model" in short. The
 * speeds are estimates derived from docs/PERFORMANCE.md (see there). */
static void usage(FILE *f)
{
    fprintf(f,
        "usage: k3 models [DIR...]\n\n"
        "Lists the model directories found in DIR (default: where a model named by its name is\n"
        "looked for: each directory of $K3_MODELS, colon-separated, ~/.local/share/k3/models,\n"
        "models/, then PREFIX/share/k3/models of make install): name, size on disk, type\n"
        "(BF16, BF16 + MXFP4 experts...), architecture; a directory with config.json counts, as do its subdirectories with one.\n"
        "k3 chat NAME opens the first NAME found in that order.\n\n"
        "Getting a real model (the demo model, k3-mini, is 1.9 MB: it writes English words\n"
        "without sense; the random presets of k3 gen write noise)\n\n"
        "  Kimi Linear 48B-A3B (Hugging Face: moonshotai/Kimi-Linear-48B-A3B-Instruct)\n"
        "    hf download moonshotai/Kimi-Linear-48B-A3B-Instruct --local-dir models/kimi-linear\n"
        "    (older clients: huggingface-cli download ... with the same arguments)\n"
        "    disk: 98 GB (bf16), another 98 GB for the packed copy\n"
        "    k3 pack models/kimi-linear models/kimi-linear-packed\n"
        "    k3 chat models/kimi-linear-packed --mem 16G\n"
        "  Kimi K3 (Hugging Face: moonshotai/Kimi-K3; 96 shards, text and vision)\n"
        "    hf download moonshotai/Kimi-K3 --local-dir models/kimi-k3\n"
        "    disk: 1.56 TB (MXFP4 experts, bf16 trunk), about as much again packed\n"
        "    k3 pack models/kimi-k3 models/kimi-k3-packed   (vision tensors are left out)\n"
        "    k3 chat models/kimi-k3-packed --mem 160G\n\n"
        "  --mem is the whole process's budget: what does not fit is read from disk every token.\n"
        "  Estimated speed on 2 cores with a 2 GB/s NVMe (divide the times by your disk's GB/s\n"
        "  over 2 where the disk dominates; estimates from docs/PERFORMANCE.md, not measurements\n"
        "  of these models):\n"
        "    Kimi Linear  --mem 8G   ~1.5-2.2 s/token  (experts read ~2.9 GB/token)\n"
        "                 --mem 32G  ~1.1-1.6 s/token  (~2.1 GB/token)\n"
        "                 --mem 64G  ~0.6-1.1 s/token  (~1.1 GB/token)\n"
        "                 --mem 104G fully resident, ~0.13 s/token (compute)\n"
        "    Kimi K3      --mem 32G  ~60-85 s/token    (trunk streams: ~115 GB/token)\n"
        "                 --mem 160G ~13-19 s/token    (trunk pinned, experts ~25 GB/token)\n"
        "                 --mem 512G ~10-14 s/token    (~19 GB/token); compute floor ~4 s/token\n"
        "  The first token of a long prompt costs more: prompts run in chunks of 32 tokens.\n");
}

/* Print one model directory's line; quiet when it is not a model. The
 * type (as ollama and llama.cpp name a file's) comes from the tensor
 * headers; "?" when they do not read (k3 chat then says why). */
static int show_dir(const char *path, int *n_found)
{
    char arch[256], why[512];
    if (model_dir_summary(path, arch, sizeof arch, why, sizeof why)) return 0;
    char size[32] = "?", type[48] = "";
    int64_t bytes = model_dir_bytes(path);
    if (bytes >= 0) model_fmt_bytes(size, sizeof size, (double)bytes);
    k3_error err;
    if (k3_model_peek_type(path, type, sizeof type, &err) || !type[0]) snprintf(type, sizeof type, "?");
    if (*n_found == 0) printf("%-40s  %10s  %-20s  %s\n", "MODEL", "SIZE", "TYPE", "ARCHITECTURE");
    printf("%-40s  %10s  %-20s  %s\n", path, size, type, arch);
    (*n_found)++;
    return 1;
}

/* A .gguf file to list: a single file, or the first part of a split set
 * (NAME-00001-of-00003.gguf stands for the set). */
static int is_listed_gguf(const char *name)
{
    size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 5, ".gguf")) return 0;
    int part, parts;
    char tail[32];
    if (len >= 20 && sscanf(name + len - 20, "-%5d-of-%5d%5s", &part, &parts, tail) == 3 && !strcmp(tail, ".gguf"))
        return part == 1;
    return 1;
}

/* A root is a model itself or holds models one level down (sorted by name):
 * folders, and .gguf files. */
static void scan_root(const char *root, int *n_found)
{
    /* a root holding one .gguf file is a folder of models, listed by file */
    if (!k3_model_path_is_gguf(root) && show_dir(root, n_found)) return;
    struct dirent **names = NULL;
    int n = scandir(root, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        size_t len = strlen(nm);
        int skip = nm[0] == '.' || (len > 8 && !strcmp(nm + len - 8, ".partial"));
        if (!skip) {
            char path[4096];
            snprintf(path, sizeof path, "%s%s%s", root, root[strlen(root) - 1] == '/' ? "" : "/", nm);
            struct stat st;
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) show_dir(path, n_found);
            else if (S_ISREG(st.st_mode) && is_listed_gguf(nm)) show_dir(path, n_found);
        }
        free(names[i]);
    }
    free(names);
}

int cmd_models(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    int n_found = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            struct stat st;
            if (argv[i][0] == '-') {
                cli_error("models: unknown option '%s' (see k3 help models)", argv[i]);
                return K3_EXIT_USAGE;
            }
            if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
                cli_error("models: %s: not a directory", argv[i]);
                return K3_EXIT_ERROR;
            }
            scan_root(argv[i], &n_found);
        }
    } else {
        char roots[8][4096], real[8][PATH_MAX];
        int n_roots = cli_model_roots(roots, 8);
        for (int i = 0; i < n_roots; i++) {
            struct stat st;
            real[i][0] = 0;
            if (stat(roots[i], &st) != 0 || !S_ISDIR(st.st_mode) || !realpath(roots[i], real[i])) continue;
            int seen = 0;                       /* $K3_MODELS=models names models/ once */
            for (int j = 0; j < i; j++) seen |= real[j][0] && !strcmp(real[j], real[i]);
            if (seen) continue;
            scan_root(roots[i], &n_found);
        }
    }
    if (n_found == 0)
        fprintf(stderr, "k3: no model directories found (a model directory has a config.json); "
                        "k3 help models says how to get one, k3 gen models/demo --preset demo makes a test one\n");
    return K3_EXIT_OK;
}
