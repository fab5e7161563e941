// The bf16 cpu backend (srt_cpu_bf16_backend, --param-dtype bf16) through
// srt_op_*: bf16 results rounded to nearest, ties to even, from fp32
// arithmetic (hand-computed ties and overflow on the add); the linear's
// bf16 output within bf16's rounding (half an ulp of its 8 significant
// bits: at most 2^-8 relative) plus the fp32 sum's error (k 2^-24 sum |x w|) of a
// float64 reference over the same bf16 inputs, both on the staged exact
// path (a small product, also bit for bit the fp32 kernel's result
// rounded) and on oneDNN's bf16 matmul (128^3); the weight gradient in
// fp32 within the fp32 sum's error.
#include "runtime_ops_test_util.h"

#include <string.h>

#include "shardrt/convert.h"
#include "shardrt/kernels.h"

static void *g_device;
static uint8_t *g_bf16_arena;
static int64_t g_top;
enum { BF16_ARENA_BYTES = 1 << 22 };

static int bf16_setup(void **state) {
  if (ops_setup(state))
    return -1;
  static srt_program program = {.arena_bytes = BF16_ARENA_BYTES};
  srt_status s =
      srt_cpu_bf16_backend.open(g_ctx, &program, &g_device, &g_bf16_arena);
  srt_status_free(s);
  return s ? -1 : 0;
}

static int bf16_teardown(void **state) {
  srt_status_free(srt_cpu_bf16_backend.close(g_device));
  return ops_teardown(state);
}

static srt_exec bf16_exec(void) {
  g_top = 0;
  return (srt_exec){.ctx = g_ctx,
                    .arena = g_bf16_arena,
                    .device = g_device,
                    .backend = &srt_cpu_bf16_backend};
}

static int64_t take(int64_t bytes) {
  int64_t at = g_top;
  g_top += (bytes + 63) / 64 * 64;
  assert_true(g_top <= BF16_ARENA_BYTES);
  return at;
}
static uint16_t *H(int64_t at) {
  return (uint16_t *)(void *)(g_bf16_arena + at);
}
static float *G(int64_t at) { return (float *)(void *)(g_bf16_arena + at); }

// n bf16 values from test_value(id, .), rounded.
static int64_t bf16_values(uint64_t id, int64_t n) {
  int64_t at = take(2 * n);
  for (int64_t i = 0; i < n; ++i)
    H(at)[i] = srt_f32_to_bf16(test_value(id, i));
  return at;
}

static void test_add_rounds_to_nearest_even(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  // 1 + 2^-8 is halfway between 1 (0x3F80, even) and 1 + 2^-7; 1 + 2^-7 +
  // 2^-8 halfway between 0x3F81 and 0x3F82 (even); 1 + 3 2^-9 nearer 0x3F81;
  // the largest finite bf16 doubled overflows to +inf; NaN stays NaN.
  const uint16_t a[] = {0x3F80, 0x3F81, 0x3F80, 0x7F7F, 0x7FC0};
  const uint16_t b[] = {0x3B80, 0x3B80, 0x3BC0, 0x7F7F, 0x3F80};
  const uint16_t want[] = {0x3F80, 0x3F82, 0x3F81, 0x7F80};
  enum { N = 5 };
  int64_t A = take(2 * N), B = take(2 * N), Y = take(2 * N);
  memcpy(H(A), a, sizeof a);
  memcpy(H(B), b, sizeof b);
  ASSERT_OK(srt_op_add(&e, A, B, Y, N, SRT_OP_BF16));
  for (int i = 0; i < 4; ++i)
    assert_int_equal(H(Y)[i], want[i]);
  assert_true(isnan(srt_bf16_to_f32(H(Y)[4])));
}

// y (bf16, [n, out]) against the float64 product of the same bf16 x, w, b.
static void check_linear(const uint16_t *y, const uint16_t *x,
                         const uint16_t *w, const uint16_t *b, int64_t n,
                         int64_t in, int64_t out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double ref = srt_bf16_to_f32(b[o]), mag = fabs(ref);
      for (int64_t i = 0; i < in; ++i) {
        double p = (double)srt_bf16_to_f32(x[t * in + i]) *
                   srt_bf16_to_f32(w[o * in + i]);
        ref += p;
        mag += fabs(p);
      }
      double got = srt_bf16_to_f32(y[t * out + o]);
      double tol = ldexp(fabs(ref), -8) + (double)(in + 1) * ldexp(mag, -24);
      if (!(fabs(got - ref) <= tol))
        fail_msg("linear %lldx%lldx%lld [%lld, %lld]: %.9g vs float64 %.9g "
                 "(tolerance %.3g)",
                 (long long)n, (long long)in, (long long)out, (long long)t,
                 (long long)o, got, ref, tol);
    }
}

static void linear_case(int64_t n, int64_t in, int64_t out, bool exact) {
  srt_exec e = bf16_exec();
  int64_t x = bf16_values(11, n * in), w = bf16_values(12, out * in),
          b = bf16_values(13, out);
  int64_t y = take(2 * n * out);
  ASSERT_OK(srt_op_linear(&e, x, w, b, y, n, in, out));
  check_linear(H(y), H(x), H(w), H(b), n, in, out);
  if (!exact)
    return;
  // The staged path: the fp32 kernel on the widened inputs, rounded once.
  float *xf = test_malloc(sizeof(float) * (size_t)(n * in)),
        *wf = test_malloc(sizeof(float) * (size_t)(out * in)),
        *bf = test_malloc(sizeof(float) * (size_t)out),
        *yf = test_malloc(sizeof(float) * (size_t)(n * out));
  for (int64_t i = 0; i < n * in; ++i)
    xf[i] = srt_bf16_to_f32(H(x)[i]);
  for (int64_t i = 0; i < out * in; ++i)
    wf[i] = srt_bf16_to_f32(H(w)[i]);
  for (int64_t i = 0; i < out; ++i)
    bf[i] = srt_bf16_to_f32(H(b)[i]);
  ASSERT_OK(srt_cpu_linear_forward(yf, xf, wf, bf, n, in, out));
  for (int64_t i = 0; i < n * out; ++i)
    assert_int_equal(H(y)[i], srt_f32_to_bf16(yf[i]));
  test_free(xf), test_free(wf), test_free(bf), test_free(yf);
}

static void test_linear_staged(void **state) {
  (void)state;
  linear_case(7, 6, 5, true);
}

static void test_linear_bf16_matmul(void **state) {
  (void)state;
  linear_case(128, 128, 128, false);
}

// A linear without a bias and dx (128^3): oneDNN's bf16 matmul writes
// bf16 itself, each element its fp32 product (srt_cpu_gemm_bf16's) rounded
// to nearest even, bit for bit; on a CPU without bf16 matmuls the staged
// path runs, within check_linear's bounds either way.
static void test_linear_bf16_out(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { N = 128, IN = 128, OUT = 128 };
  int64_t x = bf16_values(51, N * IN), w = bf16_values(52, OUT * IN),
          dy = bf16_values(53, N * OUT), zero = take(2 * (IN > OUT ? IN : OUT));
  int64_t y = take(2 * N * OUT), dx = take(2 * N * IN), wt = take(2 * IN * OUT);
  memset(H(zero), 0, 2 * (IN > OUT ? IN : OUT));
  ASSERT_OK(srt_op_linear(&e, x, w, -1, y, N, IN, OUT));
  ASSERT_OK(srt_op_linear_grad_input(&e, dy, w, dx, N, IN, OUT));
  check_linear(H(y), H(x), H(w), H(zero), N, IN, OUT);
  for (int64_t o = 0; o < OUT; ++o) // dx = dy w is the linear of w^T
    for (int64_t i = 0; i < IN; ++i)
      H(wt)[i * OUT + o] = H(w)[o * IN + i];
  check_linear(H(dx), H(dy), H(wt), H(zero), N, OUT, IN);
  float *c = test_malloc(sizeof(float) * N * OUT);
  bool used;
  ASSERT_OK(srt_cpu_gemm_bf16(&used, false, true, N, OUT, IN, H(x), IN, H(w), IN, 0.0f, c, OUT));
  for (int64_t i = 0; used && i < N * OUT; ++i)
    assert_int_equal(H(y)[i], srt_f32_to_bf16(c[i]));
  ASSERT_OK(srt_cpu_gemm_bf16(&used, false, false, N, IN, OUT, H(dy), OUT, H(w), IN, 0.0f, c, IN));
  for (int64_t i = 0; used && i < N * IN; ++i)
    assert_int_equal(H(dx)[i], srt_f32_to_bf16(c[i]));
  test_free(c);
}

// dw = dy^T x in fp32 from bf16 dy [n, out] and x [n, in].
static void test_linear_grad_weight_fp32(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { N = 128, IN = 128, OUT = 128 };
  int64_t dy = bf16_values(21, N * OUT), x = bf16_values(22, N * IN),
          dw = take(4 * OUT * IN);
  ASSERT_OK(srt_op_linear_grad_weight(&e, dy, x, dw, N, IN, OUT));
  for (int64_t o = 0; o < OUT; ++o)
    for (int64_t i = 0; i < IN; ++i) {
      double ref = 0, mag = 0;
      for (int64_t t = 0; t < N; ++t) {
        double p = (double)srt_bf16_to_f32(H(dy)[t * OUT + o]) *
                   srt_bf16_to_f32(H(x)[t * IN + i]);
        ref += p;
        mag += fabs(p);
      }
      double tol = N * ldexp(mag, -24);
      if (!(fabs(G(dw)[o * IN + i] - ref) <= tol))
        fail_msg("dw[%lld, %lld]: %.9g vs float64 %.9g", (long long)o,
                 (long long)i, (double)G(dw)[o * IN + i], ref);
    }
}

//===----------------------------------------------------------------------===//
// The elementwise and norm ops on row tiles (bf16_elementwise.c): shapes of
// several tiles, a short last one and both threads; each bf16 result is
// the fp32 kernel's value on the widened inputs rounded once (the staged
// path's bytes, exactly), and within half a bf16 ulp (2^-8 relative) plus
// 2^-20 of the terms' magnitude (a few fp32 roundings) of float64.
//===----------------------------------------------------------------------===//

// The n bf16 at `at`, widened (test_free it).
static float *widened(int64_t at, int64_t n) {
  float *f = test_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; ++i)
    f[i] = srt_bf16_to_f32(H(at)[i]);
  return f;
}

// The bf16 at `at` against fp32 `want` rounded (exactly) and float64 `ref`
// (within 2^-8 |ref| + 2^-20 mag).
static void expect_bf16(const char *what, int64_t at, const float *want,
                        const double *ref, const double *mag, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (H(at)[i] != srt_f32_to_bf16(want[i]))
      fail_msg("%s[%lld]: bf16 0x%04x, the fp32 kernel's value rounded 0x%04x",
               what, (long long)i, H(at)[i], srt_f32_to_bf16(want[i]));
    double got = srt_bf16_to_f32(H(at)[i]);
    double tol = ldexp(fabs(ref[i]), -8) + ldexp(mag[i], -20);
    if (!(fabs(got - ref[i]) <= tol))
      fail_msg("%s[%lld]: %.9g vs float64 %.9g (tolerance %.3g)", what,
               (long long)i, got, ref[i], tol);
  }
}

static double *doubles(int64_t n) {
  return test_calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static void test_add_tiles(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { N = 20000 };
  int64_t a = bf16_values(31, N), b = bf16_values(32, N), y = take(2 * N);
  ASSERT_OK(srt_op_add(&e, a, b, y, N, SRT_OP_BF16));
  float *fa = widened(a, N), *fb = widened(b, N), *want = test_malloc(4 * N);
  double *ref = doubles(N), *mag = doubles(N);
  srt_cpu_add_forward(want, fa, fb, N);
  for (int64_t i = 0; i < N; ++i)
    ref[i] = (double)fa[i] + fb[i], mag[i] = fabs(fa[i]) + fabs(fb[i]);
  expect_bf16("add", y, want, ref, mag, N);
  test_free(fa), test_free(fb), test_free(want), test_free(ref), test_free(mag);
}

static void test_bias_add_tiles(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { N = 301, F = 96 };
  int64_t x = bf16_values(33, N * F), b = bf16_values(34, F), y = take(2 * N * F);
  ASSERT_OK(srt_op_bias_add(&e, x, b, y, N, F));
  float *fx = widened(x, N * F), *fb = widened(b, F), *want = test_malloc(4 * N * F);
  double *ref = doubles(N * F), *mag = doubles(N * F);
  srt_cpu_bias_add_forward(want, fx, fb, N, F);
  for (int64_t i = 0; i < N * F; ++i)
    ref[i] = (double)fx[i] + fb[i % F], mag[i] = fabs(fx[i]) + fabs(fb[i % F]);
  expect_bf16("bias_add", y, want, ref, mag, N * F);
  test_free(fx), test_free(fb), test_free(want), test_free(ref), test_free(mag);
}

// act(g) and act'(g) in float64: silu, or gelu's tanh form
// (0.5 g (1 + tanh(k (g + 0.044715 g^3)))).
static void act64(double g, int64_t act, double *a, double *da) {
  if (act == SRT_GLU_SILU) {
    double s = 1.0 / (1.0 + exp(-g));
    *a = g * s, *da = s * (1.0 + g * (1.0 - s));
    return;
  }
  double k = sqrt(2.0 / 3.14159265358979323846), t = tanh(k * (g + 0.044715 * g * g * g));
  *a = 0.5 * g * (1.0 + t);
  *da = 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * g * g);
}

static void glu_case(int64_t act) {
  srt_exec e = bf16_exec();
  enum { N = 20000 };
  int64_t g = bf16_values(35, N), u = bf16_values(36, N), dy = bf16_values(37, N);
  int64_t y = take(2 * N), dg = take(2 * N), du = take(2 * N);
  ASSERT_OK(srt_op_glu(&e, g, u, y, N, act));
  ASSERT_OK(srt_op_glu_grad(&e, g, u, dy, dg, du, N, act));
  float *fg = widened(g, N), *fu = widened(u, N), *fdy = widened(dy, N);
  float *wy = test_malloc(4 * N), *wdg = test_malloc(4 * N), *wdu = test_malloc(4 * N);
  srt_cpu_glu_forward(wy, fg, fu, N, (srt_glu_activation)act);
  srt_cpu_glu_backward(wdg, wdu, fdy, fg, fu, N, (srt_glu_activation)act);
  double *ry = doubles(N), *rdg = doubles(N), *rdu = doubles(N), *mag = doubles(N);
  for (int64_t i = 0; i < N; ++i) {
    double a, da;
    act64(fg[i], act, &a, &da);
    ry[i] = a * fu[i], rdg[i] = (double)fdy[i] * fu[i] * da, rdu[i] = (double)fdy[i] * a;
    mag[i] = 4.0 * (1.0 + fabs(fg[i])) * (1.0 + fabs(fu[i])) * (1.0 + fabs(fdy[i]));
  }
  expect_bf16("glu", y, wy, ry, mag, N);
  expect_bf16("glu dgate", dg, wdg, rdg, mag, N);
  expect_bf16("glu dup", du, wdu, rdu, mag, N);
  test_free(fg), test_free(fu), test_free(fdy), test_free(wy), test_free(wdg);
  test_free(wdu), test_free(ry), test_free(rdg), test_free(rdu), test_free(mag);
}

static void test_glu_tiles(void **state) {
  (void)state;
  glu_case(SRT_GLU_SILU);
  glu_case(SRT_GLU_GELU_TANH);
}

// 1/sqrt(mean(x^2) + eps) of the g elements at x, in float64.
static double rstd64(const float *x, int64_t g, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < g; ++i)
    ss += (double)x[i] * x[i];
  return 1.0 / sqrt(ss / (double)g + eps);
}

// RMSNorm forward (and fused with the add) and dx of [N, F] in groups
// of `group` (0: F), offset as Gemma's.
static void rms_norm_case(int64_t group, double offset) {
  srt_exec e = bf16_exec();
  enum { N = 301, F = 96 };
  const double eps = 1e-5;
  int64_t g = group > 0 ? group : F, rows = N * F / g;
  int64_t x = bf16_values(41, N * F), w = bf16_values(42, g), dy = bf16_values(43, N * F);
  int64_t b = bf16_values(44, N * F), y = take(2 * N * F), dx = take(2 * N * F);
  int64_t sum = take(2 * N * F), y2 = take(2 * N * F);
  ASSERT_OK(srt_op_rms_norm(&e, x, w, y, N, F, group, eps, offset));
  ASSERT_OK(srt_op_rms_norm_grad_input(&e, x, w, dy, dx, N, F, group, eps, offset));
  ASSERT_OK(srt_op_add_rms_norm(&e, x, b, sum, w, y2, N, F, group, eps, offset));
  float *fx = widened(x, N * F), *fw = widened(w, g), *fdy = widened(dy, N * F);
  float *wy = test_malloc(4 * N * F), *wdx = test_malloc(4 * N * F);
  srt_cpu_rms_norm_forward(wy, fx, fw, N, F, group, (float)eps, (float)offset);
  srt_cpu_rms_norm_backward(wdx, NULL, fdy, fx, fw, N, F, group, (float)eps, (float)offset,
                            NULL);
  double *ry = doubles(N * F), *rdx = doubles(N * F), *my = doubles(N * F),
         *mdx = doubles(N * F);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = fx + r * g, *dyr = fdy + r * g;
    double rs = rstd64(xr, g, eps), dot = 0, adot = 0;
    for (int64_t i = 0; i < g; ++i) {
      dot += (offset + fw[i]) * dyr[i] * xr[i];
      adot += fabs((offset + fw[i]) * dyr[i] * xr[i]);
    }
    for (int64_t i = 0; i < g; ++i) {
      double wi = offset + fw[i];
      ry[r * g + i] = wi * xr[i] * rs, my[r * g + i] = 4.0 * fabs(ry[r * g + i]);
      rdx[r * g + i] = rs * wi * dyr[i] - rs * rs * rs * xr[i] / (double)g * dot;
      mdx[r * g + i] = 4.0 * (rs * fabs(wi * dyr[i]) + rs * rs * rs * fabs(xr[i]) * adot);
    }
  }
  expect_bf16("rms_norm", y, wy, ry, my, N * F);
  expect_bf16("rms_norm dx", dx, wdx, rdx, mdx, N * F);
  // The fused op: the sum rounded, then the norm of the rounded sum.
  float *fs = test_malloc(4 * N * F), *fb = widened(b, N * F);
  for (int64_t i = 0; i < N * F; ++i)
    fs[i] = fx[i] + fb[i];
  for (int64_t i = 0; i < N * F; ++i) {
    if (H(sum)[i] != srt_f32_to_bf16(fs[i]))
      fail_msg("add_rms_norm sum[%lld]: 0x%04x, not a + b rounded", (long long)i, H(sum)[i]);
    fs[i] = srt_bf16_to_f32(H(sum)[i]);
  }
  srt_cpu_rms_norm_forward(wy, fs, fw, N, F, group, (float)eps, (float)offset);
  for (int64_t r = 0; r < rows; ++r) {
    double rs = rstd64(fs + r * g, g, eps);
    for (int64_t i = 0; i < g; ++i)
      ry[r * g + i] = (offset + fw[i]) * fs[r * g + i] * rs, my[r * g + i] = 4.0 * fabs(ry[r * g + i]);
  }
  expect_bf16("add_rms_norm", y2, wy, ry, my, N * F);
  test_free(fx), test_free(fw), test_free(fdy), test_free(wy), test_free(wdx), test_free(ry);
  test_free(rdx), test_free(my), test_free(mdx), test_free(fs), test_free(fb);
}

static void test_rms_norm_tiles(void **state) {
  (void)state;
  rms_norm_case(0, 0.0);
  rms_norm_case(32, 1.0);
}

// dw (fp32) of RMSNorm over rows of several blocks of 64: the fp32
// kernel's bytes on the widened inputs, and float64 within the fp32 sum's
// error (rows 2^-24 of the magnitude, plus the per-term roundings).
static void test_rms_norm_grad_weight_tiles(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { N = 300, F = 96 };
  int64_t x = bf16_values(45, N * F), dy = bf16_values(46, N * F), dw = take(4 * F);
  ASSERT_OK(srt_op_rms_norm_grad_weight(&e, x, dy, dw, N, F, 0, 1e-5));
  float *fx = widened(x, N * F), *fdy = widened(dy, N * F), *want = test_calloc(F, 4);
  float *ws = test_malloc(4 * (size_t)srt_cpu_rms_norm_backward_workspace_floats(N, F, 0));
  srt_cpu_rms_norm_backward(NULL, want, fdy, fx, NULL, N, F, 0, 1e-5f, 0.0f, ws);
  assert_memory_equal(G(dw), want, 4 * F);
  for (int64_t i = 0; i < F; ++i) {
    double ref = 0, mag = 0;
    for (int64_t t = 0; t < N; ++t) {
      double p = (double)fdy[t * F + i] * fx[t * F + i] * rstd64(fx + t * F, F, 1e-5);
      ref += p, mag += fabs(p);
    }
    double tol = (N + 8) * ldexp(mag, -24);
    if (!(fabs(G(dw)[i] - ref) <= tol))
      fail_msg("rms_norm dw[%lld]: %.9g vs float64 %.9g (tolerance %.3g)", (long long)i,
               (double)G(dw)[i], ref, tol);
  }
  test_free(fx), test_free(fdy), test_free(want), test_free(ws);
}

// Rotary on [B, S, heads * head_dim] with fp32 tables, forward and back.
static void test_rotary_tiles(void **state) {
  (void)state;
  srt_exec e = bf16_exec();
  enum { B = 2, S = 150, HEADS = 4, HD = 16, N = B * S * HEADS * HD, T = B * S * HD };
  int64_t x = bf16_values(47, N), y = take(2 * N), dx = take(2 * N);
  int64_t cs = take(4 * T), sn = take(4 * T);
  for (int64_t i = 0; i < T; ++i)
    G(cs)[i] = test_value(48, i), G(sn)[i] = test_value(49, i);
  ASSERT_OK(srt_op_apply_rotary(&e, x, cs, sn, y, B, S, HEADS, HD));
  ASSERT_OK(srt_op_apply_rotary_grad(&e, x, cs, sn, dx, B, S, HEADS, HD));
  float *fx = widened(x, N), *wy = test_malloc(4 * N), *wdx = test_malloc(4 * N);
  srt_cpu_apply_rotary_forward(wy, fx, G(cs), G(sn), B, S, HEADS, HD);
  srt_cpu_apply_rotary_backward(wdx, fx, G(cs), G(sn), B, S, HEADS, HD);
  double *ry = doubles(N), *rdx = doubles(N), *mag = doubles(N);
  for (int64_t i = 0; i < N; ++i) {
    int64_t t = i / (HEADS * HD), d = i % HD, h = HD / 2, lo = d < h;
    const float *c = G(cs) + t * HD, *s = G(sn) + t * HD;
    double x1 = fx[i - d + d % h], x2 = fx[i - d + d % h + h];
    ry[i] = lo ? x1 * c[d] - x2 * s[d] : x2 * c[d] + x1 * s[d];
    rdx[i] = lo ? x1 * c[d] + x2 * s[d + h] : x2 * c[d] - x1 * s[d - h];
    mag[i] = 4.0 * (fabs(x1) + fabs(x2));
  }
  expect_bf16("apply_rotary", y, wy, ry, mag, N);
  expect_bf16("apply_rotary_grad", dx, wdx, rdx, mag, N);
  test_free(fx), test_free(wy), test_free(wdx), test_free(ry), test_free(rdx), test_free(mag);
}

// The embedding's lookup (ids in and out of the table, scale 1 and
// Gemma's sqrt(hidden)): the fp32 kernel on the widened table, rounded,
// and float64 w scale within half a bf16 ulp.
static void embedding_case(float scale) {
  srt_exec e = bf16_exec();
  enum { N = 301, HIDDEN = 96, VOCAB = 50 };
  int64_t ids = take(8 * N), w = bf16_values(54, VOCAB * HIDDEN), y = take(2 * N * HIDDEN);
  int64_t *id = (int64_t *)(void *)(g_bf16_arena + ids);
  for (int64_t t = 0; t < N; ++t)
    id[t] = (t * 7) % (VOCAB + 5) - 2; // -2, -1 and VOCAB.. are out of range
  ASSERT_OK(srt_op_embedding(&e, ids, w, y, N, HIDDEN, VOCAB, -1, scale));
  float *fw = widened(w, VOCAB * HIDDEN), *want = test_malloc(4 * N * HIDDEN);
  srt_cpu_embedding_forward(want, id, fw, N, HIDDEN, 0, VOCAB, scale);
  double *ref = doubles(N * HIDDEN), *mag = doubles(N * HIDDEN);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t i = 0; id[t] >= 0 && id[t] < VOCAB && i < HIDDEN; ++i)
      ref[t * HIDDEN + i] = (double)fw[id[t] * HIDDEN + i] * scale;
  expect_bf16("embedding", y, want, ref, mag, N * HIDDEN);
  test_free(fw), test_free(want), test_free(ref), test_free(mag);
}

static void test_embedding_rows(void **state) {
  (void)state;
  embedding_case(1.0f);
  embedding_case(9.8125f);
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_rounds_to_nearest_even),
      cmocka_unit_test(test_linear_staged),
      cmocka_unit_test(test_linear_bf16_matmul),
      cmocka_unit_test(test_linear_bf16_out),
      cmocka_unit_test(test_linear_grad_weight_fp32),
      cmocka_unit_test(test_add_tiles),
      cmocka_unit_test(test_bias_add_tiles),
      cmocka_unit_test(test_glu_tiles),
      cmocka_unit_test(test_rms_norm_tiles),
      cmocka_unit_test(test_rms_norm_grad_weight_tiles),
      cmocka_unit_test(test_rotary_tiles),
      cmocka_unit_test(test_embedding_rows),
  };
  int failed = cmocka_run_group_tests(tests, bf16_setup, bf16_teardown);
  MPI_Finalize();
  return failed;
}
