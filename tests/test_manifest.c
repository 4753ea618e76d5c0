/* test_manifest.c - the packed-directory manifest reader against a good
 * manifest and against malformed ones (missing fields, offsets past the
 * files, misaligned or overlapping pages, wrong sizes, broken JSON), each in
 * a temp directory, and tables.bin against changed records, a bad header,
 * truncation and corruption. Every refusal must be one line naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "manifest.h"
#include "tables_write.h"
#include "test.h"
#include "k3_util.h"

static char dir[256];
static const char *const bins[4] = {"trunk.bin", "experts.bin", "embed.bin", "head.bin"};
static const uint64_t bin_sizes[4] = {8192, 8192, 4096, 4096};
static uint64_t bin_sums[4];

/* Write the four .bin files with a byte pattern and remember their FNV-1a. */
static void write_bins(void)
{
    for (int f = 0; f < 4; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, bins[f]);
        uint8_t *b = malloc(bin_sizes[f]);
        for (uint64_t i = 0; i < bin_sizes[f]; i++) b[i] = (uint8_t)(i * 7 + f);
        FILE *fp = fopen(path, "wb");
        fwrite(b, 1, bin_sizes[f], fp);
        fclose(fp);
        bin_sums[f] = k3_fnv1a64(K3_FNV_INIT, b, bin_sizes[f]);
        free(b);
    }
}

/* The tables of a valid packed model: 2 layers (layer 1 MoE with 2
 * experts), embed, head. Tests copy them, change one field, and write. */
typedef struct tables {
    k3_manifest_tensor t[8];
    k3_manifest_layer l[2000];
    k3_manifest_page p[3];
    int nt, nl, np;
} tables;

#define TENSOR(nm, d0, d1, nd, f, off, b) \
    (k3_manifest_tensor){.name = nm, .offset = off, .bytes = b, .shape = {d0, d1}, .layer = -1, .expert = -1, \
                         .dtype = K3_DT_BF16, .ndim = nd, .file = f}
static tables good_tables(void)
{
    tables tb = {.nt = 8, .nl = 2, .np = 2};
    tb.t[0] = TENSOR("model.embed_tokens.weight", 4, 8, 2, K3_PK_EMBED, 0, 64);
    tb.t[1] = TENSOR("model.layers.0.input_layernorm.weight", 8, 0, 1, K3_PK_TRUNK, 0, 16);
    tb.t[2] = TENSOR("model.layers.0.mlp.gate_proj.weight", 4, 8, 2, K3_PK_TRUNK, 64, 64);
    tb.t[3] = TENSOR("model.layers.1.input_layernorm.weight", 8, 0, 1, K3_PK_TRUNK, 4096, 16);
    tb.t[4] = TENSOR("model.layers.1.block_sparse_moe.experts.0.w1.weight", 4, 8, 2, K3_PK_EXPERTS, 0, 64);
    tb.t[5] = TENSOR("model.layers.1.block_sparse_moe.experts.1.w1.weight", 4, 8, 2, K3_PK_EXPERTS, 4096, 64);
    tb.t[6] = TENSOR("model.norm.weight", 8, 0, 1, K3_PK_HEAD, 0, 16);
    tb.t[7] = TENSOR("lm_head.weight", 4, 8, 2, K3_PK_HEAD, 64, 64);
    tb.l[0] = (k3_manifest_layer){0, 4096, 0};
    tb.l[1] = (k3_manifest_layer){4096, 4096, 0};
    tb.p[0] = (k3_manifest_page){1, 0, 0};
    tb.p[1] = (k3_manifest_page){1, 1, 4096};
    return tb;
}

static char tables_path[300];
static k3_tables_written written;   /* what manifest.json must say of tables.bin */

/* Write tables.bin from tb (remembering its size, checksum, dtypes). */
static void write_tables(const tables *tb)
{
    k3_error err = {{0}};
    snprintf(tables_path, sizeof tables_path, "%s/tables.bin", dir);
    if (k3_tables_write(tables_path, tb->t, tb->nt, tb->l, tb->nl, tb->p, tb->np, &written, &err))
        fprintf(stderr, "test_manifest: %s\n", err.msg);
}

/* Overwrite one byte of tables.bin; with fix_sum, the header's checksum and
 * the one manifest.json will record follow, so only the field itself is wrong. */
static void patch_tables(long at, uint8_t byte, int fix_sum)
{
    FILE *fp = fopen(tables_path, "r+b");
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    uint8_t *b = malloc((size_t)n);
    fseek(fp, 0, SEEK_SET);
    if (fread(b, 1, (size_t)n, fp) != (size_t)n) fprintf(stderr, "test_manifest: short read\n");
    b[at < 0 ? n + at : at] = byte;
    if (fix_sum) {
        written.checksum = k3_fnv1a64(K3_FNV_INIT, b + K3_TABLES_HEADER_BYTES, (size_t)n - K3_TABLES_HEADER_BYTES);
        for (int i = 0; i < 8; i++) b[40 + i] = (uint8_t)(written.checksum >> (8 * i));
    }
    fseek(fp, 0, SEEK_SET);
    fwrite(b, 1, (size_t)n, fp);
    fclose(fp);
    free(b);
}

/* A valid manifest.json for the tables last written. */
static char *good_manifest(void)
{
    static char buf[8192];
    char tables_json[512];
    k3_tables_json(&written, tables_json, sizeof tables_json);
    snprintf(buf, sizeof buf,
        "{\n\"format\": \"k3-packed\",\n\"version\": 2,\n\"alignment\": 4096,\n"
        "\"source\": {\"fingerprint\": \"0123456789abcdef\", \"shards\": [{\"name\": \"model.safetensors\", \"bytes\": 1}]},\n"
        "\"config\": {\"model_type\": \"kimi_linear\", \"num_hidden_layers\": 2, \"nested\": {\"a\": [1, 2.5e-3, null, true, \"x\\\"y\"]}},\n"
        "\"tables\": %s,\n"
        "\"experts\": {\"page_bytes\": 4096, \"n_layers_moe\": 1, \"n_experts\": 2},\n"
        "\"embed\": {\"name\": \"model.embed_tokens.weight\", \"row_bytes\": 16, \"rows\": 4, \"dtype\": \"BF16\"},\n"
        "\"head\": {\"norm\": \"model.norm.weight\", \"lm_head\": \"lm_head.weight\", \"tied\": false},\n"
        "\"files\": {\"trunk.bin\": 8192, \"experts.bin\": 8192, \"embed.bin\": 4096, \"head.bin\": 4096},\n"
        "\"checksums\": {\"trunk.bin\": \"%016llx\", \"experts.bin\": \"%016llx\", \"embed.bin\": \"%016llx\", "
        "\"head.bin\": \"%016llx\"}\n}\n",
        tables_json, (unsigned long long)bin_sums[0], (unsigned long long)bin_sums[1], (unsigned long long)bin_sums[2],
        (unsigned long long)bin_sums[3]);
    return buf;
}

static void write_manifest_text(const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *fp = fopen(path, "wb");
    fputs(text, fp);
    fclose(fp);
}

/* The good manifest with the first occurrence of `from` replaced by `to`. */
static int write_mutated(const char *from, const char *to)
{
    const char *g = good_manifest();
    const char *at = strstr(g, from);
    if (!at) return -1;
    static char buf[10000];
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - g), g, to, at + strlen(from));
    write_manifest_text(buf);
    return 0;
}

/* Load, expecting a refusal: one line containing want, naming the directory,
 * the manifest left empty (and no crash). */
static void check_refused(const char *want)
{
    k3_manifest m;
    k3_error err = {{0}};
    int rc = k3_manifest_load(dir, &m, &err);
    CHECK(rc == -1, "loaded a bad manifest");
    CHECK(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    CHECK(strchr(err.msg, '\n') == NULL, "message has a newline");
    CHECK(strstr(err.msg, dir) != NULL, "message '%s' does not name the directory", err.msg);
    CHECK(m.tensors == NULL && m.dir == NULL, "out not emptied on failure");
    if (rc == 0) k3_manifest_free(&m);
}

/* A manifest.json mutation (from -> to) over good tables. */
static void expect_refusal(const char *name, const char *from, const char *to, const char *want)
{
    TEST_BEGIN(name);
    write_bins();
    tables tb = good_tables();
    write_tables(&tb);
    if (from) CHECK(write_mutated(from, to) == 0, "mutation anchor '%s' not found", from);
    check_refused(want);
    TEST_END();
}

/* A tables mutation: tb is the good tables, changed by the caller; the
 * manifest.json written matches tables.bin, so only the change is wrong. */
static void expect_tables_refusal(const char *name, const tables *tb, const char *want)
{
    TEST_BEGIN(name);
    write_bins();
    write_tables(tb);
    write_manifest_text(good_manifest());
    check_refused(want);
    TEST_END();
}

/* Tables holding a GGUF block type: gate_proj of layer 0 as rows x cols
 * Q8_0 weights of the given bytes, under a version 3 manifest. */
static tables block_tables(int64_t rows, int64_t cols, uint64_t bytes)
{
    tables tb = good_tables();
    tb.t[2] = TENSOR(tb.t[2].name, rows, cols, 2, K3_PK_TRUNK, 64, bytes);
    tb.t[2].dtype = K3_DT_GGML;
    tb.t[2].qtype = k3_quant_type_by_name("Q8_0");
    return tb;
}

/* A block-type tensor the version 3 manifest must refuse (want). */
static void expect_block_refusal(const char *name, const tables *tb, const char *want)
{
    TEST_BEGIN(name);
    write_bins();
    write_tables(tb);
    CHECK(write_mutated("\"version\": 2", "\"version\": 3") == 0, "no version to change");
    check_refused(want);
    TEST_END();
}

/* A byte of tables.bin changed after writing (see patch_tables). */
static void expect_patch_refusal(const char *name, long at, uint8_t byte, int fix_sum, const char *want)
{
    TEST_BEGIN(name);
    write_bins();
    tables tb = good_tables();
    write_tables(&tb);
    patch_tables(at, byte, fix_sum);
    write_manifest_text(good_manifest());
    check_refused(want);
    TEST_END();
}

/* Issue 10 defect 4: a small manifest naming 2,000 layers and one expert id
 * near 2^20 made the reader allocate n_layers x (max id + 1) x 8 bytes
 * (16 GiB) before checking anything. Under an address-space limit of 1 GiB
 * more than now, the load must refuse it for what it is (a missing page),
 * not run out of memory: every allocation is bounded by what the file lists. */
static void test_page_table_bounded(void)
{
    TEST_BEGIN("manifest: a huge expert id in small tables allocates nothing large (issue 10 defect 4)");
    write_bins();
    tables *tb = malloc(sizeof *tb);
    *tb = good_tables();
    for (int l = 2; l < 2000; l++) tb->l[l] = (k3_manifest_layer){8192, 0, 0};
    tb->nl = 2000;
    tb->p[2] = (k3_manifest_page){1999, 1048575, 4096};
    tb->np = 3;
    write_tables(tb);
    free(tb);
    write_manifest_text(good_manifest());
    CHECK(written.bytes < 200000, "tables.bin is %llu bytes, meant to be small", (unsigned long long)written.bytes);
    struct rlimit old, lim;
    getrlimit(RLIMIT_AS, &old);
    long vm_kb = 0;
    FILE *st = fopen("/proc/self/status", "r");
    char line[256];
    while (st && fgets(line, sizeof line, st))
        if (sscanf(line, "VmSize: %ld kB", &vm_kb) == 1) break;
    if (st) fclose(st);
    lim = old;
    lim.rlim_cur = (rlim_t)vm_kb * 1024 + (1ull << 30);
    CHECK(vm_kb > 0 && setrlimit(RLIMIT_AS, &lim) == 0, "cannot limit the address space");
    k3_manifest m;
    k3_error err = {{0}};
    int rc = k3_manifest_load(dir, &m, &err);
    setrlimit(RLIMIT_AS, &old);
    CHECK(rc == -1, "loaded a manifest whose layer 1 lacks expert 2");
    CHECK(strstr(err.msg, "lack (layer 1, expert 2)") != NULL, "refused for the wrong reason: '%s'", err.msg);
    if (rc == 0) k3_manifest_free(&m);
    TEST_END();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/k3_test_manifest.%d", (int)getpid());
    mkdir(dir, 0755);

    TEST_BEGIN("manifest: good manifest loads, lookups work");
    write_bins();
    tables good = good_tables();
    write_tables(&good);
    write_manifest_text(good_manifest());
    k3_manifest m;
    k3_error err = {{0}};
    int rc = k3_manifest_load(dir, &m, &err);
    CHECK(rc == 0, "load failed: %s", err.msg);
    if (rc == 0) {
        CHECK(m.n_tensors == 8 && m.n_layers == 2 && m.n_pages == 2 && m.n_experts == 2 && m.n_layers_moe == 1,
              "counts %d %d %d %d", m.n_tensors, m.n_layers, m.n_pages, m.n_experts);
        const k3_manifest_tensor *t = k3_manifest_find(&m, "model.layers.1.block_sparse_moe.experts.1.w1.weight");
        CHECK(t && t->file == K3_PK_EXPERTS && t->offset == 4096 && t->layer == 1 && t->expert == 1,
              "expert tensor lookup");
        t = k3_manifest_find(&m, "model.layers.0.mlp.gate_proj.weight");
        CHECK(t && t->file == K3_PK_TRUNK && t->layer == 0 && t->expert == -1 && t->ndim == 2 && t->shape[1] == 8 &&
              t->dtype == K3_DT_BF16 && t->bytes == 64, "trunk tensor lookup");
        CHECK(k3_manifest_find(&m, "nope") == NULL, "found a missing tensor");
        uint64_t o = 0, b = 0;
        CHECK(k3_manifest_layer_extent(&m, 1, &o, &b) == 0 && o == 4096 && b == 4096, "layer extent");
        CHECK(k3_manifest_layer_extent(&m, 2, &o, &b) == -1, "layer 2 extent should fail");
        CHECK(k3_manifest_expert_page(&m, 1, 1) == 4096 && k3_manifest_expert_page(&m, 1, 0) == 0, "page offsets");
        CHECK(k3_manifest_expert_page(&m, 0, 0) == -1 && k3_manifest_expert_page(&m, 1, 2) == -1 &&
              k3_manifest_expert_page(&m, -1, 0) == -1, "missing pages");
        CHECK(m.embed && m.embed_rows == 4 && m.embed_row_bytes == 16 && m.embed_dtype == K3_DT_BF16, "embed");
        CHECK(m.final_norm && m.lm_head && !m.tied && !strcmp(m.lm_head->name, "lm_head.weight"), "head");
        CHECK(m.fingerprint == 0x0123456789abcdefull, "fingerprint");
        CHECK(m.config_json && m.config_json[0] == '{' && m.config_json[m.config_len - 1] == '}' &&
              strstr(m.config_json, "\"x\\\"y\"") != NULL, "config verbatim: %s", m.config_json);
        CHECK(k3_manifest_verify_checksums(&m, NULL, 0, &err) == 0, "checksums: %s", err.msg);
        char p[512];
        snprintf(p, sizeof p, "%s/embed.bin", dir);
        FILE *fp = fopen(p, "r+b");
        fseek(fp, 100, SEEK_SET);
        fputc(0xAA, fp);
        fclose(fp);
        CHECK(k3_manifest_verify_checksums(&m, NULL, 0, &err) == -1 && strstr(err.msg, "embed.bin") &&
              strstr(err.msg, "checksum"), "corruption not caught: %s", err.msg);
        k3_manifest_free(&m);
    }
    CHECK(k3_is_packed_dir(dir) == 1, "is_packed_dir");
    char slash[300];
    snprintf(slash, sizeof slash, "%s/", dir);
    CHECK(k3_is_packed_dir(slash) == 1, "is_packed_dir with a trailing slash");
    TEST_END();

    TEST_BEGIN("manifest: k3_is_packed_dir refuses non-packed dirs, counts an older version");
    char partial[300];
    snprintf(partial, sizeof partial, "%s.partial", dir);
    rename(dir, partial);
    CHECK(k3_is_packed_dir(partial) == 0, "a .partial dir counts as packed");
    rename(partial, dir);
    write_mutated("\"k3-packed\"", "\"other\"");
    CHECK(k3_is_packed_dir(dir) == 0, "wrong format counts as packed");
    write_mutated("\"version\": 2", "\"version\": 99");
    CHECK(k3_is_packed_dir(dir) == 0, "a future version counts as packed");
    write_mutated("\"version\": 2", "\"version\": 1");
    CHECK(k3_is_packed_dir(dir) == 1, "version 1 does not count as packed (then --force could not replace it)");
    write_manifest_text("{\"format\": \"k3-pa");
    CHECK(k3_is_packed_dir(dir) == 0, "truncated manifest counts as packed");
    CHECK(k3_is_packed_dir("/nonexistent/dir") == 0, "missing dir counts as packed");
    TEST_END();

    /* manifest.json: missing fields */
    expect_refusal("manifest: missing tables", "\"tables\"", "\"tablez\"", "missing required key \"tables\"");
    expect_refusal("manifest: missing files entry", "\"head.bin\": 4096}", "\"other\": 4096}", "lacks \"head.bin\"");
    expect_refusal("manifest: missing page_bytes", "\"page_bytes\": 4096, ", "", "lacks \"page_bytes\"");
    expect_refusal("manifest: missing checksums", "\"checksums\"", "\"checksumz\"", "missing required key \"checksums\"");
    expect_refusal("manifest: missing embed name", "\"embed\": {\"name\": \"model.embed_tokens.weight\", ",
                   "\"embed\": {", "lacks \"name\"");
    expect_refusal("manifest: missing tables checksum", "\"checksum\": \"", "\"checksumz\": \"", "lacks \"checksum\"");
    expect_refusal("manifest: file size mismatch", "\"embed.bin\": 4096,", "\"embed.bin\": 8192,", "8192");
    expect_refusal("manifest: misaligned page_bytes", "\"page_bytes\": 4096", "\"page_bytes\": 2048",
                   "not a positive multiple of 4096");
    expect_refusal("manifest: n_layers_moe wrong", "\"n_layers_moe\": 1", "\"n_layers_moe\": 2", "n_layers_moe");
    expect_refusal("manifest: embed rows mismatch", "\"rows\": 4", "\"rows\": 5", "do not match");
    expect_refusal("manifest: unknown lm_head", "\"lm_head\": \"lm_head.weight\"", "\"lm_head\": \"missing\"",
                   "head.lm_head 'missing'");
    expect_refusal("manifest: tied but not the embedding", "\"tied\": false", "\"tied\": true", "head.tied");
    expect_refusal("manifest: bad fingerprint", "0123456789abcdef", "0123456789abcdeg", "fingerprint");
    expect_refusal("manifest: fractional page_bytes", "\"page_bytes\": 4096", "\"page_bytes\": 4096.5",
                   "expected an integer");
    expect_refusal("manifest: tables from another pack (checksum)", "\"checksum\": \"", "\"checksum\": \"1",
                   "expected 16 hex digits");
    expect_refusal("manifest: unsupported dtype in tables.dtypes", "\"dtypes\": [\"BF16\"]",
                   "\"dtypes\": [\"Q9_K\"]", "tables.dtypes[0]: unsupported dtype \"Q9_K\"");
    expect_refusal("manifest: a block type in a version 2 manifest", "\"dtypes\": [\"BF16\"]",
                   "\"dtypes\": [\"Q4_K\"]", "block type \"Q4_K\" in a version 2 manifest");

    /* a version 3 manifest with a Q8_0 matrix (2 rows of 32: 68 bytes) */
    TEST_BEGIN("manifest: a block-type tensor (version 3) loads with its type");
    write_bins();
    tables blocks = block_tables(2, 32, 68);
    write_tables(&blocks);
    CHECK(write_mutated("\"version\": 2", "\"version\": 3") == 0, "no version to change");
    {
        k3_manifest m;
        k3_error e = {{0}};
        int rc = k3_manifest_load(dir, &m, &e);
        CHECK(rc == 0, "load failed: %s", e.msg);
        if (rc == 0) {
            const k3_manifest_tensor *t = k3_manifest_find(&m, "model.layers.0.mlp.gate_proj.weight");
            CHECK(t && t->dtype == K3_DT_GGML && t->qtype && !strcmp(t->qtype->name, "Q8_0") && t->bytes == 68,
                  "the Q8_0 tensor reads back as dtype %d, type %s", t ? (int)t->dtype : -1,
                  t && t->qtype ? t->qtype->name : "none");
            t = k3_manifest_find(&m, "model.layers.0.input_layernorm.weight");
            CHECK(t && t->dtype == K3_DT_BF16 && t->qtype == NULL, "a BF16 tensor beside it gained a block type");
            k3_manifest_free(&m);
        }
    }
    TEST_END();
    blocks = block_tables(4, 8, 34);
    expect_block_refusal("manifest: block-type rows not whole blocks", &blocks, "rows of 8 weights are not whole Q8_0 blocks");
    blocks = block_tables(2, 32, 64);
    expect_block_refusal("manifest: block-type bytes vs shape", &blocks, "has 64 bytes but Q8_0 x shape needs 68");
    expect_refusal("manifest: tables.bytes differs from tables.bin", "{\"bytes\": ", "{\"bytes\": 1",
                   "from another pack");
    /* format and syntax */
    expect_refusal("manifest: wrong format", "\"k3-packed\"", "\"gguf\"", "\"format\" is \"gguf\"");
    expect_refusal("manifest: wrong version", "\"version\": 2", "\"version\": 7", "version 7 is not supported");
    expect_refusal("manifest: version 1 (tables inside manifest.json) says to re-pack", "\"version\": 2",
                   "\"version\": 1", "re-pack it with `k3 pack SRC");
    expect_refusal("manifest: wrong alignment", "\"alignment\": 4096", "\"alignment\": 512", "alignment 512");
    expect_refusal("manifest: duplicate key", "\"alignment\": 4096", "\"alignment\": 4096, \"version\": 2", "twice");
    expect_refusal("manifest: syntax error", "\"tables\": {", "\"tables\": ,{", "byte");
    expect_refusal("manifest: trailing garbage", "\n}\n", "\n}\n}", "end of file");
    expect_refusal("manifest: config not an object", "\"config\": {", "\"config\": [], \"configx\": {",
                   "\"config\" must be an object");

    /* tables.bin: the records (each change written consistently, checksums right) */
    tables tb;
    tb = good_tables(); tb.t[7].offset = 4096;
    expect_tables_refusal("manifest: tensor past end of file", &tb, "runs past the end of head.bin");
    tb = good_tables(); tb.t[7].offset = 9223372036854775744ull;
    expect_tables_refusal("manifest: huge offset (overflow)", &tb, "runs past the end");
    tb = good_tables(); tb.l[1].trunk_bytes = 8192;
    expect_tables_refusal("manifest: layer run past trunk.bin", &tb, "runs past the end of trunk.bin");
    tb = good_tables(); tb.p[1].offset = 8192;
    expect_tables_refusal("manifest: page past experts.bin", &tb, "runs past the end of experts.bin");
    tb = good_tables(); tb.p[1].offset = 4160;
    expect_tables_refusal("manifest: misaligned page", &tb, "not 4096-byte aligned");
    tb = good_tables(); tb.t[2].offset = 72;
    expect_tables_refusal("manifest: misaligned tensor", &tb, "not 64-byte aligned");
    tb = good_tables(); tb.l[1].trunk_offset = 4000;
    expect_tables_refusal("manifest: misaligned layer run", &tb, "not 4096-byte aligned");
    tb = good_tables(); tb.p[1].offset = 0;
    expect_tables_refusal("manifest: overlapping pages", &tb, "overlap");
    tb = good_tables(); tb.p[1].expert = 0;
    expect_tables_refusal("manifest: duplicate page", &tb, "twice");
    tb = good_tables(); tb.t[2].offset = 0;
    expect_tables_refusal("manifest: overlapping tensors", &tb, "overlap in trunk.bin");
    tb = good_tables(); tb.l[1].trunk_offset = 0;
    expect_tables_refusal("manifest: overlapping layer runs", &tb, "inside or before");
    tb = good_tables(); tb.t[6].bytes = 32;
    expect_tables_refusal("manifest: bytes vs dtype x shape", &tb, "dtype BF16 x shape needs 16");
    tb = good_tables(); tb.t[7].name = "model.norm.weight";
    expect_tables_refusal("manifest: duplicate tensor", &tb, "listed twice");
    tb = good_tables(); tb.t[4] = TENSOR(tb.t[4].name, 8, 8, 2, K3_PK_EXPERTS, 4032, 128);
    expect_tables_refusal("manifest: expert tensor across a page end", &tb, "not inside one expert page");
    tb = good_tables(); tb.t[2] = TENSOR(tb.t[2].name, 8, 8, 2, K3_PK_TRUNK, 4032, 128);
    expect_tables_refusal("manifest: trunk tensor across a run end", &tb, "not inside one layer run");
    tb = good_tables(); tb.p[0] = tb.p[1]; tb.np = 1;
    expect_tables_refusal("manifest: missing expert page", &tb, "lack (layer 1, expert 0)");
    tb = good_tables(); tb.p[1].layer = 5;
    expect_tables_refusal("manifest: page layer out of range", &tb, "names layer 5");
    tb = good_tables(); tb.t[0].offset = 64;
    expect_tables_refusal("manifest: embed not at 0", &tb, "offset 0 of embed.bin");
    tb = good_tables(); tb.nl = 0;
    expect_tables_refusal("manifest: no layers", &tb, "no layers");

    /* tables.bin: the format itself */
    const long rec0 = K3_TABLES_HEADER_BYTES;   /* the first tensor record */
    expect_patch_refusal("manifest: tables.bin bad magic", 0, 'X', 0, "bad magic");
    expect_patch_refusal("manifest: tables.bin future version", 8, 9, 0, "version 9 is not supported");
    expect_patch_refusal("manifest: tables.bin count not matching its size", 16, 9, 0, "truncated or modified");
    expect_patch_refusal("manifest: tables.bin corrupt body", rec0 + 3, 0x5a, 0, "does not match its header");
    expect_patch_refusal("manifest: tables.bin header checksum not the manifest's", 40, 0x11, 0, "from another pack");
    expect_patch_refusal("manifest: tables.bin reserved header byte", 60, 1, 0, "reserved header byte");
    expect_patch_refusal("manifest: tables.bin dtype index past tables.dtypes", rec0 + 80, 3, 1, "dtype index 3");
    expect_patch_refusal("manifest: tables.bin more than 8 dimensions", rec0 + 81, 9, 1, "9 dimensions");
    expect_patch_refusal("manifest: tables.bin unknown file", rec0 + 82, 4, 1, "file 4 is not one of");
    expect_patch_refusal("manifest: tables.bin reserved record byte", rec0 + 85, 1, 1, "reserved byte 85");
    expect_patch_refusal("manifest: tables.bin unused dimension not zero", rec0 + 16 + 8 * 5, 1, 1, "shape[5]");
    expect_patch_refusal("manifest: tables.bin negative dimension", rec0 + 16 + 7, 0x80, 1, "shape[0]");
    expect_patch_refusal("manifest: tables.bin last name not NUL-terminated", -1, 'x', 1, "not NUL-terminated");
    expect_patch_refusal("manifest: tables.bin empty name", -(long)strlen("lm_head.weight") - 1, 0, 1,
                         "the name of tensor 7 is empty");
    expect_patch_refusal("manifest: tables.bin page expert id out of range", rec0 + 8 * 88 + 2 * 16 + 16 + 6, 0x7f, 1,
                         "out of range");

    TEST_BEGIN("manifest: truncated manifest.json and tables.bin");
    write_bins();
    write_tables(&good);
    const char *g = good_manifest();
    char trunc[10000];
    int ok = 1;
    for (size_t cut = 0; cut < strlen(g) - 2 && ok; cut += 37) {   /* every prefix length step */
        snprintf(trunc, sizeof trunc, "%.*s", (int)cut, g);
        write_manifest_text(trunc);
        k3_manifest mm;
        if (k3_manifest_load(dir, &mm, &err) == 0) { ok = 0; k3_manifest_free(&mm); }
        else if (!strstr(err.msg, "manifest.json")) ok = 0;
    }
    CHECK(ok, "a truncated manifest loaded or gave '%s'", err.msg);
    write_manifest_text(g);
    for (uint64_t cut = 0; cut < written.bytes && ok; cut += 29) {
        if (truncate(tables_path, (off_t)cut)) ok = 0;
        k3_manifest mm;
        if (k3_manifest_load(dir, &mm, &err) == 0) { ok = 0; k3_manifest_free(&mm); }
        else if (!strstr(err.msg, "tables.bin")) ok = 0;
    }
    CHECK(ok, "a truncated tables.bin loaded or gave '%s'", err.msg);
    TEST_END();

    TEST_BEGIN("manifest: missing file, missing tables.bin and missing manifest");
    write_bins();
    write_tables(&good);
    write_manifest_text(good_manifest());
    char p[512];
    snprintf(p, sizeof p, "%s/experts.bin", dir);
    unlink(p);
    k3_manifest mm;
    CHECK(k3_manifest_load(dir, &mm, &err) == -1 && strstr(err.msg, "experts.bin"), "missing experts.bin: %s", err.msg);
    unlink(tables_path);
    CHECK(k3_manifest_load(dir, &mm, &err) == -1 && strstr(err.msg, "tables.bin"), "missing tables.bin: %s", err.msg);
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    unlink(p);
    CHECK(k3_manifest_load(dir, &mm, &err) == -1 && strstr(err.msg, "no manifest.json"), "no manifest: %s", err.msg);
    CHECK(k3_manifest_load("/nonexistent/k3", &mm, &err) == -1 && strstr(err.msg, "not a directory"), "no dir: %s",
          err.msg);
    TEST_END();

    test_page_table_bounded();

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    TEST_EXIT();
}
