/* weights.h - the weight store: every tensor of a Hugging Face or packed
 * model directory, held in a planned memory budget (docs/ARCHITECTURE.md,
 * "Weights and the memory budget").
 *
 * At open every tensor the config implies is checked (weights_schema.c); the
 * big matrices are grouped into units read as a whole (weights_units.c): one
 * per layer's trunk, one for the head, one per routed expert. The planner
 * splits the budget (weights_plan.c): pinned units are read once at open,
 * the other trunk units stream through a ring of slots (weights_trunk.c),
 * routed experts live in an expert cache of fixed slots
 * (weights_experts.c). When everything fits, everything is pinned: "fully
 * resident" is the same code with no unit reads after open (embedding rows
 * are still read per token, weights_embed.c), so logits are bit-identical at
 * every budget. One implementation, called directly. */
#ifndef K3_WEIGHTS_H
#define K3_WEIGHTS_H

#include "layer_weights.h"
#include "planner.h"

typedef struct k3_weights k3_weights;

/* Open dir (HF shards or a packed directory), check every tensor, plan the
 * budget and read what is pinned. NULL with err set on any failure. */
k3_weights *k3_weights_open(const char *dir, const k3_config *c, const k3_provider_options *o,
                            k3_stats *stats, k3_error *err);
void k3_weights_close(k3_weights *w);

/* Bytes a prompt had to read at least: the distinct experts routed to since
 * open once each, plus the trunk units that are not pinned. */
uint64_t k3_weights_prefill_bytes_min(const k3_weights *w);
/* The plan's prompt chunk (tokens per pass over the weights) and why, and
 * the tokens its scratch holds at once (less when the chunk is a span run
 * layer by layer: forward.c). */
int k3_weights_chunk_tokens(const k3_weights *w, const char **why);
int k3_weights_tile_tokens(const k3_weights *w);
/* Slots of the expert cache: how many experts can be claimed at once. */
int k3_weights_expert_slots(const k3_weights *w);

/* The layer's non-expert tensors, valid until k3_weights_release_layer. */
const k3_layer_weights *k3_weights_acquire_layer(k3_weights *w, int layer, k3_error *err);
void k3_weights_release_layer(k3_weights *w, int layer);
/* The layer's weights if they are resident without any read (pinned), else
 * NULL: lets the forward pass run a later layer's router early. */
const k3_layer_weights *k3_weights_peek_layer(k3_weights *w, int layer);

/* Make routed experts of a layer resident, as many as the cache can hold at
 * once: reorders experts[0..n) so the claimed ones come first (resident ones
 * before those being read) and returns how many were claimed (>= 1), or -1
 * with err set. count_lookup: count these as cache lookups (the first call
 * of a layer step; waves after it do not). */
int k3_weights_claim_experts(k3_weights *w, int layer, int *experts, int n, int count_lookup, k3_error *err);
/* Speculative: start reading experts a layer is predicted to need, as
 * read-ahead guesses (the reader issues them after every needed read, and
 * a claim that needs one promotes it), into evictable slots (never a pinned
 * one). A prefetched
 * expert that the layer then uses counts as prefetch_used, not as a cache
 * hit; one evicted unused counts as prefetch_unused. */
void k3_weights_prefetch_experts(k3_weights *w, int layer, const int *experts, int n);
/* 1 when k3_weights_prefetch_experts can read anything (--prefetch on and
 * not everything resident): else the caller need not guess the experts. */
int k3_weights_prefetch_wanted(const k3_weights *w);
/* 1 if a claimed expert's bytes are already in memory (acquire will not wait). */
int k3_weights_expert_ready(k3_weights *w, int layer, int expert);
/* A claimed expert, waiting for its read; valid until release_expert. */
int k3_weights_acquire_expert(k3_weights *w, int layer, int expert, k3_mlp_weights *out, k3_error *err);
void k3_weights_release_expert(k3_weights *w, int layer, int expert);

/* Row `token` of the embedding table, as fp32 (one read per token). */
int k3_weights_embed_row(k3_weights *w, int token, float *out, k3_error *err);
/* Rows tokens[0..n) into out[n][hidden], up to K3_EMBED_BATCH_ROWS reads in
 * flight at once. */
#define K3_EMBED_BATCH_ROWS 8
int k3_weights_embed_rows(k3_weights *w, const int *tokens, int n, float *out, k3_error *err);
/* The bounce buffer those reads need (the planner counts it). */
uint64_t k3_weights_embed_buf_bytes(int hidden);
/* Final norm weight [hidden]; K3's model-level AttnRes score vector [hidden]
 * (NULL otherwise). */
const float *k3_weights_final_norm(k3_weights *w);
const float *k3_weights_output_res_score(k3_weights *w);
/* lm_head [vocab, hidden], valid until release_head. */
const k3_weight *k3_weights_acquire_head(k3_weights *w, k3_error *err);
void k3_weights_release_head(k3_weights *w);

/* Block until the expert cache's memory is faulted in (started at open
 * when experts stream, weights_plan.c); bytes and seconds since open. 0 and
 * 0 when nothing was started (resident, or no MADV_POPULATE_WRITE). */
void k3_weights_wait_prefault(k3_weights *w, uint64_t *bytes, double *seconds);
/* Measure the device with the runtime's reads: a sample of random routed
 * experts' own windows (every file that holds experts) into borrowed expert
 * slots, read once, then again at depths 1, 2 and the reader's, about
 * `seconds` in all (weights_probe.c). */
int k3_weights_probe_device(k3_weights *w, double seconds, k3_device_probe *out, k3_error *err);
/* Measure the trunk as the ring reads it: the units not pinned (pinned[ui]
 * = 1 for the others), in forward order, pass after pass, each unit's reads
 * in flight while the one before is waited for, into n_bufs (1 or 2)
 * aligned buffers of buf_bytes (a unit larger than a buffer is read in
 * buffer-sized pieces), two passes and `seconds` at least. out->units = 0
 * when every unit is pinned (weights_probe.c). */
int k3_weights_probe_trunk_into(k3_weights *w, const uint8_t *pinned, uint8_t *const *bufs, int n_bufs,
                                uint64_t buf_bytes, double seconds, k3_trunk_probe *out, k3_error *err);
/* The same with the plan in force, into the ring's own slots. */
int k3_weights_probe_trunk(k3_weights *w, double seconds, k3_trunk_probe *out, k3_error *err);
/* The planner's inputs as the units were laid out: trunk_bytes[n_layers + 1]
 * (layers, then the head), the expert slot size, routed experts in all
 * layers, the embedding row buffer, the embedding table held in memory. */
void k3_weights_unit_sizes(const k3_weights *w, uint64_t *trunk_bytes, uint64_t *expert_bytes,
                           int *n_experts_total, uint64_t *embed_buf_bytes, uint64_t *embed_table_bytes);
/* The trunk's main format (most of its bytes) and the routed experts'
 * (dtype, and the block type of a K3_DT_GGML one), for k3 plan. */
void k3_weights_formats(const k3_weights *w, k3_dtype *trunk_dtype, const struct k3_quant_type **trunk_qtype,
                        k3_dtype *expert_dtype, const struct k3_quant_type **expert_qtype);
/* Close what the store writes (the --trace file), reporting a failed write;
 * 0 when there is nothing to close. */
int k3_weights_finish(k3_weights *w, k3_error *err);
/* The memory plan in force. */
const k3_plan *k3_weights_plan(const k3_weights *w);
/* The weights' type as ollama and llama.cpp name a file's ("BF16 + MXFP4
 * experts"; weights_type.c). */
const char *k3_weights_type_label(const k3_weights *w);
/* Hash of what identifies the weights (shard names, sizes, headers); a
 * shard that cannot be read is an error, never a different hash. */
int k3_weights_content_hash(k3_weights *w, uint64_t *hash, k3_error *err);

#endif
