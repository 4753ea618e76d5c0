/* error.c - fill a k3_error (see k3_error.h). */
#include <stdarg.h>
#include <stdio.h>
#include "k3_error.h"

int k3_err(k3_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* one line: fold any newline a caller let through */
        for (char *p = err->msg; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return -1;
}
