// Forward ops of a cuda step (shardrt/cuda.h): embedding, linear (cuBLASLt
// with the bias epilogue), bias_add, rms_norm, rotary, glu, add (the unary
// ops of ops.def are in ops.c).
// Attention and the loss have their own files.
#include "ops_internal.h"

srt_status srt_cuda_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                 int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                 double scale) {
  const char *op = "srt_cuda_op_embedding";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  return CU_LAUNCH(srt_cuda_embedding_forward(cu_bf16(e, y), cu_i64(e, ids), cu_bf16(e, w), n,
                                              hidden, index * local_vocab, local_vocab,
                                              (float)scale, d->compute));
}

// y[n, out] = x[n, in] W[out, in]^T (+ b): in cuBLASLt's column-major terms
// y^T [out, n] = W (stored [in, out], transposed) x^T (stored [in, n]).
srt_status srt_cuda_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y,
                              int64_t n, int64_t in, int64_t out) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, "srt_cuda_op_linear", &d));
  return srt_cuda_gemm(d, true, false, out, n, in, cu_bf16(e, w), in, cu_bf16(e, x), in,
                       cu_bf16(e, y), false, b >= 0 ? cu_bf16(e, b) : NULL);
}

srt_status srt_cuda_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                                int64_t f) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, "srt_cuda_op_bias_add", &d));
  return CU_LAUNCH(srt_cuda_bias_add(cu_bf16(e, y), cu_bf16(e, x), cu_bf16(e, b), n, f,
                                     d->compute));
}

srt_status srt_cuda_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                                int64_t features, int64_t group, double eps, double offset) {
  const char *op = "srt_cuda_op_rms_norm";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  group = group > 0 ? group : features; // ops.def checked it divides them
  return CU_LAUNCH(srt_cuda_rms_norm_forward(cu_bf16(e, y), cu_bf16(e, x), cu_bf16(e, w), n,
                                             features, group, (float)eps, (float)offset,
                                             d->compute));
}

srt_status srt_cuda_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum, int64_t w,
                                    int64_t y, int64_t n, int64_t features, int64_t group,
                                    double eps, double offset) {
  const char *op = "srt_cuda_op_add_rms_norm";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  group = group > 0 ? group : features; // ops.def checked it divides them
  return CU_LAUNCH(srt_cuda_add_rms_norm_forward(cu_bf16(e, sum), cu_bf16(e, y), cu_bf16(e, a),
                                                 cu_bf16(e, b), cu_bf16(e, w), n, features,
                                                 group, (float)eps, (float)offset,
                                                 d->compute));
}

srt_status srt_cuda_op_rotary_embedding(srt_exec *e, int64_t position_ids, int64_t cos,
                                        int64_t sin, int64_t batch, int64_t seq,
                                        int64_t head_dim, double theta,
                                        int64_t rope_type, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_max_positions) {
  const char *op = "srt_cuda_op_rotary_embedding";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, op, &d));
  if (head_dim <= 0 || head_dim > 1024 || head_dim % 2)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is not even in [2, 1024]", op,
                     (long long)head_dim);
  // The frequencies are the cpu backend's (computed in double, rounded once).
  srt_rope_config c = srt_op_rope_config(head_dim, theta, rope_type, factor, low_freq_factor,
                         high_freq_factor, original_max_positions);
  float inv_freq[512];
  SRT_RETURN_IF_ERROR(srt_cpu_rotary_inv_freq(inv_freq, &c));
  void *dev_freq;
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, sizeof inv_freq, &dev_freq));
  SRT_CUDA_CHECK(cudaMemcpyAsync(dev_freq, inv_freq, (size_t)(head_dim / 2) * sizeof(float),
                                 cudaMemcpyHostToDevice, d->compute));
  // inv_freq lives on this stack frame: the copy must finish before return.
  SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the rotary frequencies' copy"));
  return CU_LAUNCH(srt_cuda_rotary_tables(cu_f32(e, cos), cu_f32(e, sin), dev_freq,
                                          position_ids >= 0 ? cu_i64(e, position_ids) : NULL,
                                          batch, seq, head_dim, d->compute));
}

srt_status srt_cuda_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin,
                                    int64_t y, int64_t batch, int64_t seq, int64_t heads,
                                    int64_t head_dim) {
  const char *op = "srt_cuda_op_apply_rotary";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  if (head_dim % 2)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is odd", op, (long long)head_dim);
  return CU_LAUNCH(srt_cuda_apply_rotary_forward(cu_bf16(e, y), cu_bf16(e, x), cu_f32(e, cos),
                                                 cu_f32(e, sin), batch, seq, heads, head_dim,
                                                 d->compute));
}

srt_status srt_cuda_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                           int64_t activation) {
  const char *op = "srt_cuda_op_glu";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  return CU_LAUNCH(srt_cuda_glu_forward(cu_bf16(e, y), cu_bf16(e, gate), cu_bf16(e, up), n,
                                        (int)activation, d->compute));
}


srt_status srt_cuda_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                           int64_t dtype) {
  const char *op = "srt_cuda_op_add";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  if (dtype == 0)
    return CU_LAUNCH(srt_cuda_add_f32(cu_f32(e, y), cu_f32(e, a), cu_f32(e, b), n, d->compute));
  if (dtype == 1)
    return CU_LAUNCH(
        srt_cuda_add_bf16(cu_bf16(e, y), cu_bf16(e, a), cu_bf16(e, b), n, d->compute));
  return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dtype %lld is not 0 (fp32) or 1 (bf16)", op,
                   (long long)dtype);
}
