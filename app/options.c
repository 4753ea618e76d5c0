/* options.c - the options table (see options.h). One row per option; a row's
 * default is parsed by the same code as a value from the command line, so
 * the default shown in help is the default used. */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "draft.h"
#include "k3_offline.h"
#include "options.h"
#include "serve.h"
#include "k3_util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

typedef enum { OPT_SIZE, OPT_INT, OPT_FLOAT, OPT_CHOICE, OPT_FLAG, OPT_TEXT } opt_type;

/* A parsed value, handed to the row's setter. */
typedef struct opt_value {
    long long i;             /* OPT_SIZE, OPT_INT, OPT_CHOICE (index), OPT_FLAG (1) */
    double d;                /* OPT_FLOAT */
    const char *s;           /* the text as given */
} opt_value;

typedef struct cli_option {
    const char *name, *alias;    /* "--max-tokens", "-n" */
    unsigned group;
    opt_type type;
    const char *value_name;      /* "SIZE", "N" */
    const char *choices;         /* OPT_CHOICE: "direct|buffered" */
    double lo, hi;               /* OPT_INT, OPT_FLOAT, OPT_SIZE bounds (whole numbers are exact
                                  * in a double up to 2^53; --seed's upper end is the exception) */
    const char *def;             /* default as command-line text; NULL = none */
    const char *def_note;        /* how the default reads in help when def is NULL or special */
    int (*set)(cli_settings *s, const opt_value *v);
    const char *help;
} cli_option;

static int set_mem(cli_settings *s, const opt_value *v) { s->model.mem_bytes = (uint64_t)v->i; return 0; }
static int set_io(cli_settings *s, const opt_value *v) { s->model.io_buffered = (int)v->i; return 0; }
static int set_backend(cli_settings *s, const opt_value *v) { s->model.io_uring = (int)v->i; return 0; }
static int set_depth(cli_settings *s, const opt_value *v) { s->model.io_depth = (int)v->i; return 0; }
static int set_prefetch(cli_settings *s, const opt_value *v) { s->model.no_prefetch = !v->i; return 0; }
static int set_no_prefetch(cli_settings *s, const opt_value *v) { s->model.no_prefetch = (int)v->i; return 0; }
static int set_chunk(cli_settings *s, const opt_value *v) { s->model.chunk_tokens = (int)v->i; return 0; }
static int set_huge(cli_settings *s, const opt_value *v) { s->model.no_huge_pages = (int)v->i; return 0; }
static int set_activations(cli_settings *s, const opt_value *v) { s->model.activations_q8 = (int)v->i; return 0; }
static int set_trace(cli_settings *s, const opt_value *v) { s->model.trace_path = v->s; return 0; }
static int set_threads(cli_settings *s, const opt_value *v) { s->model.n_threads = (int)v->i; return 0; }
static int set_ctx(cli_settings *s, const opt_value *v) { s->model.ctx_tokens = (int)v->i; return 0; }
static int set_max_new(cli_settings *s, const opt_value *v) { s->max_new = (int)v->i; return 0; }
static int set_draft(cli_settings *s, const opt_value *v) { s->draft = v->i ? DRAFT_NGRAM : DRAFT_NONE; return 0; }
static int set_think(cli_settings *s, const opt_value *v) { s->think = (int)v->i; return 0; }

const char *cli_think_effort(int think)
{
    static const char *const names[] = {NULL, "low", "medium", "high", "max"};
    return think > 0 && think < 5 ? names[think] : NULL;
}

static int set_temp(cli_settings *s, const opt_value *v)
{
    s->sampler.temperature = (float)v->d;
    s->sampling_given |= 1;
    return 0;
}
static int set_top_k(cli_settings *s, const opt_value *v)
{
    s->sampler.top_k = (int)v->i;
    s->sampling_given |= 2;
    return 0;
}
static int set_top_p(cli_settings *s, const opt_value *v)
{
    s->sampler.top_p = (float)v->d;
    s->sampling_given |= 4;
    return 0;
}
static int set_min_p(cli_settings *s, const opt_value *v)
{
    s->sampler.min_p = (float)v->d;
    s->sampling_given |= 8;
    return 0;
}
static int set_seed(cli_settings *s, const opt_value *v)
{
    s->sampler.seed = (uint64_t)v->i;
    s->sampling_given |= 16;
    return 0;
}

/* k3 gen: the preset names are the generator's (k3_gen_preset_exists). */
static int set_gen_preset(cli_settings *s, const opt_value *v)
{
    if (!k3_gen_preset_exists(v->s)) {
        cli_error("--preset: unknown preset '%s' (%s)", v->s, k3_gen_preset_names());
        return -1;
    }
    s->gen.preset = v->s;
    return 0;
}
static int set_gen_seed(cli_settings *s, const opt_value *v) { s->gen.seed = (uint64_t)v->i; return 0; }
static int set_gen_dtype(cli_settings *s, const opt_value *v) { s->gen.f32 = (int)v->i; return 0; }
static int set_gen_shards(cli_settings *s, const opt_value *v) { s->gen.shards = (int)v->i; return 0; }
static int set_gen_force(cli_settings *s, const opt_value *v) { s->gen.force = (int)v->i; return 0; }
static int set_gen_corpus(cli_settings *s, const opt_value *v) { s->gen.tokenizer_corpus = v->s; return 0; }
static int set_gen_n_base(cli_settings *s, const opt_value *v) { s->gen.n_base = (int)v->i; return 0; }

/* k3 pack. */
static int set_pack_force(cli_settings *s, const opt_value *v) { s->pack.force = (int)v->i; return 0; }
static int set_pack_progress(cli_settings *s, const opt_value *v) { s->pack.progress = (int)v->i; return 0; }
static int set_pack_buffer(cli_settings *s, const opt_value *v) { s->pack.buffer_mib = v->i; return 0; }
static int set_pack_throttle(cli_settings *s, const opt_value *v) { s->pack.throttle_mb_s = v->d; return 0; }
static int set_pack_sample(cli_settings *s, const opt_value *v) { s->pack.sample_tensors = (int)v->i; return 0; }
static int set_pack_verify(cli_settings *s, const opt_value *v) { s->pack.verify_dir = v->s; return 0; }
static int set_pack_free(cli_settings *s, const opt_value *v) { s->pack.simulate_free_bytes = v->i; return 0; }
/* The block types of --trunk / --experts, in the order of their choice lists. */
#define PACK_QUANT_CHOICES "Q8_0|Q6_K|Q5_K|Q5_0|Q4_K|Q4_0|MXFP4"
static const char *const pack_quant_names[] = {"Q8_0", "Q6_K", "Q5_K", "Q5_0", "Q4_K", "Q4_0", "MXFP4"};
static int set_pack_trunk(cli_settings *s, const opt_value *v) { s->pack.trunk_type = pack_quant_names[v->i]; return 0; }
static int set_pack_experts(cli_settings *s, const opt_value *v) { s->pack.experts_type = pack_quant_names[v->i]; return 0; }

/* Options of more than one command with one meaning. */
static int set_system(cli_settings *s, const opt_value *v) { s->system = v->s; return 0; }
static int set_json(cli_settings *s, const opt_value *v) { s->json = (int)v->i; return 0; }
static int set_db(cli_settings *s, const opt_value *v) { s->db_path = v->s; return 0; }

/* --endpoint and its companions (run, chat, bench). */
static int set_endpoint(cli_settings *s, const opt_value *v) { s->remote.endpoint = v->s; return 0; }
static int set_remote_model(cli_settings *s, const opt_value *v) { s->remote.model = v->s; return 0; }
static int set_remote_key_env(cli_settings *s, const opt_value *v) { s->remote.api_key_env = v->s; return 0; }
static int set_ca_cert(cli_settings *s, const opt_value *v) { s->remote.ca_cert = v->s; return 0; }
static int set_timeout(cli_settings *s, const opt_value *v) { s->remote.timeout_s = (int)v->i; return 0; }
static int set_retries(cli_settings *s, const opt_value *v) { s->remote.retries = (int)v->i; return 0; }

/* k3 plan. --disk is "auto" (probe: 0) or a speed, so it is text checked here. */
static int set_plan_disk(cli_settings *s, const opt_value *v)
{
    if (!strcmp(v->s, "auto")) {
        s->plan.disk_gbps = 0;
        return 0;
    }
    return cli_parse_float("--disk", v->s, 0.001, 1000, &s->plan.disk_gbps);
}
/* --disk-trunk: "auto" (probe the ring's reads on the model's files) or a
 * speed; unset = as --disk when that is given. */
static int set_plan_disk_trunk(cli_settings *s, const opt_value *v)
{
    if (!strcmp(v->s, "auto")) {
        s->plan.trunk_gbps = 0;
        s->plan.trunk_auto = 1;
        return 0;
    }
    return cli_parse_float("--disk-trunk", v->s, 0.001, 1000, &s->plan.trunk_gbps);
}
static int set_plan_prompt(cli_settings *s, const opt_value *v) { s->plan.prompt_tokens = (int)v->i; return 0; }
static int set_plan_cores(cli_settings *s, const opt_value *v) { s->plan.cores = (int)v->i; return 0; }
/* --rates FILE: k3 plan's predictions and every model's memory plan take
 * their speeds from it */
static int set_plan_rates(cli_settings *s, const opt_value *v)
{
    s->plan.rates_path = v->s;
    s->model.rates_path = v->s;
    return 0;
}
static int set_trunk_type(cli_settings *s, const opt_value *v) { s->trunk_type = v->s; return 0; }
static int set_expert_type(cli_settings *s, const opt_value *v) { s->expert_type = v->s; return 0; }
static int set_plan_fixed(cli_settings *s, const opt_value *v) { s->plan.fixed_bytes = (uint64_t)v->i; return 0; }
static int set_plan_reprobe(cli_settings *s, const opt_value *v) { s->plan.reprobe = (int)v->i; return 0; }

/* k3 serve. */
static int set_serve_host(cli_settings *s, const opt_value *v) { s->serve.host = v->s; return 0; }
static int set_serve_port(cli_settings *s, const opt_value *v) { s->serve.port = (int)v->i; return 0; }
static int set_serve_key_env(cli_settings *s, const opt_value *v) { s->serve.key_env = v->s; return 0; }
static int set_serve_name(cli_settings *s, const opt_value *v) { s->serve.model_name = v->s; return 0; }
static int set_serve_max_tokens(cli_settings *s, const opt_value *v) { s->serve.max_tokens = (int)v->i; return 0; }
static int set_serve_queue(cli_settings *s, const opt_value *v) { s->serve.queue = (int)v->i; return 0; }
static int set_serve_max_body(cli_settings *s, const opt_value *v) { s->serve.max_body_bytes = (uint64_t)v->i; return 0; }
static int set_serve_state_cache(cli_settings *s, const opt_value *v) { s->serve.state_cache_bytes = (uint64_t)v->i; return 0; }
static int set_serve_entries(cli_settings *s, const opt_value *v) { s->serve.state_cache_entries = (int)v->i; return 0; }
static int set_serve_quiet(cli_settings *s, const opt_value *v) { s->serve.quiet = (int)v->i; return 0; }
static int set_serve_request_timeout(cli_settings *s, const opt_value *v) { s->serve.request_timeout_s = (int)v->i; return 0; }

/* k3 chat. */
static int set_chat_resume(cli_settings *s, const opt_value *v) { s->chat.resume = v->s; return 0; }
static int set_chat_plain(cli_settings *s, const opt_value *v) { s->chat.plain = (int)v->i; return 0; }
static int set_chat_stream(cli_settings *s, const opt_value *v) { s->chat.stream = (int)v->i; return 0; }
static int set_chat_lines(cli_settings *s, const opt_value *v) { s->chat.lines = (int)v->i; return 0; }
static int set_chat_raw(cli_settings *s, const opt_value *v) { s->chat.raw = (int)v->i; return 0; }

/* k3 run. */
static int set_run_prompt(cli_settings *s, const opt_value *v) { s->run.prompt = v->s; return 0; }
static int set_run_prompt_file(cli_settings *s, const opt_value *v) { s->run.prompt_file = v->s; return 0; }
static int set_run_chat(cli_settings *s, const opt_value *v) { s->run.chat = (int)v->i; return 0; }

/* k3 eval. */
static int set_eval_ids(cli_settings *s, const opt_value *v) { s->eval.ids = v->s; return 0; }
static int set_eval_logits(cli_settings *s, const opt_value *v) { s->eval.logits_path = v->s; return 0; }
static int set_eval_text_file(cli_settings *s, const opt_value *v) { s->eval.text_file = v->s; return 0; }
static int set_eval_save_base(cli_settings *s, const opt_value *v) { s->eval.save_base = v->s; return 0; }
static int set_eval_kl_base(cli_settings *s, const opt_value *v) { s->eval.kl_base = v->s; return 0; }

/* k3 bench. A resident time given is one not measured. */
static int set_bench_steps(cli_settings *s, const opt_value *v) { s->bench.tokens = (int)v->i; return 0; }
static int set_bench_prompt_tokens(cli_settings *s, const opt_value *v) { s->bench.prompt_tokens = (int)v->i; return 0; }
static int set_bench_no_probe(cli_settings *s, const opt_value *v) { s->bench.no_probe = (int)v->i; return 0; }
static int set_bench_no_tbt(cli_settings *s, const opt_value *v) { s->bench.no_token_by_token = (int)v->i; return 0; }
static int set_bench_no_resident(cli_settings *s, const opt_value *v) { s->bench.no_resident = (int)v->i; return 0; }
static int set_bench_no_warm(cli_settings *s, const opt_value *v) { s->bench.no_warm_prompt = (int)v->i; return 0; }
static int set_bench_no_draft(cli_settings *s, const opt_value *v) { (void)v; s->bench.draft_rounds = 0; return 0; }
static int set_bench_draft_rounds(cli_settings *s, const opt_value *v) { s->bench.draft_rounds = (int)v->i; return 0; }
static int set_bench_resident_s(cli_settings *s, const opt_value *v)
{
    s->bench.resident_s_per_token = v->d;
    s->bench.no_resident = 1;
    return 0;
}

/* k3 bench --endpoint. */
static int set_bench_requests(cli_settings *s, const opt_value *v) { s->bench_remote.requests = (int)v->i; return 0; }
static int set_bench_tokens(cli_settings *s, const opt_value *v) { s->bench_remote.tokens = (int)v->i; return 0; }
static int set_bench_prompt(cli_settings *s, const opt_value *v) { s->bench_remote.prompt = v->s; return 0; }

/* k3 tokenize: one mode per run, so a second mode option is an error. */
static int set_tokenize_mode(cli_settings *s, cli_tokenize_mode mode, const char *opt, const char *arg)
{
    if (s->tokenize.mode != TOKENIZE_NONE) {
        cli_error("tokenize: %s and %s cannot be combined", s->tokenize.opt, opt);
        return -1;
    }
    s->tokenize = (cli_tokenize_settings){.mode = mode, .arg = arg, .opt = opt};
    return 0;
}
static int set_tokenize_text(cli_settings *s, const opt_value *v) { return set_tokenize_mode(s, TOKENIZE_TEXT, "--text", v->s); }
static int set_tokenize_text_file(cli_settings *s, const opt_value *v)
{
    return set_tokenize_mode(s, TOKENIZE_TEXT_FILE, "--text-file", v->s);
}
static int set_tokenize_chat(cli_settings *s, const opt_value *v) { return set_tokenize_mode(s, TOKENIZE_CHAT, "--chat", v->s); }
static int set_tokenize_decode(cli_settings *s, const opt_value *v)
{
    return set_tokenize_mode(s, TOKENIZE_DECODE, "--decode", v->s);
}

/* k3 history. */
static int set_history_help(cli_settings *s, const opt_value *v) { s->history.help = (int)v->i; return 0; }
static int set_history_format(cli_settings *s, const opt_value *v) { s->history.format = v->s; return 0; }
static int set_history_output(cli_settings *s, const opt_value *v) { s->history.output = v->s; return 0; }
static int set_history_force(cli_settings *s, const opt_value *v) { s->history.force = (int)v->i; return 0; }
static int set_history_yes(cli_settings *s, const opt_value *v) { s->history.yes = (int)v->i; return 0; }
static int set_history_limit(cli_settings *s, const opt_value *v) { s->history.limit = (int)v->i; return 0; }
static int set_history_n(cli_settings *s, const opt_value *v) { s->history.n = (int)v->i; return 0; }
static int set_history_ids(cli_settings *s, const opt_value *v) { s->history.ids_file = v->s; return 0; }

/* The policy names are the engine's (k3_cache_policy_parse), not spelled here. */
static int set_cache_policy(cli_settings *s, const opt_value *v)
{
    int p = k3_cache_policy_parse(v->s);
    if (p < 0) {
        cli_error("--cache-policy: expected lru or lfru, got '%s'", v->s);
        return -1;
    }
    s->model.cache_lru = p == K3_CACHE_LRU;
    return 0;
}

static const cli_option options[] = {
    {"--mem", NULL, OPTS_MODEL, OPT_SIZE, "SIZE", NULL, 1, 0, NULL,
     "resident if it fits in 9/10 of available memory; in a memory cgroup or under `ulimit -v`, 9/10 of what the limit leaves",
     set_mem,
     "budget for the whole process (e.g. 2G); the rest streams from disk"},
    {"--io", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "direct|buffered", 0, 0, "direct", NULL, set_io,
     "read with O_DIRECT or through the page cache"},
    {"--io-backend", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "pool|uring", 0, 0, "pool", NULL, set_backend,
     "a pool of pread threads or io_uring"},
    {"--io-depth", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 32, STR(K3_IO_DEPTH_DEFAULT), NULL, set_depth,
     "reads in flight"},
    {"--cache-policy", NULL, OPTS_MODEL, OPT_TEXT, NULL, "lru|lfru", 0, 0, "lfru", NULL, set_cache_policy,
     "expert cache eviction"},
    {"--prefetch", NULL, OPTS_MODEL, OPT_FLAG, NULL, NULL, 0, 0, NULL, "on", set_prefetch,
     "read the next layer's predicted experts behind the needed reads"},
    {"--no-prefetch", NULL, OPTS_MODEL, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_no_prefetch,
     "no reads of predicted experts: only what a layer routes to"},
    {"--chunk-tokens", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 65536, NULL, "the largest the budget allows",
     set_chunk, "prompt tokens per pass over the weights"},
    {"--huge-pages", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "on|off", 0, 0, "on", NULL, set_huge,
     "large arenas on 2 MiB transparent huge pages"},
    {"--activations", NULL, OPTS_MODEL, OPT_CHOICE, NULL, "f32|q8", 0, 0, "f32", NULL, set_activations,
     "MXFP4 experts and GGUF block types: exact fp32 activations, or int8 per block as llama.cpp "
     "(faster, approximate)"},
    {"--trace", NULL, OPTS_MODEL, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_trace,
     "record routing as lines \"token layer expert\""},
    {"--threads", NULL, OPTS_MODEL, OPT_INT, "N", NULL, 1, 1024, NULL, "OMP_NUM_THREADS, else the CPUs this process may use (a cgroup CPU quota caps it)", set_threads,
     "compute threads"},
    {"--ctx", NULL, OPTS_CONTEXT, OPT_INT, "N", NULL, 16, 1 << 24, STR(K3_CTX_TOKENS_DEFAULT), NULL, set_ctx,
     "context limit in tokens (the state is planned for it)"},
    {"--max-tokens", "-n", OPTS_GENERATE, OPT_INT, "N", NULL, 0, 1 << 24, "128", "128; chat 512", set_max_new,
     "tokens to generate"},
    {"--temp", NULL, OPTS_GENERATE, OPT_FLOAT, "T", NULL, 0, 100, "0", "0 = greedy", set_temp,
     "sampling temperature"},
    {"--top-k", NULL, OPTS_GENERATE, OPT_INT, "K", NULL, 0, 1 << 24, "0", "0 = off", set_top_k,
     "keep the K most likely tokens"},
    {"--top-p", NULL, OPTS_GENERATE, OPT_FLOAT, "P", NULL, 0, 1, "1", "1 = off", set_top_p,
     "nucleus sampling: the smallest set with mass P"},
    {"--min-p", NULL, OPTS_GENERATE, OPT_FLOAT, "P", NULL, 0, 1, "0", "0 = off", set_min_p,
     "drop tokens below P x p(most likely token)"},
    {"--seed", NULL, OPTS_GENERATE, OPT_INT, "S", NULL, 0, -1, "1", NULL, set_seed,
     "random seed of the sampler"},
    {"--draft", NULL, OPTS_GENERATE, OPT_CHOICE, NULL, "none|ngram", 0, 0, "ngram", NULL, set_draft,
     "speculative decoding: drafts from n-grams of the conversation, verified in one pass (same output)"},

    {"--preset", NULL, OPTS_GEN, OPT_TEXT, "NAME", NULL, 0, 0, NULL, "none: required", set_gen_preset,
     "the model to write: tiny, small, demo, k3-tiny, k3-sim, k3-16g, k3-real-widths, kl-4g"},
    {"--seed", NULL, OPTS_GEN, OPT_INT, "N", NULL, 0, -1, "1", NULL, set_gen_seed,
     "seed of the weights (each tensor's values depend on it and the tensor's name only)"},
    {"--dtype", NULL, OPTS_GEN, OPT_CHOICE, NULL, "bf16|f32", 0, 0, "bf16", NULL, set_gen_dtype,
     "dtype of the dense weights"},
    {"--shards", NULL, OPTS_GEN, OPT_INT, "K", NULL, 1, 64, "1", NULL, set_gen_shards,
     "safetensors shards (an index file when K > 1)"},
    {"--tokenizer-corpus", NULL, OPTS_GEN, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_gen_corpus,
     "instead of a model: only a Kimi K3 tokenizer, its BPE merges learned from FILE (tools/train_demo.py)"},
    {"--n-base", NULL, OPTS_GEN, OPT_INT, "N", NULL, 256, 1 << 20, "3840", NULL, set_gen_n_base,
     "with --tokenizer-corpus: N - 256 merges, a vocabulary of N + 256"},
    {"--force", NULL, OPTS_GEN, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_gen_force,
     "write into a non-empty OUT_DIR (never over a model k3 gen did not write)"},

    {"--force", NULL, OPTS_PACK, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_pack_force,
     "replace DST if it is an existing packed model"},
    {"--progress", NULL, OPTS_PACK, OPT_FLAG, NULL, NULL, 0, 0, NULL, "on a terminal only", set_pack_progress,
     "progress on stderr even when it is not a terminal"},
    {"--buffer", NULL, OPTS_PACK, OPT_INT, "MIB", NULL, 1, 16384, "64", NULL, set_pack_buffer,
     "copy buffer in MiB: the bulk of pack's peak memory"},
    {"--throttle", NULL, OPTS_PACK, OPT_FLOAT, "MB/S", NULL, 0.001, 1e6, NULL, "unlimited", set_pack_throttle,
     "cap the copy rate"},
    {"--sample", NULL, OPTS_PACK, OPT_INT, "N", NULL, 0, 1000000, "16", NULL, set_pack_sample,
     "tensors compared byte for byte with the source after writing"},
    {"--verify", "--check", OPTS_PACK, OPT_TEXT, "DIR", NULL, 0, 0, NULL, "none", set_pack_verify,
     "instead of packing: load DIR (all bounds checks) and re-verify every unit's and file's checksum"},
    {"--simulate-free-bytes", NULL, OPTS_PACK, OPT_INT, "N", NULL, 0, -1, NULL, "off", set_pack_free,
     "TEST ONLY: assume the destination filesystem has N bytes free"},
    {"--trunk", NULL, OPTS_PACK, OPT_CHOICE, NULL, PACK_QUANT_CHOICES, 0, 0, NULL, "as stored", set_pack_trunk,
     "write the layers' weight matrices as these GGUF blocks (llama.cpp's reference quantizer; docs/MODEL.md, "
     "\"Quantizing\")"},
    {"--experts", NULL, OPTS_PACK, OPT_CHOICE, NULL, PACK_QUANT_CHOICES, 0, 0, NULL, "as stored", set_pack_experts,
     "the same for the routed experts' matrices (K3's MXFP4 experts are decoded and converted; to MXFP4 losslessly)"},
    {"--think", NULL, OPTS_CHAT | OPTS_RUN | OPTS_TOKENIZE | OPTS_SERVE, OPT_CHOICE, NULL, "off|low|medium|high|max", 0,
     0, "off", NULL, set_think,
     "Kimi K3 thinking and its effort (run, tokenize: with --chat; serve: unless a request says, see "
     "chat_template_kwargs); off by default: thousands of tokens on a CPU (docs/COMMANDS.md)"},
    {"--system", NULL, OPTS_CHAT | OPTS_RUN, OPT_TEXT, "TEXT", NULL, 0, 0, NULL, "none", set_system,
     "system message (run: with --chat; chat: a new conversation only, a resumed one keeps its own)"},
    {"--json", NULL, OPTS_PLAN | OPTS_CHAT | OPTS_BENCH | OPTS_BENCH_REMOTE | OPTS_HISTORY | OPTS_EVAL, OPT_FLAG,
     NULL, NULL, 0, 0, NULL, "off", set_json,
     "JSON on stdout (plan, bench, eval --kl-base: one object; chat: one object per turn; history: a JSON array, or "
     "show's export) instead of the text"},
    {"--db", NULL, OPTS_CHAT | OPTS_HISTORY, OPT_TEXT, "FILE", NULL, 0, 0, NULL,
     "$XDG_DATA_HOME/k3/history.db, else ~/.local/share/k3/history.db", set_db, "history database"},

    {"--endpoint", NULL, OPTS_REMOTE, OPT_TEXT, "URL", NULL, 0, 0, NULL, "none: the local model", set_endpoint,
     "an OpenAI-compatible server (http[s]://host:port[/v1]) instead of a local model"},
    {"--model", NULL, OPTS_REMOTE, OPT_TEXT, "NAME", NULL, 0, 0, NULL, "the first the server lists", set_remote_model,
     "the server's model"},
    {"--api-key-env", NULL, OPTS_REMOTE, OPT_TEXT, "VAR", NULL, 0, 0, NULL, "none", set_remote_key_env,
     "send $VAR as the API key (never on the command line, never stored)"},
    {"--ca-cert", NULL, OPTS_REMOTE, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "the system's", set_ca_cert,
     "trust the CA certificates in FILE (PEM) for an https:// server"},
    {"--timeout", NULL, OPTS_REMOTE, OPT_INT, "S", NULL, 1, 86400, "120", NULL, set_timeout,
     "fail when the server sends nothing for S seconds"},
    {"--retries", NULL, OPTS_REMOTE, OPT_INT, "N", NULL, 0, 100, "3", NULL, set_retries,
     "retries of a 429 (after the server's Retry-After)"},

    {"--ctx", NULL, OPTS_PLAN, OPT_INT, "N", NULL, 1, 1 << 24, STR(K3_CTX_TOKENS_DEFAULT), NULL, set_ctx,
     "context limit planned for (any the engine takes: k3 bench plans for prompt + tokens, which may be under 16)"},
    {"--disk", NULL, OPTS_PLAN, OPT_TEXT, "auto|GB/S", NULL, 0.001, 1000, "auto", NULL, set_plan_disk,
     "speed of random expert-sized reads: auto probes the model's files, else the cache folder's filesystem"},
    {"--disk-trunk", NULL, OPTS_PLAN, OPT_TEXT, "auto|GB/S", NULL, 0.001, 1000, NULL,
     "as --disk when given, else auto", set_plan_disk_trunk,
     "speed of the trunk ring's reads (whole units, the same each token, which a host cache may serve "
     "faster): auto times them on the model's files; a config alone uses the --disk speed"},
    {"--prompt", NULL, OPTS_PLAN, OPT_INT, "N", NULL, 1, 1 << 20, "512", NULL, set_plan_prompt,
     "prompt length for the prompt time"},
    {"--cores", NULL, OPTS_PLAN, OPT_INT, "N", NULL, 1, 4096, NULL, "this machine's", set_plan_cores,
     "predict for a machine with N such cores (kernel rates x N / threads)"},
    {"--rates", NULL, OPTS_MODEL | OPTS_PLAN, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "this machine's cached probe",
     set_plan_rates, "kernel rates measured elsewhere (JSON: threads, matvec_gbps and matmul32_gbps per format; "
     "disk_gbps optional), also the memory plan's speeds"},
    {"--trunk", NULL, OPTS_PLAN, OPT_TEXT, "TYPE", NULL, 0, 0, NULL, "as the weights are", set_trunk_type,
     "predict the dense weights at TYPE (Q8_0, Q6_K, Q5_K, Q4_K, Q3_K, Q2_K, Q5_0, Q4_0, IQ4_XS, MXFP4, BF16, "
     "F16, F32), sizes from the config"},
    {"--experts", NULL, OPTS_PLAN, OPT_TEXT, "TYPE", NULL, 0, 0, NULL, "as the weights are", set_expert_type,
     "predict the routed experts at TYPE, as --trunk"},
    {"--fixed", NULL, OPTS_PLAN, OPT_SIZE, "SIZE", NULL, 1, 0, NULL, "estimated as the engine counts it",
     set_plan_fixed, "the plan's fixed claim before the prompt chunk's scratch is added (k3 bench --json: "
     "plan.fixed_bytes - plan.chunk_scratch_bytes)"},
    {"--reprobe", NULL, OPTS_PLAN, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_plan_reprobe,
     "measure the kernels again instead of using the cache"},

    {"--host", NULL, OPTS_SERVE, OPT_TEXT, "ADDR", NULL, 0, 0, "127.0.0.1", NULL, set_serve_host,
     "address to listen on; any other than loopback needs --api-key-env"},
    {"--port", NULL, OPTS_SERVE, OPT_INT, "N", NULL, 0, 65535, "8080", NULL, set_serve_port,
     "port (0 = any free port, printed on stderr)"},
    {"--api-key-env", NULL, OPTS_SERVE, OPT_TEXT, "VAR", NULL, 0, 0, NULL, "none", set_serve_key_env,
     "require 'Authorization: Bearer $VAR' on every endpoint but /health"},
    {"--model-name", NULL, OPTS_SERVE, OPT_TEXT, "NAME", NULL, 0, 0, NULL, "the directory's name", set_serve_name,
     "the model id clients send"},
    {"--max-tokens", NULL, OPTS_SERVE, OPT_INT, "N", NULL, 1, 1 << 24, "4096", NULL, set_serve_max_tokens,
     "largest max_tokens a request may ask (at most the context less one)"},
    {"--queue", NULL, OPTS_SERVE, OPT_INT, "N", NULL, 0, 1024, "16", NULL, set_serve_queue,
     "requests that may wait; past it 429"},
    {"--max-body", NULL, OPTS_SERVE, OPT_SIZE, "SIZE", NULL, 1, 0, "1M", NULL, set_serve_max_body,
     "largest request body"},
    {"--state-cache", NULL, OPTS_SERVE, OPT_SIZE, "SIZE", NULL, 0, 0, "256M", "256M; 0 = off", set_serve_state_cache,
     "memory for kept prompt states (state reuse), taken out of --mem when a budget is given"},
    {"--state-cache-entries", NULL, OPTS_SERVE, OPT_INT, "N", NULL, 1, SERVE_STATE_SLOTS, "8", NULL, set_serve_entries,
     "at most N kept states"},
    {"--quiet", NULL, OPTS_SERVE, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_serve_quiet,
     "no per-request log line on stderr"},
    {"--request-timeout", NULL, OPTS_SERVE, OPT_INT, "S", NULL, 1, 3600, "30", NULL, set_serve_request_timeout,
     "a request's headers and body must arrive within S seconds (a slow client is cut off)"},

    {"--resume", NULL, OPTS_CHAT, OPT_TEXT, "ID|last", NULL, 0, 0, NULL, "a new conversation", set_chat_resume,
     "continue a stored conversation with the sampling it was left with (sampling options given here override "
     "it); last = the last conversation with a message"},
    {"--plain", NULL, OPTS_CHAT, OPT_FLAG, NULL, NULL, 0, 0, NULL, "when stdin or stdout is not a terminal, or TERM=dumb",
     set_chat_plain, "line mode instead of the full-screen UI"},
    {"--stream", NULL, OPTS_CHAT, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_chat_stream,
     "with --json: also one object per token (text, id, t_ms, ms, bytes_read, hit) as it is generated"},
    {"--lines", NULL, OPTS_CHAT, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off: a piped stdin of several lines is one message",
     set_chat_lines, "piped input is one message (or command) per line"},
    {"--raw", NULL, OPTS_CHAT, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_chat_raw,
     "line mode: every line is a message, even one starting with / (else /help, /retry ... are commands)"},

    {"--prompt", "-p", OPTS_RUN, OPT_TEXT, "TEXT", NULL, 0, 0, NULL, "none: this, --prompt-file or stdin", set_run_prompt,
     "prompt text (UTF-8); with piped stdin: this, a blank line, then the piped text"},
    {"--prompt-file", NULL, OPTS_RUN, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_run_prompt_file,
     "read the prompt from FILE (- is stdin)"},
    {"--chat", NULL, OPTS_RUN, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_run_chat,
     "wrap the prompt as one user turn in the model's chat format"},

    {"--ids", NULL, OPTS_EVAL, OPT_TEXT, "\"1 2 3\"", NULL, 0, 0, NULL, "none: this or --text-file", set_eval_ids,
     "the token ids, separated by spaces or commas"},
    {"--text-file", NULL, OPTS_EVAL, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_eval_text_file,
     "the ids of FILE's text instead (as k3 tokenize --text-file: special-token strings become their ids, no "
     "[BOS] added)"},
    {"--logits", NULL, OPTS_EVAL, OPT_TEXT, "OUT.f32", NULL, 0, 0, NULL, "none: one of the three outputs",
     set_eval_logits, "where the float32 logits [n_tokens x vocab] go"},
    {"--save-base", NULL, OPTS_EVAL, OPT_TEXT, "BASE.k3kl", NULL, 0, 0, NULL, "none", set_eval_save_base,
     "write a KL base: the ids and the logits of every position that has a next token, for --kl-base "
     "(as llama-perplexity --kl-divergence-base)"},
    {"--kl-base", NULL, OPTS_EVAL, OPT_TEXT, "BASE.k3kl", NULL, 0, 0, NULL, "none", set_eval_kl_base,
     "run the base's ids and compare with its logits: PPL of both, KL divergence (mean, median, 99%, 99.9%, max), "
     "top-1 agreement (as llama-perplexity --kl-divergence)"},

    {"--text", NULL, OPTS_TOKENIZE, OPT_TEXT, "TEXT", NULL, 0, 0, NULL, "none",
     set_tokenize_text, "print the token ids of TEXT (special-token strings such as <|im_end|> become their ids; "
     "no [BOS] is added)"},
    {"--text-file", NULL, OPTS_TOKENIZE, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_tokenize_text_file,
     "same for the contents of FILE"},
    {"--chat", NULL, OPTS_TOKENIZE, OPT_TEXT, "FILE.json", NULL, 0, 0, NULL, "none", set_tokenize_chat,
     "render a JSON array of {\"role\": ..., \"content\": ...} messages (system, user, assistant, tool) with the "
     "model's chat framing and the assistant generation prompt, and print the ids"},
    {"--decode", NULL, OPTS_TOKENIZE, OPT_TEXT, "IDS", NULL, 0, 0, NULL, "none", set_tokenize_decode,
     "print the text of IDS (separated by spaces or commas); a newline is added only when stdout is a terminal"},

    {"--help", "-h", OPTS_HISTORY, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_history_help,
     "the subcommand's usage"},
    {"--limit", NULL, OPTS_HISTORY, OPT_INT, "N", NULL, 1, 1000000, NULL, "list: all; search: 20", set_history_limit,
     "list, search: at most N"},
    {"--format", NULL, OPTS_HISTORY, OPT_CHOICE, NULL, "md|markdown|json", 0, 0, NULL, "none: export needs it",
     set_history_format, "export: Markdown, or JSON (which import reads)"},
    {"--output", "-o", OPTS_HISTORY, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "stdout", set_history_output,
     "export: a private file (mode 0600); \"~/\" is your home"},
    {"--force", "-f", OPTS_HISTORY, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_history_force,
     "export: replace an existing FILE"},
    {"--yes", "-y", OPTS_HISTORY, OPT_FLAG, NULL, NULL, 0, 0, NULL, "ask on a terminal, else refuse", set_history_yes,
     "rm: delete without asking"},
    {"--n", NULL, OPTS_HISTORY, OPT_INT, "N", NULL, 1, 100000000, NULL, "1000", set_history_n,
     "TEST ONLY: stress appends N messages"},
    {"--ids", NULL, OPTS_HISTORY, OPT_TEXT, "FILE", NULL, 0, 0, NULL, "none", set_history_ids,
     "TEST ONLY: check verifies that the ids listed in FILE are present"},

    {"--tokens", NULL, OPTS_BENCH, OPT_INT, "N", NULL, 1, 1 << 20, "32", NULL, set_bench_steps,
     "decode steps"},
    {"--prompt-tokens", NULL, OPTS_BENCH, OPT_INT, "P", NULL, 1, 1 << 20, "64", NULL, set_bench_prompt_tokens,
     "prompt length in tokens"},
    {"--no-probe", NULL, OPTS_BENCH, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_bench_no_probe,
     "skip the device measurement"},
    {"--no-draft", NULL, OPTS_BENCH, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_bench_no_draft,
     "skip the speculative decoding pass (--draft none, ngram and an oracle draft, alternating: draft_accept_rate, "
     "tokens_per_pass)"},
    {"--draft-rounds", NULL, OPTS_BENCH, OPT_INT, "N", NULL, 1, 100, "2", NULL, set_bench_draft_rounds,
     "rounds of the speculative decoding pass"},
    {"--no-token-by-token", NULL, OPTS_BENCH, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_bench_no_tbt,
     "skip the pass that reads the prompt one token at a time"},
    {"--no-warm-prompt", NULL, OPTS_BENCH, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_bench_no_warm,
     "skip the second prompt on the warmed model (prefill_warm_s_per_token: weights already in memory)"},
    {"--no-resident", NULL, OPTS_BENCH, OPT_FLAG, NULL, NULL, 0, 0, NULL, "off", set_bench_no_resident,
     "skip the fully resident decode pass"},
    {"--resident-s-per-token", NULL, OPTS_BENCH, OPT_FLOAT, "S", NULL, 0, 1e6, NULL, "measured",
     set_bench_resident_s, "use S as the resident decode time (no resident pass)"},

    {"--requests", NULL, OPTS_BENCH_REMOTE, OPT_INT, "N", NULL, 1, 100000, "5", NULL, set_bench_requests,
     "chat requests, one after another"},
    {"--tokens", NULL, OPTS_BENCH_REMOTE, OPT_INT, "N", NULL, 1, 1 << 20, "64", NULL, set_bench_tokens,
     "max_tokens of each request"},
    {"--prompt", NULL, OPTS_BENCH_REMOTE, OPT_TEXT, "TEXT", NULL, 0, 0, "Write a short paragraph about the sea.", NULL,
     set_bench_prompt, "the user message of each request"},
};
enum { N_OPTIONS = sizeof options / sizeof options[0] };

/* Parse text as row o's value and set it; -1 with a message naming the option. */
static int apply(const cli_option *o, const char *text, cli_settings *s)
{
    opt_value v = {.s = text, .i = 1};
    switch (o->type) {
    case OPT_SIZE: {
        int64_t b = k3_parse_size(text);
        if (b < (int64_t)o->lo) {
            cli_error("%s: expected a size such as 8G or 512M, got '%s'", o->name, text);
            return -1;
        }
        v.i = b;
        break;
    }
    case OPT_INT:   /* hi < 0: any non-negative 64-bit value */
        if (cli_parse_int(o->name, text, (long long)o->lo, o->hi < 0 ? INT64_MAX : (long long)o->hi, &v.i)) return -1;
        break;
    case OPT_FLOAT:
        if (cli_parse_float(o->name, text, o->lo, o->hi, &v.d)) return -1;
        break;
    case OPT_CHOICE: {
        size_t n = strlen(text);
        const char *c = o->choices;
        for (v.i = 0; c; v.i++) {
            if (!strncmp(c, text, n) && (c[n] == '|' || !c[n])) break;
            c = strchr(c, '|');
            if (c) c++;
        }
        if (!c) {
            cli_error("%s: expected %s, got '%s'", o->name, o->choices, text);
            return -1;
        }
        break;
    }
    case OPT_FLAG:
    case OPT_TEXT:
        break;
    }
    return o->set(s, &v);
}

void cli_settings_defaults(cli_settings *s)
{
    memset(s, 0, sizeof *s);
    s->pack.simulate_free_bytes = -1;      /* rows without a default: their "off" */
    for (int i = 0; i < N_OPTIONS; i++)
        if (options[i].def && apply(&options[i], options[i].def, s)) abort();   /* a bad table is a bug */
    s->sampling_given = 0;                 /* defaults are not typed */
    /* OpenMP's own variable sets the compute threads when --threads is not
     * given (as for any OpenMP program; the ThreadSanitizer run uses 1) */
    const char *omp = getenv("OMP_NUM_THREADS");
    int n = omp ? atoi(omp) : 0;
    if (n > 0) s->model.n_threads = n < 1024 ? n : 1024;
}

int cli_parse_option(int argc, char **argv, int *i, unsigned groups, cli_settings *s)
{
    const char *a = argv[*i];
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups) || (strcmp(a, o->name) && !(o->alias && !strcmp(a, o->alias)))) continue;
        if (o->type == OPT_FLAG) return apply(o, "1", s) ? -1 : 1;
        if (*i + 1 >= argc) {
            cli_error("%s needs a value", a);
            return -1;
        }
        return apply(o, argv[++*i], s) ? -1 : 1;
    }
    return 0;
}

int cli_parse_args(const char *cmd, int argc, char **argv, unsigned groups, cli_settings *s, const char **args,
                   int max_args, int *n_args)
{
    *n_args = 0;
    int options_end = 0;
    for (int i = 1; i < argc; i++) {
        if (!options_end && !strcmp(argv[i], "--")) {
            options_end = 1;
            continue;
        }
        int r = options_end ? 0 : cli_parse_option(argc, argv, &i, groups, s);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (!options_end && argv[i][0] == '-') {
            cli_error("%s: unknown option '%s' (see k3 %s --help)", cmd, argv[i], cmd);
            return -1;
        }
        if (*n_args == max_args) {
            cli_error("%s: unexpected argument '%s'", cmd, argv[i]);
            return -1;
        }
        args[(*n_args)++] = argv[i];
    }
    return 0;
}

/* "--io direct|buffered", "-n, --max-tokens N" */
static void option_label(const cli_option *o, char *buf, size_t len)
{
    const char *value = o->type == OPT_FLAG ? "" : o->value_name ? o->value_name : o->choices;
    snprintf(buf, len, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "", o->name, *value ? " " : "",
             value);
}

void cli_print_options(FILE *f, unsigned groups)
{
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups)) continue;
        char label[64];
        option_label(o, label, sizeof label);
        fprintf(f, "  %-25s %s (default %s)\n", label, o->help, o->def_note ? o->def_note : o->def);
    }
}

/* Text for a Markdown table cell: '|' escaped. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

/* One Markdown table of the rows of groups. */
static void print_markdown_table(FILE *f, unsigned groups)
{
    fprintf(f, "| option | meaning | default | range |\n|---|---|---|---|\n");
    for (int k = 0; k < N_OPTIONS; k++) {
        const cli_option *o = &options[k];
        if (!(o->group & groups)) continue;
        char label[64], range[64] = "";
        option_label(o, label, sizeof label);
        if (o->type == OPT_INT && o->hi < 0) snprintf(range, sizeof range, "%.0f to 2^63-1", o->lo);
        else if (o->type == OPT_INT) snprintf(range, sizeof range, "%.0f to %.0f", o->lo, o->hi);
        else if (o->type == OPT_FLOAT) snprintf(range, sizeof range, "%g to %g", o->lo, o->hi);
        else if (o->choices) snprintf(range, sizeof range, "%s", o->choices);
        fputs("| `", f);
        md_cell(f, label);
        fprintf(f, "` | %s | %s | ", o->help, o->def_note ? o->def_note : o->def);
        md_cell(f, range);
        fputs(" |\n", f);
    }
}

void cli_print_options_markdown(FILE *f)
{
    static const struct { const char *title; unsigned groups; } commands[] = {
        {"`k3 run`, `k3 chat` and `k3 bench --endpoint URL`: the server", OPTS_REMOTE},
        {"`k3 run [MODEL]`", OPTS_RUN},
        {"`k3 chat [MODEL]`", OPTS_CHAT},
        {"`k3 eval [MODEL]`", OPTS_EVAL},
        {"`k3 serve [MODEL]` (with the model options and --ctx)", OPTS_SERVE},
        {"`k3 plan MODEL_OR_CONFIG` (with the model options)", OPTS_PLAN},
        {"`k3 bench [MODEL]` (with the model options)", OPTS_BENCH},
        {"`k3 bench --endpoint URL`", OPTS_BENCH_REMOTE},
        {"`k3 tokenize [MODEL]` (one of)", OPTS_TOKENIZE},
        {"`k3 history SUBCOMMAND` (before or after the subcommand)", OPTS_HISTORY},
        {"`k3 gen OUT_DIR`", OPTS_GEN},
        {"`k3 pack SRC DST`", OPTS_PACK},
    };
    print_markdown_table(f, OPTS_ALL);
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        fprintf(f, "\n%s:\n\n", commands[c].title);
        print_markdown_table(f, commands[c].groups);
    }
}
