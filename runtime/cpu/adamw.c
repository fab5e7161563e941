// One AdamW update (decoupled weight decay, bias-corrected moments) over a
// flat fp32 parameter buffer, in torch.optim.AdamW's order of operations.
#include "shardrt/kernels.h"

#include <math.h>

void srt_cpu_adamw_step(float *param, float *m, float *v, const float *grad,
                        int64_t n, int64_t t, const srt_adamw_config *config) {
  const srt_adamw_config *c = config;
  // Scalars in double, then rounded once to fp32, as torch passes Python
  // floats to its fp32 kernels.
  double bc1 = 1.0 - pow((double)c->beta1, (double)t);
  double bc2 = 1.0 - pow((double)c->beta2, (double)t);
  float decay = (float)(1.0 - (double)c->lr * (double)c->weight_decay);
  float w1 = (float)(1.0 - (double)c->beta1);
  float w2 = (float)(1.0 - (double)c->beta2);
  float beta2 = c->beta2;
  float step_size = (float)((double)c->lr / bc1);
  float bc2_sqrt = (float)sqrt(bc2);
  float eps = c->eps;
  for (int64_t i = 0; i < n; i++) {
    float g = grad[i];
    float p = param[i] * decay;
    // torch lerp_(end, w): self + w (end - self) for w < 0.5, else
    // end - (end - self)(1 - w).
    float mi = m[i], diff = g - mi;
    mi = w1 < 0.5f ? mi + w1 * diff : g - diff * (1.0f - w1);
    float vi = v[i] * beta2 + w2 * g * g;
    float denom = sqrtf(vi) / bc2_sqrt + eps;
    param[i] = p + (-step_size) * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}
