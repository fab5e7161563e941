// One AdamW update (decoupled weight decay, bias-corrected moments) over a
// flat fp32 parameter buffer, in torch.optim.AdamW's order of operations;
// threaded over chunks (elementwise: the same bytes for any thread count).
#include "shardrt/kernels.h"

#include <math.h>

#include "bf16_stage.h"
#include "vmath.h"

// The scalars of one step, rounded to fp32 once.
typedef struct adamw_scalars {
  float grad_scale, decay, w1, w2, beta2, step_size, bc2_sqrt, eps;
} adamw_scalars;

SRT_CPU_CLONES
static void adamw_chunk(float *param, float *m, float *v, const float *grad, int64_t n,
                        adamw_scalars k) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float g = grad[i] * k.grad_scale;
    float p = param[i] * k.decay;
    // torch lerp_(end, w): self + w (end - self) for w < 0.5, else
    // end - (end - self)(1 - w).
    float mi = m[i], diff = g - mi;
    mi = k.w1 < 0.5f ? mi + k.w1 * diff : g - diff * (1.0f - k.w1);
    float vi = v[i] * k.beta2 + k.w2 * g * g;
    float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
    param[i] = p + (-k.step_size) * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

// The step; with `compute`, each chunk's updated parameters rounded into it
// while the chunk is in cache.
static void step(float *param, uint16_t *compute, float *m, float *v, const float *grad,
                 float grad_scale, int64_t n, int64_t t, const srt_adamw_config *config) {
  const srt_adamw_config *c = config;
  // Scalars in double, then rounded once to fp32, as torch passes Python
  // floats to its fp32 kernels.
  double bc1 = 1.0 - pow((double)c->beta1, (double)t);
  double bc2 = 1.0 - pow((double)c->beta2, (double)t);
  adamw_scalars k = {.grad_scale = grad_scale,
                     .decay = (float)(1.0 - (double)c->lr * (double)c->weight_decay),
                     .w1 = (float)(1.0 - (double)c->beta1),
                     .w2 = (float)(1.0 - (double)c->beta2),
                     .beta2 = c->beta2,
                     .step_size = (float)((double)c->lr / bc1),
                     .bc2_sqrt = (float)sqrt(bc2),
                     .eps = c->eps};
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    adamw_chunk(param + i0, m + i0, v + i0, grad + i0, srt_chunk_end(i0, n) - i0, k);
    if (compute)
      srt_bf16_round_tile(compute + i0, param + i0, srt_chunk_end(i0, n) - i0);
  }
}

void srt_cpu_adamw_step(float *param, float *m, float *v, const float *grad,
                        float grad_scale, int64_t n, int64_t t,
                        const srt_adamw_config *config) {
  step(param, NULL, m, v, grad, grad_scale, n, t, config);
}

void srt_cpu_adamw_step_bf16(float *param, uint16_t *compute, float *m, float *v,
                             const float *grad, float grad_scale, int64_t n, int64_t t,
                             const srt_adamw_config *config) {
  step(param, compute, m, v, grad, grad_scale, n, t, config);
}
