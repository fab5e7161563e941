// Unit tests of the AdamW step (runtime/cpu/adamw.c) against a float64
// re-implementation of torch.optim.AdamW over several steps.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/convert.h"
#include "shardrt/kernels.h"

enum { kN = 257, kSteps = 10 };

// torch.optim.AdamW (amsgrad=False), written from its documented algorithm:
// p -= lr wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) m / (sqrt(v / (1 - b2^t)) + eps).
static void ref_step(double *p, double *m, double *v, const double *g, int t,
                     const srt_adamw_config *c) {
  double lr = c->lr, b1 = c->beta1, b2 = c->beta2;
  for (int i = 0; i < kN; i++) {
    p[i] -= lr * (double)c->weight_decay * p[i];
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
    p[i] -= lr * mhat / (sqrt(vhat) + (double)c->eps);
  }
}

static void run(const srt_adamw_config *c, uint64_t seed, double atol) {
  test_rng rng = {seed};
  float p[kN], m[kN] = {0}, v[kN] = {0}, g[kN];
  double pd[kN], md[kN] = {0}, vd[kN] = {0}, gd[kN];
  test_fill(p, kN, &rng, -1, 1);
  for (int i = 0; i < kN; i++)
    pd[i] = p[i];
  for (int t = 1; t <= kSteps; t++) {
    // Gradients over four decades, both signs, and some exact zeros.
    for (int i = 0; i < kN; i++) {
      g[i] = test_uniform(&rng, -1, 1) * powf(10.0f, test_uniform(&rng, -3, 1));
      if (i % 17 == 0)
        g[i] = 0.0f;
      gd[i] = g[i];
    }
    srt_cpu_adamw_step(p, m, v, g, 1.0f, kN, t, c);
    ref_step(pd, md, vd, gd, t, c);
  }
  // Each step's fp32 arithmetic rounds p, m, v a few times at 2^-24
  // relative; over 10 steps on |p| <= ~2 that is ~1e-6 of p. m and v are
  // compared relatively (v spans 1e-8..1e2).
  test_assert_close(p, pd, kN, atol, 1e-6, "adamw param");
  test_assert_close(m, md, kN, 1e-9, 1e-5, "adamw exp_avg");
  test_assert_close(v, vd, kN, 1e-12, 1e-5, "adamw exp_avg_sq");
}

static void test_torch_defaults(void **state) {
  (void)state;
  srt_adamw_config c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
                        .eps = 1e-8f, .weight_decay = 0.01f};
  run(&c, 1, 2e-6);
}

static void test_large_lr_and_decay(void **state) {
  (void)state;
  // beta1 = 0.3 makes 1 - beta1 >= 0.5: torch's lerp takes its other branch.
  srt_adamw_config c = {.lr = 0.1f, .beta1 = 0.3f, .beta2 = 0.95f,
                        .eps = 1e-6f, .weight_decay = 0.1f};
  run(&c, 2, 1e-5);
}

static void test_first_step_closed_form(void **state) {
  (void)state;
  // From zero moments the first update is lr * g / (|g| + eps) after decay:
  // a sign step, independent of the gradient's magnitude.
  srt_adamw_config c = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                        .eps = 1e-8f, .weight_decay = 0.0f};
  float p[2] = {1.0f, 1.0f}, m[2] = {0}, v[2] = {0}, g[2] = {1e-3f, -50.0f};
  srt_cpu_adamw_step(p, m, v, g, 1.0f, 2, 1, &c);
  assert_float_equal(p[0], 0.99, 1e-6);
  assert_float_equal(p[1], 1.01, 1e-6);
}

// grad_scale s gives the bytes of scaling the gradient by s first (what
// clipping by total norm did in place) and stepping with scale 1, and leaves
// the gradient as it was.
static void test_grad_scale_is_scaling_first(void **state) {
  (void)state;
  srt_adamw_config c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
                        .eps = 1e-8f, .weight_decay = 0.01f};
  test_rng rng = {7};
  enum { n = 40000 }; // more than one chunk: the threaded path
  static float p1[n], m1[n], v1[n], p2[n], m2[n], v2[n], g[n], gs[n];
  test_fill(p1, n, &rng, -1, 1);
  test_fill(m1, n, &rng, -0.1f, 0.1f);
  test_fill(v1, n, &rng, 0, 0.01f);
  test_fill(g, n, &rng, -2, 2);
  const float s = 0.3183f;
  for (int i = 0; i < n; i++) {
    p2[i] = p1[i], m2[i] = m1[i], v2[i] = v1[i];
    gs[i] = g[i] * s;
  }
  float g0 = g[123];
  srt_cpu_adamw_step(p1, m1, v1, g, s, n, 4, &c);
  srt_cpu_adamw_step(p2, m2, v2, gs, 1.0f, n, 4, &c);
  assert_memory_equal(p1, p2, sizeof p1);
  assert_memory_equal(m1, m2, sizeof m1);
  assert_memory_equal(v1, v2, sizeof v1);
  assert_true(g[123] == g0);
}

// The bf16 variant: param, m and v the bytes of srt_cpu_adamw_step, and
// the compute copy each updated parameter rounded to nearest even (the
// scalar srt_f32_to_bf16), over several chunks and both threads.
static void test_bf16_compute_copy(void **state) {
  (void)state;
  srt_adamw_config c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
                        .eps = 1e-8f, .weight_decay = 0.01f};
  test_rng rng = {11};
  enum { n = 40000 };
  static float p1[n], m1[n], v1[n], p2[n], m2[n], v2[n], g[n];
  static uint16_t compute[n];
  test_fill(p1, n, &rng, -1, 1);
  test_fill(m1, n, &rng, -0.1f, 0.1f);
  test_fill(v1, n, &rng, 0, 0.01f);
  test_fill(g, n, &rng, -2, 2);
  for (int i = 0; i < n; i++)
    p2[i] = p1[i], m2[i] = m1[i], v2[i] = v1[i];
  srt_cpu_adamw_step(p1, m1, v1, g, 0.5f, n, 3, &c);
  srt_cpu_adamw_step_bf16(p2, compute, m2, v2, g, 0.5f, n, 3, &c);
  assert_memory_equal(p1, p2, sizeof p1);
  assert_memory_equal(m1, m2, sizeof m1);
  assert_memory_equal(v1, v2, sizeof v1);
  for (int i = 0; i < n; i++)
    assert_int_equal(compute[i], srt_f32_to_bf16(p1[i]));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torch_defaults),
      cmocka_unit_test(test_large_lr_and_decay),
      cmocka_unit_test(test_first_step_closed_form),
      cmocka_unit_test(test_grad_scale_is_scaling_first),
      cmocka_unit_test(test_bf16_compute_copy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
