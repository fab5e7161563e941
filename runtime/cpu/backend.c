// The cpu backend as an object (srt_cpu_backend), like the device ones
// (runtime/cuda/device.c's srt_cuda_backend): it computes in the host
// arena itself, so opening it hands back the context's arena, the copies
// between host and "device" do nothing and closing frees nothing; its peak
// for MFU is measured (fp32 GEMMs on this rank's threads). The driver runs
// every program through a backend object and never asks which one it has.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shardrt/context.h"
#include "shardrt/cpu.h"
#include "shardrt/kernels.h"

static srt_status open_host(srt_context *ctx, const srt_program *program, void **device,
                            uint8_t **arena) {
  (void)program;
  *device = NULL;
  *arena = srt_context_arena(ctx)->base;
  return NULL;
}

static srt_status to_device(void *device, const srt_program *program, const uint8_t *host,
                            int64_t offset, int64_t bytes) {
  (void)device, (void)program, (void)host, (void)offset, (void)bytes;
  return NULL; // the arena is the host's
}

static srt_status to_host(void *device, const srt_program *program, uint8_t *host,
                          int64_t offset, int64_t bytes) {
  (void)device, (void)program, (void)host, (void)offset, (void)bytes;
  return NULL;
}

static srt_status close_host(void *device) {
  (void)device;
  return NULL;
}

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

// The fp32 GEMM peak of this rank's threads (FLOP/s): the larger of the
// best of eight 1024^3 srt_cpu_gemm calls on all threads (after 0.1 s of
// warm-up) and the best of four on one thread times the threads, so that a
// core another process holds during the measurement does not halve it; 0
// if the GEMM fails. About 0.3 s on 2 cores.
static double peak_gemm_rate(void) {
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

static srt_status peak_flops(void *device, double *flops, char *source, size_t size) {
  (void)device;
  *flops = peak_gemm_rate();
  snprintf(source, size, "%s", "fp32 GEMM measured on every rank, summed");
  return NULL;
}

const srt_backend srt_cpu_backend = {
    .name = "cpu",
    .ops = &srt_cpu_ops,
    .open = open_host,
    .to_device = to_device,
    .to_host = to_host,
    .close = close_host,
    .peak_flops = peak_flops,
    .host = true,
};
