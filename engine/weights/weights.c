/* weights.c - open and close the weight store (see weights.h): the tensor
 * index of a Hugging Face directory or of a packed one's manifest, the
 * files (twice: O_DIRECT for unit reads, buffered for small reads at open),
 * the reader, then schema, layout and plan in their own files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gguf_checkpoint.h"
#include "unit_sums.h"
#include "prefault.h"
#include "weights_internal.h"
#include "k3_util.h"


/* Identifies the weights, the same way `k3 pack` fingerprints its source
 * (st_shard_fingerprint), so a packed copy and its HF original share state
 * snapshots; a packed directory carries the value in its manifest. */
int k3_weights_content_hash(k3_weights *rp, uint64_t *hash, k3_error *err)
{
    if (rp->packed) {
        *hash = rp->packed_fingerprint;
        return 0;
    }
    uint64_t h = K3_FNV_INIT;
    for (int s = 0; s < rp->index.n_shards; s++)
        if (st_file_fingerprint(rp->fd_buffered[s], rp->index.shards[s].path, rp->index.shards[s].file_bytes,
                                rp->index.shards[s].header_bytes, &h, err))
            return -1;
    *hash = h;
    return 0;
}

void k3_weights_close(k3_weights *rp)
{
    if (!rp) return;
    k3_prefault_stop(rp->cache_prefault);          /* before the arena goes */
    k3_io_close(rp->io);
    for (int i = 0; i < rp->n_owned; i++) free(rp->owned[i]);
    free(rp->owned);
    for (int i = 0; i < rp->n_units; i++) { free(rp->units[i].tensors); free(rp->units[i].win); }
    free(rp->units);
    for (int i = 0; i < rp->n_ring; i++) { free(rp->ring[i].mem); free(rp->ring[i].reqs); }
    free(rp->ring);
    for (int i = 0; i < rp->cache.n_slots; i++) free(rp->cache_slots[i].reqs);
    free(rp->cache_arena);
    free(rp->expert_used);
    free(rp->cache_slots);
    k3_expert_cache_free(&rp->cache);
    k3_plan_free(&rp->plan);
    free(rp->tensor_pos);
    free(rp->layers);
    free(rp->layer_views);
    free(rp->experts);
    free(rp->embed_buf);
    if (rp->trace) k3_output_close(&rp->trace_out, NULL);
    for (int i = 0; i < rp->index.n_shards; i++) {
        if (rp->fd && rp->fd[i] >= 0) close(rp->fd[i]);
        if (rp->fd_buffered && rp->fd_buffered[i] >= 0) close(rp->fd_buffered[i]);
    }
    free(rp->fd);
    free(rp->fd_buffered);
    st_index_close(&rp->index);
    free(rp);
}

/* A packed directory's manifest as an st_index: four "shards" (trunk,
 * experts, embed, head) and the tensor table, so one loader serves both. */
static int index_from_manifest(k3_weights *rp, const char *dir, k3_error *err)
{
    k3_manifest mf;
    if (k3_manifest_load(dir, &mf, err)) return -1;
    if (k3_unit_sums_check(&mf, 1, err)) { k3_manifest_free(&mf); return -1; }   /* weights changed in place? */
    st_index *ix = &rp->index;
    memset(ix, 0, sizeof *ix);
    ix->n_shards = K3_PK_NFILES;
    ix->shards = calloc(K3_PK_NFILES, sizeof *ix->shards);
    ix->tensors = calloc((size_t)(mf.n_tensors ? mf.n_tensors : 1), sizeof *ix->tensors);
    if (!ix->shards || !ix->tensors) { k3_manifest_free(&mf); return k3_err(err, "out of memory"); }
    for (int f = 0; f < K3_PK_NFILES; f++) {
        char path[4096];
        k3_manifest_path(&mf, (k3_pk_file)f, path, sizeof path);
        ix->shards[f].path = strdup(path);
        ix->shards[f].fd = -1;
        ix->shards[f].file_bytes = mf.file_bytes[f];
    }
    for (int i = 0; i < mf.n_tensors; i++) {
        const k3_manifest_tensor *mt = &mf.tensors[i];
        st_tensor *t = &ix->tensors[ix->n_tensors++];
        t->name = strdup(mt->name);
        t->dtype = mt->dtype;
        t->qtype = mt->qtype;   /* a block type of `k3 pack --trunk/--experts` */
        t->ndim = mt->ndim;
        memcpy(t->shape, mt->shape, sizeof(int64_t) * (mt->ndim < ST_MAX_DIMS ? mt->ndim : ST_MAX_DIMS));
        t->file_offset = mt->offset;
        t->nbytes = mt->bytes;
        t->shard = mt->file;
    }
    rp->packed = 1;
    rp->packed_fingerprint = mf.fingerprint;
    k3_manifest_free(&mf);
    return st_index_build_lookup(ix, err);
}

/* A GGUF file or split set as an st_index under k3's names
 * (gguf_checkpoint.c); its file type names the weights. */
static int index_from_gguf(k3_weights *rp, const char *path, k3_error *err)
{
    gguf_file g;
    if (gguf_open(&g, path, err)) return -1;
    int rc = gguf_checkpoint_index(&g, rp->cfg, &rp->index, err);
    if (!rc) snprintf(rp->file_type, sizeof rp->file_type, "%s", gguf_file_type_name(&g));
    else st_index_close(&rp->index);
    rp->gguf = !rc;
    gguf_close(&g);
    return rc;
}

/* Open every file twice: for unit reads (O_DIRECT when asked) and for small
 * buffered reads at open. */
static int open_files(k3_weights *rp, k3_error *err)
{
    const int n = rp->index.n_shards;
    rp->fd = malloc((size_t)n * sizeof *rp->fd);
    rp->fd_buffered = malloc((size_t)n * sizeof *rp->fd_buffered);
    if (!rp->fd || !rp->fd_buffered) return k3_err(err, "out of memory");
    for (int i = 0; i < n; i++) rp->fd[i] = rp->fd_buffered[i] = -1;
    for (int i = 0; i < n; i++) {
        const char *path = rp->index.shards[i].path;
        rp->fd_buffered[i] = k3_open_regular(path, O_RDONLY, err);
        if (rp->fd_buffered[i] < 0) return -1;
        rp->fd[i] = open(path, O_RDONLY | O_CLOEXEC | (rp->opt.io_direct ? O_DIRECT : 0));
        if (rp->fd[i] < 0 && rp->opt.io_direct && errno == EINVAL)
            return k3_err(err, "%s: this filesystem does not support O_DIRECT; use --io buffered", path);
        if (rp->fd[i] < 0) return k3_err(err, "%s: %s", path, strerror(errno));
        if (!rp->opt.io_direct) posix_fadvise(rp->fd[i], 0, 0, POSIX_FADV_RANDOM);
    }
    return 0;
}


/* The trace is the only file the weight store writes: close it, reporting a
 * failed write; 0 when there is nothing to close. */
int k3_weights_finish(k3_weights *rp, k3_error *err)
{
    if (!rp->trace) return 0;
    rp->trace = NULL;
    return k3_output_close(&rp->trace_out, err);
}

/* Open: the index (HF shards or the packed manifest), the files, the
 * reader; then the schema, the unit layout, the plan and the pinned reads. */
k3_weights *k3_weights_open(const char *dir, const k3_config *c, const k3_provider_options *o,
                            k3_stats *stats, k3_error *err)
{
    k3_weights *rp = calloc(1, sizeof *rp);
    if (!rp) { k3_err(err, "out of memory"); return NULL; }
    rp->cfg = c;
    rp->opt = *o;
    rp->stats = stats;
    snprintf(rp->dir, sizeof rp->dir, "%s", dir);
    int rc = gguf_is_model_path(dir)    ? index_from_gguf(rp, dir, err)
             : weights_dir_is_packed(dir) ? index_from_manifest(rp, dir, err)
                                          : st_index_open(&rp->index, dir, err);
    if (rc) { free(rp); return NULL; }
    if (rp->file_type[0]) snprintf(rp->type_label, sizeof rp->type_label, "%s", rp->file_type);   /* a GGUF's own */
    else weights_index_type_label(&rp->index, rp->type_label, sizeof rp->type_label);
    if (open_files(rp, err)) goto fail;
    rp->io = k3_io_open((k3_io_backend)o->io_backend, o->io_depth > 0 ? o->io_depth : K3_IO_DEPTH_DEFAULT, stats, err);
    if (!rp->io) goto fail;
    const int fail_nth = k3_test_hook("K3_TEST_FAIL_READ");
    if (fail_nth > 0) k3_io_inject_failure(rp->io, fail_nth, EIO);
    if (o->trace_path) {
        if (k3_output_open(&rp->trace_out, o->trace_path, err)) goto fail;
        rp->trace = rp->trace_out.f;
    }
    rp->n_units = c->n_layers + 1 + c->n_layers * c->n_experts;
    rp->units = calloc((size_t)rp->n_units, sizeof *rp->units);
    rp->tensor_pos = calloc((size_t)(rp->index.n_tensors ? rp->index.n_tensors : 1), sizeof *rp->tensor_pos);
    rp->layers = calloc((size_t)c->n_layers, sizeof *rp->layers);
    rp->layer_views = calloc((size_t)c->n_layers, sizeof *rp->layer_views);
    rp->experts = calloc((size_t)c->n_layers * c->n_experts, sizeof *rp->experts);
    if (!rp->units || !rp->tensor_pos || !rp->layers || !rp->layer_views || !rp->experts) {
        k3_err(err, "out of memory");
        goto fail;
    }
    if (weights_load_schema(rp, err)) goto fail;
    for (int i = 0; i < rp->n_units; i++)
        if (weights_layout_unit(rp, &rp->units[i], i <= c->n_layers ? K3_TRUNK_PIECE_BYTES : 0, err)) goto fail;
    if (weights_plan_and_allocate(rp, err)) goto fail;
    if (rp->opt.sizes_only) return rp;    /* k3 plan: the layout is all it wants */
    if (rp->plan.pinned[head_unit(rp)]) {
        rp->head_view = rp->head_template;
        weights_rebase_weight(rp, &rp->head_view, rp->units[head_unit(rp)].pinned);
    }
    return rp;
fail:
    k3_weights_close(rp);
    return NULL;
}

/* The plan in force, for the front ends to show (the engine never prints). */
const k3_plan *k3_weights_plan(const k3_weights *rp) { return &rp->plan; }
