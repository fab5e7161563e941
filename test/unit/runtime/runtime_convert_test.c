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

// float32 -> binary16 against the compiler's _Float16 conversion (GCC and
// clang on x86-64: round to nearest even, IEEE 754): every float32 whose
// low 11 bits are 0 or 0xfff/0x1000 neighbours (that covers every halfway
// case and its neighbours in each binade), plus a stride over the rest.
static void test_f32_to_f16_against_compiler(void **state) {
  (void)state;
  int64_t checked = 0;
  for (uint64_t hi = 0; hi < (1u << 20); ++hi) {
    const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x7ff, 0x2000 - 1};
    for (size_t k = 0; k < sizeof lows / sizeof *lows; ++k) {
      uint32_t u = (uint32_t)(hi << 12) ^ lows[k];
      float x;
      memcpy(&x, &u, 4);
      _Float16 h = (_Float16)x;
      uint16_t want;
      memcpy(&want, &h, 2);
      uint16_t got = srt_f32_to_f16(x);
      if (isnan(x)) { // both quiet NaNs of the same sign
        if ((got & 0x7e00u) != 0x7e00u || (got & 0x8000u) != (want & 0x8000u))
          fail_msg("f32 0x%08x (NaN) -> f16 0x%04x", u, got);
      } else if (got != want) {
        fail_msg("f32 0x%08x (%a) -> f16 0x%04x, expected 0x%04x", u, (double)x, got, want);
      }
      ++checked;
    }
  }
  assert_true(checked > 7000000);
  // Edges by value: the largest half, the first value rounding to infinity,
  // the smallest subnormal and half of it (ties to even: zero).
  assert_int_equal(srt_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(srt_f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(srt_f32_to_f16(0x1p-24f), 0x0001);
  assert_int_equal(srt_f32_to_f16(0x1p-25f), 0x0000);
  assert_int_equal(srt_f32_to_f16(-0x1.8p-25f), 0x8001);
}

static void test_convert_from_f32(void **state) {
  (void)state;
  const float x[3] = {1.0f, -2.5f, 0x1p-20f};
  unsigned char buf[1 + 3 * 4];
  assert_null(srt_convert_from_f32(x, SRT_BF16, 3, buf + 1)); // unaligned
  float back[3];
  assert_null(srt_convert_to_f32(buf + 1, SRT_BF16, 3, back));
  assert_memory_equal(back, x, sizeof back); // all three are bf16-exact
  assert_null(srt_convert_from_f32(x, SRT_F16, 3, buf + 1));
  assert_null(srt_convert_to_f32(buf + 1, SRT_F16, 3, back));
  assert_memory_equal(back, x, sizeof back);
  srt_status s = srt_convert_from_f32(x, SRT_I64, 3, buf);
  assert_non_null(s);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_exhaustive),
      cmocka_unit_test(test_f16_exhaustive),
      cmocka_unit_test(test_f32_to_bf16_rounding),
      cmocka_unit_test(test_f32_to_f16_against_compiler),
      cmocka_unit_test(test_convert_from_f32),
      cmocka_unit_test(test_convert_unaligned),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
