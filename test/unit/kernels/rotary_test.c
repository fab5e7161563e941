// Unit tests of rotary embeddings (runtime/cpu/rotary.c): default and llama3
// inverse frequencies (pinned values), the (cos, sin) tuple, and
// apply_rotary forward/backward against float64 and finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"


static void test_default_inv_freq(void **state) {
  (void)state;
  srt_rope_config c = {.head_dim = 64, .theta = 1e6, .type = SRT_ROPE_DEFAULT};
  float f[32];
  assert_null(srt_cpu_rotary_inv_freq(f, &c));
  double want[32];
  for (int i = 0; i < 32; i++)
    want[i] = exp(-log(1e6) * (2.0 * i) / 64.0); // theta^(-2i/d), other route
  // Rounded once to float: 2^-24 relative, plus a few double ulp.
  test_assert_close(f, want, 32, 0.0, 0x1p-24 * 1.01, "default inv_freq");
}

// Llama 3.1 8B: theta 500000, head_dim 128, factor 8, low 1, high 4,
// original context 8192. Values computed independently (Python, float64)
// from the formula of Hugging Face's _compute_llama3_parameters; indices
// 0-28 keep their frequency (wavelength < 2048), 29-34 are blended, 35-63
// are divided by 8 (wavelength > 8192).
static void test_llama3_inv_freq_pinned(void **state) {
  (void)state;
  srt_rope_config c = {.head_dim = 128,
                       .theta = 500000.0,
                       .type = SRT_ROPE_LLAMA3,
                       .factor = 8.0,
                       .low_freq_factor = 1.0,
                       .high_freq_factor = 4.0,
                       .original_max_position_embeddings = 8192.0};
  float f[64];
  assert_null(srt_cpu_rotary_inv_freq(f, &c));
  static const struct {
    int i;
    double v;
  } pinned[] = {
      {0, 1.0},                     // high frequency: unchanged
      {20, 0.016560440080994446},   // high frequency: unchanged
      {29, 0.002166570763503359},   // blended (was 0.0026160992529250353)
      {30, 0.0013718935677611381},  // blended
      {32, 0.0005248461609929547},  // blended
      {34, 0.00017850781276799638}, // blended (was 0.0009384738703573801)
      {35, 9.556212353964683e-05},  // low frequency: / 8
      {40, 3.428102195952591e-05},  // low frequency: / 8
      {63, 3.068925988914511e-07},  // low frequency: / 8
  };
  for (size_t k = 0; k < sizeof pinned / sizeof *pinned; k++) {
    double want = pinned[k].v;
    // Rounded once to float: 2^-24 relative (with 1% slack for the double
    // computation of pow).
    test_assert_close(&f[pinned[k].i], &want, 1, 0.0, 0x1p-24 * 1.01,
                      "llama3 inv_freq");
  }
  // Frequencies stay strictly decreasing across the blended band.
  for (int i = 1; i < 64; i++)
    assert_true(f[i] < f[i - 1]);
}

// Linear scaling (Gemma 3 4B and up: factor 8 on the full-attention layers,
// theta 1e6, head_dim 256): the default frequencies divided by the factor.
// Pinned to transformers 5.24's _compute_linear_scaling_rope_parameters
// (fp32 there, so within 2 float ulps).
static void test_linear_inv_freq_pinned(void **state) {
  (void)state;
  srt_rope_config c = {.head_dim = 256, .theta = 1e6, .type = SRT_ROPE_LINEAR, .factor = 8.0};
  float f[128];
  assert_null(srt_cpu_rotary_inv_freq(f, &c));
  static const struct {
    int i;
    double v;
  } pinned[] = {{0, 0.125},
                {1, 0.11221089214086533},
                {64, 0.0001250000059371814},
                {127, 1.3924673680776323e-07}};
  for (size_t k = 0; k < sizeof pinned / sizeof *pinned; k++)
    test_assert_close(&f[pinned[k].i], &pinned[k].v, 1, 0.0, 0x1p-23 * 1.01, "linear inv_freq");
  srt_rope_config bad = {.head_dim = 8, .theta = 1e4, .type = SRT_ROPE_LINEAR, .factor = 0};
  srt_status s = srt_cpu_rotary_inv_freq(f, &bad);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
}

static void test_rejects_bad_config(void **state) {
  (void)state;
  float f[8];
  srt_rope_config odd = {.head_dim = 7, .theta = 1e4};
  srt_status s = srt_cpu_rotary_inv_freq(f, &odd);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
  srt_rope_config bad = {.head_dim = 8, .theta = 1e4, .type = SRT_ROPE_LLAMA3,
                         .factor = 8, .low_freq_factor = 4,
                         .high_freq_factor = 1,
                         .original_max_position_embeddings = 8192};
  s = srt_cpu_rotary_inv_freq(f, &bad);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
}

enum { kB = 2, kS = 5, kHd = 8, kHalf = 4, kHeads = 3 };

static void test_cos_sin(void **state) {
  (void)state;
  srt_rope_config c = {.head_dim = kHd, .theta = 10000.0};
  // Batch row 1 has its own positions, including large ones.
  int64_t pos[kB * kS] = {0, 1, 2, 3, 4, 7, 100, 4095, 8191, 131071};
  float cs[kB * kS * kHd], sn[kB * kS * kHd], inv[kHalf];
  assert_null(srt_cpu_rotary_embedding_forward(cs, sn, pos, kB, kS, &c));
  assert_null(srt_cpu_rotary_inv_freq(inv, &c));
  double wc[kB * kS * kHd], ws[kB * kS * kHd], wc64[kB * kS * kHd],
      ws64[kB * kS * kHd];
  for (int t = 0; t < kB * kS; t++)
    for (int i = 0; i < kHd; i++) {
      int j = i % kHalf;
      // Hugging Face: the angle is an fp32 product (pos as float times the
      // fp32 inv_freq); cos/sin of that float.
      float angle = (float)pos[t] * inv[j];
      wc[t * kHd + i] = cos((double)angle);
      ws[t * kHd + i] = sin((double)angle);
      double exact = (double)pos[t] * pow(10000.0, -2.0 * j / kHd);
      wc64[t * kHd + i] = cos(exact);
      ws64[t * kHd + i] = sin(exact);
    }
  // Against Hugging Face's fp32-angle convention: cos/sin rounded once.
  test_assert_close(cs, wc, kB * kS * kHd, 0x1p-25, 0x1p-24, "cos (HF fp32)");
  test_assert_close(sn, ws, kB * kS * kHd, 0x1p-25, 0x1p-24, "sin (HF fp32)");
  // Against exact math, the fp32 angle's rounding shows: |d angle| <=
  // pos * (2^-24 inv_freq) + ulp(angle) / 2 <= 2^-23 * pos. Check rows with
  // pos <= 100 to 2^-23 * 100 + 1e-7 ~ 1.3e-5.
  test_assert_close(cs, wc64, 7 * kHd, 1.3e-5, 0.0, "cos (exact)");
  test_assert_close(sn, ws64, 7 * kHd, 1.3e-5, 0.0, "sin (exact)");

  // NULL positions: 0..S-1 in every batch row.
  float cs2[kB * kS * kHd], sn2[kB * kS * kHd];
  assert_null(srt_cpu_rotary_embedding_forward(cs2, sn2, NULL, kB, kS, &c));
  for (int b = 0; b < kB; b++)
    for (int i = 0; i < kS * kHd; i++) {
      assert_true(cs2[b * kS * kHd + i] == cs[i]); // row 0 has pos 0..4
      assert_true(sn2[b * kS * kHd + i] == sn[i]);
    }
}

static void ref_apply(double *out, const double *x, const float *cs,
                      const float *sn) {
  for (int t = 0; t < kB * kS; t++)
    for (int h = 0; h < kHeads; h++)
      for (int i = 0; i < kHd; i++) {
        const double *xh = x + (t * kHeads + h) * kHd;
        // rotate_half(x) = cat(-x2, x1)
        double rot = i < kHalf ? -xh[i + kHalf] : xh[i - kHalf];
        out[(t * kHeads + h) * kHd + i] =
            xh[i] * cs[t * kHd + i] + rot * sn[t * kHd + i];
      }
}

typedef struct fd_ctx {
  const float *cs, *sn;
  const double *cot;
} fd_ctx;

static double loss(const double *x, void *p) {
  fd_ctx *f = p;
  enum { kLen = kB * kS * kHeads * kHd };
  double y[kLen];
  ref_apply(y, x, f->cs, f->sn);
  return test_dot(y, f->cot, kLen);
}

static void test_apply_rotary(void **state) {
  (void)state;
  enum { kLen = kB * kS * kHeads * kHd };
  srt_rope_config c = {.head_dim = kHd, .theta = 10000.0};
  int64_t pos[kB * kS] = {0, 1, 2, 3, 4, 9, 8, 7, 6, 500};
  float cs[kB * kS * kHd], sn[kB * kS * kHd];
  assert_null(srt_cpu_rotary_embedding_forward(cs, sn, pos, kB, kS, &c));
  test_rng rng = {9};
  float x[kLen], out[kLen], dy[kLen], dx[kLen];
  test_fill(x, kLen, &rng, -2, 2);
  test_fill(dy, kLen, &rng, -1, 1);
  srt_cpu_apply_rotary_forward(out, x, cs, sn, kB, kS, kHeads, kHd);
  double *xd = test_to_double(x, kLen);
  double want[kLen];
  ref_apply(want, xd, cs, sn);
  // Two fp32 products and a sum of O(1) values: 1e-6 absolute.
  test_assert_close(out, want, kLen, 1e-6, 1e-6, "apply_rotary forward");
  // Position 0 is the identity.
  for (int i = 0; i < kHeads * kHd; i++)
    assert_true(out[i] == x[i]);
  // In place gives the same bits.
  float inplace[kLen];
  for (int i = 0; i < kLen; i++)
    inplace[i] = x[i];
  srt_cpu_apply_rotary_forward(inplace, inplace, cs, sn, kB, kS, kHeads, kHd);
  for (int i = 0; i < kLen; i++)
    assert_true(inplace[i] == out[i]);

  srt_cpu_apply_rotary_backward(dx, dy, cs, sn, kB, kS, kHeads, kHd);
  fd_ctx f = {cs, sn, test_to_double(dy, kLen)};
  double g[kLen];
  test_fd_gradient(loss, &f, xd, kLen, 1e-6, g);
  test_assert_close(dx, g, kLen, 1e-6, 1e-6, "apply_rotary dx");
  // In place backward too.
  for (int i = 0; i < kLen; i++)
    inplace[i] = dy[i];
  srt_cpu_apply_rotary_backward(inplace, inplace, cs, sn, kB, kS, kHeads, kHd);
  for (int i = 0; i < kLen; i++)
    assert_true(inplace[i] == dx[i]);
  free(xd), free((void *)f.cot);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_inv_freq),
      cmocka_unit_test(test_llama3_inv_freq_pinned),
      cmocka_unit_test(test_linear_inv_freq_pinned),
      cmocka_unit_test(test_rejects_bad_config),
      cmocka_unit_test(test_cos_sin),
      cmocka_unit_test(test_apply_rotary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
