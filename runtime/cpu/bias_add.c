// Bias broadcast over rows (nn.bias_add: a rowwise-parallel linear's bias,
// added once after the reduction), forward and backward. Threaded over rows;
// the bias gradient over column blocks, rows summed in order (the same bytes
// for any thread count).
// The cpu backend's entry points (srt_cpu_op_bias_add) close the file.
#include "shardrt/kernels.h"

#include <string.h>

#include "ops_internal.h"
#include "vmath.h"

SRT_CPU_CLONES
static void bias_row(float *y, const float *x, const float *bias, int64_t f) {
#pragma omp simd
  for (int64_t i = 0; i < f; i++)
    y[i] = x[i] + bias[i];
}

void srt_cpu_bias_add_forward(float *y, const float *x, const float *bias,
                              int64_t n, int64_t features) {
#pragma omp parallel for schedule(static) if (n * features > kChunk)
  for (int64_t t = 0; t < n; t++)
    bias_row(y + t * features, x + t * features, bias, features);
}

SRT_CPU_CLONES
static void sum_rows(float *dbias, const float *dy, int64_t n, int64_t features,
                     int64_t f0, int64_t f1) {
  for (int64_t t = 0; t < n; t++) {
    const float *g = dy + t * features;
#pragma omp simd
    for (int64_t f = f0; f < f1; f++)
      dbias[f] += g[f];
  }
}

void srt_cpu_bias_add_backward(float *dx, float *dbias, const float *dy,
                               int64_t n, int64_t features) {
  if (dx && dx != dy)
    memcpy(dx, dy, (size_t)(n * features) * sizeof *dx);
  if (!dbias)
    return;
#pragma omp parallel for schedule(static) if (n * features > kChunk)
  for (int64_t f0 = 0; f0 < features; f0 += kColumnBlock)
    sum_rows(dbias, dy, n, features, f0,
             f0 + kColumnBlock < features ? f0 + kColumnBlock : features);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                               int64_t f) {
  srt_cpu_bias_add_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, b), n, f);
  return NULL;
}
