/* plan_speeds.c - the speeds behind the plan's weighing of pinned trunk
 * units against expert slots (planner.c), from what this machine measured:
 * a --rates file, else k3 plan's cached probes, else the defaults. Read once
 * at open, so the same files give the same plan. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "k3_plan.h"
#include "plan_speeds.h"

void k3_cpu_name(char *out, size_t len)
{
    snprintf(out, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (c && !strncmp(line, "model name", 10)) {
            c++;
            while (*c == ' ') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(out, len, "%s", c);
            break;
        }
    }
    fclose(f);
}

/* The rate tables' names of the formats (k3_plan.h); here, below the plan
 * layer, since the engine reads the cached tables too. */
const char *k3_rate_format_name(int f)
{
    static const char *const names[K3_RATE_N] = {"f32", "bf16", "f16", "f8_e4m3", "mxfp4"};
    return f >= 0 && f < K3_RATE_N ? names[f] : "?";
}

/* The rate table's format of the model's trunk matrices, and of its routed
 * experts: the declared dtype (bf16 when it names none the table has; a
 * GGUF block type is timed as bf16 until the probe times those). */
static void model_rate_formats(const k3_config *c, int *trunk, int *experts)
{
    *trunk = !strcmp(c->dtype, "float32") ? K3_RATE_F32
             : !strcmp(c->dtype, "float16") ? K3_RATE_F16
             : !strncmp(c->dtype, "float8", 6) ? K3_RATE_F8 : K3_RATE_BF16;
    *experts = c->experts_mxfp4 ? K3_RATE_MXFP4 : *trunk;
}

/* A matvec rate in GB/s from an object of them; 0 when absent or absurd. */
static double rate_gbps(json_t *matvec, int format)
{
    const double v = json_number_value(json_object_get(matvec, k3_rate_format_name(format)));
    return v > 0 && v < 1e6 ? v : 0;
}

/* $XDG_CACHE_HOME/k3, else ~/.cache/k3, else /tmp/k3-cache-UID: where k3
 * plan caches its probes (app/cmd_plan.c). */
static void cache_folder(char *out, size_t len)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(out, len, "%s/k3", x);
    else if (home && *home) snprintf(out, len, "%s/.cache/k3", home);
    else snprintf(out, len, "/tmp/k3-cache-%d", (int)getuid());
}

/* From a --rates file: both kernel rates must be there, the disk may be. */
static int speeds_from_file(const char *path, int trunk_fmt, int expert_fmt, k3_plan_speeds *out, k3_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return k3_err(err, "--rates %s: %s", path, je.text);
    json_t *matvec = json_object_get(root, "matvec_gbps");
    const double trunk = rate_gbps(matvec, trunk_fmt), experts = rate_gbps(matvec, expert_fmt);
    json_t *disk = json_object_get(root, "disk_gbps");
    const double disk_gbps = json_number_value(disk);
    if (!trunk || !experts || (disk && !(disk_gbps > 0 && disk_gbps < 1e6))) {
        json_decref(root);
        return k3_err(err, "--rates %s: expected \"matvec_gbps\" with a positive %s and %s rate (GB/s) and, if "
                      "given, a positive \"disk_gbps\"", path, k3_rate_format_name(trunk_fmt),
                      k3_rate_format_name(expert_fmt));
    }
    out->trunk_matvec_bytes_per_s = trunk * 1e9;
    out->expert_matvec_bytes_per_s = experts * 1e9;
    if (disk) out->read_bytes_per_s = disk_gbps * 1e9;
    snprintf(out->source, sizeof out->source, "--rates %.120s%s", path, disk ? "" : "; disk 2 GB/s default");
    json_decref(root);
    return 0;
}

/* From k3 plan's caches: the kernel rates under this CPU, thread count and
 * engine build (the same key k3 plan writes), the disk's under the model's
 * filesystem (k3 plan probed it on the model's files or a scratch file). */
static void speeds_from_cache(int n_threads, const char *model_dir, int trunk_fmt, int expert_fmt, k3_plan_speeds *out)
{
    char folder[PATH_MAX], path[PATH_MAX + 32], cpu[256], key[512];
    cache_folder(folder, sizeof folder);
    k3_cpu_name(cpu, sizeof cpu);
    snprintf(key, sizeof key, "%s / %d threads / %s", cpu, n_threads, k3_engine_build());
    snprintf(path, sizeof path, "%s/kernel_rates.json", folder);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *matvec = json_object_get(json_object_get(root, key), "matvec_gbps");
    const double trunk = rate_gbps(matvec, trunk_fmt), experts = rate_gbps(matvec, expert_fmt);
    const int kernels = trunk > 0 && experts > 0;
    if (kernels) {
        out->trunk_matvec_bytes_per_s = trunk * 1e9;
        out->expert_matvec_bytes_per_s = experts * 1e9;
    }
    json_decref(root);
    struct stat model_st;
    int disk = 0;
    if (stat(model_dir, &model_st) == 0) {
        snprintf(path, sizeof path, "%s/disk_rates.json", folder);
        snprintf(key, sizeof key, "dev %llu", (unsigned long long)model_st.st_dev);
        root = json_load_file(path, 0, NULL);
        const double gbps = json_number_value(json_object_get(root, key));
        if (gbps > 0 && gbps < 1e6) {
            out->read_bytes_per_s = gbps * 1e9;
            disk = 1;
        }
        json_decref(root);
    }
    snprintf(out->source, sizeof out->source, "kernels %s, disk %s",
             kernels ? "from k3 plan's cached probe" : "30/17 GB/s defaults (no cached probe for this build)",
             disk ? "from k3 plan's cached probe" : "2 GB/s default");
}

int k3_plan_speeds_load(const char *rates_path, int n_threads, const char *model_dir, const k3_config *c,
                        k3_plan_speeds *out, k3_error *err)
{
    k3_plan_default_speeds(out);
    int trunk_fmt, expert_fmt;
    model_rate_formats(c, &trunk_fmt, &expert_fmt);
    if (rates_path) return speeds_from_file(rates_path, trunk_fmt, expert_fmt, out, err);
    speeds_from_cache(n_threads, model_dir, trunk_fmt, expert_fmt, out);
    return 0;
}
