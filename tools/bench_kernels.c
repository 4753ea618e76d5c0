/* bench_kernels.c - memory read bandwidth next to matvec/matmul throughput.
 *
 * Decoding one token of a MoE model is a stream of matrix-vector products
 * over weights far larger than the caches, so the number that matters is
 * how close k3_matvec gets to the machine's memory read bandwidth. This tool
 * measures both in one run, at 1 and 2 threads, and prints the ratio.
 *
 * usage: bench_kernels [--json] [--quick]
 *   --json   one JSON object on stdout instead of the table
 *   --quick  fewer repetitions and smaller buffers (smoke test) */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "engine/kernels.h"

static int json_output;
static int quick_mode;

/* Wall clock in seconds. */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 2 MiB-aligned allocation with transparent huge pages requested: fewer TLB
 * misses while streaming, like the engine's own weight buffers. */
static void *alloc_big(size_t bytes)
{
    size_t align = (size_t)2 << 20;
    void *p = aligned_alloc(align, (bytes + align - 1) & ~(align - 1));
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, (bytes + align - 1) & ~(align - 1), MADV_HUGEPAGE);
#endif
    return p;
}

/* Deterministic filler for weight bytes (speed matters, quality does not). */
static uint64_t fill_state = 88172645463325252ull;

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

/* Sum-reduce floats [begin, end) with four independent accumulators and
 * 128 bytes per iteration: the cheapest possible consumer of a read stream. */
static float sum_range(const float *a, size_t begin, size_t end)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = begin;
    for (; i + 32 <= end; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    float total = 0;
    for (int k = 0; k < 8; k++)
        total += lanes[k];
    for (; i < end; i++)
        total += a[i];
    return total;
}

/* One timed parallel read of the whole array; returns GB/s (1e9 bytes). */
static double read_pass_gbs(const float *a, size_t n, int threads, float *sink)
{
    float total = 0;
    double t0 = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t chunk = (n / nt) & ~(size_t)31;
        size_t begin = chunk * t, end = t + 1 == nt ? n : begin + chunk;
        total += sum_range(a, begin, end);
    }
    double dt = now_seconds() - t0;
    *sink += total;
    return (double)n * sizeof(float) / dt * 1e-9;
}

typedef struct {
    double first_touch_write_gbs;  /* page faults + zeroing: what cold memory costs */
    double first_read_gbs[3];      /* first read after touch, per thread count */
    double best_read_gbs[3];       /* best of the repetitions */
} bandwidth_result;

/* STREAM-like read bandwidth at 1 and 2 threads over a 1 GiB array. The array
 * is written once first (first touch is slow on this VM and is reported
 * separately), then read `reps` times per thread count; the best is kept. */
static bandwidth_result measure_bandwidth(size_t bytes, int reps, float *sink)
{
    bandwidth_result res = {0};
    size_t n = bytes / sizeof(float);
    float *a = alloc_big(bytes);
    double t0 = now_seconds();
#pragma omp parallel for schedule(static) num_threads(2)
    for (size_t i = 0; i < n; i++)
        a[i] = 1.0f;
    res.first_touch_write_gbs = (double)bytes / (now_seconds() - t0) * 1e-9;
    for (int threads = 1; threads <= 2; threads++) {
        res.first_read_gbs[threads] = read_pass_gbs(a, n, threads, sink);
        res.best_read_gbs[threads] = res.first_read_gbs[threads];
        for (int r = 1; r < reps; r++) {
            double gbs = read_pass_gbs(a, n, threads, sink);
            if (gbs > res.best_read_gbs[threads])
                res.best_read_gbs[threads] = gbs;
        }
    }
    free(a);
    return res;
}

/* ------------------------------------------------------------------------ */
/* Matvec / matmul throughput                                                */
/* ------------------------------------------------------------------------ */

typedef struct {
    k3_weight w;
    void *data;
    float *scales;
    size_t weight_bytes;   /* bytes streamed per pass (weights + scales) */
} bench_matrix;

/* A rows x cols matrix of dtype dt filled with finite random values (fp8
 * gets 128x128 block scales like a real checkpoint). Filling touches every
 * page, so timed passes never pay first-touch faults. */
static bench_matrix matrix_make(k3_dtype dt, int64_t rows, int64_t cols)
{
    bench_matrix m = {0};
    size_t n = (size_t)(rows * cols);
    size_t bytes = n * k3_dtype_size(dt);
    m.data = alloc_big(bytes);
    uint64_t *words = m.data;
    for (size_t i = 0; i < bytes / 8; i++) {
        uint64_t r = fill_next();
        /* Clear each element's top exponent bit: never inf/NaN, no overflow. */
        switch (dt) {
        case K3_DT_F32: r &= 0xBFFFFFFFBFFFFFFFull; break;
        case K3_DT_BF16: case K3_DT_F16: r &= 0xBFFFBFFFBFFFBFFFull; break;
        default: r &= 0xBFBFBFBFBFBFBFBFull; break;
        }
        words[i] = r;
    }
    m.weight_bytes = bytes;
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

static void matrix_release(bench_matrix *m)
{
    free(m->data);
    free(m->scales);
}

/* Best-of-reps seconds for one k3_matmul (n_tokens == 1: k3_matvec) at the
 * given thread count, after one untimed warm-up pass. */
static double time_best(const bench_matrix *m, const float *x, float *y, int n_tokens,
                        int threads, int reps)
{
    omp_set_num_threads(threads);
    k3_matmul(y, &m->w, x, n_tokens);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
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

/* Shared output helpers: the table goes to stdout unless --json. */
static int json_first_item = 1;

static void json_item(const char *fmt_body, double a, double b, double c, double d, double e)
{
    printf("%s    ", json_first_item ? "" : ",\n");
    printf(fmt_body, a, b, c, d, e);
    json_first_item = 0;
}

/* Parse the two options; anything else is a usage error. */
static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json_output = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick_mode = 1;
        else {
            fprintf(stderr, "usage: bench_kernels [--json] [--quick]\n");
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    float sink = 0;
    size_t bw_bytes = quick_mode ? (size_t)256 << 20 : (size_t)1 << 30;
    int bw_reps = quick_mode ? 3 : 8;
    int mv_reps = quick_mode ? 3 : 10;
    int mm_reps = quick_mode ? 1 : 3;
    int64_t dim = quick_mode ? 4096 : 8192;

    double t_start = now_seconds();
    bandwidth_result bw = measure_bandwidth(bw_bytes, bw_reps, &sink);

    if (json_output) {
        printf("{\n  \"bandwidth\": {\"bytes\": %zu, \"first_touch_write_gbs\": %.2f, "
               "\"read_gbs_1t\": %.2f, \"read_gbs_2t\": %.2f, \"first_read_gbs_1t\": %.2f, "
               "\"first_read_gbs_2t\": %.2f},\n  \"matvec\": [\n",
               bw_bytes, bw.first_touch_write_gbs, bw.best_read_gbs[1], bw.best_read_gbs[2],
               bw.first_read_gbs[1], bw.first_read_gbs[2]);
    } else {
        printf("memory read bandwidth (sum-reduce over %zu MiB, best of %d; first-touch pages pre-faulted)\n",
               bw_bytes >> 20, bw_reps);
        printf("  first touch (write, page faults): %7.2f GB/s   <- cold memory on this VM\n",
               bw.first_touch_write_gbs);
        printf("  read 1 thread : %7.2f GB/s best   (first read after touch %.2f GB/s)\n",
               bw.best_read_gbs[1], bw.first_read_gbs[1]);
        printf("  read 2 threads: %7.2f GB/s best   (first read after touch %.2f GB/s)\n\n",
               bw.best_read_gbs[2], bw.first_read_gbs[2]);
        printf("matvec y = W x, weights >> caches, best of %d (GB/s of weights read; ratio = / read bandwidth)\n",
               mv_reps);
        printf("  %-8s %11s %8s | %9s %8s %6s | %9s %8s %6s\n", "dtype", "matrix", "MiB",
               "1t GB/s", "Gw/s", "ratio", "2t GB/s", "Gw/s", "ratio");
    }

    static const struct { k3_dtype dt; int64_t row_mult; } mv_cases[] = {
        {K3_DT_F32, 1}, {K3_DT_BF16, 1}, {K3_DT_F16, 1}, {K3_DT_F8_E4M3, 2},
    };
    float *x = malloc((size_t)(32 * dim) * sizeof(float));
    float *y = malloc((size_t)(32 * 2 * dim) * sizeof(float));
    for (int64_t i = 0; i < 32 * dim; i++)
        x[i] = (float)((fill_next() >> 40) & 0xFFFF) / 65536.0f - 0.5f;

    for (size_t c = 0; c < sizeof mv_cases / sizeof mv_cases[0]; c++) {
        bench_matrix m = matrix_make(mv_cases[c].dt, dim * mv_cases[c].row_mult, dim);
        double gbs[3], gws[3];
        for (int threads = 1; threads <= 2; threads++) {
            double dt = time_best(&m, x, y, 1, threads, mv_reps);
            gbs[threads] = (double)m.weight_bytes / dt * 1e-9;
            gws[threads] = (double)(m.w.rows * m.w.cols) / dt * 1e-9;
        }
        if (json_output) {
            printf("%s    {\"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld, ", c ? ",\n" : "",
                   k3_dtype_name(m.w.dtype), (long long)m.w.rows, (long long)m.w.cols);
            printf("\"gbs_1t\": %.2f, \"gws_1t\": %.3f, \"ratio_1t\": %.3f, "
                   "\"gbs_2t\": %.2f, \"gws_2t\": %.3f, \"ratio_2t\": %.3f}",
                   gbs[1], gws[1], gbs[1] / bw.best_read_gbs[1], gbs[2], gws[2], gbs[2] / bw.best_read_gbs[2]);
        } else {
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)m.w.rows, (long long)m.w.cols);
            printf("  %-8s %11s %8.0f | %9.2f %8.2f %5.0f%% | %9.2f %8.2f %5.0f%%\n",
                   k3_dtype_name(m.w.dtype), shape, (double)m.weight_bytes / (1 << 20), gbs[1], gws[1],
                   100 * gbs[1] / bw.best_read_gbs[1], gbs[2], gws[2], 100 * gbs[2] / bw.best_read_gbs[2]);
        }
        matrix_release(&m);
    }

    if (json_output)
        printf("\n  ],\n  \"matmul\": [\n");
    else
        printf("\nmatmul Y = W X (prompt processing), best of %d: GFLOP/s = 2*rows*cols*T / time\n"
               "  %-8s %11s %4s | %9s %9s | %9s %9s\n", mm_reps, "dtype", "matrix", "T",
               "1t GFLOP/s", "tok/s", "2t GFLOP/s", "tok/s");
    static const struct { k3_dtype dt; int n_tokens; } mm_cases[] = {
        {K3_DT_BF16, 8}, {K3_DT_BF16, 32}, {K3_DT_F8_E4M3, 32}, {K3_DT_F32, 32},
    };
    int64_t mm_dim = dim / 2;   /* 4096 x 4096: the timing is compute, not size, bound */
    for (size_t c = 0; c < sizeof mm_cases / sizeof mm_cases[0]; c++) {
        bench_matrix m = matrix_make(mm_cases[c].dt, mm_dim, mm_dim);
        int n_tokens = mm_cases[c].n_tokens;
        double gflops[3], tok_s[3];
        for (int threads = 1; threads <= 2; threads++) {
            double dt = time_best(&m, x, y, n_tokens, threads, mm_reps);
            gflops[threads] = 2.0 * (double)(m.w.rows * m.w.cols) * n_tokens / dt * 1e-9;
            tok_s[threads] = n_tokens / dt;
        }
        if (json_output) {
            printf("%s", c ? ",\n" : "");
            json_first_item = 1;
            printf("    {\"dtype\": \"%s\", ", k3_dtype_name(m.w.dtype));
            json_item("\"rows\": %.0f, \"cols\": %.0f, \"tokens\": %.0f, \"gflops_1t\": %.2f, \"gflops_2t\": %.2f}",
                      (double)m.w.rows, (double)m.w.cols, n_tokens, gflops[1], gflops[2]);
        } else {
            char shape[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)m.w.rows, (long long)m.w.cols);
            printf("  %-8s %11s %4d | %10.1f %9.0f | %10.1f %9.0f\n", k3_dtype_name(m.w.dtype), shape,
                   n_tokens, gflops[1], tok_s[1], gflops[2], tok_s[2]);
        }
        matrix_release(&m);
    }
    if (json_output)
        printf("\n  ],\n  \"seconds\": %.1f, \"sink\": %g\n}\n", now_seconds() - t_start, (double)sink);
    else
        printf("\ntotal %.1f s (checksum %g)\n", now_seconds() - t_start, (double)sink);
    free(x);
    free(y);
    return 0;
}
