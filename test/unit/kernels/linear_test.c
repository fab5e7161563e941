// Unit tests of the linear layer (runtime/cpu/linear.c): forward against a
// float64 matrix product, gradients against finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

typedef struct dims {
  int64_t n, in, out;
} dims;

// x: [n, in], w: [out, in], b: [out] or NULL -> y: [n, out]
static void ref_forward(double *y, const double *x, const double *w,
                        const double *b, dims d) {
  for (int64_t t = 0; t < d.n; t++)
    for (int64_t o = 0; o < d.out; o++) {
      double s = b ? b[o] : 0.0;
      for (int64_t i = 0; i < d.in; i++)
        s += x[t * d.in + i] * w[o * d.in + i];
      y[t * d.out + o] = s;
    }
}

static void check_forward(dims d, bool with_bias, uint64_t seed) {
  test_rng rng = {seed};
  float *x = kt_calloc(d.n * d.in, sizeof(float));
  float *w = kt_calloc(d.out * d.in, sizeof(float));
  float *b = kt_calloc(d.out, sizeof(float));
  float *y = kt_calloc(d.n * d.out, sizeof(float));
  double *want = kt_calloc(d.n * d.out, sizeof(double));
  test_fill(x, d.n * d.in, &rng, -1, 1);
  test_fill(w, d.out * d.in, &rng, -1, 1);
  test_fill(b, d.out, &rng, -1, 1);
  test_fill(y, d.n * d.out, &rng, 50, 60); // must be overwritten
  assert_null(srt_cpu_linear_forward(y, x, w, with_bias ? b : NULL, d.n, d.in,
                                     d.out));
  double *xd = test_to_double(x, d.n * d.in), *wd = test_to_double(w, d.out * d.in);
  double *bd = test_to_double(b, d.out);
  ref_forward(want, xd, wd, with_bias ? bd : NULL, d);
  // fp32 dot products of `in` terms in [-1, 1]: rounding error at most
  // ~in * 2^-24 * in (worst case), typically sqrt(in) * 2^-24; with in <= 96
  // an absolute 2e-5 bounds the typical case with a wide margin.
  test_assert_close(y, want, d.n * d.out, 2e-5, 1e-6, "linear forward");
  free(x), free(w), free(b), free(y), free(want), free(xd), free(wd), free(bd);
}

static void test_forward(void **state) {
  (void)state;
  check_forward((dims){7, 13, 5}, true, 1);
  check_forward((dims){7, 13, 5}, false, 2);
  // Large enough for the GEMM library's blocked paths (and its threads).
  check_forward((dims){64, 96, 80}, true, 3);
}

typedef struct fd_ctx {
  dims d;
  double *x, *w, *b; // the current point; one of them is being perturbed
  const double *cot;
} fd_ctx;

static double loss(const double *unused, void *p) {
  (void)unused; // the perturbed array is one of ctx's, changed in place
  fd_ctx *c = p;
  double *y = kt_calloc(c->d.n * c->d.out, sizeof *y);
  ref_forward(y, c->x, c->w, c->b, c->d);
  double l = test_dot(y, c->cot, c->d.n * c->d.out);
  free(y);
  return l;
}

static void test_backward(void **state) {
  (void)state;
  dims d = {6, 9, 4};
  test_rng rng = {11};
  float x[6 * 9], w[4 * 9], b[4], dy[6 * 4];
  float dx[6 * 9], dw[4 * 9], db[4], dw0[4 * 9], db0[4];
  test_fill(x, 54, &rng, -1, 1);
  test_fill(w, 36, &rng, -1, 1);
  test_fill(b, 4, &rng, -1, 1);
  test_fill(dy, 24, &rng, -1, 1);
  test_fill(dw0, 36, &rng, -1, 1);
  test_fill(db0, 4, &rng, -1, 1);
  test_fill(dx, 54, &rng, 50, 60); // must be overwritten
  for (int i = 0; i < 36; i++)
    dw[i] = dw0[i];
  for (int i = 0; i < 4; i++)
    db[i] = db0[i];
  assert_null(srt_cpu_linear_backward(dx, dw, db, dy, x, w, d.n, d.in, d.out));

  fd_ctx c = {d, test_to_double(x, 54), test_to_double(w, 36),
              test_to_double(b, 4), test_to_double(dy, 24)};
  double gx[54], gw[36], gb[4];
  test_fd_gradient(loss, &c, c.x, 54, 1e-6, gx);
  test_fd_gradient(loss, &c, c.w, 36, 1e-6, gw);
  test_fd_gradient(loss, &c, c.b, 4, 1e-6, gb);
  for (int i = 0; i < 36; i++)
    gw[i] += dw0[i];
  for (int i = 0; i < 4; i++)
    gb[i] += db0[i];
  // fp32 sums of <= 6 products in [-1, 1]: < 1e-6; FD error ~1e-10.
  test_assert_close(dx, gx, 54, 2e-6, 1e-6, "linear dx");
  test_assert_close(dw, gw, 36, 2e-6, 1e-6, "linear dweight (accumulated)");
  test_assert_close(db, gb, 4, 2e-6, 1e-6, "linear dbias (accumulated)");

  // NULL gradients are skipped.
  assert_null(srt_cpu_linear_backward(NULL, NULL, NULL, dy, x, w, d.n, d.in,
                                      d.out));
  free(c.x), free(c.w), free(c.b), free((void *)c.cot);
}

// srt_cpu_linear_grad_weight WRITES dy^T x: against a float64 product, on
// a product below and one above the matmul primitive's size (128^3), dw
// starting as NaN (never read); n = 0 gives zeros.
static void check_grad_weight(int64_t n, int64_t in, int64_t out, uint64_t seed) {
  test_rng rng = {seed};
  float *dy = kt_calloc(n * out + 1, sizeof(float)), *x = kt_calloc(n * in + 1, sizeof(float));
  float *dw = kt_calloc(out * in, sizeof(float));
  double *want = kt_calloc(out * in, sizeof(double));
  test_fill(dy, n * out, &rng, -1, 1);
  test_fill(x, n * in, &rng, -1, 1);
  for (int64_t i = 0; i < out * in; i++)
    dw[i] = NAN;
  for (int64_t t = 0; t < n; t++)
    for (int64_t o = 0; o < out; o++)
      for (int64_t i = 0; i < in; i++)
        want[o * in + i] += (double)dy[t * out + o] * x[t * in + i];
  assert_null(srt_cpu_linear_grad_weight(dw, dy, x, n, in, out));
  // fp32 sums of n products in [-1, 1]: |error| <= n eps sum |terms|, about 1e-5 here.
  test_assert_close(dw, want, out * in, 1e-4, 1e-5, "linear grad weight (written)");
  free(dy), free(x), free(dw), free(want);
}

static void test_grad_weight(void **state) {
  (void)state;
  check_grad_weight(5, 7, 3, 11);      // dnnl_sgemm
  check_grad_weight(130, 144, 160, 12); // the matmul primitive
  check_grad_weight(0, 4, 3, 13);      // no rows: zeros
}

static void test_rejects_bad_sizes(void **state) {
  (void)state;
  float v = 0;
  srt_status s = srt_cpu_linear_forward(&v, &v, &v, NULL, -1, 1, 1);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
  // Operands past 2^63 bytes (n * in floats overflows).
  s = srt_cpu_linear_backward(&v, &v, &v, &v, &v, &v, (int64_t)1 << 31,
                              (int64_t)1 << 31, 1);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
}

// srt_cpu_gemm with k = 0 is an empty sum: C = beta C, and beta 0 ignores
// what C held (NaN included), as BLAS sgemm.
static void test_gemm_empty_k(void **state) {
  (void)state;
  float a = 1, b = 1, c[4] = {NAN, 1, 2, 3};
  assert_null(srt_cpu_gemm(false, false, 2, 2, 0, 1.0f, &a, 1, &b, 2, 0.0f, c, 2));
  for (int i = 0; i < 4; i++)
    assert_true(c[i] == 0.0f);
  float d[4] = {1, 2, 3, 4};
  assert_null(srt_cpu_gemm(true, true, 2, 2, 0, 1.0f, &a, 2, &b, 1, 0.5f, d, 2));
  for (int i = 0; i < 4; i++)
    assert_true(d[i] == 0.5f * (float)(i + 1));
}

// C = alpha op(A) op(B) + beta C against float64, row strides wider than the
// rows (the padding must stay untouched).
static void check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       float beta, uint64_t seed) {
  enum { kPad = 3 };
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int64_t lda = ac + kPad, ldb = bc + kPad, ldc = n + kPad;
  test_rng rng = {seed};
  float *a = kt_calloc(ar * lda, sizeof(float)), *b = kt_calloc(br * ldb, sizeof(float));
  float *c = kt_calloc(m * ldc, sizeof(float));
  double *want = kt_calloc(m * n, sizeof(double));
  test_fill(a, ar * lda, &rng, -1, 1);
  test_fill(b, br * ldb, &rng, -1, 1);
  test_fill(c, m * ldc, &rng, -1, 1);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
      want[i * n + j] = alpha * s + (beta == 0.0f ? 0.0 : beta * (double)c[i * ldc + j]);
      if (beta == 0.0f)
        c[i * ldc + j] = NAN; // beta 0 ignores C
    }
  assert_null(srt_cpu_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  float *packed = kt_calloc(m * n, sizeof(float));
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++)
      packed[i * n + j] = c[i * ldc + j];
    for (int64_t j = n; j < ldc; j++) // the padding: test_fill's range, never written
      assert_true(c[i * ldc + j] >= -1.0f && c[i * ldc + j] <= 1.0f);
  }
  // k terms in [-1, 1]: typical fp32 error sqrt(k) 2^-24 per product term.
  test_assert_close(packed, want, m * n, 2e-5 * sqrt((double)k), 1e-6, "gemm");
  free(a), free(b), free(c), free(want), free(packed);
}

// Every layout, beta 0 / 1 / other and alpha 1 / other, on products above
// and below the size where srt_cpu_gemm moves from dnnl_sgemm to oneDNN's
// matmul primitive (128^3 multiply-adds), each shape twice (the second from
// the primitive cache); then more shapes than the cache holds.
static void test_gemm_layouts(void **state) {
  (void)state;
  const float betas[] = {0.0f, 1.0f, 0.5f}, alphas[] = {1.0f, 0.75f};
  uint64_t seed = 100;
  for (int t = 0; t < 4; t++)
    for (int bi = 0; bi < 3; bi++)
      for (int ai = 0; ai < 2; ai++)
        for (int rep = 0; rep < 2; rep++) {
          check_gemm(t & 1, t & 2, 130, 140, 150, alphas[ai], betas[bi], seed++);
          check_gemm(t & 1, t & 2, 9, 11, 13, alphas[ai], betas[bi], seed++);
        }
  for (int64_t i = 0; i < 70; i++)
    check_gemm(i & 1, i & 2, 129, 129 + i, 130, 1.0f, (float)(i / 4 % 2), seed++);
  // A cached shape at another thread count, and inside a team of one thread
  // (no active region: still dnnl_sgemm on that thread).
  int threads = srt_cpu_threads();
  srt_cpu_set_threads(1);
  check_gemm(false, true, 130, 140, 150, 1.0f, 0.0f, seed++);
  srt_cpu_set_threads(threads);
#pragma omp parallel num_threads(1)
  check_gemm(false, true, 130, 140, 150, 1.0f, 1.0f, seed++);
}

// A row stride shorter than its row is refused, naming the strides, on a
// product large enough for the matmul primitive as on a small one.
static void test_gemm_rejects_short_strides(void **state) {
  (void)state;
  float *a = kt_calloc(200 * 200, sizeof(float)), *b = kt_calloc(200 * 200, sizeof(float));
  float *c = kt_calloc(200 * 200, sizeof(float));
  const int64_t lds[3][3] = {{100, 200, 200}, {200, 100, 200}, {200, 200, 100}};
  for (int i = 0; i < 3; i++)
    for (int64_t size = 8; size <= 200; size += 192) {
      int64_t lda = lds[i][0] * size / 200, ldb = lds[i][1] * size / 200;
      int64_t ldc = lds[i][2] * size / 200;
      srt_status s =
          srt_cpu_gemm(false, false, size, size, size, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
      assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
      assert_non_null(strstr(srt_status_message(s), "lda="));
      srt_status_free(s);
    }
  free(a), free(b), free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_empty_k),
      cmocka_unit_test(test_gemm_layouts),
      cmocka_unit_test(test_gemm_rejects_short_strides),
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_backward),
      cmocka_unit_test(test_grad_weight),
      cmocka_unit_test(test_rejects_bad_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
