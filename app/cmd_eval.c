/* cmd_eval.c - `k3 eval`: teacher-forced logits for a list of token ids.
 *
 * No BOS and no template are added: the ids go in as given, and the output
 * file holds float32 little-endian [n_tokens x vocab], row t being the
 * prediction after token t. Needs no tokenizer files. This is the command
 * external references compare against. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"
#include "options.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 eval [MODEL] --ids \"1 2 3\" --logits OUT.f32 [options]\n\n"
               "Runs the ids through the model (teacher forced; no BOS or template added) and writes\n"
               "float32 little-endian logits [n_tokens x vocab] to OUT.f32: row t is the prediction\n"
               "after token t. Prints the shape on stderr. Tokenizer files are not needed.\n");
    cli_print_options(f, OPTS_EVAL | OPTS_MODEL);
}

/* Ids fed in pieces of this many (a multiple of the engine's 32-token
 * chunk; the logits are the same however the ids are split). */
#define EVAL_PIECE_TOKENS 512

/* k3_session_eval in pieces, so a long list (2048 ids or more) shows its
 * progress on stderr, one line per 1024 tokens. */
static int eval_with_progress(k3_session *s, const int *ids, int n, float *logits, int vocab, k3_error *err)
{
    const uint64_t t0 = k3_now_ns();
    for (int done = 0; done < n;) {
        int piece = n - done < EVAL_PIECE_TOKENS ? n - done : EVAL_PIECE_TOKENS;
        if (k3_session_eval(s, ids + done, piece, logits + (size_t)done * vocab, err)) return -1;
        done += piece;
        if (n >= 2048 && done < n && done % 1024 == 0)
            fprintf(stderr, "k3: eval: %d of %d tokens (%.1f s)\n", done, n, (k3_now_ns() - t0) * 1e-9);
    }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    const char *model_dir = NULL;
    cli_settings set;
    cli_settings_defaults(&set);
    set.model.skip_tokenizer = 1;         /* ids only: a broken tokenizer must not matter */
    int n_args;
    if (cli_parse_args("eval", argc, argv, OPTS_EVAL | OPTS_MODEL, &set, &model_dir, 1, &n_args))
        return K3_EXIT_USAGE;
    k3_options opt = set.model;
    const char *ids_text = set.eval.ids, *out_path = set.eval.logits_path;
    if (!ids_text || !out_path) {
        cli_error("eval: --ids and --logits are required (see k3 eval --help)");
        return K3_EXIT_USAGE;
    }
    if (!model_dir) model_dir = cli_default_model();
    int n = 0;
    int *ids = cli_parse_ids("--ids", ids_text, &n);
    if (!ids) return K3_EXIT_USAGE;

    k3_error err;
    opt.ctx_tokens = n;
    k3_model *m = k3_model_open(model_dir, &opt, &err);
    if (!m) { cli_error("%s", err.msg); free(ids); return K3_EXIT_ERROR; }
    cli_print_plan(m);
    k3_model_info info;
    k3_model_get_info(m, &info);
    int rc = K3_EXIT_ERROR;
    float *logits = malloc((size_t)n * info.vocab_size * sizeof(float));
    k3_session *s = k3_session_new(m, n, &err);
    if (!logits || !s) {
        cli_error("%s", s ? "out of memory for the logits" : err.msg);
    } else if (eval_with_progress(s, ids, n, logits, info.vocab_size, &err) || k3_model_finish(m, &err)) {
        cli_error("%s", err.msg);   /* a failed --trace write is an error too */
    } else {
        k3_output out;
        size_t count = (size_t)n * info.vocab_size;
        if (k3_output_open(&out, out_path, &err)) {
            cli_error("%s", err.msg);
        } else if (fwrite(logits, sizeof(float), count, out.f) != count) {
            cli_error("%s: write failed: %s", out_path, strerror(errno));
            k3_output_abort(&out);
        } else if (k3_output_close(&out, &err)) {
            cli_error("%s", err.msg);
        } else {
            fprintf(stderr, "k3: wrote %s: %d x %d float32\n", out_path, n, info.vocab_size);
            rc = K3_EXIT_OK;
        }
    }
    k3_session_free(s);
    k3_model_close(m);
    free(logits);
    free(ids);
    return rc;
}
