/* tool_quant.c - the quantizers (engine/kernels/quant_quantize.c) driven by
 * tests/t_quant.sh (not part of k3).
 *
 *   tool_quant quantize TYPE IN.f32 OUT   IN's little-endian floats (a whole
 *                                         number of TYPE's blocks) -> blocks
 *   tool_quant dequant TYPE IN OUT.f32    blocks -> floats by the scalar
 *                                         reference decoder (quant_types.c)
 *
 * Errors: one line on stderr, exit status 1 (2 for usage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "quant_quantize.h"
#include "quant_types.h"

/* The whole file at path in a malloc'd buffer; *len gets its size. */
static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Write len bytes to path; 0, or -1 with the reason on stderr. */
static int write_all(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "%s: cannot write\n", path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "quantize") && strcmp(argv[1], "dequant"))) {
        fprintf(stderr, "usage: tool_quant quantize|dequant TYPE IN OUT\n");
        return 2;
    }
    const k3_quant_type *t = k3_quant_type_by_name(argv[2]);
    if (!t) {
        fprintf(stderr, "%s: unknown type\n", argv[2]);
        return 1;
    }
    size_t len = 0;
    void *in = read_all(argv[3], &len);
    if (!in) {
        fprintf(stderr, "%s: cannot read\n", argv[3]);
        return 1;
    }
    int rc = 1;
    if (!strcmp(argv[1], "quantize")) {
        int64_t n = (int64_t)(len / sizeof(float));
        uint64_t bytes = 0;
        void *out = NULL;
        if (len % sizeof(float) || k3_quant_bytes(t, (uint64_t)n, &bytes))
            fprintf(stderr, "%s: %zu bytes are not whole %s blocks of floats\n", argv[3], len, t->name);
        else if (!(out = malloc(bytes ? bytes : 1)))
            fprintf(stderr, "out of memory\n");
        else if (k3_quant_quantize(t, in, n, out))
            fprintf(stderr, "%s: k3 cannot write this type\n", t->name);
        else
            rc = write_all(argv[4], out, bytes) ? 1 : 0;
        free(out);
    } else {
        float *out = NULL;
        int64_t n = (int64_t)(len / t->block_bytes * t->block_elems);
        if (len % t->block_bytes)
            fprintf(stderr, "%s: %zu bytes are not whole %s blocks\n", argv[3], len, t->name);
        else if (!(out = malloc(n ? (size_t)n * sizeof *out : 1)))
            fprintf(stderr, "out of memory\n");
        else {
            k3_quant_decode_scalar(t, in, n, out);
            rc = write_all(argv[4], out, (size_t)n * sizeof *out) ? 1 : 0;
        }
        free(out);
    }
    free(in);
    return rc;
}
