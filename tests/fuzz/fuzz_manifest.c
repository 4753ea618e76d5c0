/* fuzz_manifest.c - libFuzzer target: the packed-model manifest reader
 * (engine/manifest.c, a hand-written streaming JSON parser). The input
 * becomes DIR/manifest.json of a scratch directory; parse and checks run
 * as in a real load. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64], path[96];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/k3fuzz_manifest_%d", (int)getpid());
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
        if (system(cmd) != 0) return 0;
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
