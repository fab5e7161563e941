// Graph-level entry points that compiled training steps call, one per op
// of a partitioned nn graph (forward, backward, collectives, optimizer).
// Each takes the executing rank (srt_exec), its buffers as byte offsets into
// the rank's arena, and the op's local sizes; each WRITES its outputs (never
// accumulates) and returns srt_status. They wrap the CPU kernels
// (kernels.h) and collectives (collectives.h), adding what depends on the
// rank: the local vocabulary range of a vocabulary-parallel embedding or
// loss, and the first global query head of replicated-KV attention.
//
// Conventions: all float buffers are fp32; ids and labels are int64.
// `n` is the number of rows (batch * seq). A `*_axis` argument names the mesh
// axis (0 = dp, 1 = tp) whose index decides a range, or -1 for none.
#ifndef SHARDRT_OPS_H
#define SHARDRT_OPS_H

#include <stdint.h>

#include "shardrt/program.h"

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// y[n, hidden] = w[ids[n] - start] * scale (zero rows for ids outside
/// [start, start + local_vocab)); start = index on `vocab_axis` * local_vocab.
srt_status srt_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                            int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                            double scale);
/// y[n, out] = x[n, in] w[out, in]^T (+ b[out] when b >= 0).
srt_status srt_op_linear(srt_exec *e, int64_t x, int64_t w, int64_t b, int64_t y,
                         int64_t n, int64_t in, int64_t out);
/// y[n, f] = x[n, f] + b[f].
srt_status srt_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                           int64_t f);
/// RMSNorm over groups of `group` of the `features` of each row (group =
/// features for a plain norm); y = (offset + w) * x / sqrt(mean(x^2) + eps).
srt_status srt_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                           int64_t features, int64_t group, double eps, double offset);
/// cos/sin [batch, seq, head_dim] for positions 0..seq-1 (rope_type 0 =
/// default, 1 = llama3 with factor, low/high frequency factors and the
/// original max positions).
srt_status srt_op_rotary_embedding(srt_exec *e, int64_t cos, int64_t sin, int64_t batch,
                                   int64_t seq, int64_t head_dim, double theta,
                                   int64_t rope_type, double factor, double low_freq_factor,
                                   double high_freq_factor, int64_t original_max_positions);
/// y = RoPE(x) on every head: x, y [batch, seq, heads * head_dim].
srt_status srt_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin, int64_t y,
                               int64_t batch, int64_t seq, int64_t heads, int64_t head_dim);

/// Attention configuration as the graph gives it. With q_head_offset_axis
/// >= 0 the KV heads are complete on every rank (replicated) and local query
/// head i is global head index * num_heads + i, whose KV head is chosen by
/// global_num_heads / num_kv_heads.
typedef struct srt_op_attention_config {
  int64_t batch, seq, num_heads, num_kv_heads, head_dim;
  int64_t causal, sliding_window; // window 0 = none
  double scale, softcap;          // softcap 0 = none
  int64_t q_head_offset_axis, global_num_heads;
} srt_op_attention_config;

/// out[b, s, h*hd] = softmax(q k^T * scale (+ mask, softcap)) v.
srt_status srt_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t out,
                            const srt_op_attention_config *config);
/// y = act(gate) * up; activation 0 = silu, 1 = gelu (tanh form).
srt_status srt_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                      int64_t activation);
/// y = relu(x)^2.
srt_status srt_op_relu2(srt_exec *e, int64_t x, int64_t y, int64_t n);
/// y = a + b.
srt_status srt_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n);
/// Unsharded causal-LM loss: mean over kept labels (0 when none) into
/// loss (one float).
srt_status srt_op_cross_entropy(srt_exec *e, int64_t logits, int64_t labels, int64_t loss,
                                int64_t batch, int64_t seq, int64_t vocab,
                                int64_t ignore_index, int64_t shift);
/// The four steps of the split loss (see nn.irdl.mlir): max [n], partial
/// sums [n] x 2, (loss sum, count) [2], mean [1]. `vocab_axis` as above.
srt_status srt_op_ce_logit_max(srt_exec *e, int64_t logits, int64_t max, int64_t n,
                               int64_t local_vocab);
srt_status srt_op_ce_partial_sums(srt_exec *e, int64_t logits, int64_t labels, int64_t max,
                                  int64_t sum_exp, int64_t target, int64_t batch,
                                  int64_t seq, int64_t local_vocab, int64_t vocab_axis,
                                  int64_t ignore_index, int64_t shift);
srt_status srt_op_ce_loss_sum(srt_exec *e, int64_t max, int64_t sum_exp, int64_t target,
                              int64_t labels, int64_t sum_and_count, int64_t batch,
                              int64_t seq, int64_t ignore_index, int64_t shift);
srt_status srt_op_ce_mean(srt_exec *e, int64_t sum_and_count, int64_t loss);

//===----------------------------------------------------------------------===//
// Backward (d loss = 1; every output written, not accumulated)
//===----------------------------------------------------------------------===//

srt_status srt_op_embedding_grad(srt_exec *e, int64_t ids, int64_t dy, int64_t dw,
                                 int64_t n, int64_t hidden, int64_t local_vocab,
                                 int64_t vocab_axis, double scale);
srt_status srt_op_linear_grad_input(srt_exec *e, int64_t dy, int64_t w, int64_t dx,
                                    int64_t n, int64_t in, int64_t out);
srt_status srt_op_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x, int64_t dw,
                                     int64_t n, int64_t in, int64_t out);
srt_status srt_op_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db, int64_t n,
                                   int64_t out);
srt_status srt_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                      int64_t dx, int64_t n, int64_t features,
                                      int64_t group, double eps, double offset);
srt_status srt_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                       int64_t n, int64_t features, int64_t group,
                                       double eps);
srt_status srt_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                    int64_t dx, int64_t batch, int64_t seq, int64_t heads,
                                    int64_t head_dim);
/// dq, dk, dv of attention (recomputes the forward's log-sum-exp). With
/// replicated KV heads (q_head_offset_axis >= 0), dk and dv hold this
/// rank's contribution only (Partial: the caller all-reduces).
srt_status srt_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t dy,
                                 int64_t dq, int64_t dk, int64_t dv,
                                 const srt_op_attention_config *config);
srt_status srt_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy,
                           int64_t dgate, int64_t dup, int64_t n, int64_t activation);
srt_status srt_op_relu2_grad(srt_exec *e, int64_t x, int64_t dy, int64_t dx, int64_t n);
/// d loss / d logits of the unsharded loss.
srt_status srt_op_cross_entropy_grad(srt_exec *e, int64_t logits, int64_t labels,
                                     int64_t dlogits, int64_t batch, int64_t seq,
                                     int64_t vocab, int64_t ignore_index, int64_t shift);
/// d loss / d logits of the split loss from its global statistics (max,
/// sum_exp [n], and the (sum, count) pair; the mean divides by count).
srt_status srt_op_ce_logits_grad(srt_exec *e, int64_t logits, int64_t labels, int64_t max,
                                 int64_t sum_exp, int64_t sum_and_count, int64_t dlogits,
                                 int64_t batch, int64_t seq, int64_t local_vocab,
                                 int64_t vocab_axis, int64_t ignore_index, int64_t shift);

//===----------------------------------------------------------------------===//
// Collectives on mesh axis `axis` (0 = dp, 1 = tp), fp32, out of place
//===----------------------------------------------------------------------===//

/// Shapes are given as the rank and up to four dims of the LOCAL input.
srt_status srt_op_all_reduce(srt_exec *e, int64_t in, int64_t out, int64_t count,
                             int64_t axis, int64_t is_max);
srt_status srt_op_all_gather(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                             int64_t dim, int64_t rank, int64_t d0, int64_t d1, int64_t d2,
                             int64_t d3);
srt_status srt_op_reduce_scatter(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                 int64_t d2, int64_t d3);
/// Split `split_dim` into axis-size parts, exchange, concatenate on `concat_dim`.
srt_status srt_op_all_to_all(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                             int64_t split_dim, int64_t concat_dim, int64_t rank,
                             int64_t d0, int64_t d1, int64_t d2, int64_t d3);
/// This rank's slice (by its index on `axis`) of a complete tensor on `dim`.
srt_status srt_op_all_slice(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                            int64_t dim, int64_t rank, int64_t d0, int64_t d1, int64_t d2,
                            int64_t d3);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// The step's end: the total gradient norm of `program`'s parameters (each
/// logical element counted once, over dp_cp then tp), clipping by total
/// norm, AdamW on every parameter; reads the loss (one float at
/// `loss_offset`) into `result`. A non-finite norm skips the update and sets
/// result->skipped.
srt_status srt_op_optimizer_step(srt_exec *e, const srt_program *program,
                                 const srt_step_options *options, int64_t loss_offset,
                                 srt_step_result *result);

#endif // SHARDRT_OPS_H
