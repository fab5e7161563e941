// Unit tests of the row-broadcast bias add (runtime/cpu/bias_add.c): forward
// against float64, gradients against finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

enum { kN = 5, kF = 7 };

typedef struct fd_ctx {
  double *x, *b;
  const double *cot;
} fd_ctx;

static void ref(double *y, const double *x, const double *b) {
  for (int t = 0; t < kN; t++)
    for (int f = 0; f < kF; f++)
      y[t * kF + f] = x[t * kF + f] + b[f];
}

static double loss(const double *unused, void *p) {
  (void)unused;
  fd_ctx *c = p;
  double y[kN * kF];
  ref(y, c->x, c->b);
  return test_dot(y, c->cot, kN * kF);
}

static void test_bias_add(void **state) {
  (void)state;
  test_rng rng = {21};
  float x[kN * kF], b[kF], y[kN * kF], dy[kN * kF], dx[kN * kF], db[kF],
      db0[kF];
  test_fill(x, kN * kF, &rng, -3, 3);
  test_fill(b, kF, &rng, -1, 1);
  test_fill(dy, kN * kF, &rng, -1, 1);
  test_fill(db0, kF, &rng, -1, 1);
  for (int f = 0; f < kF; f++)
    db[f] = db0[f];
  srt_cpu_bias_add_forward(y, x, b, kN, kF);
  fd_ctx c = {test_to_double(x, kN * kF), test_to_double(b, kF),
              test_to_double(dy, kN * kF)};
  double want[kN * kF];
  ref(want, c.x, c.b);
  // One correctly rounded fp32 addition: 2^-24 relative.
  test_assert_close(y, want, kN * kF, 0.0, 0x1p-24, "bias_add forward");
  srt_cpu_bias_add_forward(x, x, b, kN, kF); // in place
  test_assert_close(x, want, kN * kF, 0.0, 0x1p-24, "bias_add in place");

  srt_cpu_bias_add_backward(dx, db, dy, kN, kF);
  double gx[kN * kF], gb[kF];
  test_fd_gradient(loss, &c, c.x, kN * kF, 1e-6, gx);
  test_fd_gradient(loss, &c, c.b, kF, 1e-6, gb);
  for (int f = 0; f < kF; f++)
    gb[f] += db0[f];
  // dx is an exact copy, so only the FD rounding shows: eps |loss| / h
  // ~ 1e-16 * 10 / 1e-6 = 1e-9 for this loss of magnitude ~10: 1e-8.
  // db sums kN fp32 values in [-1, 1]: 1e-6.
  test_assert_close(dx, gx, kN * kF, 1e-8, 0.0, "bias_add dx");
  test_assert_close(db, gb, kF, 1e-6, 1e-6, "bias_add dbias (accumulated)");
  free(c.x), free(c.b), free((void *)c.cot);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bias_add)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
