/* fuzz_safetensors.c - libFuzzer target: safetensors header parsing.
 * An input is a u64 little-endian count of file bytes that follow it, then
 * the first bytes of a shard: the parser reads only the header, so a real
 * shard's seed is its length field and header (its real size) with the
 * data section counted, not carried, and every execution costs the
 * parser's own work while the data-offset checks still run against the
 * real file size. */
#include <stdlib.h>
#include <string.h>
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    uint64_t tail = 0;
    for (int i = 7; i >= 0; i--) tail = (tail << 8) | data[i];
    const uint64_t file_bytes = (uint64_t)(size - 8) + tail;
    if (file_bytes < tail) return 0;   /* wrapped: no file is that large */
    st_tensor *tensors = NULL;
    int n = 0;
    k3_error err;
    st_parse_header(data + 8, size - 8, file_bytes, 0, "fuzz.safetensors", &tensors, &n, &err);
    for (int i = 0; i < n; i++) free(tensors[i].name);
    free(tensors);
    return 0;
}
