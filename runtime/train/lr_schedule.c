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

srt_status train_lr_parse_description(const char *text, train_lr_schedule *out) {
  train_lr_schedule s = *out;
  char kind[16];
  int used = 0;
  bool ok = sscanf(text, "%15s%n", kind, &used) == 1;
  srt_status ks = ok ? train_lr_schedule_parse(kind, &s.kind) : NULL;
  ok = ok && !ks;
  srt_status_free(ks);
  for (const char *c = text + used; ok && *c;) {
    char key[32];
    double v;
    int n = 0;
    ok = sscanf(c, " %31[a-z_]=%lf%n", key, &v, &n) == 2 && n > 0;
    if (!ok)
      break;
    if (!strcmp(key, "lr"))
      s.lr = v;
    else if (!strcmp(key, "warmup"))
      s.warmup = (int64_t)v;
    else if (!strcmp(key, "min_lr"))
      s.min_lr = v;
    else if (!strcmp(key, "decay_steps"))
      s.decay_steps = (int64_t)v;
    else if (!strcmp(key, "decay_fraction"))
      s.decay_fraction = v;
    else
      ok = false;
    c += n;
  }
  if (!ok)
    return SRT_ERROR(SRT_DATA_LOSS, "shardrt.lr_schedule '%s' is not an lr schedule", text);
  *out = s;
  return NULL;
}

// Schedule flag k (the bit 1 << k: kind, lr, warmup, min_lr, decay_steps,
// decay_fraction) of `s`, as train_lr_describe writes it.
static void flag_text(const train_lr_schedule *s, int k, char *buf, size_t size) {
  switch (k) {
  case 0: snprintf(buf, size, "%s", kNames[s->kind]); break;
  case 1: snprintf(buf, size, "%.9g", s->lr); break;
  case 2: snprintf(buf, size, "%lld", (long long)s->warmup); break;
  case 3: snprintf(buf, size, "%.9g", s->min_lr); break;
  case 4: snprintf(buf, size, "%lld", (long long)s->decay_steps); break;
  default: snprintf(buf, size, "%.9g", s->decay_fraction); break;
  }
}

// Flag k of `s` set to that of `r`.
static void take_flag(train_lr_schedule *s, const train_lr_schedule *r, int k) {
  switch (k) {
  case 0: s->kind = r->kind; break;
  case 1: s->lr = r->lr; break;
  case 2: s->warmup = r->warmup; break;
  case 3: s->min_lr = r->min_lr; break;
  case 4: s->decay_steps = r->decay_steps; break;
  default: s->decay_fraction = r->decay_fraction; break;
  }
}

srt_status train_lr_resume(train_lr_schedule *s, unsigned given, const char *recorded,
                           const char *ckpt, char *taken, size_t size) {
  static const char *const kFlags[] = {"--lr-schedule", "--lr",            "--warmup-steps",
                                       "--min-lr",      "--lr-decay-steps", "--decay-fraction"};
  train_lr_schedule r = {.kind = TRAIN_LR_CONSTANT, .decay_steps = -1, .decay_fraction = 0.1};
  SRT_RETURN_IF_ERROR(train_lr_parse_description(recorded, &r));
  taken[0] = 0;
  for (int k = 0; k < 6; ++k) {
    // A constant schedule records no decay; only wsd its fraction.
    bool defined = k < 3 || (r.kind != TRAIN_LR_CONSTANT && k < 5) || r.kind == TRAIN_LR_WSD;
    if (!defined)
      continue;
    char mine[64], theirs[64];
    flag_text(&r, k, theirs, sizeof theirs);
    if (given & (1u << k)) {
      flag_text(s, k, mine, sizeof mine);
      if (strcmp(mine, theirs))
        return SRT_ERROR(SRT_FAILED_PRECONDITION,
                         "'%s' was trained with %s %s (its schedule '%s'), this run gives %s "
                         "%s: leave the flag out to continue the recorded schedule, or pass "
                         "--override-lr-schedule to train on with the flags given",
                         ckpt, kFlags[k], theirs, recorded, kFlags[k], mine);
      continue;
    }
    take_flag(s, &r, k);
    size_t n = strlen(taken);
    snprintf(taken + n, size - n, "%s%s", n ? ", " : "", kFlags[k]);
  }
  return NULL;
}

srt_status train_lr_finish(train_lr_schedule *s, unsigned given, int64_t steps) {
  if (s->decay_steps < 0)
    s->decay_steps = steps;
  if (s->kind == TRAIN_LR_CONSTANT &&
      (s->min_lr != 0 || ((given & TRAIN_GIVEN_DECAY_STEPS) && s->decay_steps != steps)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--min-lr and --lr-decay-steps need a decaying --lr-schedule (linear, "
                     "cosine or wsd)");
  if (s->kind != TRAIN_LR_WSD && s->decay_fraction != 0.1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--decay-fraction needs --lr-schedule wsd");
  return train_lr_check(s);
}
