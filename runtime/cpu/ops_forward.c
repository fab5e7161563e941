// Forward ops of the cpu backend (shardrt/cpu.h): embedding, linear,
// bias_add, rms_norm (and the fused add + rms_norm), rotary, glu, add —
// each a call of its CPU kernel on arena buffers, plus the rank-dependent
// vocabulary range of a vocabulary-parallel embedding. (Attention, the
// loss and the unary ops of ops.def have their own files.)
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

srt_status srt_cpu_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                double scale) {
  const char *op = "srt_cpu_op_embedding";
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  srt_cpu_embedding_forward(ops_f32(e, y), ops_i64(e, ids), ops_f32(e, w), n, hidden,
                            index * local_vocab, local_vocab, (float)scale);
  return NULL;
}

srt_status srt_cpu_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y, int64_t n,
                             int64_t in, int64_t out) {
  return srt_cpu_linear_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w),
                                b >= 0 ? ops_f32(e, b) : NULL, n, in, out);
}

srt_status srt_cpu_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                               int64_t f) {
  srt_cpu_bias_add_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, b), n, f);
  return NULL;
}

srt_status srt_cpu_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                               int64_t features, int64_t group, double eps, double offset) {
  srt_cpu_rms_norm_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w), n, features, group,
                           (float)eps, (float)offset);
  return NULL;
}

srt_status srt_cpu_op_rotary_embedding(srt_exec *e, int64_t position_ids, int64_t cos,
                                       int64_t sin, int64_t batch, int64_t seq,
                                       int64_t head_dim, double theta,
                                       int64_t rope_type, double factor, double low_freq_factor,
                                       double high_freq_factor,
                                       int64_t original_max_positions) {
  srt_rope_config c = srt_op_rope_config(head_dim, theta, rope_type, factor, low_freq_factor,
                                         high_freq_factor, original_max_positions);
  return srt_cpu_rotary_embedding_forward(ops_f32(e, cos), ops_f32(e, sin),
                                          position_ids >= 0 ? ops_i64(e, position_ids) : NULL,
                                          batch, seq, &c);
}

srt_status srt_cpu_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin, int64_t y,
                                   int64_t batch, int64_t seq, int64_t heads,
                                   int64_t head_dim) {
  srt_cpu_apply_rotary_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, cos), ops_f32(e, sin),
                               batch, seq, heads, head_dim);
  return NULL;
}

srt_status srt_cpu_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                          int64_t activation) {
  srt_cpu_glu_forward(ops_f32(e, y), ops_f32(e, gate), ops_f32(e, up), n,
                      srt_op_glu_activation(activation));
  return NULL;
}

// The same values as add, then rms_norm of its result, in one pass per row.
srt_status srt_cpu_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum, int64_t w,
                                   int64_t y, int64_t n, int64_t features, int64_t group,
                                   double eps, double offset) {
  srt_cpu_add_rms_norm_forward(ops_f32(e, sum), ops_f32(e, y), ops_f32(e, a), ops_f32(e, b),
                               ops_f32(e, w), n, features, group, (float)eps, (float)offset);
  return NULL;
}

srt_status srt_cpu_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                          int64_t dtype) {
  SRT_RETURN_IF_ERROR(ops_f32_only(e, "srt_cpu_op_add", dtype));
  srt_cpu_add_forward(ops_f32(e, y), ops_f32(e, a), ops_f32(e, b), n);
  return NULL;
}
