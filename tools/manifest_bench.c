/* manifest_bench.c DIR - time k3_manifest_load on a packed directory (e.g.
 * one written by tools/big_manifest.py) and report the heap it peaked at:
 * the figures of docs/PERFORMANCE.md, "Manifest".
 * Peak memory is VmHWM of this process, which holds nothing else. */
#include <stdio.h>
#include <string.h>
#include "manifest.h"
#include "k3_util.h"

/* VmHWM or VmRSS from /proc/self/status, in MiB. */
static double status_mib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) sscanf(line + n, ": %ld", &kb);
    if (f) fclose(f);
    return kb / 1024.0;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: manifest_bench DIR\n"); return 2; }
    double before = status_mib("VmRSS");
    uint64_t t0 = k3_now_ns();
    k3_manifest m;
    k3_error err;
    if (k3_manifest_load(argv[1], &m, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double ms = (k3_now_ns() - t0) / 1e6;
    printf("manifest: %d tensors, %d layers, %d pages: load %.0f ms, peak RSS %.1f MiB (%.1f MiB before), "
           "RSS after %.1f MiB\n", m.n_tensors, m.n_layers, m.n_pages, ms, status_mib("VmHWM"), before,
           status_mib("VmRSS"));
    k3_manifest_free(&m);
    return 0;
}
