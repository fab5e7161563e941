// RMSNorm in fp32 with a weight offset (Gemma's 1 + w) and optional per-head
// grouping (q_norm/k_norm), forward and backward. Threaded over rows (the
// backward over fixed blocks of rows, whose weight-gradient partials are
// summed in block order), so the bytes do not depend on the thread count.
// The cpu backend's entry points (srt_cpu_op_rms_norm, the fused add + rms_norm
// and the two gradients) close the file.
#include "shardrt/kernels.h"

#include <math.h>
#include <string.h>

#include "ops_internal.h"
#include "vmath.h"


// 1/sqrt(mean(x^2) + eps) of one group, the sum of squares in double so that
// long rows do not lose low-order bits.
SRT_CPU_CLONES
static float group_rstd(const float *x, int64_t g, float eps) {
  double ss = srt_dot_f64(x, x, g);
  return (float)(1.0 / sqrt(ss / (double)g + (double)eps));
}

SRT_CPU_CLONES
static void forward_row(float *y, const float *x, const float *weight, int64_t g,
                        float rstd, float offset) {
#pragma omp simd
  for (int64_t i = 0; i < g; i++)
    y[i] = (offset + weight[i]) * (x[i] * rstd);
}

SRT_CPU_CLONES
static void add_row(float *out, const float *a, const float *b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

void srt_cpu_rms_norm_forward(float *y, const float *x, const float *weight,
                              int64_t n, int64_t features, int64_t group,
                              float eps, float offset) {
  int64_t g = group > 0 ? group : features;
  if (g == 0)
    return;
  // [n, features] with groups of g is [n * features / g, g]: one loop.
  int64_t rows = n * (features / g);
#pragma omp parallel for schedule(static) if (rows * g > kChunk)
  for (int64_t r = 0; r < rows; r++)
    forward_row(y + r * g, x + r * g, weight, g, group_rstd(x + r * g, g, eps), offset);
}

void srt_cpu_rms_norm_forward_serial(float *y, const float *x, const float *weight,
                                     int64_t rows, int64_t g, float eps, float offset) {
  for (int64_t r = 0; r < rows; r++)
    forward_row(y + r * g, x + r * g, weight, g, group_rstd(x + r * g, g, eps), offset);
}

void srt_cpu_add_rms_norm_forward(float *sum, float *y, const float *a, const float *b,
                                  const float *weight, int64_t n, int64_t features,
                                  int64_t group, float eps, float offset) {
  int64_t g = group > 0 ? group : features;
  if (g == 0)
    return;
  // Per row: the sum, then its norm while the row is still in cache.
#pragma omp parallel for schedule(static) if (n * features > kChunk)
  for (int64_t t = 0; t < n; t++) {
    float *st = sum + t * features;
    add_row(st, a + t * features, b + t * features, features);
    for (int64_t r = 0; r < features / g; r++)
      forward_row(y + t * features + r * g, st + r * g, weight, g,
                  group_rstd(st + r * g, g, eps), offset);
  }
}

// dx of one group: d/dx_i of r = -r^3 x_i / g, so
// dx_i = r w_i dy_i - r^3 x_i / g * sum_j w_j dy_j x_j (w_i = offset + weight_i);
// and, when `partial` is set, partial_i += dy_i x_i r in the same loop.
SRT_CPU_CLONES
static void backward_row(float *dx, float *partial, const float *dy, const float *x,
                         const float *weight, int64_t g, float rstd, float offset) {
  double dot = 0.0;
#pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < g; i++)
    dot += (double)((offset + weight[i]) * dy[i]) * x[i];
  float c = (float)(dot * (double)rstd * rstd * rstd / (double)g);
  if (partial) {
#pragma omp simd
    for (int64_t i = 0; i < g; i++) {
      dx[i] = rstd * (offset + weight[i]) * dy[i] - c * x[i];
      partial[i] += dy[i] * x[i] * rstd;
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < g; i++)
      dx[i] = rstd * (offset + weight[i]) * dy[i] - c * x[i];
  }
}

enum { kNormRowBlock = SRT_RMS_NORM_ROW_BLOCK };

// partial += dy x rstd over one group.
SRT_CPU_CLONES
static void weight_grad_row(float *partial, const float *dy, const float *x, int64_t g,
                            float rstd) {
#pragma omp simd
  for (int64_t i = 0; i < g; i++)
    partial[i] += dy[i] * x[i] * rstd;
}

void srt_cpu_rms_norm_backward_serial(float *dx, const float *dy, const float *x,
                                      const float *weight, int64_t rows, int64_t g, float eps,
                                      float offset) {
  for (int64_t r = 0; r < rows; r++)
    backward_row(dx + r * g, NULL, dy + r * g, x + r * g, weight, g,
                 group_rstd(x + r * g, g, eps), offset);
}

void srt_cpu_rms_norm_weight_grad_block(float *partial, const float *dy, const float *x,
                                        int64_t rows, int64_t g, float eps) {
  memset(partial, 0, (size_t)g * sizeof(float));
  for (int64_t r = 0; r < rows; r++)
    weight_grad_row(partial, dy + r * g, x + r * g, g, group_rstd(x + r * g, g, eps));
}

// dweight[i0, i1) += the blocks' partial sums, in block order.
SRT_CPU_CLONES
static void sum_blocks(float *dweight, const float *partial, int64_t blocks, int64_t g,
                       int64_t i0, int64_t i1) {
  for (int64_t b = 0; b < blocks; b++) {
    const float *p = partial + b * g;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++)
      dweight[i] += p[i];
  }
}

void srt_cpu_rms_norm_backward(float *dx, float *dweight, const float *dy,
                               const float *x, const float *weight, int64_t n,
                               int64_t features, int64_t group, float eps,
                               float offset, float *workspace) {
  int64_t g = group > 0 ? group : features;
  if (g == 0 || n <= 0)
    return;
  int64_t rows = n * (features / g);
  if (!dweight) { // dx alone (or nothing): every row its own task
    if (dx) {
#pragma omp parallel for schedule(static) if (rows * g > kChunk)
      for (int64_t r = 0; r < rows; r++)
        backward_row(dx + r * g, NULL, dy + r * g, x + r * g, weight, g,
                     group_rstd(x + r * g, g, eps), offset);
    }
    return;
  }
  int64_t blocks = (rows + kNormRowBlock - 1) / kNormRowBlock;
  // One pass over x and dy: per block of rows, dx and the block's partial
  // weight gradient while each row is in cache; then the partials summed.
#pragma omp parallel if (rows * g > kChunk)
  {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
      float *partial = workspace + b * g;
      int64_t r0 = b * kNormRowBlock;
      int64_t r1 = r0 + kNormRowBlock < rows ? r0 + kNormRowBlock : rows;
      if (!dx) {
        srt_cpu_rms_norm_weight_grad_block(partial, dy + r0 * g, x + r0 * g, r1 - r0, g, eps);
        continue;
      }
      memset(partial, 0, (size_t)g * sizeof(float));
      for (int64_t r = r0; r < r1; r++)
        backward_row(dx + r * g, partial, dy + r * g, x + r * g, weight, g,
                     group_rstd(x + r * g, g, eps), offset);
    }
    // The implicit barrier above: every partial is there.
#pragma omp for schedule(static)
    for (int64_t i0 = 0; i0 < g; i0 += kColumnBlock)
      sum_blocks(dweight, workspace, blocks, g, i0, i0 + kColumnBlock < g ? i0 + kColumnBlock : g);
  }
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                               int64_t features, int64_t group, double eps, double offset) {
  srt_cpu_rms_norm_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w), n, features, group,
                           (float)eps, (float)offset);
  return NULL;
}

// The same values as add, then rms_norm of its result, in one pass per row.
srt_status srt_cpu_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum, int64_t w,
                                   int64_t y, int64_t n, int64_t features, int64_t group,
                                   double eps, double offset) {
  srt_cpu_add_rms_norm_forward(ops_f32(e, sum), ops_f32(e, y), ops_f32(e, a), ops_f32(e, b),
                               ops_f32(e, w), n, features, group, (float)eps, (float)offset);
  return NULL;
}

srt_status srt_cpu_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                          int64_t dx, int64_t n, int64_t features,
                                          int64_t group, double eps, double offset) {
  srt_cpu_rms_norm_backward(ops_f32(e, dx), NULL, ops_f32(e, dy), ops_f32(e, x), ops_f32(e, w),
                            n, features, group, (float)eps, (float)offset, NULL);
  return NULL;
}

srt_status srt_cpu_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                           int64_t n, int64_t features, int64_t group,
                                           double eps) {
  int64_t g = group > 0 ? group : features;
  float *partials;
  SRT_RETURN_IF_ERROR(
      ops_scratch(e, srt_cpu_rms_norm_backward_workspace_floats(n, features, group), &partials));
  ops_zero(ops_f32(e, dw), g);
  // The weight gradient does not read the weight (nor the offset).
  srt_cpu_rms_norm_backward(NULL, ops_f32(e, dw), ops_f32(e, dy), ops_f32(e, x), NULL, n,
                            features, group, (float)eps, 0.0f, partials);
  return NULL;
}
