/* version.c - `k3 --version`: the release, the source it was built from
 * (git describe, baked in by the Makefile), the compiler flags and the
 * kernels the engine uses, so a bug report says exactly which binary. */
#include <stdio.h>
#include "cli.h"
#include "k3.h"
#include "k3_util.h"

#ifndef K3_GIT_DESCRIBE
#define K3_GIT_DESCRIBE "unknown"
#endif
#ifndef K3_BUILD_FLAGS
#define K3_BUILD_FLAGS "unknown"
#endif

int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("k3 %s\n", K3_VERSION);
    printf("source:  %s\n", K3_GIT_DESCRIBE);
    printf("built:   %s %s with %s\n", __DATE__, __TIME__, K3_BUILD_FLAGS);
    printf("kernels: %s\n", k3_kernels_name());
    return K3_EXIT_OK;
}
