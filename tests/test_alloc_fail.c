/* test_alloc_fail.c - an allocation failure inside the prompt kernels is not
 * fatal: k3_matmul (padded copy of X, per-thread scratch) and the MXFP4
 * matmul (decoded-row scratch) used to abort() when aligned_alloc returned
 * NULL. Now they compute token by token without scratch, and the logits are
 * the same bits as when memory was plentiful.
 *
 * This binary defines aligned_alloc itself, so the engine objects linked into
 * it call this one, which fails on demand. Each case runs in a child process:
 * an abort() is reported as a FAIL line, not a crash of the test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kernels.h"
#include "test.h"

/* Successful aligned_alloc calls left before they fail (-1: never fail). */
static int aligned_allocs_left = -1;

/* The engine's aligned_alloc for this binary: posix_memalign until told to fail. */
void *aligned_alloc(size_t align, size_t n)
{
    if (aligned_allocs_left == 0) return NULL;
    if (aligned_allocs_left > 0) aligned_allocs_left--;
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, n ? n : 1) ? NULL : p;
}

/* Reproducible pseudo-random bits (xorshift). */
static uint32_t rng = 2463534242u;
static uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* k3_matmul of W with allocations failing after `successes` of them, in a
 * child; exit 0 if Y equals the per-token k3_matvec bits computed first. */
static int child_matmul(const k3_weight *W, const float *X, int n_tokens, int successes)
{
    size_t n_out = (size_t)n_tokens * (size_t)W->rows;
    float *want = malloc(n_out * sizeof *want), *got = malloc(n_out * sizeof *got);
    if (!want || !got) return 2;
    for (int t = 0; t < n_tokens; t++) k3_matvec(want + (size_t)t * W->rows, W, X + (size_t)t * W->cols);
    memset(got, 0xff, n_out * sizeof *got);
    aligned_allocs_left = successes;
    k3_matmul(got, W, X, n_tokens);
    aligned_allocs_left = -1;
    return memcmp(want, got, n_out * sizeof *got) ? 3 : 0;
}

/* Run one case in a child and turn its end into PASS/FAIL. */
static void run_case(const char *name, const k3_weight *W, const float *X, int n_tokens, int successes)
{
    TEST_BEGIN(name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(child_matmul(W, X, n_tokens, successes));
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait failed");
    CHECK(!WIFSIGNALED(status), "the kernel died with signal %d (abort on a failed allocation)",
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(!WIFEXITED(status) || WEXITSTATUS(status) == 0, "exit %d: %s", WEXITSTATUS(status),
          WEXITSTATUS(status) == 3 ? "the logits differ from the per-token matvec" : "setup failed");
    TEST_END();
}

int main(void)
{
    enum { ROWS = 64, COLS = 1000, COLS16 = 1024, TOKENS = 5 };
    /* BF16, cols not a multiple of 16: k3_matmul pads a copy of X first. */
    uint16_t *bf = malloc((size_t)ROWS * COLS16 * sizeof *bf);
    float *X = NULL;
    if (posix_memalign((void **)&X, 64, (size_t)TOKENS * COLS16 * sizeof *X) || !bf) return 1;
    for (size_t i = 0; i < (size_t)ROWS * COLS16; i++) bf[i] = k3_f32_to_bf16((float)((int)(next_u32() % 2001) - 1000) / 997.0f);
    for (size_t i = 0; i < (size_t)TOKENS * COLS16; i++) X[i] = (float)((int)(next_u32() % 2001) - 1000) / 1009.0f;
    k3_weight padded = {.dtype = K3_DT_BF16, .rows = ROWS, .cols = COLS, .data = bf};
    run_case("alloc_fail: k3_matmul without memory for the padded copy of X gives the same bits", &padded, X,
             TOKENS, 0);
    /* BF16, cols a multiple of 16 and X aligned: no copy, the scratch fails. */
    k3_weight aligned = {.dtype = K3_DT_BF16, .rows = ROWS, .cols = COLS16, .data = bf};
    run_case("alloc_fail: k3_matmul without memory for its row-block scratch gives the same bits", &aligned, X,
             TOKENS, 0);
    run_case("alloc_fail: k3_matmul with the copy but no scratch gives the same bits", &padded, X, TOKENS, 1);
    /* MXFP4 (Kimi K3 experts): the decoded-row scratch fails. */
    uint8_t *packed = malloc((size_t)ROWS * COLS16 / 2), *scale = malloc((size_t)ROWS * COLS16 / 32);
    if (!packed || !scale) return 1;
    for (size_t i = 0; i < (size_t)ROWS * COLS16 / 2; i++) packed[i] = (uint8_t)next_u32();
    for (size_t i = 0; i < (size_t)ROWS * COLS16 / 32; i++) scale[i] = (uint8_t)(120 + next_u32() % 12);
    k3_weight mx = {.dtype = K3_DT_MXFP4, .rows = ROWS, .cols = COLS16, .data = packed, .mx_scale = scale};
    run_case("alloc_fail: the MXFP4 matmul without its decode scratch gives the same bits", &mx, X, TOKENS, 0);
    free(bf);
    free(X);
    free(packed);
    free(scale);
    TEST_EXIT();
}
