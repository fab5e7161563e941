// Squared ReLU, relu(x)^2 (NemotronH's MLP activation), forward and
// backward, elementwise, threaded over chunks.
#include "shardrt/kernels.h"

#include <math.h>

#include "vmath.h"

// max(x, 0) without a branch: (x + |x|) / 2 is exact (0 for x <= 0, x for
// x > 0; only x > FLT_MAX / 2 overflows, whose square is inf anyway) and
// keeps NaN.
static inline float relu(float x) { return 0.5f * (x + fabsf(x)); }

SRT_CPU_CLONES
static void forward_chunk(float *out, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float r = relu(x[i]);
    out[i] = r * r;
  }
}

SRT_CPU_CLONES
static void backward_chunk(float *dx, const float *dout, const float *x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    dx[i] = 2.0f * relu(x[i]) * dout[i];
}

void srt_cpu_relu2_forward(float *out, const float *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    forward_chunk(out + i0, x + i0, srt_chunk_end(i0, n) - i0);
}

void srt_cpu_relu2_backward(float *dx, const float *dout, const float *x,
                            int64_t n) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    backward_chunk(dx + i0, dout + i0, x + i0, srt_chunk_end(i0, n) - i0);
}
