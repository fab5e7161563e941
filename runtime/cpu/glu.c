// Gated MLP activation act(gate) * up with act = silu or gelu (tanh form),
// forward and backward, elementwise.
#include "shardrt/kernels.h"

#include <math.h>

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation of GELU
// (Hendrycks & Gimpel 2016; torch gelu(approximate="tanh")).
static const float kGeluK = 0.7978845608028654f;
static const float kGeluA = 0.044715f;

// Saturates cleanly: expf(-x) = inf for x < -88 gives 0, never NaN.
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// gelu_tanh(g) = 0.5 g (1 + tanh(u)) = g sigmoid(2u), u = k (g + a g^3):
// the identity 0.5 (1 + tanh(u)) = sigmoid(2u) replaces glibc's tanhf (about
// 4x slower than expf) with one expf.
static float gelu_sigmoid_arg(float g) {
  return 2.0f * kGeluK * (g + kGeluA * g * g * g);
}

void srt_cpu_glu_forward(float *out, const float *gate, const float *up,
                         int64_t n, srt_glu_activation act) {
  if (act == SRT_GLU_SILU) {
    for (int64_t i = 0; i < n; i++) {
      float g = gate[i];
      out[i] = g * sigmoid(g) * up[i];
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float g = gate[i];
      out[i] = g * sigmoid(gelu_sigmoid_arg(g)) * up[i];
    }
  }
}

void srt_cpu_glu_backward(float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int64_t n,
                          srt_glu_activation act) {
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i], a, da;
    if (act == SRT_GLU_SILU) {
      // silu' = s (1 + g (1 - s)), s = sigmoid(g)
      float s = sigmoid(g);
      a = g * s;
      da = s * (1.0f + g * (1.0f - s));
    } else {
      // d/dg [g s], s = sigmoid(2u): s + g s (1 - s) 2 u'(g),
      // 2 u'(g) = 2 k (1 + 3 a g^2)
      float s = sigmoid(gelu_sigmoid_arg(g));
      a = g * s;
      da = s + a * (1.0f - s) * 2.0f * kGeluK * (1.0f + 3.0f * kGeluA * g * g);
    }
    // Read dout and up before writing: dgate/dup may alias dout.
    float go = dout[i], u = up[i];
    if (dgate)
      dgate[i] = go * u * da;
    if (dup)
      dup[i] = go * a;
  }
}
