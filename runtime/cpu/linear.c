// Linear layer y = x W^T + b (torch.nn.Linear, weight [out, in]) and its
// gradients, each a single OpenBLAS sgemm plus a bias loop.
#include "shardrt/kernels.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

static srt_status check_sizes(const char *what, int64_t n, int64_t in,
                              int64_t out) {
  if (n < 0 || in < 0 || out < 0 || n > INT_MAX || in > INT_MAX ||
      out > INT_MAX)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: sizes n=%lld in=%lld out=%lld must lie in [0, %d]",
                     what, (long long)n, (long long)in, (long long)out,
                     INT_MAX);
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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out,
              (int)in, 1.0f, x, (int)in, weight, (int)in, beta, y, (int)out);
  return NULL;
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
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in,
                  (int)out, 1.0f, dy, (int)out, weight, (int)in, 0.0f, dx,
                  (int)in);
  }
  if (dweight && n > 0 && in > 0 && out > 0) // dW[out, in] += dy^T x
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in,
                (int)n, 1.0f, dy, (int)out, x, (int)in, 1.0f, dweight, (int)in);
  if (dbias) {
    // Row-by-row keeps the inner loop contiguous (vectorizable); fp32 sums
    // over n rows are what torch does too.
    for (int64_t t = 0; t < n; t++) {
      const float *g = dy + t * out;
      for (int64_t o = 0; o < out; o++)
        dbias[o] += g[o];
    }
  }
  return NULL;
}
