// Bias broadcast over rows (nn.bias_add: a rowwise-parallel linear's bias,
// added once after the reduction), forward and backward.
#include "shardrt/kernels.h"

#include <string.h>

void srt_cpu_bias_add_forward(float *y, const float *x, const float *bias,
                              int64_t n, int64_t features) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t f = 0; f < features; f++)
      y[t * features + f] = x[t * features + f] + bias[f];
}

void srt_cpu_bias_add_backward(float *dx, float *dbias, const float *dy,
                               int64_t n, int64_t features) {
  if (dx && dx != dy)
    memcpy(dx, dy, (size_t)(n * features) * sizeof *dx);
  if (dbias)
    for (int64_t t = 0; t < n; t++)
      for (int64_t f = 0; f < features; f++)
        dbias[f] += dy[t * features + f];
}
