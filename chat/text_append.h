/* text_append.h - the one growing byte string of the front ends. */
#ifndef K3_TEXT_APPEND_H
#define K3_TEXT_APPEND_H

#include <stddef.h>

/* Append n bytes to the heap string *text of *len bytes in *cap bytes of
 * storage, growing it by doubling (from 256 bytes), and keep it
 * NUL-terminated. 0, or -1 when memory runs out (the string is unchanged). */
int text_append(char **text, size_t *len, size_t *cap, const char *bytes, size_t n);

#endif
