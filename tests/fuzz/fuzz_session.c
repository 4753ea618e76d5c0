/* fuzz_session.c - libFuzzer target: session (conversation snapshot) files,
 * as `k3 chat --resume` loads them from <db>.snapshots/. A small model
 * (K3_FUZZ_MODEL, default tests/out/fuzz_seed_model) is opened once; each
 * input is loaded into a session from memory (k3_session_load_mem, the
 * reader k3_session_load runs on a file). With K3_FUZZ_SESSION_SEED=FILE
 * set, the initializer first writes a real session file there (a few
 * tokens evaluated) to seed the corpus. */
#include <stdio.h>
#include <stdlib.h>
#include "k3.h"

static k3_model *model;
static k3_session *session;

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
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_error err;
    k3_session_load_mem(session, data, size, "fuzz.k3state", &err);
    return 0;
}
