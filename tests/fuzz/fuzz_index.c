/* fuzz_index.c - libFuzzer target: model.safetensors.index.json (the shard
 * list and its weight_map) read beside a real shard, as a load does. The
 * shard comes from K3_FUZZ_MODEL (default tests/out/fuzz_seed_model). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/k3fuzz_index_%d", (int)getpid());
        char cmd[512];
        const char *model = getenv("K3_FUZZ_MODEL") ? getenv("K3_FUZZ_MODEL") : "tests/out/fuzz_seed_model";
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/model.safetensors %s/", dir, model, dir);
        if (system(cmd) != 0) abort();
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    st_index ix;
    k3_error err;
    if (st_index_open(&ix, dir, &err) == 0) st_index_close(&ix);
    return 0;
}
