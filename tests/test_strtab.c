/* test_strtab.c - the shared string-keyed open-addressing table
 * (engine/base/strtab.c): every inserted key is found with its own id, absent
 * keys (prefixes, longer strings, the empty string) are not, a repeated key
 * gives back the first id, keys with embedded NULs compare by length, and a
 * key array that moves (realloc) between calls is still read correctly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strtab.h"
#include "test.h"

typedef struct { char (*keys)[24]; size_t *lens; } key_set;

/* Key i of a key_set. */
static const void *set_key(const void *owner, int32_t i, size_t *len)
{
    const key_set *s = owner;
    *len = s->lens[i];
    return s->keys[i];
}

int main(void)
{
    enum { N = 5000 };
    key_set s = {malloc(N * sizeof *s.keys), malloc(N * sizeof *s.lens)};
    for (int i = 0; i < N; i++) s.lens[i] = (size_t)snprintf(s.keys[i], sizeof s.keys[i], "model.layers.%d.w", i);

    TEST_BEGIN("strtab: every key found with its id, absent keys not found");
    k3_strtab t;
    CHECK(k3_strtab_init(&t, N) == 0, "init");
    CHECK(t.mask + 1 >= 2 * N && ((t.mask + 1) & t.mask) == 0, "slots %zu: not a power of two >= 2N", t.mask + 1);
    int bad_insert = 0;
    for (int i = 0; i < N; i++) bad_insert += k3_strtab_insert(&t, i, set_key, &s) != -1;
    CHECK(bad_insert == 0, "%d fresh keys reported as present", bad_insert);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += k3_strtab_find(&t, s.keys[i], s.lens[i], set_key, &s) != i;
    CHECK(wrong == 0, "%d keys found with the wrong id", wrong);
    CHECK(k3_strtab_find(&t, "model.layers.1.", 15, set_key, &s) == -1, "a prefix was found");
    CHECK(k3_strtab_find(&t, "model.layers.1.wx", 17, set_key, &s) == -1, "a longer key was found");
    CHECK(k3_strtab_find(&t, "", 0, set_key, &s) == -1, "the empty key was found");
    CHECK(t.n == N, "count %zu", t.n);
    TEST_END();

    TEST_BEGIN("strtab: a repeated key gives back the first id and is not inserted");
    memcpy(s.keys[N - 1], s.keys[7], sizeof s.keys[7]);
    s.lens[N - 1] = s.lens[7];
    k3_strtab u;
    CHECK(k3_strtab_init(&u, N) == 0, "init");
    for (int i = 0; i < N - 1; i++) k3_strtab_insert(&u, i, set_key, &s);
    CHECK(k3_strtab_insert(&u, N - 1, set_key, &s) == 7, "the repeat did not name id 7");
    CHECK(u.n == N - 1, "the repeat was inserted");
    CHECK(k3_strtab_find(&u, s.keys[7], s.lens[7], set_key, &s) == 7, "lookup after the repeat");
    k3_strtab_free(&u);
    TEST_END();

    TEST_BEGIN("strtab: keys compare by length (embedded NUL) and survive a moved key array");
    k3_strtab v;
    CHECK(k3_strtab_init(&v, 4) == 0, "init");
    memcpy(s.keys[0], "a\0b", 3); s.lens[0] = 3;
    memcpy(s.keys[1], "a", 1); s.lens[1] = 1;
    memcpy(s.keys[2], "a\0c", 3); s.lens[2] = 3;
    for (int i = 0; i < 3; i++) CHECK(k3_strtab_insert(&v, i, set_key, &s) == -1, "key %d reported present", i);
    s.keys = realloc(s.keys, 2 * N * sizeof *s.keys);   /* the owner's array moves */
    CHECK(k3_strtab_find(&v, "a\0c", 3, set_key, &s) == 2 && k3_strtab_find(&v, "a", 1, set_key, &s) == 1 &&
          k3_strtab_find(&v, "a\0b", 3, set_key, &s) == 0 && k3_strtab_find(&v, "a\0", 2, set_key, &s) == -1,
          "lookups by length");
    k3_strtab_free(&v);
    k3_strtab_free(&v);                                  /* free twice: an emptied table */
    CHECK(k3_strtab_find(&v, "a", 1, set_key, &s) == -1, "a freed table found a key");
    TEST_END();

    k3_strtab_free(&t);
    free(s.keys);
    free(s.lens);
    TEST_EXIT();
}
