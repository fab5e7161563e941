// Unit tests of the gated activations (runtime/cpu/glu.c): silu and gelu
// (tanh form) against float64, gradients against finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

enum { kN = 64 };

static double ref_act(double x, srt_glu_activation act) {
  if (act == SRT_GLU_SILU)
    return x / (1.0 + exp(-x));
  const double k = sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

typedef struct fd_ctx {
  double *gate, *up;
  const double *cot;
  srt_glu_activation act;
} fd_ctx;

static double loss(const double *unused, void *p) {
  (void)unused;
  fd_ctx *f = p;
  double l = 0.0;
  for (int i = 0; i < kN; i++)
    l += ref_act(f->gate[i], f->act) * f->up[i] * f->cot[i];
  return l;
}

static void check(srt_glu_activation act, uint64_t seed) {
  test_rng rng = {seed};
  float gate[kN], up[kN], out[kN], dout[kN], dgate[kN], dup[kN];
  test_fill(gate, kN, &rng, -6, 6);
  // Saturated tails: exp overflow must not produce NaN or Inf.
  gate[0] = -90.0f, gate[1] = 90.0f, gate[2] = -20.0f, gate[3] = 0.0f;
  test_fill(up, kN, &rng, -2, 2);
  test_fill(dout, kN, &rng, -1, 1);
  srt_cpu_glu_forward(out, gate, up, kN, act);
  double want[kN];
  for (int i = 0; i < kN; i++)
    want[i] = ref_act(gate[i], act) * up[i];
  // expf/tanhf are accurate to a few ulp; a few more fp32 products: 1e-6
  // relative, plus 1e-7 absolute for results near zero.
  test_assert_close(out, want, kN, 1e-7, 1e-6, "glu forward");

  srt_cpu_glu_backward(dgate, dup, dout, gate, up, kN, act);
  fd_ctx f = {test_to_double(gate, kN), test_to_double(up, kN),
              test_to_double(dout, kN), act};
  double ggate[kN], gup[kN];
  test_fd_gradient(loss, &f, f.gate, kN, 1e-6, ggate);
  test_fd_gradient(loss, &f, f.up, kN, 1e-6, gup);
  // The derivative formulas take ~10 fp32 operations on O(1) values: 1e-5
  // relative, 1e-6 absolute. FD error ~1e-10 (kernel_testing.h).
  test_assert_close(dgate, ggate, kN, 1e-6, 1e-5, "glu dgate");
  test_assert_close(dup, gup, kN, 1e-6, 1e-5, "glu dup");

  // dgate/dup may alias dout.
  float buf[kN];
  for (int i = 0; i < kN; i++)
    buf[i] = dout[i];
  srt_cpu_glu_backward(buf, NULL, buf, gate, up, kN, act);
  for (int i = 0; i < kN; i++)
    assert_true(buf[i] == dgate[i]);
  free(f.gate), free(f.up), free((void *)f.cot);
}

static void test_silu(void **state) {
  (void)state;
  check(SRT_GLU_SILU, 1);
}

static void test_gelu_tanh(void **state) {
  (void)state;
  check(SRT_GLU_GELU_TANH, 2);
  // A known value: gelu_tanh(1) = 0.8411919906082768 (torch prints 0.8412).
  float one = 1.0f, unit = 1.0f, out;
  srt_cpu_glu_forward(&out, &one, &unit, 1, SRT_GLU_GELU_TANH);
  assert_float_equal(out, 0.8411919906082768, 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_silu),
      cmocka_unit_test(test_gelu_tanh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
