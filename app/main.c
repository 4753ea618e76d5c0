/* main.c - `k3` entry point: find the subcommand and hand over argv.
 *
 * Kept tiny on purpose: every subcommand lives in its own cmd_*.c file and
 * owns its options, its --help text and its exit codes. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "options.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"chat",     cmd_chat,     "multi-turn conversation, stored and resumable"},
    {"history",  cmd_history,  "list, search, export or delete stored conversations"},
    {"run",      cmd_run,      "generate text from a prompt (stats on stderr)"},
    {"eval",     cmd_eval,     "teacher-forced logits for a list of token ids"},
    {"tokenize", cmd_tokenize, "encode text or a chat, or decode ids"},
    {"gen",      cmd_gen,      "write a synthetic checkpoint in Hugging Face layout"},
    {"pack",     cmd_pack,     "write the packed layout (streaming runtime) of a checkpoint"},
    {"serve",    cmd_serve,    "OpenAI-compatible HTTP server (chat and completions, SSE, /metrics)"},
    {"bench",    cmd_bench,    "prompt and decode speed under a memory budget (figures, JSON)"},
    {"models",   cmd_models,   "list model directories; k3 help models: getting a real model"},
    {"plan",     cmd_plan,     "predict memory plan and speed of a model from its config alone"},
};

static void print_help(FILE *f)
{
    fprintf(f, "k3 - chat with Kimi-class Mixture-of-Experts models on a CPU\n\n"
               "usage: k3 COMMAND [options]   (k3 COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-9s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(f, "  help      this text (k3 help COMMAND: that command's options; k3 help options: the\n"
               "            options shared by several commands)\n"
               "  --version version, source, build flags and kernels\n\nMODEL is a Hugging Face checkpoint directory or a packed one "
               "(k3 pack),\nor a model's name looked up in $K3_MODELS, ~/.local/share/k3/models, models/ and\n"
               "PREFIX/share/k3/models (k3 models lists them); default $K3_MODEL, else k3-mini.\n"
               "Exit codes: 0 done, 1 error, 2 usage, 3 chat input not answered, 130 Ctrl-C.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return K3_EXIT_USAGE;
    }
    if (cli_ensure_stack()) return K3_EXIT_ERROR;
    const char *name = argv[1];
    if (!strcmp(name, "--version") || !strcmp(name, "version")) return cmd_version(argc - 1, argv + 1);
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        if (argc > 2 && !strcmp(argv[2], "options")) {   /* the shared options table (docs/OPTIONS.md) */
            cli_print_options_markdown(stdout);
            return K3_EXIT_OK;
        }
        if (argc > 2) {
            for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
                if (!strcmp(argv[2], subcommands[i].name)) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return subcommands[i].fn(2, hargv);
                }
            cli_error("help: unknown command '%s' (k3 help lists them)", argv[2]);
            return K3_EXIT_USAGE;
        }
        print_help(stdout);
        return K3_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(name, subcommands[i].name))
            return subcommands[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s' (try: k3 help)", name);
    return K3_EXIT_USAGE;
}
