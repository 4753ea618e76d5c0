/* multiline.c - see multiline.h. */
#include <stdlib.h>
#include <string.h>
#include "multiline.h"
#include "text_append.h"

#define QUOTES "\"\"\""

/* Append n bytes to the block. */
static int add(multiline *m, const char *s, size_t n)
{
    return text_append(&m->buf, &m->len, &m->cap, s, n);
}

/* 1 if s[0..n) ends with """. */
static int ends_with_quotes(const char *s, size_t n)
{
    return n >= 3 && !memcmp(s + n - 3, QUOTES, 3);
}

int multiline_feed(multiline *m, const char *line, char **msg)
{
    *msg = NULL;
    size_t n = strlen(line);
    if (!m->open) {
        if (strncmp(line, QUOTES, 3)) {
            *msg = strdup(line);
            return *msg ? 1 : -1;
        }
        line += 3;
        n -= 3;
        m->len = 0;
        if (add(m, "", 0)) return -1;
        m->open = 1;
        if (ends_with_quotes(line, n)) {          /* """text""" on one line */
            if (add(m, line, n - 3)) return -1;
        } else {
            return n && add(m, line, n) ? -1 : 0;
        }
    } else {
        int last = ends_with_quotes(line, n);
        if (!(last && n == 3) && add(m, "\n", 1)) return -1;   /* a closing """ alone adds no line */
        if (add(m, line, last ? n - 3 : n)) return -1;
        if (!last) return 0;
    }
    /* closed: the first line break after an opening """ alone on its line is not content */
    m->open = 0;
    const char *start = m->buf;
    if (*start == '\n') start++;
    *msg = strdup(start);
    m->len = 0;
    return *msg ? 1 : -1;
}

void multiline_reset(multiline *m)
{
    m->open = 0;
    m->len = 0;
}

void multiline_free(multiline *m)
{
    free(m->buf);
    memset(m, 0, sizeof *m);
}
