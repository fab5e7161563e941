// What the cuda op tests (ops_test, mamba2_test) share: bf16 rounding, the
// relative error they report, one line per check, a failing status as a
// failed test, bf16 moves in and out of a host image of the arena, and the
// run of a test body on a cuda backend opened for a fake program (MPI,
// context, open, close; exit 77 without a device).
#ifndef SHARD_TEST_CUDA_OPS_TEST_UTIL_H
#define SHARD_TEST_CUDA_OPS_TEST_UTIL_H

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "shardrt/context.h"
#include "shardrt/cuda.h"

static int g_failed;

static inline void check(int ok, const char *what, double err) {
  printf("%-52s %s (error %.3g)\n", what, ok ? "ok" : "FAILED", err);
  g_failed |= !ok;
}

static inline uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1); // round to nearest even (finite inputs)
  return (uint16_t)(u >> 16);
}

static inline float float_of(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// max |a - b| / max |b|.
static inline double rel_err(const float *a, const float *b, int64_t n) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
    scale = fmax(scale, fabs((double)b[i]));
  }
  return isfinite(diff) ? diff / scale : INFINITY;
}

static inline void fail_status(srt_status s, const char *what) {
  char buf[1024];
  fprintf(stderr, "%s: %s\n", what, srt_status_format(s, buf, sizeof buf));
  srt_status_free(s);
  g_failed = 1;
}

#define TRY(call)                                                                            \
  do {                                                                                       \
    srt_status s_ = (call);                                                                  \
    if (s_) {                                                                                \
      fail_status(s_, #call);                                                                \
      return;                                                                                \
    }                                                                                        \
  } while (0)

// n floats, rounded to bf16, into host[off ..] (2 bytes each), and back.
static inline void put_bf16(uint8_t *host, int64_t off, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b = bf16_of(x[i]);
    memcpy(host + off + 2 * i, &b, 2);
  }
}

static inline void get_bf16(const uint8_t *host, int64_t off, float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    memcpy(&b, host + off + 2 * i, 2);
    x[i] = float_of(b);
  }
}

// The fake program's step: never run.
static inline srt_status no_step(srt_exec *e, const srt_step_options *o, srt_step_result *r) {
  return NULL;
}

// Opens the cuda backend for `p` (its backend and step set here) and runs
// `body` on it; prints "all <name> checks passed" or FAILED. Returns the
// exit status: 0, 1 on a failure, 77 (skip) without a CUDA device.
static inline int run_on_cuda(int argc, char **argv, srt_program *p, const char *name,
                              void (*body)(srt_exec *e, const srt_program *p)) {
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device (%s)\n", ce != cudaSuccess ? cudaGetErrorString(ce) : "0 devices");
    return 77;
  }
  MPI_Init(&argc, &argv);
  srt_context_options co = srt_context_default_options();
  co.arena_bytes = 4096;
  srt_context *ctx = NULL;
  srt_status s = srt_context_create(&co, &ctx);
  if (s) {
    fail_status(s, "srt_context_create");
    MPI_Finalize();
    return 1;
  }
  p->step = no_step;
  p->backend = &srt_cuda_backend;
  srt_exec e = {.ctx = ctx, .backend = &srt_cuda_backend};
  s = srt_cuda_backend.open(ctx, p, &e.device, &e.arena);
  if (s) {
    fail_status(s, "srt_cuda_backend.open");
  } else {
    body(&e, p);
    s = srt_cuda_backend.close(e.device);
    if (s)
      fail_status(s, "srt_cuda_backend.close");
  }
  srt_status_free(srt_context_destroy(ctx));
  MPI_Finalize();
  if (g_failed)
    printf("FAILED\n");
  else
    printf("all %s checks passed\n", name);
  return g_failed;
}

#endif // SHARD_TEST_CUDA_OPS_TEST_UTIL_H
