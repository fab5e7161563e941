// Unit tests of RMSNorm (runtime/cpu/rms_norm.c): plain, Gemma's (1 + w)
// offset and per-head grouping, forward against float64, backward against
// finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

typedef struct norm_case {
  int64_t n, features, group; // group 0 = whole row
  float eps, offset;
} norm_case;

static int64_t group_of(norm_case c) { return c.group ? c.group : c.features; }

static void ref_forward(double *y, const double *x, const double *w,
                        norm_case c) {
  int64_t g = group_of(c);
  for (int64_t start = 0; start < c.n * c.features; start += g) {
    double ms = 0.0;
    for (int64_t i = 0; i < g; i++)
      ms += x[start + i] * x[start + i] / (double)g;
    double inv = 1.0 / sqrt(ms + (double)c.eps);
    for (int64_t i = 0; i < g; i++)
      y[start + i] = ((double)c.offset + w[i]) * x[start + i] * inv;
  }
}

typedef struct fd_ctx {
  norm_case c;
  double *x, *w;
  const double *cot;
} fd_ctx;

static double loss(const double *unused, void *p) {
  (void)unused;
  fd_ctx *f = p;
  int64_t len = f->c.n * f->c.features;
  double *y = kt_calloc(len, sizeof *y);
  ref_forward(y, f->x, f->w, f->c);
  double l = test_dot(y, f->cot, len);
  free(y);
  return l;
}

static void check_case(norm_case c, uint64_t seed) {
  test_rng rng = {seed};
  int64_t len = c.n * c.features, g = group_of(c);
  float *x = kt_calloc(len, sizeof(float)), *y = kt_calloc(len, sizeof(float));
  float *w = kt_calloc(g, sizeof(float)), *dy = kt_calloc(len, sizeof(float));
  float *dx = kt_calloc(len, sizeof(float)), *dw = kt_calloc(g, sizeof(float));
  float *dw0 = kt_calloc(g, sizeof(float));
  test_fill(x, len, &rng, -2, 2);
  test_fill(w, g, &rng, -1, 1);
  test_fill(dy, len, &rng, -1, 1);
  test_fill(dw0, g, &rng, -1, 1);
  for (int64_t i = 0; i < g; i++)
    dw[i] = dw0[i];

  srt_cpu_rms_norm_forward(y, x, w, c.n, c.features, c.group, c.eps, c.offset);
  fd_ctx f = {c, test_to_double(x, len), test_to_double(w, g),
              test_to_double(dy, len)};
  double *want = kt_calloc(len, sizeof(double));
  ref_forward(want, f.x, f.w, c);
  // A handful of fp32 roundings of O(1) values (the mean of squares is
  // summed in double): 1e-6 relative + 1e-6 absolute.
  test_assert_close(y, want, len, 1e-6, 1e-6, "rms_norm forward");

  // In place gives the same bits.
  float *inplace = kt_calloc(len, sizeof(float));
  for (int64_t i = 0; i < len; i++)
    inplace[i] = x[i];
  srt_cpu_rms_norm_forward(inplace, inplace, w, c.n, c.features, c.group,
                           c.eps, c.offset);
  for (int64_t i = 0; i < len; i++)
    assert_true(inplace[i] == y[i]);

  float *partials =
      kt_calloc(srt_cpu_rms_norm_backward_workspace_floats(c.n, c.features, c.group), sizeof(float));
  srt_cpu_rms_norm_backward(dx, dw, dy, x, w, c.n, c.features, c.group, c.eps,
                            c.offset, partials);
  free(partials);
  double *gx = kt_calloc(len, sizeof(double)), *gw = kt_calloc(g, sizeof(double));
  test_fd_gradient(loss, &f, f.x, len, 1e-6, gx);
  test_fd_gradient(loss, &f, f.w, g, 1e-6, gw);
  for (int64_t i = 0; i < g; i++)
    gw[i] += dw0[i];
  // dx: a dot product over the group in double, then ~5 fp32 operations on
  // O(1) values: 1e-5. dw sums n * features / group fp32 terms: 1e-5.
  test_assert_close(dx, gx, len, 1e-5, 1e-5, "rms_norm dx");
  test_assert_close(dw, gw, g, 1e-5, 1e-5, "rms_norm dweight (accumulated)");

  free(x), free(y), free(w), free(dy), free(dx), free(dw), free(dw0);
  free(inplace), free(want), free(gx), free(gw);
  free(f.x), free(f.w), free((void *)f.cot);
}

static void test_plain(void **state) {
  (void)state;
  check_case((norm_case){6, 16, 0, 1e-6f, 0.0f}, 1);
  check_case((norm_case){3, 16, 16, 1e-5f, 0.0f}, 2); // group = features
  // More than one 64-row block of the weight gradient's partials, the last
  // one partial: 150 rows; and 40 rows of 4 heads (160 groups).
  check_case((norm_case){150, 8, 0, 1e-6f, 0.0f}, 6);
  check_case((norm_case){40, 16, 4, 1e-6f, 1.0f}, 7);
}

static void test_gemma_offset(void **state) {
  (void)state;
  check_case((norm_case){5, 12, 0, 1e-6f, 1.0f}, 3);
}

static void test_per_head(void **state) {
  (void)state;
  // Qwen3 q_norm: [n, 3 heads * 8] normalized per head with an [8] weight.
  check_case((norm_case){4, 24, 8, 1e-6f, 0.0f}, 4);
  // Gemma3 q_norm: per head and (1 + w).
  check_case((norm_case){4, 24, 8, 1e-6f, 1.0f}, 5);
}

static void test_per_head_differs_from_whole_row(void **state) {
  (void)state;
  // Two heads with very different scales: per-head normalization makes both
  // unit-RMS, the whole-row one does not.
  float x[8] = {1, 2, 3, 4, 100, 200, 300, 400}, w[4] = {0, 0, 0, 0};
  float y[8];
  srt_cpu_rms_norm_forward(y, x, w, 1, 8, 4, 0.0f, 1.0f);
  double rms = sqrt((1 + 4 + 9 + 16) / 4.0);
  for (int i = 0; i < 4; i++) {
    assert_float_equal(y[i], x[i] / rms, 1e-6);
    assert_float_equal(y[i + 4], x[i] / rms, 1e-6); // same after scaling
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain),
      cmocka_unit_test(test_gemma_offset),
      cmocka_unit_test(test_per_head),
      cmocka_unit_test(test_per_head_differs_from_whole_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
