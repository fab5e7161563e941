// RMSNorm in fp32 with a weight offset (Gemma's 1 + w) and optional per-head
// grouping (q_norm/k_norm), forward and backward.
#include "shardrt/kernels.h"

#include <math.h>

// 1/sqrt(mean(x^2) + eps) of one group, the sum of squares in double so that
// long rows do not lose low-order bits.
static float group_rstd(const float *x, int64_t g, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < g; i++)
    ss += (double)x[i] * x[i];
  return (float)(1.0 / sqrt(ss / (double)g + (double)eps));
}

void srt_cpu_rms_norm_forward(float *y, const float *x, const float *weight,
                              int64_t n, int64_t features, int64_t group,
                              float eps, float offset) {
  int64_t g = group > 0 ? group : features;
  if (g == 0)
    return;
  // [n, features] with groups of g is [n * features / g, g]: one loop.
  int64_t rows = n * (features / g);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * g;
    float *yr = y + r * g;
    float rstd = group_rstd(xr, g, eps);
    for (int64_t i = 0; i < g; i++)
      yr[i] = (offset + weight[i]) * (xr[i] * rstd);
  }
}

void srt_cpu_rms_norm_backward(float *dx, float *dweight, const float *dy,
                               const float *x, const float *weight, int64_t n,
                               int64_t features, int64_t group, float eps,
                               float offset) {
  int64_t g = group > 0 ? group : features;
  if (g == 0)
    return;
  int64_t rows = n * (features / g);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * g;
    const float *dyr = dy + r * g;
    float rstd = group_rstd(xr, g, eps);
    if (dweight)
      for (int64_t i = 0; i < g; i++)
        dweight[i] += dyr[i] * xr[i] * rstd;
    if (!dx)
      continue;
    // d/dx_i of r = -r^3 x_i / g, so
    // dx_i = r g_i dy_i - r^3 x_i / g * sum_j g_j dy_j x_j.
    double dot = 0.0;
    for (int64_t i = 0; i < g; i++)
      dot += (double)((offset + weight[i]) * dyr[i]) * xr[i];
    float c = (float)(dot * (double)rstd * rstd * rstd / (double)g);
    float *dxr = dx + r * g;
    for (int64_t i = 0; i < g; i++)
      dxr[i] = rstd * (offset + weight[i]) * dyr[i] - c * xr[i];
  }
}
