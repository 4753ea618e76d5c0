/* cmd_eval.c - `k3 eval`: teacher-forced logits for a list of token ids,
 * and the KL divergence mode that measures a model against a base.
 *
 * No BOS and no template are added: the ids go in as given (--ids, or the
 * ids of a text file), and --logits writes float32 little-endian
 * [n_tokens x vocab], row t being the prediction after token t. Needs no
 * tokenizer files unless --text-file. This is the command external
 * references compare against. --save-base writes the ids and the logits to a
 * KL base file, --kl-base runs another model (or the same one with other
 * options) over the base's ids and prints how far its predictions are
 * (eval_kl.c: the file and the figures, as llama-perplexity defines them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "eval_kl.h"
#include "k3.h"
#include "k3_util.h"
#include "options.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: k3 eval [MODEL] --ids \"1 2 3\" --logits OUT.f32 [options]\n"
               "       k3 eval [MODEL] --text-file FILE --save-base BASE.k3kl [options]\n"
               "       k3 eval [MODEL] --kl-base BASE.k3kl [--json] [options]\n\n"
               "Runs the ids through the model (teacher forced; no BOS or template added) and writes\n"
               "float32 little-endian logits [n_tokens x vocab] to OUT.f32: row t is the prediction\n"
               "after token t. Prints the shape on stderr. Tokenizer files are not needed (but for\n"
               "--text-file). Each chunk of 32 rows is written as soon as it is computed, so --mem\n"
               "covers a prompt of any length.\n\n"
               "--save-base writes the ids and the logits of every position that has a next id (the\n"
               "exact model's, as llama-perplexity --kl-divergence-base); --kl-base runs this model over\n"
               "the base's ids and prints, over those positions: the perplexity of both, ln(PPL ratio),\n"
               "the KL divergence from the base (mean, median, 90/99/99.9%%, max) and how often the two\n"
               "top-1 tokens agree (docs/COMMANDS.md, \"KL divergence\").\n");
    cli_print_options(f, OPTS_EVAL | OPTS_MODEL);
}

/* What eval does with each chunk of logits: one of the three outputs. */
typedef struct eval_job {
    FILE *logits_out;          /* --logits: every row */
    const char *logits_path;
    eval_kl_writer *base_out;  /* --save-base: the rows that have a next id */
    eval_kl_reader *base_in;   /* --kl-base: compared with the base's rows */
    float *base_rows;          /* a chunk of the base's rows (--kl-base) */
    eval_kl_stats *stats;      /* --save-base (its own perplexity) and --kl-base */
} eval_job;

/* One chunk's logits (rows first..first+piece-1 of n) to the job's output. */
static int eval_chunk_done(eval_job *job, const int *ids, int n, int first, int piece, const float *logits,
                           int vocab, k3_error *err)
{
    if (job->logits_out) {
        size_t count = (size_t)piece * vocab;
        if (fwrite(logits, sizeof(float), count, job->logits_out) != count)
            return k3_err(err, "%s: write failed: %s", job->logits_path, strerror(errno));
        return 0;
    }
    const int scored = first + piece <= n - 1 ? piece : n - 1 - first;   /* the last id has no next */
    const float *base = logits;
    if (job->base_out && eval_kl_write_rows(job->base_out, logits, scored, vocab, err)) return -1;
    if (job->base_in) {
        if (eval_kl_read_rows(job->base_in, job->base_rows, scored, err)) return -1;
        base = job->base_rows;
    }
    for (int r = 0; r < scored; r++)
        eval_kl_stats_row(job->stats, base + (size_t)r * vocab, logits + (size_t)r * vocab, vocab, ids[first + r + 1]);
    return 0;
}

/* Feed the ids one forward chunk at a time and hand each chunk's logits to
 * the job as soon as they are computed, so eval holds one chunk of logits
 * (counted in the plan: see cmd_eval), never n x vocab. A
 * long list (2048 ids or more) shows its progress on stderr, one line per
 * 1024 tokens. */
static int eval_streaming(k3_session *s, const int *ids, int n, float *chunk_logits, int vocab, eval_job *job,
                          k3_error *err)
{
    const uint64_t t0 = k3_now_ns();
    for (int done = 0; done < n;) {
        int piece = n - done < K3_EVAL_CHUNK_TOKENS ? n - done : K3_EVAL_CHUNK_TOKENS;
        if (k3_session_eval(s, ids + done, piece, chunk_logits, err)) return -1;
        if (eval_chunk_done(job, ids, n, done, piece, chunk_logits, vocab, err)) return -1;
        done += piece;
        if (n >= 2048 && done < n && done % 1024 == 0)
            fprintf(stderr, "k3: eval: %d of %d tokens (%.1f s)\n", done, n, (k3_now_ns() - t0) * 1e-9);
    }
    return 0;
}

/* The ids of --text-file, encoded as k3 tokenize --text-file does (special
 * strings become their ids; no BOS). NULL after one line on stderr. */
static int *text_file_ids(const char *model_dir, const char *path, int *n)
{
    k3_error err;
    k3_tokenizer *tok = k3_tokenizer_load(model_dir, &err);
    if (!tok) { cli_error("%s", err.msg); return NULL; }
    size_t len;
    char *text = cli_read_file(path, K3_MAX_PROMPT_BYTES, &len);
    int *ids = NULL;
    if (text && !(ids = k3_tokenizer_encode(tok, text, len, 1, n, &err))) cli_error("%s: %s", path, err.msg);
    if (ids && *n < 1) {
        cli_error("%s: no text to evaluate", path);
        free(ids);
        ids = NULL;
    }
    free(text);
    k3_tokenizer_free(tok);
    return ids;
}

/* The figures of --kl-base: a table for people, or one JSON object. */
static void print_kl(const eval_kl_summary *r, const char *base_path, const eval_kl_header *h, const char *model_dir,
                     int same_files, int json)
{
    if (json) {
        printf("{\"tokens_scored\":%d,\"vocab\":%u,\"same_model_files\":%s,"
               "\"ppl\":%.17g,\"ppl_err\":%.17g,\"ppl_base\":%.17g,\"ppl_base_err\":%.17g,"
               "\"ln_ppl_ratio\":%.17g,\"ln_ppl_ratio_err\":%.17g,\"kld_mean\":%.17g,\"kld_mean_err\":%.17g,"
               "\"kld_median\":%.17g,\"kld_p90\":%.17g,\"kld_p99\":%.17g,\"kld_p999\":%.17g,\"kld_max\":%.17g,"
               "\"kld_min\":%.17g,\"same_top\":%.17g,\"same_top_err\":%.17g}\n",
               r->n, h->vocab, same_files ? "true" : "false", r->ppl, r->ppl_err, r->ppl_base, r->ppl_base_err,
               r->ln_ratio, r->ln_ratio_err, r->kld_mean, r->kld_err, r->kld_median, r->kld_p90, r->kld_p99,
               r->kld_p999, r->kld_max, r->kld_min, r->same_top, r->same_top_err);
        return;
    }
    printf("KL divergence of %s from the base %s\n", model_dir, base_path);
    printf("base written by   %s (model %s)%s\n", h->source, h->fingerprint,
           same_files ? ", the same model files" : "");
    printf("tokens scored     %d (vocab %u)\n", r->n, h->vocab);
    printf("PPL(base)         %.6f ± %.6f\n", r->ppl_base, r->ppl_base_err);
    printf("PPL(model)        %.6f ± %.6f\n", r->ppl, r->ppl_err);
    printf("ln(PPL ratio)     %.6f ± %.6f\n", r->ln_ratio, r->ln_ratio_err);
    printf("mean KLD          %.6g ± %.3g\n", r->kld_mean, r->kld_err);
    printf("median KLD        %.6g\n", r->kld_median);
    printf("90%% KLD           %.6g\n", r->kld_p90);
    printf("99%% KLD           %.6g\n", r->kld_p99);
    printf("99.9%% KLD         %.6g\n", r->kld_p999);
    printf("max KLD           %.6g\n", r->kld_max);
    printf("same top-1        %.3f ± %.3f %%\n", 100 * r->same_top, 100 * r->same_top_err);
}

/* The model as a base file's header names it: the path's last part, the
 * weights' type and the engine build ("k3-mini BF16 + MXFP4 experts
 * k3-engine-..."; "+q8" ends the build under --activations q8). */
static void model_label(const char *model_dir, const k3_model_info *info, char *out, size_t cap)
{
    size_t len = strlen(model_dir);
    while (len > 1 && model_dir[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && model_dir[start - 1] != '/') start--;
    snprintf(out, cap, "%.*s %s %s", (int)(len - start), model_dir + start, info->type_label, k3_engine_build());
}

/* Check the command line's choice of input and output: one output of
 * --logits, --save-base and --kl-base; the ids from --ids or --text-file,
 * or from the base with --kl-base. 0, or -1 after one line. */
static int check_eval_modes(const cli_settings *set)
{
    const cli_eval_settings *e = &set->eval;
    const int outputs = !!e->logits_path + !!e->save_base + !!e->kl_base;
    const int inputs = !!e->ids + !!e->text_file;
    if (outputs != 1) {
        cli_error(outputs ? "eval: give only one of --logits, --save-base and --kl-base"
                          : "eval: --ids and --logits are required (or --save-base, --kl-base: see k3 eval --help)");
        return -1;
    }
    if (e->kl_base && inputs) {
        cli_error("eval: --kl-base takes its ids from the base file: no --ids or --text-file");
        return -1;
    }
    if (!e->kl_base && inputs != 1) {
        cli_error("eval: %s (see k3 eval --help)", inputs ? "--ids or --text-file, not both"
                                                         : "--ids and --logits are required (or --text-file)");
        return -1;
    }
    if (set->json && !e->kl_base) {
        cli_error("eval: --json goes with --kl-base");
        return -1;
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
    if (check_eval_modes(&set)) return K3_EXIT_USAGE;
    k3_options opt = set.model;
    const cli_eval_settings *e = &set.eval;
    if (!model_dir) model_dir = cli_default_model();
    char model_dir_buf[4096];
    if (!(model_dir = cli_model_dir(model_dir, model_dir_buf, sizeof model_dir_buf))) return K3_EXIT_ERROR;

    k3_error err;
    eval_kl_reader base_in;
    memset(&base_in, 0, sizeof base_in);
    int n = 0;
    int *ids = NULL;
    if (e->kl_base) {
        if (eval_kl_open(&base_in, e->kl_base, &err)) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
        ids = base_in.ids;                /* the reader's: freed by eval_kl_close */
        n = (int)base_in.h.n_tokens;
    } else if (e->text_file) {
        if (!(ids = text_file_ids(model_dir, e->text_file, &n))) return K3_EXIT_ERROR;
    } else if (!(ids = cli_parse_ids("--ids", e->ids, &n))) {
        return K3_EXIT_USAGE;
    }
    int *own_ids = e->kl_base ? NULL : ids;
    if (e->save_base && n < 2) {
        cli_error("eval: --save-base needs at least 2 ids (%s has %d): a position is scored by the id after it",
                  e->text_file ? e->text_file : "--ids", n);
        free(own_ids);
        return K3_EXIT_ERROR;
    }

    opt.ctx_tokens = n;
    /* One chunk of logits (and, with --kl-base, of the base's), allocated
     * and touched before the model opens: the plan counts the process's
     * resident memory when it is made, so the buffers are inside --mem. (A
     * config.json that does not parse is left to k3_model_open to report.) */
    const size_t rows = n < K3_EVAL_CHUNK_TOKENS ? (size_t)n : K3_EVAL_CHUNK_TOKENS;
    int vocab = 0;
    float *logits = NULL, *base_rows = NULL;
    eval_kl_stats stats;
    memset(&stats, 0, sizeof stats);
    if (k3_model_peek_vocab(model_dir, &vocab, &err) == 0 && vocab > 0) {
        if (e->kl_base && (uint32_t)vocab != base_in.h.vocab) {
            cli_error("%s: made with a vocabulary of %u tokens; %s has %d", e->kl_base, base_in.h.vocab, model_dir,
                      vocab);
            eval_kl_close(&base_in);
            return K3_EXIT_ERROR;
        }
        if ((logits = malloc(rows * (size_t)vocab * sizeof(float))))
            memset(logits, 0, rows * (size_t)vocab * sizeof(float));
        if (e->kl_base && (base_rows = malloc(rows * (size_t)vocab * sizeof(float))))
            memset(base_rows, 0, rows * (size_t)vocab * sizeof(float));
    }
    if (!e->logits_path && eval_kl_stats_init(&stats, n - 1)) {
        cli_error("eval: out of memory for %d positions' figures", n - 1);
        free(logits); free(base_rows); free(own_ids); eval_kl_close(&base_in);
        return K3_EXIT_ERROR;
    }
    k3_model *m = k3_model_open(model_dir, &opt, &err);
    if (!m) {
        cli_error("%s", err.msg);
        free(logits); free(base_rows); free(own_ids); eval_kl_close(&base_in); eval_kl_stats_free(&stats);
        return K3_EXIT_ERROR;
    }
    cli_print_plan(m);
    k3_model_info info;
    k3_model_get_info(m, &info);
    int rc = K3_EXIT_ERROR;
    if (info.vocab_size != vocab) {   /* config.json changed under us: size it now */
        free(logits);
        free(base_rows);
        logits = malloc(rows * (size_t)info.vocab_size * sizeof(float));
        base_rows = e->kl_base ? malloc(rows * (size_t)info.vocab_size * sizeof(float)) : NULL;
    }
    k3_session *s = k3_session_new(m, n, &err);
    const char *out_path = e->logits_path ? e->logits_path : e->save_base;
    k3_output out;
    eval_kl_writer base_out;
    eval_job job = {.logits_path = out_path, .base_in = e->kl_base ? &base_in : NULL, .base_rows = base_rows,
                    .stats = &stats};
    if (!logits || !s || (e->kl_base && !base_rows)) {
        cli_error("%s", s ? "out of memory for the logits" : err.msg);
    } else if (e->kl_base && (uint32_t)info.vocab_size != base_in.h.vocab) {
        cli_error("%s: made with a vocabulary of %u tokens; %s has %d", e->kl_base, base_in.h.vocab, model_dir,
                  info.vocab_size);
    } else if (e->kl_base) {
        if (eval_streaming(s, ids, n, logits, info.vocab_size, &job, &err) || eval_kl_check_end(&base_in, &err) ||
            k3_model_finish(m, &err)) {
            cli_error("%s", err.msg);
        } else {
            eval_kl_summary sum;
            eval_kl_summarize(&stats, &sum);
            print_kl(&sum, e->kl_base, &base_in.h, model_dir, !strcmp(base_in.h.fingerprint, k3_model_fingerprint(m)),
                     set.json);
            rc = fflush(stdout) ? K3_EXIT_ERROR : K3_EXIT_OK;
        }
    } else if (k3_output_open(&out, out_path, &err)) {
        cli_error("%s", err.msg);
    } else {
        eval_kl_header h = {.version = EVAL_KL_VERSION, .vocab = (uint32_t)info.vocab_size, .n_tokens = (uint32_t)n};
        snprintf(h.fingerprint, sizeof h.fingerprint, "%s", k3_model_fingerprint(m));
        model_label(model_dir, &info, h.source, sizeof h.source);
        if (e->logits_path) job.logits_out = out.f;
        else job.base_out = &base_out;
        if ((e->save_base && eval_kl_write_begin(&base_out, out.f, out_path, &h, ids, &err)) ||
            eval_streaming(s, ids, n, logits, info.vocab_size, &job, &err) ||
            (e->save_base && eval_kl_write_end(&base_out, &err)) || k3_model_finish(m, &err)) {
            cli_error("%s", err.msg);   /* a failed --trace write is an error too */
            k3_output_abort(&out);
        } else if (k3_output_close(&out, &err)) {
            cli_error("%s", err.msg);
        } else if (e->logits_path) {
            fprintf(stderr, "k3: wrote %s: %d x %d float32\n", out_path, n, info.vocab_size);
            rc = K3_EXIT_OK;
        } else {
            eval_kl_summary sum;
            eval_kl_summarize(&stats, &sum);
            fprintf(stderr, "k3: wrote %s: %d ids, the logits of the %d positions with a next id; PPL %.6f\n",
                    out_path, n, n - 1, sum.ppl);
            rc = K3_EXIT_OK;
        }
    }
    k3_session_free(s);
    k3_model_close(m);
    free(logits);
    free(base_rows);
    free(own_ids);
    eval_kl_close(&base_in);
    eval_kl_stats_free(&stats);
    return rc;
}
