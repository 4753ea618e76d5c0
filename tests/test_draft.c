/* test_draft.c - the drafter and the draft-length policy of chat/draft.c on
 * their own: which n-gram match draft_ngram takes (the longest suffix, its
 * latest earlier occurrence, never past the context) and how
 * draft_policy_length answers measured passes (off when drafts are never
 * kept or cost a whole step each, long when they are kept and cheap, a
 * look again after DRAFT_RETRY_PASSES idle passes). */
#include <string.h>
#include "draft.h"
#include "generate.h"
#include "test.h"

static void test_ngram(void)
{
    TEST_BEGIN("draft_ngram: longest suffix, latest occurrence, bounded by the context");
    int d[8], matched;
    /* the 3-gram 1 2 3 occurred once, followed by 9 8 7 */
    const int a[] = {1, 2, 3, 9, 8, 7, 5, 1, 2, 3};
    int n = draft_ngram(a, 10, 4, d, &matched);
    CHECK(n == 4 && matched == 3 && d[0] == 9 && d[1] == 8 && d[2] == 7 && d[3] == 5, "n %d matched %d d0 %d", n, matched, d[0]);
    /* the latest occurrence wins: 4 5 was followed by 6 first, then by 7 */
    const int b[] = {4, 5, 6, 0, 4, 5, 7, 0, 4, 5};
    n = draft_ngram(b, 10, 2, d, &matched);
    CHECK(n == 2 && matched == 3 && d[0] == 7 && d[1] == 0, "n %d matched %d d %d %d", n, matched, d[0], d[1]);
    /* no 3- or 2-gram: the last token alone */
    const int c[] = {8, 1, 2, 3, 4, 5, 8};
    n = draft_ngram(c, 7, 3, d, &matched);
    CHECK(n == 3 && matched == 1 && d[0] == 1 && d[2] == 3, "n %d matched %d", n, matched);
    /* at the end of the context the copy goes on from its own tokens */
    const int e[] = {3, 3, 3};
    n = draft_ngram(e, 3, 5, d, &matched);
    CHECK(n == 5 && matched == 2 && d[0] == 3 && d[4] == 3, "n %d matched %d", n, matched);
    /* nothing repeats: no draft */
    const int f[] = {1, 2, 3, 4};
    n = draft_ngram(f, 4, 5, d, &matched);
    CHECK(n == 0 && matched == 0, "n %d", n);
    n = draft_ngram(f, 1, 5, d, &matched);
    CHECK(n == 0, "a one-token context drafted %d", n);
    TEST_END();
}

/* Prompt lookup (the longest match, up to DRAFT_NGRAM_MAX tokens): a long
 * earlier match beats a later short one, a period continues past the end of
 * the context, and matches longer than DRAFT_NGRAM_MAX tie (the latest wins). */
static void test_prompt_lookup(void)
{
    TEST_BEGIN("draft_ngram: the longest suffix match wins over a later shorter one, up to DRAFT_NGRAM_MAX");
    int d[K3_DRAFT_MAX_TOKENS], matched;
    /* 1 2 3 4 5 was followed by 6 7; later only 3 4 5 occurs, followed by 8 */
    const int a[] = {1, 2, 3, 4, 5, 6, 7, 0, 3, 4, 5, 8, 0, 1, 2, 3, 4, 5};
    int n = draft_ngram(a, (int)(sizeof a / sizeof *a), 2, d, &matched);
    CHECK(n == 2 && matched == 5 && d[0] == 6 && d[1] == 7, "n %d matched %d d %d %d", n, matched, d[0], d[1]);
    /* a line of period 4 repeated: the draft goes on with the period */
    const int b[] = {9, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
    n = draft_ngram(b, (int)(sizeof b / sizeof *b), 7, d, &matched);
    const int want_b[] = {3, 4, 1, 2, 3, 4, 1};
    CHECK(n == 7 && matched == 6 && !memcmp(d, want_b, sizeof want_b), "n %d matched %d d %d %d %d %d %d %d %d", n,
          matched, d[0], d[1], d[2], d[3], d[4], d[5], d[6]);
    /* a paragraph of 40 distinct tokens, then its first 30 again: the match
     * is capped at DRAFT_NGRAM_MAX and the draft is the paragraph's next part */
    int c[70];
    for (int i = 0; i < 40; i++) c[i] = 100 + i;
    for (int i = 0; i < 30; i++) c[40 + i] = 100 + i;
    n = draft_ngram(c, 70, 7, d, &matched);
    CHECK(n == 7 && matched == DRAFT_NGRAM_MAX && d[0] == 130 && d[6] == 136, "n %d matched %d d0 %d", n, matched, d[0]);
    /* two equally long matches: the latest */
    const int e[] = {1, 2, 7, 1, 2, 8, 1, 2};
    n = draft_ngram(e, 8, 1, d, &matched);
    CHECK(n == 1 && matched == 2 && d[0] == 8, "n %d matched %d d0 %d", n, matched, d[0]);
    TEST_END();
}

static void test_policy(void)
{
    draft_policy p;
    TEST_BEGIN("draft_policy: off when drafts are never kept, back after DRAFT_RETRY_PASSES idle passes");
    draft_policy_init(&p);
    draft_policy_update(&p, 0, 0, 10.0);             /* a plain step: 10 ms */
    for (int i = 0; i < 20; i++) draft_policy_update(&p, 3, 0, 14.0);   /* 3 drafts, none kept */
    int k = draft_policy_length(&p, 7);
    CHECK(k == 0, "drafts never kept, length %d", k);
    int retried = 0;
    for (int i = 1; i < DRAFT_RETRY_PASSES - 1 && !retried; i++) retried = draft_policy_length(&p, 7) > 0;
    CHECK(!retried, "retried before %d idle passes", DRAFT_RETRY_PASSES);
    CHECK(draft_policy_length(&p, 7) > 0, "no retry after %d idle passes", DRAFT_RETRY_PASSES);
    TEST_END();

    TEST_BEGIN("draft_policy: off when every token of a pass costs a whole step, even if half are kept");
    draft_policy_init(&p);
    draft_policy_update(&p, 0, 0, 10.0);
    for (int i = 0; i < 20; i++) draft_policy_update(&p, 4, 2, 50.0);
    k = draft_policy_length(&p, 7);
    CHECK(k == 0, "a pass of 5 costs 5 steps, length %d", k);
    TEST_END();

    TEST_BEGIN("draft_policy: costly drafts are looked at again less often (at most 1/DRAFT_RETRY_SHARE of the time)");
    draft_policy_init(&p);
    draft_policy_update(&p, 0, 0, 1.0);
    for (int i = 0; i < 20; i++) draft_policy_update(&p, 2, 0, 21.0);   /* a draft token costs 10 steps */
    int idle = 0;
    while (draft_policy_length(&p, 7) == 0 && idle < 10000) idle++;
    CHECK(idle + 1 >= DRAFT_RETRY_SHARE * 21, "retried after %d idle passes; a retry costs 21 steps", idle);
    CHECK(idle < 10000, "never retried");
    TEST_END();

    TEST_BEGIN("draft_policy: the longest draft when drafts are kept and cheap");
    draft_policy_init(&p);
    draft_policy_update(&p, 0, 0, 10.0);
    for (int i = 0; i < 20; i++) draft_policy_update(&p, 7, 7, 13.5);
    k = draft_policy_length(&p, 7);
    CHECK(k == 7, "length %d", k);
    CHECK(draft_policy_length(&p, 3) == 3, "not bounded by max_draft");
    TEST_END();

    /* what k3 run did on a loaded machine: 0.4 ms steps, the first draft
     * pass held up 44 ms; a running average then priced a draft token at
     * 36 ms and drafting stopped for the rest of the answer */
    TEST_BEGIN("draft_policy: one held-up pass does not turn drafting off");
    draft_policy_init(&p);
    draft_policy_update(&p, 0, 0, 0.4);
    draft_policy_update(&p, 1, 1, 44.0);
    k = draft_policy_length(&p, 7);
    CHECK(k >= 1, "after the held-up pass: length %d (extra %.3f ms, step %.3f ms)", k, p.extra_ms, p.step_ms);
    for (int i = 0; i < 3; i++) draft_policy_update(&p, 0, 0, 0.4 + 0.3 * i);   /* steps, one slow */
    draft_policy_update(&p, 4, 4, 0.6);                                       /* a fast kept pass */
    k = draft_policy_length(&p, 7);
    CHECK(k >= 4, "after a fast kept pass: length %d (extra %.3f ms, step %.3f ms)", k, p.extra_ms, p.step_ms);
    CHECK(p.step_ms == 0.4, "step %.3f ms: the least of the window", p.step_ms);
    for (int i = 0; i < DRAFT_COST_WINDOW; i++) draft_policy_update(&p, 4, 2, 2.0);   /* truly dear: 0.4 ms a token */
    CHECK(p.extra_ms > 0.39 && p.extra_ms < 0.41, "a window of dear passes: extra %.3f ms, want 0.4", p.extra_ms);
    CHECK(draft_policy_length(&p, 7) == 0, "a token costs a whole step and half are kept: length %d",
          draft_policy_length(&p, 7));
    TEST_END();
}

/* The loop rule of chat/generate.c against a plain restatement: a tail of
 * whole cycles, GENERATE_LOOP_MIN_REPEATS of them and GENERATE_LOOP_MIN_TOKENS
 * tokens at least; text that repeats less, or a phrase said twice, runs on. */
static void test_loop_rule(void)
{
    TEST_BEGIN("generate: the loop rule stops whole repeated cycles only");
    int ids[400], n = 0;
    for (int i = 0; i < 20; i++) ids[n++] = 100 + i;               /* a distinct opening */
    int cycle[] = {7, 8, 9};                                        /* "of the sanding" */
    int fired_at = -1;
    for (int r = 0; r < 40 && fired_at < 0; r++)
        for (int j = 0; j < 3 && fired_at < 0; j++) {
            ids[n++] = cycle[j];
            if (generate_loop_period(ids, n)) fired_at = n;
        }
    /* period 3 needs max(4 x 3, 48) = 48 tokens of whole cycles: 16 rounds */
    CHECK(fired_at == 20 + 48, "fired at %d tokens, expected %d", fired_at, 20 + 48);
    CHECK(generate_loop_period(ids, fired_at) == 3, "period %d", generate_loop_period(ids, fired_at));
    CHECK(generate_loop_period(ids, fired_at - 1) == 0, "fired one token early");
    /* a long cycle (a 20-token sentence) needs 4 rounds: 80 tokens */
    n = 0;
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 20; j++) ids[n++] = 500 + j;
    CHECK(generate_loop_period(ids, n) == 20, "4 x 20 tokens: period %d", generate_loop_period(ids, n));
    CHECK(generate_loop_period(ids, n - 20) == 0, "3 x 20 tokens must run on");
    /* counting 1..200: never periodic */
    for (int i = 0; i < 200; i++) ids[i] = i;
    int any = 0;
    for (int m = 1; m <= 200; m++) any |= generate_loop_period(ids, m) != 0;
    CHECK(!any, "a sequence without repeats fired");
    /* one token 47 times: under the 48-token floor; the 48th fires */
    for (int i = 0; i < 48; i++) ids[i] = 5;
    CHECK(generate_loop_period(ids, 47) == 0 && generate_loop_period(ids, 48) == 1, "a run of one token");
    TEST_END();
}

int main(void)
{
    test_ngram();
    test_prompt_lookup();
    test_policy();
    test_loop_rule();
    TEST_EXIT();
}
