/* tool_draft.c - exactness of draft passes (k3_session_eval_draft), driven by
 * tests/t_draft.sh (not part of k3).
 *
 *   tool_draft MODEL OUTDIR [--mem SIZE] [--quick]
 *
 * For greedy and for seeded sampling (temperature 0.8, top-p 0.9, seed 7):
 * decode N tokens plainly (one k3_session_eval per token, sampling each from
 * the logits), then decode again with draft passes whose drafts are chosen
 * to be all right, all wrong, right for a varying number of tokens then wrong
 * (partial), at draft lengths 3 and K3_DRAFT_MAX_TOKENS - 1 (--quick: the
 * longer only, for the larger models). A pass samples
 * its rows in order with the same sampler and keeps the tokens up to the
 * first draft token sampling did not choose. Checked, bit for bit: every
 * sampled token, every row of logits sampled from (against the plain run's
 * logits at that position), and the whole session at the end (the files
 * k3_session_save writes: KDA conv and recurrent states, MLA cache, tokens,
 * logits). Then the misuse: keep() returning 0 or n + 1 is an error and the
 * session is as before the pass; a pass longer than K3_DRAFT_MAX_TOKENS is
 * refused. Prints PASS/FAIL lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"
#include "tool_common.h"

#define N_TOKENS 24
#define N_PROMPT 11

typedef struct run {
    k3_sampler sp;
    int vocab;
    const int *ref_tokens;     /* the plain run's tokens (NULL while making them) */
    const float *ref_logits;   /* [N_TOKENS][vocab]: the logits each was sampled from */
    int produced;              /* tokens sampled so far */
    int tokens[N_TOKENS];
    int rows_differ;           /* a sampled-from row that is not the plain run's */
    const int *ids;            /* the pass being verified */
} run;

/* Sample the rows in order; stop at the first draft token not chosen, or
 * when N_TOKENS are produced. */
static int keep_sampled(void *user, const float *logits, int n, int vocab)
{
    run *r = user;
    for (int i = 0; i < n; i++) {
        const float *row = logits + (size_t)i * vocab;
        if (memcmp(row, r->ref_logits + (size_t)r->produced * vocab, (size_t)vocab * sizeof(float))) r->rows_differ++;
        int y = k3_sample(&r->sp, row);
        r->tokens[r->produced++] = y;
        if (r->produced == N_TOKENS || i == n - 1 || y != r->ids[i + 1]) return i + 1;
    }
    return n;
}

static int bad_keep_value;
static int keep_bad(void *user, const float *logits, int n, int vocab)
{
    (void)user, (void)logits, (void)vocab;
    return bad_keep_value < 0 ? n + 1 : bad_keep_value;
}

static void sampler_setup(k3_sampler *sp, int seeded, int vocab)
{
    memset(sp, 0, sizeof *sp);
    sp->top_p = 1.0f;
    if (seeded) {
        sp->temperature = 0.8f;
        sp->top_p = 0.9f;
        sp->seed = 7;
    }
    if (k3_sampler_init(sp, vocab)) { fprintf(stderr, "out of memory\n"); exit(1); }
}

/* The draft of a pass at position `at` (the next token to be sampled is
 * ref[at]): policy 0 all right, 1 all wrong, 2 right for (pass % k) tokens. */
static int make_draft(int policy, int pass, int k, const int *ref, int at, int vocab, int *draft)
{
    int n = 0;
    for (int j = 0; j < k && at + j < N_TOKENS; j++) {
        int right = policy == 0 || (policy == 2 && j < pass % (k + 1));
        draft[n++] = right ? ref[at + j] : (ref[at + j] + 1 + j) % vocab;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 3) { fprintf(stderr, "usage: tool_draft MODEL OUTDIR [--mem SIZE] [--quick]\n"); return 2; }
    const char *dir = argv[1], *out = argv[2];
    k3_options o = {.skip_tokenizer = 1, .ctx_tokens = N_PROMPT + N_TOKENS + 16};
    int quick = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--mem") && i + 1 < argc) o.mem_bytes = (uint64_t)k3_parse_size(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
    }
    k3_error err;
    k3_model *m = k3_model_open(dir, &o, &err);
    if (!m) { printf("FAIL draft %s: %s\n", dir, err.msg); return 1; }
    k3_model_info info;
    k3_model_get_info(m, &info);
    const int V = info.vocab_size;
    int prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = (int)((i * 7919u + 13u) % (unsigned)(V > 300 ? V - 258 : V));
    const char *label = o.mem_bytes ? "streamed" : "resident";
    int fails = 0;
    float *ref_logits = malloc((size_t)N_TOKENS * V * sizeof(float));
    char plain_path[4096], draft_path[4096];
    for (int seeded = 0; seeded < 2; seeded++) {
        const char *mode = seeded ? "seeded" : "greedy";
        /* the plain run: sample, feed, one token at a time */
        int ref[N_TOKENS];
        k3_sampler sp;
        sampler_setup(&sp, seeded, V);
        k3_session *s = k3_session_new(m, 0, &err);
        if (!s || k3_session_eval(s, prompt, N_PROMPT, NULL, &err)) { printf("FAIL draft %s: %s\n", dir, err.msg); return 1; }
        for (int i = 0; i < N_TOKENS; i++) {
            memcpy(ref_logits + (size_t)i * V, k3_session_logits(s), (size_t)V * sizeof(float));
            ref[i] = k3_sample(&sp, k3_session_logits(s));
            if (i < N_TOKENS - 1 && k3_session_eval(s, &ref[i], 1, NULL, &err)) {
                printf("FAIL draft %s: %s\n", dir, err.msg);
                return 1;
            }
        }
        snprintf(plain_path, sizeof plain_path, "%s/plain_%s.k3s", out, mode);
        if (k3_session_save(s, plain_path, &err)) { printf("FAIL draft %s: %s\n", dir, err.msg); return 1; }
        k3_sampler_free(&sp);
        static const char *const policy_name[] = {"all accepted", "none accepted", "partially accepted"};
        const int lengths[2] = {3, K3_DRAFT_MAX_TOKENS - 1};
        for (int policy = 0; policy < 3; policy++) {
            for (int li = quick; li < 2; li++) {
                const int k = lengths[li];
                run r = {.vocab = V, .ref_tokens = ref, .ref_logits = ref_logits};
                sampler_setup(&r.sp, seeded, V);
                k3_session_reset(s);
                if (k3_session_eval(s, prompt, N_PROMPT, NULL, &err)) { printf("FAIL draft %s: %s\n", dir, err.msg); return 1; }
                r.tokens[r.produced++] = k3_sample(&r.sp, k3_session_logits(s));
                int passes = 0, kept_drafts = 0, drafted = 0, failed_call = 0;
                while (r.produced < N_TOKENS) {
                    int ids[K3_DRAFT_MAX_TOKENS];
                    ids[0] = r.tokens[r.produced - 1];
                    int nd = make_draft(policy, passes, k, ref, r.produced, V, ids + 1);
                    r.ids = ids;
                    int before = r.produced;
                    if (k3_session_eval_draft(s, ids, 1 + nd, keep_sampled, &r, &err)) {
                        printf("FAIL draft %s %s %s k=%d: %s\n", label, mode, policy_name[policy], k, err.msg);
                        failed_call = 1;
                        break;
                    }
                    drafted += nd;
                    kept_drafts += r.produced - before - 1;
                    passes++;
                }
                if (failed_call) { fails++; continue; }
                snprintf(draft_path, sizeof draft_path, "%s/draft_%s_%d_%d.k3s", out, mode, policy, k);
                int saved = k3_session_save(s, draft_path, &err) == 0;
                int same_tokens = !memcmp(r.tokens, ref, sizeof ref);
                int same_state = saved && files_equal(plain_path, draft_path);
                /* all right: every draft kept but the last one when the last pass reaches N_TOKENS on it */
                int policy_held = policy == 0 ? kept_drafts >= drafted - 1
                                  : policy == 1 ? kept_drafts == 0 : kept_drafts > 0 && kept_drafts < drafted;
                if (same_tokens && same_state && !r.rows_differ && policy_held) {
                    printf("PASS draft %s %s %s k=%d: %d tokens in %d passes (%d of %d drafted kept), tokens, logits and "
                           "session file bit-identical to plain decoding\n",
                           label, mode, policy_name[policy], k, N_TOKENS, passes + 1, kept_drafts, drafted);
                } else {
                    printf("FAIL draft %s %s %s k=%d: tokens %s, sampled-from logits %s (%d rows differ), session file %s, "
                           "%d of %d drafted kept\n",
                           label, mode, policy_name[policy], k, same_tokens ? "same" : "differ",
                           r.rows_differ ? "differ" : "same", r.rows_differ, same_state ? "same" : "differs", kept_drafts,
                           drafted);
                    fails++;
                }
                k3_sampler_free(&r.sp);
            }
        }
        k3_session_free(s);
    }
    /* misuse: a keep count outside 1..n, a pass too long */
    k3_session *s = k3_session_new(m, 0, &err);
    if (!s || k3_session_eval(s, prompt, N_PROMPT, NULL, &err)) { printf("FAIL draft %s: %s\n", dir, err.msg); return 1; }
    snprintf(plain_path, sizeof plain_path, "%s/before_bad.k3s", out);
    k3_session_save(s, plain_path, &err);
    int ids[K3_DRAFT_MAX_TOKENS + 1];
    for (int i = 0; i < K3_DRAFT_MAX_TOKENS + 1; i++) ids[i] = (i * 31 + 5) % V;
    const int bad_values[2] = {0, -1};
    for (int b = 0; b < 2; b++) {
        bad_keep_value = bad_values[b];
        int rc = k3_session_eval_draft(s, ids, 4, keep_bad, NULL, &err);
        snprintf(draft_path, sizeof draft_path, "%s/after_bad.k3s", out);
        k3_session_save(s, draft_path, &err);
        if (rc != 0 && files_equal(plain_path, draft_path) && k3_session_n_tokens(s) == N_PROMPT)
            printf("PASS draft %s keep() = %s is an error, the session as before the pass\n", label,
                   b ? "n + 1" : "0");
        else {
            printf("FAIL draft %s keep() = %s: rc %d, session %s\n", label, b ? "n + 1" : "0", rc,
                   files_equal(plain_path, draft_path) ? "unchanged" : "changed");
            fails++;
        }
    }
    if (k3_session_eval_draft(s, ids, K3_DRAFT_MAX_TOKENS + 1, keep_bad, NULL, &err) != 0 &&
        k3_session_n_tokens(s) == N_PROMPT)
        printf("PASS draft %s a pass of %d tokens is refused: %s\n", label, K3_DRAFT_MAX_TOKENS + 1, err.msg);
    else {
        printf("FAIL draft %s a pass of %d tokens was not refused\n", label, K3_DRAFT_MAX_TOKENS + 1);
        fails++;
    }
    k3_session_free(s);
    free(ref_logits);
    k3_model_close(m);
    return fails ? 1 : 0;
}
