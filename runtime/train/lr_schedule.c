// Learning-rate schedules of the training driver (--lr-schedule): the
// formulas of Megatron-LM's OptimizerParamScheduler.get_lr
// (megatron/core/optimizer_param_scheduler.py) and torchtitan's
// lr_scheduler (linear warmup, then constant / linear / cosine decay, or
// warmup-stable-decay), on the AdamW step number. docs/runtime.md has them
// written out.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

static const char *const kNames[] = {"constant", "linear", "cosine", "wsd"};

srt_status train_lr_schedule_parse(const char *v, train_lr_kind *out) {
  for (int k = 0; k < 4; ++k)
    if (!strcmp(v, kNames[k])) {
      *out = (train_lr_kind)k;
      return NULL;
    }
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "--lr-schedule: '%s' is not constant, linear, cosine or wsd", v);
}

double train_lr_at(const train_lr_schedule *s, int64_t step) {
  double peak = s->lr, floor = s->min_lr;
  if (s->warmup > 0 && step <= s->warmup) // Megatron: init_lr 0 -> lr at step = warmup
    return peak * (double)step / (double)s->warmup;
  if (s->kind == TRAIN_LR_CONSTANT)
    return peak;
  if (step >= s->decay_steps)
    return floor;
  double coeff;
  if (s->kind == TRAIN_LR_WSD) { // stable, then linear decay over the last fraction
    int64_t decay = train_lr_wsd_decay_steps(s);
    int64_t anneal_start = s->decay_steps - decay;
    if (step <= anneal_start)
      return peak;
    coeff = 1.0 - (double)(step - anneal_start) / (double)decay;
  } else {
    double ratio = (double)(step - s->warmup) / (double)(s->decay_steps - s->warmup);
    coeff = s->kind == TRAIN_LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(3.14159265358979323846 * ratio) + 1.0);
  }
  return floor + coeff * (peak - floor);
}

int64_t train_lr_wsd_decay_steps(const train_lr_schedule *s) {
  int64_t decay = (int64_t)llround(s->decay_fraction * (double)(s->decay_steps - s->warmup));
  return decay < 1 ? 1 : decay;
}

void train_lr_describe(const train_lr_schedule *s, char *buf, size_t size) {
  // %.9g keeps a float's every digit: a resumed run compares these texts.
  int n = snprintf(buf, size, "%s lr=%.9g warmup=%lld", kNames[s->kind], s->lr,
                   (long long)s->warmup);
  if (s->kind != TRAIN_LR_CONSTANT && n >= 0 && (size_t)n < size)
    n += snprintf(buf + n, size - (size_t)n, " min_lr=%.9g decay_steps=%lld", s->min_lr,
                  (long long)s->decay_steps);
  if (s->kind == TRAIN_LR_WSD && n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, " decay_fraction=%.9g", s->decay_fraction);
}

srt_status train_lr_check(const train_lr_schedule *s) {
  if (s->min_lr < 0 || s->min_lr > s->lr)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--min-lr %g must lie in [0, --lr %g]", s->min_lr,
                     s->lr);
  if (s->warmup < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--warmup-steps %lld must be >= 0",
                     (long long)s->warmup);
  if (s->kind != TRAIN_LR_CONSTANT && s->decay_steps <= s->warmup)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--lr-schedule %s: the decay ends at step %lld (--lr-decay-steps, by "
                     "default --steps), not after the %lld warmup steps",
                     kNames[s->kind], (long long)s->decay_steps, (long long)s->warmup);
  if (s->kind == TRAIN_LR_WSD && !(s->decay_fraction > 0 && s->decay_fraction <= 1))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--decay-fraction %g must lie in (0, 1]",
                     s->decay_fraction);
  return NULL;
}
