/* tool_gguf.c - the GGUF reader and the block types driven by tests/t_gguf.sh
 * (not part of k3).
 *
 *   tool_gguf info PATH          every metadata key/value of part 1 and every
 *                                tensor, one line each, in file order (the
 *                                format tests/ref/gguf_np.py expect-info writes)
 *   tool_gguf dequant PATH DIR   each tensor decoded by the scalar reference
 *                                into DIR/<name>.f32 (little-endian floats)
 *
 * A file the reader refuses: its one-line error on stderr, exit status 1. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf.h"
#include "k3.h"

/* A string value as printable ASCII, other bytes (and '\') as \xHH. */
static void print_escaped(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 32 && ch < 127 && ch != '\\') putchar(ch);
        else printf("\\x%02x", ch);
    }
}

/* One number of value type t, printed as gguf_np.py formats it. */
static void print_number(uint32_t t, double v, int64_t i, uint64_t u)
{
    if (t == GGUF_F32) printf("%.9g", v);
    else if (t == GGUF_F64) printf("%.17g", v);
    else if (t == GGUF_U64) printf("%llu", (unsigned long long)u);
    else printf("%lld", (long long)i);
}

/* A scalar kv's value through the typed getters (the getters under test). */
static void print_scalar(const gguf_kv *kv)
{
    double v = 0;
    int64_t i = 0;
    uint64_t u = 0;
    if (kv->type == GGUF_STRING) {
        const char *s;
        size_t len;
        gguf_kv_string(kv, &s, &len);
        print_escaped(s, len);
        return;
    }
    if (kv->type == GGUF_BOOL) {
        printf("%d", kv->value[0]);
        return;
    }
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64) gguf_kv_f64(kv, &v);
    else if (kv->type == GGUF_U64) gguf_kv_uint(kv, &u);
    else gguf_kv_int(kv, &i);
    print_number(kv->type, v, i, u);
}

/* Part 1's key/values, then every tensor: name, type, dims, bytes. */
static int cmd_info(const gguf_file *g)
{
    const gguf_part *p = &g->parts[0];
    for (int64_t k = 0; k < p->n_kvs; k++) {
        const gguf_kv *kv = &p->kvs[k];
        printf("kv %s ", kv->key);
        if (kv->type != GGUF_ARRAY) {
            printf("%s ", gguf_value_type_name(kv->type));
            print_scalar(kv);
        } else if (kv->array_type == GGUF_ARRAY) {
            printf("array[%llu] of array", (unsigned long long)kv->count);
        } else {
            printf("array[%llu] of %s:", (unsigned long long)kv->count, gguf_value_type_name(kv->array_type));
            for (uint64_t e = 0; e < kv->count; e++) {
                putchar(' ');
                if (kv->array_type == GGUF_STRING) {
                    const char *s;
                    size_t len;
                    gguf_kv_array_string(kv, e, &s, &len);
                    print_escaped(s, len);
                } else {
                    double v;
                    gguf_kv_array_number(kv, e, &v);
                    /* each conversion only where it is defined (print_number uses the one of its type) */
                    print_number(kv->array_type, v, fabs(v) < 9e18 ? (int64_t)v : 0, v < 0 || v >= 1.8e19 ? 0 : (uint64_t)v);
                }
            }
        }
        putchar('\n');
    }
    for (int64_t t = 0; t < g->n_tensors; t++) {
        const gguf_tensor *x = &g->tensors[t];
        printf("tensor %s %s ", x->name, x->type->name);
        for (int d = 0; d < x->n_dims; d++) printf("%s%lld", d ? "," : "", (long long)x->dims[d]);
        printf(" %llu\n", (unsigned long long)x->bytes);
    }
    return 0;
}

/* Each tensor read with pread and decoded by the scalar reference. */
static int cmd_dequant(const gguf_file *g, const char *dir)
{
    k3_error err;
    for (int64_t t = 0; t < g->n_tensors; t++) {
        const gguf_tensor *x = &g->tensors[t];
        uint64_t n = x->bytes / x->type->block_bytes * x->type->block_elems;
        uint8_t *raw = malloc(x->bytes ? x->bytes : 1);
        float *out = malloc((n ? n : 1) * sizeof *out);
        if (!raw || !out) { fprintf(stderr, "out of memory\n"); return 1; }
        if (k3_pread_full(g->parts[x->part].fd, raw, x->bytes, x->file_offset, g->parts[x->part].path, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        k3_quant_decode_scalar(x->type, raw, (int64_t)n, out);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.f32", dir, x->name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(out, sizeof *out, n, f) != n || fclose(f)) {
            fprintf(stderr, "%s: cannot write\n", path);
            return 1;
        }
        free(raw);
        free(out);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "info") && strcmp(argv[1], "dequant")) ||
        (!strcmp(argv[1], "dequant") && argc < 4)) {
        fprintf(stderr, "usage: tool_gguf info PATH | dequant PATH DIR\n");
        return 2;
    }
    gguf_file g;
    k3_error err;
    if (gguf_open(&g, argv[2], &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    int rc = !strcmp(argv[1], "info") ? cmd_info(&g) : cmd_dequant(&g, argv[3]);
    gguf_close(&g);
    return rc;
}
