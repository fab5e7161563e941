// Helpers shared by the CPU-kernel unit tests (see kernel_testing.h).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernel_testing.h"

float test_uniform(test_rng *rng, float lo, float hi) {
  uint64_t x = rng->state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng->state = x;
  uint64_t r = x * 0x2545F4914F6CDD1DULL;
  double u = (double)(r >> 11) / 9007199254740992.0; // [0, 1)
  return (float)(lo + (hi - lo) * u);
}

void test_fill(float *x, int64_t n, test_rng *rng, float lo, float hi) {
  for (int64_t i = 0; i < n; i++)
    x[i] = test_uniform(rng, lo, hi);
}

void *kt_calloc(int64_t count, int64_t size) {
  void *p = calloc((size_t)(count > 0 ? count : 1), (size_t)size);
  if (!p)
    fail_msg("out of memory allocating %lld x %lld bytes", (long long)count,
             (long long)size);
  return p;
}

double *test_to_double(const float *x, int64_t n) {
  double *d = kt_calloc(n, sizeof *d);
  for (int64_t i = 0; i < n; i++)
    d[i] = x[i];
  return d;
}

void test_assert_close(const float *got, const double *want, int64_t n,
                       double atol, double rtol, const char *what) {
  int64_t worst = -1;
  double worst_excess = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - want[i]);
    double allowed = atol + rtol * fabs(want[i]);
    // NaN in either side counts as a failure.
    if (!(err <= allowed) && (worst < 0 || !(err - allowed <= worst_excess))) {
      worst = i;
      worst_excess = err - allowed;
    }
  }
  if (worst >= 0)
    fail_msg("%s: element %lld is %.9g, want %.9g (|err| %.3g > atol %.3g + "
             "rtol %.3g * |want|)",
             what, (long long)worst, (double)got[worst], want[worst],
             fabs((double)got[worst] - want[worst]), atol, rtol);
}

void test_fd_gradient(test_loss_fn loss, void *ctx, double *x, int64_t n,
                      double h, double *grad) {
  for (int64_t i = 0; i < n; i++) {
    double keep = x[i];
    x[i] = keep + h;
    double up = loss(x, ctx);
    x[i] = keep - h;
    double down = loss(x, ctx);
    x[i] = keep;
    grad[i] = (up - down) / (2.0 * h);
  }
}

double test_dot(const double *a, const double *b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}
