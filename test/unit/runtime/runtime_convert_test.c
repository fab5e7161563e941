// Unit tests of the 16-bit float conversions: every bfloat16 and binary16
// bit pattern against independent references, and float32 -> bfloat16
// rounding (ties to even, overflow, NaN).
#include "runtime_test_util.h"

#include <math.h>

#include "shardrt/convert.h"

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void test_bf16_exhaustive(void **state) {
  (void)state;
  for (uint32_t b = 0; b < 65536; ++b) {
    // bfloat16 is the top half of a float32: exact by definition.
    uint32_t got = bits_of(srt_bf16_to_f32((uint16_t)b));
    if (got != b << 16)
      fail_msg("bf16 0x%04x -> 0x%08x, expected 0x%08x", b, got, b << 16);
  }
}

// binary16 by its definition: (-1)^s * 2^(e-15) * (1 + m/1024), or
// 2^-14 * m/1024 for e = 0, computed with ldexp in double.
static double f16_reference(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                              : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

static void test_f16_exhaustive(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; ++h) {
    float got = srt_f16_to_f32((uint16_t)h);
    double want = f16_reference((uint16_t)h);
    if (isnan(want)) {
      assert_true(isnan(got));
      continue;
    }
    if ((double)got != want || !signbit(got) != !signbit(want))
      fail_msg("f16 0x%04x -> %.9g, expected %.9g", h, got, want);
  }
  assert_true(srt_f16_to_f32(0x0001) == 0x1p-24f); // smallest subnormal
  assert_true(srt_f16_to_f32(0x7bff) == 65504.0f); // largest finite
}

static void test_f32_to_bf16_rounding(void **state) {
  (void)state;
  assert_int_equal(srt_f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0).
  assert_int_equal(srt_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  assert_int_equal(srt_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  assert_int_equal(srt_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  assert_int_equal(srt_f32_to_bf16(-2.0f), 0xc000);
  assert_int_equal(srt_f32_to_bf16(3.4028235e38f), 0x7f80); // overflows to inf
  assert_int_equal(srt_f32_to_bf16(INFINITY), 0x7f80);
  uint16_t n = srt_f32_to_bf16(-NAN);
  assert_true(isnan(srt_bf16_to_f32(n)) && (n & 0x8000));
  // Round trip of every bf16 that is not NaN.
  for (uint32_t b = 0; b < 65536; ++b)
    if (!isnan(srt_bf16_to_f32((uint16_t)b)))
      assert_int_equal(srt_f32_to_bf16(srt_bf16_to_f32((uint16_t)b)), b);
}

static void test_convert_unaligned(void **state) {
  (void)state;
  unsigned char buf[1 + 3 * 8];
  uint16_t h[3] = {0x3c00, 0xc000, 0x0001}; // 1, -2, 2^-24 (binary16)
  memcpy(buf + 1, h, sizeof h);
  float out[3];
  ASSERT_OK(srt_convert_to_f32(buf + 1, SRT_F16, 3, out));
  assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0x1p-24f);
  double d[3] = {0.1, -1e300, 3.0};
  memcpy(buf + 1, d, sizeof d);
  ASSERT_OK(srt_convert_to_f32(buf + 1, SRT_F64, 3, out));
  assert_true(out[0] == 0.1f && isinf(out[1]) && out[2] == 3.0f);
  ASSERT_ERROR(srt_convert_to_f32(buf, SRT_I32, 1, out), SRT_INVALID_ARGUMENT,
               "cannot convert I32 to F32");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_exhaustive),
      cmocka_unit_test(test_f16_exhaustive),
      cmocka_unit_test(test_f32_to_bf16_rounding),
      cmocka_unit_test(test_convert_unaligned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
