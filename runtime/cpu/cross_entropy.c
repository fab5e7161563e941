// Causal-LM cross-entropy (shifted labels, ignore_index, mean over kept
// labels), plain or vocabulary-parallel: phase kernels and their composition.
// Row-wise phases are threaded over rows (each row's sums in a fixed order);
// the loss sum over rows stays sequential (B * S terms).
#include "shardrt/kernels.h"

#include <math.h>
#include <string.h>

#include "vmath.h"

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

// Label scored by logits row r = b * S + s, or ignore_index when the row is
// not scored (the last position of a shifted row).
static int64_t target_of(const srt_cross_entropy_config *c,
                         const int64_t *labels, int64_t r) {
  if (!c->shift)
    return labels[r];
  return r % c->seq + 1 < c->seq ? labels[r + 1] : c->ignore_index;
}

// Config and every scored label; labels are replicated over the vocabulary
// group, so all its ranks fail here alike.
static srt_status check_labels(const int64_t *labels,
                               const srt_cross_entropy_config *c) {
  SRT_RETURN_IF_ERROR(check_config(c));
  for (int64_t r = 0; r < c->batch * c->seq; r++) {
    int64_t y = target_of(c, labels, r);
    if (y != c->ignore_index && (y < 0 || y >= c->vocab))
      return SRT_ERROR(SRT_OUT_OF_RANGE,
                       "cross_entropy: label %lld at [%lld, %lld] outside the "
                       "vocabulary [0, %lld) and not ignore_index %lld",
                       (long long)y, (long long)(r / c->seq),
                       (long long)(r % c->seq + (c->shift ? 1 : 0)),
                       (long long)c->vocab, (long long)c->ignore_index);
  }
  return NULL;
}

int64_t srt_cpu_cross_entropy_workspace_floats(
    const srt_cross_entropy_config *config) {
  return 2 * config->batch * config->seq;
}

int64_t srt_cpu_cross_entropy_count(const int64_t *labels,
                                    const srt_cross_entropy_config *config) {
  int64_t kept = 0;
  for (int64_t r = 0; r < config->batch * config->seq; r++)
    kept += target_of(config, labels, r) != config->ignore_index;
  return kept;
}

SRT_CPU_CLONES
static float row_max(const float *x, int64_t n) { return srt_max(x, n); }

void srt_cpu_cross_entropy_logit_max(float *max, const float *logits,
                                     int64_t rows, int64_t local_vocab) {
#pragma omp parallel for schedule(static) if (rows * local_vocab > kChunk)
  for (int64_t r = 0; r < rows; r++)
    max[r] = row_max(logits + r * local_vocab, local_vocab);
}

SRT_CPU_CLONES
static double row_sum_exp(const float *x, int64_t n, float m) {
  return srt_sum_exp_f64(x, n, m);
}

// Each row's sum of exp(x - max) and target logit, given each row's max, or
// (found_max set) finding it first in the same task, so the sum reads the
// row from cache: one pass over the logits from memory instead of two, the
// same values as srt_cpu_cross_entropy_logit_max then this.
static void partial_sums(float *sum_exp, float *target, const float *logits,
                         const int64_t *labels, const float *max, float *found_max,
                         const srt_cross_entropy_config *c) {
  int64_t lv = c->local_vocab, rows = c->batch * c->seq;
#pragma omp parallel for schedule(static) if (rows * lv > kChunk)
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * lv;
    float m = found_max ? (found_max[r] = row_max(x, lv)) : max[r];
    sum_exp[r] = (float)row_sum_exp(x, lv, m);
    // ignore_index (negative) and other ranks' labels fall outside
    // [0, local_vocab) after the unsigned subtraction.
    uint64_t local = (uint64_t)target_of(c, labels, r) - (uint64_t)c->vocab_start;
    target[r] = local < (uint64_t)lv ? x[local] : 0.0f;
  }
}

srt_status srt_cpu_cross_entropy_partial_sums(
    float *sum_exp, float *target, const float *logits, const int64_t *labels,
    const float *max, const srt_cross_entropy_config *config) {
  SRT_RETURN_IF_ERROR(check_labels(labels, config));
  partial_sums(sum_exp, target, logits, labels, max, NULL, config);
  return NULL;
}

void srt_cpu_cross_entropy_loss_sum(float sum_and_count[2], const float *max,
                                    const float *sum_exp, const float *target,
                                    const int64_t *labels,
                                    const srt_cross_entropy_config *config) {
  double total = 0.0;
  int64_t kept = 0;
  for (int64_t r = 0; r < config->batch * config->seq; r++) {
    if (target_of(config, labels, r) == config->ignore_index)
      continue;
    total += (double)max[r] + log((double)sum_exp[r]) - (double)target[r];
    kept++;
  }
  sum_and_count[0] = (float)total;
  sum_and_count[1] = (float)kept;
}

float srt_cpu_cross_entropy_mean(const float sum_and_count[2]) {
  return sum_and_count[1] > 0.0f ? sum_and_count[0] / sum_and_count[1] : 0.0f;
}

void srt_cpu_cross_entropy_lse(float *lse, const float *max,
                               const float *sum_exp, int64_t rows) {
  for (int64_t r = 0; r < rows; r++)
    lse[r] = max[r] + logf(sum_exp[r]);
}

srt_status srt_cpu_cross_entropy_forward(float *loss, float *lse,
                                         const float *logits,
                                         const int64_t *labels,
                                         float *workspace,
                                         const srt_cross_entropy_config *config) {
  const srt_cross_entropy_config *c = config;
  // Everything that can be refused is refused before the first collective.
  SRT_RETURN_IF_ERROR(check_labels(labels, c));
  int64_t rows = c->batch * c->seq;
  float *sum_exp = workspace, *target = workspace + rows; // adjacent: one SUM
  // A split vocabulary needs the global max before any sum: two passes.
  bool split = c->allreduce && rows > 0;
  if (split) {
    srt_cpu_cross_entropy_logit_max(lse, logits, rows, c->local_vocab);
    SRT_RETURN_IF_ERROR(c->allreduce(c->group, lse, rows, SRT_REDUCE_MAX));
  }
  partial_sums(sum_exp, target, logits, labels, lse, split ? NULL : lse, c);
  if (c->allreduce && rows > 0)
    SRT_RETURN_IF_ERROR(
        c->allreduce(c->group, workspace, 2 * rows, SRT_REDUCE_SUM));
  float sum_and_count[2];
  srt_cpu_cross_entropy_loss_sum(sum_and_count, lse, sum_exp, target, labels, c);
  *loss = srt_cpu_cross_entropy_mean(sum_and_count);
  srt_cpu_cross_entropy_lse(lse, lse, sum_exp, rows);
  if (c->shift)
    for (int64_t b = 0; b < c->batch && c->seq > 0; b++)
      lse[b * c->seq + c->seq - 1] = 0.0f;
  return NULL;
}

// dx = g (softmax(x) - onehot(local)) over one row; local >= lv: no target here.
SRT_CPU_CLONES
static void softmax_grad_row(float *dx, const float *x, int64_t lv, float l, float g,
                             uint64_t local) {
#pragma omp simd
  for (int64_t v = 0; v < lv; v++)
    dx[v] = g * srt_expf_below_88(x[v] - l);
  if (local < (uint64_t)lv)
    dx[local] -= g;
}

void srt_cpu_cross_entropy_backward(float *dlogits, const float *logits,
                                    const float *lse, const int64_t *labels,
                                    float dloss, float count,
                                    const srt_cross_entropy_config *config) {
  const srt_cross_entropy_config *c = config;
  int64_t lv = c->local_vocab, rows = c->batch * c->seq;
  float g = count > 0.0f ? (float)((double)dloss / (double)count) : 0.0f;
#pragma omp parallel for schedule(static) if (rows * lv > kChunk)
  for (int64_t r = 0; r < rows; r++) {
    float *dx = dlogits + r * lv;
    int64_t y = target_of(c, labels, r);
    if (y == c->ignore_index || g == 0.0f) {
      memset(dx, 0, (size_t)lv * sizeof *dx);
      continue;
    }
    softmax_grad_row(dx, logits + r * lv, lv, lse[r], g,
                     (uint64_t)y - (uint64_t)c->vocab_start);
  }
}
