// The CUDA backend (libshardrt_cuda): the graph-level ops that a step
// lowered with lower-to-runtime{backend=cuda} calls, and the srt_backend the
// training driver uses to move the persistent region to and from the GPU.
//
// Every srt_cuda_op_X has the arguments of srt_op_X (shardrt/ops.h) and
// the same semantics, with the backend's mixed precision (the reference's
// MixedPrecisionPolicy, param_dtype bf16 and reduce_dtype fp32):
// activations and the parameters' compute copies are bf16; parameter
// gradients, the loss statistics (ce_* results, the loss) and the rotary
// cos/sin tables are fp32; all arithmetic accumulates in fp32. add and the
// collectives take the element type of their buffers as a last argument
// (`dtype`: 0 fp32, 1 bf16). Ops are enqueued on the device's compute
// stream and collectives on its comm stream (NCCL), ordered by events; only
// srt_cuda_op_optimizer_step waits for the device (it reads the loss and
// the gradient norm back).
//
// Errors: SRT_INVALID_ARGUMENT for an exec without a device, a negative
// offset or size, or a bad option (naming the op and the value);
// SRT_UNAVAILABLE for a failing CUDA, cuBLASLt, cuDNN or NCCL call (naming
// the call and its source location); SRT_OUT_OF_RANGE, reported by the
// optimizer step, for a label outside the vocabulary.
#ifndef SHARDRT_CUDA_H
#define SHARDRT_CUDA_H

#include <stdint.h>

#include "shardrt/ops.h"
#include "shardrt/program.h"

/// The backend table a cuda program's srt_program.backend points to.
extern const srt_backend srt_cuda_backend;

/// Number of CUDA devices, 0 when there is none or no driver (never fails).
int srt_cuda_device_count(void);

// Forward.
srt_status srt_cuda_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                 int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                 double scale);
srt_status srt_cuda_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y,
                              int64_t n, int64_t in, int64_t out);
srt_status srt_cuda_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                                int64_t f);
srt_status srt_cuda_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                                int64_t features, int64_t group, double eps, double offset);
/// The residual add fused with the rms_norm of its result (lowered so when
/// an nn.add of bf16 activations is followed at once by an nn.rms_norm of
/// its result): sum = a + b [n, features], y = rms_norm(sum). The same
/// values as srt_cuda_op_add then srt_cuda_op_rms_norm.
srt_status srt_cuda_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum, int64_t w,
                                    int64_t y, int64_t n, int64_t features, int64_t group,
                                    double eps, double offset);
srt_status srt_cuda_op_rotary_embedding(srt_exec *e, int64_t cos, int64_t sin, int64_t batch,
                                        int64_t seq, int64_t head_dim, double theta,
                                        int64_t rope_type, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_max_positions);
srt_status srt_cuda_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin,
                                    int64_t y, int64_t batch, int64_t seq, int64_t heads,
                                    int64_t head_dim);
srt_status srt_cuda_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t out,
                                 const srt_op_attention_config *config);
srt_status srt_cuda_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                           int64_t activation);
srt_status srt_cuda_op_relu2(srt_exec *e, int64_t x, int64_t y, int64_t n);
srt_status srt_cuda_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                           int64_t dtype);
srt_status srt_cuda_op_cross_entropy(srt_exec *e, int64_t logits, int64_t labels,
                                     int64_t loss, int64_t batch, int64_t seq, int64_t vocab,
                                     int64_t ignore_index, int64_t shift);
srt_status srt_cuda_op_ce_logit_max(srt_exec *e, int64_t logits, int64_t max, int64_t n,
                                    int64_t local_vocab);
srt_status srt_cuda_op_ce_partial_sums(srt_exec *e, int64_t logits, int64_t labels,
                                       int64_t max, int64_t sum_exp, int64_t target,
                                       int64_t batch, int64_t seq, int64_t local_vocab,
                                       int64_t vocab_axis, int64_t ignore_index,
                                       int64_t shift);
srt_status srt_cuda_op_ce_loss_sum(srt_exec *e, int64_t max, int64_t sum_exp, int64_t target,
                                   int64_t labels, int64_t sum_and_count, int64_t batch,
                                   int64_t seq, int64_t ignore_index, int64_t shift);
srt_status srt_cuda_op_ce_mean(srt_exec *e, int64_t sum_and_count, int64_t loss);

// Backward.
srt_status srt_cuda_op_embedding_grad(srt_exec *e, int64_t ids, int64_t dy, int64_t dw,
                                      int64_t n, int64_t hidden, int64_t local_vocab,
                                      int64_t vocab_axis, double scale);
srt_status srt_cuda_op_linear_grad_input(srt_exec *e, int64_t dy, int64_t w, int64_t dx,
                                         int64_t n, int64_t in, int64_t out);
srt_status srt_cuda_op_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x, int64_t dw,
                                          int64_t n, int64_t in, int64_t out);
srt_status srt_cuda_op_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db, int64_t n,
                                        int64_t out);
srt_status srt_cuda_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                           int64_t dx, int64_t n, int64_t features,
                                           int64_t group, double eps, double offset);
srt_status srt_cuda_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                            int64_t n, int64_t features, int64_t group,
                                            double eps);
srt_status srt_cuda_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                         int64_t dx, int64_t batch, int64_t seq,
                                         int64_t heads, int64_t head_dim);
srt_status srt_cuda_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                      int64_t dy, int64_t dq, int64_t dk, int64_t dv,
                                      const srt_op_attention_config *config);
srt_status srt_cuda_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy,
                                int64_t dgate, int64_t dup, int64_t n, int64_t activation);
srt_status srt_cuda_op_relu2_grad(srt_exec *e, int64_t x, int64_t dy, int64_t dx, int64_t n);
srt_status srt_cuda_op_cross_entropy_grad(srt_exec *e, int64_t logits, int64_t labels,
                                          int64_t dlogits, int64_t batch, int64_t seq,
                                          int64_t vocab, int64_t ignore_index, int64_t shift);
srt_status srt_cuda_op_ce_logits_grad(srt_exec *e, int64_t logits, int64_t labels,
                                      int64_t max, int64_t sum_exp, int64_t sum_and_count,
                                      int64_t dlogits, int64_t batch, int64_t seq,
                                      int64_t local_vocab, int64_t vocab_axis,
                                      int64_t ignore_index, int64_t shift);

// Collectives (NCCL, on the communicator of mesh axis `axis`).
srt_status srt_cuda_op_all_reduce(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                  int64_t axis, int64_t is_max, int64_t dtype);
srt_status srt_cuda_op_all_gather(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                  int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                  int64_t d2, int64_t d3, int64_t dtype);
srt_status srt_cuda_op_reduce_scatter(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                      int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                      int64_t d2, int64_t d3, int64_t dtype);
srt_status srt_cuda_op_all_to_all(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                  int64_t split_dim, int64_t concat_dim, int64_t rank,
                                  int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                  int64_t dtype);
srt_status srt_cuda_op_all_slice(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                 int64_t d2, int64_t d3, int64_t dtype);

/// The step's end on the device: the gradient norm over every parameter in
/// one pass (each logical element counted once, as srt_get_grad_norm;
/// summed over dp then tp with NCCL in fp64), clipping folded into one
/// AdamW launch over all parameters (which also refreshes the bf16 compute
/// copies), the loss and norm read back into `result`.
srt_status srt_cuda_op_optimizer_step(srt_exec *e, const srt_program *program,
                                      const srt_step_options *options, int64_t loss_offset,
                                      srt_step_result *result);

#endif // SHARDRT_CUDA_H
