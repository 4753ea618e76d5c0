/* fnv.c - FNV-1a 64, the one hash the engine uses for names (lookup
 * tables), fingerprints and file checksums. */
#include "k3.h"
#include "k3_util.h"

/* Byte-serial, so simple to reproduce anywhere (tests, other tools); unrolled
 * by eight to keep the loop tight on multi-GiB pack checksums. */
uint64_t k3_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    const uint64_t P = K3_FNV_PRIME;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ p[i]) * P; h = (h ^ p[i + 1]) * P; h = (h ^ p[i + 2]) * P; h = (h ^ p[i + 3]) * P;
        h = (h ^ p[i + 4]) * P; h = (h ^ p[i + 5]) * P; h = (h ^ p[i + 6]) * P; h = (h ^ p[i + 7]) * P;
    }
    for (; i < n; i++) h = (h ^ p[i]) * P;
    return h;
}

/* A NUL-terminated string's FNV-1a 64 from the offset basis (hash tables). */
uint64_t k3_fnv1a64_str(const char *s)
{
    uint64_t h = K3_FNV_INIT;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * K3_FNV_PRIME;
    return h;
}
