// Backward ops of the cpu backend (shardrt/cpu.h) for embedding, linear,
// rms_norm, rotary and glu. Every output is WRITTEN: the kernels that
// accumulate into parameter gradients get their output zeroed first (the
// linear weight's is written by its GEMM).
// (Attention and the loss have their own files.)
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

static void zero(float *p, int64_t n) {
  if (n > 0)
    memset(p, 0, (size_t)n * sizeof(float));
}

srt_status srt_cpu_op_embedding_grad(srt_exec *e, int64_t ids, int64_t dy, int64_t dw,
                                     int64_t n, int64_t hidden, int64_t local_vocab,
                                     int64_t vocab_axis, double scale, int64_t padding_idx) {
  const char *op = "srt_cpu_op_embedding_grad";
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  zero(ops_f32(e, dw), local_vocab * hidden);
  srt_cpu_embedding_backward(ops_f32(e, dw), ops_f32(e, dy), ops_i64(e, ids), n, hidden,
                             index * local_vocab, local_vocab, (float)scale, padding_idx);
  return NULL;
}

srt_status srt_cpu_op_linear_grad_input(srt_exec *e, int64_t dy, int64_t w, int64_t dx,
                                        int64_t n, int64_t in, int64_t out) {
  return srt_cpu_linear_backward(ops_f32(e, dx), NULL, NULL, ops_f32(e, dy), NULL,
                                 ops_f32(e, w), n, in, out);
}

srt_status srt_cpu_op_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x, int64_t dw,
                                         int64_t n, int64_t in, int64_t out) {
  return srt_cpu_linear_grad_weight(ops_f32(e, dw), ops_f32(e, dy), ops_f32(e, x), n, in, out);
}

srt_status srt_cpu_op_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db, int64_t n,
                                       int64_t out) {
  zero(ops_f32(e, db), out);
  srt_cpu_bias_add_backward(NULL, ops_f32(e, db), ops_f32(e, dy), n, out);
  return NULL;
}

srt_status srt_cpu_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                          int64_t dx, int64_t n, int64_t features,
                                          int64_t group, double eps, double offset) {
  srt_cpu_rms_norm_backward(ops_f32(e, dx), NULL, ops_f32(e, dy), ops_f32(e, x), ops_f32(e, w),
                            n, features, group, (float)eps, (float)offset, NULL);
  return NULL;
}

srt_status srt_cpu_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                           int64_t n, int64_t features, int64_t group,
                                           double eps) {
  int64_t g = group > 0 ? group : features;
  float *partials;
  SRT_RETURN_IF_ERROR(
      ops_scratch(e, srt_cpu_rms_norm_backward_workspace_floats(n, features, group), &partials));
  zero(ops_f32(e, dw), g);
  // The weight gradient does not read the weight (nor the offset).
  srt_cpu_rms_norm_backward(NULL, ops_f32(e, dw), ops_f32(e, dy), ops_f32(e, x), NULL, n,
                            features, group, (float)eps, 0.0f, partials);
  return NULL;
}

srt_status srt_cpu_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                        int64_t dx, int64_t batch, int64_t seq, int64_t heads,
                                        int64_t head_dim) {
  srt_cpu_apply_rotary_backward(ops_f32(e, dx), ops_f32(e, dy), ops_f32(e, cos),
                                ops_f32(e, sin), batch, seq, heads, head_dim);
  return NULL;
}

srt_status srt_cpu_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy, int64_t dgate,
                               int64_t dup, int64_t n, int64_t activation) {
  srt_cpu_glu_backward(ops_f32(e, dgate), ops_f32(e, dup), ops_f32(e, dy), ops_f32(e, gate),
                       ops_f32(e, up), n, srt_op_glu_activation(activation));
  return NULL;
}
