// Squared ReLU, relu(x)^2 (NemotronH's MLP activation), forward and
// backward, elementwise.
#include "shardrt/kernels.h"

void srt_cpu_relu2_forward(float *out, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float r = x[i] > 0.0f ? x[i] : 0.0f;
    out[i] = r * r;
  }
}

void srt_cpu_relu2_backward(float *dx, const float *dout, const float *x,
                            int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float r = x[i] > 0.0f ? x[i] : 0.0f;
    dx[i] = 2.0f * r * dout[i];
  }
}
