// Loss ops of a cuda step (shardrt/cuda.h): the phases of the split
// (vocabulary-parallel and/or batch-split) causal-LM loss, the unsharded
// loss as the same phases over the whole vocabulary, and their gradients.
// Logits are bf16; every statistic is fp32. A bad label is recorded on the
// device (srt_cuda_device.bad_label) and reported by the optimizer step,
// which reads the device's results anyway.
#include "ops_internal.h"

static srt_cuda_ce_shape ce_shape(int64_t batch, int64_t seq, int64_t local_vocab,
                                  int64_t index, int64_t parts, int64_t ignore_index,
                                  int64_t shift) {
  return (srt_cuda_ce_shape){.batch = batch,
                             .seq = seq,
                             .vocab = local_vocab * parts,
                             .vocab_start = index * local_vocab,
                             .local_vocab = local_vocab,
                             .ignore_index = ignore_index,
                             .shift = shift != 0};
}

srt_status srt_cuda_op_ce_logit_max(srt_exec *e, int64_t logits, int64_t max, int64_t n,
                                    int64_t local_vocab) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_ce_logit_max", &d));
  return CU_LAUNCH(
      srt_cuda_ce_logit_max(cu_f32(e, max), cu_bf16(e, logits), n, local_vocab, d->compute));
}

srt_status srt_cuda_op_ce_partial_sums(srt_exec *e, int64_t logits, int64_t labels,
                                       int64_t max, int64_t sum_exp, int64_t target,
                                       int64_t batch, int64_t seq, int64_t local_vocab,
                                       int64_t vocab_axis, int64_t ignore_index,
                                       int64_t shift) {
  const char *op = "srt_cuda_op_ce_partial_sums";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  int64_t index, parts;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &parts));
  srt_cuda_ce_shape s = ce_shape(batch, seq, local_vocab, index, parts, ignore_index, shift);
  return CU_LAUNCH(srt_cuda_ce_partial_sums(cu_f32(e, sum_exp), cu_f32(e, target),
                                            cu_bf16(e, logits), cu_i64(e, labels),
                                            cu_f32(e, max), &s, d->bad_label, d->compute));
}

srt_status srt_cuda_op_ce_loss_sum(srt_exec *e, int64_t max, int64_t sum_exp, int64_t target,
                                   int64_t labels, int64_t sum_and_count, int64_t batch,
                                   int64_t seq, int64_t ignore_index, int64_t shift) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_ce_loss_sum", &d));
  // The sum reads only rows and labels: the vocabulary plays no part.
  srt_cuda_ce_shape s = ce_shape(batch, seq, 1, 0, 1, ignore_index, shift);
  return CU_LAUNCH(srt_cuda_ce_loss_sum(cu_f32(e, sum_and_count), cu_f32(e, max),
                                        cu_f32(e, sum_exp), cu_f32(e, target),
                                        cu_i64(e, labels), &s, d->compute));
}

srt_status srt_cuda_op_ce_mean(srt_exec *e, int64_t sum_and_count, int64_t loss) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, "srt_cuda_op_ce_mean", &d));
  return CU_LAUNCH(srt_cuda_ce_mean(cu_f32(e, loss), cu_f32(e, sum_and_count), d->compute));
}

srt_status srt_cuda_op_ce_logits_grad(srt_exec *e, int64_t logits, int64_t labels,
                                      int64_t max, int64_t sum_exp, int64_t sum_and_count,
                                      int64_t dlogits, int64_t batch, int64_t seq,
                                      int64_t local_vocab, int64_t vocab_axis,
                                      int64_t ignore_index, int64_t shift) {
  const char *op = "srt_cuda_op_ce_logits_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(
      srt_cuda_device_of(e, op, &d));
  int64_t index, parts;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &parts));
  srt_cuda_ce_shape s = ce_shape(batch, seq, local_vocab, index, parts, ignore_index, shift);
  return CU_LAUNCH(srt_cuda_ce_logits_grad(cu_bf16(e, dlogits), cu_bf16(e, logits),
                                           cu_i64(e, labels), cu_f32(e, max),
                                           cu_f32(e, sum_exp), cu_f32(e, sum_and_count), &s,
                                           d->compute));
}

// The unsharded loss's statistics in scratch: max, sum_exp, target [rows]
// and (sum, count) [2], all fp32.
static srt_status unsharded_stats(srt_exec *e, srt_cuda_device *d, int64_t logits,
                                  int64_t labels, const srt_cuda_ce_shape *s, float **stats) {
  int64_t rows = s->batch * s->seq;
  void *scratch;
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, (size_t)(3 * rows + 2) * sizeof(float), &scratch));
  float *max = scratch, *sum_exp = max + rows, *target = sum_exp + rows, *pair = target + rows;
  SRT_RETURN_IF_ERROR(CU_LAUNCH(
      srt_cuda_ce_logit_max(max, cu_bf16(e, logits), rows, s->local_vocab, d->compute)));
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_ce_partial_sums(sum_exp, target, cu_bf16(e, logits),
                                                         cu_i64(e, labels), max, s,
                                                         d->bad_label, d->compute)));
  SRT_RETURN_IF_ERROR(CU_LAUNCH(
      srt_cuda_ce_loss_sum(pair, max, sum_exp, target, cu_i64(e, labels), s, d->compute)));
  *stats = scratch;
  return NULL;
}

srt_status srt_cuda_op_cross_entropy(srt_exec *e, int64_t logits, int64_t labels,
                                     int64_t loss, int64_t batch, int64_t seq, int64_t vocab,
                                     int64_t ignore_index, int64_t shift) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_cross_entropy", &d));
  srt_cuda_ce_shape s = ce_shape(batch, seq, vocab, 0, 1, ignore_index, shift);
  float *stats;
  SRT_RETURN_IF_ERROR(unsharded_stats(e, d, logits, labels, &s, &stats));
  return CU_LAUNCH(srt_cuda_ce_mean(cu_f32(e, loss), stats + 3 * batch * seq, d->compute));
}

srt_status srt_cuda_op_cross_entropy_grad(srt_exec *e, int64_t logits, int64_t labels,
                                          int64_t dlogits, int64_t batch, int64_t seq,
                                          int64_t vocab, int64_t ignore_index, int64_t shift) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_cross_entropy_grad", &d));
  srt_cuda_ce_shape s = ce_shape(batch, seq, vocab, 0, 1, ignore_index, shift);
  float *stats;
  SRT_RETURN_IF_ERROR(unsharded_stats(e, d, logits, labels, &s, &stats));
  int64_t rows = batch * seq;
  return CU_LAUNCH(srt_cuda_ce_logits_grad(cu_bf16(e, dlogits), cu_bf16(e, logits),
                                           cu_i64(e, labels), stats, stats + rows,
                                           stats + 3 * rows, &s, d->compute));
}
