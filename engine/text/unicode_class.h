/* unicode_class.h - UTF-8 sequence classification and the few character
 * classes the tokenizer needs outside its regex.
 *
 * One primitive, k3_utf8_next, drives validation (encode refuses invalid
 * text), whole-text decoding with U+FFFD replacement (the same maximal-subpart
 * rule as Python's errors="replace") and the streaming detokenizer (which
 * holds back a valid but incomplete tail). */
#ifndef K3_UNICODE_CLASS_H
#define K3_UNICODE_CLASS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    K3_UTF8_OK,     /* s[0..*n) is one whole valid character */
    K3_UTF8_BAD,    /* s[0..*n) is a maximal invalid subpart: one U+FFFD */
    K3_UTF8_SHORT   /* all len bytes are a valid prefix of a longer character */
} k3_utf8_kind;

/* Classify the byte sequence starting at s[0] (len >= 1). */
k3_utf8_kind k3_utf8_next(const uint8_t *s, size_t len, size_t *n);

/* Offset of the first byte that is not part of a valid character, or len if
 * the whole buffer is valid UTF-8 (a truncated final character is invalid). */
size_t k3_utf8_invalid_at(const char *s, size_t len);

/* Code point of the valid character at s (as accepted by k3_utf8_next); its
 * byte length goes to *n. */
uint32_t k3_utf8_decode_valid(const uint8_t *s, size_t *n);

/* Python's str.isspace(): the split rule of tiktoken's long-run workaround
 * (docs/MODEL.md, "Tokenizer and chat format") is written with it, so it is not \s. */
int k3_unicode_is_py_space(uint32_t cp);

/* The UTF-8 encoding of U+FFFD, written for every invalid subpart. */
#define K3_UTF8_REPLACEMENT "\xEF\xBF\xBD"

#endif
