/* fuzz_tiktoken.c - libFuzzer target: tiktoken.model (base64 token, rank
 * per line) loaded beside a fixed tokenizer_config.json, then one encode
 * and decode so a vocabulary that loads is also used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "k3_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[112];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/k3fuzz_tiktoken_%d", (int)getpid());
        char cmd[512];
        const char *model = getenv("K3_FUZZ_MODEL") ? getenv("K3_FUZZ_MODEL") : "tests/out/fuzz_seed_model";
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/tokenizer_config.json %s/", dir, model, dir);
        if (system(cmd) != 0) abort();
        snprintf(path, sizeof path, "%s/tiktoken.model", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    k3_error err;
    k3_tokenizer *t = k3_tokenizer_load(dir, &err);
    if (t) {
        const char *text = "Hello, world! 123 <|im_end|> caf\xc3\xa9";
        int n = 0;
        int *ids = k3_tokenizer_encode(t, text, strlen(text), 1, &n, &err);
        if (ids) {
            char *back = k3_tokenizer_decode(t, ids, n);
            free(back);
            free(ids);
        }
        k3_tokenizer_free(t);
    }
    return 0;
}
