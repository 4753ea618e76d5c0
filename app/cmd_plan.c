/* cmd_plan.c - `k3 plan`: what a model will cost on this machine before it
 * is downloaded: the engine's memory plan at a budget, the bytes a decode
 * token reads, the expected expert hit rate, and predicted decode and prompt
 * times from this machine's measured disk and kernel rates.
 *
 * MODEL_OR_CONFIG is a model directory (sizes from its headers), a
 * config.json (or a folder holding only one), or the name of a reference
 * configuration shipped in configs/ (kimi-k3, kimi-linear). Kernel rates
 * are probed once and cached in $XDG_CACHE_HOME/k3/kernel_rates.json (per
 * CPU model, thread count and engine build: a build whose kernels changed
 * measures again); the disk is probed on the model's own files,
 * else with a scratch file in the cache folder (that result is cached too,
 * per filesystem). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "k3.h"
#include "k3_plan.h"
#include "options.h"

typedef struct plan_options {
    const char *model;
    k3_options m;                /* --mem --threads --trace --cache-policy */
    double disk_gbps;            /* 0 = probe */
    double trunk_gbps;           /* --disk-trunk; 0 = as --disk when given, else probe */
    int trunk_auto;              /* --disk-trunk auto */
    int prompt_tokens, ctx_tokens, json, reprobe, cores;
    const char *rates_path;      /* --rates FILE instead of this machine's probe */
    uint64_t fixed_bytes;
    const char *trunk_type, *expert_type;   /* --trunk, --experts */
} plan_options;

/* The command's own paragraph; the option lines come from the table. */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: k3 plan MODEL_OR_CONFIG [options]\n\n"
            "Predicts, from config.json alone, what the engine will do with a model on this machine:\n"
            "the memory plan (pinned trunk units, ring, expert cache slots), the bytes read per decode\n"
            "token (trunk / routed experts / head and embedding), the expected expert hit rate, the\n"
            "decode time per token = max(I/O + compute x (1 - read share), compute + the expert misses'\n"
            "reads at the read share) and the time of an N-token prompt. Without --mem: a table over\n"
            "4..128 GiB budgets. The compute is timed at the model's widths (cached; --reprobe); with the\n"
            "weights here, so is the read share: the disk's speed while the layers compute, as a share of\n"
            "its speed alone.\n"
            "--trace FILE takes the hit rate from a routing trace recorded with k3 run/bench --trace\n"
            "(default: uniform routing).\n\n"
            "I/O = (trunk + head) / --disk-trunk + (routed experts + embedding row) / --disk: the ring\n"
            "streams whole trunk units, the same ones every token, which a host's cache may serve far\n"
            "faster than the random expert pages, so each read pattern has its own speed (k3 bench\n"
            "--json reports both: trunk_gbps and device_gbps). The compute counts K3's SiTU activation\n"
            "at its own probed rate (situ_ns_per_element; a --rates file without it counts none).\n\n"
            "MODEL_OR_CONFIG  a model directory (exact sizes from its safetensors headers or packed\n"
            "                 manifest), a GGUF file (sizes from its header), a config.json or a folder\n"
            "                 holding one, or a shipped reference configuration: kimi-k3, kimi-linear\n"
            "                 (configs/ beside the k3 binary). --trunk / --experts TYPE predict a\n"
            "                 quantized copy (a GGUF, or k3 pack --trunk --experts) from the config's shapes.\n");
    cli_print_options(f, OPTS_MODEL | OPTS_PLAN);
}

static double gib(double b) { return b / 1073741824.0; }

/* $XDG_CACHE_HOME/k3 (or ~/.cache/k3), created. */
static int cache_dir(char *out, size_t len)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(out, len, "%s/k3", x);
    else if (home && *home) snprintf(out, len, "%s/.cache/k3", home);
    else snprintf(out, len, "/tmp/k3-cache-%d", (int)getuid());
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", out);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(tmp, 0755); *p = '/'; }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* One set of rates: {"matvec_gbps": {"f32": .., ...}, "matmul32_gbps": {..},
 * "situ_ns_per_element": ..} with every format positive; the SiTU figure is
 * optional (rates measured before it was probed: 0, K3's activation is not
 * counted). 0, or -1. */
static int rates_from_json(json_t *entry, k3_kernel_rates *r)
{
    json_t *situ = json_object_get(entry, "situ_ns_per_element");
    r->situ_ns = json_is_number(situ) && json_number_value(situ) > 0 && json_number_value(situ) < 1e6
                     ? json_number_value(situ) : 0;
    json_t *mv = json_object_get(entry, "matvec_gbps"), *mm = json_object_get(entry, "matmul32_gbps");
    if (!json_is_object(mv) || !json_is_object(mm)) return -1;
    for (int f = 0; f < K3_RATE_N; f++) {
        r->matvec_gbps[f] = json_number_value(json_object_get(mv, k3_rate_format_name(f)));
        r->matmul32_gbps[f] = json_number_value(json_object_get(mm, k3_rate_format_name(f)));
        if (!(r->matvec_gbps[f] > 0 && r->matmul32_gbps[f] > 0 && r->matvec_gbps[f] < 1e6 && r->matmul32_gbps[f] < 1e6))
            return -1;
    }
    return 0;
}

/* --rates FILE: rates measured elsewhere (same format, plus "threads"). */
static int rates_from_file(const char *path, k3_kernel_rates *r)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) { cli_error("%s: %s", path, je.text); return -1; }
    json_t *t = json_object_get(root, "threads");
    int rc = rates_from_json(root, r);
    if (rc == 0 && (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > 4096)) rc = -1;
    if (rc) cli_error("%s: expected {\"threads\": N, \"matvec_gbps\": {...}, \"matmul32_gbps\": {...}} with a "
                      "positive rate for each of f32, bf16, f16, f8_e4m3, mxfp4", path);
    else r->n_threads = (int)json_integer_value(t);
    json_decref(root);
    return rc;
}

/* Kernel rates from the cache when they were measured on this CPU with this
 * thread count by this engine build (k3_engine_build: rates measured by
 * kernels since changed, e.g. a prompt matmul made 2x faster, would mislead
 * every prediction), else measured now and written back. */
static int kernel_rates(const char *cache, int threads, int reprobe, k3_kernel_rates *r, int *cached)
{
    char path[PATH_MAX], cpu[256];
    snprintf(path, sizeof path, "%.3000s/kernel_rates.json", cache);
    k3_cpu_name(cpu, sizeof cpu);
    *cached = 0;
    json_t *root = reprobe ? NULL : json_load_file(path, 0, NULL);
    json_t *entry = NULL;
    char key[384];
    snprintf(key, sizeof key, "%s / %d threads / %s", cpu, threads, k3_engine_build());
    if (root) entry = json_object_get(root, key);
    /* an entry from before the SiTU probe is measured again */
    if (rates_from_json(entry, r) == 0 && r->situ_ns > 0) {
        r->n_threads = threads;
        *cached = 1;
        json_decref(root);
        return 0;
    }
    k3_error err;
    if (k3_kernel_rates_measure(threads, r, &err)) {
        cli_error("%s", err.msg);
        json_decref(root);
        return -1;
    }
    if (!json_is_object(root)) { json_decref(root); root = json_object(); }
    json_t *mv = json_object(), *mm = json_object();
    for (int f = 0; f < K3_RATE_N; f++) {
        json_object_set_new(mv, k3_rate_format_name(f), json_real(r->matvec_gbps[f]));
        json_object_set_new(mm, k3_rate_format_name(f), json_real(r->matmul32_gbps[f]));
    }
    json_object_set_new(root, key, json_pack("{s:o,s:o,s:f}", "matvec_gbps", mv, "matmul32_gbps", mm,
                                             "situ_ns_per_element", r->situ_ns));
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(root, tmp, JSON_INDENT(1)) == 0) rename(tmp, path);   /* a cache: failure is harmless */
    json_decref(root);
    return 0;
}

/* n figures as a JSON array. */
static json_t *seconds_json(const double *v, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_real(v[i]));
    return arr;
}

/* The compute probe's figures from the cache when they were measured on
 * this CPU, with this thread count, by this engine build, for a model of
 * these widths; else measured now (k3_planner_probe_compute) and written
 * back. It touches 256 MiB and streams each layer kind six times and a
 * routed expert 6 x top_k times, a second or more for Kimi K3, then with
 * the weights here spends 0.9 s in windows of three kinds: the model's
 * file read alone, read while the layers compute, the layers alone (the
 * read share and the reads' slowdown of the compute): a plan of the same
 * model again costs nothing.
 * *layer_s_out: the figures (n_layers + 1, freed by the caller), NULL when
 * nothing was timed (an F8 trunk). */
static int compute_probe(k3_planner *pl, const char *cache, int threads, int n_layers, int reprobe, int *cached,
                         double **layer_s_out)
{
    char path[PATH_MAX], cpu[256], key[512];
    snprintf(path, sizeof path, "%.3000s/compute_probe.json", cache);
    k3_cpu_name(cpu, sizeof cpu);
    snprintf(key, sizeof key, "%s / %d threads / %s / %016llx", cpu, threads, k3_engine_build(),
             (unsigned long long)k3_planner_compute_key(pl));
    *cached = 0;
    *layer_s_out = NULL;
    json_t *root = reprobe ? NULL : json_load_file(path, 0, NULL);
    json_t *entry = root ? json_object_get(root, key) : NULL;
    json_t *times = json_object_get(entry, "layer_s");
    double *layer_s = calloc((size_t)n_layers + 1, sizeof *layer_s);
    if (!layer_s) { json_decref(root); cli_error("out of memory"); return -1; }
    const char *figure_keys[] = {"read_share", "slowdown_s_per_gb", "miss_expert_s", "seconds"};
    int figures_here = json_is_integer(json_object_get(entry, "layer_kinds"));
    for (size_t i = 0; i < sizeof figure_keys / sizeof figure_keys[0]; i++)
        figures_here &= json_is_number(json_object_get(entry, figure_keys[i]));
    if (json_is_array(times) && json_array_size(times) == (size_t)n_layers + 1 && figures_here) {
        for (int i = 0; i <= n_layers; i++) layer_s[i] = json_number_value(json_array_get(times, i));
        const k3_compute_figures f = {
            .kinds = (int)json_integer_value(json_object_get(entry, "layer_kinds")),
            .probe_s = json_number_value(json_object_get(entry, "seconds")),
            .read_share = json_number_value(json_object_get(entry, "read_share")),
            .slowdown_s_per_gb = json_number_value(json_object_get(entry, "slowdown_s_per_gb")),
            .miss_expert_s = json_number_value(json_object_get(entry, "miss_expert_s"))};
        if (k3_planner_set_compute_layers(pl, layer_s, n_layers + 1, &f) == 0) {
            *cached = 1;
            *layer_s_out = layer_s;
            json_decref(root);
            return 0;
        }
    }
    k3_error err;
    if (k3_planner_probe_compute(pl, &err)) {
        cli_error("%s", err.msg);
        free(layer_s);
        json_decref(root);
        return -1;
    }
    if (k3_planner_compute_layers(pl, layer_s) == 0) {   /* -1: nothing timed (F8) */
        k3_planner_info info;
        k3_planner_get_info(pl, &info);
        if (!json_is_object(root)) { json_decref(root); root = json_object(); }
        json_object_set_new(root, key,
                            json_pack("{s:o,s:i,s:f,s:f,s:f,s:f}", "layer_s", seconds_json(layer_s, n_layers + 1),
                                      "layer_kinds", info.compute.kinds, "seconds", info.compute.probe_s,
                                      "read_share", info.compute.read_share, "slowdown_s_per_gb",
                                      info.compute.slowdown_s_per_gb, "miss_expert_s", info.compute.miss_expert_s));
        char tmp[PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        if (json_dump_file(root, tmp, JSON_INDENT(1)) == 0) rename(tmp, path);   /* a cache: failure is harmless */
        *layer_s_out = layer_s;
    } else {
        free(layer_s);
    }
    json_decref(root);
    return 0;
}

/* The disk speed: measured on the model's files, or on a scratch file in
 * the cache folder (cached per filesystem, as writing it costs a second).
 * Both are cached under their filesystem, where the engine finds the
 * model's for its memory plan (plan_speeds.c). */
static int disk_speed(k3_planner *pl, const char *cache, const char *model, int model_has_weights, int reprobe,
                      double *gbps, double *first_read_gbps, const char **how)
{
    char path[PATH_MAX], key[64];
    snprintf(path, sizeof path, "%.3000s/disk_rates.json", cache);
    struct stat st;
    snprintf(key, sizeof key, "dev %llu",
             stat(model_has_weights ? model : cache, &st) == 0 ? (unsigned long long)st.st_dev : 0ull);
    json_t *root = NULL;
    if (!model_has_weights && !reprobe && (root = json_load_file(path, 0, NULL))) {
        double v = json_number_value(json_object_get(root, key));
        if (v > 0) { *gbps = v; *how = "cached probe of the cache folder's filesystem"; json_decref(root); return 0; }
    }
    k3_error err;
    if (k3_planner_probe_disk(pl, cache, 0.3, gbps, first_read_gbps, &err)) {
        cli_error("%s", err.msg);
        json_decref(root);
        return -1;
    }
    *how = model_has_weights ? "probed on the model's files" : "probed on the cache folder's filesystem";
    if (!root) root = json_load_file(path, 0, NULL);   /* keep the other filesystems' figures */
    if (!json_is_object(root)) { json_decref(root); root = json_object(); }
    json_object_set_new(root, key, json_real(*gbps));
    json_dump_file(root, path, JSON_INDENT(1));
    json_decref(root);
    return 0;
}

/* The trunk ring's read speed when --disk-trunk is not given: the --disk
 * speed when that is given (unless --disk-trunk auto), else the ring's own
 * reads timed on the model's files with the plan at the budget asked (the
 * table: its smallest budget that plans, which streams the most). A config
 * alone has no files to time: the disk speed stands for both. */
static int trunk_speed(k3_planner *pl, const plan_options *o, int n_rows, const double *table_gib, double disk,
                       double *gbps, const char **how, k3_trunk_probe *tp)
{
    k3_planner_info info;
    k3_planner_get_info(pl, &info);
    if (o->disk_gbps > 0 && !o->trunk_auto) { *gbps = o->disk_gbps; *how = "as --disk"; return 0; }
    if (!strcmp(info.sizes_from, "config.json")) {
        *gbps = disk;
        *how = "the disk speed (no weight files here to time the ring's reads on)";
        return 0;
    }
    k3_error err = {0};
    int rc = -1;
    for (int i = 0; i < n_rows && rc != 0; i++) {
        const uint64_t mem = o->m.mem_bytes ? o->m.mem_bytes : (uint64_t)(table_gib[i] * 1073741824.0);
        rc = k3_planner_probe_trunk(pl, mem, 1.0, tp, &err);
    }
    if (rc) { cli_error("%s", err.msg); return -1; }
    if (!tp->units) { *gbps = disk; *how = "the disk speed (every trunk unit pinned: the ring reads nothing)"; return 0; }
    *gbps = tp->gbps;
    *how = "the ring's reads timed on the model's files";
    return 0;
}

/* A shipped reference configuration by name: configs/NAME beside the
 * binary (or $K3_CONFIGS/NAME). */
static int reference_config(const char *name, char *out, size_t len)
{
    static const struct { const char *alias, *dir; } names[] = {
        {"kimi-k3", "kimi-k3"}, {"k3", "kimi-k3"},
        {"kimi-linear", "kimi-linear-48b-a3b"}, {"kimi-linear-48b-a3b", "kimi-linear-48b-a3b"}};
    const char *dir = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].alias)) dir = names[i].dir;
    if (!dir) return -1;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    const char *env = getenv("K3_CONFIGS");
    const char *bases[3] = {env, exe, NULL};
    for (int b = 0; b < 2; b++) {
        if (!bases[b] || !*bases[b]) continue;
        if (b == 0) snprintf(out, len, "%.2000s/%.64s/config.json", bases[b], dir);
        else snprintf(out, len, "%.2000s/configs/%.64s/config.json", bases[b], dir);
        if (access(out, R_OK) == 0) return 0;
    }
    return -1;
}

static void print_estimate_text(const k3_plan_estimate *e)
{
    printf("k3: plan: budget %s%.2f GiB; fixed %.2f GiB\n", e->budget_bytes ? "" : "none, ", gib(e->budget_bytes),
           gib(e->fixed_bytes));
    printf("k3: plan: trunk %d of %d units pinned (%.2f GiB)", e->pinned_units, e->trunk_units, gib(e->pinned_bytes));
    if (e->ring_slots) printf(", ring %d x %.1f MiB", e->ring_slots, e->ring_slot_bytes / 1048576.0);
    printf("\nk3: plan: expert cache %d of %d slots x %.2f MiB (%.2f GiB)%s\n", e->expert_slots, e->experts_total,
           e->expert_slot_bytes / 1048576.0, gib((double)e->expert_slots * e->expert_slot_bytes),
           e->fully_resident ? "; fully resident" : "");
    printf("per decode token: reads %.3f GB (trunk %.3f, routed experts %.3f, head + embedding %.3f); "
           "expert hit rate %.1f%%\n",
           (e->bytes_trunk + e->bytes_experts + e->bytes_head) / 1e9, e->bytes_trunk / 1e9, e->bytes_experts / 1e9,
           e->bytes_head / 1e9, 100 * e->hit_rate);
    printf("decode: %.4f s/token (%.2f tok/s) = max(I/O %.4f s (trunk %.4f s at %.2f GB/s, the rest at %.2f GB/s) "
           "+ compute x %.2f, compute %.4f s + slowed by the misses' reads %.4f s + waiting for expert misses "
           "%.4f s)\n", e->decode_s, 1 / e->decode_s, e->io_s, e->io_trunk_s, e->trunk_gbps, e->disk_gbps,
           1 - e->read_share, e->compute_s, e->read_slowdown_s, e->expert_wait_s);
    printf("prompt: %d tokens in %d chunks of up to %d: %.2f s (%.1f tok/s)\n", e->prompt_tokens, e->prompt_chunks, e->chunk_tokens, e->prompt_s,
           e->prompt_s > 0 ? e->prompt_tokens / e->prompt_s : 0);
}

static json_t *estimate_json(const k3_plan_estimate *e)
{
    json_t *j = json_pack("{s:I,s:I,s:I,s:i,s:i,s:I,s:i,s:I,s:i,s:i,s:I,s:b,s:f,s:{s:f,s:f,s:f,s:f},s:f,s:f,s:f,s:f,s:f,"
                     "s:i,s:i,s:i,s:f}",
                     "budget_bytes", (json_int_t)e->budget_bytes, "fixed_bytes", (json_int_t)e->fixed_bytes,
                     "min_budget_bytes", (json_int_t)e->min_budget_bytes, "pinned_units", e->pinned_units,
                     "trunk_units", e->trunk_units, "pinned_bytes", (json_int_t)e->pinned_bytes,
                     "ring_slots", e->ring_slots, "ring_slot_bytes", (json_int_t)e->ring_slot_bytes,
                     "expert_slots", e->expert_slots, "experts_total", e->experts_total,
                     "expert_slot_bytes", (json_int_t)e->expert_slot_bytes, "fully_resident", e->fully_resident,
                     "hit_rate", e->hit_rate, "bytes_read_per_token", "total",
                     e->bytes_trunk + e->bytes_experts + e->bytes_head, "trunk", e->bytes_trunk, "experts",
                     e->bytes_experts, "head_embedding", e->bytes_head, "disk_gbps", e->disk_gbps,
                     "io_s_per_token", e->io_s, "compute_s_per_token", e->compute_s, "expert_wait_s_per_token",
                     e->expert_wait_s, "decode_s_per_token",
                     e->decode_s, "prompt_tokens", e->prompt_tokens, "prompt_chunks", e->prompt_chunks,
                     "chunk_tokens", e->chunk_tokens, "prompt_s", e->prompt_s);
    if (j) {
        json_object_set_new(j, "trunk_gbps", json_real(e->trunk_gbps));
        json_object_set_new(j, "io_trunk_s_per_token", json_real(e->io_trunk_s));
        json_object_set_new(j, "matrices_s_per_token", json_real(e->matrices_s));
        json_object_set_new(j, "read_share", json_real(e->read_share));
        json_object_set_new(j, "miss_expert_s", json_real(e->miss_expert_s));
        json_object_set_new(j, "read_slowdown_s_per_token", json_real(e->read_slowdown_s));
    }
    return j;
}

/* The table's model, --ctx and plan rows; one positional MODEL_OR_CONFIG. */
static int parse_args(int argc, char **argv, plan_options *o)
{
    cli_settings set;
    cli_settings_defaults(&set);
    int n_args;
    if (cli_parse_args("plan", argc, argv, OPTS_MODEL | OPTS_PLAN, &set, &o->model, 1, &n_args))
        return -1;
    if (!n_args) { cli_error("plan: MODEL_OR_CONFIG is required (k3 plan --help)"); return -1; }
    o->m = set.model;
    o->ctx_tokens = set.model.ctx_tokens;
    o->disk_gbps = set.plan.disk_gbps;
    o->trunk_gbps = set.plan.trunk_gbps;
    o->trunk_auto = set.plan.trunk_auto;
    o->prompt_tokens = set.plan.prompt_tokens;
    o->cores = set.plan.cores;
    o->reprobe = set.plan.reprobe;
    o->json = set.json;
    o->rates_path = set.plan.rates_path;
    o->fixed_bytes = set.plan.fixed_bytes;
    o->trunk_type = set.trunk_type;
    o->expert_type = set.expert_type;
    return 0;
}

/* One k3 plan run: what it measured or was given, and the estimates. */
#define PLAN_MAX_ROWS 8
typedef struct plan_run {
    plan_options o;
    k3_planner_info info;
    char cache[PATH_MAX];
    k3_kernel_rates rates;
    int rates_cached, compute_cached;
    double *layer_s;                      /* the compute probe's figures, for --json */
    const char *disk_how, *trunk_how;
    double disk, disk_first_read, trunk;  /* disk_first_read: 0 when not probed now */
    k3_trunk_probe tp;
    int n_rows;
    k3_plan_estimate est[PLAN_MAX_ROWS];
    int ok[PLAN_MAX_ROWS];
    char why[PLAN_MAX_ROWS][512];
} plan_run;

/* The budgets of the table (one row with --mem). */
static const double table_gib[] = {4, 8, 16, 32, 64, 128};

/* The model: a directory or config file, else a shipped reference
 * configuration by name; and the cache folder of the probes. NULL after
 * saying why. */
static k3_planner *plan_open(plan_run *r)
{
    char ref[PATH_MAX];
    const char *path = r->o.model;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (reference_config(r->o.model, ref, sizeof ref) != 0) {
            cli_error("%s: no such model directory, config file or reference configuration "
                      "(shipped: kimi-k3, kimi-linear)", r->o.model);
            return NULL;
        }
        path = ref;
    }
    k3_plan_options po = {.n_threads = r->o.m.n_threads, .ctx_tokens = r->o.ctx_tokens, .cache_lru = r->o.m.cache_lru,
                          .fixed_bytes = r->o.fixed_bytes, .trace_path = r->o.m.trace_path,
                          .trunk_type = r->o.trunk_type, .expert_type = r->o.expert_type};
    k3_error err;
    k3_planner *pl = k3_planner_open(path, &po, &err);
    if (!pl) { cli_error("%s", err.msg); return NULL; }
    k3_planner_get_info(pl, &r->info);
    if (cache_dir(r->cache, sizeof r->cache)) {
        cli_error("%s: cannot create the cache folder: %s", r->cache, strerror(errno));
        k3_planner_close(pl);
        return NULL;
    }
    return pl;
}

/* This machine's figures, measured or cached or given: kernel rates (scaled
 * to --cores), the compute probe, the disk's speed for expert pages and for
 * the trunk ring. 0, or -1 after saying why. */
static int plan_measure(plan_run *r, k3_planner *pl)
{
    const plan_options *o = &r->o;
    if (o->rates_path ? rates_from_file(o->rates_path, &r->rates)
                      : kernel_rates(r->cache, r->info.n_threads, o->reprobe, &r->rates, &r->rates_cached))
        return -1;
    if (o->cores) {
        for (int f = 0; f < K3_RATE_N; f++) {
            r->rates.matvec_gbps[f] *= (double)o->cores / r->rates.n_threads;
            r->rates.matmul32_gbps[f] *= (double)o->cores / r->rates.n_threads;
        }
        r->rates.n_threads = o->cores;    /* the routed experts' activations spread over them */
    }
    /* this machine's compute: the matrices timed at the model's widths
     * (rates from a file or scaled to other cores describe another
     * machine, whose compute only the rates can tell) */
    if (!o->rates_path && !o->cores) {
        if (compute_probe(pl, r->cache, r->info.n_threads, r->info.n_layers, o->reprobe, &r->compute_cached,
                          &r->layer_s))
            return -1;
        k3_planner_get_info(pl, &r->info);
    }
    r->disk_how = "given (--disk)";
    r->disk = o->disk_gbps;
    if (r->disk <= 0 && disk_speed(pl, r->cache, o->model, strcmp(r->info.sizes_from, "config.json") != 0, o->reprobe,
                                   &r->disk, &r->disk_first_read, &r->disk_how))
        return -1;
    r->n_rows = o->m.mem_bytes ? 1 : (int)(sizeof table_gib / sizeof table_gib[0]);
    r->trunk_how = "given (--disk-trunk)";
    r->trunk = o->trunk_gbps;
    if (r->trunk <= 0 && trunk_speed(pl, o, r->n_rows, table_gib, r->disk, &r->trunk, &r->trunk_how, &r->tp))
        return -1;
    /* the memory plan weighs at the speeds the engine will open with (its
     * --rates, else what is cached now), not at these */
    k3_error err;
    if (k3_planner_load_speeds(pl, o->rates_path, &err)) { cli_error("%s", err.msg); return -1; }
    k3_planner_get_info(pl, &r->info);
    return 0;
}

/* The estimate at each budget of the table (or --mem's); a budget the
 * model cannot run in keeps its reason. */
static void plan_estimate_rows(plan_run *r, k3_planner *pl)
{
    k3_error err;
    for (int i = 0; i < r->n_rows; i++) {
        uint64_t mem = r->o.m.mem_bytes ? r->o.m.mem_bytes : (uint64_t)(table_gib[i] * 1073741824.0);
        r->ok[i] = k3_planner_estimate(pl, mem, r->disk, r->trunk, &r->rates, r->o.prompt_tokens, &r->est[i], &err) == 0;
        if (!r->ok[i]) snprintf(r->why[i], sizeof r->why[i], "%s", err.msg);
    }
}

/* --json: the whole run as one object on one line. */
static void print_plan_json(const plan_run *r)
{
    const plan_options *o = &r->o;
    const k3_planner_info *info = &r->info;
    const char *routing = info->trace_tokens ? "recorded trace" : "uniform routing";
    json_t *rv = json_array(), *kr = json_object();
    for (int f = 0; f < K3_RATE_N; f++)
        json_object_set_new(kr, k3_rate_format_name(f),
                            json_pack("{s:f,s:f}", "matvec_gbps", r->rates.matvec_gbps[f], "matmul32_gbps",
                                      r->rates.matmul32_gbps[f]));
    json_t *root = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:i,s:i,s:f,s:s,s:o,s:s,s:I}",
                             "model", o->model, "model_type", info->model_type, "sizes_from", info->sizes_from,
                             "layers", info->n_layers, "moe_layers", info->n_moe_layers, "experts", info->n_experts,
                             "top_k", info->top_k, "trunk_bytes", (json_int_t)info->trunk_bytes, "head_bytes",
                             (json_int_t)info->head_bytes, "expert_slot_bytes", (json_int_t)info->expert_slot_bytes,
                             "experts_bytes", (json_int_t)info->experts_bytes, "session_bytes",
                             (json_int_t)info->session_bytes, "ctx_tokens", info->ctx_tokens, "threads",
                             o->cores ? o->cores : info->n_threads, "disk_gbps", r->disk, "disk", r->disk_how,
                             "kernel_rates", kr, "routing", routing, "trace_tokens", (json_int_t)info->trace_tokens);
    json_object_set_new(root, "plan_speeds", json_string(info->plan_speeds));
    if (o->m.mem_bytes) {
        json_object_set_new(root, "plan", estimate_json(&r->est[0]));
    } else {
        for (int i = 0; i < r->n_rows; i++)
            json_array_append_new(rv, r->ok[i] ? estimate_json(&r->est[i])
                                               : json_pack("{s:I,s:s}", "budget_bytes",
                                                           (json_int_t)(table_gib[i] * 1073741824.0), "error", r->why[i]));
        json_object_set_new(root, "table", rv);
        rv = NULL;
    }
    json_decref(rv);
    json_object_set_new(root, "situ_ns_per_element", json_real(r->rates.situ_ns));
    json_t *cp = json_null();
    if (info->compute.kinds) {
        const k3_compute_figures *f = &info->compute;
        cp = json_pack("{s:i,s:f,s:b,s:o,s:o,s:o,s:o}", "layer_kinds", f->kinds, "seconds", f->probe_s, "cached",
                       r->compute_cached, "layer_s", seconds_json(r->layer_s, r->layer_s ? info->n_layers + 1 : 0),
                       "read_share", f->read_share > 0 ? json_real(f->read_share) : json_null(),
                       "slowdown_s_per_gb", f->read_share > 0 ? json_real(f->slowdown_s_per_gb) : json_null(),
                       "miss_expert_s", f->miss_expert_s > 0 ? json_real(f->miss_expert_s) : json_null());
    }
    json_object_set_new(root, "compute_probe", cp);
    json_object_set_new(root, "disk_first_read_gbps", r->disk_first_read > 0 ? json_real(r->disk_first_read) : json_null());
    json_object_set_new(root, "disk_trunk_gbps", json_real(r->trunk));
    json_object_set_new(root, "disk_trunk", json_string(r->trunk_how));
    const k3_trunk_probe *tp = &r->tp;
    if (tp->units)
        json_object_set_new(root, "trunk_probe",
                            json_pack("{s:f,s:f,s:i,s:I,s:I,s:i,s:f}", "gbps", tp->gbps, "first_pass_gbps",
                                      tp->first_pass_gbps, "units", tp->units, "pass_bytes", (json_int_t)tp->pass_bytes,
                                      "read_bytes", (json_int_t)tp->read_bytes, "passes", tp->passes, "seconds",
                                      tp->seconds));
    char *s = json_dumps(root, JSON_COMPACT);
    printf("%s\n", s ? s : "{}");
    free(s);
    json_decref(root);
}

/* The text header: the model's weights, the machine's figures and where
 * each came from, how compute and the hit rate are counted. */
static void print_plan_header(const plan_run *r)
{
    const plan_options *o = &r->o;
    const k3_planner_info *info = &r->info;
    const k3_trunk_probe *tp = &r->tp;
    printf("k3 plan: %s (%s; sizes from %s)\n", o->model, info->model_type, info->sizes_from);
    printf("weights: trunk %.2f GiB in %d layers + head %.2f GiB; routed experts %d x %d x %.2f MiB = %.1f GiB, "
           "top-%d\n", gib(info->trunk_bytes), info->n_layers, gib(info->head_bytes), info->n_moe_layers,
           info->n_experts, info->expert_slot_bytes / 1048576.0, gib(info->experts_bytes), info->top_k);
    printf("machine: disk %.2f GB/s for expert pages (%s", r->disk, r->disk_how);
    if (r->disk_first_read > 0) printf(", read again; %.3g GB/s the first time", r->disk_first_read);
    printf("), %.2f GB/s for the trunk ring (%s", r->trunk, r->trunk_how);
    if (tp->units)
        printf(": %d units, %.1f MB a pass, %d passes, first pass %.2f GB/s", tp->units, tp->pass_bytes / 1e6,
               tp->passes, tp->first_pass_gbps);
    printf(");\n         %d threads%s, kernel GB/s of weights (decode / 32-token prompt):",
           o->cores ? o->cores : info->n_threads, o->cores ? " (scaled from this machine)" : "");
    for (int f = 0; f < K3_RATE_N; f++)
        printf(" %s %.1f/%.1f", k3_rate_format_name(f), r->rates.matvec_gbps[f], r->rates.matmul32_gbps[f]);
    if (r->rates.situ_ns > 0) printf("; SiTU %.1f ns/element", r->rates.situ_ns);
    printf("%s\n", o->rates_path ? " (from --rates)" : r->rates_cached ? " (cached)" : "");
    printf("         the memory plan weighs trunk against expert slots at %s\n", info->plan_speeds);
    char read_share_text[160];
    if (info->compute.read_share > 0)
        snprintf(read_share_text, sizeof read_share_text,
                 "reads get %.0f%% of the disk's speed while it computes, and slow it %.3f s a GB",
                 100 * info->compute.read_share, info->compute.slowdown_s_per_gb);
    else
        snprintf(read_share_text, sizeof read_share_text, "reads under compute not timed (no weight file here holds "
                 "four expert pages)");
    char miss_text[64] = "";
    if (info->compute.miss_expert_s > 0)
        snprintf(miss_text, sizeof miss_text, ", a routed expert %.2f ms over all threads",
                 info->compute.miss_expert_s * 1e3);
    if (info->compute.kinds)
        printf("compute: the matrices of %d layer kinds and the head timed at the model's widths%s (%.2f s%s); "
               "%s\n", info->compute.kinds, miss_text, info->compute.probe_s, r->compute_cached ? ", cached" : "",
               read_share_text);
    else
        printf("compute: bytes / kernel rate per format%s\n",
               o->rates_path || o->cores ? " (another machine's)" : " (an F8 trunk is not timed at its widths)");
    printf("hit rate: %s%s\n", info->trace_tokens ? "recorded trace" : "uniform routing",
           info->trace_tokens ? "" : " (LRU closed form; real routing is skewed and hits more)");
}

/* The text table: one row per budget. */
static void print_plan_table(const plan_run *r)
{
    printf("\n%8s %9s %12s %8s %6s %21s %9s %9s %9s %9s\n", "budget", "pinned", "ring", "slots", "hit",
           "GB/token tr/exp/head", "I/O s", "compute s", "s/token", "prompt s");
    for (int i = 0; i < r->n_rows; i++) {
        if (!r->ok[i]) { printf("%6.0f G  %s\n", table_gib[i], r->why[i]); continue; }
        const k3_plan_estimate *e = &r->est[i];
        char ring[32], gb[48];
        if (e->ring_slots) snprintf(ring, sizeof ring, "%d x %.0f MiB", e->ring_slots, e->ring_slot_bytes / 1048576.0);
        else snprintf(ring, sizeof ring, "-");
        snprintf(gb, sizeof gb, "%.2f/%.2f/%.2f", e->bytes_trunk / 1e9, e->bytes_experts / 1e9, e->bytes_head / 1e9);
        printf("%6.0f G %4d/%-4d %12s %8d %5.1f%% %21s %9.3f %9.3f %9.3f %9.1f\n", table_gib[i], e->pinned_units,
               e->trunk_units, ring, e->expert_slots, 100 * e->hit_rate, gb, e->io_s, e->compute_s, e->decode_s,
               e->prompt_s);
    }
    printf("(prompt s: a %d-token prompt; decode s/token = max(I/O + compute x (1 - read share), compute +\n"
           " waiting for expert misses);\n"
           " I/O s = (trunk + head) / trunk ring speed + (experts + embedding row) / disk speed)\n",
           r->o.prompt_tokens);
}

/* k3 plan: open, measure, estimate, print; one phase each. */
int cmd_plan(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) { usage(stdout); return K3_EXIT_OK; }
    static plan_run run;                  /* large (the reasons): not on the stack */
    plan_run *r = &run;
    memset(r, 0, sizeof *r);
    if (parse_args(argc, argv, &r->o)) return K3_EXIT_USAGE;
    k3_planner *pl = plan_open(r);
    if (!pl) return K3_EXIT_ERROR;
    if (plan_measure(r, pl)) {
        free(r->layer_s);
        k3_planner_close(pl);
        return K3_EXIT_ERROR;
    }
    plan_estimate_rows(r, pl);
    k3_planner_close(pl);
    int rc = K3_EXIT_OK;
    if (r->o.m.mem_bytes && !r->ok[0]) {
        cli_error("%s", r->why[0]);
        rc = K3_EXIT_ERROR;
    } else if (r->o.json) {
        print_plan_json(r);
    } else {
        print_plan_header(r);
        if (r->o.m.mem_bytes) print_estimate_text(&r->est[0]);
        else print_plan_table(r);
    }
    free(r->layer_s);
    return rc;
}
