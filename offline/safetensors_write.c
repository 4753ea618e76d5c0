/* safetensors_write.c - see safetensors_write.h. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "k3.h"
#include "k3_util.h"
#include "safetensors_write.h"

uint64_t st_out_tensor_bytes(const st_out_tensor *t)
{
    uint64_t n = k3_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}

int st_write_shard(const char *path, const st_out_tensor *tensors, int n, st_fill_fn fill,
                   void *user, k3_error *err)
{
    json_t *root = json_object();
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t offset = 0, max_bytes = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = st_out_tensor_bytes(&tensors[i]);
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(k3_dtype_name(tensors[i].dtype)));
        json_t *shape = json_array();
        for (int d = 0; d < tensors[i].ndim; d++)
            json_array_append_new(shape, json_integer(tensors[i].shape[d]));
        json_object_set_new(e, "shape", shape);
        json_t *offs = json_array();
        json_array_append_new(offs, json_integer((json_int_t)offset));
        json_array_append_new(offs, json_integer((json_int_t)(offset + b)));
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(root, tensors[i].name, e);
        offset += b;
        if (b > max_bytes) max_bytes = b;
    }
    char *header = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!header) return k3_err(err, "%s: out of memory", path);
    size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
    k3_output out;
    if (k3_output_open(&out, path, err)) {
        free(header);
        return -1;
    }
    FILE *f = out.f;
    uint8_t len_bytes[8];
    for (int i = 0; i < 8; i++) len_bytes[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len_bytes, 1, 8, f) == 8 && fwrite(header, 1, hlen, f) == hlen;
    for (size_t i = hlen; i < padded && ok; i++) ok = fputc(' ', f) != EOF;
    free(header);
    void *buf = malloc(max_bytes ? max_bytes : 1);
    if (!buf) ok = 0;
    for (int i = 0; i < n && ok; i++) {
        uint64_t b = st_out_tensor_bytes(&tensors[i]);
        fill(user, i, &tensors[i], buf);
        ok = fwrite(buf, 1, b, f) == b;
    }
    free(buf);
    if (!ok) {
        int e = errno;
        k3_output_abort(&out);
        return k3_err(err, "%s: write failed (disk full?): %s", path, strerror(e));
    }
    return k3_output_close(&out, err);
}
