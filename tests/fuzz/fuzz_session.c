/* fuzz_session.c - libFuzzer target: session (conversation snapshot) files,
 * as `k3 chat --resume` loads them from <db>.snapshots/. A small model
 * (K3_FUZZ_MODEL, default tests/out/fuzz_seed_model) is opened once; each
 * input is written to a memory file (memfd: a regular file with no disk
 * behind it, so an execution costs the reader's work, not a disk write) and
 * loaded through its /proc/self/fd path by k3_session_load itself. With
 * K3_FUZZ_SESSION_SEED=FILE set, the initializer first writes a real
 * session file there (a few tokens evaluated) to seed the corpus. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "k3.h"

static k3_model *model;
static k3_session *session;
static int mem_fd = -1;
static char mem_path[64];

/* Open the model and one session; optionally write a seed file. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("K3_FUZZ_MODEL") ? getenv("K3_FUZZ_MODEL") : "tests/out/fuzz_seed_model";
    k3_options opt = {.n_threads = 1, .ctx_tokens = 64, .skip_tokenizer = 1};
    k3_error err;
    if (!(model = k3_model_open(dir, &opt, &err)) || !(session = k3_session_new(model, 64, &err))) {
        fprintf(stderr, "fuzz_session: %s\n", err.msg);
        abort();
    }
    const char *seed = getenv("K3_FUZZ_SESSION_SEED");
    if (seed) {
        int ids[5] = {1, 2, 3, 4, 5};
        if (k3_session_eval(session, ids, 5, NULL, &err) || k3_session_save(session, seed, &err)) {
            fprintf(stderr, "fuzz_session: seed: %s\n", err.msg);
            abort();
        }
    }
    if ((mem_fd = memfd_create("k3fuzz_session", 0)) < 0) {
        perror("fuzz_session: memfd_create");
        abort();
    }
    snprintf(mem_path, sizeof mem_path, "/proc/self/fd/%d", mem_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ftruncate(mem_fd, 0) || (size && pwrite(mem_fd, data, size, 0) != (ssize_t)size)) abort();
    k3_error err;
    k3_session_load(session, mem_path, &err);
    return 0;
}
