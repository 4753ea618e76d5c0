/* text_append.c - the one growing byte string of the front ends: answers as
 * they stream, request bodies, transcript entries, pasted blocks. One
 * definition, so the doubling and the terminator are written once. */
#include <stdlib.h>
#include <string.h>

#include "text_append.h"

/* Doubling keeps a streamed answer of n pieces at O(n) copies; the extra
 * byte keeps the string usable as a C string at every step. */
int text_append(char **text, size_t *len, size_t *cap, const char *bytes, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 256;
        while (grown_cap < *len + n + 1) grown_cap *= 2;
        char *grown = realloc(*text, grown_cap);
        if (!grown) return -1;
        *text = grown;
        *cap = grown_cap;
    }
    if (n) memcpy(*text + *len, bytes, n);
    *len += n;
    (*text)[*len] = 0;
    return 0;
}
