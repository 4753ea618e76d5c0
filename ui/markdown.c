/* markdown.c - see markdown.h. CommonMark's rules, cut down to what model
 * answers use: a fence is ``` or ~~~ after at most 3 spaces, closed by the
 * same fence character alone on a line; a heading is 1-6 '#' then a space. */
#include <string.h>
#include "markdown.h"

/* The fence character of an opening or closing line, or 0. */
static char fence_char(const char *s, size_t start, size_t end, size_t *after)
{
    size_t i = start;
    while (i < end && i - start < 3 && s[i] == ' ') i++;
    if (i + 3 > end) return 0;
    char c = s[i];
    if ((c != '`' && c != '~') || s[i + 1] != c || s[i + 2] != c) return 0;
    i += 3;
    while (i < end && s[i] == c) i++;
    *after = i;
    return c;
}

size_t md_next_line(const char *s, size_t n, size_t pos, int *in_fence, md_line *out)
{
    size_t end = pos;
    while (end < n && s[end] != '\n') end++;
    memset(out, 0, sizeof *out);
    out->start = out->body = pos;
    out->end = out->body_end = end;
    size_t after = 0;
    char fc = fence_char(s, pos, end, &after);
    if (*in_fence) {
        size_t i = after;
        while (i < end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        if (fc == *in_fence && i == end) {
            out->kind = MD_FENCE_CLOSE;
            *in_fence = 0;
        } else {
            out->kind = MD_CODE;
        }
    } else if (fc) {
        out->kind = MD_FENCE_OPEN;
        *in_fence = fc;
        size_t b = after, e = end;
        while (b < e && (s[b] == ' ' || s[b] == '\t')) b++;
        while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) e--;
        out->body = b;
        out->body_end = e;
    } else {
        size_t i = pos;
        while (i < end && s[i] == '#' && i - pos < 7) i++;
        int level = (int)(i - pos);
        if (level >= 1 && level <= 6 && (i == end || s[i] == ' ')) {
            while (i < end && s[i] == ' ') i++;
            size_t e = end;                       /* optional closing #s */
            while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\r')) e--;
            size_t h = e;
            while (h > i && s[h - 1] == '#') h--;
            if (h < e && (h == i || s[h - 1] == ' ')) e = h;
            while (e > i && s[e - 1] == ' ') e--;
            out->kind = MD_HEADING;
            out->level = level;
            out->body = i;
            out->body_end = e;
        } else {
            out->kind = MD_TEXT;
        }
    }
    return end < n ? end + 1 : n;
}

int md_is_bold_marker(const char *s, size_t i, size_t end)
{
    return i + 1 < end && s[i] == '*' && s[i + 1] == '*';
}

int md_line_has_bold(const char *s, size_t start, size_t end)
{
    int count = 0;
    for (size_t i = start; i < end; i++)
        if (md_is_bold_marker(s, i, end)) { count++; i++; }
    return count > 0 && count % 2 == 0;
}
