/* cmd_tokenize.c - `k3 tokenize`: encode text or a chat to ids, or decode
 * ids to text, with the model's own tokenizer. Lets a user (and the tests)
 * check the tokenizer against the Python reference without running a model. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"
#include "k3_util.h"
#include "options.h"

/* The command's own lines; the options come from the table. */
static void usage(FILE *f)
{
    fprintf(f, "usage: k3 tokenize [MODEL] (--text TEXT | --text-file FILE | --chat FILE.json | --decode IDS)\n\n");
    cli_print_options(f, OPTS_TOKENIZE);
    fprintf(f, "\nMODEL is a model directory with tiktoken.model and tokenizer_config.json\n"
               "(--chat also reads config.json), or a .gguf file (its own vocabulary);\n"
               "default $K3_MODEL, else models/k3-mini.\n"
               "Ids are printed on one line separated by spaces.\n");
}

typedef struct {
    const char *model;
    cli_tokenize_mode mode;
    const char *arg;      /* TEXT, FILE, FILE.json or IDS */
    const char *effort;   /* --think: NULL = off */
} tokenize_args;

/* Options first, so every usage mistake exits 2 before any file is read. */
static int parse_tokenize_args(int argc, char **argv, tokenize_args *a)
{
    memset(a, 0, sizeof *a);
    cli_settings set;
    cli_settings_defaults(&set);
    int n_args;
    if (cli_parse_args("tokenize", argc, argv, OPTS_TOKENIZE, &set, &a->model, 1, &n_args)) return -1;
    if (set.tokenize.mode == TOKENIZE_NONE) {
        cli_error("tokenize: give one of --text, --text-file, --chat or --decode (try: k3 tokenize --help)");
        return -1;
    }
    a->mode = set.tokenize.mode;
    a->arg = set.tokenize.arg;
    a->effort = cli_think_effort(set.think);
    if (a->effort && a->mode != TOKENIZE_CHAT) {
        cli_error("tokenize: --think renders a chat: use it with --chat FILE.json");
        return -1;
    }
    if (!a->model) a->model = cli_default_model();
    return 0;
}

/* Ids on one line, space-separated: the format tests and scripts diff. */
static void print_ids(const int *ids, int n)
{
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
}

/* --text / --text-file: special-token strings allowed, like the reference. */
static int tokenize_text(const k3_tokenizer *tok, const char *label, const char *text, size_t len)
{
    k3_error err;
    int n;
    int *ids = k3_tokenizer_encode(tok, text, len, 1, &n, &err);
    if (!ids) {
        cli_error("%s: %s", label, err.msg);
        return K3_EXIT_ERROR;
    }
    print_ids(ids, n);
    free(ids);
    return K3_EXIT_OK;
}

/* A JSON file from outside (capped, regular files only); NULL after one
 * line naming the file and the problem. */
static json_t *load_json(const char *path, size_t max_bytes)
{
    size_t len;
    char *text = cli_read_file(path, max_bytes, &len);
    if (!text) return NULL;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    free(text);
    if (!root && jerr.line < 1) cli_error("%s: %s", path, jerr.text);
    else if (!root) cli_error("%s:%d: %s", path, jerr.line, jerr.text);
    return root;
}

/* The chat framing depends on the model family: 0 = Kimi Linear (K2
 * framing), 1 = Kimi K3 (XTML), -1 = error (message printed). */
static int check_chat_model_type(const char *model)
{
    size_t plen = strlen(model) + 16;
    char *path = malloc(plen);
    if (!path) return -1;
    snprintf(path, plen, "%s/config.json", model);
    json_t *cfg = load_json(path, K3_MAX_CONFIG_BYTES);
    int rc = -1;
    if (cfg) {
        json_t *type = json_is_object(cfg) ? json_object_get(cfg, "model_type") : NULL;
        if (!json_is_string(type)) cli_error("%s: no \"model_type\" string", path);
        else if (!strcmp(json_string_value(type), "kimi_linear")) rc = 0;
        else if (!strcmp(json_string_value(type), "kimi_k3")) rc = 1;
        else
            cli_error("%s: no chat format for model_type '%s' (kimi_linear or kimi_k3)",
                      path, json_string_value(type));
    }
    json_decref(cfg);
    free(path);
    return rc;
}

/* --chat FILE.json: a JSON array of {"role", "content"} objects. */
static int tokenize_chat(const k3_tokenizer *tok, const char *file, int xtml, const char *effort)
{
    json_t *root = load_json(file, K3_MAX_PROMPT_BYTES);
    if (!root) return K3_EXIT_ERROR;
    int rc = K3_EXIT_ERROR;
    size_t n_msgs = json_is_array(root) ? json_array_size(root) : 0;
    k3_chat_msg *msgs = calloc(n_msgs ? n_msgs : 1, sizeof *msgs);
    if (!json_is_array(root)) {
        cli_error("%s: expected a JSON array of {\"role\": ..., \"content\": ...} messages", file);
        goto done;
    }
    if (!msgs) {
        cli_error("%s: out of memory", file);
        goto done;
    }
    for (size_t i = 0; i < n_msgs; i++) {
        json_t *m = json_array_get(root, i);
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        json_t *content = json_is_object(m) ? json_object_get(m, "content") : NULL;
        if (!json_is_string(role)) {
            cli_error("%s: message %zu: needs a \"role\" string", file, i + 1);
            goto done;
        }
        if (content && !json_is_null(content) && !json_is_string(content)) {
            cli_error("%s: message %zu: \"content\" must be a string", file, i + 1);
            goto done;
        }
        msgs[i].role = json_string_value(role);
        msgs[i].content = json_is_string(content) ? json_string_value(content) : "";
        json_t *reasoning = json_object_get(m, "reasoning_content");
        msgs[i].reasoning = json_is_string(reasoning) ? json_string_value(reasoning) : NULL;
    }
    if (effort && !xtml) {
        cli_error("%s: --think: a Kimi Linear model has no thinking mode (only Kimi K3 models think)", file);
        goto done;
    }
    k3_error err;
    int n;
    int *ids = xtml ? k3_chat_render_xtml_think(tok, msgs, (int)n_msgs, 1, effort, &n, &err)
                    : k3_chat_render_kimi(tok, msgs, (int)n_msgs, 1, &n, &err);
    if (!ids) {
        cli_error("%s: %s", file, err.msg);
        goto done;
    }
    print_ids(ids, n);
    free(ids);
    rc = K3_EXIT_OK;
done:
    free(msgs);
    json_decref(root);
    return rc;
}

/* --decode IDS: exact text, so `--decode` of `--text-file` ids reproduces
 * the file byte for byte. */
static int tokenize_decode(const k3_tokenizer *tok, const int *ids, int n)
{
    int n_vocab = k3_tokenizer_n_vocab(tok);
    for (int i = 0; i < n; i++)
        if (ids[i] >= n_vocab) {
            cli_error("--decode: token id %d is outside the vocabulary (0..%d)", ids[i], n_vocab - 1);
            return K3_EXIT_ERROR;   /* like eval: well-formed ids the model does not have */
        }
    size_t len;
    char *text = k3_tokenizer_decode_len(tok, ids, n, &len);
    if (!text) {
        cli_error("--decode: out of memory");
        return K3_EXIT_ERROR;
    }
    fwrite(text, 1, len, stdout);
    if (isatty(STDOUT_FILENO)) putchar('\n');
    free(text);
    return K3_EXIT_OK;
}

/* Usage is checked before the model is opened; each mode prints its own
 * one-line error and returns the exit code. */
int cmd_tokenize(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return K3_EXIT_OK;
    }
    tokenize_args a;
    if (parse_tokenize_args(argc, argv, &a)) return K3_EXIT_USAGE;
    char model_dir_buf[4096], folder[4096], vocab_path[4200];
    if (!(a.model = cli_model_dir(a.model, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;
    /* A GGUF's own vocabulary unless a tiktoken.model sits beside it, as
     * k3_model_open chooses, so the ids are the ones a chat would use. */
    int gguf = 0;
    snprintf(vocab_path, sizeof vocab_path, "%s/tokenizer.gguf", a.model);   /* a pack of a GGUF */
    if (!k3_model_path_is_gguf(a.model) && access(vocab_path, F_OK) == 0) {
        snprintf(folder, sizeof folder, "%s/tiktoken.model", a.model);
        gguf = access(folder, F_OK) != 0;
        if (gguf && a.mode != TOKENIZE_CHAT) a.model = vocab_path;
        if (a.mode == TOKENIZE_CHAT) gguf = 0;          /* the folder's config.json names the format */
    } else if (k3_model_path_is_gguf(a.model)) {
        size_t n = strlen(a.model);
        const char *slash = strrchr(a.model, '/');
        if (n > 5 && !strcmp(a.model + n - 5, ".gguf"))   /* a file: its folder */
            snprintf(folder, sizeof folder, "%.*s", !slash ? 1 : slash == a.model ? 1 : (int)(slash - a.model),
                     slash ? a.model : ".");
        else
            snprintf(folder, sizeof folder, "%s", a.model);
        snprintf(vocab_path, sizeof vocab_path, "%s/tiktoken.model", folder);
        gguf = access(vocab_path, F_OK) != 0;
        if (!gguf) a.model = folder;
    }
    if (gguf && a.mode == TOKENIZE_CHAT) {
        cli_error("%s: --chat needs the model's folder (its config.json names the chat format); "
                  "a .gguf takes --text, --text-file or --decode", a.model);
        return K3_EXIT_USAGE;
    }
    int *decode_ids = NULL, n_decode = 0;
    if (a.mode == TOKENIZE_DECODE && !(decode_ids = cli_parse_ids("--decode", a.arg, &n_decode)))
        return K3_EXIT_USAGE;
    int chat_format = a.mode == TOKENIZE_CHAT ? check_chat_model_type(a.model) : 0;
    if (chat_format < 0) {
        free(decode_ids);
        return K3_EXIT_ERROR;
    }
    k3_error err;
    k3_tokenizer *tok = gguf ? k3_tokenizer_load_gguf(a.model, &err) : k3_tokenizer_load_model(a.model, &err);
    if (!tok) {
        cli_error("%s", err.msg);
        free(decode_ids);
        return K3_EXIT_ERROR;
    }
    int rc = K3_EXIT_ERROR;
    if (a.mode == TOKENIZE_TEXT) {
        rc = tokenize_text(tok, "--text", a.arg, strlen(a.arg));
    } else if (a.mode == TOKENIZE_TEXT_FILE) {
        size_t len;
        char *text = cli_read_file(a.arg, K3_MAX_PROMPT_BYTES, &len);
        if (text) rc = tokenize_text(tok, a.arg, text, len);
        free(text);
    } else if (a.mode == TOKENIZE_CHAT) {
        rc = tokenize_chat(tok, a.arg, chat_format, a.effort);
    } else {
        rc = tokenize_decode(tok, decode_ids, n_decode);
    }
    free(decode_ids);
    k3_tokenizer_free(tok);
    if (fflush(stdout) && rc == K3_EXIT_OK) {
        cli_error("tokenize: cannot write to stdout");
        rc = K3_EXIT_ERROR;
    }
    return rc;
}
