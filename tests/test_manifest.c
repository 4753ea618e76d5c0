/* test_manifest.c - the packed-directory manifest reader against a good
 * manifest and against malformed ones (missing fields, offsets past the
 * files, misaligned or overlapping pages, wrong sizes, broken JSON), each in
 * a temp directory. Every refusal must be one line naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "manifest.h"
#include "test.h"

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

/* A valid manifest for: 2 layers (layer 1 MoE with 2 experts), embed, head. */
static char *good_manifest(void)
{
    static char buf[8192];
    snprintf(buf, sizeof buf,
        "{\n\"format\": \"k3-packed\",\n\"version\": 1,\n\"alignment\": 4096,\n"
        "\"source\": {\"fingerprint\": \"0123456789abcdef\", \"shards\": [{\"name\": \"model.safetensors\", \"bytes\": 1}]},\n"
        "\"config\": {\"model_type\": \"kimi_linear\", \"num_hidden_layers\": 2, \"nested\": {\"a\": [1, 2.5e-3, null, true, \"x\\\"y\"]}},\n"
        "\"tensors\": [\n"
        "  {\"name\": \"model.embed_tokens.weight\", \"dtype\": \"BF16\", \"shape\": [4, 8], \"file\": \"embed\", \"offset\": 0, \"bytes\": 64},\n"
        "  {\"name\": \"model.layers.0.input_layernorm.weight\", \"dtype\": \"BF16\", \"shape\": [8], \"file\": \"trunk\", \"offset\": 0, \"bytes\": 16},\n"
        "  {\"name\": \"model.layers.0.mlp.gate_proj.weight\", \"dtype\": \"BF16\", \"shape\": [4, 8], \"file\": \"trunk\", \"offset\": 64, \"bytes\": 64},\n"
        "  {\"name\": \"model.layers.1.input_layernorm.weight\", \"dtype\": \"BF16\", \"shape\": [8], \"file\": \"trunk\", \"offset\": 4096, \"bytes\": 16},\n"
        "  {\"name\": \"model.layers.1.block_sparse_moe.experts.0.w1.weight\", \"dtype\": \"BF16\", \"shape\": [4, 8], \"file\": \"experts\", \"offset\": 0, \"bytes\": 64},\n"
        "  {\"name\": \"model.layers.1.block_sparse_moe.experts.1.w1.weight\", \"dtype\": \"BF16\", \"shape\": [4, 8], \"file\": \"experts\", \"offset\": 4096, \"bytes\": 64},\n"
        "  {\"name\": \"model.norm.weight\", \"dtype\": \"BF16\", \"shape\": [8], \"file\": \"head\", \"offset\": 0, \"bytes\": 16},\n"
        "  {\"name\": \"lm_head.weight\", \"dtype\": \"BF16\", \"shape\": [4, 8], \"file\": \"head\", \"offset\": 64, \"bytes\": 64}\n"
        "],\n"
        "\"layers\": [\n  {\"trunk_offset\": 0, \"trunk_bytes\": 4096},\n  {\"trunk_offset\": 4096, \"trunk_bytes\": 4096}\n],\n"
        "\"experts\": {\"page_bytes\": 4096, \"n_layers_moe\": 1, \"n_experts\": 2, \"pages\": [[1, 0, 0], [1, 1, 4096]]},\n"
        "\"embed\": {\"name\": \"model.embed_tokens.weight\", \"row_bytes\": 16, \"rows\": 4, \"dtype\": \"BF16\"},\n"
        "\"head\": {\"norm\": \"model.norm.weight\", \"lm_head\": \"lm_head.weight\", \"tied\": false},\n"
        "\"files\": {\"trunk.bin\": 8192, \"experts.bin\": 8192, \"embed.bin\": 4096, \"head.bin\": 4096},\n"
        "\"checksums\": {\"trunk.bin\": \"%016llx\", \"experts.bin\": \"%016llx\", \"embed.bin\": \"%016llx\", "
        "\"head.bin\": \"%016llx\"}\n}\n",
        (unsigned long long)bin_sums[0], (unsigned long long)bin_sums[1], (unsigned long long)bin_sums[2],
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

/* Expect the load to fail with one line containing want (and no crash). */
static void expect_refusal(const char *name, const char *from, const char *to, const char *want)
{
    TEST_BEGIN(name);
    write_bins();
    if (from) CHECK(write_mutated(from, to) == 0, "mutation anchor '%s' not found", from);
    k3_manifest m;
    k3_error err = {{0}};
    int rc = k3_manifest_load(dir, &m, &err);
    CHECK(rc == -1, "loaded a bad manifest");
    CHECK(strstr(err.msg, want) != NULL, "message '%s' lacks '%s'", err.msg, want);
    CHECK(strchr(err.msg, '\n') == NULL, "message has a newline");
    CHECK(strstr(err.msg, dir) != NULL, "message '%s' does not name the directory", err.msg);
    CHECK(m.tensors == NULL && m.dir == NULL, "out not emptied on failure");
    if (rc == 0) k3_manifest_free(&m);
    TEST_END();
}

/* Issue 10 defect 4: a small manifest naming 2,000 layers and one expert id
 * near 2^20 made the reader allocate n_layers x (max id + 1) x 8 bytes
 * (16 GiB) before checking anything. Under an address-space limit of 1 GiB
 * more than now, the load must refuse it for what it is (a missing page),
 * not run out of memory: every allocation is bounded by what the file lists. */
static void test_page_table_bounded(void)
{
    TEST_BEGIN("manifest: a huge expert id in a small file allocates nothing large (issue 10 defect 4)");
    write_bins();
    const char *g = good_manifest();
    const char *layers_end = "{\"trunk_offset\": 4096, \"trunk_bytes\": 4096}";
    const char *at = strstr(g, layers_end), *pages = strstr(g, "[1, 1, 4096]]");
    CHECK(at && pages, "anchors not found");
    size_t cap = strlen(g) + 2000 * 48 + 64;
    char *text = malloc(cap);
    size_t n = (size_t)snprintf(text, cap, "%.*s%s", (int)(at - g), g, layers_end);
    for (int l = 2; l < 2000; l++) n += (size_t)snprintf(text + n, cap - n, ",\n  {\"trunk_offset\": 8192, \"trunk_bytes\": 0}");
    at += strlen(layers_end);
    n += (size_t)snprintf(text + n, cap - n, "%.*s[1, 1, 4096], [1999, 1048575, 4096]]%s", (int)(pages - at), at,
                          pages + strlen("[1, 1, 4096]]"));
    write_manifest_text(text);
    CHECK(n < 200000, "the manifest is %zu bytes, meant to be small", n);
    free(text);
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
    CHECK(strstr(err.msg, "lacks (layer 1, expert 2)") != NULL, "refused for the wrong reason: '%s'", err.msg);
    if (rc == 0) k3_manifest_free(&m);
    TEST_END();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/k3_test_manifest.%d", (int)getpid());
    mkdir(dir, 0755);

    TEST_BEGIN("manifest: good manifest loads, lookups work");
    write_bins();
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
        CHECK(t && t->file == K3_PK_TRUNK && t->layer == 0 && t->expert == -1 && t->ndim == 2 && t->shape[1] == 8,
              "trunk tensor lookup");
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

    TEST_BEGIN("manifest: k3_is_packed_dir refuses non-packed dirs");
    char partial[300];
    snprintf(partial, sizeof partial, "%s.partial", dir);
    rename(dir, partial);
    CHECK(k3_is_packed_dir(partial) == 0, "a .partial dir counts as packed");
    rename(partial, dir);
    write_mutated("\"k3-packed\"", "\"other\"");
    CHECK(k3_is_packed_dir(dir) == 0, "wrong format counts as packed");
    write_mutated("\"version\": 1", "\"version\": 2");
    CHECK(k3_is_packed_dir(dir) == 0, "wrong version counts as packed");
    write_manifest_text("{\"format\": \"k3-pa");
    CHECK(k3_is_packed_dir(dir) == 0, "truncated manifest counts as packed");
    CHECK(k3_is_packed_dir("/nonexistent/dir") == 0, "missing dir counts as packed");
    TEST_END();

    /* missing fields */
    expect_refusal("manifest: missing tensor offset", "\"file\": \"trunk\", \"offset\": 64, ", "\"file\": \"trunk\", ",
                   "lacks \"offset\"");
    expect_refusal("manifest: missing layers", "\"layers\"", "\"layerz\"", "missing required key \"layers\"");
    expect_refusal("manifest: missing files entry", "\"head.bin\": 4096}", "\"other\": 4096}", "lacks \"head.bin\"");
    expect_refusal("manifest: missing page_bytes", "\"page_bytes\": 4096, ", "", "lacks \"page_bytes\"");
    expect_refusal("manifest: missing checksums", "\"checksums\"", "\"checksumz\"", "missing required key \"checksums\"");
    expect_refusal("manifest: missing embed name", "\"embed\": {\"name\": \"model.embed_tokens.weight\", ",
                   "\"embed\": {", "lacks \"name\"");
    /* offsets past files */
    expect_refusal("manifest: tensor past end of file", "\"offset\": 64, \"bytes\": 64}\n]",
                   "\"offset\": 4096, \"bytes\": 64}\n]", "runs past the end of head.bin");
    expect_refusal("manifest: huge offset (overflow)", "\"offset\": 64, \"bytes\": 64}\n]",
                   "\"offset\": 9223372036854775744, \"bytes\": 64}\n]", "runs past the end");
    expect_refusal("manifest: layer run past trunk.bin", "{\"trunk_offset\": 4096, \"trunk_bytes\": 4096}",
                   "{\"trunk_offset\": 4096, \"trunk_bytes\": 8192}", "runs past the end of trunk.bin");
    expect_refusal("manifest: page past experts.bin", "[1, 1, 4096]", "[1, 1, 8192]", "runs past the end of experts.bin");
    expect_refusal("manifest: file size mismatch", "\"embed.bin\": 4096,", "\"embed.bin\": 8192,", "8192");
    /* misaligned */
    expect_refusal("manifest: misaligned page", "[1, 1, 4096]", "[1, 1, 4160]", "not 4096-byte aligned");
    expect_refusal("manifest: misaligned page_bytes", "\"page_bytes\": 4096", "\"page_bytes\": 2048",
                   "not a positive multiple of 4096");
    expect_refusal("manifest: misaligned tensor", "\"file\": \"trunk\", \"offset\": 64,", "\"file\": \"trunk\", \"offset\": 72,",
                   "not 64-byte aligned");
    expect_refusal("manifest: misaligned layer run", "{\"trunk_offset\": 4096, \"trunk_bytes\": 4096}",
                   "{\"trunk_offset\": 4000, \"trunk_bytes\": 4096}", "not 4096-byte aligned");
    /* overlapping */
    expect_refusal("manifest: overlapping pages", "[1, 1, 4096]", "[1, 1, 0]", "overlap");
    expect_refusal("manifest: duplicate page", "[1, 1, 4096]", "[1, 0, 4096]", "twice");
    expect_refusal("manifest: overlapping tensors", "\"file\": \"trunk\", \"offset\": 64,", "\"file\": \"trunk\", \"offset\": 0,",
                   "overlap in trunk.bin");
    expect_refusal("manifest: overlapping layer runs", "{\"trunk_offset\": 4096, \"trunk_bytes\": 4096}",
                   "{\"trunk_offset\": 0, \"trunk_bytes\": 4096}", "inside or before");
    /* inconsistent content */
    expect_refusal("manifest: bytes vs dtype x shape", "\"shape\": [8], \"file\": \"head\", \"offset\": 0, \"bytes\": 16",
                   "\"shape\": [8], \"file\": \"head\", \"offset\": 0, \"bytes\": 32", "dtype BF16 x shape needs 16");
    expect_refusal("manifest: unknown dtype", "\"dtype\": \"BF16\", \"shape\": [8], \"file\": \"head\"",
                   "\"dtype\": \"Q4_K\", \"shape\": [8], \"file\": \"head\"", "unsupported dtype");
    expect_refusal("manifest: unknown file", "\"file\": \"head\", \"offset\": 0", "\"file\": \"tail\", \"offset\": 0",
                   "not one of trunk");
    expect_refusal("manifest: duplicate tensor", "\"name\": \"lm_head.weight\", \"dtype\"",
                   "\"name\": \"model.norm.weight\", \"dtype\"", "listed twice");
    expect_refusal("manifest: expert tensor across a page end", "\"shape\": [4, 8], \"file\": \"experts\", \"offset\": 0, \"bytes\": 64",
                   "\"shape\": [8, 8], \"file\": \"experts\", \"offset\": 4032, \"bytes\": 128", "not inside one expert page");
    expect_refusal("manifest: trunk tensor across a run end", "\"shape\": [4, 8], \"file\": \"trunk\", \"offset\": 64, \"bytes\": 64",
                   "\"shape\": [8, 8], \"file\": \"trunk\", \"offset\": 4032, \"bytes\": 128", "not inside one layer run");
    expect_refusal("manifest: missing expert page", "[[1, 0, 0], [1, 1, 4096]]", "[[1, 1, 4096]]", "lacks (layer 1, expert 0)");
    expect_refusal("manifest: page layer out of range", "[1, 1, 4096]", "[5, 1, 4096]", "names layer 5");
    expect_refusal("manifest: n_layers_moe wrong", "\"n_layers_moe\": 1", "\"n_layers_moe\": 2", "n_layers_moe");
    expect_refusal("manifest: embed not at 0", "\"file\": \"embed\", \"offset\": 0", "\"file\": \"embed\", \"offset\": 64",
                   "offset 0 of embed.bin");
    expect_refusal("manifest: embed rows mismatch", "\"rows\": 4", "\"rows\": 5", "do not match");
    expect_refusal("manifest: unknown lm_head", "\"lm_head\": \"lm_head.weight\"", "\"lm_head\": \"missing\"",
                   "head.lm_head 'missing'");
    expect_refusal("manifest: tied but not the embedding", "\"tied\": false", "\"tied\": true", "head.tied");
    expect_refusal("manifest: negative offset", "\"file\": \"trunk\", \"offset\": 64,", "\"file\": \"trunk\", \"offset\": -64,",
                   "out of range");
    expect_refusal("manifest: fractional offset", "\"file\": \"trunk\", \"offset\": 64,", "\"file\": \"trunk\", \"offset\": 64.5,",
                   "expected an integer");
    expect_refusal("manifest: bad fingerprint", "0123456789abcdef", "0123456789abcdeg", "fingerprint");
    /* format and syntax */
    expect_refusal("manifest: wrong format", "\"k3-packed\"", "\"gguf\"", "\"format\" is \"gguf\"");
    expect_refusal("manifest: wrong version", "\"version\": 1", "\"version\": 7", "version 7 is not supported");
    expect_refusal("manifest: wrong alignment", "\"alignment\": 4096", "\"alignment\": 512", "alignment 512");
    expect_refusal("manifest: duplicate key", "\"alignment\": 4096", "\"alignment\": 4096, \"version\": 1", "twice");
    expect_refusal("manifest: syntax error", "\"tensors\": [\n", "\"tensors\": [\n,", "byte");
    expect_refusal("manifest: trailing garbage", "\n}\n", "\n}\n}", "end of file");
    expect_refusal("manifest: config not an object", "\"config\": {", "\"config\": [], \"configx\": {", "\"config\" must be an object");

    TEST_BEGIN("manifest: truncated manifest");
    write_bins();
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
    TEST_END();

    TEST_BEGIN("manifest: missing file and missing manifest");
    write_bins();
    write_manifest_text(good_manifest());
    char p[512];
    snprintf(p, sizeof p, "%s/experts.bin", dir);
    unlink(p);
    k3_manifest mm;
    CHECK(k3_manifest_load(dir, &mm, &err) == -1 && strstr(err.msg, "experts.bin"), "missing experts.bin: %s", err.msg);
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
