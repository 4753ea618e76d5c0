/* pack.c - `k3 pack`: Hugging Face checkpoint -> packed layout (see k3_offline.h,
 * manifest.h, docs/ARCHITECTURE.md, "The packed layout").
 *
 * Phases: plan (headers only: classify every tensor, compute every output
 * offset), check the destination (space, emptiness, stale DST.partial),
 * copy (source shard by shard, sequential reads through one buffer, writes
 * at final offsets; each tensor hashed as it passes), verify (fsync, drop
 * the written pages from the cache, re-read every file: per-tensor hashes
 * must match, padding must be zero, file FNV-1a recorded; sample tensors
 * compared with the source), manifest (written, fsync'd, re-loaded with the
 * reader), rename DST.partial -> DST.
 *
 * With --trunk / --experts TYPE the layers' (or the routed experts') weight
 * matrices are written as GGUF blocks of TYPE instead of copied: each row
 * converted to fp32 and quantized (quant_quantize.c) on its way from the
 * source buffer to the file; the hashes and the read-back check then cover
 * the quantized bytes, and the sample comparison quantizes the source rows
 * again. See quant_choice for which tensors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "file_read.h"
#include "k3.h"
#include "k3_util.h"
#include "config.h"
#include "manifest.h"
#include "kernels.h"
#include "mxfp4.h"
#include "quant_quantize.h"
#include "tables_write.h"
#include "unit_sums.h"
#include "k3_offline.h"
#include "safetensors.h"
#include "gguf_checkpoint.h"

enum { KIND_SKIP = -1, KIND_TRUNK = K3_PK_TRUNK, KIND_EXPERT = K3_PK_EXPERTS, KIND_EMBED = K3_PK_EMBED,
       KIND_HEAD = K3_PK_HEAD };

static const char *const aux_files[] = {"config.json", "tiktoken.model", "tokenizer_config.json",
                                        "generation_config.json"};

typedef struct pk_item {
    int src;                  /* index into ix.tensors */
    int file;                 /* k3_pk_file */
    int layer, expert;        /* -1 when not applicable */
    int rank;                 /* order inside its group (see item_rank) */
    uint64_t dst;             /* offset in its file */
    uint64_t bytes;           /* in its file: the source's, or its quantized size */
    const k3_quant_type *qtype;   /* written as these blocks; NULL = copied as stored */
    int64_t cols;             /* quantized: weights per row */
    int scale_src;            /* K3's MXFP4 "X.weight_packed" quantized: its "X.weight_scale"; else -1 */
    char *out_name;           /* that one's name in the pack ("X.weight"); NULL = the source's */
    uint64_t hash;            /* fast hash of the bytes, computed while copying */
} pk_item;

typedef struct pk_plan {
    st_index ix;
    char *config_text;        /* config.json, trimmed, verbatim */
    size_t config_len;
    int n_layers, tied, cfg_experts;
    pk_item *items;           /* in layout order: by file, then offset */
    int n_items, n_skipped;
    uint64_t *run_off, *run_bytes;
    int n_experts, n_layers_moe, n_pages;
    uint64_t page_bytes;
    int embed, norm, lm_head; /* item indices; lm_head = embed when tied */
    uint64_t file_bytes[K3_PK_NFILES];
    uint64_t checksum[K3_PK_NFILES];
    uint64_t fingerprint, copy_bytes, aux_bytes;
    const k3_quant_type *quant_trunk, *quant_experts;   /* --trunk, --experts; NULL = as stored */
    int *pair_scale;          /* per source tensor: an MXFP4 expert's scale tensor when --experts converts it */
    const k3_quant_type **pair_qtype;   /* ... and its block type */
    char *merged;             /* per source tensor: a scale tensor merged into its matrix */
    int n_quantized, n_quantized_experts, n_fallback, n_kept;
    int n_block_tensors;          /* tensors in a GGUF block type, copied as they are (a GGUF source) */
} pk_plan;

/* ------------------------------------------------------------------ helpers */

/* Monotonic seconds, for rates and the throttle. */
static double now_s(void) { return (double)k3_now_ns() * 1e-9; }

/* Round x up to a multiple of a (offsets, pads). */
static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Whole-buffer pwrite: loops over short writes and EINTR; ENOSPC says so plainly. */
static int pwrite_full(int fd, const void *buf, size_t n, uint64_t off, const char *what, k3_error *err)
{
    size_t put = 0;
    while (put < n) {
        ssize_t r = pwrite(fd, (const char *)buf + put, n - put, (off_t)(off + put));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return k3_err(err, "%s: write error at byte %llu: %s", what, (unsigned long long)(off + put),
                                  r < 0 ? strerror(errno) : "no progress");
        put += (size_t)r;
    }
    return 0;
}

/* fsync a directory so a rename/create inside it is durable. */
static int fsync_dir(const char *path, k3_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return k3_err(err, "%s: %s", path, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) return k3_err(err, "%s: fsync failed: %s", path, strerror(errno));
    return 0;
}

/* nftw callback: delete each entry, children first. */
static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb; (void)type; (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a directory tree we own (DST.partial or a replaced packed DST). */
static int remove_tree(const char *path)
{
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Parent directory of path (for statvfs and the final fsync). */
static void parent_dir(const char *path, char *out, size_t len)
{
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == out) out[1] = 0;
    else *slash = 0;
}

/* 1 if dir exists and holds anything besides . and .. */
static int dir_nonempty(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) { n = 1; break; }
    closedir(d);
    return n;
}

/* ------------------------------------------------------------ fast hash
 * The per-tensor write-time vs read-back comparison needs a hash that keeps
 * up with the disk; four independent 64-bit lanes (xxHash64-style rounds)
 * do ~10 bytes/cycle, where byte-serial FNV-1a does ~0.25. Streamable:
 * callers may feed any split of the bytes. Internal only (never stored). */
#define FH_P1 0x9E3779B185EBCA87ull
#define FH_P2 0xC2B2AE3D27D4EB4Full
#define FH_P3 0x165667B19E3779F9ull

typedef struct fast_hash {
    uint64_t v[4];
    uint8_t tail[32];
    size_t ntail;
    uint64_t total;
} fast_hash;

/* Lane mixing for the fast hash. */
static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t fh_round(uint64_t acc, uint64_t w) { return rotl64(acc + w * FH_P2, 31) * FH_P1; }

/* Fresh state: one per tensor, on both the write and the read-back side. */
static void fh_init(fast_hash *h)
{
    h->v[0] = FH_P1 + FH_P2;
    h->v[1] = FH_P2;
    h->v[2] = 0;
    h->v[3] = (uint64_t)0 - FH_P1;
    h->ntail = 0;
    h->total = 0;
}

/* One 32-byte block through the four lanes (used for a completed tail). */
static inline void fh_block(fast_hash *h, const uint8_t *p)
{
    uint64_t w[4];
    memcpy(w, p, 32);
    h->v[0] = fh_round(h->v[0], w[0]);
    h->v[1] = fh_round(h->v[1], w[1]);
    h->v[2] = fh_round(h->v[2], w[2]);
    h->v[3] = fh_round(h->v[3], w[3]);
}

/* Feed bytes; any split of a tensor gives the same result (tail carried over). */
static void fh_update(fast_hash *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    h->total += n;
    if (h->ntail) {
        size_t take = 32 - h->ntail < n ? 32 - h->ntail : n;
        memcpy(h->tail + h->ntail, p, take);
        h->ntail += take;
        p += take;
        n -= take;
        if (h->ntail < 32) return;
        fh_block(h, h->tail);
        h->ntail = 0;
    }
    uint64_t v0 = h->v[0], v1 = h->v[1], v2 = h->v[2], v3 = h->v[3];
    for (; n >= 32; p += 32, n -= 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        v0 = fh_round(v0, w[0]);
        v1 = fh_round(v1, w[1]);
        v2 = fh_round(v2, w[2]);
        v3 = fh_round(v3, w[3]);
    }
    h->v[0] = v0; h->v[1] = v1; h->v[2] = v2; h->v[3] = v3;
    memcpy(h->tail, p, n);
    h->ntail = n;
}

/* Fold lanes, length and tail into the 64-bit value compared after re-reading. */
static uint64_t fh_final(const fast_hash *h)
{
    uint64_t acc = rotl64(h->v[0], 1) + rotl64(h->v[1], 7) + rotl64(h->v[2], 12) + rotl64(h->v[3], 18);
    acc = (acc ^ h->total) * FH_P1;
    for (size_t i = 0; i < h->ntail; i++) acc = rotl64(acc ^ (h->tail[i] * FH_P3), 11) * FH_P1;
    acc ^= acc >> 33;
    acc *= FH_P2;
    acc ^= acc >> 29;
    acc *= FH_P3;
    return acc ^ (acc >> 32);
}

/* ------------------------------------------------------------ planning */

/* Name without the K3 wrapper prefix: classification ignores it, names in
 * the manifest keep it. */
static const char *core_name(const char *name)
{
    return strncmp(name, "language_model.", 15) ? name : name + 15;
}

/* Parse a decimal id followed by '.', advancing *p. -1 if not there. */
static long parse_id(const char **p)
{
    const char *s = *p;
    if (*s < '0' || *s > '9') return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        if (v > 100000000) return -1;
        v = v * 10 + (*s++ - '0');
    }
    if (*s != '.') return -1;
    *p = s + 1;
    return v;
}

/* Which file a tensor goes to, and its layer/expert. *sub gets the part of
 * an expert tensor's name after "experts.E." ("w1.weight_packed"). */
static int classify(const char *name, int *layer, int *expert, const char **sub)
{
    *layer = *expert = -1;
    *sub = NULL;
    if (!strncmp(name, "vision_tower.", 13) || !strncmp(name, "mm_projector.", 13)) return KIND_SKIP;
    const char *c = core_name(name);
    if (!strncmp(c, "model.embed_tokens.", 19)) return KIND_EMBED;
    if (!strncmp(c, "model.layers.", 13)) {
        const char *p = c + 13;
        long l = parse_id(&p);
        if (l >= 0) {
            *layer = (int)l;
            const char *q = NULL;
            if (!strncmp(p, "block_sparse_moe.experts.", 25)) q = p + 25;
            else if (!strncmp(p, "mlp.experts.", 12)) q = p + 12;
            if (q) {
                long e = parse_id(&q);
                if (e >= 0 && *q) {
                    *expert = (int)e;
                    *sub = q;
                    return KIND_EXPERT;
                }
            }
            return KIND_TRUNK;
        }
    }
    return KIND_HEAD;
}

/* Gate, up, down, then anything else: the order of an expert's page. */
static int proj_rank(const char *sub, size_t len)
{
    static const char *const names[3][3] = {{"w1", "gate_proj", "gate"}, {"w3", "up_proj", "up"},
                                            {"w2", "down_proj", "down"}};
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 3; i++)
            if (strlen(names[r][i]) == len && !strncmp(sub, names[r][i], len)) return r;
    return 3;
}

/* The main tensor of a projection first, its companions (scales) after. */
static int companion_rank(const char *suffix)
{
    if (!strcmp(suffix, "weight")) return 0;
    if (!strcmp(suffix, "weight_packed")) return 1;
    return 2;
}

/* Rank inside embed.bin / head.bin: the weight first; norm then lm_head. */
static int item_rank(int kind, const char *name)
{
    const char *c = core_name(name);
    if (kind == KIND_EMBED) return strcmp(c, "model.embed_tokens.weight") ? 1 : 0;
    if (kind == KIND_HEAD) {
        if (!strcmp(c, "model.norm.weight")) return 0;
        if (!strncmp(c, "model.norm.", 11)) return 1;
        if (!strcmp(c, "lm_head.weight")) return 2;
        if (!strncmp(c, "lm_head.", 8)) return 3;
        return 4;
    }
    return 0;
}

static const st_index *sort_ix;

/* Source position: shard, then offset. */
static int cmp_src_pos(const st_tensor *a, const st_tensor *b)
{
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    return (a->file_offset > b->file_offset) - (a->file_offset < b->file_offset);
}

/* Layout order: file, layer, expert, rank; experts by projection and
 * companion; otherwise source order (forward order inside a layer). */
static int cmp_layout(const void *pa, const void *pb)
{
    const pk_item *a = pa, *b = pb;
    if (a->file != b->file) return a->file < b->file ? -1 : 1;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    if (a->expert != b->expert) return a->expert < b->expert ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    const st_tensor *x = &sort_ix->tensors[a->src], *y = &sort_ix->tensors[b->src];
    if (a->file == K3_PK_EXPERTS) {
        int l, e;
        const char *sx, *sy;
        classify(x->name, &l, &e, &sx);
        classify(y->name, &l, &e, &sy);
        size_t lx = strcspn(sx, "."), ly = strcspn(sy, ".");
        int rx = proj_rank(sx, lx), ry = proj_rank(sy, ly);
        if (rx != ry) return rx < ry ? -1 : 1;
        size_t lm = lx < ly ? lx : ly;
        int c = strncmp(sx, sy, lm);
        if (c || lx != ly) return c ? c : (lx < ly ? -1 : 1);
        int cx = companion_rank(sx[lx] ? sx + lx + 1 : ""), cy = companion_rank(sy[ly] ? sy + ly + 1 : "");
        if (cx != cy) return cx < cy ? -1 : 1;
        return strcmp(sx, sy);
    }
    return cmp_src_pos(x, y);
}

static const pk_item *sort_items;
/* Copy order = source order, so every shard is read front to back once. */
static int cmp_copy_order(const void *pa, const void *pb)
{
    const pk_item *a = &sort_items[*(const int *)pa], *b = &sort_items[*(const int *)pb];
    return cmp_src_pos(&sort_ix->tensors[a->src], &sort_ix->tensors[b->src]);
}

/* An integer field of config.json at the top level or inside text_config (K3). */
static int config_int(json_t *root, const char *key, long long *out)
{
    json_t *v = json_object_get(root, key);
    if (!v) v = json_object_get(json_object_get(root, "text_config"), key);
    if (json_is_integer(v)) { *out = json_integer_value(v); return 1; }
    if (json_is_boolean(v)) { *out = json_is_true(v); return 1; }
    return 0;
}

/* Read config.json: keep its text verbatim, extract the few numbers the
 * layout needs (layers, tie, expert count for a cross-check). */
static int plan_config(pk_plan *p, const char *src, const gguf_file *gguf, k3_error *err)
{
    char path[4200];
    char *text = NULL;
    size_t len = 0;
    if (gguf) {                           /* a GGUF: the config its metadata and shapes imply */
        snprintf(path, sizeof path, "%s", src);
        if (gguf_checkpoint_config_text(gguf, &text, err)) return -1;
        len = strlen(text);
    } else {
        snprintf(path, sizeof path, "%s/config.json", src);
        if (access(path, F_OK) != 0) return k3_err(err, "%s: not a model directory (no config.json)", src);
        if (k3_read_file(path, K3_MAX_CONFIG_BYTES, &text, &len, err)) return -1;
    }
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        free(text);
        return root ? k3_err(err, "%s: not a JSON object", path)
                    : k3_err(err, "%s: not valid JSON (%s, line %d)", path, jerr.text, jerr.line);
    }
    long long v;
    int rc = 0;
    if (!config_int(root, "num_hidden_layers", &v))
        rc = k3_err(err, "%s: missing integer \"num_hidden_layers\" (top level or text_config)", path);
    else if (v < 1 || v > 65535)
        rc = k3_err(err, "%s: num_hidden_layers %lld is out of range", path, v);
    else
        p->n_layers = (int)v;
    p->tied = config_int(root, "tie_word_embeddings", &v) && v;
    p->cfg_experts = 0;
    if (config_int(root, "num_experts", &v) || config_int(root, "n_routed_experts", &v)) p->cfg_experts = (int)v;
    json_decref(root);
    /* trim surrounding whitespace; the object itself is kept byte for byte */
    size_t a = 0, b = len;
    while (a < b && (text[a] == ' ' || text[a] == '\n' || text[a] == '\r' || text[a] == '\t')) a++;
    while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\n' || text[b - 1] == '\r' || text[b - 1] == '\t')) b--;
    memmove(text, text + a, b - a);
    text[b - a] = 0;
    p->config_text = text;
    p->config_len = b - a;
    return rc;
}

/* Source fingerprint: st_shard_fingerprint over every shard, exactly as the
 * weight provider computes it for an HF directory. */
static int plan_fingerprint(pk_plan *p, uint8_t *buf, size_t buf_len, k3_error *err)
{
    (void)buf;
    (void)buf_len;
    uint64_t h = K3_FNV_INIT;
    for (int s = 0; s < p->ix.n_shards; s++)   /* a GGUF part hashes its header as the store does */
        if (st_file_fingerprint(p->ix.shards[s].fd, p->ix.shards[s].path, p->ix.shards[s].file_bytes,
                                p->ix.shards[s].header_bytes, &h, err))
            return -1;
    p->fingerprint = h;
    return 0;
}

/* The type rows of cols weights are written in when want is asked: want,
 * or as llama-quantize falls back for rows that are not whole blocks (Q4_K
 * -> Q5_0, Q6_K -> Q8_0; Q5_K -> Q5_0, as k3 writes no Q5_1; counted in
 * *fallback); NULL (kept as stored, *kept) when not a multiple of 32. */
static const k3_quant_type *quant_fit_rows(const k3_quant_type *want, int64_t cols, int *fallback, int *kept)
{
    if (cols % want->block_elems == 0) return want;
    const char *fb_name = want->ggml_id == K3_GGML_Q6_K ? "Q8_0" : want->block_elems == 256 ? "Q5_0" : NULL;
    const k3_quant_type *fb = fb_name ? k3_quant_type_by_name(fb_name) : NULL;
    if (fb && cols % fb->block_elems == 0) {
        (*fallback)++;
        return fb;
    }
    (*kept)++;
    return NULL;
}

/* The block type --trunk / --experts asked for (want) that tensor t is
 * written in, or NULL to copy it as stored. Like llama-quantize: only the
 * 2-D weight matrices ("*.weight" of a float dtype, more than one row), not
 * the norms, not the MoE router ("...gate.weight", kept exact as llama.cpp
 * keeps ffn_gate_inp), not K3's attention-residual score vectors
 * ("*_res_proj.weight", [1, hidden], read as vectors); rows as
 * quant_fit_rows says. */
static const k3_quant_type *quant_choice(const k3_quant_type *want, const st_tensor *t, int *fallback, int *kept)
{
    if (!want || t->ndim != 2 || t->shape[0] < 2) return NULL;
    if (t->dtype != K3_DT_F32 && t->dtype != K3_DT_F16 && t->dtype != K3_DT_BF16) return NULL;
    const char *c = core_name(t->name);
    size_t n = strlen(c);
    if (n < 8 || strcmp(c + n - 7, ".weight")) return NULL;
    const char *end = c + n - 7, *last = end;
    while (last > c && last[-1] != '.') last--;
    size_t len = (size_t)(end - last);
    if (memmem(last, len, "norm", 4) || memmem(last, len, "_res_proj", 9) || (len == 4 && !memcmp(last, "gate", 4)))
        return NULL;
    return quant_fit_rows(want, t->shape[1], fallback, kept);
}

/* The block type an item is stored in: the one it is quantized to, else a
 * GGUF source tensor's own (copied as it is), else NULL. */
static const k3_quant_type *stored_qtype(const pk_plan *p, const pk_item *it)
{
    return it->qtype ? it->qtype : p->ix.tensors[it->src].qtype;
}

/* K3's MXFP4 expert matrices when --experts asks for a block type: the
 * pair "X.weight_packed" (U8 [rows, cols/2]) + "X.weight_scale" ([rows,
 * cols/32]) becomes one "X.weight" of that type (decoded exactly, then
 * quantized; to MXFP4 the values come back unchanged, only the layout
 * differs). Marks each pair in pair_scale / pair_qtype and its scale tensor
 * in merged. */
static int plan_mxfp4_pairs(pk_plan *p, k3_error *err)
{
    st_index *ix = &p->ix;
    p->pair_scale = malloc((size_t)(ix->n_tensors + 1) * sizeof *p->pair_scale);
    p->pair_qtype = calloc((size_t)ix->n_tensors + 1, sizeof *p->pair_qtype);
    p->merged = calloc((size_t)ix->n_tensors + 1, 1);
    if (!p->pair_scale || !p->pair_qtype || !p->merged) return k3_err(err, "out of memory");
    for (int i = 0; i < ix->n_tensors; i++) p->pair_scale[i] = -1;
    if (!p->quant_experts) return 0;
    for (int i = 0; i < ix->n_tensors; i++) {
        const st_tensor *t = &ix->tensors[i];
        int layer, expert;
        const char *sub;
        size_t n = strlen(t->name);
        if (classify(t->name, &layer, &expert, &sub) != KIND_EXPERT || t->dtype != K3_DT_U8 || t->ndim != 2 ||
            n < 14 || n > 500 || strcmp(t->name + n - 14, ".weight_packed"))
            continue;
        char name[520];
        snprintf(name, sizeof name, "%.*s.weight_scale", (int)(n - 14), t->name);
        const st_tensor *s = st_find(ix, name);
        if (!s || (s->dtype != K3_DT_U8 && s->dtype != K3_DT_F8_E8M0) || s->ndim != 2 || s->shape[0] != t->shape[0] ||
            s->shape[1] * 16 != t->shape[1])
            continue;
        const k3_quant_type *q = quant_fit_rows(p->quant_experts, 2 * t->shape[1], &p->n_fallback, &p->n_kept);
        if (!q) continue;
        p->pair_scale[i] = (int)(s - ix->tensors);
        p->pair_qtype[i] = q;
        p->merged[s - ix->tensors] = 1;
    }
    return 0;
}

/* Phase 1 of the layout: classify every tensor into an item (which file,
 * layer, expert), counting each layer's tensors and experts, then sort the
 * items into the files' order. */
static int layout_classify(pk_plan *p, const char *src, int *layer_tensors, int *layer_max_e, k3_error *err)
{
    st_index *ix = &p->ix;
    for (int i = 0; i < ix->n_tensors; i++) {
        const st_tensor *t = &ix->tensors[i];
        int layer, expert;
        const char *sub;
        int kind = classify(t->name, &layer, &expert, &sub);
        if (kind == KIND_SKIP) { p->n_skipped++; continue; }
        if (p->merged[i]) continue;   /* an MXFP4 scale, inside its quantized matrix */
        if (layer >= p->n_layers)
            return k3_err(err, "%s: tensor '%s' belongs to layer %d but config.json says %d layers",
                          ix->shards[t->shard].path, t->name, layer, p->n_layers);
        pk_item *it = &p->items[p->n_items++];
        it->src = i;
        it->file = kind;
        it->layer = layer;
        it->expert = expert;
        it->rank = item_rank(kind, t->name);
        it->bytes = t->nbytes;
        it->scale_src = p->pair_scale[i];
        it->cols = t->ndim == 2 ? (it->scale_src >= 0 ? 2 * t->shape[1] : t->shape[1]) : 0;
        if (it->scale_src >= 0) {
            it->qtype = p->pair_qtype[i];
            if (!(it->out_name = strndup(t->name, strlen(t->name) - 7))) return k3_err(err, "out of memory");
        } else {
            it->qtype = quant_choice(kind == KIND_TRUNK ? p->quant_trunk : kind == KIND_EXPERT ? p->quant_experts : NULL,
                                     t, &p->n_fallback, &p->n_kept);
        }
        if (it->qtype) {
            if (k3_quant_bytes(it->qtype, (uint64_t)(t->shape[0] * it->cols), &it->bytes))
                return k3_err(err, "%s: tensor '%s' is too large for %s", ix->shards[t->shard].path, t->name,
                              it->qtype->name);
            p->n_quantized++;
            p->n_quantized_experts += kind == KIND_EXPERT;
        }
        p->n_block_tensors += !it->qtype && t->dtype == K3_DT_GGML;
        if (layer >= 0) layer_tensors[layer]++;
        if (expert >= 0 && expert + 1 > layer_max_e[layer]) layer_max_e[layer] = expert + 1;
        p->copy_bytes += t->nbytes;
    }
    for (int l = 0; l < p->n_layers; l++)
        if (!layer_tensors[l])
            return k3_err(err, "%s: no tensors for layer %d (config.json says %d layers)", src, l, p->n_layers);
    sort_ix = ix;
    qsort(p->items, (size_t)p->n_items, sizeof *p->items, cmp_layout);
    return 0;
}

/* Phase 2: the embedding, the final norm and lm_head (the embedding when
 * the config ties them), each present once. */
static int layout_find_ends(pk_plan *p, const char *src, k3_error *err)
{
    st_index *ix = &p->ix;
    p->embed = p->norm = p->lm_head = -1;
    for (int i = 0; i < p->n_items; i++) {
        const char *c = core_name(ix->tensors[p->items[i].src].name);
        if (!strcmp(c, "model.embed_tokens.weight")) p->embed = i;
        else if (!strcmp(c, "model.norm.weight")) p->norm = i;
        else if (!strcmp(c, "lm_head.weight")) p->lm_head = i;
    }
    if (p->embed < 0) return k3_err(err, "%s: no model.embed_tokens.weight tensor", src);
    if (p->norm < 0) return k3_err(err, "%s: no model.norm.weight tensor (the final norm)", src);
    const st_tensor *emb = &ix->tensors[p->items[p->embed].src];
    if (emb->ndim < 1 || emb->shape[0] < 1)
        return k3_err(err, "%s: model.embed_tokens.weight has no rows", ix->shards[emb->shard].path);
    if (p->tied) p->lm_head = p->embed;
    else if (p->lm_head < 0)
        return k3_err(err, "%s: no lm_head.weight tensor and config.json does not set tie_word_embeddings", src);
    return 0;
}

/* Phase 3: every MoE layer has experts 0..E-1 with E as config.json says;
 * sets n_layers_moe and n_experts. */
static int layout_count_experts(pk_plan *p, const char *src, const int *layer_max_e, k3_error *err)
{
    int max_e = 0;
    for (int l = 0; l < p->n_layers; l++) {
        if (!layer_max_e[l]) continue;
        p->n_layers_moe++;
        if (layer_max_e[l] > max_e) max_e = layer_max_e[l];
        if (p->cfg_experts > 0 && layer_max_e[l] != p->cfg_experts)
            return k3_err(err, "%s: layer %d has experts 0..%d but config.json says %d experts", src, l,
                          layer_max_e[l] - 1, p->cfg_experts);
    }
    p->n_experts = max_e;
    return 0;
}

/* Phase 4: the page size, the largest expert's tensors laid end to end
 * (each aligned), rounded up to K3_PACK_ALIGN: one read per expert. */
static void layout_page_bytes(pk_plan *p)
{
    uint64_t page_max = 0;
    for (int i = 0; i < p->n_items;) {
        if (p->items[i].file != K3_PK_EXPERTS) { i++; continue; }
        int l = p->items[i].layer, e = p->items[i].expert, j = i;
        uint64_t used = 0;
        while (j < p->n_items && p->items[j].file == K3_PK_EXPERTS && p->items[j].layer == l &&
               p->items[j].expert == e) {
            used = align_up(used, K3_PACK_TENSOR_ALIGN) + p->items[j].bytes;
            j++;
        }
        if (used > page_max) page_max = used;
        i = j;
    }
    p->page_bytes = page_max ? align_up(page_max, K3_PACK_ALIGN) : 0;
}

/* Phase 5a: the trunk file, one 4 KiB-aligned, 4 KiB-padded run per layer
 * in forward order, from item *i on (the items are sorted trunk first). */
static void layout_place_trunk(pk_plan *p, int *i, uint64_t *cur)
{
    for (int l = 0; l < p->n_layers; l++) {
        p->run_off[l] = *cur = align_up(*cur, K3_PACK_ALIGN);
        for (; *i < p->n_items && p->items[*i].file == K3_PK_TRUNK && p->items[*i].layer == l; (*i)++) {
            p->items[*i].dst = align_up(*cur, K3_PACK_TENSOR_ALIGN);
            *cur = p->items[*i].dst + p->items[*i].bytes;
        }
        p->run_bytes[l] = align_up(*cur - p->run_off[l], K3_PACK_ALIGN);
        *cur = p->run_off[l] + p->run_bytes[l];
    }
}

/* Phase 5b: the experts file, one page per expert in (layer, expert)
 * order, ids 0..E-1 without gaps, every expert holding the same tensors
 * in the same bytes as expert 0 of its layer. */
static int layout_place_experts(pk_plan *p, const char *src, int *i, uint64_t *cur, k3_error *err)
{
    int first_n = 0, want_e = 0, prev_l = -1;
    uint64_t first_used = 0;
    while (*i < p->n_items && p->items[*i].file == K3_PK_EXPERTS) {
        int l = p->items[*i].layer, e = p->items[*i].expert;
        if (l != prev_l) { want_e = 0; prev_l = l; }
        if (e != want_e) return k3_err(err, "%s: layer %d has expert %d but no expert %d", src, l, e, want_e);
        want_e++;
        uint64_t start = (uint64_t)p->n_pages++ * p->page_bytes, used = 0;
        int n = 0;
        for (; *i < p->n_items && p->items[*i].file == K3_PK_EXPERTS && p->items[*i].layer == l &&
               p->items[*i].expert == e; (*i)++, n++) {
            used = align_up(used, K3_PACK_TENSOR_ALIGN);
            p->items[*i].dst = start + used;
            used += p->items[*i].bytes;
        }
        if (e == 0) { first_n = n; first_used = used; }
        else if (n != first_n || used != first_used)
            return k3_err(err, "%s: expert %d of layer %d has %d tensors (%llu bytes) but expert 0 has %d (%llu "
                          "bytes)", src, e, l, n, (unsigned long long)used, first_n, (unsigned long long)first_used);
        *cur = start + p->page_bytes;
    }
    return 0;
}

/* Classify, validate and lay out every tensor, phase by phase. After this
 * every output offset and file size is known. */
static int plan_layout(pk_plan *p, const char *src, k3_error *err)
{
    st_index *ix = &p->ix;
    p->items = calloc((size_t)ix->n_tensors + 1, sizeof *p->items);
    p->run_off = calloc((size_t)p->n_layers, sizeof *p->run_off);
    p->run_bytes = calloc((size_t)p->n_layers, sizeof *p->run_bytes);
    int *layer_tensors = calloc((size_t)p->n_layers, sizeof *layer_tensors);
    int *layer_max_e = calloc((size_t)p->n_layers, sizeof *layer_max_e);
    int rc = 0;
    if (!p->items || !p->run_off || !p->run_bytes || !layer_tensors || !layer_max_e) {
        rc = k3_err(err, "out of memory");
        goto done;
    }
    if ((rc = plan_mxfp4_pairs(p, err)) || (rc = layout_classify(p, src, layer_tensors, layer_max_e, err)) ||
        (rc = layout_find_ends(p, src, err)) || (rc = layout_count_experts(p, src, layer_max_e, err)))
        goto done;
    layout_page_bytes(p);
    uint64_t cur[K3_PK_NFILES] = {0};
    int i = 0;
    layout_place_trunk(p, &i, &cur[K3_PK_TRUNK]);
    if ((rc = layout_place_experts(p, src, &i, &cur[K3_PK_EXPERTS], err))) goto done;
    /* embed.bin (the weight at 0, rows as stored) and head.bin (norm, lm_head, rest) */
    for (; i < p->n_items; i++) {
        pk_item *it = &p->items[i];
        it->dst = align_up(cur[it->file], K3_PACK_TENSOR_ALIGN);
        cur[it->file] = it->dst + it->bytes;
    }
    for (int f = 0; f < K3_PK_NFILES; f++) p->file_bytes[f] = align_up(cur[f], K3_PACK_ALIGN);
done:
    free(layer_tensors);
    free(layer_max_e);
    return rc;
}

/* Release the source index and the plan. */
static void plan_free(pk_plan *p)
{
    for (int i = 0; p->items && i < p->n_items; i++) free(p->items[i].out_name);
    st_index_close(&p->ix);
    free(p->config_text);
    free(p->items);
    free(p->pair_scale);
    free(p->pair_qtype);
    free(p->merged);
    free(p->run_off);
    free(p->run_bytes);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ copy */

typedef struct pk_run {
    const k3_pack_opts *o;
    pk_plan *p;
    char partial[4200];
    int fds[K3_PK_NFILES];
    char paths[K3_PK_NFILES][4300];
    uint8_t *buf;
    size_t buf_len;
    float *fbuf;                 /* quantizing: source rows as fp32 */
    uint8_t *qbuf;               /* quantizing: their blocks */
    size_t fbuf_len, qbuf_len;   /* bytes of each (PK_QUANT_BUFFER) */
    double t0;
} pk_run;



/* Checked between windows so SIGINT stops promptly and cleanly. */
static int cancelled(const pk_run *r, k3_error *err)
{
    if (r->o->cancel && *r->o->cancel) return k3_err(err, "interrupted");
    return 0;
}

/* Sleep as needed to hold the copy rate to --throttle. */
static void throttle(const pk_run *r, uint64_t done)
{
    if (r->o->throttle_mb_s <= 0) return;
    double want = (double)done / (r->o->throttle_mb_s * 1e6), have = now_s() - r->t0;
    if (want > have) {
        double d = want - have;
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            if (r->o->cancel && *r->o->cancel) break;
        }
    }
}

/* Create the four output files at their final sizes (preallocated, so a
 * full disk shows up now, not halfway). */
static int open_outputs(pk_run *r, k3_error *err)
{
    for (int f = 0; f < K3_PK_NFILES; f++) {
        snprintf(r->paths[f], sizeof r->paths[f], "%s/%s", r->partial, k3_pk_file_name((k3_pk_file)f));
        r->fds[f] = open(r->paths[f], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (r->fds[f] < 0) return k3_err(err, "%s: %s", r->paths[f], strerror(errno));
        uint64_t size = r->p->file_bytes[f];
        if (!size) continue;
        int rc = fallocate(r->fds[f], 0, 0, (off_t)size);
        if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) rc = ftruncate(r->fds[f], (off_t)size);
        if (rc != 0)
            return k3_err(err, "%s: cannot allocate %llu bytes: %s", r->paths[f], (unsigned long long)size,
                          strerror(errno));
    }
    return 0;
}

/* Bytes of one source row of a quantized item (K3's MXFP4: the nibbles). */
static size_t item_in_row(const pk_plan *p, const pk_item *it)
{
    const st_tensor *t = &p->ix.tensors[it->src];
    return it->scale_src >= 0 ? (size_t)it->cols / 2 : (size_t)it->cols * k3_dtype_size(t->dtype);
}

/* One source row of a quantized item as fp32: a float dtype converted, or
 * K3's MXFP4 nibbles decoded with the row's scale bytes (exact). */
static void source_row_f32(const pk_plan *p, const pk_item *it, const uint8_t *src_row, const uint8_t *scale_row,
                           float *out)
{
    if (it->scale_src < 0) {
        k3_convert_to_f32(out, src_row, p->ix.tensors[it->src].dtype, it->cols);
        return;
    }
    k3_weight w = {.dtype = K3_DT_MXFP4, .rows = 1, .cols = it->cols, .data = src_row, .mx_scale = scale_row};
    k3_mxfp4_decode_row_scalar(&w, 0, out);
}

/* The scale bytes of a K3 MXFP4 item (malloc'd, all rows) into *out; NULL
 * for any other item. */
static int read_item_scales(pk_run *r, const pk_item *it, uint8_t **out, k3_error *err)
{
    *out = NULL;
    if (it->scale_src < 0) return 0;
    const st_tensor *s = &r->p->ix.tensors[it->scale_src];
    const st_shard *sh = &r->p->ix.shards[s->shard];
    if (!(*out = malloc(s->nbytes ? s->nbytes : 1))) return k3_err(err, "out of memory");
    if (k3_pread_full(sh->fd, *out, s->nbytes, s->file_offset, sh->path, err)) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* Quantize n_rows rows of item it from src (rows from first_row on; scales:
 * the item's scale bytes, all rows, or NULL) and write the blocks at
 * it->dst + first_row's offset, feeding them to h: rows in batches that fit
 * the scratch buffers, each batch's rows spread over the OpenMP threads
 * (every row is quantized alone, so the bytes do not depend on the thread
 * count). A weight that is not finite is refused by row. */
static int quantize_rows(pk_run *r, const pk_item *it, const uint8_t *src, const uint8_t *scales, int64_t first_row,
                         int64_t n_rows, fast_hash *h, k3_error *err)
{
    const st_tensor *t = &r->p->ix.tensors[it->src];
    const int64_t cols = it->cols;
    const size_t in_row = item_in_row(r->p, it), scale_row = (size_t)cols / 32;
    uint64_t out_row = 0;
    k3_quant_bytes(it->qtype, (uint64_t)cols, &out_row);
    int64_t per = (int64_t)(r->qbuf_len / out_row), per_f = (int64_t)(r->fbuf_len / ((size_t)cols * sizeof(float)));
    if (per_f < per) per = per_f;
    if (per < 1)
        return k3_err(err, "%s: tensor '%s': a row of %lld weights does not fit the quantizing buffer",
                      r->p->ix.shards[t->shard].path, t->name, (long long)cols);
    for (int64_t r0 = 0; r0 < n_rows; r0 += per) {
        const int64_t nr = n_rows - r0 < per ? n_rows - r0 : per;
        int64_t bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad)
        for (int64_t i = 0; i < nr; i++) {
            float *row = r->fbuf + i * cols;
            source_row_f32(r->p, it, src + (size_t)(r0 + i) * in_row,
                           scales ? scales + (size_t)(first_row + r0 + i) * scale_row : NULL, row);
            for (int64_t j = 0; j < cols; j++)
                if (!isfinite(row[j])) {
                    if (first_row + r0 + i < bad) bad = first_row + r0 + i;
                    break;
                }
            k3_quant_quantize(it->qtype, row, cols, r->qbuf + (size_t)i * out_row);
        }
        if (bad != INT64_MAX)
            return k3_err(err, "%s: tensor '%s' row %lld holds a NaN or an infinity: it cannot be quantized",
                          r->p->ix.shards[t->shard].path, t->name, (long long)bad);
        size_t n = (size_t)nr * out_row;
        fh_update(h, r->qbuf, n);
        if (pwrite_full(r->fds[it->file], r->qbuf, n, it->dst + (uint64_t)(first_row + r0) * out_row,
                        r->paths[it->file], err))
            return -1;
    }
    return 0;
}

/* A tensor larger than the copy buffer, quantized: whole rows per read. */
static int quantize_streamed(pk_run *r, pk_item *it, uint64_t *done, k3_error *err)
{
    const st_tensor *t = &r->p->ix.tensors[it->src];
    const st_shard *sh = &r->p->ix.shards[t->shard];
    const size_t in_row = item_in_row(r->p, it);
    const int64_t rows = t->shape[0], per = (int64_t)(r->buf_len / in_row);
    if (per < 1)
        return k3_err(err, "%s: tensor '%s': a row of %zu bytes does not fit the copy buffer", sh->path, t->name,
                      in_row);
    uint8_t *scales;
    if (read_item_scales(r, it, &scales, err)) return -1;
    fast_hash h;
    fh_init(&h);
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        int64_t nr = rows - r0 < per ? rows - r0 : per;
        size_t n = (size_t)nr * in_row;
        if (k3_pread_full(sh->fd, r->buf, n, t->file_offset + (uint64_t)r0 * in_row, sh->path, err) ||
            quantize_rows(r, it, r->buf, scales, r0, nr, &h, err) || cancelled(r, err)) {
            free(scales);
            return -1;
        }
        *done += n;
        if (r->o->progress) r->o->progress(r->o->progress_user, "copy", *done, r->p->copy_bytes);
        throttle(r, *done);
    }
    free(scales);
    it->hash = fh_final(&h);
    return 0;
}

/* Copy every tensor: source shards in order, each read sequentially in
 * windows of up to buf_len bytes covering several tensors, each tensor
 * written at its final offset and hashed from the bytes written. */
static int copy_tensors(pk_run *r, k3_error *err)
{
    pk_plan *p = r->p;
    st_index *ix = &p->ix;
    int *order = malloc((size_t)p->n_items * sizeof *order + 1);
    if (!order) return k3_err(err, "out of memory");
    for (int i = 0; i < p->n_items; i++) order[i] = i;
    sort_items = p->items;
    sort_ix = ix;
    qsort(order, (size_t)p->n_items, sizeof *order, cmp_copy_order);
    for (int s = 0; s < ix->n_shards; s++) posix_fadvise(ix->shards[s].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t done = 0;
    int rc = 0;
    const uint64_t max_gap = 1u << 20;   /* read through small gaps (skipped tensors), not big ones */
    for (int k = 0; k < p->n_items && rc == 0;) {
        const st_tensor *t0 = &ix->tensors[p->items[order[k]].src];
        const st_shard *sh = &ix->shards[t0->shard];
        if (t0->nbytes > r->buf_len && p->items[order[k]].qtype) {
            rc = quantize_streamed(r, &p->items[order[k]], &done, err);
            k++;
            continue;
        }
        if (t0->nbytes > r->buf_len) {
            /* a tensor bigger than the buffer: stream it in buffer-sized pieces */
            pk_item *it = &p->items[order[k]];
            fast_hash h;
            fh_init(&h);
            for (uint64_t off = 0; off < t0->nbytes && rc == 0; off += r->buf_len) {
                size_t n = t0->nbytes - off < r->buf_len ? (size_t)(t0->nbytes - off) : r->buf_len;
                if ((rc = k3_pread_full(sh->fd, r->buf, n, t0->file_offset + off, sh->path, err))) break;
                fh_update(&h, r->buf, n);
                if ((rc = pwrite_full(r->fds[it->file], r->buf, n, it->dst + off, r->paths[it->file], err))) break;
                done += n;
                if (r->o->progress) r->o->progress(r->o->progress_user, "copy", done, p->copy_bytes);
                throttle(r, done);
                if ((rc = cancelled(r, err))) break;
            }
            it->hash = fh_final(&h);
            k++;
            continue;
        }
        /* a window: consecutive tensors of this shard that fit the buffer together */
        uint64_t start = t0->file_offset, end = start + t0->nbytes;
        int j = k + 1;
        for (; j < p->n_items; j++) {
            const st_tensor *t = &ix->tensors[p->items[order[j]].src];
            if (t->shard != t0->shard || t->file_offset > end + max_gap || t->file_offset + t->nbytes - start > r->buf_len)
                break;
            if (t->file_offset + t->nbytes > end) end = t->file_offset + t->nbytes;
        }
        if ((rc = k3_pread_full(sh->fd, r->buf, (size_t)(end - start), start, sh->path, err))) break;
        for (int q = k; q < j && rc == 0; q++) {
            pk_item *it = &p->items[order[q]];
            const st_tensor *t = &ix->tensors[it->src];
            const uint8_t *data = r->buf + (t->file_offset - start);
            fast_hash h;
            fh_init(&h);
            if (it->qtype) {
                uint8_t *scales;
                rc = read_item_scales(r, it, &scales, err);
                if (!rc) rc = quantize_rows(r, it, data, scales, 0, t->shape[0], &h, err);
                free(scales);
            } else {
                fh_update(&h, data, (size_t)t->nbytes);
                rc = pwrite_full(r->fds[it->file], data, (size_t)t->nbytes, it->dst, r->paths[it->file], err);
            }
            it->hash = fh_final(&h);
            done += t->nbytes;
        }
        if (rc) break;
        if (r->o->progress) r->o->progress(r->o->progress_user, "copy", done, p->copy_bytes);
        throttle(r, done);
        rc = cancelled(r, err);
        k = j;
    }
    free(order);
    return rc;
}

/* ------------------------------------------------------------ verify */

/* Padding must read back as zeros (preallocated, never written). */
static int all_zero(const uint8_t *b, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        if (w) return 0;
    }
    for (; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* A tensor fully re-read: its hash must be the one taken while writing. */
static int check_item(const pk_run *r, int f, int i, const fast_hash *h, k3_error *err)
{
    const pk_item *it = &r->p->items[i];
    if (fh_final(h) == it->hash) return 0;
    return k3_err(err, "%s: tensor '%s' at offset %llu reads back different from what was written (disk or "
                  "filesystem error)", r->paths[f], r->p->ix.tensors[it->src].name, (unsigned long long)it->dst);
}

/* Walk one re-read chunk [off, off+n) of file f: feed tensor bytes to the
 * open tensor's hash (checking each tensor as it completes), and require
 * the padding between tensors to be zero. *i / *open_item / h carry the
 * position across chunks. */
static int scan_chunk(const pk_run *r, int f, const uint8_t *data, uint64_t off, size_t n, int *i, int *open_item,
                      fast_hash *h, k3_error *err)
{
    const pk_plan *p = r->p;
    uint64_t pos = off, end = off + n;
    while (pos < end) {
        if (*open_item >= 0) {
            const pk_item *it = &p->items[*open_item];
            uint64_t tend = it->dst + it->bytes, stop = tend < end ? tend : end;
            fh_update(h, data + (pos - off), (size_t)(stop - pos));
            pos = stop;
            if (pos == tend) {
                if (check_item(r, f, *open_item, h, err)) return -1;
                *open_item = -1;
                (*i)++;
            }
            continue;
        }
        uint64_t next = *i < p->n_items && p->items[*i].file == f ? p->items[*i].dst : UINT64_MAX;
        if (next <= pos) {
            *open_item = *i;
            fh_init(h);
            if (p->items[*i].bytes == 0) {
                if (check_item(r, f, *i, h, err)) return -1;
                *open_item = -1;
                (*i)++;
            }
            continue;
        }
        uint64_t stop = next < end ? next : end;
        if (!all_zero(data + (pos - off), (size_t)(stop - pos)))
            return k3_err(err, "%s: padding between %llu and %llu reads back nonzero", r->paths[f],
                          (unsigned long long)pos, (unsigned long long)stop);
        pos = stop;
    }
    return 0;
}

/* The file checksum runs on a second thread: FNV-1a is byte-serial
 * (~1 GB/s), so it overlaps the next read and the per-tensor checks. */
typedef struct fnv_job {
    const uint8_t *data;
    size_t n;
    uint64_t h;
} fnv_job;

/* Thread body: continue the file FNV over one chunk. */
static void *fnv_thread(void *arg)
{
    fnv_job *j = arg;
    j->h = k3_fnv1a64(j->h, j->data, j->n);
    return NULL;
}

/* fsync every output, drop its pages from the cache (so the re-read comes
 * from the device), then read each file once sequentially, double-buffered:
 * the file's FNV-1a goes to the manifest, each tensor's hash must equal the
 * one taken while writing, and every padding byte must be zero. */
static int verify_outputs(pk_run *r, double *verify_s, k3_error *err)
{
    pk_plan *p = r->p;
    for (int f = 0; f < K3_PK_NFILES; f++)
        if (fsync(r->fds[f]) != 0) return k3_err(err, "%s: fsync failed: %s", r->paths[f], strerror(errno));
    double t = now_s();
    uint64_t total = 0, done = 0;
    for (int f = 0; f < K3_PK_NFILES; f++) total += p->file_bytes[f];
    size_t half = r->buf_len / 2 / 4096 * 4096;
    uint8_t *bufs[2] = {r->buf, r->buf + half};
    int i = 0;   /* items are in layout order: by file, then offset */
    for (int f = 0; f < K3_PK_NFILES; f++) {
        int fd = r->fds[f];
        uint64_t size = p->file_bytes[f];
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        struct stat st;
        if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != size)
            return k3_err(err, "%s: size is %llu bytes after writing, expected %llu", r->paths[f],
                          (unsigned long long)st.st_size, (unsigned long long)size);
        fnv_job job = {NULL, 0, K3_FNV_INIT};
        fast_hash h;
        int open_item = -1, cur = 0;
        size_t n = size < half ? (size_t)size : half;
        if (n && k3_pread_full(fd, bufs[0], n, 0, r->paths[f], err)) return -1;
        for (uint64_t off = 0; off < size;) {
            job.data = bufs[cur];
            job.n = n;
            pthread_t th;
            int threaded = pthread_create(&th, NULL, fnv_thread, &job) == 0;
            if (!threaded) fnv_thread(&job);
            int rc = scan_chunk(r, f, bufs[cur], off, n, &i, &open_item, &h, err);
            uint64_t next_off = off + n;
            size_t next_n = size - next_off < half ? (size_t)(size - next_off) : half;
            if (rc == 0 && next_n) rc = k3_pread_full(fd, bufs[cur ^ 1], next_n, next_off, r->paths[f], err);
            if (threaded) pthread_join(th, NULL);
            if (rc) return -1;
            done += n;
            off = next_off;
            n = next_n;
            cur ^= 1;
            if (r->o->progress) r->o->progress(r->o->progress_user, "verify", done, total);
            if (cancelled(r, err)) return -1;
        }
        if (open_item >= 0)
            return k3_err(err, "%s: ends inside tensor '%s'", r->paths[f], p->ix.tensors[p->items[open_item].src].name);
        for (; i < p->n_items && p->items[i].file == f; i++) {   /* empty tensors at the very end */
            fh_init(&h);
            if (p->items[i].bytes || check_item(r, f, i, &h, err))
                return k3_err(err, "%s: tensor '%s' lies past the end of the file", r->paths[f],
                              p->ix.tensors[p->items[i].src].name);
        }
        p->checksum[f] = job.h;
    }
    *verify_s = now_s() - t;
    return 0;
}

/* Compare [off, off+n) of a tensor in the source and in its packed file. */
static int compare_slice(pk_run *r, const pk_item *it, uint64_t off, size_t n, k3_error *err)
{
    const st_tensor *t = &r->p->ix.tensors[it->src];
    const st_shard *sh = &r->p->ix.shards[t->shard];
    size_t half = r->buf_len / 2;
    for (uint64_t o = 0; o < n; o += half) {
        size_t k = n - o < half ? (size_t)(n - o) : half;
        if (k3_pread_full(sh->fd, r->buf, k, t->file_offset + off + o, sh->path, err) ||
            k3_pread_full(r->fds[it->file], r->buf + half, k, it->dst + off + o, r->paths[it->file], err))
            return -1;
        if (memcmp(r->buf, r->buf + half, k))
            return k3_err(err, "%s: tensor '%s' differs from the source %s near byte %llu", r->paths[it->file],
                          t->name, sh->path, (unsigned long long)(off + o));
    }
    return 0;
}

/* A quantized tensor against its source: its first and last rows read from
 * the source, quantized again and compared with the packed blocks. */
static int compare_quantized(pk_run *r, const pk_item *it, k3_error *err)
{
    const st_tensor *t = &r->p->ix.tensors[it->src];
    const st_shard *sh = &r->p->ix.shards[t->shard];
    const size_t in_row = item_in_row(r->p, it), scale_row = (size_t)it->cols / 32;
    uint64_t out_row = 0;
    k3_quant_bytes(it->qtype, (uint64_t)it->cols, &out_row);
    size_t half = r->buf_len / 2;
    if (in_row + scale_row > half || out_row > half) return 0;   /* quantize_rows refused such rows already */
    int64_t rows[2] = {0, t->shape[0] - 1};
    for (int k = 0; k < 2; k++) {
        const st_tensor *s = it->scale_src >= 0 ? &r->p->ix.tensors[it->scale_src] : NULL;
        uint8_t *scale_bytes = r->buf + in_row;
        if (k3_pread_full(sh->fd, r->buf, in_row, t->file_offset + (uint64_t)rows[k] * in_row, sh->path, err) ||
            (s && k3_pread_full(r->p->ix.shards[s->shard].fd, scale_bytes, scale_row,
                                s->file_offset + (uint64_t)rows[k] * scale_row, r->p->ix.shards[s->shard].path, err)) ||
            k3_pread_full(r->fds[it->file], r->buf + half, (size_t)out_row, it->dst + (uint64_t)rows[k] * out_row,
                          r->paths[it->file], err))
            return -1;
        source_row_f32(r->p, it, r->buf, s ? scale_bytes : NULL, r->fbuf);
        k3_quant_quantize(it->qtype, r->fbuf, it->cols, r->qbuf);
        if (memcmp(r->qbuf, r->buf + half, (size_t)out_row))
            return k3_err(err, "%s: tensor '%s' row %lld differs from the source %s quantized to %s",
                          r->paths[it->file], t->name, (long long)rows[k], sh->path, it->qtype->name);
    }
    return 0;
}

/* Re-read a sample of tensors from both sides and compare bytes: the first
 * and last tensor of each file and evenly spread others. Tensors over
 * 16 MiB are compared at their start, middle and end (4 MiB each). */
static int compare_sample(pk_run *r, int *sampled, k3_error *err)
{
    pk_plan *p = r->p;
    int want = r->o->sample_tensors;
    *sampled = 0;
    if (want <= 0 || p->n_items == 0) return 0;
    char *pick = calloc((size_t)p->n_items, 1);
    if (!pick) return k3_err(err, "out of memory");
    for (int i = 0; i < p->n_items; i++)
        if (i == 0 || i == p->n_items - 1 || p->items[i].file != p->items[i - 1].file ||
            p->items[i].file != p->items[i + 1].file)
            pick[i] = 1;
    for (int k = 0; k < want; k++) pick[(int)((int64_t)k * p->n_items / want)] = 1;
    int rc = 0;
    const uint64_t whole = 16u << 20, slice = 4u << 20;
    for (int i = 0; i < p->n_items && rc == 0; i++) {
        if (!pick[i]) continue;
        uint64_t n = p->ix.tensors[p->items[i].src].nbytes;
        if (p->items[i].qtype) {
            rc = compare_quantized(r, &p->items[i], err);
        } else if (n <= whole) {
            rc = compare_slice(r, &p->items[i], 0, (size_t)n, err);
        } else {
            rc = compare_slice(r, &p->items[i], 0, slice, err);
            if (!rc) rc = compare_slice(r, &p->items[i], (n / 2) / 64 * 64, slice, err);
            if (!rc) rc = compare_slice(r, &p->items[i], n - slice, slice, err);
        }
        (*sampled)++;
        if (!rc) rc = cancelled(r, err);
    }
    free(pick);
    return rc;
}

/* ------------------------------------------------------------ small files */

/* Copy config.json and the tokenizer files that exist, fsync'd (from_file:
 * the first aux file copied, 1 to leave config.json out). */
static int copy_aux_from(pk_run *r, const char *src, size_t from_file, k3_error *err)
{
    for (size_t a = from_file; a < sizeof aux_files / sizeof aux_files[0]; a++) {
        char from[4200], to[4300];
        snprintf(from, sizeof from, "%s/%s", src, aux_files[a]);
        snprintf(to, sizeof to, "%s/%s", r->partial, aux_files[a]);
        if (access(from, F_OK) != 0 && errno == ENOENT) continue;
        int in = k3_open_regular(from, O_RDONLY, err);
        if (in < 0) return -1;
        int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0) { close(in); return k3_err(err, "%s: %s", to, strerror(errno)); }
        int rc = 0;
        uint64_t off = 0;
        for (;;) {
            ssize_t n = read(in, r->buf, r->buf_len);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { rc = k3_err(err, "%s: read error: %s", from, strerror(errno)); break; }
            if (n == 0) break;
            if ((rc = pwrite_full(out, r->buf, (size_t)n, off, to, err))) break;
            off += (uint64_t)n;
        }
        if (rc == 0 && fsync(out) != 0) rc = k3_err(err, "%s: fsync failed: %s", to, strerror(errno));
        close(in);
        if (close(out) != 0 && rc == 0) rc = k3_err(err, "%s: close failed: %s", to, strerror(errno));
        if (rc) return rc;
    }
    return 0;
}

static int copy_aux(pk_run *r, const char *src, k3_error *err) { return copy_aux_from(r, src, 0, err); }

/* A GGUF source's small files: config.json written from the config the file
 * implies (the text the manifest holds), its vocabulary as tokenizer.gguf
 * (model open reads it when no tiktoken.model is there), and the tokenizer
 * files beside the .gguf, if any (they win, as for the GGUF itself). */
static int write_gguf_aux(pk_run *r, const gguf_file *g, const char *aux_dir, k3_error *err)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/config.json", r->partial);
    FILE *f = fopen(path, "wb");
    if (!f) return k3_err(err, "%s: %s", path, strerror(errno));
    int rc = fwrite(r->p->config_text, 1, r->p->config_len, f) == r->p->config_len && fputc('\n', f) != EOF &&
                     fflush(f) == 0 && fsync(fileno(f)) == 0
                 ? 0 : k3_err(err, "%s: write failed: %s", path, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = k3_err(err, "%s: close failed", path);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/tokenizer.gguf", r->partial);
    if (gguf_find_kv(g, "tokenizer.ggml.tokens") && gguf_write_vocab_file(g, path, err)) return -1;
    return copy_aux_from(r, aux_dir, 1, err);
}

/* A GGUF source's tensors under k3's names (gguf_checkpoint.c), its parts
 * opened for the copy. */
static int open_gguf_index(pk_plan *p, const gguf_file *g, k3_error *err)
{
    k3_config c;
    if (k3_config_parse(&c, p->config_text, p->config_len, g->parts[0].path, err)) return -1;
    if (gguf_checkpoint_index(g, &c, &p->ix, err)) return -1;
    for (int s = 0; s < p->ix.n_shards; s++)
        if ((p->ix.shards[s].fd = k3_open_regular(p->ix.shards[s].path, O_RDONLY, err)) < 0) return -1;
    return 0;
}

/* A JSON string literal (names come from shard headers: escape anything odd). */
static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') { fputc('\\', f); fputc(*c, f); }
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* tables.bin: every tensor, layer run and expert page of the plan in fixed
 * records (layout in manifest.h). What manifest.json must say of it goes to w. */
static int write_tables(pk_run *r, k3_tables_written *w, k3_error *err)
{
    pk_plan *p = r->p;
    k3_manifest_tensor *tensors = calloc((size_t)(p->n_items ? p->n_items : 1), sizeof *tensors);
    k3_manifest_layer *layers = calloc((size_t)(p->n_layers ? p->n_layers : 1), sizeof *layers);
    k3_manifest_page *pages = calloc((size_t)(p->n_pages ? p->n_pages : 1), sizeof *pages);
    int rc = -1, pg = 0;
    if (!tensors || !layers || !pages) {
        k3_err(err, "%s: out of memory for the tables of %d tensors", r->partial, p->n_items);
        goto out;
    }
    for (int i = 0; i < p->n_items; i++) {
        const pk_item *it = &p->items[i];
        const st_tensor *t = &p->ix.tensors[it->src];
        tensors[i] = (k3_manifest_tensor){.name = it->out_name ? it->out_name : t->name, .offset = it->dst,
                                          .bytes = it->bytes, .layer = -1,
                                          .expert = -1, .dtype = it->qtype ? K3_DT_GGML : t->dtype,
                                          .qtype = stored_qtype(p, it), .ndim = (uint8_t)t->ndim,
                                          .file = (uint8_t)it->file};
        for (int d = 0; d < t->ndim; d++) tensors[i].shape[d] = t->shape[d];
        if (it->qtype) tensors[i].shape[1] = it->cols;   /* K3's MXFP4: the weights, not the nibble bytes */
        int first_of_page = it->file == K3_PK_EXPERTS &&
                            !(i > 0 && p->items[i - 1].file == K3_PK_EXPERTS && p->items[i - 1].layer == it->layer &&
                              p->items[i - 1].expert == it->expert);
        if (first_of_page && pg < p->n_pages) {
            pages[pg] = (k3_manifest_page){it->layer, it->expert, (uint64_t)pg * p->page_bytes};
            pg++;
        }
    }
    for (int l = 0; l < p->n_layers; l++) layers[l] = (k3_manifest_layer){p->run_off[l], p->run_bytes[l], 0};
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", r->partial, K3_TABLES_FILE);
    rc = k3_tables_write(path, tensors, p->n_items, layers, p->n_layers, pages, pg, w, err);
out:
    free(tensors);
    free(layers);
    free(pages);
    return rc;
}

/* Write tables.bin, then manifest.json (via a temp name, fsync'd, renamed):
 * the last file, small whatever the model's size. */
static int write_manifest(pk_run *r, k3_error *err)
{
    pk_plan *p = r->p;
    st_index *ix = &p->ix;
    k3_tables_written tw;
    if (write_tables(r, &tw, err)) return -1;
    char tables_json[1024];
    k3_tables_json(&tw, tables_json, sizeof tables_json);
    char tmp[4300], path[4300];
    snprintf(tmp, sizeof tmp, "%s/manifest.json.tmp", r->partial);
    snprintf(path, sizeof path, "%s/manifest.json", r->partial);
    FILE *f = fopen(tmp, "wb");
    if (!f) return k3_err(err, "%s: %s", tmp, strerror(errno));
    fprintf(f, "{\n\"format\": \"%s\",\n\"version\": %d,\n\"alignment\": %u,\n", K3_PACK_FORMAT,
            p->n_quantized || p->n_block_tensors ? K3_PACK_VERSION : K3_PACK_VERSION_PLAIN, K3_PACK_ALIGN);
    fprintf(f, "\"source\": {\"fingerprint\": \"%016llx\", \"shards\": [", (unsigned long long)p->fingerprint);
    for (int s = 0; s < ix->n_shards; s++) {
        const char *base = strrchr(ix->shards[s].path, '/');
        fprintf(f, "%s\n  {\"name\": ", s ? "," : "");
        put_json_string(f, base ? base + 1 : ix->shards[s].path);
        fprintf(f, ", \"bytes\": %llu}", (unsigned long long)ix->shards[s].file_bytes);
    }
    fprintf(f, "]},\n\"config\": ");
    fwrite(p->config_text, 1, p->config_len, f);
    fprintf(f, ",\n\"tables\": %s,\n", tables_json);
    if (p->n_quantized)   /* what was asked (rows may have fallen back): for the tools that name a model's type */
        fprintf(f, "\"quant\": {\"trunk\": \"%s\", \"experts\": \"%s\"},\n",
                p->quant_trunk ? p->quant_trunk->name : "as stored", p->quant_experts ? p->quant_experts->name : "as stored");
    fprintf(f, "\"experts\": {\"page_bytes\": %llu, \"n_layers_moe\": %d, \"n_experts\": %d},\n",
            (unsigned long long)p->page_bytes, p->n_layers_moe, p->n_experts);
    const st_tensor *emb = &ix->tensors[p->items[p->embed].src];
    fprintf(f, "\"embed\": {\"name\": ");
    put_json_string(f, emb->name);
    fprintf(f, ", \"row_bytes\": %llu, \"rows\": %lld, \"dtype\": \"%s\"},\n",
            (unsigned long long)(emb->nbytes / (uint64_t)emb->shape[0]), (long long)emb->shape[0],
            emb->dtype == K3_DT_GGML ? emb->qtype->name : k3_dtype_name(emb->dtype));
    fprintf(f, "\"head\": {\"norm\": ");
    put_json_string(f, ix->tensors[p->items[p->norm].src].name);
    fprintf(f, ", \"lm_head\": ");
    put_json_string(f, ix->tensors[p->items[p->lm_head].src].name);
    fprintf(f, ", \"tied\": %s},\n\"files\": {", p->tied ? "true" : "false");
    for (int k = 0; k < K3_PK_NFILES; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", k3_pk_file_name((k3_pk_file)k), (unsigned long long)p->file_bytes[k]);
    fprintf(f, "},\n\"checksums\": {");
    for (int k = 0; k < K3_PK_NFILES; k++)
        fprintf(f, "%s\"%s\": \"%016llx\"", k ? ", " : "", k3_pk_file_name((k3_pk_file)k),
                (unsigned long long)p->checksum[k]);
    fprintf(f, "}\n}\n");
    int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0) bad = 1;
    if (bad) { unlink(tmp); return k3_err(err, "%s: write failed: %s", tmp, strerror(e)); }
    if (rename(tmp, path) != 0) return k3_err(err, "%s: %s", path, strerror(errno));
    return fsync_dir(r->partial, err);
}

/* Load the manifest just written with the reader the runtime uses, and
 * check it says what the plan says. */
static int reload_manifest(pk_run *r, k3_error *err)
{
    pk_plan *p = r->p;
    k3_manifest m;
    if (k3_manifest_load(r->partial, &m, err)) return -1;
    int rc = 0;
    if (m.n_tensors != p->n_items || m.n_layers != p->n_layers || m.n_pages != p->n_pages ||
        m.page_bytes != p->page_bytes)
        rc = k3_err(err, "%s/manifest.json: reads back with %d tensors, %d layers, %d pages (wrote %d, %d, %d)",
                    r->partial, m.n_tensors, m.n_layers, m.n_pages, p->n_items, p->n_layers, p->n_pages);
    for (int i = 0; i < p->n_items && rc == 0; i++) {
        const st_tensor *t = &p->ix.tensors[p->items[i].src];
        const char *name = p->items[i].out_name ? p->items[i].out_name : t->name;
        const k3_manifest_tensor *mt = k3_manifest_find(&m, name);
        if (!mt || mt->offset != p->items[i].dst || mt->bytes != p->items[i].bytes || mt->qtype != stored_qtype(p, &p->items[i]) ||
            mt->file != p->items[i].file ||
            (p->items[i].file == K3_PK_EXPERTS && (mt->layer != p->items[i].layer || mt->expert != p->items[i].expert)))
            rc = k3_err(err, "%s/manifest.json: tensor '%s' reads back differently", r->partial, name);
    }
    if (rc == 0) rc = k3_unit_sums_write(&m, err);   /* units.sum: per-unit checksums (--verify, load sample) */
    k3_manifest_free(&m);
    return rc;
}

/* ------------------------------------------------------------ destination */

/* Refuse what must not be touched, before any work: a DST that is a file,
 * a non-empty DST without --force, a non-empty DST that is not a packed
 * model even with --force, DST = SRC, a missing parent. */
static int check_destination(const char *src, const char *dst, int force, int *replace, k3_error *err)
{
    struct stat sd, ss;
    *replace = 0;
    char parent[4200];
    parent_dir(dst, parent, sizeof parent);
    if (stat(parent, &sd) != 0 || !S_ISDIR(sd.st_mode))
        return k3_err(err, "%s: parent directory %s does not exist", dst, parent);
    if (stat(dst, &sd) != 0) {
        if (errno == ENOENT) return 0;
        return k3_err(err, "%s: %s", dst, strerror(errno));
    }
    if (!S_ISDIR(sd.st_mode)) return k3_err(err, "%s: exists and is not a directory", dst);
    if (stat(src, &ss) == 0 && ss.st_dev == sd.st_dev && ss.st_ino == sd.st_ino)
        return k3_err(err, "%s: the destination is the source directory", dst);
    if (!dir_nonempty(dst)) return 0;
    if (!force) return k3_err(err, "%s: exists and is not empty (use --force to replace a packed model)", dst);
    if (!k3_is_packed_dir(dst))
        return k3_err(err, "%s: not empty and not a packed model; refusing to replace it even with --force", dst);
    *replace = 1;
    return 0;
}

/* Free space on DST's filesystem must cover everything we will write. */
static int check_space(const k3_pack_opts *o, const char *dst, uint64_t need, k3_error *err)
{
    char parent[4200];
    parent_dir(dst, parent, sizeof parent);
    uint64_t avail;
    if (o->simulate_free_bytes >= 0) {
        avail = (uint64_t)o->simulate_free_bytes;
    } else {
        struct statvfs vs;
        if (statvfs(parent, &vs) != 0) return k3_err(err, "%s: statvfs failed: %s", parent, strerror(errno));
        avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
    }
    if (need > avail)
        return k3_err(err, "%s: not enough free space: need %llu bytes (%.2f GiB), the filesystem has %llu bytes "
                      "(%.2f GiB) available", dst, (unsigned long long)need, need / 1073741824.0,
                      (unsigned long long)avail, avail / 1073741824.0);
    return 0;
}

/* Move the finished DST.partial into place. Replacing an existing packed
 * DST swaps the two atomically (RENAME_EXCHANGE) and then deletes the old. */
static int publish(const char *partial, const char *dst, int replace, k3_error *err)
{
    if (!replace) {
        if (rename(partial, dst) != 0) return k3_err(err, "%s: rename from %s failed: %s", dst, partial, strerror(errno));
    } else if (renameat2(AT_FDCWD, partial, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        remove_tree(partial);
    } else {
        char old[4300];
        snprintf(old, sizeof old, "%s.old.%ld", dst, (long)getpid());
        if (rename(dst, old) != 0) return k3_err(err, "%s: cannot move the old model aside: %s", dst, strerror(errno));
        if (rename(partial, dst) != 0) {
            int e = errno;
            rename(old, dst);
            return k3_err(err, "%s: rename from %s failed: %s", dst, partial, strerror(e));
        }
        remove_tree(old);
    }
    char parent[4200];
    parent_dir(dst, parent, sizeof parent);
    return fsync_dir(parent, err);
}

/* ------------------------------------------------------------ entry */

int k3_pack_quant_type_check(const char *name, k3_error *err)
{
    const k3_quant_type *t = name ? k3_quant_type_by_name(name) : NULL;
    if (t && k3_quant_can_quantize(t)) return 0;
    return k3_err(err, "pack: '%s' is not a type k3 pack writes (Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, MXFP4)",
                  name ? name : "");
}

/* 64 MiB buffer, real statvfs, 16 sampled tensors, silent. */
void k3_pack_default_opts(k3_pack_opts *o)
{
    memset(o, 0, sizeof *o);
    o->buffer_bytes = K3_PACK_DEFAULT_BUFFER;
    o->simulate_free_bytes = -1;
    o->sample_tensors = 16;
}

/* The whole pack: refuse early, plan, copy, verify, manifest, publish (see the file comment). */
int k3_pack(const char *src_in, const char *dst_in, const k3_pack_opts *o, k3_pack_result *res, k3_error *err)
{
    k3_pack_result dummy;
    if (!res) res = &dummy;
    memset(res, 0, sizeof *res);
    double t_start = now_s();
    char src[4096], dst[4096];
    snprintf(src, sizeof src, "%s", src_in);
    snprintf(dst, sizeof dst, "%s", dst_in);
    for (size_t l = strlen(src); l > 1 && src[l - 1] == '/'; l--) src[l - 1] = 0;
    for (size_t l = strlen(dst); l > 1 && dst[l - 1] == '/'; l--) dst[l - 1] = 0;
    if (strlen(src_in) >= sizeof src - 16 || strlen(dst_in) >= sizeof dst - 16)
        return k3_err(err, "path too long");
    if (!*src || !*dst) return k3_err(err, "pack: the %s directory name is empty", *src ? "destination" : "source");
    struct stat st;
    if (stat(src, &st) != 0) return k3_err(err, "%s: %s", src, strerror(errno));
    const int gguf = k3_model_path_is_gguf(src);
    if (!S_ISDIR(st.st_mode) && !gguf) return k3_err(err, "%s: not a directory or a .gguf file", src);
    if (k3_is_packed_dir(src)) return k3_err(err, "%s: already a packed model (pack reads a Hugging Face checkpoint)", src);
    size_t dl = strlen(dst);
    if (dl >= 8 && !strcmp(dst + dl - 8, ".partial"))
        return k3_err(err, "%s: the destination name must not end in .partial", dst);
    int replace = 0;
    if (check_destination(src, dst, o->force, &replace, err)) return -1;

    pk_plan plan;
    memset(&plan, 0, sizeof plan);
    pk_run run;
    memset(&run, 0, sizeof run);
    for (int f = 0; f < K3_PK_NFILES; f++) run.fds[f] = -1;
    run.o = o;
    run.p = &plan;
    run.buf_len = o->buffer_bytes < (1u << 20) ? (1u << 20) : o->buffer_bytes / 4096 * 4096;
    snprintf(run.partial, sizeof run.partial, "%s.partial", dst);
    int lock_fd = -1, created = 0, rc = -1;

    if ((o->trunk_type && k3_pack_quant_type_check(o->trunk_type, err)) ||
        (o->experts_type && k3_pack_quant_type_check(o->experts_type, err)))
        goto out;
    plan.quant_trunk = o->trunk_type ? k3_quant_type_by_name(o->trunk_type) : NULL;
    plan.quant_experts = o->experts_type ? k3_quant_type_by_name(o->experts_type) : NULL;
    gguf_file g;
    memset(&g, 0, sizeof g);
    char aux_dir[4096];                   /* where tokenizer files are taken from */
    snprintf(aux_dir, sizeof aux_dir, "%s", src);
    if (gguf) {
        if (gguf_open(&g, src, err)) goto out;
        if (S_ISREG(st.st_mode)) {
            char *slash = strrchr(aux_dir, '/');
            if (slash == aux_dir) slash[1] = 0;
            else if (slash) *slash = 0;
            else snprintf(aux_dir, sizeof aux_dir, ".");
        }
    }
    if (plan_config(&plan, src, gguf ? &g : NULL, err)) goto out;
    if (gguf ? open_gguf_index(&plan, &g, err) : st_index_open(&plan.ix, src, err)) goto out;
    if (plan_layout(&plan, src, err)) goto out;
    run.buf = aligned_alloc(4096, run.buf_len);
    if (!run.buf) { k3_err(err, "out of memory for the %zu-byte copy buffer", run.buf_len); goto out; }
    if (plan.n_quantized) {
        run.fbuf_len = run.qbuf_len = K3_PACK_QUANT_BUFFER;
        run.fbuf = malloc(run.fbuf_len);
        run.qbuf = malloc(run.qbuf_len);
        if (!run.fbuf || !run.qbuf) { k3_err(err, "out of memory for the quantizing buffers"); goto out; }
    }
    if (plan_fingerprint(&plan, run.buf, run.buf_len, err)) goto out;
    if (plan.n_quantized) {
        /* other weights, another model: a quantized pack must not take the
         * source's state snapshots, so its fingerprint continues the
         * source's over the types asked for */
        char what[96];
        int n = snprintf(what, sizeof what, "k3 pack --trunk %s --experts %s", o->trunk_type ? o->trunk_type : "-",
                         o->experts_type ? o->experts_type : "-");
        plan.fingerprint = k3_fnv1a64(plan.fingerprint, what, (size_t)n);
    }
    for (size_t a = 0; a < sizeof aux_files / sizeof aux_files[0]; a++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", aux_dir, aux_files[a]);
        if (stat(path, &st) == 0) plan.aux_bytes += align_up((uint64_t)st.st_size, 4096);
    }
    if (gguf) plan.aux_bytes += align_up(g.parts[0].data_start + plan.config_len, 4096);

    /* a stale DST.partial from an interrupted run: ours to remove, unless a pack is still writing it */
    if (lstat(run.partial, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            int fd = open(run.partial, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
                close(fd);
                k3_err(err, "%s: another k3 pack is writing it right now", run.partial);
                goto out;
            }
            if (fd >= 0) close(fd);
        }
        if ((S_ISDIR(st.st_mode) ? remove_tree(run.partial) : unlink(run.partial)) != 0) {
            k3_err(err, "%s: cannot remove the leftover of an interrupted run: %s", run.partial, strerror(errno));
            goto out;
        }
        res->removed_stale = 1;
    }
    uint64_t need = plan.aux_bytes + (uint64_t)plan.n_items * 256 + plan.config_len + (1u << 20);
    for (int f = 0; f < K3_PK_NFILES; f++) need += plan.file_bytes[f];
    if (check_space(o, dst, need, err)) goto out;

    if (mkdir(run.partial, 0755) != 0) { k3_err(err, "%s: %s", run.partial, strerror(errno)); goto out; }
    created = 1;
    lock_fd = open(run.partial, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        k3_err(err, "%s: cannot lock: %s", run.partial, strerror(errno));
        goto out;
    }
    if (open_outputs(&run, err)) goto out;
    run.t0 = now_s();
    if (copy_tensors(&run, err)) goto out;
    res->copy_s = now_s() - run.t0;
    if (gguf ? write_gguf_aux(&run, &g, aux_dir, err) : copy_aux(&run, src, err)) goto out;
    if (verify_outputs(&run, &res->verify_s, err)) goto out;
    if (compare_sample(&run, &res->sampled, err)) goto out;
    for (int f = 0; f < K3_PK_NFILES; f++) {
        if (close(run.fds[f]) != 0) { run.fds[f] = -1; k3_err(err, "%s: close failed", run.paths[f]); goto out; }
        run.fds[f] = -1;
    }
    if (cancelled(&run, err)) goto out;
    if (write_manifest(&run, err)) goto out;
    if (reload_manifest(&run, err)) goto out;
    if (publish(run.partial, dst, replace, err)) goto out;
    created = 0;
    rc = 0;

    res->n_tensors = plan.n_items;
    res->n_skipped = plan.n_skipped;
    res->n_layers = plan.n_layers;
    res->n_layers_moe = plan.n_layers_moe;
    res->n_pages = plan.n_pages;
    res->page_bytes = plan.page_bytes;
    res->tensor_bytes = plan.copy_bytes;
    for (int f = 0; f < K3_PK_NFILES; f++) res->out_bytes += plan.file_bytes[f];
    res->fingerprint = plan.fingerprint;
    res->n_quantized = plan.n_quantized;
    res->n_quantized_experts = plan.n_quantized_experts;
    res->n_fallback = plan.n_fallback;
    res->n_kept = plan.n_kept;
out:
    res->peak_bytes_estimate = run.buf_len + run.fbuf_len + run.qbuf_len +
                               (size_t)plan.ix.n_tensors * K3_PACK_BYTES_PER_TENSOR;
    for (int f = 0; f < K3_PK_NFILES; f++)
        if (run.fds[f] >= 0) close(run.fds[f]);
    if (created) remove_tree(run.partial);
    if (lock_fd >= 0) close(lock_fd);
    free(run.buf);
    free(run.fbuf);
    free(run.qbuf);
    plan_free(&plan);
    gguf_close(&g);
    res->total_s = now_s() - t_start;
    return rc;
}

/* `k3 pack --check DIR`: the loader's checks plus a full checksum pass. */
int k3_pack_check(const char *dir, k3_pack_check_result *out, k3_error *err)
{
    k3_manifest m;
    if (k3_manifest_load(dir, &m, err)) return -1;
    /* units first, so a damaged file is reported with the unit that differs */
    int rc = k3_unit_sums_check(&m, 0, err);
    if (rc == 0) rc = k3_manifest_verify_checksums(&m, NULL, 0, err);
    if (rc == 0 && out) {
        out->n_tensors = m.n_tensors;
        out->n_layers = m.n_layers;
        out->n_pages = m.n_pages;
        out->page_bytes = m.page_bytes;
    }
    k3_manifest_free(&m);
    return rc ? -1 : 0;
}
