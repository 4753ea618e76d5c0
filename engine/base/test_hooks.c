/* test_hooks.c - the one door through which tests reach into the engine's
 * behaviour: environment variables read nowhere else in engine/.
 *
 *   K3_TEST_FAIL_READ=N    the Nth read of the weight reader fails with EIO
 *                          (tests/t_stream.sh: the error reaches the caller,
 *                          the session stays usable)
 *   K3_TEST_SHORT_READS=1  the pread pool reads in 12 KiB pieces, so every
 *                          request takes the short-read path (t_stream.sh)
 *   K3_TEST_FORCE_IDS="I J ..." the first tokens k3_sample returns in the
 *                          process are these ids, in order, whatever the
 *                          logits (sampler.c): teacher forcing, so a random
 *                          model gives a chosen answer (tests/t_think.sh: a
 *                          thinking answer that closes its think block)
 *   K3_TEST_SYSFS_ROOT=DIR /proc and /sys files of the memory limit and the
 *                          CPU quota are read under DIR (cgroup.c;
 *                          tests/test_mem_limit.c)
 *
 * Anything else asked for is a programming error (assert); an unset or
 * non-numeric variable is 0, so normal runs behave as if there were none. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include "k3.h"
#include "k3_util.h"

/* The text of test hook `name`; "" when unset. */
const char *k3_test_hook_text(const char *name)
{
    assert(!strcmp(name, "K3_TEST_SYSFS_ROOT") || !strcmp(name, "K3_TEST_FORCE_IDS"));
    const char *v = getenv(name);
    return v ? v : "";
}

/* The value of test hook `name` as a non-negative integer; 0 when unset. */
int k3_test_hook(const char *name)
{
    assert(!strcmp(name, "K3_TEST_FAIL_READ") || !strcmp(name, "K3_TEST_SHORT_READS"));
    const char *v = getenv(name);
    if (!v) return 0;
    long n = strtol(v, NULL, 10);
    return n > 0 && n < 1000000000 ? (int)n : 0;
}
