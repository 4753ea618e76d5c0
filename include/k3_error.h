/* k3_error.h - one-line error messages carried out of the engine.
 *
 * Every failure in the engine fills a k3_error with a single line naming the
 * file or input and what is wrong ("model/x.safetensors: header length
 * 9999999 runs past the end of the file (1234 bytes)"). Callers print it
 * as is; nothing in the engine prints on its own. */
#ifndef K3_ERROR_H
#define K3_ERROR_H

typedef struct k3_error {
    char msg[512];
} k3_error;

/* printf-style; a NULL err is allowed (message dropped). Returns -1 so that
 * `return k3_err(err, ...)` reads naturally. */
int k3_err(k3_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
