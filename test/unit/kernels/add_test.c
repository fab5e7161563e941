// Unit tests of the residual add (runtime/cpu/add.c): forward exact against
// float64, backward as the identity to both operands, also in place.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

enum { kN = 33 };

static void test_add(void **state) {
  (void)state;
  test_rng rng = {5};
  float a[kN], b[kN], out[kN], dout[kN], da[kN], db[kN];
  test_fill(a, kN, &rng, -4, 4);
  test_fill(b, kN, &rng, -4, 4);
  test_fill(dout, kN, &rng, -1, 1);
  srt_cpu_add_forward(out, a, b, kN);
  double want[kN], dwant[kN];
  for (int i = 0; i < kN; i++)
    want[i] = (double)a[i] + b[i], dwant[i] = dout[i];
  // One correctly rounded fp32 addition: 2^-24 relative.
  test_assert_close(out, want, kN, 0.0, 0x1p-24, "add forward");
  srt_cpu_add_forward(a, a, b, kN); // in place
  test_assert_close(a, want, kN, 0.0, 0x1p-24, "add forward in place");

  // d(a + b)/da = d(a + b)/db = identity: exact copies.
  srt_cpu_add_backward(da, db, dout, kN);
  test_assert_close(da, dwant, kN, 0.0, 0.0, "add da");
  test_assert_close(db, dwant, kN, 0.0, 0.0, "add db");
  srt_cpu_add_backward(dout, NULL, dout, kN); // aliasing and NULL: no-op
  test_assert_close(dout, dwant, kN, 0.0, 0.0, "add in place");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_add)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
