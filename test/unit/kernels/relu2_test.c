// Unit tests of squared ReLU (runtime/cpu/relu2.c): forward against float64,
// backward against finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

enum { kN = 50 };

typedef struct fd_ctx {
  const double *cot;
} fd_ctx;

static double ref(double x) { return x > 0 ? x * x : 0.0; }

static double loss(const double *x, void *p) {
  fd_ctx *f = p;
  double l = 0.0;
  for (int i = 0; i < kN; i++)
    l += ref(x[i]) * f->cot[i];
  return l;
}

static void test_relu2(void **state) {
  (void)state;
  test_rng rng = {3};
  float x[kN], out[kN], dout[kN], dx[kN];
  test_fill(x, kN, &rng, -3, 3);
  x[0] = 0.0f; // the kink: derivative 0 on both sides in the limit
  test_fill(dout, kN, &rng, -1, 1);
  srt_cpu_relu2_forward(out, x, kN);
  double want[kN];
  for (int i = 0; i < kN; i++)
    want[i] = ref(x[i]);
  // One fp32 product: correctly rounded, 2^-24 relative.
  test_assert_close(out, want, kN, 0.0, 0x1p-24, "relu2 forward");

  srt_cpu_relu2_backward(dx, dout, x, kN);
  fd_ctx f = {test_to_double(dout, kN)};
  double *xd = test_to_double(x, kN);
  double g[kN];
  // Inputs stay >= 1e-6 away from 0 except x[0] = 0, where the central
  // difference of relu(x)^2 is (h^2 - 0) / 2h = h / 2: within atol.
  test_fd_gradient(loss, &f, xd, kN, 1e-6, g);
  // Two fp32 products: 1e-6 relative; 1e-6 absolute covers the kink.
  test_assert_close(dx, g, kN, 1e-6, 1e-6, "relu2 dx");
  free(xd), free((void *)f.cot);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_relu2)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
