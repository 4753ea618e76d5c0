/* fuzz_history_import.c - libFuzzer target: `k3 history import` JSON into a
 * scratch database (one transaction per input; a conversation that lands
 * is deleted again so the database stays small). The scratch database is
 * opened as k3 opens one, then set to synchronous = OFF: durability is not
 * what is fuzzed, and two fsyncs per input would cost more than the import. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "history.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static history *h;
    if (!h) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/k3fuzz_history_%d.db", (int)getpid());
        unlink(path);
        history_error err;
        if (!(h = history_open(path, 0, &err))) {
            fprintf(stderr, "fuzz_history_import: %s\n", err.msg);
            abort();
        }
        if (hist_exec(h, "PRAGMA synchronous = OFF", &err)) {
            fprintf(stderr, "fuzz_history_import: %s\n", err.msg);
            abort();
        }
    }
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    history_conversation c;
    history_error err;
    int64_t id = history_import_json(h, text, "fuzz.json", &c, &err);
    if (id > 0) {
        history_conv_delete(h, id, &err);
        history_conv_free(&c);
    }
    free(text);
    return 0;
}
