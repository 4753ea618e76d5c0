/* fuzz_gguf_vocab.c - libFuzzer target: the tokenizer from a GGUF's
 * vocabulary (engine/formats/gguf_vocab.c) on top of the header reader
 * (engine/formats/gguf.c). An input is what fuzz_gguf.c takes: a u64
 * little-endian count of file bytes that follow it, then the first bytes of
 * a GGUF file. A header that parses goes through gguf_tokenizer_from_part;
 * a vocabulary that loads is used once (encode with specials allowed, then
 * decode), so what it built is also read. Seeds: the vocabulary of a
 * generated tiny model and of models/k3-mini as llama.cpp writes them. */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "gguf_vocab.h"
#include "k3_tokenizer.h"

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
    if (gguf_parse(data + 8, size - 8, file_bytes, 0, "fuzz.gguf", &part, &tensors, &n, &err) == 0) {
        k3_tokenizer *t = gguf_tokenizer_from_part(&part, "fuzz.gguf", &err);
        if (t) {
            const char *text = "Hello, world! 123 <|im_end|> caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80";
            int n_ids = 0;
            int *ids = k3_tokenizer_encode(t, text, strlen(text), 1, &n_ids, &err);
            if (ids) {
                free(k3_tokenizer_decode(t, ids, n_ids));
                free(ids);
            }
            k3_tokenizer_free(t);
        }
    }
    for (int64_t k = 0; k < n; k++) free(tensors[k].name);
    free(tensors);
    gguf_part_free_kvs(&part);
    return 0;
}
