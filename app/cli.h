/* cli.h - the subcommands of `k3` and the small helpers they share.
 *
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` where argv[0] is
 * the subcommand name; it returns the process exit code: 0 ok, 1 error,
 * 2 usage, 130 interrupted (docs/ARCHITECTURE.md, "Errors"). */
#ifndef K3_CLI_H
#define K3_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "k3.h"

int cmd_run(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_history(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* The release number (`k3 --version` adds git describe, flags, kernels). */
#define K3_VERSION "0.11"

/* Print "k3: " + message + newline to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit codes (docs/COMMANDS.md, "Exit codes"): NOT_ANSWERED is the chat's
 * "a message went unanswered or a command failed" (ui/plain.h). */
enum { K3_EXIT_OK = 0, K3_EXIT_ERROR = 1, K3_EXIT_USAGE = 2, K3_EXIT_NOT_ANSWERED = 3, K3_EXIT_INTERRUPTED = 130,
       K3_EXIT_TERMINATED = 143 };

/* True if argv[i] equals "--help" or "-h". */
int cli_wants_help(int argc, char **argv);

/* Parse a decimal integer / float option value; on failure print a usage
 * error naming the option and return -1. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double lo, double hi, double *out);

/* Parse a whitespace- or comma-separated list of token ids into a malloc'd
 * array. Returns NULL (and prints a usage error naming opt) on bad input. */
int *cli_parse_ids(const char *opt, const char *s, int *n_out);

/* The memory plan's three "k3: plan:" lines on stderr, when a budget is in
 * force (given with --mem, or derived because the model does not fit in
 * available memory); nothing when the model is simply resident. */
void cli_print_plan(const k3_model *m);

/* Read a whole file into a malloc'd NUL-terminated buffer; NULL + message on
 * error. Regular files only, of at most max_bytes (the K3_MAX_* limits). */
char *cli_read_file(const char *path, size_t max_bytes, size_t *len_out);

/* All of stdin into a malloc'd NUL-terminated buffer (at most max_bytes);
 * NULL + message on error. */
char *cli_read_stdin(size_t max_bytes, size_t *len_out);

/* Is stdin a pipe, a socket or a redirected regular file (text to read),
 * rather than a terminal or a device such as /dev/null? */
int cli_stdin_has_text(void);

/* Ctrl-C during `k3 run`: set by the handler cli_catch_sigint installs,
 * polled by the token loop (local or remote) to stop the answer. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_sigint(void);

/* Make the stack limit at least K3_STACK_MIN_BYTES (raising the soft limit
 * toward 8 MiB, within the hard one) for the main thread and every thread
 * started later, before any is: k3 keeps buffers of up to 64 KiB on the
 * stack, and `ulimit -s 64` crashed it. 0, or -1 with a one-line error when
 * the hard limit is below the minimum. */
int cli_ensure_stack(void);

/* A text callback of the token loops: the piece to stdout, flushed, so the
 * answer streams as it is made. */
void cli_print_text(void *user, const char *text, size_t len);

/* `k3 run`'s thinking output, local or from a server: the reasoning to
 * stderr between "[reasoning] " and "[/reasoning]" as it streams, the
 * answer to stdout (cli_print_answer closes the mark first);
 * cli_close_reasoning closes it when the turn ended while thinking. */
void cli_print_reasoning(void *user, const char *text, size_t len);
void cli_print_answer(void *user, const char *text, size_t len);
void cli_close_reasoning(void);

/* Every command's options are rows of one table: options.h. */

/* A model argument as the directory to open: a path to a config.json (or
 * to another file inside a model directory) means its directory; a
 * directory is taken as it is; a bare name (k3-mini, as `ollama run NAME`)
 * is looked up as ROOT/NAME in the cli_model_roots, in order. Copies into
 * buf and returns it, or NULL after a one-line error ("/tmp is not a model
 * directory", "NAME: no such model (looked in ...)"). */
const char *cli_model_dir(const char *arg, char *buf, unsigned long cap);

/* Where a model named by its name is looked for, in order: each folder of
 * $K3_MODELS (colon-separated), the user's data folder
 * ($XDG_DATA_HOME/k3/models, else ~/.local/share/k3/models), models/ here,
 * and the installed share folder (PREFIX/share/k3/models beside the binary's
 * PREFIX/bin, where `make install` puts k3-mini). Returns how many. */
int cli_model_roots(char roots[][4096], int max_roots);

/* The command that runs this binary as typed here: "k3" when that is on
 * PATH, else "./k3" (relative to the current directory) or an absolute path.
 * For hints the user may copy. */
void cli_self_command(char *buf, unsigned long cap);

/* Default model: $K3_MODEL, else the name "k3-mini" (the trained demo model:
 * committed in models/, installed by `make install`), for cli_model_dir. */
const char *cli_default_model(void);

#endif
