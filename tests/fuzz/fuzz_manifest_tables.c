/* fuzz_manifest_tables.c - libFuzzer target: the reader of a packed
 * directory's tables.bin (engine/formats/manifest_tables.c, layout in
 * engine/formats/manifest.h) and the bounds checks of manifest.c after it.
 * The input becomes DIR/tables.bin of a scratch directory holding the real
 * .bin files and manifest.json of a packed model (K3_FUZZ_PACKED, default
 * tests/out/fuzz_seed_model.packed). So that mutated records get past the
 * checksum into decoding and the bounds checks, the header's checksum is set
 * to the input's own and manifest.json is rewritten to record the input's
 * size and checksum (the checksum refusals are unit-tested in
 * tests/test_manifest.c). The scratch directory is in /dev/shm (tmpfs), so
 * writing each input costs no disk I/O. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "manifest.h"
#include "k3_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], tables[96], manifest[96];
    static json_t *seed;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/k3fuzz_tables_%d", (int)getpid());
        snprintf(tables, sizeof tables, "%s/tables.bin", dir);
        snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
        const char *packed = getenv("K3_FUZZ_PACKED") ? getenv("K3_FUZZ_PACKED") : "tests/out/fuzz_seed_model.packed";
        char cmd[512], path[400];
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/*.bin %s/", dir, packed, dir);
        if (system(cmd) != 0) abort();
        snprintf(path, sizeof path, "%s/manifest.json", packed);
        if (!(seed = json_load_file(path, 0, NULL))) abort();
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    uint64_t sum = size >= K3_TABLES_HEADER_BYTES
                       ? k3_fnv1a64(K3_FNV_INIT, copy + K3_TABLES_HEADER_BYTES, size - K3_TABLES_HEADER_BYTES) : 0;
    if (size >= K3_TABLES_HEADER_BYTES)
        for (int i = 0; i < 8; i++) copy[40 + i] = (uint8_t)(sum >> (8 * i));
    FILE *f = fopen(tables, "wb");
    if (!f) { free(copy); return 0; }
    fwrite(copy, 1, size, f);
    fclose(f);
    free(copy);
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
    json_t *tb = json_object_get(seed, "tables");
    json_object_set_new(tb, "bytes", json_integer((json_int_t)size));
    json_object_set_new(tb, "checksum", json_string(hex));
    if (json_dump_file(seed, manifest, JSON_COMPACT) != 0) return 0;
    k3_manifest m;
    k3_error err;
    if (k3_manifest_load(dir, &m, &err) == 0) k3_manifest_free(&m);
    return 0;
}
