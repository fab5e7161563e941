// Linear layer y = x W^T + b (torch.nn.Linear, weight [out, in]) and its
// gradients, each a single GEMM (srt_cpu_gemm) plus a bias loop.
// The cpu backend's entry points (srt_cpu_op_linear and its three gradients)
// close the file.
#include "shardrt/kernels.h"

#include <stdint.h>
#include <string.h>

#include "ops_internal.h"


static srt_status check_sizes(const char *what, int64_t n, int64_t in,
                              int64_t out) {
  // Each operand's bytes must fit in int64 (and so the address space).
  int64_t most = INT64_MAX / (int64_t)sizeof(float);
  if (n < 0 || in < 0 || out < 0 || (in > 0 && (n > most / in || out > most / in)) ||
      (out > 0 && n > most / out))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: sizes n=%lld in=%lld out=%lld must be >= 0 with every "
                     "operand under 2^63 bytes",
                     what, (long long)n, (long long)in, (long long)out);
  return NULL;
}

srt_status srt_cpu_linear_forward(float *y, const float *x, const float *weight,
                                  const float *bias, int64_t n, int64_t in,
                                  int64_t out) {
  SRT_RETURN_IF_ERROR(check_sizes("linear forward", n, in, out));
  if (n == 0 || out == 0)
    return NULL;
  // Start from the bias broadcast over rows and let sgemm add x W^T (beta 1):
  // one pass over y instead of two.
  float beta = 0.0f;
  if (bias) {
    for (int64_t t = 0; t < n; t++)
      memcpy(y + t * out, bias, (size_t)out * sizeof *y);
    beta = 1.0f;
  }
  if (in == 0) {
    if (!bias)
      memset(y, 0, (size_t)(n * out) * sizeof *y);
    return NULL;
  }
  // y[n, out] = x[n, in] * W[out, in]^T
  return srt_cpu_gemm(false, true, n, out, in, 1.0f, x, in, weight, in, beta,
                      y, out);
}

srt_status srt_cpu_linear_backward(float *dx, float *dweight, float *dbias,
                                   const float *dy, const float *x,
                                   const float *weight, int64_t n, int64_t in,
                                   int64_t out) {
  SRT_RETURN_IF_ERROR(check_sizes("linear backward", n, in, out));
  if (dx && n > 0 && in > 0) {
    if (out == 0)
      memset(dx, 0, (size_t)(n * in) * sizeof *dx);
    else // dx[n, in] = dy[n, out] * W[out, in]
      SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, false, n, in, out, 1.0f, dy, out,
                                       weight, in, 0.0f, dx, in));
  }
  if (dweight && n > 0 && in > 0 && out > 0) // dW[out, in] += dy^T x
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(true, false, out, in, n, 1.0f, dy, out, x,
                                     in, 1.0f, dweight, in));
  if (dbias) // db += the rows of dy, summed in row order
    srt_cpu_bias_add_backward(NULL, dbias, dy, n, out);
  return NULL;
}

srt_status srt_cpu_linear_grad_weight(float *dweight, const float *dy, const float *x,
                                      int64_t n, int64_t in, int64_t out) {
  SRT_RETURN_IF_ERROR(check_sizes("linear grad weight", n, in, out));
  // dW[out, in] = dy^T x; k = n = 0 writes zeros.
  return srt_cpu_gemm(true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dweight, in);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y, int64_t n,
                             int64_t in, int64_t out) {
  return srt_cpu_linear_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w),
                                b >= 0 ? ops_f32(e, b) : NULL, n, in, out);
}

srt_status srt_cpu_op_linear_grad_input(srt_exec *e, int64_t dy, int64_t w, int64_t dx,
                                        int64_t n, int64_t in, int64_t out) {
  return srt_cpu_linear_backward(ops_f32(e, dx), NULL, NULL, ops_f32(e, dy), NULL,
                                 ops_f32(e, w), n, in, out);
}

srt_status srt_cpu_op_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x, int64_t dw,
                                         int64_t n, int64_t in, int64_t out) {
  return srt_cpu_linear_grad_weight(ops_f32(e, dw), ops_f32(e, dy), ops_f32(e, x), n, in, out);
}

srt_status srt_cpu_op_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db, int64_t n,
                                       int64_t out) {
  ops_zero(ops_f32(e, db), out);
  srt_cpu_bias_add_backward(NULL, ops_f32(e, db), ops_f32(e, dy), n, out);
  return NULL;
}
