/* cli.c - helpers shared by the subcommands: errors, number and id parsing,
 * whole-file reads. Each prints its own one-line message so callers only
 * need to return the right exit code. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"
#include "k3_util.h"

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

/* stdin is not a file k3_read_file can stat for its size: read it in
 * doubling chunks up to the same limit as a prompt file. */
char *cli_read_stdin(size_t max_bytes, size_t *len_out)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    if (!buf) { cli_error("stdin: out of memory"); return NULL; }
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += got;
        if (len > max_bytes) {
            cli_error("stdin: more than the limit of %zu bytes", max_bytes);
            free(buf);
            return NULL;
        }
        if (cap - len < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) { cli_error("stdin: out of memory"); free(buf); return NULL; }
            buf = grown;
            cap *= 2;
        }
    }
    if (ferror(stdin)) {
        cli_error("stdin: %s", strerror(errno));
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

/* A pipe or a redirected file brings text; a terminal, /dev/null or a
 * closed stdin does not, and reading them would wait or find nothing. */
int cli_stdin_has_text(void)
{
    struct stat st;
    if (isatty(STDIN_FILENO) || fstat(STDIN_FILENO, &st)) return 0;
    return S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode);
}

void cli_print_plan(const k3_model *m)
{
    k3_plan_info p;
    k3_model_plan(m, &p);
    if (!p.budget_bytes) return;
    const double gib = 1073741824.0, mib = 1048576.0;
    if (p.budget_source[0]) fprintf(stderr, "k3: plan: limit: %s\n", p.budget_source);
    fprintf(stderr, "k3: plan: budget %.2f GiB; fixed %.2f GiB (session state + scratch for %d tokens %.1f MiB; "
            "process, buffers and margin %.1f MiB)\n", p.budget_bytes / gib, p.fixed_bytes / gib, p.ctx_tokens,
            p.state_bytes / mib, (p.fixed_bytes - p.state_bytes) / mib);
    fprintf(stderr, "k3: plan: trunk %d of %d units pinned (%.2f GiB)", p.n_pinned, p.n_trunk, p.pinned_bytes / gib);
    if (p.n_ring) fprintf(stderr, ", ring %d x %.1f MiB", p.n_ring, p.ring_slot_bytes / mib);
    fprintf(stderr, "\nk3: plan: expert cache %d of %d slots x %.2f MiB (%.2f GiB)%s\n", p.n_expert_slots,
            p.n_experts_total, p.expert_slot_bytes / mib, (double)p.n_expert_slots * p.expert_slot_bytes / gib,
            p.all_resident ? "; fully resident" : "");
    if (p.speeds_source[0])
        fprintf(stderr, "k3: plan: weighed at disk %.2f GB/s, matvec %.1f GB/s trunk / %.1f GB/s experts (%s)\n",
                p.disk_gbps, p.trunk_matvec_gbps, p.expert_matvec_gbps, p.speeds_source);
}

/* Does dir hold this file (config.json: what every model directory k3
 * opens has)? Any kind of file counts: the engine says what is wrong with a
 * FIFO. */
static int has_file(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return 0;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* The folder `make install` puts the demo model in, found from the binary
 * (PREFIX/bin/k3 -> PREFIX/share/k3/models) so that any PREFIX or DESTDIR
 * works without a path compiled in. */
static void installed_models_dir(char *buf, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    buf[0] = 0;
    if (n <= 0) return;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return;
    *slash = 0;                                   /* PREFIX/bin */
    char share[PATH_MAX + 32], real[PATH_MAX];
    snprintf(share, sizeof share, "%s/../share/k3/models", self);
    /* resolved when it exists, so lists and hints read PREFIX/share/... */
    if (snprintf(buf, cap, "%s", realpath(share, real) ? real : share) >= (int)cap) buf[0] = 0;
}

int cli_model_roots(char roots[][4096], int max_roots)
{
    int n = 0;
    const char *env = getenv("K3_MODELS");
    if (env && *env) {
        char *list = strdup(env);
        for (char *save = NULL, *r = list ? strtok_r(list, ":", &save) : NULL; r && n < max_roots;
             r = strtok_r(NULL, ":", &save))
            snprintf(roots[n++], 4096, "%s", r);
        free(list);
    }
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (n < max_roots && xdg && xdg[0] == '/') snprintf(roots[n++], 4096, "%s/k3/models", xdg);
    else if (n < max_roots && home && *home) snprintf(roots[n++], 4096, "%s/.local/share/k3/models", home);
    if (n < max_roots) snprintf(roots[n++], 4096, "models");
    if (n < max_roots) {
        installed_models_dir(roots[n], 4096);
        if (roots[n][0]) n++;
    }
    return n;
}

const char *cli_model_dir(const char *arg, char *buf, unsigned long cap)
{
    struct stat st;
    snprintf(buf, cap, "%s", arg);
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode) && k3_model_path_is_gguf(arg)) return buf;   /* a GGUF file */
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {   /* .../config.json: its directory */
        char *slash = strrchr(buf, '/');
        if (slash == buf) slash[1] = 0;
        else if (slash) *slash = 0;
        else snprintf(buf, cap, ".");
        return buf;
    }
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (has_file(arg, "config.json") || has_file(arg, "tiktoken.model")) return buf;   /* k3 tokenize: a tokenizer alone */
        if (k3_model_path_is_gguf(arg)) return buf;   /* a folder of one GGUF file or split set */
        /* a bare name that is also a folder here (k3-mini in models/) is still looked up */
        if (strchr(arg, '/')) {
            cli_error("%s is not a model directory (it has no config.json; k3 models lists the models found)", arg);
            return NULL;
        }
    }
    if (strchr(arg, '/') || !*arg || !strcmp(arg, ".") || !strcmp(arg, "..")) {
        if (stat(arg, &st) != 0) return buf;      /* a path: the engine names the file it cannot open */
        cli_error("%s is not a model directory (it has no config.json)", arg);
        return NULL;
    }
    char roots[8][4096], looked[2048] = "";
    int n_roots = cli_model_roots(roots, 8);
    for (int i = 0; i < n_roots; i++) {
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s/%s", roots[i], arg) >= (int)sizeof cand) continue;
        if (has_file(cand, "config.json") || k3_model_path_is_gguf(cand)) {
            snprintf(buf, cap, "%s", cand);
            return buf;
        }
        if (snprintf(cand, sizeof cand, "%s/%s.gguf", roots[i], arg) < (int)sizeof cand && stat(cand, &st) == 0 &&
            S_ISREG(st.st_mode)) {                  /* NAME: NAME.gguf in a models folder */
            snprintf(buf, cap, "%s", cand);
            return buf;
        }
        size_t l = strlen(looked);
        if (snprintf(looked + l, sizeof looked - l, "%s%s", l ? ", " : "", roots[i]) >= (int)(sizeof looked - l)) break;
    }
    cli_error("%s: no such model (looked for %s/config.json in %s; k3 models lists the models found)", arg, arg,
              looked);
    return NULL;
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
    return (m && *m) ? m : "k3-mini";
}


volatile sig_atomic_t cli_interrupted;

/* The handler only sets the flag: the loop finishes its step and stops. */
static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

/* SIGINT sets cli_interrupted instead of killing the process. */
void cli_catch_sigint(void) { signal(SIGINT, on_sigint); }

/* Stream each piece of the answer as soon as it is complete. */
void cli_print_text(void *user, const char *text, size_t len)
{
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* Whether "[reasoning] " was printed and "[/reasoning]" not yet. */
static int reasoning_open;

/* A reasoning piece to stderr, opening the mark before the first. */
void cli_print_reasoning(void *user, const char *text, size_t len)
{
    (void)user;
    if (!reasoning_open) fputs("[reasoning] ", stderr);
    reasoning_open = 1;
    fwrite(text, 1, len, stderr);
    fflush(stderr);
}

/* Close the reasoning's mark, if one is open. */
void cli_close_reasoning(void)
{
    if (reasoning_open) fputs("\n[/reasoning]\n", stderr);
    reasoning_open = 0;
}

/* An answer piece to stdout, the reasoning's mark closed first. */
void cli_print_answer(void *user, const char *text, size_t len)
{
    cli_close_reasoning();
    cli_print_text(user, text, len);
}

/* The least stack k3 runs with, and what it asks for when the limit is below. */
#define K3_STACK_MIN_BYTES ((rlim_t)256 << 10)
#define K3_STACK_WANT_BYTES ((rlim_t)8 << 20)

int cli_ensure_stack(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= K3_STACK_MIN_BYTES) return 0;
    rlim_t want = K3_STACK_WANT_BYTES;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) want = rl.rlim_max;
    if (want < K3_STACK_MIN_BYTES) {
        cli_error("the stack limit (ulimit -s) is %llu KiB and its hard limit %llu KiB; k3 needs %llu KiB",
                  (unsigned long long)(rl.rlim_cur >> 10), (unsigned long long)(rl.rlim_max >> 10),
                  (unsigned long long)(K3_STACK_MIN_BYTES >> 10));
        return -1;
    }
    const rlim_t was = rl.rlim_cur;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_STACK, &rl)) {
        cli_error("cannot raise the stack limit (ulimit -s) from %llu KiB: %s", (unsigned long long)(was >> 10),
                  strerror(errno));
        return -1;
    }
    /* the main thread's stack grows up to the new limit; threads started
     * from now on (OpenMP's, the readers') take their size from here */
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setstacksize(&attr, (size_t)want);
        pthread_setattr_default_np(&attr);
        pthread_attr_destroy(&attr);
    }
    return 0;
}
