// Squared ReLU, relu(x)^2 (NemotronH's MLP activation), forward and
// backward, elementwise.
#include "shardrt/kernels.h"

#include <math.h>

// max(x, 0) without a branch: (x + |x|) / 2 is exact (0 for x <= 0, x for
// x > 0; only x > FLT_MAX / 2 overflows, whose square is inf anyway) and
// keeps NaN. fmaxf is a libm call at -O2, and GCC compiles the select
// `x > 0 ? x : 0` to a branch that mispredicts on random signs (~5x slower).
static float relu(float x) { return 0.5f * (x + fabsf(x)); }

void srt_cpu_relu2_forward(float *out, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float r = relu(x[i]);
    out[i] = r * r;
  }
}

void srt_cpu_relu2_backward(float *dx, const float *dout, const float *x,
                            int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float r = relu(x[i]);
    dx[i] = 2.0f * r * dout[i];
  }
}
