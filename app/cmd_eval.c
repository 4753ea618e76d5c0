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
#include "k3_util.h"
#include "options.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 eval [MODEL] --ids \"1 2 3\" --logits OUT.f32 [options]\n\n"
               "Runs the ids through the model (teacher forced; no BOS or template added) and writes\n"
               "float32 little-endian logits [n_tokens x vocab] to OUT.f32: row t is the prediction\n"
               "after token t. Prints the shape on stderr. Tokenizer files are not needed. Each chunk of\n"
               "32 rows is written as soon as it is computed, so --mem covers a prompt of any length.\n");
    cli_print_options(f, OPTS_EVAL | OPTS_MODEL);
}

/* Feed the ids one forward chunk at a time and write each chunk's logits to
 * out as soon as they are computed, so eval holds one chunk of logits
 * (counted in the plan: see cmd_eval), never n x vocab. A
 * long list (2048 ids or more) shows its progress on stderr, one line per
 * 1024 tokens. */
static int eval_streaming(k3_session *s, const int *ids, int n, float *chunk_logits, int vocab, FILE *out,
                          const char *out_path, k3_error *err)
{
    const uint64_t t0 = k3_now_ns();
    for (int done = 0; done < n;) {
        int piece = n - done < K3_EVAL_CHUNK_TOKENS ? n - done : K3_EVAL_CHUNK_TOKENS;
        if (k3_session_eval(s, ids + done, piece, chunk_logits, err)) return -1;
        size_t count = (size_t)piece * vocab;
        if (fwrite(chunk_logits, sizeof(float), count, out) != count)
            return k3_err(err, "%s: write failed: %s", out_path, strerror(errno));
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
    char model_dir_buf[4096];
    if (!(model_dir = cli_model_dir(model_dir, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;
    int n = 0;
    int *ids = cli_parse_ids("--ids", ids_text, &n);
    if (!ids) return K3_EXIT_USAGE;

    k3_error err;
    opt.ctx_tokens = n;
    /* One chunk of logits, allocated and touched before the model opens: the
     * plan counts the process's resident memory when it is made, so the
     * buffer is inside --mem. (A config.json that does not parse is left to
     * k3_model_open to report.) */
    const size_t rows = n < K3_EVAL_CHUNK_TOKENS ? (size_t)n : K3_EVAL_CHUNK_TOKENS;
    int vocab = 0;
    float *logits = NULL;
    if (k3_model_peek_vocab(model_dir, &vocab, &err) == 0 && vocab > 0 &&
        (logits = malloc(rows * (size_t)vocab * sizeof(float))))
        memset(logits, 0, rows * (size_t)vocab * sizeof(float));
    k3_model *m = k3_model_open(model_dir, &opt, &err);
    if (!m) { cli_error("%s", err.msg); free(logits); free(ids); return K3_EXIT_ERROR; }
    cli_print_plan(m);
    k3_model_info info;
    k3_model_get_info(m, &info);
    int rc = K3_EXIT_ERROR;
    if (info.vocab_size != vocab) {   /* config.json changed under us: size it now */
        free(logits);
        logits = malloc(rows * (size_t)info.vocab_size * sizeof(float));
    }
    k3_session *s = k3_session_new(m, n, &err);
    k3_output out;
    if (!logits || !s) {
        cli_error("%s", s ? "out of memory for the logits" : err.msg);
    } else if (k3_output_open(&out, out_path, &err)) {
        cli_error("%s", err.msg);
    } else if (eval_streaming(s, ids, n, logits, info.vocab_size, out.f, out_path, &err) ||
               k3_model_finish(m, &err)) {
        cli_error("%s", err.msg);   /* a failed --trace write is an error too */
        k3_output_abort(&out);
    } else if (k3_output_close(&out, &err)) {
        cli_error("%s", err.msg);
    } else {
        fprintf(stderr, "k3: wrote %s: %d x %d float32\n", out_path, n, info.vocab_size);
        rc = K3_EXIT_OK;
    }
    k3_session_free(s);
    k3_model_close(m);
    free(logits);
    free(ids);
    return rc;
}
