// Loss ops of the cpu backend (shardrt/cpu.h): the unsharded causal-LM
// cross-entropy and its gradient, and the phases of the split
// (vocabulary-parallel and/or batch-split) loss with its gradient. The
// rank's vocabulary range is [index * local_vocab, (index + 1) * local_vocab)
// on `vocab_axis`; the full vocabulary is local_vocab x the axis size.
//
// Scratch (the context's op scratch): the row log-sum-exp [B*S] and, for
// the unsharded loss, the kernel workspace [2*B*S].
#include "ops_internal.h"
#include "shardrt/kernels.h"

// The kernel configuration of a loss over [batch, seq] rows whose local
// vocabulary is the index-th of `parts` slices of local_vocab.
static srt_cross_entropy_config ce_config(int64_t batch, int64_t seq, int64_t local_vocab,
                                          int64_t index, int64_t parts, int64_t ignore_index,
                                          int64_t shift) {
  return (srt_cross_entropy_config){.batch = batch,
                                    .seq = seq,
                                    .vocab = local_vocab * parts,
                                    .vocab_start = index * local_vocab,
                                    .local_vocab = local_vocab,
                                    .shift = shift != 0,
                                    .ignore_index = ignore_index,
                                    .allreduce = NULL,
                                    .group = NULL};
}

srt_status srt_cpu_op_cross_entropy(srt_exec *e, int64_t logits, int64_t labels, int64_t loss,
                                    int64_t batch, int64_t seq, int64_t vocab,
                                    int64_t ignore_index, int64_t shift) {
  srt_cross_entropy_config c = ce_config(batch, seq, vocab, 0, 1, ignore_index, shift);
  int64_t rows = batch * seq, ws = srt_cpu_cross_entropy_workspace_floats(&c);
  float *scratch;
  SRT_RETURN_IF_ERROR(ops_scratch(e, rows + ws, &scratch));
  return srt_cpu_cross_entropy_forward(ops_f32(e, loss), scratch, ops_f32(e, logits),
                                       ops_i64(e, labels), scratch + rows, &c);
}

srt_status srt_cpu_op_cross_entropy_grad(srt_exec *e, int64_t logits, int64_t labels,
                                         int64_t dlogits, int64_t batch, int64_t seq,
                                         int64_t vocab, int64_t ignore_index, int64_t shift) {
  srt_cross_entropy_config c = ce_config(batch, seq, vocab, 0, 1, ignore_index, shift);
  int64_t rows = batch * seq, ws = srt_cpu_cross_entropy_workspace_floats(&c);
  float *scratch, loss;
  SRT_RETURN_IF_ERROR(ops_scratch(e, rows + ws, &scratch));
  // The forward gives the row log-sum-exp (and validates the labels).
  SRT_RETURN_IF_ERROR(srt_cpu_cross_entropy_forward(&loss, scratch, ops_f32(e, logits),
                                                    ops_i64(e, labels), scratch + rows, &c));
  int64_t count = srt_cpu_cross_entropy_count(ops_i64(e, labels), &c);
  srt_cpu_cross_entropy_backward(ops_f32(e, dlogits), ops_f32(e, logits), scratch,
                                 ops_i64(e, labels), 1.0f, (float)count, &c);
  return NULL;
}

srt_status srt_cpu_op_ce_logit_max(srt_exec *e, int64_t logits, int64_t max, int64_t n,
                                   int64_t local_vocab) {
  srt_cpu_cross_entropy_logit_max(ops_f32(e, max), ops_f32(e, logits), n, local_vocab);
  return NULL;
}

srt_status srt_cpu_op_ce_partial_sums(srt_exec *e, int64_t logits, int64_t labels, int64_t max,
                                      int64_t sum_exp, int64_t target, int64_t batch,
                                      int64_t seq, int64_t local_vocab, int64_t vocab_axis,
                                      int64_t ignore_index, int64_t shift) {
  const char *op = "srt_cpu_op_ce_partial_sums";
  int64_t index, parts;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &parts));
  srt_cross_entropy_config c =
      ce_config(batch, seq, local_vocab, index, parts, ignore_index, shift);
  return srt_cpu_cross_entropy_partial_sums(ops_f32(e, sum_exp), ops_f32(e, target),
                                            ops_f32(e, logits), ops_i64(e, labels),
                                            ops_f32(e, max), &c);
}

srt_status srt_cpu_op_ce_loss_sum(srt_exec *e, int64_t max, int64_t sum_exp, int64_t target,
                                  int64_t labels, int64_t sum_and_count, int64_t batch,
                                  int64_t seq, int64_t ignore_index, int64_t shift) {
  // The sum reads only rows and labels: the vocabulary size plays no part.
  srt_cross_entropy_config c = ce_config(batch, seq, 1, 0, 1, ignore_index, shift);
  srt_cpu_cross_entropy_loss_sum(ops_f32(e, sum_and_count), ops_f32(e, max),
                                 ops_f32(e, sum_exp), ops_f32(e, target), ops_i64(e, labels),
                                 &c);
  return NULL;
}

srt_status srt_cpu_op_ce_mean(srt_exec *e, int64_t sum_and_count, int64_t loss) {
  *ops_f32(e, loss) = srt_cpu_cross_entropy_mean(ops_f32(e, sum_and_count));
  return NULL;
}

srt_status srt_cpu_op_ce_logits_grad(srt_exec *e, int64_t logits, int64_t labels, int64_t max,
                                     int64_t sum_exp, int64_t sum_and_count, int64_t dlogits,
                                     int64_t batch, int64_t seq, int64_t local_vocab,
                                     int64_t vocab_axis, int64_t ignore_index, int64_t shift) {
  const char *op = "srt_cpu_op_ce_logits_grad";
  int64_t index, parts;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &parts));
  srt_cross_entropy_config c =
      ce_config(batch, seq, local_vocab, index, parts, ignore_index, shift);
  int64_t rows = batch * seq;
  float *lse;
  SRT_RETURN_IF_ERROR(ops_scratch(e, rows, &lse));
  srt_cpu_cross_entropy_lse(lse, ops_f32(e, max), ops_f32(e, sum_exp), rows);
  // The mean divided by the global count (the pair's second element, summed
  // over every rank that split the batch).
  srt_cpu_cross_entropy_backward(ops_f32(e, dlogits), ops_f32(e, logits), lse,
                                 ops_i64(e, labels), 1.0f, ops_f32(e, sum_and_count)[1], &c);
  return NULL;
}
