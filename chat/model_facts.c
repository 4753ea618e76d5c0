/* model_facts.c - see model_facts.h. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "model_facts.h"

/* Decimal units: a 48B model's 98 GB matches what the Hub and the disk say. */
void model_fmt_bytes(char *buf, size_t cap, double b)
{
    if (b < 1e3) snprintf(buf, cap, "%.0f B", b);
    else if (b < 1e6) snprintf(buf, cap, "%.1f kB", b / 1e3);
    else if (b < 1e9) snprintf(buf, cap, "%.1f MB", b / 1e6);
    else if (b < 1e12) snprintf(buf, cap, "%.2f GB", b / 1e9);
    else snprintf(buf, cap, "%.2f TB", b / 1e12);
}

/* Weights sit at the top of a checkpoint or packed directory, so the top
 * level is the size people download and keep. */
int64_t model_dir_bytes(const char *dir)
{
    k3_model_info info;
    k3_error err;
    struct stat fst;
    if (stat(dir, &fst) == 0 && S_ISREG(fst.st_mode))   /* a GGUF file: the parts of its set */
        return k3_model_peek_gguf(dir, &info, &err) == 0 ? (int64_t)info.weight_bytes : (int64_t)fst.st_size;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int64_t total = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* The plan JSON (k3_model_plan_json) in one line of words. */
static void plan_words(const k3_model *m, char *out, size_t cap)
{
    char js[2048];
    snprintf(out, cap, "unknown");
    if (k3_model_plan_json(m, js, sizeof js) < 0) return;
    json_t *p = json_loads(js, 0, NULL);
    if (!p) return;
    long long budget = json_integer_value(json_object_get(p, "budget_bytes"));
    long long pinned = json_integer_value(json_object_get(p, "pinned_units"));
    long long trunk = json_integer_value(json_object_get(p, "trunk_units"));
    long long slots = json_integer_value(json_object_get(p, "expert_slots"));
    long long experts = json_integer_value(json_object_get(p, "experts_total"));
    long long ring = json_integer_value(json_object_get(p, "ring_slots"));
    if (json_is_true(json_object_get(p, "fully_resident"))) {
        snprintf(out, cap, "fully resident (all weights in memory, no disk reads)");
    } else {
        char b[32];
        model_fmt_bytes(b, sizeof b, (double)budget);
        snprintf(out, cap, "--mem %s: trunk %lld of %lld units pinned%s, expert cache %lld of %lld experts; "
                 "the rest is read from disk each token", b, pinned, trunk, ring ? " (+ a ring of 2)" : "", slots, experts);
    }
    json_decref(p);
}

char *model_facts_text(const k3_model *m, const char *model_dir)
{
    k3_model_info info;
    k3_model_get_info(m, &info);
    const char *dir = model_dir ? model_dir : "";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    size_t ds = dl;
    while (ds > 0 && dir[ds - 1] != '/') ds--;
    char size[32] = "unknown", plan[512];
    int64_t on_disk = model_dir_bytes(dir);
    if (on_disk >= 0) model_fmt_bytes(size, sizeof size, (double)on_disk);
    plan_words(m, plan, sizeof plan);
    char *text = NULL;
    int n = asprintf(&text,
                     "model         %.*s (%s)%s\n"
                     "architecture  %s: %d layers (%d KDA linear attention, %d MLA full attention), hidden %d, "
                     "vocab %d\n"
                     "experts       %d routed, top %d per token%s\n"
                     "type          %s\n"
                     "dtype         %s\n"
                     "context       %d tokens (this chat's limit; the memory plan reserves state for it)\n"
                     "file size     %s on disk\n"
                     "plan          %s",
                     (int)(dl - ds), dir + ds, dir,
                     info.random_weights ? "\nweights       RANDOM (written by k3 gen): the model does not talk sense; "
                                           "k3 help models says how to get a real one" : "",
                     info.model_type, info.n_layers, info.n_kda_layers, info.n_mla_layers, info.hidden, info.vocab_size,
                     info.n_experts, info.top_k, info.experts_mxfp4 ? " (experts in MXFP4)" : "",
                     info.type_label[0] ? info.type_label : "unknown",
                     info.dtype[0] ? info.dtype : "not declared in config.json", info.ctx_tokens, size, plan);
    return n < 0 ? NULL : text;
}

/* An integer field of the decoder config, or -1. */
static long long cfg_int(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

int model_dir_summary(const char *dir, char *out, size_t cap, char *why, size_t why_cap)
{
    if (k3_model_path_is_gguf(dir)) {     /* a GGUF file, set or folder: its header says */
        k3_model_info info;
        k3_error err;
        if (k3_model_peek_gguf(dir, &info, &err)) {
            snprintf(why, why_cap, "%s", err.msg);
            return -1;
        }
        int n = snprintf(out, cap, "%s, %d layers", info.model_type, info.n_layers);
        if (info.n_experts > 1 && n >= 0 && (size_t)n < cap)
            n += snprintf(out + n, cap - (size_t)n, ", %d experts top-%d", info.n_experts, info.top_k);
        if (n >= 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, ", GGUF");
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t jerr;
    json_t *top = json_load_file(path, 0, &jerr);
    if (!top) {
        snprintf(why, why_cap, "%s: %s", path, jerr.text);
        return -1;
    }
    json_t *mt = json_object_get(top, "model_type");
    json_t *dec = json_object_get(top, "text_config");
    if (!json_is_object(dec)) dec = top;
    const char *type = json_is_string(mt) ? json_string_value(mt) : "unknown model_type";
    long long layers = cfg_int(dec, "num_hidden_layers"), experts = cfg_int(dec, "num_experts");
    long long topk = cfg_int(dec, "num_experts_per_token");
    if (topk < 0) topk = cfg_int(dec, "num_experts_per_tok");
    json_t *dt = json_object_get(top, "dtype");
    if (!json_is_string(dt)) dt = json_object_get(top, "torch_dtype");
    if (!json_is_string(dt)) dt = json_object_get(dec, "dtype");
    if (!json_is_string(dt)) dt = json_object_get(dec, "torch_dtype");
    json_t *qc = json_object_get(dec, "quantization_config");
    if (!qc) qc = json_object_get(top, "quantization_config");
    char manifest[4200];
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    struct stat st;
    int packed = stat(manifest, &st) == 0;
    int n = snprintf(out, cap, "%s", type);
    if (layers > 0 && n >= 0 && (size_t)n < cap) n += snprintf(out + n, cap - (size_t)n, ", %lld layers", layers);
    if (experts > 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, ", %lld experts top-%lld", experts, topk);
    if (json_is_string(dt) && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, ", %s", json_string_value(dt));
    json_t *qfmt = json_is_object(qc) ? json_object_get(qc, "format") : NULL;   /* not an fp8 checkpoint's */
    if (json_is_string(qfmt) && !strcmp(json_string_value(qfmt), "mxfp4-pack-quantized") && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, " + MXFP4 experts");
    if (packed && n >= 0 && (size_t)n < cap) n += snprintf(out + n, cap - (size_t)n, ", packed");
    if (json_is_true(json_object_get(top, "k3_random_weights")) && n >= 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, ", random weights");
    json_decref(top);
    return 0;
}
