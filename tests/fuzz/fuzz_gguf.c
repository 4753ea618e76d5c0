/* fuzz_gguf.c - libFuzzer target: the GGUF header reader (engine/formats/gguf.c).
 * An input is a u64 little-endian count of file bytes that follow it, then
 * the first bytes of a GGUF file, as fuzz_safetensors.c takes a shard: the
 * reader parses only the header, so a real file's seed is its header (a
 * Kimi Linear 48B's, 6 MB of metadata and 610 tensor infos) with the data
 * section counted, not carried, and the tensor bounds are still checked
 * against the real file size. A parsed header is then read through every
 * getter, as a loader would, and as a checkpoint (gguf_checkpoint.c): its
 * config from the metadata and shapes, its tensors under k3's names. */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "gguf_checkpoint.h"

/* Touch every value of one key/value through the getters. */
static double read_all(const gguf_kv *kv)
{
    double sum = 0, d;
    uint64_t u;
    int64_t i;
    const char *s;
    size_t len;
    if (gguf_kv_uint(kv, &u) == 0) sum += (double)u;
    if (gguf_kv_int(kv, &i) == 0) sum += (double)i;
    if (gguf_kv_f64(kv, &d) == 0) sum += d;
    if (gguf_kv_string(kv, &s, &len) == 0 && len) sum += (unsigned char)s[len - 1];
    for (uint64_t e = 0; kv->type == GGUF_ARRAY && e < kv->count; e++) {
        if (gguf_kv_array_string(kv, e, &s, &len) == 0 && len) sum += (unsigned char)s[len - 1];
        if (gguf_kv_array_number(kv, e, &d) == 0) sum += d;
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) return 0;
    uint64_t tail = 0;
    for (int i = 7; i >= 0; i--) tail = (tail << 8) | data[i];
    const uint64_t file_bytes = (uint64_t)(size - 8) + tail;
    if (file_bytes < tail) return 0;   /* wrapped: no file is that large */
    gguf_part part;
    memset(&part, 0, sizeof part);
    gguf_tensor *tensors = NULL;
    int64_t n = 0;
    k3_error err;
    volatile double sink = 0;
    if (gguf_parse(data + 8, size - 8, file_bytes, 0, "fuzz.gguf", &part, &tensors, &n, &err) == 0) {
        for (int64_t k = 0; k < part.n_kvs; k++) sink += read_all(&part.kvs[k]);
        for (int64_t t = 0; t < n; t++) sink += (double)tensors[t].bytes;
        part.path = (char *)"fuzz.gguf";
        gguf_file g = {.parts = &part, .n_parts = 1, .tensors = tensors, .n_tensors = n};
        k3_config c;
        st_index ix;
        memset(&ix, 0, sizeof ix);
        if (gguf_file_build_lookup(&g, &err) == 0 && gguf_checkpoint_config(&g, &c, &err) == 0 &&
            gguf_checkpoint_index(&g, &c, &ix, &err) == 0)
            sink += ix.n_tensors;
        st_index_close(&ix);           /* a partial index too */
        sink += gguf_file_type_name(&g)[0];
        k3_strtab_free(&g.by_name);
        part.path = NULL;
    }
    (void)sink;
    for (int64_t t = 0; t < n; t++) free(tensors[t].name);
    free(tensors);
    gguf_part_free_kvs(&part);
    return 0;
}
