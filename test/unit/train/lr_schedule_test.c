// The driver's lr schedules (runtime/train/lr_schedule.c) against values
// worked out by hand from Megatron-LM's OptimizerParamScheduler.get_lr and
// torchtitan's warmup-stable-decay: warmup ramps, the cosine midpoint, the
// linear quarter points, wsd's stable phase and decay, min_lr after the end,
// and the refusals. Tolerance 1e-12 (float64 throughout).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "train_internal.h"


static void near(double got, double want) {
  if (fabs(got - want) > 1e-12)
    fail_msg("lr %.17g, expected %.17g", got, want);
}

static void test_warmup_then_constant(void **state) {
  (void)state;
  train_lr_schedule s = {TRAIN_LR_CONSTANT, 1e-3, 0, 4, 100, 0.1};
  near(train_lr_at(&s, 1), 0.25e-3); // Megatron: lr * step / warmup
  near(train_lr_at(&s, 2), 0.5e-3);
  near(train_lr_at(&s, 4), 1e-3);
  near(train_lr_at(&s, 5), 1e-3);
  near(train_lr_at(&s, 1000), 1e-3);
}

static void test_cosine(void **state) {
  (void)state;
  // warmup 10, decay to step 110: the midpoint (step 60) is (lr + min) / 2.
  train_lr_schedule s = {TRAIN_LR_COSINE, 1e-3, 1e-4, 10, 110, 0.1};
  near(train_lr_at(&s, 10), 1e-3);
  near(train_lr_at(&s, 60), 0.55e-3);
  // a quarter of the way: min + (lr - min) (1 + cos(pi / 4)) / 2
  near(train_lr_at(&s, 35), 1e-4 + 0.9e-3 * (1 + sqrt(0.5)) / 2);
  near(train_lr_at(&s, 110), 1e-4);
  near(train_lr_at(&s, 500), 1e-4);
}

static void test_linear(void **state) {
  (void)state;
  train_lr_schedule s = {TRAIN_LR_LINEAR, 2.0, 0.0, 0, 8, 0.1};
  near(train_lr_at(&s, 1), 1.75); // no warmup: decay from step 0
  near(train_lr_at(&s, 2), 1.5);
  near(train_lr_at(&s, 6), 0.5);
  near(train_lr_at(&s, 8), 0.0);
}

static void test_wsd(void **state) {
  (void)state;
  // warmup 10, 100 steps after it, the last 20% (20 steps) decay linearly.
  train_lr_schedule s = {TRAIN_LR_WSD, 1.0, 0.1, 10, 110, 0.2};
  assert_int_equal(train_lr_wsd_decay_steps(&s), 20);
  near(train_lr_at(&s, 5), 0.5);
  near(train_lr_at(&s, 50), 1.0);
  near(train_lr_at(&s, 90), 1.0);  // the last stable step
  near(train_lr_at(&s, 100), 0.55); // half-way through the decay
  near(train_lr_at(&s, 110), 0.1);
}

static void test_describe_and_refusals(void **state) {
  (void)state;
  char buf[256];
  train_lr_schedule s = {TRAIN_LR_COSINE, 1e-3, 0, 10, 100, 0.1};
  train_lr_describe(&s, buf, sizeof buf);
  assert_string_equal(buf, "cosine lr=0.001 warmup=10 min_lr=0 decay_steps=100");
  assert_null(train_lr_check(&s));
  train_lr_schedule bad = s;
  bad.min_lr = 2e-3; // above lr
  srt_status st = train_lr_check(&bad);
  assert_non_null(st);
  assert_non_null(strstr(srt_status_message(st), "--min-lr"));
  srt_status_free(st);
  bad = s;
  bad.decay_steps = 10; // ends within the warmup
  st = train_lr_check(&bad);
  assert_non_null(strstr(srt_status_message(st), "--lr-decay-steps"));
  srt_status_free(st);
  train_lr_kind k;
  st = train_lr_schedule_parse("exponential", &k);
  assert_non_null(strstr(srt_status_message(st), "exponential"));
  srt_status_free(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warmup_then_constant),
      cmocka_unit_test(test_cosine),
      cmocka_unit_test(test_linear),
      cmocka_unit_test(test_wsd),
      cmocka_unit_test(test_describe_and_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
