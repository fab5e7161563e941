// The CPU GEMM candidates side by side: OpenBLAS's cblas_sgemm (with the
// core it picked, printed) and oneDNN's dnnl_sgemm, on the shapes training
// runs: square products, the three products of a linear layer of
// bench/train_cpu.json (1024 tokens, 512 -> 2048) and attention tiles.
// Each result is checked against a float64 product (max abs error printed).
//
// Usage: gemm_libs [THREADS]   (default: the cores online)
// OpenBLAS's core is chosen when the library loads, before main, so the
// script bench/gemm_libs.sh runs this program twice: as Debian ships it and
// with OPENBLAS_CORETYPE naming the core the CPU's features call for.
// Asserts nothing; prints GFLOP/s.
#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// OpenBLAS extensions (declared by its cblas.h on some builds only).
char *openblas_get_corename(void);
void openblas_set_num_threads(int);

typedef struct shape {
  const char *name;
  char ta, tb; // 'N' or 'T', row-major, as dnnl_sgemm
  int m, n, k;
} shape;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_random(size_t n, unsigned seed) {
  float *p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "gemm_libs: out of memory (%zu floats)\n", n);
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return p;
}

typedef struct operands {
  const shape *s;
  float *a, *b, *c;
  int lda, ldb;
} operands;

static void run_openblas(const operands *o) {
  const shape *s = o->s;
  cblas_sgemm(CblasRowMajor, s->ta == 'T' ? CblasTrans : CblasNoTrans,
              s->tb == 'T' ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f,
              o->a, o->lda, o->b, o->ldb, 0.0f, o->c, s->n);
}

static void run_dnnl(const operands *o) {
  const shape *s = o->s;
  if (dnnl_sgemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, o->a, o->lda, o->b,
                 o->ldb, 0.0f, o->c, s->n) != dnnl_success) {
    fprintf(stderr, "gemm_libs: dnnl_sgemm failed on %s\n", s->name);
    exit(1);
  }
}

typedef void (*gemm_fn)(const operands *);

// Best seconds of one call over >= 3 calls and >= 0.3 s, after one warm-up.
static double time_best(gemm_fn fn, const operands *o) {
  fn(o);
  double best = INFINITY, start = now();
  for (int reps = 0; reps < 3 || now() - start < 0.3; reps++) {
    double t0 = now();
    fn(o);
    double t = now() - t0;
    best = t < best ? t : best;
  }
  return best;
}

// Max |C - A B| over C, the product computed in float64.
static double max_error(const operands *o) {
  const shape *s = o->s;
  double worst = 0;
  for (int i = 0; i < s->m; i++)
    for (int j = 0; j < s->n; j++) {
      double acc = 0;
      for (int p = 0; p < s->k; p++) {
        double a = s->ta == 'T' ? o->a[(size_t)p * o->lda + i]
                                : o->a[(size_t)i * o->lda + p];
        double b = s->tb == 'T' ? o->b[(size_t)j * o->ldb + p]
                                : o->b[(size_t)p * o->ldb + j];
        acc += a * b;
      }
      double e = fabs(acc - (double)o->c[(size_t)i * s->n + j]);
      worst = e > worst ? e : worst;
    }
  return worst;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1) {
    fprintf(stderr, "gemm_libs: THREADS must be a positive count, got '%s'\n",
            argv[1]);
    return 2;
  }
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  const dnnl_version_t *v = dnnl_version();
  printf("threads %d; OpenBLAS core: %s; oneDNN %d.%d.%d (%s)\n",
         threads, openblas_get_corename(), v->major, v->minor, v->patch,
         v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP runtime" : "other runtime");
  static const shape shapes[] = {
      {"square 512", 'N', 'T', 512, 512, 512},
      {"square 1024", 'N', 'T', 1024, 1024, 1024},
      {"square 2048", 'N', 'T', 2048, 2048, 2048},
      {"linear fwd y=xW^T", 'N', 'T', 1024, 2048, 512},
      {"linear dx=dy W", 'N', 'N', 1024, 512, 2048},
      {"linear dW=dy^T x", 'T', 'N', 2048, 512, 1024},
      {"attn tile QK^T hd64", 'N', 'T', 64, 64, 64},
      {"attn tile PV hd128", 'N', 'N', 64, 128, 64},
      {"attn row QK^T 64x1024", 'N', 'T', 64, 1024, 128},
  };
  printf("%-24s %-16s %14s %14s %10s %12s\n", "shape", "m x n x k",
         "OpenBLAS GF/s", "oneDNN GF/s", "dnnl/blas", "max err");
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    const shape *s = &shapes[i];
    operands o = {.s = s};
    o.lda = s->ta == 'T' ? s->m : s->k;
    o.ldb = s->tb == 'T' ? s->k : s->n;
    o.a = alloc_random((size_t)s->m * s->k, 1u + (unsigned)i);
    o.b = alloc_random((size_t)s->k * s->n, 100u + (unsigned)i);
    o.c = alloc_random((size_t)s->m * s->n, 7u);
    double flops = 2.0 * s->m * s->n * (double)s->k;
    double blas = flops / time_best(run_openblas, &o) * 1e-9;
    double err = max_error(&o);
    double dnnl = flops / time_best(run_dnnl, &o) * 1e-9;
    double err2 = max_error(&o);
    char dims[32];
    snprintf(dims, sizeof dims, "%dx%dx%d", s->m, s->n, s->k);
    printf("%-24s %-16s %14.1f %14.1f %10.2f %12.1e\n", s->name, dims, blas,
           dnnl, dnnl / blas, err > err2 ? err : err2);
    free(o.a);
    free(o.b);
    free(o.c);
  }
  return 0;
}
