/* multiline.h - ollama's """ multi-line input, for both front ends: a line
 * that starts with """ opens a message, every following line is part of it,
 * and a line that ends with """ closes and sends it ("""one line""" is a
 * message on its own). Lines without """ outside a block pass through. */
#ifndef K3_MULTILINE_H
#define K3_MULTILINE_H

#include <stddef.h>

typedef struct multiline {
    char *buf;
    size_t len, cap;
    int open;                    /* inside a """ block */
} multiline;

/* Feed one entered line. Returns 1 with *msg (malloc'd, the caller frees)
 * when a message is complete, 0 when the block goes on (*msg = NULL), -1
 * when out of memory. */
int multiline_feed(multiline *m, const char *line, char **msg);
/* Drop a half-entered block (Ctrl-C). */
void multiline_reset(multiline *m);
void multiline_free(multiline *m);

#endif
