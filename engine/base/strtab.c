/* strtab.c - the string-keyed open-addressing table (see strtab.h): the one
 * lookup the tokenizer, the tokenizer trainer, the safetensors index and the
 * packed manifest share. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"
#include "strtab.h"

/* Half full at most, so a probe run stays short and always ends at an empty slot. */
int k3_strtab_init(k3_strtab *t, size_t n_max)
{
    memset(t, 0, sizeof *t);
    size_t slots = 16;
    while (slots < n_max * 2) {
        if (slots > SIZE_MAX / 4 / sizeof *t->slots) return -1;
        slots *= 2;
    }
    t->slots = malloc(slots * sizeof *t->slots);
    if (!t->slots) return -1;
    memset(t->slots, 0xff, slots * sizeof *t->slots);
    t->mask = slots - 1;
    t->n_max = n_max;
    return 0;
}

/* Safe on an emptied or never-initialised (zeroed) table. */
void k3_strtab_free(k3_strtab *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* Walk the probe run of key until its id or an empty slot; *at is that slot. */
static int32_t probe(const k3_strtab *t, const void *key, size_t len, k3_strtab_key_fn key_of, const void *owner,
                     size_t *at)
{
    size_t i = (size_t)k3_fnv1a64(K3_FNV_INIT, key, len) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        int32_t id = t->slots[i];
        if (id < 0) break;
        size_t klen;
        const void *k = key_of(owner, id, &klen);
        if (klen == len && !memcmp(k, key, len)) { *at = i; return id; }
    }
    *at = i;
    return -1;
}

/* A zeroed table (never initialised) finds nothing. */
int32_t k3_strtab_find(const k3_strtab *t, const void *key, size_t len, k3_strtab_key_fn key_of, const void *owner)
{
    if (!t->slots) return -1;
    size_t at;
    return probe(t, key, len, key_of, owner, &at);
}

/* The free slot the probe stopped at takes the id. */
int32_t k3_strtab_insert(k3_strtab *t, int32_t id, k3_strtab_key_fn key_of, const void *owner)
{
    assert(t->slots && id >= 0 && t->n < t->n_max);   /* sized by init; half full keeps probes ending */
    size_t len, at;
    const void *key = key_of(owner, id, &len);
    int32_t old = probe(t, key, len, key_of, owner, &at);
    if (old >= 0) return old;
    t->slots[at] = id;
    t->n++;
    return -1;
}
