/* fuzz_manifest.c - libFuzzer target: the packed-model manifest reader
 * (engine/formats/manifest.c, jansson) and the checks
 * after it. The input becomes DIR/manifest.json of a scratch directory that
 * holds the real .bin files of a packed model (K3_FUZZ_PACKED, default
 * tests/out/fuzz_seed_model.packed), so a manifest close to the real one
 * gets past the parser into the file, run, page and tensor checks. The
 * scratch directory is in /dev/shm (tmpfs): writing each input costs no
 * disk I/O, so an execution costs the reader's own work. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/dev/shm/k3fuzz_manifest_%d", (int)getpid());
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        const char *packed = getenv("K3_FUZZ_PACKED") ? getenv("K3_FUZZ_PACKED") : "tests/out/fuzz_seed_model.packed";
        char cmd[512];
        snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/*.bin %s/", dir, packed, dir);
        if (system(cmd) != 0) abort();
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    k3_manifest m;
    k3_error err;
    if (k3_manifest_load(dir, &m, &err) == 0) k3_manifest_free(&m);
    return 0;
}
