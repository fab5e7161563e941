// Backward ops of a cuda step (shardrt/cuda.h). Input gradients are bf16
// activations; parameter gradients are fp32, WRITTEN (the step zeroes
// nothing: each gradient buffer is written once by the op that owns it).
// Linear gradients are cuBLASLt GEMMs; the weight gradient accumulates in
// fp32 and is stored in fp32 (the reference's reduce_dtype).
#include "ops_internal.h"

srt_status srt_cuda_op_embedding_grad(srt_exec *e, int64_t ids, int64_t dy, int64_t dw,
                                      int64_t n, int64_t hidden, int64_t local_vocab,
                                      int64_t vocab_axis, double scale, int64_t padding_idx) {
  const char *op = "srt_cuda_op_embedding_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, op, &d));
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  return CU_LAUNCH(srt_cuda_embedding_backward(cu_f32(e, dw), cu_bf16(e, dy), cu_i64(e, ids),
                                               n, hidden, index * local_vocab, local_vocab,
                                               (float)scale, padding_idx, d->compute));
}

// dx[n, in] = dy[n, out] W[out, in]: column-major dx^T [in, n] = W (stored
// [in, out]) dy^T (stored [out, n]).
srt_status srt_cuda_op_linear_grad_input(srt_exec *e, int64_t dy, int64_t w, int64_t dx,
                                         int64_t n, int64_t in, int64_t out) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_linear_grad_input", &d));
  return srt_cuda_gemm(d, false, false, in, n, out, cu_bf16(e, w), in, cu_bf16(e, dy), out,
                       cu_bf16(e, dx), false, NULL);
}

// dW[out, in] = dy^T x: column-major dW^T [in, out] = x^T (stored [in, n])
// dy (stored [out, n], transposed), in fp32.
srt_status srt_cuda_op_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x, int64_t dw,
                                          int64_t n, int64_t in, int64_t out) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_linear_grad_weight", &d));
  return srt_cuda_gemm(d, false, true, in, out, n, cu_bf16(e, x), in, cu_bf16(e, dy), out,
                       cu_f32(e, dw), true, NULL);
}

srt_status srt_cuda_op_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db, int64_t n,
                                        int64_t out) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, "srt_cuda_op_linear_grad_bias", &d));
  void *scratch;
  int64_t floats = srt_cuda_column_sum_scratch(n, out);
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, (size_t)(floats > 0 ? floats : 1) * 4, &scratch));
  return CU_LAUNCH(
      srt_cuda_column_sum(cu_f32(e, db), cu_bf16(e, dy), n, out, scratch, d->compute));
}

srt_status srt_cuda_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                           int64_t dx, int64_t n, int64_t features,
                                           int64_t group, double eps, double offset) {
  const char *op = "srt_cuda_op_rms_norm_grad_input";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  group = group > 0 ? group : features; // ops.def checked it divides them
  return CU_LAUNCH(srt_cuda_rms_norm_backward_input(cu_bf16(e, dx), cu_bf16(e, x),
                                                    cu_bf16(e, w), cu_bf16(e, dy), n,
                                                    features, group, (float)eps,
                                                    (float)offset, d->compute));
}

srt_status srt_cuda_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                            int64_t n, int64_t features, int64_t group,
                                            double eps) {
  const char *op = "srt_cuda_op_rms_norm_grad_weight";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  group = group > 0 ? group : features; // ops.def checked it divides them
  void *scratch;
  int64_t floats = srt_cuda_rms_norm_backward_weight_scratch(n, features, group);
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, (size_t)(floats > 0 ? floats : 1) * 4, &scratch));
  return CU_LAUNCH(srt_cuda_rms_norm_backward_weight(cu_f32(e, dw), cu_bf16(e, x),
                                                     cu_bf16(e, dy), n, features, group,
                                                     (float)eps, scratch, d->compute));
}

srt_status srt_cuda_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                         int64_t dx, int64_t batch, int64_t seq,
                                         int64_t heads, int64_t head_dim) {
  const char *op = "srt_cuda_op_apply_rotary_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  if (head_dim % 2)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is odd", op, (long long)head_dim);
  return CU_LAUNCH(srt_cuda_apply_rotary_backward(cu_bf16(e, dx), cu_bf16(e, dy),
                                                  cu_f32(e, cos), cu_f32(e, sin), batch, seq,
                                                  heads, head_dim, d->compute));
}

srt_status srt_cuda_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy,
                                int64_t dgate, int64_t dup, int64_t n, int64_t activation) {
  const char *op = "srt_cuda_op_glu_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  return CU_LAUNCH(srt_cuda_glu_backward(cu_bf16(e, dgate), cu_bf16(e, dup), cu_bf16(e, dy),
                                         cu_bf16(e, gate), cu_bf16(e, up), n, (int)activation,
                                         d->compute));
}

