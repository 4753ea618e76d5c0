/* fuzz_safetensors.c - libFuzzer target: safetensors header parsing.
 * The input is treated as the first bytes of a shard whose file size is the
 * input size (so data-offset checks run against real bounds). */
#include <stdlib.h>
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_tensor *tensors = NULL;
    int n = 0;
    k3_error err;
    st_parse_header(data, size, size, 0, "fuzz.safetensors", &tensors, &n, &err);
    for (int i = 0; i < n; i++) free(tensors[i].name);
    free(tensors);
    return 0;
}
