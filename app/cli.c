/* cli.c - helpers shared by the subcommands: errors, number and id parsing,
 * whole-file reads. Each prints its own one-line message so callers only
 * need to return the right exit code. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("k3: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        cli_error("%s: expected an integer in [%lld, %lld], got '%s'", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        cli_error("%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int *cli_parse_ids(const char *opt, const char *s, int *n_out)
{
    size_t cap = 16, n = 0;
    int *ids = malloc(cap * sizeof *ids);
    if (!ids) return NULL;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT_MAX ||
            (*end && *end != ' ' && *end != ',' && *end != '\t' && *end != '\n' && *end != '\r')) {
            cli_error("%s: expected token ids separated by spaces or commas, bad item near '%.20s'", opt, p);
            free(ids);
            return NULL;
        }
        if (n == cap) {
            cap *= 2;
            int *grown = realloc(ids, cap * sizeof *ids);
            if (!grown) { free(ids); return NULL; }
            ids = grown;
        }
        ids[n++] = (int)v;
        p = end;
    }
    if (n == 0) {
        cli_error("%s: no token ids given", opt);
        free(ids);
        return NULL;
    }
    *n_out = (int)n;
    return ids;
}

/* Through k3_read_file: regular files only, at most max_bytes. */
char *cli_read_file(const char *path, size_t max_bytes, size_t *len_out)
{
    char *buf = NULL;
    size_t len = 0;
    k3_error err;
    if (k3_read_file(path, max_bytes, &buf, &len, &err)) {
        cli_error("%s", err.msg);
        return NULL;
    }
    if (len_out) *len_out = len;
    return buf;
}

const char *cli_model_dir(const char *arg, char *buf, unsigned long cap)
{
    struct stat st;
    snprintf(buf, cap, "%s", arg);
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        char *slash = strrchr(buf, '/');
        if (slash == buf) slash[1] = 0;
        else if (slash) *slash = 0;
        else snprintf(buf, cap, ".");
    }
    return buf;
}

/* Is this path the running binary? */
static int is_self(const char *path, const char *self)
{
    char real[PATH_MAX];
    return realpath(path, real) && !strcmp(real, self);
}

void cli_self_command(char *buf, unsigned long cap)
{
    char self[PATH_MAX], cwd[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { snprintf(buf, cap, "k3"); return; }
    self[n] = 0;
    const char *path = getenv("PATH");
    char *dirs = path ? strdup(path) : NULL;
    for (char *save = NULL, *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
        char cand[PATH_MAX + 8];
        snprintf(cand, sizeof cand, "%s/k3", *d ? d : ".");
        if (is_self(cand, self)) {
            free(dirs);
            snprintf(buf, cap, "k3");
            return;
        }
    }
    free(dirs);
    size_t cl = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    if (cl && !strncmp(self, cwd, cl) && self[cl] == '/') snprintf(buf, cap, "./%s", self + cl + 1);
    else snprintf(buf, cap, "%s", self);
}

const char *cli_default_model(void)
{
    const char *m = getenv("K3_MODEL");
    return (m && *m) ? m : "models/demo";
}

const char cli_model_options_help[] =
    "  --mem SIZE           hard memory budget for the whole process (e.g. 2G, 512M); weights that do\n"
    "                       not fit are streamed from disk. Default: fully resident if the model fits\n"
    "                       in available memory, else a budget derived from it; inside a memory\n"
    "                       cgroup (v1 or v2), 90% of what its limit leaves (the plan says which)\n"
    "  --io direct|buffered read with O_DIRECT (default) or through the page cache\n"
    "  --io-backend pool|uring  pread thread pool (default) or io_uring\n"
    "  --io-depth N         reads in flight (default 4)\n"
    "  --cache-policy lru|lfru  expert cache eviction (default lfru)\n"
    "  --prefetch           read the experts the next layer's router predicts while the disk is idle\n"
    "  --trace FILE         record routing as lines \"token layer expert\"\n"
    "  --threads N          compute threads (default: all cores)\n";

int cli_parse_model_option(int argc, char **argv, int *i, struct k3_options *opt)
{
    const char *a = argv[*i];
    int more = *i + 1 < argc;
    long long v;
    if (!strcmp(a, "--mem") && more) {
        int64_t b = k3_parse_size(argv[++*i]);
        if (b <= 0) { cli_error("--mem: expected a size such as 8G or 512M, got '%s'", argv[*i]); return -1; }
        opt->mem_bytes = (uint64_t)b;
    } else if (!strcmp(a, "--io") && more) {
        const char *m = argv[++*i];
        if (!strcmp(m, "direct")) opt->io_buffered = 0;
        else if (!strcmp(m, "buffered")) opt->io_buffered = 1;
        else { cli_error("--io: expected direct or buffered, got '%s'", m); return -1; }
    } else if (!strcmp(a, "--io-backend") && more) {
        const char *m = argv[++*i];
        if (!strcmp(m, "pool")) opt->io_uring = 0;
        else if (!strcmp(m, "uring")) opt->io_uring = 1;
        else { cli_error("--io-backend: expected pool or uring, got '%s'", m); return -1; }
    } else if (!strcmp(a, "--io-depth") && more) {
        if (cli_parse_int(a, argv[++*i], 1, 32, &v)) return -1;
        opt->io_depth = (int)v;
    } else if (!strcmp(a, "--cache-policy") && more) {
        const char *m = argv[++*i];
        if (!strcmp(m, "lru")) opt->cache_lru = 1;
        else if (!strcmp(m, "lfru")) opt->cache_lru = 0;
        else { cli_error("--cache-policy: expected lru or lfru, got '%s'", m); return -1; }
    } else if (!strcmp(a, "--prefetch")) {
        opt->prefetch = 1;
    } else if (!strcmp(a, "--trace") && more) {
        opt->trace_path = argv[++*i];
    } else if (!strcmp(a, "--threads") && more) {
        if (cli_parse_int(a, argv[++*i], 1, 1024, &v)) return -1;
        opt->n_threads = (int)v;
    } else {
        return 0;
    }
    return 1;
}
