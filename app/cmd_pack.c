/* cmd_pack.c - `k3 pack SRC DST`: write the packed layout the streaming
 * runtime reads (include/k3_offline.h), and `k3 pack --check DIR` to
 * re-verify a packed directory against its manifest. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"
#include "k3_util.h"
#include "k3_offline.h"
#include "options.h"

static volatile sig_atomic_t pack_cancel;

/* SIGINT/SIGTERM ask the packer to stop cleanly (it removes DST.partial). */
static void on_signal(int sig)
{
    (void)sig;
    pack_cancel = 1;
}

/* --help text, including the peak memory. */
static void usage(FILE *f)
{
    fprintf(f,
        "usage: k3 pack SRC DST [--force] [--progress] [--buffer MIB] [--throttle MB/S] [--sample N]\n"
        "       k3 pack --verify DIR   (also --check)\n\n"
        "Writes the packed layout of the Hugging Face checkpoint SRC into DST: trunk.bin (one\n"
        "4 KiB-aligned run per layer), experts.bin (one 4 KiB-aligned page per routed expert:\n"
        "one read fetches one expert), embed.bin, head.bin, the tokenizer files and, last,\n"
        "manifest.json. Weights keep their stored format (BF16 stays BF16, MXFP4 stays MXFP4)\n"
        "unless --trunk / --experts name a GGUF block type for the weight matrices (the\n"
        "norms, the router, the embedding and lm_head stay as stored; K3's MXFP4 experts\n"
        "change only with --experts); vision_tower.* and mm_projector.* tensors are left out.\n\n"
        "Work goes to DST.partial and is renamed to DST only after every file is fsync'd and\n"
        "re-read: each tensor's checksum must match the one taken while writing, padding must be\n"
        "zero, and a sample of tensors is compared byte for byte with SRC. An interrupted run\n"
        "leaves no DST (a re-run removes the stale DST.partial). Free space is checked first.\n\n"
        "Peak memory: the copy buffer (64 MiB; --buffer), 2 x %zu MiB more with --trunk or\n"
        "with --experts, plus at most about %u bytes per source tensor for the tensor\n"
        "tables. Measured peak RSS: 68 MiB for demo (1k tensors);\n"
        "320 MiB for a 480k-tensor, 40-shard checkpoint (Kimi K3 has ~500k). Reads and writes\n"
        "go through the page cache, which the kernel may grow and reclaim as usual.\n\n",
        K3_PACK_QUANT_BUFFER >> 20, K3_PACK_BYTES_PER_TENSOR);
    cli_print_options(f, OPTS_PACK);
}

typedef struct progress_state {
    int tty;
    double t_phase, t_last;
    const char *phase;
    int printed;
} progress_state;

/* Bytes done / total and the rate of the current phase; redrawn in place on
 * a terminal, one line per second otherwise. */
static void show_progress(void *user, const char *phase, uint64_t done, uint64_t total)
{
    progress_state *ps = user;
    double t = (k3_now_ns() / 1e9);
    if (ps->phase != phase) {
        if (ps->printed && ps->tty) fputc('\n', stderr);
        ps->phase = phase;
        ps->t_phase = t;
        ps->t_last = 0;
        ps->printed = 0;
    }
    int last = done >= total;
    if (!last && t - ps->t_last < (ps->tty ? 0.2 : 1.0)) return;
    ps->t_last = t;
    double el = t - ps->t_phase;
    char rate[32] = "     - MB/s";
    if (el > 0.05) snprintf(rate, sizeof rate, "%6.0f MB/s", done / 1e6 / el);
    fprintf(stderr, "%spack %-6s %8.1f / %.1f MB (%3.0f%%)  %s%s", ps->tty ? "\r" : "", phase, done / 1e6,
            total / 1e6, total ? 100.0 * (double)done / (double)total : 100.0, rate, ps->tty ? "" : "\n");
    ps->printed = 1;
    fflush(stderr);
}

/* `k3 pack --check DIR`: the loader's checks plus a full checksum pass. */
static int check_dir(const char *dir)
{
    k3_error err;
    k3_pack_check_result r;
    if (k3_pack_check(dir, &r, &err)) { cli_error("%s", err.msg); return K3_EXIT_ERROR; }
    fprintf(stderr, "k3: %s: ok: %d tensors, %d layers, %d expert pages of %llu bytes, unit and file checksums match\n", dir,
            r.n_tensors, r.n_layers, r.n_pages, (unsigned long long)r.page_bytes);
    return K3_EXIT_OK;
}

int cmd_pack(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    cli_settings set;
    cli_settings_defaults(&set);
    const char *src = NULL, *dst = NULL;
    for (int i = 1; i < argc; i++) {
        int mo = cli_parse_option(argc, argv, &i, OPTS_PACK, &set);
        if (mo < 0) return K3_EXIT_USAGE;
        if (mo) continue;
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            cli_error("pack: unknown option '%s' (see k3 pack --help)", a);
            return K3_EXIT_USAGE;
        } else if (!src) src = a;
        else if (!dst) dst = a;
        else { cli_error("pack: unexpected argument '%s'", a); return K3_EXIT_USAGE; }
    }
    const cli_pack_settings *ps_set = &set.pack;
    if (ps_set->verify_dir) {
        if (src) { cli_error("pack: --verify takes only the directory to check"); return K3_EXIT_USAGE; }
        return check_dir(ps_set->verify_dir);
    }
    if (!src || !dst) { cli_error("pack: need SRC and DST (see k3 pack --help)"); return K3_EXIT_USAGE; }
    k3_pack_opts o;
    k3_pack_default_opts(&o);
    o.force = ps_set->force;
    o.buffer_bytes = (size_t)ps_set->buffer_mib << 20;
    o.throttle_mb_s = ps_set->throttle_mb_s;
    o.sample_tensors = ps_set->sample_tensors;
    o.simulate_free_bytes = ps_set->simulate_free_bytes;
    o.trunk_type = ps_set->trunk_type;
    o.experts_type = ps_set->experts_type;
    int want_progress = ps_set->progress;

    progress_state ps = {.tty = isatty(2)};
    if (ps.tty || want_progress) {
        o.progress = show_progress;
        o.progress_user = &ps;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    o.cancel = &pack_cancel;

    k3_error err;
    k3_pack_result r;
    int rc = k3_pack(src, dst, &o, &r, &err);
    if (ps.printed && ps.tty) fputc('\n', stderr);
    if (rc) {
        if (pack_cancel) { cli_error("pack: interrupted; nothing was written to %s", dst); return K3_EXIT_INTERRUPTED; }
        cli_error("%s", err.msg);
        return K3_EXIT_ERROR;
    }
    if (r.removed_stale) fprintf(stderr, "k3: removed %s.partial left by an interrupted run\n", dst);
    if (o.trunk_type || o.experts_type)
        fprintf(stderr, "k3: quantized %d trunk matrices (%s) and %d routed-expert matrices (%s%s); %d fell back to "
                "Q5_0/Q8_0 (rows not whole blocks), %d left as stored (rows not a multiple of 32)\n",
                r.n_quantized - r.n_quantized_experts, o.trunk_type ? o.trunk_type : "as stored",
                r.n_quantized_experts, o.experts_type ? o.experts_type : "as stored",
                o.experts_type && !r.n_quantized_experts ? ": none found" : "",
                r.n_fallback, r.n_kept);
    fprintf(stderr,
            "k3: packed %s -> %s: %d tensors (%d vision tensors skipped), %d layers, %d expert pages of %llu bytes; "
            "%.1f MB in %.2f s (copy %.0f MB/s, verify %.0f MB/s, %d tensors compared with the source)\n",
            src, dst, r.n_tensors, r.n_skipped, r.n_layers, r.n_pages, (unsigned long long)r.page_bytes,
            r.out_bytes / 1e6, r.total_s, r.copy_s > 0 ? r.tensor_bytes / 1e6 / r.copy_s : 0.0,
            r.verify_s > 0 ? r.out_bytes / 1e6 / r.verify_s : 0.0, r.sampled);
    return K3_EXIT_OK;
}
