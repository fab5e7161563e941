// Gated MLP activation act(gate) * up with act = silu or gelu (tanh form),
// forward and backward, elementwise, threaded over chunks.
// The cpu backend's entry points (srt_cpu_op_glu and _grad) close the file.
#include "shardrt/kernels.h"

#include <math.h>

#include "ops_internal.h"
#include "vmath.h"

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation of GELU
// (Hendrycks & Gimpel 2016; torch gelu(approximate="tanh")).
static const float kGeluK = 0.7978845608028654f;
static const float kGeluA = 0.044715f;

// Saturates cleanly: e^-x = inf for x < -88 gives 0, never NaN.
static inline float sigmoid(float x) { return 1.0f / (1.0f + srt_expf(-x)); }

// gelu_tanh(g) = 0.5 g (1 + tanh(u)) = g sigmoid(2u), u = k (g + a g^3):
// the identity 0.5 (1 + tanh(u)) = sigmoid(2u) replaces glibc's tanhf (about
// 4x slower than expf) with one expf.
static inline float gelu_sigmoid_arg(float g) {
  return 2.0f * kGeluK * (g + kGeluA * g * g * g);
}

// act(g) u of one element; `act` a constant after inlining (a branch on it
// inside a vector loop would compute both activations for every lane).
__attribute__((always_inline)) static inline float forward_value(float g, float u,
                                                                 srt_glu_activation act) {
  return act == SRT_GLU_SILU ? g * sigmoid(g) * u : g * sigmoid(gelu_sigmoid_arg(g)) * u;
}

SRT_CPU_CLONES
void srt_cpu_glu_forward_serial(float *out, const float *gate, const float *up, int64_t n,
                                srt_glu_activation act) {
  if (act == SRT_GLU_SILU) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
      out[i] = forward_value(gate[i], up[i], SRT_GLU_SILU);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
      out[i] = forward_value(gate[i], up[i], SRT_GLU_GELU_TANH);
  }
}

// The same values of bf16 operands, each result rounded once.
SRT_CPU_CLONES
void srt_cpu_glu_forward_bf16_serial(uint16_t *out, const uint16_t *gate, const uint16_t *up,
                                     int64_t n, srt_glu_activation act) {
  if (act == SRT_GLU_SILU) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
      out[i] = srt_bf16_store(
          forward_value(srt_bf16_load(gate[i]), srt_bf16_load(up[i]), SRT_GLU_SILU));
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
      out[i] = srt_bf16_store(
          forward_value(srt_bf16_load(gate[i]), srt_bf16_load(up[i]), SRT_GLU_GELU_TANH));
  }
}

void srt_cpu_glu_forward(float *out, const float *gate, const float *up,
                         int64_t n, srt_glu_activation act) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_glu_forward_serial(out + i0, gate + i0, up + i0, srt_chunk_end(i0, n) - i0, act);
}

// act(g) and act'(g) of one gate value.
static inline void activation(float g, srt_glu_activation act, float *a, float *da) {
  if (act == SRT_GLU_SILU) {
    // silu' = s (1 + g (1 - s)), s = sigmoid(g)
    float s = sigmoid(g);
    *a = g * s;
    *da = s * (1.0f + g * (1.0f - s));
  } else {
    // d/dg [g s], s = sigmoid(2u): s + g s (1 - s) 2 u'(g),
    // 2 u'(g) = 2 k (1 + 3 a g^2)
    float s = sigmoid(gelu_sigmoid_arg(g));
    *a = g * s;
    *da = s + *a * (1.0f - s) * 2.0f * kGeluK * (1.0f + 3.0f * kGeluA * g * g);
  }
}

// The loop of one activation (a constant after inlining: a branch on `act`
// inside the vector loop would compute both activations for every lane).
__attribute__((always_inline)) static inline void backward_loop(float *dgate, float *dup, const float *dout,
                                 const float *gate, const float *up, int64_t n,
                                 srt_glu_activation act) {
  // Read dout and up before writing: dgate/dup may alias dout.
  if (dgate && dup) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
      float a, da, go = dout[i], u = up[i];
      activation(gate[i], act, &a, &da);
      dgate[i] = go * u * da;
      dup[i] = go * a;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float a, da, go = dout[i], u = up[i];
      activation(gate[i], act, &a, &da);
      if (dgate)
        dgate[i] = go * u * da;
      if (dup)
        dup[i] = go * a;
    }
  }
}

// backward_loop of bf16 operands (dgate and dup both written), each result
// rounded once.
__attribute__((always_inline)) static inline void backward_bf16_loop(
    uint16_t *dgate, uint16_t *dup, const uint16_t *dout, const uint16_t *gate,
    const uint16_t *up, int64_t n, srt_glu_activation act) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    float a, da, go = srt_bf16_load(dout[i]), u = srt_bf16_load(up[i]);
    activation(srt_bf16_load(gate[i]), act, &a, &da);
    dgate[i] = srt_bf16_store(go * u * da);
    dup[i] = srt_bf16_store(go * a);
  }
}

SRT_CPU_CLONES
void srt_cpu_glu_backward_bf16_serial(uint16_t *dgate, uint16_t *dup, const uint16_t *dout,
                                      const uint16_t *gate, const uint16_t *up, int64_t n,
                                      srt_glu_activation act) {
  if (act == SRT_GLU_SILU)
    backward_bf16_loop(dgate, dup, dout, gate, up, n, SRT_GLU_SILU);
  else
    backward_bf16_loop(dgate, dup, dout, gate, up, n, SRT_GLU_GELU_TANH);
}

SRT_CPU_CLONES
void srt_cpu_glu_backward_serial(float *dgate, float *dup, const float *dout,
                                 const float *gate, const float *up, int64_t n,
                                 srt_glu_activation act) {
  if (act == SRT_GLU_SILU)
    backward_loop(dgate, dup, dout, gate, up, n, SRT_GLU_SILU);
  else
    backward_loop(dgate, dup, dout, gate, up, n, SRT_GLU_GELU_TANH);
}

void srt_cpu_glu_backward(float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int64_t n,
                          srt_glu_activation act) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_glu_backward_serial(dgate ? dgate + i0 : NULL, dup ? dup + i0 : NULL, dout + i0, gate + i0,
                   up + i0, srt_chunk_end(i0, n) - i0, act);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                          int64_t activation) {
  srt_cpu_glu_forward(ops_f32(e, y), ops_f32(e, gate), ops_f32(e, up), n,
                      (srt_glu_activation)activation);
  return NULL;
}

srt_status srt_cpu_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy, int64_t dgate,
                               int64_t dup, int64_t n, int64_t activation) {
  srt_cpu_glu_backward(ops_f32(e, dgate), ops_f32(e, dup), ops_f32(e, dy), ops_f32(e, gate),
                       ops_f32(e, up), n, (srt_glu_activation)activation);
  return NULL;
}
