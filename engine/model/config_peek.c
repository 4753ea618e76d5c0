/* config_peek.c - facts from config.json for callers that need them before
 * opening a model (k3.h: k3_model_peek_vocab), and the weights' type from
 * the tensor headers (k3_model_peek_type). */
#include <stdio.h>
#include "config.h"
#include "forward.h"
#include "k3.h"
#include "weights_type.h"

_Static_assert(K3_EVAL_CHUNK_TOKENS == K3_CHUNK_TOKENS, "k3.h's chunk size is the forward pass's");

/* A caller that allocates before k3_model_open (so the plan, which counts
 * the process's memory when it is made, includes the buffer) needs the
 * vocabulary size first; config.json is small, parsing it is cheap. */
int k3_model_peek_vocab(const char *dir, int *vocab_size, k3_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    k3_config c;
    if (k3_config_load(&c, path, err)) return -1;
    *vocab_size = c.vocab_size;
    return 0;
}

/* `k3 models` lists what it finds without loading anything: the type comes
 * from the shards' headers (or the packed manifest), as the store names it
 * at open. */
int k3_model_peek_type(const char *dir, char *out, size_t cap, k3_error *err)
{
    return weights_peek_type_label(dir, out, cap, err);
}
