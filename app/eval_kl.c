/* eval_kl.c - the KL base file and the statistics of `k3 eval --kl-base`.
 *
 * The base file (little-endian, version 1):
 *   8   magic "K3KLBASE"
 *   4   version, 4 vocab, 4 n_tokens, 4 zero
 *   32  fingerprint of the model that wrote it (NUL-padded text)
 *   96  that model's name, weights' type and engine build (NUL-padded text)
 *   4 x n_tokens   the ids (int32)
 *   4 x vocab x (n_tokens - 1)   float32 logits: row t is the model's
 *                  prediction after ids[0..t], for every t that has a next id
 *   8   FNV-1a 64 of every byte before it
 * The rows are the logits exactly as the model gave them (the bytes `k3
 * eval --logits` writes), not a rounded log-softmax: both sides' log-softmax
 * is then computed here in double from the same float32 inputs, so nothing
 * is lost in storing the base and a model against its own base gives a KL
 * divergence of exactly 0.
 *
 * Precision: per position, everything runs in double over the float32
 * logits, whose differences are exact in double. The divergence is summed
 * in a form without cancellation (eval_kl_stats_row), so its rounding is
 * about 1e-16 of sum q|d| (d: the two rows' logit differences, centred):
 * relative 1e-12 or better even for a position whose divergence is 1e-12,
 * where summing p (log p - log q) directly would be off by 1e-15 x |logit|
 * absolute. The smallest divergence worth reporting is far above either
 * (a quantized type's mean is 1e-5 to 1e-1). llama.cpp stores the base as
 * 16-bit log-probabilities and skips p < e^-16, which costs it about 1e-4
 * per position; k3's figures are its definitions without that loss. */
#include "eval_kl.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "k3_util.h"

/* Write n bytes and add them to the checksum. */
static int write_hashed(eval_kl_writer *w, const void *p, size_t n, k3_error *err)
{
    w->hash = k3_fnv1a64(w->hash, p, n);
    if (fwrite(p, 1, n, w->f) != n) return k3_err(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

/* The 152 header bytes of h, little-endian (the machines k3 builds for are). */
static void header_bytes(const eval_kl_header *h, unsigned char out[EVAL_KL_HEADER_BYTES])
{
    memset(out, 0, EVAL_KL_HEADER_BYTES);
    memcpy(out, EVAL_KL_MAGIC, 8);
    uint32_t words[4] = {h->version, h->vocab, h->n_tokens, 0};
    memcpy(out + 8, words, sizeof words);
    memcpy(out + 24, h->fingerprint, sizeof h->fingerprint);
    memcpy(out + 56, h->source, sizeof h->source);
}

int eval_kl_write_begin(eval_kl_writer *w, FILE *f, const char *path, const eval_kl_header *h, const int *ids,
                        k3_error *err)
{
    w->f = f;
    w->path = path;
    w->hash = K3_FNV_INIT;
    unsigned char head[EVAL_KL_HEADER_BYTES];
    header_bytes(h, head);
    if (write_hashed(w, head, sizeof head, err)) return -1;
    for (uint32_t i = 0; i < h->n_tokens; i++) {
        int32_t id = ids[i];
        if (write_hashed(w, &id, sizeof id, err)) return -1;
    }
    return 0;
}

int eval_kl_write_rows(eval_kl_writer *w, const float *rows, int n_rows, int vocab, k3_error *err)
{
    return write_hashed(w, rows, (size_t)n_rows * (size_t)vocab * sizeof(float), err);
}

int eval_kl_write_end(eval_kl_writer *w, k3_error *err)
{
    uint64_t sum = w->hash;
    if (fwrite(&sum, sizeof sum, 1, w->f) != 1) return k3_err(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

/* Read exactly n bytes and add them to the checksum; a short read is a
 * truncated file (the size was checked, so only a file changing under us). */
static int read_hashed(eval_kl_reader *r, void *p, size_t n, k3_error *err)
{
    if (fread(p, 1, n, r->f) != n) return k3_err(err, "%s: truncated (changed while being read?)", r->path);
    r->hash = k3_fnv1a64(r->hash, p, n);
    return 0;
}

/* Copy a NUL-padded text field, making sure it ends in a NUL. */
static void text_field(char *dst, const unsigned char *src, size_t n)
{
    memcpy(dst, src, n);
    dst[n - 1] = 0;
}

int eval_kl_open(eval_kl_reader *r, const char *path, k3_error *err)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->hash = K3_FNV_INIT;
    r->f = fopen(path, "rb");
    if (!r->f) return k3_err(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(r->f), &st) || !S_ISREG(st.st_mode)) {
        eval_kl_close(r);
        return k3_err(err, "%s: not a regular file", path);
    }
    unsigned char head[EVAL_KL_HEADER_BYTES];
    size_t got = fread(head, 1, sizeof head, r->f);
    if (got < 8 || memcmp(head, EVAL_KL_MAGIC, 8)) {
        eval_kl_close(r);
        return k3_err(err, "%s: not a k3 KL base file (k3 eval --save-base writes one)", path);
    }
    if (got < sizeof head) {
        eval_kl_close(r);
        return k3_err(err, "%s: truncated: %zu bytes, shorter than the %d-byte header", path, got,
                      EVAL_KL_HEADER_BYTES);
    }
    r->hash = k3_fnv1a64(r->hash, head, sizeof head);
    uint32_t words[4];
    memcpy(words, head + 8, sizeof words);
    r->h.version = words[0];
    r->h.vocab = words[1];
    r->h.n_tokens = words[2];
    text_field(r->h.fingerprint, head + 24, sizeof r->h.fingerprint);
    text_field(r->h.source, head + 56, sizeof r->h.source);
    int bad = 0;
    if (r->h.version != EVAL_KL_VERSION)
        bad = k3_err(err, "%s: KL base version %u; this k3 reads version %d", path, r->h.version, EVAL_KL_VERSION);
    else if (r->h.vocab < 2 || r->h.vocab > EVAL_KL_MAX_VOCAB)
        bad = k3_err(err, "%s: vocabulary of %u tokens is outside 2..%d", path, r->h.vocab, EVAL_KL_MAX_VOCAB);
    else if (r->h.n_tokens < 2 || r->h.n_tokens > EVAL_KL_MAX_TOKENS)
        bad = k3_err(err, "%s: %u tokens is outside 2..%d", path, r->h.n_tokens, EVAL_KL_MAX_TOKENS);
    if (bad) {
        eval_kl_close(r);
        return -1;
    }
    const uint64_t want = EVAL_KL_HEADER_BYTES + 4ull * r->h.n_tokens +
                          4ull * r->h.vocab * (r->h.n_tokens - 1ull) + 8;
    if ((uint64_t)st.st_size != want) {
        k3_err(err, "%s: %s: %lld bytes, where %u tokens of a %u-token vocabulary make %llu", path,
               (uint64_t)st.st_size < want ? "truncated" : "longer than its header says", (long long)st.st_size,
               r->h.n_tokens, r->h.vocab, (unsigned long long)want);
        eval_kl_close(r);
        return -1;
    }
    r->ids = malloc(sizeof(int) * r->h.n_tokens);
    if (!r->ids) {
        eval_kl_close(r);
        return k3_err(err, "%s: out of memory for %u ids", path, r->h.n_tokens);
    }
    for (uint32_t i = 0; i < r->h.n_tokens; i++) {
        int32_t id;
        if (read_hashed(r, &id, sizeof id, err)) {
            eval_kl_close(r);
            return -1;
        }
        if (id < 0 || (uint32_t)id >= r->h.vocab) {
            k3_err(err, "%s: id %d at position %u is outside its vocabulary of %u", path, (int)id, i, r->h.vocab);
            eval_kl_close(r);
            return -1;
        }
        r->ids[i] = id;
    }
    return 0;
}

int eval_kl_read_rows(eval_kl_reader *r, float *rows, int n_rows, k3_error *err)
{
    return read_hashed(r, rows, (size_t)n_rows * r->h.vocab * sizeof(float), err);
}

int eval_kl_check_end(eval_kl_reader *r, k3_error *err)
{
    uint64_t stored;
    if (fread(&stored, sizeof stored, 1, r->f) != 1) return k3_err(err, "%s: truncated before its checksum", r->path);
    if (stored != r->hash) return k3_err(err, "%s: checksum mismatch: the file was changed after it was written", r->path);
    return 0;
}

void eval_kl_close(eval_kl_reader *r)
{
    if (r->f) fclose(r->f);
    free(r->ids);
    r->f = NULL;
    r->ids = NULL;
}

int eval_kl_stats_init(eval_kl_stats *s, int cap)
{
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->kld = malloc(sizeof(double) * (size_t)cap);
    s->nll = malloc(sizeof(double) * (size_t)cap);
    s->nll_base = malloc(sizeof(double) * (size_t)cap);
    if (s->kld && s->nll && s->nll_base) return 0;
    eval_kl_stats_free(s);
    return -1;
}

void eval_kl_stats_free(eval_kl_stats *s)
{
    free(s->kld);
    free(s->nll);
    free(s->nll_base);
    memset(s, 0, sizeof *s);
}

/* log(sum exp(x)) of a row in double, and its argmax (the first on ties,
 * as numpy's argmax). */
static double log_sum_exp(const float *x, int n, int *argmax)
{
    int top = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[top]) top = i;
    const double max = x[top];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - max);
    *argmax = top;
    return max + log(sum);
}

void eval_kl_stats_row(eval_kl_stats *s, const float *base, const float *model, int vocab, int next_id)
{
    if (s->n >= s->cap) return;
    int top_base, top_model;
    const double lse_base = log_sum_exp(base, vocab, &top_base);
    const double lse_model = log_sum_exp(model, vocab, &top_model);
    /* KL(P_base || P_model) = sum q_i d_i + log(sum q_i e^-d_i), q the
     * base's softmax and d_i = (x_base - x_model)_i - m for any constant m
     * (the log-sum-exps cancel). m = the difference at the base's top
     * token keeps d small, and log1p(sum q expm1(-d)) keeps the second
     * term's rounding relative to d rather than to the logits: two close
     * distributions' divergence (~d^2/2) is not lost under rounding of
     * order 1e-16 x |logit|. q is normalised by its computed sum; identical
     * rows give d = 0 and a divergence of exactly 0. */
    const double m = (double)base[top_base] - (double)model[top_base];
    double q_sum = 0, qd = 0, q_expm1 = 0;
    for (int i = 0; i < vocab; i++) {
        const double q = exp((double)base[i] - lse_base);
        const double d = ((double)base[i] - (double)model[i]) - m;
        q_sum += q;
        qd += q * d;
        q_expm1 += q * expm1(-d);
    }
    const double kl = qd / q_sum + log1p(q_expm1 / q_sum);
    s->kld[s->n] = kl;
    s->nll[s->n] = lse_model - model[next_id];
    s->nll_base[s->n] = lse_base - base[next_id];
    s->same_top += top_base == top_model;
    s->n++;
}

/* Mean of v[0..n) and the standard error of that mean (population variance
 * over n - 1, as llama-perplexity's mean_and_uncertainty), in two passes. */
static void mean_and_err(const double *v, int n, double *mean, double *err)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    *mean = sum / n;
    double sq = 0;
    for (int i = 0; i < n; i++) sq += (v[i] - *mean) * (v[i] - *mean);
    *err = n > 1 ? sqrt(sq / n / (n - 1)) : 0;
}

/* The covariance of the two means (llama-perplexity's covariance()). */
static double mean_covariance(const double *a, double ma, const double *b, double mb, int n)
{
    if (n < 2) return 0;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (a[i] - ma) * (b[i] - mb);
    return sum / n / (n - 1);
}

/* The value at fraction f of sorted v, interpolated linearly between the
 * two nearest (llama-perplexity's percentile()). */
static double percentile(const double *v, int n, double f)
{
    if (f <= 0) return v[0];
    if (f >= 1) return v[n - 1];
    double p = f * (n - 1);
    int ip = (int)p;
    p -= ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void eval_kl_summarize(eval_kl_stats *s, eval_kl_summary *o)
{
    memset(o, 0, sizeof *o);
    const int n = o->n = s->n;
    if (n < 1) return;
    double m_nll, e_nll, m_base, e_base;
    mean_and_err(s->nll, n, &m_nll, &e_nll);
    mean_and_err(s->nll_base, n, &m_base, &e_base);
    o->ppl = exp(m_nll);
    o->ppl_err = o->ppl * e_nll;
    o->ppl_base = exp(m_base);
    o->ppl_base_err = o->ppl_base * e_base;
    double diff_sum = 0;   /* the mean of the differences: two close means would cancel */
    for (int i = 0; i < n; i++) diff_sum += s->nll[i] - s->nll_base[i];
    o->ln_ratio = diff_sum / n;
    const double var = e_nll * e_nll + e_base * e_base - 2 * mean_covariance(s->nll, m_nll, s->nll_base, m_base, n);
    o->ln_ratio_err = var > 0 ? sqrt(var) : 0;
    mean_and_err(s->kld, n, &o->kld_mean, &o->kld_err);
    qsort(s->kld, (size_t)n, sizeof(double), cmp_double);
    o->kld_median = n % 2 ? s->kld[n / 2] : 0.5 * (s->kld[n / 2] + s->kld[n / 2 - 1]);
    o->kld_p90 = percentile(s->kld, n, 0.90);
    o->kld_p99 = percentile(s->kld, n, 0.99);
    o->kld_p999 = percentile(s->kld, n, 0.999);
    o->kld_max = s->kld[n - 1];
    o->kld_min = s->kld[0];
    o->same_top = (double)s->same_top / n;
    o->same_top_err = n > 1 ? sqrt(o->same_top * (1 - o->same_top) / (n - 1)) : 0;
}
