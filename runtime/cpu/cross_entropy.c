// Causal-LM cross-entropy (shifted labels, ignore_index, mean over kept
// labels), plain or vocabulary-parallel over a caller-given all-reduce.
#include "shardrt/kernels.h"

#include <math.h>

static srt_status check_config(const srt_cross_entropy_config *c) {
  if (c->batch < 0 || c->seq < 0 || c->vocab <= 0 || c->local_vocab <= 0 ||
      c->vocab_start < 0 || c->local_vocab > c->vocab - c->vocab_start)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "cross_entropy: batch %lld, seq %lld, local vocab range "
                     "[%lld, %lld) must lie in the vocabulary [0, %lld)",
                     (long long)c->batch, (long long)c->seq,
                     (long long)c->vocab_start,
                     (long long)(c->vocab_start + c->local_vocab),
                     (long long)c->vocab);
  return NULL;
}

int64_t srt_cpu_cross_entropy_workspace_floats(
    const srt_cross_entropy_config *config) {
  return 2 * config->batch * config->seq;
}

// Label scored by logits row (b, s), or ignore_index when none is (the last
// position of a shifted row).
static int64_t target_of(const srt_cross_entropy_config *c,
                         const int64_t *labels, int64_t b, int64_t s) {
  if (c->shift)
    return s + 1 < c->seq ? labels[b * c->seq + s + 1] : c->ignore_index;
  return labels[b * c->seq + s];
}

srt_status srt_cpu_cross_entropy_forward(float *loss, float *lse,
                                         const float *logits,
                                         const int64_t *labels,
                                         float *workspace,
                                         const srt_cross_entropy_config *config) {
  const srt_cross_entropy_config *c = config;
  SRT_RETURN_IF_ERROR(check_config(c));
  int64_t rows = c->batch * c->seq, lv = c->local_vocab;
  // Validate every label before any collective: labels are replicated over
  // the group, so all ranks fail here together and none waits in a
  // collective for a rank that returned.
  int64_t kept = 0;
  for (int64_t b = 0; b < c->batch; b++) {
    for (int64_t s = 0; s < c->seq; s++) {
      int64_t y = target_of(c, labels, b, s);
      if (y == c->ignore_index)
        continue;
      if (y < 0 || y >= c->vocab)
        return SRT_ERROR(SRT_OUT_OF_RANGE,
                         "cross_entropy: label %lld at [%lld, %lld] outside "
                         "the vocabulary [0, %lld) and not ignore_index %lld",
                         (long long)y, (long long)b,
                         (long long)(s + (c->shift ? 1 : 0)),
                         (long long)c->vocab, (long long)c->ignore_index);
      kept++;
    }
  }
  float *sums = workspace;          // [rows] sum of exp(logit - max)
  float *targets = workspace + rows; // [rows] target logit (0 off this rank)

  // Phase 1: row max over the local slice, then over the group. lse holds
  // the max until phase 3.
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * lv;
    float mx = -INFINITY;
    for (int64_t v = 0; v < lv; v++)
      mx = x[v] > mx ? x[v] : mx;
    lse[r] = mx;
  }
  if (c->allreduce && rows > 0)
    SRT_RETURN_IF_ERROR(c->allreduce(c->group, lse, rows, SRT_REDUCE_MAX));

  // Phase 2: local sums of exp and the target logit, one SUM over the group.
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * lv;
    float mx = lse[r];
    double sum = 0.0;
    for (int64_t v = 0; v < lv; v++)
      sum += expf(x[v] - mx);
    sums[r] = (float)sum;
    int64_t y = target_of(c, labels, r / c->seq, r % c->seq);
    uint64_t local = (uint64_t)y - (uint64_t)c->vocab_start;
    targets[r] = y != c->ignore_index && local < (uint64_t)lv ? x[local] : 0.0f;
  }
  if (c->allreduce && rows > 0)
    SRT_RETURN_IF_ERROR(
        c->allreduce(c->group, workspace, 2 * rows, SRT_REDUCE_SUM));

  // Phase 3: lse and the mean over kept rows (in double: up to B*S terms).
  double total = 0.0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t s = r % c->seq;
    if (c->shift && s == c->seq - 1) {
      lse[r] = 0.0f;
      continue;
    }
    lse[r] = lse[r] + logf(sums[r]);
    int64_t y = target_of(c, labels, r / c->seq, s);
    if (y != c->ignore_index)
      total += (double)lse[r] - (double)targets[r];
  }
  *loss = (float)(total / (double)kept); // kept = 0: NaN, as torch
  return NULL;
}

void srt_cpu_cross_entropy_backward(float *dlogits, const float *logits,
                                    const float *lse, const int64_t *labels,
                                    float dloss,
                                    const srt_cross_entropy_config *config) {
  const srt_cross_entropy_config *c = config;
  int64_t rows = c->batch * c->seq, lv = c->local_vocab;
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; r++)
    if (target_of(c, labels, r / c->seq, r % c->seq) != c->ignore_index)
      kept++;
  float g = kept > 0 ? (float)((double)dloss / (double)kept) : 0.0f;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * lv;
    float *dx = dlogits + r * lv;
    int64_t y = target_of(c, labels, r / c->seq, r % c->seq);
    if (y == c->ignore_index || g == 0.0f) {
      for (int64_t v = 0; v < lv; v++)
        dx[v] = 0.0f;
      continue;
    }
    float l = lse[r];
    for (int64_t v = 0; v < lv; v++)
      dx[v] = g * expf(x[v] - l);
    uint64_t local = (uint64_t)y - (uint64_t)c->vocab_start;
    if (local < (uint64_t)lv)
      dx[local] -= g;
  }
}
