/* weights_internal.h - the weight store's state, shared by its files only
 * (weights.c open/close, weights_schema.c, weights_units.c,
 * weights_trunk.c, weights_experts.c, weights_embed.c, weights_probe.c,
 * weights_plan.c). The rest of the engine sees weights.h. */
#ifndef K3_WEIGHTS_INTERNAL_H
#define K3_WEIGHTS_INTERNAL_H

#include <stdio.h>
#include "expert_cache.h"
#include "file_read.h"
#include "io.h"
#include "manifest.h"
#include "mxfp4.h"
#include "planner.h"
#include "safetensors.h"
#include "stats.h"
#include "weights.h"
#include "weights_type.h"
#include "k3_util.h"

/* A file window read into a unit's memory: [offset, offset + bytes) aligned;
 * need_bytes must arrive (the end may be past EOF). */
typedef struct unit_window {
    int file;
    uint64_t offset, bytes, need_bytes;
    uint64_t slot_pos;            /* where it lands inside the unit's memory */
} unit_window;

typedef struct unit {
    int *tensors;                 /* indices into index.tensors */
    int n_tensors, cap_tensors;
    unit_window *win;
    int n_win;
    uint64_t bytes;               /* memory the unit needs (sum of windows) */
    uint8_t *pinned;              /* memory when pinned, else NULL */
} unit;

/* A slot of the trunk ring or the expert cache: memory plus the reads that
 * fill it. */
typedef struct slot {
    uint8_t *mem;
    int unit;                     /* unit loaded or loading; -1 none */
    int busy;                     /* acquired by the forward pass */
    int checked;                  /* MXFP4 scales checked since the read */
    int prefetched;               /* read on a prediction, not yet used */
    k3_io_req *reqs;
    int n_reqs;
} slot;

struct k3_weights {
    const k3_config *cfg;
    k3_provider_options opt;
    k3_stats *stats;
    st_index index;               /* HF shards, or the packed files */
    char type_label[K3_TYPE_LABEL_BYTES]; /* "BF16 + MXFP4 experts" (weights_type.c), or file_type
                                   * when the file names its own (a GGUF's: "Q4_K_M") */
    int packed;
    uint64_t packed_fingerprint;
    int gguf;                     /* the index is a GGUF's (gguf_checkpoint.c) */
    char file_type[16];           /* a GGUF's type ("Q4_K_M"), else "" */
    char dir[1024];
    int *fd;                      /* per file: reads of units (O_DIRECT when asked) */
    int *fd_buffered;             /* per file: small reads at open */
    k3_io *io;

    k3_layer_weights *layers;     /* templates (placeholder pointers in matrices) */
    k3_mlp_weights *experts;      /* [n_layers][n_experts] templates */
    k3_layer_weights *layer_views;/* rebased copies handed out */
    k3_weight head_template, head_view;
    const st_tensor *embed;       /* rows read on demand, or from embed_table */
    const uint8_t *embed_table;   /* row 0 of the table held in memory (fully resident plans), or NULL */
    uint8_t *embed_buf;           /* aligned bounce buffer for one row */
    uint64_t embed_buf_bytes;
    float *final_norm;
    float *output_res_score;

    unit *units;                  /* [n_layers] trunk, [n_layers] head, then experts */
    int n_units;
    uint64_t *tensor_pos;         /* per tensor: position inside its unit's memory */
    int cur_unit;                 /* unit the loader is filling */

    k3_plan plan;
    slot *ring;                   /* trunk slots */
    int n_ring;
    slot *cache_slots;            /* expert cache slots */
    uint8_t *cache_arena;         /* their memory, one block (huge pages) */
    struct k3_prefault *cache_prefault; /* faulting the arena in while the CPU idles (prefault.h) */
    uint8_t *expert_used;         /* [n_layers][n_experts]: routed to since open (prefill_bytes_min) */
    k3_expert_cache cache;
    FILE *trace;                  /* trace_out.f while --trace is open */
    k3_output trace_out;
    uint64_t trace_token;

    void **owned;
    int n_owned, cap_owned;
};

/* Unit numbering: layers' trunks 0..n_layers-1, the head, then the routed
 * experts layer-major. */
static inline int head_unit(const k3_weights *rp) { return rp->cfg->n_layers; }
static inline int expert_unit(const k3_weights *rp, int layer, int expert)
{
    return rp->cfg->n_layers + 1 + layer * rp->cfg->n_experts + expert;
}

/* weights_schema.c */
void *weights_own(k3_weights *rp, void *p);
int weights_load_schema(k3_weights *rp, k3_error *err);

/* weights_units.c */
/* A trunk unit is read in pieces of this size (weights_layout_unit). */
#define K3_TRUNK_PIECE_BYTES ((uint64_t)4 << 20)
int weights_layout_unit(k3_weights *rp, unit *u, uint64_t piece_bytes, k3_error *err);
void weights_rebase_weight(const k3_weights *rp, k3_weight *w, uint8_t *base);
void weights_rebase_mlp(const k3_weights *rp, k3_mlp_weights *m, uint8_t *base);
void weights_rebase_layer(k3_weights *rp, int l, uint8_t *base);
int weights_start_read(k3_weights *rp, slot *s, int ui, k3_read_kind kind, k3_error *err);
int weights_wait_slot_timed(k3_weights *rp, slot *s, uint64_t *wait_ns, k3_error *err);
int weights_wait_slot(k3_weights *rp, slot *s, k3_error *err);
void weights_drain_slot(k3_weights *rp, slot *s);
int weights_read_pinned(k3_weights *rp, int ui, k3_read_kind kind, k3_error *err);

/* weights_embed.c */
uint64_t weights_embed_table_bytes(const k3_weights *rp);
int weights_read_embed_table(k3_weights *rp, k3_error *err);

/* weights_plan.c */
int weights_plan_and_allocate(k3_weights *rp, k3_error *err);

#endif
