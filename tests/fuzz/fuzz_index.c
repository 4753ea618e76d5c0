/* fuzz_index.c - libFuzzer target: model.safetensors.index.json (the shard
 * list and its weight_map) read beside a real shard, as a load does. The
 * index text is given from memory (st_index_open_text, what st_index_open
 * runs on the file's bytes); the shard is the real one of K3_FUZZ_MODEL
 * (default tests/out/fuzz_seed_model), opened and parsed for every input
 * that names it, as a load does. */
#include <stdlib.h>
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *dir;
    if (!dir) dir = getenv("K3_FUZZ_MODEL") ? getenv("K3_FUZZ_MODEL") : "tests/out/fuzz_seed_model";
    st_index ix;
    k3_error err;
    if (st_index_open_text(&ix, dir, (const char *)data, size, &err) == 0) st_index_close(&ix);
    return 0;
}
