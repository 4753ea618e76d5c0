/* fuzz_tokenizer_config.c - libFuzzer target: tokenizer_config.json (the
 * special-token table). A tokenizer is loaded once from the seed model
 * (K3_FUZZ_TOKENIZER, default tests/out/fuzz_seed_model); each input then
 * replaces its special-token table from memory
 * (k3_tokenizer_parse_specials, the second half of every load), so an
 * execution costs the config parser's work, not a re-parse of the
 * vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include "k3_tokenizer.h"

static k3_tokenizer *tok;

/* Load the fixed tokenizer once. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *model = getenv("K3_FUZZ_TOKENIZER") ? getenv("K3_FUZZ_TOKENIZER") : "tests/out/fuzz_seed_model";
    k3_error err;
    if (!(tok = k3_tokenizer_load(model, &err))) {
        fprintf(stderr, "fuzz_tokenizer_config: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_error err;
    if (k3_tokenizer_parse_specials(tok, (const char *)data, size, "fuzz", &err) == 0)
        k3_tokenizer_special_id(tok, "<|im_end|>");
    return 0;
}
