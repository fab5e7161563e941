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

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_rounds_to_nearest_even),
      cmocka_unit_test(test_linear_staged),
      cmocka_unit_test(test_linear_bf16_matmul),
      cmocka_unit_test(test_linear_grad_weight_fp32),
  };
  int failed = cmocka_run_group_tests(tests, bf16_setup, bf16_teardown);
  MPI_Finalize();
  return failed;
}
