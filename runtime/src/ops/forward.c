// Forward ops of a compiled step (ops.h): embedding, linear, bias_add,
// rms_norm, rotary, glu, relu2, add — each a checked call of its CPU kernel
// on arena buffers, plus the rank-dependent vocabulary range of a
// vocabulary-parallel embedding. (Attention and the loss have their own files.)
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

srt_status srt_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                            int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                            double scale) {
  const char *op = "srt_op_embedding";
  SRT_RETURN_IF_ERROR(ops_check(e, op, OPS_LIST(ids, w, y), OPS_LIST(n, hidden, local_vocab)));
  int64_t index, size;
  SRT_RETURN_IF_ERROR(ops_axis(e, op, vocab_axis, &index, &size));
  srt_cpu_embedding_forward(ops_f32(e, y), ops_i64(e, ids), ops_f32(e, w), n, hidden,
                            index * local_vocab, local_vocab, (float)scale);
  return NULL;
}

srt_status srt_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y,
                         int64_t n, int64_t in, int64_t out) {
  SRT_RETURN_IF_ERROR(
      ops_check(e, "srt_op_linear", OPS_LIST(x, w, y), OPS_LIST(n, in, out)));
  return srt_cpu_linear_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w),
                                b >= 0 ? ops_f32(e, b) : NULL, n, in, out);
}

srt_status srt_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                           int64_t f) {
  SRT_RETURN_IF_ERROR(ops_check(e, "srt_op_bias_add", OPS_LIST(x, b, y), OPS_LIST(n, f)));
  srt_cpu_bias_add_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, b), n, f);
  return NULL;
}

// group 0 means features; otherwise it must divide them.
static srt_status check_group(srt_exec *e, const char *op, int64_t features,
                              int64_t group) {
  if (group < 0 || (group > 0 && features % group != 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: group %lld does not divide features %lld (rank %d)", op,
                     (long long)group, (long long)features, ops_rank(e));
  return NULL;
}

srt_status srt_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                           int64_t features, int64_t group, double eps, double offset) {
  const char *op = "srt_op_rms_norm";
  SRT_RETURN_IF_ERROR(ops_check(e, op, OPS_LIST(x, w, y), OPS_LIST(n, features)));
  SRT_RETURN_IF_ERROR(check_group(e, op, features, group));
  srt_cpu_rms_norm_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, w), n, features,
                           group, (float)eps, (float)offset);
  return NULL;
}

srt_status srt_op_rotary_embedding(srt_exec *e, int64_t cos, int64_t sin, int64_t batch,
                                   int64_t seq, int64_t head_dim, double theta,
                                   int64_t rope_type, double factor, double low_freq_factor,
                                   double high_freq_factor, int64_t original_max_positions) {
  const char *op = "srt_op_rotary_embedding";
  SRT_RETURN_IF_ERROR(ops_check(e, op, OPS_LIST(cos, sin), OPS_LIST(batch, seq, head_dim)));
  srt_rope_config c;
  SRT_RETURN_IF_ERROR(ops_rope_config(op, head_dim, theta, rope_type, factor, low_freq_factor,
                                      high_freq_factor, original_max_positions, &c));
  return srt_cpu_rotary_embedding_forward(ops_f32(e, cos), ops_f32(e, sin), NULL, batch,
                                          seq, &c);
}

srt_status srt_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin, int64_t y,
                               int64_t batch, int64_t seq, int64_t heads, int64_t head_dim) {
  const char *op = "srt_op_apply_rotary";
  SRT_RETURN_IF_ERROR(ops_check(e, op, OPS_LIST(x, cos, sin, y),
                                OPS_LIST(batch, seq, heads, head_dim)));
  if (head_dim % 2)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is odd", op,
                     (long long)head_dim);
  srt_cpu_apply_rotary_forward(ops_f32(e, y), ops_f32(e, x), ops_f32(e, cos),
                               ops_f32(e, sin), batch, seq, heads, head_dim);
  return NULL;
}

srt_status srt_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                      int64_t activation) {
  const char *op = "srt_op_glu";
  SRT_RETURN_IF_ERROR(ops_check(e, op, OPS_LIST(gate, up, y), OPS_LIST(n)));
  srt_glu_activation act;
  SRT_RETURN_IF_ERROR(ops_glu_activation(e, op, activation, &act));
  srt_cpu_glu_forward(ops_f32(e, y), ops_f32(e, gate), ops_f32(e, up), n, act);
  return NULL;
}

srt_status srt_op_relu2(srt_exec *e, int64_t x, int64_t y, int64_t n) {
  SRT_RETURN_IF_ERROR(ops_check(e, "srt_op_relu2", OPS_LIST(x, y), OPS_LIST(n)));
  srt_cpu_relu2_forward(ops_f32(e, y), ops_f32(e, x), n);
  return NULL;
}

srt_status srt_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n) {
  SRT_RETURN_IF_ERROR(ops_check(e, "srt_op_add", OPS_LIST(a, b, y), OPS_LIST(n)));
  srt_cpu_add_forward(ops_f32(e, y), ops_f32(e, a), ops_f32(e, b), n);
  return NULL;
}
