/* fuzz_tiktoken.c - libFuzzer target: tiktoken.model (base64 token, rank
 * per line) parsed beside a fixed tokenizer_config.json, then one encode
 * and decode so a vocabulary that loads is also used. Parsed from memory
 * (k3_tokenizer_parse, what k3_tokenizer_load runs on the files' bytes), so
 * an execution costs the parser's work, not a file write. The fixed file
 * comes from K3_FUZZ_MODEL (default tests/out/fuzz_seed_model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"

static char *config;
static size_t config_len;

/* Read the fixed tokenizer_config.json once. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *model = getenv("K3_FUZZ_MODEL") ? getenv("K3_FUZZ_MODEL") : "tests/out/fuzz_seed_model";
    char path[512];
    k3_error err;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", model);
    if (k3_read_file(path, 1u << 24, &config, &config_len, &err)) {
        fprintf(stderr, "fuzz_tiktoken: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_error err;
    k3_tokenizer *t = k3_tokenizer_parse((const char *)data, size, config, config_len, "fuzz", &err);
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
