/* fuzz_tokenizer_config.c - libFuzzer target: tokenizer_config.json (the
 * special-token table) loaded beside a fixed small tiktoken.model. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "k3_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[112];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/k3fuzz_tokcfg_%d", (int)getpid());
        char cmd[256];
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/tiktoken.model %s/", dir,
                 getenv("K3_FUZZ_TOKENIZER") ? getenv("K3_FUZZ_TOKENIZER") : "tests/out/fuzz_seed_model", dir);
        if (system(cmd) != 0) return 0;
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    k3_error err;
    k3_tokenizer *t = k3_tokenizer_load(dir, &err);
    if (t) k3_tokenizer_free(t);
    return 0;
}
