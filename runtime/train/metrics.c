// Training metrics: the model FLOPs of a step (torchtitan's count, which
// the compiler puts in the program table), the peak (the CPU's GEMM rate
// measured at start, a GPU's datasheet), MFU, the console line of each step
// and the --metrics JSONL record.
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/kernels.h"
#include "train_internal.h"

double train_flops_per_token(const srt_program *p) { return p->flops_per_token; }

// The best rate (FLOP/s) of `reps` N^3 GEMMs on the current threads, after at least
// `warmup` seconds of the same GEMM; 0 if the GEMM fails.
static double best_gemm_rate(int n, const float *a, const float *b, float *c, int reps,
                             double warmup) {
  double best = 0, warm = 0;
  int warmups = 0;
  for (int rep = 0; rep < reps; ++rep) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    srt_status s = srt_cpu_gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (s) {
      srt_status_free(s);
      return 0;
    }
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (warm < warmup && warmups++ < 64) { // the cap: a clock that does not move
      warm += dt;
      rep = -1;
    } else if (dt > 0 && 2.0 * n * n * n / dt > best) {
      best = 2.0 * n * n * n / dt;
    }
  }
  return best;
}

double train_cpu_peak_flops(void) {
  enum { N = 1024 };
  float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N),
        *c = malloc(sizeof(float) * N * N);
  double all = 0, one = 0;
  int threads = srt_cpu_threads();
  for (size_t i = 0; a && b && c && i < (size_t)N * N; ++i) {
    a[i] = (float)(i % 7) * 0.25f;
    b[i] = (float)(i % 5) * 0.5f;
  }
  if (a && b && c) {
    // The rate climbs over the first calls (thread pool, page faults, clocks), and on a
    // shared host the cores can be half taken for a whole second: 2 threads measured at
    // one core's rate, and MFU read over 100%. The peak is the hardware's, so it is the
    // larger of all threads' best rate and one thread's best times the threads.
    all = best_gemm_rate(N, a, b, c, 8, 0.1);
    srt_cpu_set_threads(1);
    one = best_gemm_rate(N, a, b, c, 4, 0.0);
    srt_cpu_set_threads(threads);
  }
  free(a);
  free(b);
  free(c);
  return all > one * threads ? all : one * threads;
}

double train_peak_flops(const srt_backend *backend, void *device, char *source, size_t size) {
  double mine = 0;
  snprintf(source, size, "%s", "unknown");
  if (!backend) {
    mine = train_cpu_peak_flops();
    snprintf(source, size, "%s", "fp32 GEMM measured on every rank, summed");
  } else if (backend->peak_flops) {
    srt_status s = backend->peak_flops(device, &mine, source, size);
    if (s) {
      char buf[1024];
      fprintf(stderr, "train: warning: no peak for MFU: %s\n", srt_status_format(s, buf, sizeof buf));
      srt_status_free(s);
      mine = 0;
    }
  }
  double sum = 0, unknown = mine > 0 ? 0 : 1, any_unknown = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&unknown, &any_unknown, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return any_unknown > 0 ? 0 : sum;
}

// 12345 -> "12.3k", as the loggers of torchtitan and Megatron shorten.
static void human(double v, char *buf, size_t size) {
  const char *unit[] = {"", "k", "M", "G"};
  int u = 0;
  while (v >= 1000 && u < 3) {
    v /= 1000;
    ++u;
  }
  snprintf(buf, size, u ? "%.3g%s" : "%.0f%s", v, unit[u]);
}

static void duration(double s, char *buf, size_t size) {
  if (!(s >= 0) || !isfinite(s))
    snprintf(buf, size, "?");
  else if (s < 60)
    snprintf(buf, size, "%.0fs", s);
  else if (s < 3600)
    snprintf(buf, size, "%.0fm", s / 60);
  else
    snprintf(buf, size, "%.1fh", s / 3600);
}

void train_print_step(const train_step_metrics *m) {
  char tps[32], eta[32], mfu[32];
  human(m->tokens_per_s, tps, sizeof tps);
  duration(m->eta_s, eta, sizeof eta);
  if (m->mfu >= 0)
    snprintf(mfu, sizeof mfu, "%.1f%%", 100 * m->mfu);
  else
    snprintf(mfu, sizeof mfu, "-");
  printf("step %lld/%lld | loss %.9g | norm %.9g | lr %.6g | %.1f ms | MFU %s | %s tok/s | "
         "eta %s%s\n",
         (long long)m->step, (long long)m->steps, (double)m->loss, m->grad_norm, m->lr,
         1e3 * m->step_s, mfu, tps, eta, m->skipped ? " | SKIPPED (non-finite grad norm)" : "");
  fflush(stdout);
}

// A JSON number, or null for what JSON cannot hold (NaN, infinities).
static void number(FILE *f, const char *key, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.9g", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

// Whether the regular file `f` (opened for reading too) is non-empty and
// ends without a newline. Anything else (a device, a pipe, a file it
// cannot read) does not.
static bool ends_mid_line(FILE *f) {
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
    return false;
  char last;
  return pread(fileno(f), &last, 1, st.st_size - 1) == 1 && last != '\n';
}

srt_status train_metrics_open(const char *path, FILE **out) {
  // "a+" to read the last byte; "a" alone for a file that may not be read.
  FILE *f = fopen(path, "a+");
  if (!f && errno == EACCES)
    f = fopen(path, "a");
  if (!f)
    return SRT_ERROR(SRT_IO, "--metrics '%s': cannot open for appending: %s", path,
                     strerror(errno));
  if (ends_mid_line(f) && (fputc('\n', f) == EOF || fflush(f) != 0)) {
    int err = errno;
    fclose(f);
    return SRT_ERROR(SRT_IO, "--metrics '%s': cannot end its cut-off last line: %s", path,
                     strerror(err));
  }
  *out = f;
  return NULL;
}

int train_metrics_write(FILE *f, const train_step_metrics *m, const double *eval_loss) {
  fprintf(f, "{\"step\": %lld", (long long)m->step);
  number(f, "loss", m->loss);
  number(f, "grad_norm", m->grad_norm);
  number(f, "lr", m->lr);
  number(f, "tokens_per_s", m->tokens_per_s);
  number(f, "mfu", m->mfu >= 0 ? m->mfu : NAN);
  number(f, "step_ms", 1e3 * m->step_s);
  fprintf(f, ", \"skipped\": %s", m->skipped ? "true" : "false");
  if (eval_loss)
    number(f, "eval_loss", *eval_loss);
  fprintf(f, "}\n");
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
