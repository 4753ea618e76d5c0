/* unicode_class.c - UTF-8 classification (validation, replacement decoding)
 * and Python's isspace, for the tokenizer. */
#include "unicode_class.h"

/* Continuation-byte range allowed at position k (1-based) of a sequence led
 * by `lead`. Only the second byte has narrowed ranges: they exclude overlong
 * forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4). This
 * is the Unicode "maximal subpart" table that CPython's decoder follows. */
static void utf8_cont_range(uint8_t lead, int k, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (k != 1) return;
    if (lead == 0xE0) *lo = 0xA0;
    else if (lead == 0xED) *hi = 0x9F;
    else if (lead == 0xF0) *lo = 0x90;
    else if (lead == 0xF4) *hi = 0x8F;
}

/* One table-driven walk so validation, decoding and streaming agree on every
 * byte string, including where a replacement character starts and ends. */
k3_utf8_kind k3_utf8_next(const uint8_t *s, size_t len, size_t *n)
{
    uint8_t lead = s[0];
    size_t need;
    if (lead < 0x80) { *n = 1; return K3_UTF8_OK; }
    if (lead >= 0xC2 && lead <= 0xDF) need = 1;
    else if (lead >= 0xE0 && lead <= 0xEF) need = 2;
    else if (lead >= 0xF0 && lead <= 0xF4) need = 3;
    else { *n = 1; return K3_UTF8_BAD; }
    for (size_t k = 1; k <= need; k++) {
        if (k >= len) { *n = len; return K3_UTF8_SHORT; }
        uint8_t lo, hi;
        utf8_cont_range(lead, (int)k, &lo, &hi);
        if (s[k] < lo || s[k] > hi) { *n = k; return K3_UTF8_BAD; }
    }
    *n = need + 1;
    return K3_UTF8_OK;
}

/* Encode refuses invalid text with the byte offset, so the user can find it. */
size_t k3_utf8_invalid_at(const char *s, size_t len)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        size_t n;
        if (p[i] < 0x80) { i++; continue; }
        if (k3_utf8_next(p + i, len - i, &n) != K3_UTF8_OK) return i;
        i += n;
    }
    return len;
}

/* The long-run splitter counts code points and tests them for space. */
uint32_t k3_utf8_decode_valid(const uint8_t *s, size_t *n)
{
    if (s[0] < 0x80) { *n = 1; return s[0]; }
    if (s[0] < 0xE0) { *n = 2; return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); }
    if (s[0] < 0xF0) {
        *n = 3;
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *n = 4;
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

/* CPython's _PyUnicode_IsWhitespace: bidi classes WS, B, S plus Zs. Differs
 * from regex \s (Unicode White_Space) by U+001C..U+001F. */
int k3_unicode_is_py_space(uint32_t cp)
{
    if (cp >= 0x09 && cp <= 0x0D) return 1;
    if (cp >= 0x1C && cp <= 0x20) return 1;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}
