/* eval_kl.h - `k3 eval`'s KL divergence mode, as llama.cpp users measure a
 * quantized model (llama-perplexity --kl-divergence-base, then
 * --kl-divergence): a base file holds the ids of a text and the logits the
 * exact model gave at each position; another model's logits over the same
 * ids are then compared with them position by position (KL divergence,
 * top-1 agreement, perplexity of both). docs/COMMANDS.md, "KL divergence",
 * gives the file layout and the definitions. */
#ifndef K3_EVAL_KL_H
#define K3_EVAL_KL_H

#include <stdint.h>
#include <stdio.h>
#include "k3_error.h"

#define EVAL_KL_MAGIC "K3KLBASE"       /* 8 bytes, no NUL */
#define EVAL_KL_VERSION 1
#define EVAL_KL_HEADER_BYTES 152
#define EVAL_KL_MAX_VOCAB (1 << 24)
#define EVAL_KL_MAX_TOKENS (1 << 28)

/* What the header says (after the magic). */
typedef struct eval_kl_header {
    uint32_t version, vocab, n_tokens;
    char fingerprint[32];      /* k3_model_fingerprint of the model that wrote it */
    char source[96];           /* that model's name, weights' type and engine build, for the report */
} eval_kl_header;

/* A base file being written: header, ids, rows, then the checksum. */
typedef struct eval_kl_writer {
    FILE *f;
    const char *path;
    uint64_t hash;             /* FNV-1a 64 of every byte so far */
} eval_kl_writer;

int eval_kl_write_begin(eval_kl_writer *w, FILE *f, const char *path, const eval_kl_header *h, const int *ids,
                        k3_error *err);
int eval_kl_write_rows(eval_kl_writer *w, const float *rows, int n_rows, int vocab, k3_error *err);
int eval_kl_write_end(eval_kl_writer *w, k3_error *err);

/* A base file being read, checked before any row is used. */
typedef struct eval_kl_reader {
    FILE *f;
    const char *path;
    uint64_t hash;
    eval_kl_header h;
    int *ids;                  /* h.n_tokens ids, each in 0..vocab-1 */
} eval_kl_reader;

/* Opens and checks path: magic, version, vocabulary and token counts in
 * range, the file's size exactly what they imply, every id inside the
 * vocabulary. 0, or -1 with err naming the file. */
int eval_kl_open(eval_kl_reader *r, const char *path, k3_error *err);
int eval_kl_read_rows(eval_kl_reader *r, float *rows, int n_rows, k3_error *err);
/* After the last row: the stored checksum against the bytes read. */
int eval_kl_check_end(eval_kl_reader *r, k3_error *err);
void eval_kl_close(eval_kl_reader *r);

/* Per-position figures, kept whole for the median and percentiles. */
typedef struct eval_kl_stats {
    int n, cap;
    double *kld, *nll, *nll_base;
    int64_t same_top;
} eval_kl_stats;

int eval_kl_stats_init(eval_kl_stats *s, int cap);
void eval_kl_stats_free(eval_kl_stats *s);
/* One position: the base's logits and the model's (vocab floats each) and
 * the id that came next in the text. */
void eval_kl_stats_row(eval_kl_stats *s, const float *base, const float *model, int vocab, int next_id);

/* The figures llama-perplexity --kl-divergence prints; "_err" is the
 * standard error of the mean (or of the ratio) as it computes it. */
typedef struct eval_kl_summary {
    int n;
    double ppl, ppl_err, ppl_base, ppl_base_err, ln_ratio, ln_ratio_err;
    double kld_mean, kld_err, kld_median, kld_p90, kld_p99, kld_p999, kld_max, kld_min;
    double same_top, same_top_err;   /* fractions */
} eval_kl_summary;

/* Sorts s->kld (so call it once, at the end). */
void eval_kl_summarize(eval_kl_stats *s, eval_kl_summary *out);

#endif
