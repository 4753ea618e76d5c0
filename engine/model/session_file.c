/* session_file.c - save and load a session's state (k3.h).
 *
 * Layout (little-endian):
 *   magic "K3SESS\0\0" | u32 format version | u32 header bytes
 *   char model fingerprint[16] | char engine build[32]
 *   u32 n_tokens | u32 vocab | u64 kda floats | u64 mla floats per token
 *   i32 tokens[n] | f32 kda_conv + kda_state | f32 mla cache rows [n_mla][n][entry]
 *   f32 logits[vocab] | u64 FNV-1a checksum of everything before it
 * Only the used rows of the MLA cache are stored, so a snapshot grows with
 * the conversation, not with the context limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "file_read.h"
#include "forward.h"
#include "k3_util.h"

/* The engine build a snapshot belongs to: derived by the Makefile from the
 * sources that decide numerics (K3_NUMERICS_KEY), so a change to a kernel or
 * to the state layout can never load a snapshot the old code computed. */
#ifndef K3_NUMERICS_KEY
#error "K3_NUMERICS_KEY is defined by the Makefile (a hash of the numeric sources)"
#endif
#define K3_ENGINE_BUILD "k3-engine-" K3_NUMERICS_KEY

/* The same identity for what else must not outlive a change to the
 * numeric sources (k3 plan's cached kernel rates). --activations q8 is
 * other numerics from the same sources (mxfp4_q8.c): its snapshots and
 * rates carry "+q8", so neither path loads what the other computed. */
const char *k3_engine_build(void)
{
    return k3_kernels_activations_q8() ? K3_ENGINE_BUILD "+q8" : K3_ENGINE_BUILD;
}

typedef struct session_header {
    char magic[8];
    uint32_t version, header_bytes;
    char fingerprint[16];
    char build[32];
    uint32_t n_tokens, vocab;
    uint64_t kda_floats, mla_floats_per_token;
} session_header;

/* Streamed FNV-1a so the checksum covers the file as written. */
typedef struct hashed_file {
    FILE *f;
    uint64_t hash;
    int failed;
} hashed_file;

static void hash_bytes(uint64_t *h, const void *p, size_t n) { *h = k3_fnv1a64(*h, p, n); }

static void put(hashed_file *hf, const void *p, size_t n)
{
    if (hf->failed || !n) return;
    if (fwrite(p, 1, n, hf->f) != n) hf->failed = 1;
    hash_bytes(&hf->hash, p, n);
}

static int get(hashed_file *hf, void *p, size_t n)
{
    if (hf->failed) return -1;
    if (n && fread(p, 1, n, hf->f) != n) { hf->failed = 1; return -1; }
    hash_bytes(&hf->hash, p, n);
    return 0;
}

static void fill_header(const k3_session *s, session_header *h)
{
    const k3_config *c = &s->m->cfg;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "K3SESS\0\0", 8);
    h->version = K3_SESSION_FORMAT_VERSION;
    h->header_bytes = sizeof *h;
    memcpy(h->fingerprint, k3_model_fingerprint(s->m), 16);
    snprintf(h->build, sizeof h->build, "%s", k3_engine_build());
    h->n_tokens = (uint32_t)s->n_tokens;
    h->vocab = (uint32_t)c->vocab_size;
    h->kda_floats = k3_config_kda_conv_floats(c) + k3_config_kda_state_floats(c);
    h->mla_floats_per_token = (uint64_t)k3_config_count_attn(c, K3_ATTN_MLA) * k3_config_mla_entry_floats(c);
}

int k3_session_save(const k3_session *s, const char *path, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    FILE *f = fopen(path, "wb");
    if (!f) return k3_err(err, "%s: cannot create: %s", path, strerror(errno));
    hashed_file hf = {f, K3_FNV_INIT, 0};
    session_header h;
    fill_header(s, &h);
    put(&hf, &h, sizeof h);
    put(&hf, s->tokens, (size_t)s->n_tokens * sizeof(int32_t));
    put(&hf, s->kda_conv, k3_config_kda_conv_floats(c) * sizeof(float));
    put(&hf, s->kda_state, k3_config_kda_state_floats(c) * sizeof(float));
    const size_t entry = k3_config_mla_entry_floats(c);
    const int n_mla = k3_config_count_attn(c, K3_ATTN_MLA);
    for (int l = 0; l < n_mla; l++)
        put(&hf, s->mla_cache + (size_t)l * s->max_tokens * entry, (size_t)s->n_tokens * entry * sizeof(float));
    uint8_t has_logits = (uint8_t)s->has_logits;
    put(&hf, &has_logits, 1);
    put(&hf, s->logits, (size_t)c->vocab_size * sizeof(float));
    uint64_t sum = hf.hash;
    if (!hf.failed && fwrite(&sum, sizeof sum, 1, f) != 1) hf.failed = 1;
    if (fflush(f) != 0) hf.failed = 1;
    if (fclose(f) != 0) hf.failed = 1;
    if (hf.failed) return k3_err(err, "%s: write failed (disk full?)", path);
    return 0;
}

int k3_session_load(k3_session *s, const char *path, k3_error *err)
{
    const k3_config *c = &s->m->cfg;
    FILE *f = k3_fopen_regular(path, err);
    if (!f) return -1;
    hashed_file hf = {f, K3_FNV_INIT, 0};
    session_header h, want;
    fill_header(s, &want);
    int rc = 0;
    k3_session_reset(s);
    if (get(&hf, &h, sizeof h)) {
        rc = k3_err(err, "%s: truncated session file", path);
    } else if (memcmp(h.magic, want.magic, 8)) {
        rc = k3_err(err, "%s: not a k3 session file", path);
    } else if (h.version != want.version || h.header_bytes != want.header_bytes) {
        rc = k3_err(err, "%s: session format version %u, this engine reads version %u", path,
                    h.version, want.version);
    } else if (memcmp(h.fingerprint, want.fingerprint, 16)) {
        rc = k3_err(err, "%s: session was saved with another model (fingerprint %.16s, this model %.16s)",
                    path, h.fingerprint, want.fingerprint);
    } else if (memcmp(h.build, want.build, sizeof h.build)) {
        rc = k3_err(err, "%s: session was saved by engine build '%.32s', this is '%s'", path, h.build,
                    want.build);
    } else if (h.n_tokens > (uint32_t)s->max_tokens) {
        rc = k3_err(err, "%s: session holds %u tokens, more than the context limit %d", path,
                    h.n_tokens, s->max_tokens);
    } else if (h.vocab != want.vocab || h.kda_floats != want.kda_floats ||
               h.mla_floats_per_token != want.mla_floats_per_token) {
        rc = k3_err(err, "%s: session state sizes do not match this model", path);
    }
    if (rc == 0) {
        const size_t entry = k3_config_mla_entry_floats(c);
        const int n_mla = k3_config_count_attn(c, K3_ATTN_MLA);
        uint8_t has_logits = 0;
        int bad = get(&hf, s->tokens, (size_t)h.n_tokens * sizeof(int32_t)) ||
                  get(&hf, s->kda_conv, k3_config_kda_conv_floats(c) * sizeof(float)) ||
                  get(&hf, s->kda_state, k3_config_kda_state_floats(c) * sizeof(float));
        for (int l = 0; l < n_mla && !bad; l++)
            bad = get(&hf, s->mla_cache + (size_t)l * s->max_tokens * entry, (size_t)h.n_tokens * entry * sizeof(float));
        bad = bad || get(&hf, &has_logits, 1) || get(&hf, s->logits, (size_t)c->vocab_size * sizeof(float));
        uint64_t sum = 0, expect = hf.hash;
        if (bad || fread(&sum, sizeof sum, 1, f) != 1) {
            rc = k3_err(err, "%s: truncated session file", path);
        } else if (sum != expect || fgetc(f) != EOF) {
            rc = k3_err(err, "%s: session file is corrupted (checksum mismatch)", path);
        } else {
            for (uint32_t i = 0; i < h.n_tokens; i++)
                if (s->tokens[i] < 0 || s->tokens[i] >= c->vocab_size) rc = k3_err(err, "%s: bad token id", path);
            if (rc == 0) {
                s->n_tokens = (int)h.n_tokens;
                s->has_logits = has_logits != 0;
            }
        }
    }
    fclose(f);
    if (rc) k3_session_reset(s);
    return rc;
}

const int *k3_session_tokens(const k3_session *s) { return s->tokens; }
