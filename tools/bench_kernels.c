/* bench_kernels.c - memory read bandwidth next to matvec/matmul throughput.
 *
 * Decoding one token of a MoE model is a stream of matrix-vector products
 * over weights far larger than the caches, so the number that matters is
 * how close k3_matvec gets to the machine's memory read bandwidth. This tool
 * measures both in one run, at 1 and 2 threads, and prints the ratio.
 *
 * The VM is noisy (shared memory bus, other jobs on the same 2 cores), so
 * every figure is the best of several repetitions, bandwidth is measured
 * before and after the matvec runs (the higher is the reference), and a
 * warning is printed when other processes were runnable.
 *
 * A second table does the same for the GGUF block types (quant_matvec.c):
 * weights per second of each type's matvec on a matrix far larger than the
 * caches, next to BF16 and F32 at the same shape and the read bandwidth.
 *
 * A third part measures the machine's fma peak (independent vector fma
 * chains in registers, 1 and 2 threads) and the prompt's matmul shapes
 * against it: a prompt is compute-bound, so its ceiling is the peak, not
 * the read bandwidth.
 *
 * A fourth (--experts) times a decode step's routed experts as the engine
 * runs them: waves of 16 of 128 experts of three 1536 x 1536 MXFP4
 * matrices (k3-16g's), one expert per thread, against the same bytes as
 * three matvecs each split over the threads, and the read bandwidth.
 *
 * usage: bench_kernels [--json] [--quick] [--gguf] [--prompt] [--experts] [--no-vnni]
 *   --json    one JSON object on stdout instead of the table
 *   --quick   smaller buffers and fewer repetitions (smoke test, ~5 s)
 *   --gguf    only the bandwidth and the GGUF block-type table
 *   --prompt  only the fma peak and the prompt-shaped matmuls (~10 s)
 *   --experts only the bandwidth and the expert waves (~10 s; text only)
 *   --no-vnni the q8 MXFP4 kernel's AVX2 path on a CPU with AVX-VNNI */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "k3.h"
#include "k3_util.h"
#include "cpu_limit.h"
#include "kernels.h"
#include "mxfp4.h"
#include "kernels_arch.h"
#include "quant_matvec.h"
#include "quant_types.h"

static int json_output;
static int quick_mode;
static int gguf_only;
static int prompt_only;
static int experts_only;

/* Wall clock in seconds. */
static double now_seconds(void) { return (double)k3_now_ns() * 1e-9; }

/* Runnable threads other than this one, from /proc/stat procs_running (which
 * counts us once; call it while single-threaded): the minimum of 5 samples
 * 10 ms apart, so a passing shell or kernel thread is not reported but a
 * CPU-bound neighbour is. -1 if unknown. */
static int other_runnable_processes(void)
{
    int fewest = -1;
    for (int sample = 0; sample < 5; sample++) {
        FILE *f = fopen("/proc/stat", "r");
        if (!f)
            return -1;
        char line[256];
        int running = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "procs_running %d", &running) == 1)
                break;
        fclose(f);
        if (running >= 1 && (fewest < 0 || running - 1 < fewest))
            fewest = running - 1;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return fewest;
}

/* 2 MiB-aligned allocation with transparent huge pages requested (fewer TLB
 * misses while streaming). Exits on failure: a benchmark has no fallback. */
static void *alloc_big(size_t bytes)
{
    size_t align = (size_t)2 << 20;
    size_t rounded = (bytes + align - 1) & ~(align - 1);
    void *p = aligned_alloc(align, rounded);
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}

/* How many copies of a `bytes` matrix the timed passes take in turn: the
 * others' bytes between two reads of one copy are at least twice the L3,
 * so no pass finds its matrix still cached. One matrix read over and over
 * does not do that once the L3 nears its size (a 256 MiB matrix in a 260
 * MiB L3: the Q8_0 matvec "read" 130% of the read bandwidth). */
static int copies_needed(size_t bytes)
{
    size_t others = 2 * k3_l3_cache_bytes();
    size_t n = 1 + (others + bytes - 1) / bytes;
    return n < 2 ? 2 : (int)n;
}

/* One arena for every set of copies, reused from matrix to matrix (its
 * first touch, slow on these VMs, is paid once). */
static uint8_t *copies_arena;
static size_t copies_arena_bytes;

/* n copies of `bytes` bytes at `data`, each 2 MiB aligned, `stride` apart,
 * in the shared arena (the previous set's copies are overwritten). */
static uint8_t *copies_make(const void *data, size_t bytes, int n, size_t *stride)
{
    size_t align = (size_t)2 << 20;
    *stride = (bytes + align - 1) & ~(align - 1);
    if (*stride * (size_t)n > copies_arena_bytes) {
        free(copies_arena);
        copies_arena_bytes = *stride * (size_t)n;
        copies_arena = alloc_big(copies_arena_bytes);
    }
    for (int i = 0; i < n; i++)
        memcpy(copies_arena + (size_t)i * *stride, data, bytes);
    return copies_arena;
}

/* Deterministic filler for weight bytes (speed matters, quality does not). */
static uint64_t fill_state = 88172645463325252ull;

/* Next 64 filler bits (xorshift). */
static uint64_t fill_next(void)
{
    fill_state ^= fill_state << 13;
    fill_state ^= fill_state >> 7;
    fill_state ^= fill_state << 17;
    return fill_state;
}

/* ------------------------------------------------------------------------ */
/* Memory read bandwidth                                                     */
/* ------------------------------------------------------------------------ */

/* Sum-reduce floats [begin, end) as one sequential stream, four independent
 * accumulators, 128 bytes per iteration: the cheapest consumer of a stream. */
static float sum_one_stream(const float *a, size_t begin, size_t end)
{
    v8f s0 = v8_zero(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = begin;
    for (; i + 32 <= end; i += 32) {
        s0 = v8_add(s0, v8_load_aligned(a + i));
        s1 = v8_add(s1, v8_load_aligned(a + i + 8));
        s2 = v8_add(s2, v8_load_aligned(a + i + 16));
        s3 = v8_add(s3, v8_load_aligned(a + i + 24));
    }
    v8f s = v8_add(v8_add(s0, s1), v8_add(s2, s3));
    float lanes[8], total = 0;
    v8_storeu(lanes, s);
    for (int k = 0; k < 8; k++)
        total += lanes[k];
    for (; i < end; i++)
        total += a[i];
    return total;
}

/* The same sum as four concurrent sequential streams (the range cut in
 * quarters), which is how k3_matvec walks its rows; on this machine more
 * streams in flight can pull more bandwidth than one. */
static float sum_four_streams(const float *a, size_t begin, size_t end)
{
    size_t quarter = ((end - begin) / 4) & ~(size_t)15;
    const float *p0 = a + begin, *p1 = p0 + quarter, *p2 = p1 + quarter, *p3 = p2 + quarter;
    v8f s0 = v8_zero(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < quarter; i += 16) {
        s0 = v8_add(s0, v8_add(v8_load_aligned(p0 + i), v8_load_aligned(p0 + i + 8)));
        s1 = v8_add(s1, v8_add(v8_load_aligned(p1 + i), v8_load_aligned(p1 + i + 8)));
        s2 = v8_add(s2, v8_add(v8_load_aligned(p2 + i), v8_load_aligned(p2 + i + 8)));
        s3 = v8_add(s3, v8_add(v8_load_aligned(p3 + i), v8_load_aligned(p3 + i + 8)));
    }
    v8f s = v8_add(v8_add(s0, s1), v8_add(s2, s3));
    float lanes[8], total = 0;
    v8_storeu(lanes, s);
    for (int k = 0; k < 8; k++)
        total += lanes[k];
    return total + sum_one_stream(a, begin + 4 * quarter, end);
}

/* One timed parallel read of the whole array; returns GB/s (1e9 bytes). */
static double read_pass_gbs(const float *a, size_t n, int threads, int four_streams, float *sink)
{
    float total = 0;
    double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t chunk = (n / nt) & ~(size_t)63;
        size_t begin = chunk * t, end = t + 1 == nt ? n : begin + chunk;
        total += four_streams ? sum_four_streams(a, begin, end) : sum_one_stream(a, begin, end);
    }
    double dt = now_seconds() - t0;
    *sink += total;
    return (double)n * sizeof(float) / dt * 1e-9;
}

typedef struct {
    float *array;
    size_t bytes;
    double first_touch_gbs;      /* writing fresh pages: page faults dominate */
    double first_read_gbs[3];    /* first read after the touch, per thread count */
    double one_stream_gbs[3];    /* best, one stream per thread */
    double four_stream_gbs[3];   /* best, four streams per thread */
    double best_gbs[3];          /* reference: best of everything measured */
} bandwidth_state;

/* Allocate and pre-fault the array (first touch is slow on this VM and is
 * reported on its own, never mixed into the read figures). */
static void bandwidth_setup(bandwidth_state *bw, size_t bytes)
{
    memset(bw, 0, sizeof *bw);
    bw->bytes = bytes;
    bw->array = alloc_big(bytes);
    size_t n = bytes / sizeof(float);
    double t0 = now_seconds();
#pragma omp parallel for schedule(static) num_threads(2)
    for (size_t i = 0; i < n; i++)
        bw->array[i] = 1.0f;
    bw->first_touch_gbs = (double)bytes / (now_seconds() - t0) * 1e-9;
}

/* `reps` timed reads per variant and thread count, alternating the variants
 * so a noisy moment does not hit only one of them; keeps the best. */
static void bandwidth_measure(bandwidth_state *bw, int reps, float *sink)
{
    size_t n = bw->bytes / sizeof(float);
    for (int threads = 1; threads <= 2; threads++) {
        if (bw->first_read_gbs[threads] == 0)
            bw->first_read_gbs[threads] = read_pass_gbs(bw->array, n, threads, 0, sink);
        for (int r = 0; r < reps; r++) {
            double one = read_pass_gbs(bw->array, n, threads, 0, sink);
            double four = read_pass_gbs(bw->array, n, threads, 1, sink);
            if (one > bw->one_stream_gbs[threads])
                bw->one_stream_gbs[threads] = one;
            if (four > bw->four_stream_gbs[threads])
                bw->four_stream_gbs[threads] = four;
        }
        double best = bw->one_stream_gbs[threads] > bw->four_stream_gbs[threads]
                      ? bw->one_stream_gbs[threads] : bw->four_stream_gbs[threads];
        if (best > bw->best_gbs[threads])
            bw->best_gbs[threads] = best;
    }
}

/* ------------------------------------------------------------------------ */
/* Matvec / matmul throughput                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
    k3_weight w;
    void *data;
    float *scales;
    size_t weight_bytes;   /* bytes streamed per pass (weights + scales) */
    size_t data_bytes;     /* bytes at data (fp8's scales are apart) */
} bench_matrix;

/* A rows x cols matrix of dtype dt filled with finite random values (fp8
 * gets 128x128 block scales like a real checkpoint). Filling touches every
 * page, so timed passes never pay first-touch faults. */
static bench_matrix matrix_make(k3_dtype dt, int64_t rows, int64_t cols)
{
    bench_matrix m;
    memset(&m, 0, sizeof m);
    if (dt == K3_DT_MXFP4) {             /* nibbles [rows][cols/2] + E8M0 scales [rows][cols/32] */
        size_t packed = (size_t)(rows * cols / 2), n_scales = (size_t)(rows * cols / 32);
        m.data = alloc_big(packed + n_scales);
        uint64_t *words = m.data;
        for (size_t i = 0; i < packed / 8; i++) words[i] = fill_next();
        uint8_t *sc = (uint8_t *)m.data + packed;
        for (size_t i = 0; i < n_scales; i++) sc[i] = (uint8_t)(120 + fill_next() % 8);
        m.weight_bytes = m.data_bytes = packed + n_scales;
        m.w.dtype = dt;
        m.w.rows = rows;
        m.w.cols = cols;
        m.w.data = m.data;
        m.w.mx_scale = sc;
        return m;
    }
    size_t bytes = (size_t)(rows * cols) * k3_dtype_size(dt);
    m.data = alloc_big(bytes);
    uint64_t *words = m.data;
    /* f16 and fp8: top exponent bit cleared (no inf/NaN, every product a
     * normal fp32). f32 and bf16 have fp32's exponent range, where random
     * exponents make most products subnormal, and those cost a microcode
     * assist each (measured: bf16 at 2.5 Gw/s instead of 19): random sign
     * and mantissa, magnitude in [0.5, 1). */
    uint64_t keep = dt == K3_DT_F32 ? 0x807FFFFF807FFFFFull : dt == K3_DT_BF16 ? 0x807F807F807F807Full
                  : dt == K3_DT_F8_E4M3 ? 0xBFBFBFBFBFBFBFBFull : 0xBFFFBFFFBFFFBFFFull;
    uint64_t set = dt == K3_DT_F32 ? 0x3F0000003F000000ull : dt == K3_DT_BF16 ? 0x3F003F003F003F00ull : 0;
    for (size_t i = 0; i < bytes / 8; i++)
        words[i] = (fill_next() & keep) | set;
    m.weight_bytes = m.data_bytes = bytes;
    if (dt == K3_DT_F8_E4M3) {
        size_t n_scales = (size_t)(((rows + 127) / 128) * ((cols + 127) / 128));
        m.scales = malloc(n_scales * sizeof(float));
        for (size_t i = 0; i < n_scales; i++)
            m.scales[i] = 1.0f / 64;
        m.weight_bytes += n_scales * sizeof(float);
    }
    m.w.dtype = dt;
    m.w.rows = rows;
    m.w.cols = cols;
    m.w.data = m.data;
    m.w.block_scale = m.scales;
    return m;
}

/* Free a matrix_make() matrix. */
static void matrix_release(bench_matrix *m)
{
    free(m->data);
    free(m->scales);
}

/* n_copies views of m's copies_make() copies (m's data stays where it
 * is): the same weights, each copy a matrix of its own. Free the array. */
static bench_matrix *matrix_copies(const bench_matrix *m, int *n_copies)
{
    *n_copies = copies_needed(m->weight_bytes);
    size_t stride;
    uint8_t *base = copies_make(m->data, m->data_bytes, *n_copies, &stride);
    bench_matrix *set = malloc(sizeof *set * (size_t)*n_copies);
    for (int i = 0; i < *n_copies; i++) {
        set[i] = *m;
        set[i].data = base + (size_t)i * stride;
        set[i].w.data = set[i].data;
        if (m->w.dtype == K3_DT_MXFP4)   /* its scales follow the nibbles */
            set[i].w.mx_scale = (uint8_t *)set[i].data + ((const uint8_t *)m->w.mx_scale - (const uint8_t *)m->data);
    }
    return set;
}

/* Best-of-reps seconds for k3_matvec (n_tokens == 1) or k3_matmul at the
 * given thread count, after one untimed warm-up call; pass r reads copy
 * (r + 1) mod n_copies of set (matrix_copies), so with enough copies no
 * pass finds its weights in the L3. */
static double time_best(const bench_matrix *set, int n_copies, const float *x, float *y, int n_tokens,
                        int threads, int reps)
{
    omp_set_num_threads(threads);
    k3_matmul(y, &set[0].w, x, n_tokens);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const bench_matrix *m = &set[(r + 1) % n_copies];
        double t0 = now_seconds();
        if (n_tokens == 1)
            k3_matvec(y, &m->w, x);
        else
            k3_matmul(y, &m->w, x, n_tokens);
        double dt = now_seconds() - t0;
        if (dt < best)
            best = dt;
    }
    return best;
}

typedef struct {
    k3_dtype dtype;
    int activations_q8;      /* MXFP4 under --activations q8 */
    int64_t rows, cols;
    double mib;
    double gbs[3], gws[3];   /* memory-bound run, per thread count */
    double cache_gws;        /* 1 thread, matrix resident in L2: compute ceiling */
} matvec_result;

typedef struct {
    k3_dtype dtype;
    int64_t rows, cols;
    int n_tokens;
    double gflops[3];
} matmul_result;

/* A matvec row's name: the dtype, "MXFP4-q8" for the q8 path. */
static const char *mv_label(const matvec_result *r)
{
    return r->activations_q8 ? "MXFP4-q8" : k3_dtype_name(r->dtype);
}

/* Parse the two options; anything else is a usage error. */
static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json_output = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick_mode = 1;
        else if (!strcmp(argv[i], "--gguf"))
            gguf_only = 1;
        else if (!strcmp(argv[i], "--prompt"))
            prompt_only = 1;
        else if (!strcmp(argv[i], "--experts"))
            experts_only = 1;
        else if (!strcmp(argv[i], "--no-vnni"))
            k3_mxfp4_q8_vnni(0);
        else {
            fprintf(stderr, "usage: bench_kernels [--json] [--quick] [--gguf] [--prompt] [--experts] [--no-vnni]\n");
            exit(2);
        }
    }
}

/* Table output. */
static void print_table(const bandwidth_state *bw, int bw_reps, const matvec_result *mv, int n_mv,
                        int mv_reps, const matmul_result *mm, int n_mm, int busy, double seconds)
{
    printf("kernels: %s\n\n", k3_kernels_name());
    printf("memory read bandwidth: sum-reduce over %zu MiB, pages pre-faulted, best of %d x 2 rounds\n",
           bw->bytes >> 20, bw_reps);
    printf("  first touch (write + page faults): %6.2f GB/s  (cold memory is this slow on this VM)\n",
           bw->first_touch_gbs);
    for (int t = 1; t <= 2; t++)
        printf("  %d thread%s: %6.2f GB/s  (1 stream/thread %.2f, 4 streams/thread %.2f, "
               "first read after touch %.2f)\n", t, t == 1 ? " " : "s", bw->best_gbs[t],
               bw->one_stream_gbs[t], bw->four_stream_gbs[t], bw->first_read_gbs[t]);
    printf("\nmatvec y = W x, best of %d passes over copies of the weights holding 2x the %zu MiB L3;\n"
           "GB/s of weights (+fp8 scales) read;\n"
           "ratio = / read bandwidth at the same thread count; L2 = 1 thread, matrix in cache\n", mv_reps,
           k3_l3_cache_bytes() >> 20);
    printf("  %-8s %11s %5s | %8s %6s %5s | %8s %6s %5s | %8s\n", "dtype", "matrix", "MiB",
           "1t GB/s", "Gw/s", "ratio", "2t GB/s", "Gw/s", "ratio", "L2 Gw/s");
    for (int i = 0; i < n_mv; i++) {
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)mv[i].rows, (long long)mv[i].cols);
        printf("  %-8s %11s %5.0f | %8.2f %6.2f %4.0f%% | %8.2f %6.2f %4.0f%% | %8.2f\n",
               mv_label(&mv[i]), shape, mv[i].mib, mv[i].gbs[1], mv[i].gws[1],
               100 * mv[i].gbs[1] / bw->best_gbs[1], mv[i].gbs[2], mv[i].gws[2],
               100 * mv[i].gbs[2] / bw->best_gbs[2], mv[i].cache_gws);
    }
    printf("\nmatmul Y = W X (prompt processing): GFLOP/s = 2 rows cols T / time, best of several\n");
    printf("  %-8s %11s %4s | %10s | %10s\n", "dtype", "matrix", "T", "1t GFLOP/s", "2t GFLOP/s");
    for (int i = 0; i < n_mm; i++) {
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)mm[i].rows, (long long)mm[i].cols);
        printf("  %-8s %11s %4d | %10.1f | %10.1f\n", k3_dtype_name(mm[i].dtype), shape,
               mm[i].n_tokens, mm[i].gflops[1], mm[i].gflops[2]);
    }
    if (busy > 0)
        printf("\nWARNING: %d other process(es) were runnable during the run: numbers are low/noisy\n", busy);
    printf("\ntotal %.1f s\n", seconds);
}

/* JSON output (one object), up to the GGUF table's value, which the caller
 * prints (gguf_print_json) before closing the object. */
static void print_json(const bandwidth_state *bw, const matvec_result *mv, int n_mv,
                       const matmul_result *mm, int n_mm, int busy, double seconds)
{
    printf("{\n  \"kernels\": \"%s\",\n", k3_kernels_name());
    printf("  \"bandwidth\": {\"bytes\": %zu, \"first_touch_gbs\": %.2f, \"read_gbs_1t\": %.2f, "
           "\"read_gbs_2t\": %.2f, \"one_stream_gbs_1t\": %.2f, \"one_stream_gbs_2t\": %.2f, "
           "\"four_stream_gbs_1t\": %.2f, \"four_stream_gbs_2t\": %.2f, \"first_read_gbs_1t\": %.2f, "
           "\"first_read_gbs_2t\": %.2f},\n  \"matvec\": [",
           bw->bytes, bw->first_touch_gbs, bw->best_gbs[1], bw->best_gbs[2], bw->one_stream_gbs[1],
           bw->one_stream_gbs[2], bw->four_stream_gbs[1], bw->four_stream_gbs[2],
           bw->first_read_gbs[1], bw->first_read_gbs[2]);
    for (int i = 0; i < n_mv; i++)
        printf("%s\n    {\"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"gbs_1t\": %.2f, "
               "\"gws_1t\": %.3f, \"ratio_1t\": %.3f, \"gbs_2t\": %.2f, \"gws_2t\": %.3f, "
               "\"ratio_2t\": %.3f, \"cache_gws_1t\": %.3f}", i ? "," : "",
               mv_label(&mv[i]), (long long)mv[i].rows, (long long)mv[i].cols,
               mv[i].gbs[1], mv[i].gws[1], mv[i].gbs[1] / bw->best_gbs[1], mv[i].gbs[2],
               mv[i].gws[2], mv[i].gbs[2] / bw->best_gbs[2], mv[i].cache_gws);
    printf("\n  ],\n  \"matmul\": [");
    for (int i = 0; i < n_mm; i++)
        printf("%s\n    {\"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"tokens\": %d, "
               "\"gflops_1t\": %.2f, \"gflops_2t\": %.2f}", i ? "," : "", k3_dtype_name(mm[i].dtype),
               (long long)mm[i].rows, (long long)mm[i].cols, mm[i].n_tokens, mm[i].gflops[1],
               mm[i].gflops[2]);
    printf("\n  ],\n  \"other_runnable\": %d,\n  \"seconds\": %.1f,\n  \"gguf\": ", busy, seconds);
}

/* ------------------------------------------------------------------------ */
/* GGUF block types (quant_matvec.c)                                         */
/* ------------------------------------------------------------------------ */

/* Byte offsets of the f16 scales (d, and dmin where the type has one) inside
 * a block of each type, -1 for none: the filler writes finite scales there
 * so that no product overflows or goes subnormal (a subnormal costs a
 * microcode assist and would measure the assist, not the kernel). */
static void gguf_scale_offsets(uint32_t ggml_id, int offsets[2])
{
    offsets[0] = offsets[1] = -1;
    switch (ggml_id) {
    case K3_GGML_Q8_0: case K3_GGML_Q4_0: case K3_GGML_Q5_0: case K3_GGML_IQ4_NL: case K3_GGML_IQ4_XS:
    case K3_GGML_IQ2_XXS: case K3_GGML_IQ2_XS: case K3_GGML_IQ2_S: case K3_GGML_IQ3_XXS: case K3_GGML_IQ3_S:
    case K3_GGML_IQ1_S:
        offsets[0] = 0; break;
    case K3_GGML_Q4_K: case K3_GGML_Q5_K: offsets[0] = 0; offsets[1] = 2; break;
    case K3_GGML_Q2_K: offsets[0] = 80; offsets[1] = 82; break;
    case K3_GGML_Q3_K: offsets[0] = 108; break;
    case K3_GGML_Q6_K: offsets[0] = 208; break;
    default: break;
    }
}

/* A rows x cols matrix of type t: random bytes, scales in +-[2^-6, 2^-2]
 * (f16), E8M0 exponents 120..127 (MXFP4). Filling touches every page. */
static void *gguf_matrix_make(const k3_quant_type *t, int64_t rows, int64_t cols, size_t *bytes)
{
    *bytes = (size_t)k3_quant_row_bytes(t, cols) * (size_t)rows;
    uint8_t *data = alloc_big(*bytes);
    for (size_t i = 0; i + 8 <= *bytes; i += 8) {
        uint64_t v = fill_next();
        memcpy(data + i, &v, 8);
    }
    int offsets[2];
    gguf_scale_offsets(t->ggml_id, offsets);
    for (size_t b = 0; b < *bytes / t->block_bytes; b++) {
        uint8_t *block = data + b * t->block_bytes;
        if (t->ggml_id == K3_GGML_MXFP4)
            block[0] = (uint8_t)(120 + fill_next() % 8);
        if (t->ggml_id == K3_GGML_IQ1_M) {   /* its f16 d is the top nibbles of the u16s at 48, 50, 52, 54 */
            uint16_t half = (uint16_t)((fill_next() & 0x83FF) | (uint16_t)((9 + fill_next() % 5) << 10));
            for (int k = 0; k < 4; k++)
                block[49 + 2 * k] = (uint8_t)((block[49 + 2 * k] & 0x0F) | ((half >> (4 * k)) & 0x0F) << 4);
        }
        for (int k = 0; k < 2; k++)
            if (offsets[k] >= 0) {
                uint16_t half = (uint16_t)((fill_next() & 0x83FF) | (uint16_t)((9 + fill_next() % 5) << 10));
                block[offsets[k]] = (uint8_t)half;
                block[offsets[k] + 1] = (uint8_t)(half >> 8);
            }
    }
    return data;
}

typedef struct {
    const char *name;
    double bytes_per_weight;
    double gws[3], gbs[3];   /* per thread count */
    double cpu_gws;          /* 1 thread, weights per second of the thread's CPU time */
    double cache_gws;        /* 1 thread, 64 x 2048 in L2: the compute ceiling */
    double matmul_gflops[3]; /* the batched path, GGUF_MATMUL_TOKENS tokens, per thread count */
    double q8_gws[3];        /* matvec under --activations q8, 0 where the type has no q8 kernel */
    double q8_cpu_gws;       /* the q8 matvec, 1 thread, weights per second of CPU time */
    double q8_cache_gws;     /* the q8 matvec, 1 thread, 64 x 2048 in L2 */
} gguf_result;

/* The prompt column: tokens per k3_quant_matmul / k3_matmul call, and the
 * matrix (rows x 4096; 1024 rows quick). */
#define GGUF_MATMUL_TOKENS 32

/* The calling thread's CPU time in seconds (a 1-thread OpenMP team runs
 * on it): on a shared machine a 1-thread kernel's rate per CPU second is
 * what it does when it runs. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best-of-reps G weights/s and GB/s of k3_quant_matvec over the matrix, at
 * 1 and 2 threads, after one untimed call: n_copies copies of it, `stride`
 * bytes apart from `data` (copies_make), taken in turn as time_best does. */
static void gguf_time(gguf_result *res, const k3_quant_type *t, const uint8_t *data, size_t stride, int n_copies,
                      size_t bytes, int64_t rows, int64_t cols, const float *x, float *y, int reps)
{
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        k3_quant_matvec(y, t, data, rows, cols, x);
        double best = 1e30, best_cpu = 1e30;
        for (int r = 0; r < reps; r++) {
            const uint8_t *copy = data + (size_t)((r + 1) % n_copies) * stride;
            double t0 = now_seconds(), cpu0 = cpu_seconds();
            k3_quant_matvec(y, t, copy, rows, cols, x);
            double dt = now_seconds() - t0, cpu = cpu_seconds() - cpu0;
            if (dt < best)
                best = dt;
            if (cpu < best_cpu)
                best_cpu = cpu;
        }
        res->gws[threads] = (double)(rows * cols) / best * 1e-9;
        res->gbs[threads] = (double)bytes / best * 1e-9;
        if (threads == 1)
            res->cpu_gws = (double)(rows * cols) / best_cpu * 1e-9;
    }
}

/* 1-thread G weights/s of a 64 x 2048 matrix (in L2) of type t, or of the
 * plain dtype when t is NULL: best of 5 rounds of 200 calls, per second of
 * the thread's CPU time (the compute ceiling, whatever else runs on a
 * shared machine). */
static double gguf_cache_gws(const k3_quant_type *t, k3_dtype plain, const float *x, float *y)
{
    const int64_t rows = 64, cols = 2048;
    size_t bytes;
    bench_matrix m;
    memset(&m, 0, sizeof m);
    void *data = NULL;
    if (t) data = gguf_matrix_make(t, rows, cols, &bytes);
    else m = matrix_make(plain, rows, cols);
    omp_set_num_threads(1);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = cpu_seconds();
        for (int k = 0; k < 200; k++) {
            if (t) k3_quant_matvec(y, t, data, rows, cols, x);
            else k3_matvec(y, &m.w, x);
        }
        double dt = (cpu_seconds() - t0) / 200;
        if (dt < best)
            best = dt;
    }
    if (t) free(data);
    else matrix_release(&m);
    return (double)(rows * cols) / best * 1e-9;
}

/* GFLOP/s (2 rows cols tokens / time) of the batched product of
 * GGUF_MATMUL_TOKENS tokens, best of reps, at 1 and 2 threads: the block
 * type t through k3_quant_matmul, or the plain dtype when t is NULL. */
static void gguf_matmul_gflops(const k3_quant_type *t, k3_dtype plain, int64_t rows, const float *X, float *Y,
                               int reps, double gflops[3])
{
    const int64_t cols = 4096;
    size_t bytes;
    bench_matrix m;
    memset(&m, 0, sizeof m);
    void *data = NULL;
    if (t) data = gguf_matrix_make(t, rows, cols, &bytes);
    else m = matrix_make(plain, rows, cols);
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        double best = 1e30;
        for (int r = 0; r <= reps; r++) {   /* the first call is the warm-up */
            double t0 = now_seconds();
            if (t) k3_quant_matmul(Y, t, data, rows, cols, X, GGUF_MATMUL_TOKENS);
            else k3_matmul(Y, &m.w, X, GGUF_MATMUL_TOKENS);
            double dt = now_seconds() - t0;
            if (r > 0 && dt < best)
                best = dt;
        }
        gflops[threads] = 2.0 * (double)(rows * cols) * GGUF_MATMUL_TOKENS / best * 1e-9;
    }
    if (t) free(data);
    else matrix_release(&m);
}

/* The GGUF table: BF16 and F32 (k3_matvec) and every block type k3 reads
 * (k3_quant_matvec) at one shape, rows x cols weights; the read bandwidth
 * is measured again at the end and the best figure is the reference; and
 * the batched product of GGUF_MATMUL_TOKENS tokens at rows x 4096. x and y
 * hold GGUF_MATMUL_TOKENS x 4096 floats at least. Returns the number of
 * rows filled in res (BF16 first, F32 second). */
static int gguf_measure(gguf_result *res, int max_results, int64_t rows, int64_t cols, const float *x, float *y,
                        int reps, bandwidth_state *bw, int bw_reps, float *sink)
{
    const int64_t matmul_rows = quick_mode ? 1024 : 4096;
    int n = 0;
    static const k3_dtype plain[] = {K3_DT_BF16, K3_DT_F32};
    for (int i = 0; i < 2; i++) {
        bench_matrix m = matrix_make(plain[i], rows, cols);
        int n_copies;
        bench_matrix *set = matrix_copies(&m, &n_copies);
        gguf_result *r = &res[n++];
        memset(r, 0, sizeof *r);
        r->name = k3_dtype_name(plain[i]);
        r->bytes_per_weight = (double)k3_dtype_size(plain[i]);
        for (int threads = 1; threads <= 2; threads++) {
            double dt_s = time_best(set, n_copies, x, y, 1, threads, reps);
            r->gws[threads] = (double)(rows * cols) / dt_s * 1e-9;
            r->gbs[threads] = (double)m.weight_bytes / dt_s * 1e-9;
        }
        omp_set_num_threads(1);
        double best_cpu = 1e30;
        for (int rep = 0; rep < reps; rep++) {
            double cpu0 = cpu_seconds();
            k3_matvec(y, &set[rep % n_copies].w, x);
            double cpu = cpu_seconds() - cpu0;
            if (cpu < best_cpu)
                best_cpu = cpu;
        }
        r->cpu_gws = (double)(rows * cols) / best_cpu * 1e-9;
        free(set);
        matrix_release(&m);
        r->cache_gws = gguf_cache_gws(NULL, plain[i], x, y);
        gguf_matmul_gflops(NULL, plain[i], matmul_rows, x, y, 2, r->matmul_gflops);
    }
    for (int i = 0; i < k3_quant_type_count() && n < max_results; i++) {
        const k3_quant_type *t = k3_quant_type_at(i);
        if (t->block_elems == 1)   /* F32/F16/BF16 files load as plain dtypes */
            continue;
        size_t bytes, stride;
        void *data = gguf_matrix_make(t, rows, cols, &bytes);
        const int n_copies = copies_needed(bytes);
        const uint8_t *copies = copies_make(data, bytes, n_copies, &stride);
        gguf_result *r = &res[n++];
        memset(r, 0, sizeof *r);
        r->name = t->name;
        r->bytes_per_weight = (double)t->block_bytes / t->block_elems;
        gguf_time(r, t, copies, stride, n_copies, bytes, rows, cols, x, y, reps);
        if (k3_quant_q8_available(t)) {   /* the q8 activation path on the same matrix */
            gguf_result exact = *r;
            k3_kernels_set_activations_q8(1);
            gguf_time(r, t, copies, stride, n_copies, bytes, rows, cols, x, y, reps);
            r->q8_cpu_gws = r->cpu_gws;
            r->q8_cache_gws = gguf_cache_gws(t, K3_DT_F32, x, y);
            k3_kernels_set_activations_q8(0);
            for (int threads = 1; threads <= 2; threads++) {
                r->q8_gws[threads] = r->gws[threads];
                r->gws[threads] = exact.gws[threads];
                r->gbs[threads] = exact.gbs[threads];
            }
            r->cpu_gws = exact.cpu_gws;
        }
        free(data);
        r->cache_gws = gguf_cache_gws(t, K3_DT_F32, x, y);
        gguf_matmul_gflops(t, K3_DT_F32, matmul_rows, x, y, 2, r->matmul_gflops);
    }
    bandwidth_measure(bw, bw_reps, sink);
    return n;
}

/* The GGUF table as text: per type and thread count, G weights/s, GB/s of
 * weights read, that as a fraction of the read bandwidth, and weights/s
 * against BF16's (res[0]). */
static void gguf_print(const gguf_result *res, int n, int64_t rows, int64_t cols, int reps,
                       const bandwidth_state *bw)
{
    printf("\nGGUF block types: matvec y = W x, %lldx%lld weights, best of %d passes over copies\n"
           "holding 2x the %zu MiB L3;\n"
           "GB/s of weights read, %% of read bandwidth (1t %.2f GB/s, 2t %.2f GB/s), weights/s vs BF16;\n"
           "L2 = 1 thread, 64x2048 in cache, per CPU second (the compute ceiling); mm = the batched\n"
           "product, %d tokens, %lldx4096, GFLOP/s at 1 and 2 threads; q8 = the matvec under\n"
           "--activations q8: Gw/s, %% of read bandwidth, cpu and L2 Gw/s at 1 thread, Gw/s and %% of\n"
           "read bandwidth at 2 threads;\n"
           "cpu = 1 thread, weights per second of CPU time (what it does when it runs, on a shared machine)\n",
           (long long)rows, (long long)cols, reps, k3_l3_cache_bytes() >> 20, bw->best_gbs[1], bw->best_gbs[2], GGUF_MATMUL_TOKENS,
           quick_mode ? 1024LL : 4096LL);
    printf("  %-7s %6s | %6s %6s %5s %6s %6s | %6s %6s %5s %6s | %7s | %7s %7s | %6s %5s %6s %6s | %6s %5s\n",
           "type", "B/w", "1t Gw/s", "GB/s", "bw", "vsBF16", "cpu", "2t Gw/s", "GB/s", "bw", "vsBF16", "L2 Gw/s",
           "mm 1t", "mm 2t", "q8 1t", "bw", "cpu", "L2", "q8 2t", "bw");
    for (int i = 0; i < n; i++)
        printf("  %-7s %6.3f | %7.2f %6.2f %4.0f%% %5.2fx %6.2f | %7.2f %6.2f %4.0f%% %5.2fx | %7.2f | %7.1f %7.1f |"
               " %6.2f %4.0f%% %6.2f %6.2f | %6.2f %4.0f%%\n", res[i].name,
               res[i].bytes_per_weight, res[i].gws[1], res[i].gbs[1], 100 * res[i].gbs[1] / bw->best_gbs[1],
               res[i].gws[1] / res[0].gws[1], res[i].cpu_gws, res[i].gws[2], res[i].gbs[2],
               100 * res[i].gbs[2] / bw->best_gbs[2],
               res[i].gws[2] / res[0].gws[2], res[i].cache_gws, res[i].matmul_gflops[1], res[i].matmul_gflops[2],
               res[i].q8_gws[1], 100 * res[i].q8_gws[1] * res[i].bytes_per_weight / bw->best_gbs[1],
               res[i].q8_cpu_gws, res[i].q8_cache_gws, res[i].q8_gws[2],
               100 * res[i].q8_gws[2] * res[i].bytes_per_weight / bw->best_gbs[2]);
}

/* The GGUF table as a JSON array value. */
static void gguf_print_json(const gguf_result *res, int n, const bandwidth_state *bw)
{
    printf("[");
    for (int i = 0; i < n; i++)
        printf("%s\n    {\"type\": \"%s\", \"bytes_per_weight\": %.4f, \"gws_1t\": %.3f, \"gbs_1t\": %.2f, "
               "\"ratio_1t\": %.3f, \"cpu_gws_1t\": %.3f, \"gws_2t\": %.3f, \"gbs_2t\": %.2f, \"ratio_2t\": %.3f, "
               "\"cache_gws_1t\": %.3f, "
               "\"matmul_gflops_1t\": %.2f, \"matmul_gflops_2t\": %.2f, \"q8_gws_1t\": %.3f, \"q8_gws_2t\": %.3f, "
               "\"q8_cpu_gws_1t\": %.3f, \"q8_cache_gws_1t\": %.3f}",
               i ? "," : "", res[i].name, res[i].bytes_per_weight, res[i].gws[1], res[i].gbs[1],
               res[i].gbs[1] / bw->best_gbs[1], res[i].cpu_gws, res[i].gws[2], res[i].gbs[2],
               res[i].gbs[2] / bw->best_gbs[2], res[i].cache_gws, res[i].matmul_gflops[1], res[i].matmul_gflops[2], res[i].q8_gws[1], res[i].q8_gws[2],
               res[i].q8_cpu_gws, res[i].q8_cache_gws);
    printf("\n  ]");
}

/* Bandwidth, then matvec per dtype (with a bandwidth re-check), then matmul;
 * prints everything at the end so the table is one block. */
/* ------------------------------------------------------------------------ */
/* FMA peak and the prompt's matmul shapes                                   */
/* ------------------------------------------------------------------------ */

/* Independent accumulator chains of the peak loop: more than the fma
 * latency x fma ports of any current core (4-5 cycles x 2), fewer than the
 * 16 vector registers. */
#define FMA_PEAK_CHAINS 12

/* Vector fmas of `iterations` rounds over FMA_PEAK_CHAINS register chains
 * (no memory operand): the most the core can multiply-add. Returns a value
 * derived from every chain so none is optimised away. */
static float fma_peak_loop(int64_t iterations, float seed)
{
    v8f acc[FMA_PEAK_CHAINS];
    const v8f a = v8_set1(0.999999f), b = v8_set1(1e-7f * seed);
    for (int i = 0; i < FMA_PEAK_CHAINS; i++)
        acc[i] = v8_set1(seed + (float)i);
    for (int64_t k = 0; k < iterations; k++)
#pragma GCC unroll 12
        for (int i = 0; i < FMA_PEAK_CHAINS; i++)
            acc[i] = v8_fma(acc[i], a, b);
    v8f sum = acc[0];
    for (int i = 1; i < FMA_PEAK_CHAINS; i++)
        sum = v8_add(sum, acc[i]);
    return v8_hsum(sum);
}

/* The machine's fma peak with `threads` threads, in G multiply-adds per
 * second of each thread's own CPU time, summed over the threads (one vector
 * fma = 8): on a shared machine the wall clock measures the other jobs too.
 * Best of a few rounds of ~0.1 s. */
static double fma_peak_gmacs(int threads, float *sink)
{
    const int64_t iterations = quick_mode ? 2000000 : 8000000;
    double best = 0;
    for (int round = 0; round < 5; round++) {
        double rate = 0;
        float part = 0;
#pragma omp parallel num_threads(threads) reduction(+ : part, rate)
        {
            double t0 = cpu_seconds();
            part += fma_peak_loop(iterations, (float)(omp_get_thread_num() + 1));
            rate += (double)iterations * FMA_PEAK_CHAINS * 8 / (cpu_seconds() - t0) * 1e-9;
        }
        *sink += part;
        if (rate > best)
            best = rate;
    }
    return best;
}

/* CPU time of the whole process (all threads) in seconds. */
static double process_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The matmul shapes a K3-shaped prompt spends its time in (k3-sim: routed
 * MXFP4 experts of 512 x 1536 with ~16 of a 256-token chunk's tokens each,
 * run one expert per thread; the bf16 shared experts and attention
 * projections over the whole chunk, all threads). */
static const struct {
    const char *what;
    k3_dtype dt;
    int64_t rows, cols;
    int n_tokens;
    int threads;   /* 1: one expert per thread (the other core runs another) */
    int q8;        /* under --activations q8 (int8 dot products) */
} prompt_cases[] = {
    {"expert gate/up", K3_DT_MXFP4, 1536, 512, 16, 1, 0},
    {"expert down", K3_DT_MXFP4, 512, 1536, 16, 1, 0},
    {"expert gate/up", K3_DT_MXFP4, 1536, 512, 48, 1, 0},
    {"expert gate/up", K3_DT_MXFP4, 1536, 512, 16, 1, 1},
    {"expert down", K3_DT_MXFP4, 512, 1536, 16, 1, 1},
    {"expert gate/up", K3_DT_MXFP4, 1536, 512, 48, 1, 1},
    {"shared gate/up", K3_DT_BF16, 3072, 1024, 256, 2, 0},
    {"shared down", K3_DT_BF16, 1024, 3072, 256, 2, 0},
    {"attention proj", K3_DT_BF16, 1024, 1024, 256, 2, 0},
};
enum { N_PROMPT_CASES = sizeof prompt_cases / sizeof prompt_cases[0] };

/* A prompt case's name for its path: the dtype, "MXFP4-q8" under q8. */
static const char *prompt_label(int i)
{
    return prompt_cases[i].q8 ? "MXFP4-q8" : k3_dtype_name(prompt_cases[i].dt);
}

/* Each prompt shape's G multiply-adds per second of CPU time (the process's:
 * OpenMP workers spinning at a barrier count, as they cost a core) and of
 * wall time, best of 5 rounds of ~0.5 G multiply-adds. */
static void prompt_measure(double *gmacs, double *gmacs_wall, const float *x, float *y)
{
    for (int i = 0; i < N_PROMPT_CASES; i++) {
        bench_matrix m = matrix_make(prompt_cases[i].dt, prompt_cases[i].rows, prompt_cases[i].cols);
        const double macs = (double)prompt_cases[i].rows * prompt_cases[i].cols * prompt_cases[i].n_tokens;
        int calls = (int)(5e8 / macs) + 1;
        omp_set_num_threads(prompt_cases[i].threads);
        k3_kernels_set_activations_q8(prompt_cases[i].q8);
        k3_matmul(y, &m.w, x, prompt_cases[i].n_tokens);
        double best = 1e30, best_wall = 1e30;
        for (int round = 0; round < (quick_mode ? 2 : 5); round++) {
            double t0 = now_seconds(), c0 = process_cpu_seconds();
            for (int k = 0; k < calls; k++)
                k3_matmul(y, &m.w, x, prompt_cases[i].n_tokens);
            double dt = (process_cpu_seconds() - c0) / calls, dt_wall = (now_seconds() - t0) / calls;
            if (dt < best)
                best = dt;
            if (dt_wall < best_wall)
                best_wall = dt_wall;
        }
        gmacs[i] = macs / best * 1e-9;
        gmacs_wall[i] = macs / best_wall * 1e-9;
        matrix_release(&m);
    }
    k3_kernels_set_activations_q8(0);
    omp_set_num_threads(2);
}

/* --prompt: the fma peak at 1 and 2 threads, then each prompt shape's rate
 * per CPU second and its fraction of one core's peak (and the wall rate). */
static void prompt_report(const float *x, float *y, float *sink)
{
    double peak[3] = {0, fma_peak_gmacs(1, sink), fma_peak_gmacs(2, sink)};
    double gmacs[N_PROMPT_CASES], gmacs_wall[N_PROMPT_CASES];
    prompt_measure(gmacs, gmacs_wall, x, y);
    if (json_output) {
        printf("{\n  \"kernels\": \"%s\",\n  \"fma_peak_gmacs_1t\": %.2f,\n  \"fma_peak_gmacs_2t\": %.2f,\n"
               "  \"prompt\": [", k3_kernels_name(), peak[1], peak[2]);
        for (int i = 0; i < N_PROMPT_CASES; i++)
            printf("%s\n    {\"what\": \"%s\", \"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"tokens\": %d, "
                   "\"threads\": %d, \"gmacs_per_cpu_s\": %.2f, \"of_core_peak\": %.3f, \"gmacs_wall\": %.2f}",
                   i ? "," : "", prompt_cases[i].what, prompt_label(i),
                   (long long)prompt_cases[i].rows, (long long)prompt_cases[i].cols, prompt_cases[i].n_tokens,
                   prompt_cases[i].threads, gmacs[i], gmacs[i] / peak[1], gmacs_wall[i]);
        printf("\n  ]\n}\n");
        return;
    }
    printf("kernels: %s\n", k3_kernels_name());
    printf("fma peak (%d register chains, no memory), G multiply-adds per CPU second: 1 thread %.1f, "
           "2 threads %.1f (summed)\n", FMA_PEAK_CHAINS, peak[1], peak[2]);
    printf("prompt matmul shapes (k3_matmul, best of 5): G multiply-adds per CPU second (all threads'),\n"
           "its fraction of one core's peak, and per wall second\n");
    printf("  %-15s %-8s %11s %4s %3s | %9s %6s | %8s\n", "what", "dtype", "matrix", "T", "thr", "G mac/cpu",
           "peak", "G mac/s");
    for (int i = 0; i < N_PROMPT_CASES; i++) {
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)prompt_cases[i].rows, (long long)prompt_cases[i].cols);
        printf("  %-15s %-8s %11s %4d %3d | %9.1f %5.0f%% | %8.1f\n", prompt_cases[i].what,
               prompt_label(i), shape, prompt_cases[i].n_tokens, prompt_cases[i].threads,
               gmacs[i], 100 * gmacs[i] / peak[1], gmacs_wall[i]);
    }
}

/* ------------------------------------------------------------------------ */
/* Decode's expert waves                                                     */
/* ------------------------------------------------------------------------ */

enum { EXPERT_POOL_MIN = 128, EXPERT_WAVE = 16, EXPERT_WIDTH = 1536 };

/* Seconds of one wave: the experts of ids[] (gate, up, down: three
 * matrices each) either one per thread (schedule(dynamic, 1), as
 * run_routed_experts) or each matrix split over the threads (k3_matvec). */
static double expert_wave_seconds(const bench_matrix *pool, const int *ids, const float *x, float *y,
                                  int one_per_thread)
{
    double t0 = now_seconds();
    if (one_per_thread) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int j = 0; j < EXPERT_WAVE; j++) {
            float *out = y + (size_t)omp_get_thread_num() * 3 * EXPERT_WIDTH;
            for (int k = 0; k < 3; k++)
                k3_matvec_rows(out + k * EXPERT_WIDTH, &pool[ids[j] * 3 + k].w, x, 0, EXPERT_WIDTH);
        }
    } else {
        for (int j = 0; j < EXPERT_WAVE; j++)
            for (int k = 0; k < 3; k++)
                k3_matvec(y + k * EXPERT_WIDTH, &pool[ids[j] * 3 + k].w, x);
    }
    return now_seconds() - t0;
}

/* The expert table: GB/s of expert weights a wave reads, best of `waves`
 * waves, per path (exact, q8), thread count and way of splitting; next to
 * the read bandwidth and the big-matrix matvec's figure would be
 * (--experts prints only this). A wave is 16 distinct experts; the waves
 * walk a shuffled pool in turn, and the pool holds twice the L3 and more,
 * so a wave's experts were last read more than two L3s of bytes ago (no
 * cache hits, as a real model's 1.4 GB of experts a token). */
static void experts_report(bandwidth_state *bw, int bw_reps, float *sink)
{
    const size_t expert_bytes = 3 * ((size_t)EXPERT_WIDTH * EXPERT_WIDTH / 2 + (size_t)EXPERT_WIDTH * EXPERT_WIDTH / 32);
    int n_pool = (int)((2 * k3_l3_cache_bytes() + expert_bytes - 1) / expert_bytes) + EXPERT_WAVE;
    if (n_pool < EXPERT_POOL_MIN)
        n_pool = EXPERT_POOL_MIN;
    bench_matrix *pool = malloc(sizeof *pool * (size_t)n_pool * 3);
    int *order = malloc(sizeof *order * (size_t)n_pool);
    for (int i = 0; i < n_pool * 3; i++)
        pool[i] = matrix_make(K3_DT_MXFP4, EXPERT_WIDTH, EXPERT_WIDTH);
    for (int i = 0; i < n_pool; i++)
        order[i] = i;
    for (int i = n_pool - 1; i > 0; i--) {   /* Fisher-Yates */
        int j = (int)(fill_next() % (uint64_t)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    int next = 0;   /* the pool's next expert in the shuffled walk */
    const double wave_bytes = (double)pool[0].weight_bytes * 3 * EXPERT_WAVE;
    float *x = malloc(EXPERT_WIDTH * sizeof(float)), *y = malloc((size_t)8 * 3 * EXPERT_WIDTH * sizeof(float));
    for (int c = 0; c < EXPERT_WIDTH; c++)
        x[c] = (float)((fill_next() >> 40) & 0xFFFF) / 65536.0f - 0.5f;
    const int waves = quick_mode ? 8 : 40;
    printf("\nexpert waves: %d of %d experts (%.0f MiB; L3 %zu MiB), 3 x %dx%d MXFP4 each (%.2f MiB an expert),\n"
           "best of %d waves; GB/s of expert weights; ratio = / read bandwidth at the same thread count\n",
           EXPERT_WAVE, n_pool, n_pool * 3 * pool[0].weight_bytes / 1048576.0, k3_l3_cache_bytes() >> 20, EXPERT_WIDTH,
           EXPERT_WIDTH, 3 * pool[0].weight_bytes / 1048576.0, waves);
    double rows_gbs[2][2][3] = {{{0}}};   /* [q8][one_per_thread][threads] */
    for (int q8 = 0; q8 <= 1; q8++)
        for (int one_per_thread = 1; one_per_thread >= 0; one_per_thread--) {
            k3_kernels_set_activations_q8(q8);
            double *gbs = rows_gbs[q8][one_per_thread];
            for (int threads = 1; threads <= 2; threads++) {
                omp_set_num_threads(threads);
                double best = 1e30;
                for (int w = 0; w < waves; w++) {
                    int ids[EXPERT_WAVE];   /* distinct (n_pool >= 16), as a token's top-16 */
                    for (int i = 0; i < EXPERT_WAVE; i++) {
                        ids[i] = order[next];
                        next = (next + 1) % n_pool;
                    }
                    double t = expert_wave_seconds(pool, ids, x, y, one_per_thread);
                    if (t < best) best = t;
                }
                gbs[threads] = wave_bytes / best * 1e-9;
            }
        }
    /* the ratios' reference: the best read, before or after the waves */
    bandwidth_measure(bw, bw_reps, sink);
    printf("  path      split                 |  1t GB/s ratio |  2t GB/s ratio\n");
    for (int q8 = 0; q8 <= 1; q8++)
        for (int one_per_thread = 1; one_per_thread >= 0; one_per_thread--) {
            const double *gbs = rows_gbs[q8][one_per_thread];
            printf("  %-8s  %-21s | %8.2f %4.0f%% | %8.2f %4.0f%%\n", q8 ? "MXFP4-q8" : "MXFP4",
                   one_per_thread ? "one expert a thread" : "each matrix split", gbs[1],
                   100 * gbs[1] / bw->best_gbs[1], gbs[2], 100 * gbs[2] / bw->best_gbs[2]);
        }
    k3_kernels_set_activations_q8(0);
    omp_set_num_threads(2);
    *sink += y[0];
    for (int i = 0; i < n_pool * 3; i++)
        matrix_release(&pool[i]);
    free(pool);
    free(order);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    double t_start = now_seconds();
    float sink = 0;
    int busy = other_runnable_processes();
    if (prompt_only) {
        float *xp = malloc((size_t)256 * 3072 * sizeof(float)), *yp = malloc((size_t)256 * 3072 * sizeof(float));
        for (int64_t i = 0; i < 256 * 3072; i++)
            xp[i] = (float)((fill_next() >> 40) & 0xFFFF) / 65536.0f - 0.5f;
        prompt_report(xp, yp, &sink);
        if (!json_output)
            printf("\ntotal %.1f s%s\n", now_seconds() - t_start,
                   busy > 0 ? " (WARNING: other processes were runnable: figures low/noisy)" : "");
        if (sink == 12345.0f)
            fprintf(stderr, "%g\n", (double)sink);
        free(xp);
        free(yp);
        return 0;
    }
    /* the read probe: 1 GiB and at least 4x the L3 (256 MiB quick) */
    size_t bw_bytes = quick_mode ? (size_t)256 << 20 : (size_t)1 << 30;
    if (!quick_mode && bw_bytes < 4 * k3_l3_cache_bytes())
        bw_bytes = 4 * k3_l3_cache_bytes();
    int bw_reps = quick_mode ? 2 : 4;
    int mv_reps = quick_mode ? 3 : 8;
    int mm_reps = quick_mode ? 1 : 3;
    /* Matrices of 256 MiB (64 MiB quick), each timed in copies_needed()
     * copies taken in turn, so leftovers of earlier passes in the L3 cannot
     * flatter the numbers (on a 32 MiB L3 one copy would do; the 260 MiB
     * L3 of 2026-12's VM held most of a 256 MiB matrix). */
    int64_t cols = 8192;
    int64_t matrix_bytes = quick_mode ? (int64_t)64 << 20 : (int64_t)256 << 20;

    bandwidth_state bw;
    bandwidth_setup(&bw, bw_bytes);
    bandwidth_measure(&bw, bw_reps, &sink);
    if (experts_only) {
        printf("kernels: %s\nmemory read bandwidth: %.2f GB/s (1 thread), %.2f GB/s (2 threads)\n", k3_kernels_name(),
               bw.best_gbs[1], bw.best_gbs[2]);
        experts_report(&bw, bw_reps, &sink);   /* measures the bandwidth again after the waves */
        printf("memory read bandwidth after: best %.2f GB/s (1 thread), %.2f GB/s (2 threads)\n", bw.best_gbs[1],
               bw.best_gbs[2]);
        printf("\ntotal %.1f s%s\n", now_seconds() - t_start,
               busy > 0 ? " (WARNING: other processes were runnable: figures low/noisy)" : "");
        if (sink == 12345.0f)
            fprintf(stderr, "%g\n", (double)sink);
        free(bw.array);
        return 0;
    }

    /* The GGUF table's shape: 128 Mi weights (IQ1_S 25 MiB .. BF16 256 MiB),
     * each timed in copies past the L3 as above; quick: 32 Mi weights. */
    int64_t gguf_rows = quick_mode ? 4096 : 16384, gguf_cols = 8192;
    int gguf_reps = quick_mode ? 2 : 4;
    enum { MAX_GGUF = 24 };
    gguf_result gguf[MAX_GGUF];
    int n_gguf = 0;
    if (gguf_only) {
        const int64_t xy_floats = gguf_rows > GGUF_MATMUL_TOKENS * 4096 ? gguf_rows : GGUF_MATMUL_TOKENS * 4096;
        float *xg = malloc((size_t)xy_floats * sizeof(float)), *yg = malloc((size_t)xy_floats * sizeof(float));
        for (int64_t i = 0; i < xy_floats; i++)
            xg[i] = (float)((fill_next() >> 40) & 0xFFFF) / 65536.0f - 0.5f;
        n_gguf = gguf_measure(gguf, MAX_GGUF, gguf_rows, gguf_cols, xg, yg, gguf_reps, &bw, bw_reps, &sink);
        if (json_output) {
            printf("{\n  \"kernels\": \"%s\",\n  \"read_gbs_1t\": %.2f,\n  \"read_gbs_2t\": %.2f,\n  \"gguf\": ",
                   k3_kernels_name(), bw.best_gbs[1], bw.best_gbs[2]);
            gguf_print_json(gguf, n_gguf, &bw);
            printf(",\n  \"seconds\": %.1f\n}\n", now_seconds() - t_start);
        } else {
            printf("kernels: %s\n", k3_kernels_name());
            gguf_print(gguf, n_gguf, gguf_rows, gguf_cols, gguf_reps, &bw);
            printf("\ntotal %.1f s\n", now_seconds() - t_start);
        }
        free(xg);
        free(yg);
        free(bw.array);
        return 0;
    }

    /* the last two: MXFP4 exact (the default) and under --activations q8 */
    static const k3_dtype mv_dtypes[] = {K3_DT_F32, K3_DT_BF16, K3_DT_F16, K3_DT_F8_E4M3, K3_DT_MXFP4, K3_DT_MXFP4};
    enum { N_MV = sizeof mv_dtypes / sizeof mv_dtypes[0] };
    matvec_result mv[N_MV];
    float *x = malloc((size_t)(64 * cols) * sizeof(float));
    float *y = malloc((size_t)(64 * cols) * sizeof(float));
    for (int64_t i = 0; i < 64 * cols; i++)
        x[i] = (float)((fill_next() >> 40) & 0xFFFF) / 65536.0f - 0.5f;

    for (int i = 0; i < N_MV; i++) {
        k3_dtype dt = mv_dtypes[i];
        int64_t rows = dt == K3_DT_MXFP4 ? matrix_bytes / (cols / 2 + cols / 32)
                                         : matrix_bytes / (cols * (int64_t)k3_dtype_size(dt));
        bench_matrix m = matrix_make(dt, rows, cols);
        memset(&mv[i], 0, sizeof mv[i]);
        mv[i].dtype = dt;
        mv[i].activations_q8 = i == N_MV - 1;
        k3_kernels_set_activations_q8(mv[i].activations_q8);
        mv[i].rows = rows;
        mv[i].cols = cols;
        mv[i].mib = (double)m.weight_bytes / (1 << 20);
        int n_copies;
        bench_matrix *set = matrix_copies(&m, &n_copies);
        for (int threads = 1; threads <= 2; threads++) {
            double dt_s = time_best(set, n_copies, x, y, 1, threads, mv_reps);
            mv[i].gbs[threads] = (double)m.weight_bytes / dt_s * 1e-9;
            mv[i].gws[threads] = (double)(rows * cols) / dt_s * 1e-9;
        }
        free(set);
        matrix_release(&m);
        /* Compute ceiling: 64 rows x 2048 cols stays in the 1 MiB L2. */
        bench_matrix small = matrix_make(dt, 64, 2048);
        int inner = 200;
        double best = 1e30;
        omp_set_num_threads(1);
        for (int r = 0; r < 5; r++) {
            double t0 = now_seconds();
            for (int k = 0; k < inner; k++)
                k3_matvec(y, &small.w, x);
            double dt_s = (now_seconds() - t0) / inner;
            if (dt_s < best)
                best = dt_s;
        }
        mv[i].cache_gws = 64.0 * 2048 / best * 1e-9;
        matrix_release(&small);
    }
    k3_kernels_set_activations_q8(0);
    bandwidth_measure(&bw, bw_reps, &sink);   /* second round: the reference is the best seen */
    n_gguf = gguf_measure(gguf, MAX_GGUF, gguf_rows, gguf_cols, x, y, gguf_reps, &bw, bw_reps, &sink);
    free(bw.array);

    static const struct { k3_dtype dt; int n_tokens; } mm_cases[] = {
        {K3_DT_BF16, 8}, {K3_DT_BF16, 32}, {K3_DT_F8_E4M3, 32}, {K3_DT_F32, 32},
    };
    enum { N_MM = sizeof mm_cases / sizeof mm_cases[0] };
    matmul_result mm[N_MM];
    int64_t mm_rows = quick_mode ? 1024 : 4096, mm_cols = 4096;
    for (int i = 0; i < N_MM; i++) {
        bench_matrix m = matrix_make(mm_cases[i].dt, mm_rows, mm_cols);
        mm[i].dtype = mm_cases[i].dt;
        mm[i].rows = mm_rows;
        mm[i].cols = mm_cols;
        mm[i].n_tokens = mm_cases[i].n_tokens;
        mm[i].gflops[0] = 0;
        for (int threads = 1; threads <= 2; threads++) {
            double dt_s = time_best(&m, 1, x, y, mm_cases[i].n_tokens, threads, mm_reps);
            mm[i].gflops[threads] = 2.0 * (double)(mm_rows * mm_cols) * mm_cases[i].n_tokens / dt_s * 1e-9;
        }
        matrix_release(&m);
    }
    omp_set_num_threads(2);
    /* Let our own OpenMP workers finish spin-waiting (they would count as
     * runnable) before looking at the machine again. */
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    int busy_end = other_runnable_processes();
    if (busy_end > busy)
        busy = busy_end;

    double seconds = now_seconds() - t_start;
    if (json_output) {
        print_json(&bw, mv, N_MV, mm, N_MM, busy, seconds);
        gguf_print_json(gguf, n_gguf, &bw);
        printf("\n}\n");
    } else {
        print_table(&bw, bw_reps, mv, N_MV, mv_reps, mm, N_MM, busy, seconds);
        gguf_print(gguf, n_gguf, gguf_rows, gguf_cols, gguf_reps, &bw);
    }
    if (!json_output)   /* MXFP4's two paths against bf16's weights per second */
        for (int i = N_MV - 2; i < N_MV; i++)
            for (int t = 1; t <= 2; t++)
                printf("%s vs BF16 weights/s, %d thread%s: %.2f G/s vs %.2f G/s = %.0f%%\n", mv_label(&mv[i]), t,
                       t > 1 ? "s" : "", mv[i].gws[t], mv[1].gws[t], 100 * mv[i].gws[t] / mv[1].gws[t]);
    if (sink == 12345.0f)   /* keep the reads observable */
        fprintf(stderr, "%g\n", (double)sink);
    free(x);
    free(y);
    return 0;
}
