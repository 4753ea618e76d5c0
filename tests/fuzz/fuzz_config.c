/* fuzz_config.c - libFuzzer target: config.json parsing and validation. */
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    k3_config c;
    k3_error err;
    k3_config_parse(&c, (const char *)data, size, "fuzz/config.json", &err);
    return 0;
}
