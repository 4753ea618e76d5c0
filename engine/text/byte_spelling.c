/* byte_spelling.c - GPT-2's byte-to-unicode spelling of token bytes
 * (tokenizer_build.h), as GGUF vocabularies write them: a reversible map
 * from the 256 byte values to printable code points, so a token's bytes can
 * be stored as a string whatever they are. */
#include <stddef.h>
#include <stdint.h>
#include "tokenizer_build.h"
#include "unicode_class.h"

/* The bytes GPT-2 leaves as themselves: printable ASCII and printable
 * Latin-1 (the soft hyphen U+00AD excluded). */
static int spelled_as_itself(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* The other 68 bytes take U+0100, U+0101, ... in increasing byte order:
 * 0x00-0x20 (33 of them), 0x7F-0xA0 (34), then 0xAD. */
uint32_t k3_byte_spelling_of(uint8_t b)
{
    if (spelled_as_itself(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xa0) return 0x100 + 33 + (b - 0x7fu);
    return 0x100 + 67;   /* 0xAD */
}

/* The byte a code point spells, or -1: the inverse of k3_byte_spelling_of. */
static int byte_of_code_point(uint32_t cp)
{
    if (cp < 0x100) return spelled_as_itself(cp) ? (int)cp : -1;
    uint32_t n = cp - 0x100;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7f + n - 33);
    return n == 67 ? 0xad : -1;
}

/* Decode one UTF-8 character at a time: every character is one byte. */
long k3_byte_spelling_decode(const char *s, size_t len, uint8_t *out)
{
    long w = 0;
    for (size_t i = 0; i < len;) {
        const uint8_t *p = (const uint8_t *)s + i;
        size_t n;
        if (k3_utf8_next(p, len - i, &n) != K3_UTF8_OK) return -1;
        int b = byte_of_code_point(k3_utf8_decode_valid(p, &n));
        if (b < 0) return -1;
        out[w++] = (uint8_t)b;
        i += n;
    }
    return w;
}
