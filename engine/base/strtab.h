/* strtab.h - one open-addressing table from byte-string keys to the int32
 * ids of the caller's own array (tensor names, token byte strings).
 *
 * The table holds only ids (4 bytes a slot, at most half full); the keys
 * stay where the caller keeps them and are reached through a key_of
 * function, so an arena that grows by realloc never leaves a stale pointer
 * behind. Hash: FNV-1a 64 (k3_fnv1a64), linear probing, no deletion. */
#ifndef K3_STRTAB_H
#define K3_STRTAB_H

#include <stddef.h>
#include <stdint.h>
#include "k3_util.h"

/* The bytes of id's key in owner's array, and their length. */
typedef const void *(*k3_strtab_key_fn)(const void *owner, int32_t id, size_t *len);

typedef struct k3_strtab {
    int32_t *slots;          /* id, or -1 for an empty slot */
    size_t mask;             /* number of slots - 1 (a power of two) */
    size_t n_max;            /* ids it was sized for */
    size_t n;                /* ids inserted */
} k3_strtab;

/* Slots for up to n_max keys (a power of two >= 2 x n_max, at least 16).
 * 0, or -1 when out of memory (t is then empty). */
int k3_strtab_init(k3_strtab *t, size_t n_max);
void k3_strtab_free(k3_strtab *t);

/* The id whose key is (key, len), or -1. */
int32_t k3_strtab_find(const k3_strtab *t, const void *key, size_t len, k3_strtab_key_fn key_of, const void *owner);

/* Insert id under its own key. Returns -1 once inserted, or the id already
 * holding the same key (nothing inserted: the caller decides whether a
 * repeated key is an error). Inserting more than n_max ids is a bug. */
int32_t k3_strtab_insert(k3_strtab *t, int32_t id, k3_strtab_key_fn key_of, const void *owner);

#endif
