// Benchmark of the CPU kernels (runtime/cpu/): each kernel's GFLOP/s and
// GB/s beside two limits measured in the same run, as ratios: the sgemm's
// GFLOP/s (srt_cpu_gemm, the library printed) and a threaded copy's GB/s.
//
// Usage: kernels_bench [--quick] [--threads N]. Prints a table; asserts
// nothing. Threads default to the CPUs this process may run on
// (srt_cpu_set_threads).
// FLOP counts are the useful arithmetic of each op (stated per row below);
// bytes are the compulsory traffic (each input read once, each output written
// once). Elementwise kernels are memory-bound: their /copy ratio is the
// number to read; their sgemm ratio shows how far from the compute limit
// they are by nature.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/kernels.h"

typedef struct bench {
  double min_seconds; // keep repeating a kernel until this much time passed
  double sgemm_gflops;
  double copy_gbps;
} bench;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_random(int64_t n, unsigned seed) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) {
    fprintf(stderr, "kernels_bench: out of memory (%lld floats)\n",
            (long long)n);
    exit(1);
  }
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return p;
}

typedef void (*bench_fn)(void *ctx);

// Best time of one call: one warm-up, then at least 3 calls and min_seconds.
static double time_best(const bench *b, bench_fn fn, void *ctx) {
  fn(ctx);
  double best = INFINITY, start = now();
  for (int reps = 0; reps < 3 || now() - start < b->min_seconds; reps++) {
    double t0 = now();
    fn(ctx);
    double t = now() - t0;
    best = t < best ? t : best;
  }
  return best;
}

static void report(const bench *b, const char *name, const char *shape,
                   double seconds, double flops, double bytes) {
  double gflops = flops / seconds * 1e-9, gbps = bytes / seconds * 1e-9;
  printf("%-24s %-30s %9.3f %9.2f %7.3f %8.2f %6.2f\n", name, shape,
         seconds * 1e3, gflops, gflops / b->sgemm_gflops, gbps,
         gbps / b->copy_gbps);
}

static void check(srt_status s) {
  if (s) {
    char buf[512];
    fprintf(stderr, "kernels_bench: %s\n", srt_status_format(s, buf, sizeof buf));
    exit(1);
  }
}

//===----------------------------------------------------------------------===//
// sgemm: the reference
//===----------------------------------------------------------------------===//

typedef struct gemm_ctx {
  int n;
  float *a, *b, *c;
} gemm_ctx;

static void run_sgemm(void *p) {
  gemm_ctx *g = p;
  check(srt_cpu_gemm(false, true, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b,
                     g->n, 0.0f, g->c, g->n));
}

// The copy probe: n floats from a to b, threads over contiguous chunks.
typedef struct copy_ctx {
  int64_t n;
  float *a, *b;
} copy_ctx;

static void run_copy(void *p) {
  copy_ctx *c = p;
  int64_t chunk = 1 << 16;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < c->n; i += chunk)
    memcpy(c->b + i, c->a + i,
           (size_t)(i + chunk < c->n ? chunk : c->n - i) * sizeof(float));
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

typedef struct linear_ctx {
  int64_t n, in, out;
  float *x, *w, *bias, *y, *dy, *dx, *dw, *db;
} linear_ctx;

static void run_linear_fwd(void *p) {
  linear_ctx *c = p;
  check(srt_cpu_linear_forward(c->y, c->x, c->w, c->bias, c->n, c->in, c->out));
}

static void run_linear_bwd(void *p) {
  linear_ctx *c = p;
  check(srt_cpu_linear_backward(c->dx, c->dw, c->db, c->dy, c->x, c->w, c->n,
                                c->in, c->out));
}

typedef struct attn_ctx {
  srt_attention_config cfg;
  const int64_t *seg; // segment ids [batch, seq] (packed documents), or NULL
  float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv, *ws;
} attn_ctx;

// Random q, k, v, out, lse, dout, their gradients and the workspace for
// c->cfg (one batch row: heads 8 of q, kv_heads 2, as the rows above).
static void attn_alloc(attn_ctx *c) {
  int64_t S = c->cfg.seq, hd = c->cfg.head_dim;
  int64_t qn = S * c->cfg.heads * hd, kvn = S * c->cfg.kv_heads * hd;
  c->q = alloc_random(qn, 12), c->k = alloc_random(kvn, 13);
  c->v = alloc_random(kvn, 14), c->out = alloc_random(qn, 15);
  c->lse = alloc_random(c->cfg.heads * S, 16), c->dout = alloc_random(qn, 17);
  c->dq = alloc_random(qn, 18), c->dk = alloc_random(kvn, 19);
  c->dv = alloc_random(kvn, 20);
  c->ws = alloc_random(srt_cpu_attention_workspace_floats(&c->cfg), 21);
}

static void attn_free(attn_ctx *c) {
  free(c->q), free(c->k), free(c->v), free(c->out), free(c->lse), free(c->dout);
  free(c->dq), free(c->dk), free(c->dv), free(c->ws);
}

static void run_attn_fwd(void *p) {
  attn_ctx *c = p;
  check(srt_cpu_attention_forward(c->out, c->lse, c->q, c->k, c->v, c->seg, c->ws,
                                  &c->cfg));
}

static void run_attn_bwd(void *p) {
  attn_ctx *c = p;
  check(srt_cpu_attention_backward(c->dq, c->dk, c->dv, c->dout, c->q, c->k,
                                   c->v, c->out, c->lse, c->seg, c->ws, &c->cfg));
}

typedef struct mamba_ctx {
  srt_mamba2_config cfg;
  srt_mamba2_weights w;
  srt_mamba2_grads g;
  float *x, *out, *dout, *dx, *ws;
} mamba_ctx;

static void run_mamba_fwd(void *p) {
  mamba_ctx *c = p;
  check(srt_cpu_mamba2_forward(c->out, c->x, NULL, &c->w, c->ws, &c->cfg));
}

static void run_mamba_bwd(void *p) {
  mamba_ctx *c = p;
  check(srt_cpu_mamba2_backward(c->dx, &c->g, c->dout, c->x, NULL, &c->w, c->ws, &c->cfg));
}

// Visible (query, key) pairs of a causal attention with window w (0: none).
static double visible_pairs(int64_t s, int64_t w) {
  double pairs = 0;
  for (int64_t i = 0; i < s; i++)
    pairs += (double)(w > 0 && w < i + 1 ? w : i + 1);
  return pairs;
}

typedef struct ew_ctx { // elementwise and row-wise kernels
  int64_t n, rows, features;
  float *a, *b, *c, *d, *e, *w, *partials; // partials: rms_norm backward workspace
  int64_t *ids;
  int variant;
} ew_ctx;

static void run_rms_fwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_rms_norm_forward(c->b, c->a, c->w, c->rows, c->features, 0, 1e-6f, 0);
}
static void run_rms_bwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_rms_norm_backward(c->d, c->e, c->c, c->a, c->w, c->rows, c->features,
                            0, 1e-6f, 0, c->partials);
}
static void run_rope_fwd(void *p) {
  ew_ctx *c = p; // a: x [rows, features], d/e: cos/sin [rows, 128]
  srt_cpu_apply_rotary_forward(c->b, c->a, c->d, c->e, 1, c->rows,
                               c->features / 128, 128);
}
static void run_glu_fwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_glu_forward(c->c, c->a, c->b, c->n, (srt_glu_activation)c->variant);
}
static void run_glu_bwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_glu_backward(c->d, c->e, c->c, c->a, c->b, c->n,
                       (srt_glu_activation)c->variant);
}
static void run_relu2_fwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_relu2_forward(c->b, c->a, c->n);
}
static void run_add_fwd(void *p) {
  ew_ctx *c = p;
  srt_cpu_add_forward(c->c, c->a, c->b, c->n);
}
static void run_embedding_fwd(void *p) {
  ew_ctx *c = p; // a: weight [vocab, features], b: out [rows, features]
  srt_cpu_embedding_forward(c->b, c->ids, c->a, c->rows, c->features, 0,
                            c->n, 1.0f);
}
static void run_adamw(void *p) {
  ew_ctx *c = p;
  srt_adamw_config cfg = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  srt_cpu_adamw_step(c->a, c->b, c->c, c->d, 1.0f, c->n, 10, &cfg);
}

typedef struct ce_ctx {
  srt_cross_entropy_config cfg;
  float *logits, *lse, *ws, *dlogits, loss;
  int64_t *labels;
} ce_ctx;

static void run_ce_fwd(void *p) {
  ce_ctx *c = p;
  check(srt_cpu_cross_entropy_forward(&c->loss, c->lse, c->logits, c->labels,
                                      c->ws, &c->cfg));
}
static void run_ce_bwd(void *p) {
  ce_ctx *c = p;
  srt_cpu_cross_entropy_backward(c->dlogits, c->logits, c->lse, c->labels,
                                 1.0f, (float)c->cfg.seq, &c->cfg);
}

static const char kUsage[] =
    "usage: kernels_bench [--quick] [--threads N]\n"
    "  --quick: smaller shapes, shorter timing (the sgemm reference is the same)\n"
    "  --threads N: 1..4096 (default: the CPUs this process may run on)\n";

// CPUs this process may run on (taskset, a launcher's binding).
static int usable_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int main(int argc, char **argv) {
  bool quick = false;
  int threads = usable_cpus();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("%s", kUsage);
      return 0;
    } else if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (strcmp(argv[i], "--threads") == 0) {
      char *end = NULL;
      long n = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
      if (i + 1 >= argc || end == argv[i + 1] || *end || n < 1 || n > 4096) {
        fprintf(stderr, "kernels_bench: --threads needs a count in 1..4096, got %s%s%s\n%s",
                i + 1 < argc ? "'" : "nothing", i + 1 < argc ? argv[i + 1] : "",
                i + 1 < argc ? "'" : "", kUsage);
        return 2;
      }
      threads = (int)n;
      i++;
    } else {
      fprintf(stderr, "kernels_bench: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  srt_cpu_set_threads(threads);
  bench b = {.min_seconds = quick ? 0.05 : 0.3};
  char shape[64];

  // sgemm reference: square, large enough to reach the library's peak, and
  // timed for 0.3 s even with --quick (it is the denominator of every ratio,
  // bench/train_cpu.sh's MFU included).
  {
    gemm_ctx g = {.n = 1024};
    int64_t nn = (int64_t)g.n * g.n;
    g.a = alloc_random(nn, 1), g.b = alloc_random(nn, 2), g.c = alloc_random(nn, 3);
    bench steady = {.min_seconds = 0.3};
    double t = time_best(&steady, run_sgemm, &g);
    b.sgemm_gflops = 2.0 * g.n * g.n * (double)g.n / t * 1e-9;
    char lib[128];
    srt_cpu_gemm_library(lib, sizeof lib);
    printf("GEMM library: %s; threads: %d\n", lib, srt_cpu_threads());
    printf("sgemm %dx%dx%d: %.2f GFLOP/s (the /sgemm column's denominator)\n",
           g.n, g.n, g.n, b.sgemm_gflops);
    free(g.a), free(g.b), free(g.c);
    // Copy probe: 64 MiB, far past the caches; read + write bytes counted.
    copy_ctx cp = {.n = 16 << 20};
    cp.a = alloc_random(cp.n, 1), cp.b = alloc_random(cp.n, 2);
    b.copy_gbps = 8.0 * cp.n / time_best(&b, run_copy, &cp) * 1e-9;
    printf("copy 64 MiB: %.2f GB/s (the /copy column's denominator)\n\n",
           b.copy_gbps);
    free(cp.a), free(cp.b);
    printf("%-24s %-30s %9s %9s %7s %8s %6s\n", "kernel", "shape", "ms",
           "GFLOP/s", "/sgemm", "GB/s", "/copy");
  }

  { // linear: 2 n in out FLOPs forward, 4 n in out backward (dx and dW)
    linear_ctx c = {.n = quick ? 512 : 2048, .in = 1024, .out = 1024};
    c.x = alloc_random(c.n * c.in, 4), c.w = alloc_random(c.out * c.in, 5);
    c.bias = alloc_random(c.out, 6), c.y = alloc_random(c.n * c.out, 7);
    c.dy = alloc_random(c.n * c.out, 8), c.dx = alloc_random(c.n * c.in, 9);
    c.dw = alloc_random(c.out * c.in, 10), c.db = alloc_random(c.out, 11);
    double bytes = 4.0 * (c.n * c.in + c.out * c.in + c.n * c.out);
    snprintf(shape, sizeof shape, "n=%lld in=%lld out=%lld", (long long)c.n,
             (long long)c.in, (long long)c.out);
    report(&b, "linear fwd (+bias)", shape, time_best(&b, run_linear_fwd, &c),
           2.0 * c.n * c.in * c.out, bytes);
    report(&b, "linear bwd (dx,dW,db)", shape, time_best(&b, run_linear_bwd, &c),
           4.0 * c.n * c.in * c.out, 2 * bytes);
    free(c.x), free(c.w), free(c.bias), free(c.y), free(c.dy), free(c.dx);
    free(c.dw), free(c.db);
  }

  { // attention: 2 hd FLOPs per visible pair per matmul; forward 2 matmuls
    // (QK^T, PV), backward 5 (QK^T recomputed, dO V^T, P^T dO, dS K, dS^T Q)
    int64_t S = quick ? 256 : 2048;
    for (int64_t hd = 64; hd <= 128; hd *= 2) {
      attn_ctx c = {.cfg = {.batch = 1, .seq = S, .heads = 8, .kv_heads = 2,
                     .head_dim = hd, .causal = true,
                     .scale = 1.0f / sqrtf((float)hd)}};
      int64_t qn = S * 8 * hd, kvn = S * 2 * hd;
      attn_alloc(&c);
      double bytes = 4.0 * (2 * qn + 2 * kvn);
      for (int variant = 0; variant < (hd == 64 ? 3 : 1); variant++) {
        c.cfg.sliding_window = variant == 1 ? S / 4 : 0;
        c.cfg.softcap = variant == 2 ? 50.0f : 0.0f;
        double pairs = visible_pairs(S, c.cfg.sliding_window);
        snprintf(shape, sizeof shape, "S=%lld H=8 KV=2 hd=%lld%s", (long long)S,
                 (long long)hd, variant == 1 ? " W=S/4" : variant == 2 ? " cap" : "");
        report(&b, "attention fwd causal", shape,
               time_best(&b, run_attn_fwd, &c), 2 * 2.0 * hd * pairs * 8, bytes);
        report(&b, "attention bwd causal", shape,
               time_best(&b, run_attn_bwd, &c), 5 * 2.0 * hd * pairs * 8,
               2 * bytes);
      }
      attn_free(&c);
    }
  }

  { // Packed documents (issue 41): a row of S tokens holding 8 documents of
    // S/8 against one document of S, same run, forward + backward; the
    // kernel skips the key tiles of other documents, so the packed row costs
    // about 8 (S/8)^2 / S^2 = 1/8 of the single document plus the diagonal
    // blocks' waste. FLOPs count visible pairs as above.
    int64_t S = quick ? 1024 : 4096, docs = 8, hd = 64;
    attn_ctx c = {.cfg = {.batch = 1, .seq = S, .heads = 8, .kv_heads = 2, .head_dim = hd,
                          .causal = true, .scale = 1.0f / sqrtf((float)hd)}};
    int64_t qn = S * 8 * hd, kvn = S * 2 * hd;
    attn_alloc(&c);
    int64_t *seg = malloc((size_t)S * sizeof *seg);
    if (!seg) {
      fprintf(stderr, "kernels_bench: out of memory\n");
      return 1;
    }
    for (int64_t t = 0; t < S; t++)
      seg[t] = t / (S / docs);
    double bytes = 4.0 * (2 * qn + 2 * kvn), total[2];
    for (int packed = 0; packed < 2; packed++) {
      c.seg = packed ? seg : NULL;
      double pairs = packed ? docs * visible_pairs(S / docs, 0) : visible_pairs(S, 0);
      snprintf(shape, sizeof shape, "S=%lld %s", (long long)S,
               packed ? "8 docs of S/8" : "one document");
      double f = time_best(&b, run_attn_fwd, &c), g = time_best(&b, run_attn_bwd, &c);
      report(&b, "attention fwd documents", shape, f, 2 * 2.0 * hd * pairs * 8, bytes);
      report(&b, "attention bwd documents", shape, g, 5 * 2.0 * hd * pairs * 8, 2 * bytes);
      total[packed] = f + g;
    }
    printf("attention S=%lld fwd+bwd, 8 documents / one document: %.3fx (target <= 0.2)\n",
           (long long)S, total[1] / total[0]);
    attn_free(&c);
    free(seg);
  }

  { // Context parallelism (issue 42): one causal attention of S tokens
    // against each rank's share at cp 2 (queries: 2 chunks of S/4, head-tail;
    // keys: all S). The chunk pairs balance the causal work: each rank
    // should take about half the unsharded time, and the two ranks alike.
    int64_t S = quick ? 1024 : 4096, hd = 64, cp = 2;
    attn_ctx c = {.cfg = {.batch = 1, .seq = S, .heads = 8, .kv_heads = 2, .head_dim = hd,
                          .causal = true, .scale = 1.0f / sqrtf((float)hd)}};
    int64_t qn = S * 8 * hd, kvn = S * 2 * hd;
    c.q = alloc_random(qn, 12), c.k = alloc_random(kvn, 13);
    c.v = alloc_random(kvn, 14), c.out = alloc_random(qn, 15);
    c.lse = alloc_random(8 * S, 16), c.dout = alloc_random(qn, 17);
    c.dq = alloc_random(qn, 18), c.dk = alloc_random(kvn, 19);
    c.dv = alloc_random(kvn, 20);
    c.ws = alloc_random(srt_cpu_attention_workspace_floats(&c.cfg), 21);
    double full = time_best(&b, run_attn_fwd, &c) + time_best(&b, run_attn_bwd, &c);
    printf("attention S=%lld fwd+bwd unsharded: %.1f ms\n", (long long)S, full * 1e3);
    for (int64_t r = 0; r < cp; r++) {
      c.cfg.cp_size = cp, c.cfg.cp_rank = r;
      double t = time_best(&b, run_attn_fwd, &c) + time_best(&b, run_attn_bwd, &c);
      printf("attention S=%lld fwd+bwd cp %lld rank %lld: %.1f ms, %.3fx unsharded "
             "(balanced: 1/cp)\n",
             (long long)S, (long long)cp, (long long)r, t * 1e3, t / full);
    }
    free(c.q), free(c.k), free(c.v), free(c.out), free(c.lse), free(c.dout);
    free(c.dq), free(c.dk), free(c.dv), free(c.ws);
  }

  { // Mamba2 mixer: a NemotronH-like block (hidden 1024, 16 heads of 64 in 4
    // groups, state 64, chunks of 128). FLOPs: in_proj and out_proj, and per
    // token and head the scan's C.B (chunk x state), the within-chunk sum
    // (chunk x head_dim; both causal, halved) and the state's read and update
    // (4 x head_dim x state). The backward recomputes the forward and does
    // about twice its work: counted as 3 x the forward.
    mamba_ctx c = {.cfg = {.batch = 1, .seq = quick ? 256 : 1024, .hidden = 1024, .heads = 16,
                           .head_dim = 64, .groups = 4, .state = 64, .conv_kernel = 4,
                           .chunk = 128, .eps = 1e-5f, .dt_min = 0.001f, .dt_max = INFINITY}};
    const srt_mamba2_config *m = &c.cfg;
    int64_t n = m->batch * m->seq, inner = m->heads * m->head_dim;
    int64_t conv = inner + 2 * m->groups * m->state, proj = inner + conv + m->heads;
    float *in_w = alloc_random(proj * m->hidden, 40), *conv_w = alloc_random(conv * 4, 41);
    float *conv_b = alloc_random(conv, 42), *dt_b = alloc_random(m->heads, 43);
    float *a_log = alloc_random(m->heads, 44), *d = alloc_random(m->heads, 45);
    float *norm_w = alloc_random(inner, 46), *out_w = alloc_random(m->hidden * inner, 47);
    for (int64_t i = 0; i < proj * m->hidden; ++i) // keep the projections O(1)
      in_w[i] *= 0.03f;
    for (int64_t i = 0; i < m->hidden * inner; ++i)
      out_w[i] *= 0.03f;
    c.w = (srt_mamba2_weights){in_w, conv_w, conv_b, dt_b, a_log, d, norm_w, out_w};
    c.g = (srt_mamba2_grads){alloc_random(proj * m->hidden, 50), alloc_random(conv * 4, 51),
                             alloc_random(conv, 52),          alloc_random(m->heads, 53),
                             alloc_random(m->heads, 54),      alloc_random(m->heads, 55),
                             alloc_random(inner, 56),         alloc_random(m->hidden * inner, 57)};
    c.x = alloc_random(n * m->hidden, 48), c.out = alloc_random(n * m->hidden, 49);
    c.dout = alloc_random(n * m->hidden, 58), c.dx = alloc_random(n * m->hidden, 59);
    c.ws = alloc_random(srt_cpu_mamba2_workspace_floats(m, true), 60);
    double tokens_heads = (double)n * m->heads;
    double flops = 2.0 * n * m->hidden * (proj + inner) +
                   tokens_heads * (m->chunk * m->state + m->chunk * m->head_dim +
                                   8.0 * m->head_dim * m->state);
    double bytes = 4.0 * (n * (2 * m->hidden + proj) + proj * m->hidden + m->hidden * inner);
    snprintf(shape, sizeof shape, "S=%lld hid=1024 H=16x64 G=4 N=64", (long long)m->seq);
    report(&b, "mamba2 fwd", shape, time_best(&b, run_mamba_fwd, &c), flops, bytes);
    report(&b, "mamba2 bwd (recomputes)", shape, time_best(&b, run_mamba_bwd, &c), 3 * flops,
           2 * bytes);
    free(in_w), free(conv_w), free(conv_b), free(dt_b), free(a_log), free(d), free(norm_w);
    free(out_w), free(c.g.in_proj), free(c.g.conv_w), free(c.g.conv_b), free(c.g.dt_bias);
    free(c.g.A_log), free(c.g.D), free(c.g.norm_w), free(c.g.out_proj), free(c.x);
    free(c.out), free(c.dout), free(c.dx), free(c.ws);
  }

  { // row-wise and elementwise kernels over 4096 x 2048 activations
    int64_t rows = quick ? 1024 : 4096, features = 2048, n = rows * features;
    ew_ctx c = {.n = n, .rows = rows, .features = features};
    c.a = alloc_random(n, 22), c.b = alloc_random(n, 23);
    c.c = alloc_random(n, 24), c.d = alloc_random(n, 25);
    c.e = alloc_random(n, 26), c.w = alloc_random(features, 27);
    c.partials = alloc_random(srt_cpu_rms_norm_backward_workspace_floats(rows, features, 0), 33);
    snprintf(shape, sizeof shape, "%lld x %lld", (long long)rows,
             (long long)features);
    double nb = 4.0 * n; // bytes of one [rows, features] tensor
    // rms_norm: x^2 and its sum (2), scale (1), weight (1) per element
    report(&b, "rms_norm fwd", shape, time_best(&b, run_rms_fwd, &c), 4.0 * n,
           2 * nb);
    // backward: sums (2 x 2), dx (4), dW (3) per element; reads x, dy; writes dx
    report(&b, "rms_norm bwd", shape, time_best(&b, run_rms_bwd, &c), 11.0 * n,
           3 * nb);
    // apply_rotary: 2 products and a sum per element; cos/sin [rows, 128]
    report(&b, "apply_rotary fwd", shape, time_best(&b, run_rope_fwd, &c),
           3.0 * n, 2 * nb + 2 * 4.0 * rows * 128);
    // silu * up: exp, add, div, 2 mul = 5 per element (exp counted as 1)
    c.variant = SRT_GLU_SILU;
    report(&b, "glu silu fwd", shape, time_best(&b, run_glu_fwd, &c), 5.0 * n,
           3 * nb);
    report(&b, "glu silu bwd", shape, time_best(&b, run_glu_bwd, &c), 11.0 * n,
           5 * nb);
    // gelu_tanh * up: 9 per element (tanh counted as 1)
    c.variant = SRT_GLU_GELU_TANH;
    report(&b, "glu gelu_tanh fwd", shape, time_best(&b, run_glu_fwd, &c),
           9.0 * n, 3 * nb);
    report(&b, "relu2 fwd", shape, time_best(&b, run_relu2_fwd, &c), 2.0 * n,
           2 * nb);
    report(&b, "add fwd", shape, time_best(&b, run_add_fwd, &c), 1.0 * n,
           3 * nb);
    // embedding: a gather, no FLOPs; rows of a [32000, 2048] table
    int64_t vocab = 32000;
    float *table = alloc_random(vocab * features, 28);
    c.ids = malloc((size_t)rows * sizeof *c.ids);
    for (int64_t t = 0; t < rows; t++)
      c.ids[t] = (t * 7919) % vocab;
    float *keep = c.a;
    c.a = table, c.n = vocab;
    report(&b, "embedding fwd", shape, time_best(&b, run_embedding_fwd, &c),
           0.0, 2 * nb);
    c.a = keep, c.n = n;
    free(table), free(c.ids);
    // adamw: ~14 per parameter; reads p, m, v, g; writes p, m, v
    snprintf(shape, sizeof shape, "%lld params", (long long)n);
    report(&b, "adamw step", shape, time_best(&b, run_adamw, &c), 14.0 * n,
           7 * nb);
    free(c.a), free(c.b), free(c.c), free(c.d), free(c.e), free(c.w), free(c.partials);
  }

  { // cross-entropy: max (1), sub + exp + add (3) per logit forward;
    // sub + exp + mul (3) backward
    ce_ctx c = {.cfg = {.batch = 1, .seq = quick ? 256 : 1024, .vocab = 32000,
                 .local_vocab = 32000, .shift = true, .ignore_index = -100}};
    int64_t rows = c.cfg.seq, n = rows * c.cfg.vocab;
    c.logits = alloc_random(n, 29), c.dlogits = alloc_random(n, 30);
    c.lse = alloc_random(rows, 31), c.ws = alloc_random(2 * rows, 32);
    c.labels = malloc((size_t)rows * sizeof *c.labels);
    for (int64_t t = 0; t < rows; t++)
      c.labels[t] = (t * 104729) % c.cfg.vocab;
    snprintf(shape, sizeof shape, "rows=%lld V=32000", (long long)rows);
    report(&b, "cross_entropy fwd", shape, time_best(&b, run_ce_fwd, &c),
           4.0 * n, 4.0 * n);
    report(&b, "cross_entropy bwd", shape, time_best(&b, run_ce_bwd, &c),
           3.0 * n, 8.0 * n);
    free(c.logits), free(c.dlogits), free(c.lse), free(c.ws), free(c.labels);
  }
  return 0;
}
