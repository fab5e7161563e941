// GPU kernel test: every launcher of runtime/cuda/kernels.h against the CPU
// kernels of libshardrt on the same bf16-rounded inputs. Prints one line per
// check with its measured error; exits 0 when all pass, 1 otherwise, and 77
// (skip) on a machine without a CUDA device.
//
// Error of a check: max |gpu - cpu| / max(max |cpu|, tiny). Every output is
// filled with 0xFF bytes (NaN in bf16, fp32 and fp64) before its launch, so
// a NaN left in it is an element the kernel did not write.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "shardrt/kernels.h"
#include "cuda_test_util.h"

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//


// A launch, then a synchronisation so that execution errors surface here.
#define LAUNCH(call)                                                           \
  do {                                                                         \
    CUDA_OK(call);                                                             \
    CUDA_OK(cudaDeviceSynchronize());                                          \
  } while (0)

// Tolerances: bf16 outputs are rounded once (2^-9 relative); fp32 outputs
// of identical inputs differ by summation order only.
static const double kTolBf16 = 1e-2;
static const double kTolF32 = 1e-5;
static const double kTolExact = 1e-6;

static int g_failures;

// Every allocation of the current test, freed by release_all().
enum { kMaxAllocs = 512 };
static void *g_dev[kMaxAllocs], *g_host[kMaxAllocs];
static int g_ndev, g_nhost;

static void *host_alloc(size_t bytes) {
  void *p = calloc(bytes ? bytes : 1, 1);
  if (!p || g_nhost == kMaxAllocs) {
    fprintf(stderr, "host allocation of %zu bytes failed\n", bytes);
    exit(1);
  }
  return g_host[g_nhost++] = p;
}

static void *dev_alloc(size_t bytes) {
  void *p;
  if (g_ndev == kMaxAllocs) {
    fprintf(stderr, "too many device allocations\n");
    exit(1);
  }
  CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
  return g_dev[g_ndev++] = p;
}

static void release_all(void) {
  for (int i = 0; i < g_ndev; ++i)
    CUDA_OK(cudaFree(g_dev[i]));
  for (int i = 0; i < g_nhost; ++i)
    free(g_host[i]);
  g_ndev = g_nhost = 0;
}

// xorshift64*: reproducible inputs.
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static double uniform01(void) {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return (double)((g_rng * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)uniform01(); }

// Host bf16, round to nearest even (NaN stays NaN), as the kernels.
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static float round_bf16(float f) { return from_bf16(to_bf16(f)); }

// n uniform values in [lo, hi), rounded to bf16 when `bf16`.
static float *random_host(int64_t n, float lo, float hi, int bf16) {
  float *x = host_alloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; ++i)
    x[i] = bf16 ? round_bf16(uniform(lo, hi)) : uniform(lo, hi);
  return x;
}

static srt_bf16 *up_bf16(const float *x, int64_t n) {
  uint16_t *bits = host_alloc((size_t)n * sizeof *bits);
  for (int64_t i = 0; i < n; ++i)
    bits[i] = to_bf16(x[i]);
  srt_bf16 *d = dev_alloc((size_t)n * sizeof *d);
  CUDA_OK(cudaMemcpy(d, bits, (size_t)n * sizeof *d, cudaMemcpyHostToDevice));
  return d;
}

static void *up_bytes(const void *x, size_t bytes) {
  void *d = dev_alloc(bytes);
  CUDA_OK(cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice));
  return d;
}

static float *up_f32(const float *x, int64_t n) { return up_bytes(x, (size_t)n * sizeof *x); }

// An output buffer filled with the NaN sentinel.
static void *out_dev(size_t bytes) {
  void *d = dev_alloc(bytes);
  CUDA_OK(cudaMemset(d, 0xff, bytes ? bytes : 1));
  return d;
}

static float *down_bf16(const srt_bf16 *d, int64_t n) {
  uint16_t *bits = host_alloc((size_t)n * sizeof *bits);
  CUDA_OK(cudaMemcpy(bits, d, (size_t)n * sizeof *bits, cudaMemcpyDeviceToHost));
  float *x = host_alloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; ++i)
    x[i] = from_bf16(bits[i]);
  return x;
}

static float *down_f32(const float *d, int64_t n) {
  float *x = host_alloc((size_t)n * sizeof *x);
  CUDA_OK(cudaMemcpy(x, d, (size_t)n * sizeof *x, cudaMemcpyDeviceToHost));
  return x;
}

static void report(const char *name, double err, double tol, int64_t unwritten) {
  int ok = unwritten == 0 && err <= tol;
  if (!ok)
    g_failures++;
  printf("%s %-44s error %.3e (tol %.0e)", ok ? "PASS" : "FAIL", name, err, tol);
  if (unwritten)
    printf(", %lld NaN (unwritten?)", (long long)unwritten);
  printf("\n");
}

// Compares gpu[0..n) with cpu[0..n) and reports.
static void check(const char *name, const float *gpu, const float *cpu, int64_t n, double tol) {
  double diff = 0.0, scale = 1e-30;
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(gpu[i])) {
      nan++;
      continue;
    }
    double d = fabs((double)gpu[i] - (double)cpu[i]);
    diff = d > diff || isnan(d) ? d : diff;
    scale = fabs((double)cpu[i]) > scale ? fabs((double)cpu[i]) : scale;
  }
  report(name, isnan(diff) ? INFINITY : diff / scale, tol, nan);
}

static void check_bf16(const char *name, const srt_bf16 *d, const float *cpu, int64_t n,
                       double tol) {
  check(name, down_bf16(d, n), cpu, n, tol);
}

static void check_f32(const char *name, const float *d, const float *cpu, int64_t n,
                      double tol) {
  check(name, down_f32(d, n), cpu, n, tol);
}

static void check_true(const char *name, int ok, const char *detail) {
  if (!ok)
    g_failures++;
  printf("%s %-44s %s\n", ok ? "PASS" : "FAIL", name, detail);
}

static float *copy_host(const float *x, int64_t n) {
  float *y = host_alloc((size_t)n * sizeof *y);
  memcpy(y, x, (size_t)n * sizeof *y);
  return y;
}

//===----------------------------------------------------------------------===//
// Conversions and elementwise ops
//===----------------------------------------------------------------------===//

static void test_casts(void) {
  // Ties, subnormals, overflow to inf, signed zero and NaN, bit for bit.
  const float special[] = {0.0f, -0.0f, 1e-40f, 1.00390625f, 1.01171875f, -2.99609375f,
                           3.4e38f, INFINITY, -INFINITY, NAN};
  int64_t ns = (int64_t)(sizeof special / sizeof special[0]);
  float *sd = up_f32(special, ns);
  srt_bf16 *sy = out_dev((size_t)ns * sizeof *sy);
  LAUNCH(srt_cuda_cast_f32_to_bf16(sy, sd, ns, 0));
  uint16_t bits[16];
  CUDA_OK(cudaMemcpy(bits, sy, (size_t)ns * sizeof *bits, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int64_t i = 0; i < ns; ++i)
    bad += isnan(special[i]) ? !isnan(from_bf16(bits[i])) : bits[i] != to_bf16(special[i]);
  check_true("cast_f32_to_bf16 special values", bad == 0, bad ? "mismatch" : "bit-exact");

  // Odd n, then an unaligned view (scalar path) of the same data.
  int64_t n = 10007;
  float *x = random_host(n, -3.0f, 3.0f, 0), *want = host_alloc((size_t)n * sizeof *want);
  for (int64_t i = 0; i < n; ++i)
    want[i] = round_bf16(x[i]);
  float *dx = up_f32(x, n);
  srt_bf16 *dy = out_dev((size_t)n * sizeof *dy);
  LAUNCH(srt_cuda_cast_f32_to_bf16(dy, dx, n, 0));
  check_bf16("cast_f32_to_bf16", dy, want, n, 0.0);
  srt_bf16 *dy2 = out_dev((size_t)n * sizeof *dy2);
  LAUNCH(srt_cuda_cast_f32_to_bf16(dy2 + 1, dx + 3, n - 3, 0));
  check_bf16("cast_f32_to_bf16 unaligned", dy2 + 1, want + 3, n - 3, 0.0);

  float *back = out_dev((size_t)n * sizeof *back);
  LAUNCH(srt_cuda_cast_bf16_to_f32(back, dy, n, 0));
  check_f32("cast_bf16_to_f32", back, want, n, 0.0);
  LAUNCH(srt_cuda_cast_bf16_to_f32(back, dy, 0, 0)); // n == 0: no launch
  release_all();
}

static void test_add(void) {
  int64_t n = 100003;
  float *a = random_host(n, -2, 2, 1), *b = random_host(n, -2, 2, 1);
  float *want = host_alloc((size_t)n * sizeof *want);
  srt_cpu_add_forward(want, a, b, n);
  srt_bf16 *da = up_bf16(a, n), *db = up_bf16(b, n), *dy = out_dev((size_t)n * 2);
  LAUNCH(srt_cuda_add_bf16(dy, da, db, n, 0));
  check_bf16("add_bf16", dy, want, n, kTolBf16);
  LAUNCH(srt_cuda_add_bf16(da, da, db, n, 0)); // y == a
  check_bf16("add_bf16 in place", da, want, n, kTolBf16);

  float *fa = random_host(n, -2, 2, 0), *fb = random_host(n, -2, 2, 0);
  srt_cpu_add_forward(want, fa, fb, n);
  float *dfy = out_dev((size_t)n * sizeof(float));
  LAUNCH(srt_cuda_add_f32(dfy, up_f32(fa, n), up_f32(fb, n), n, 0));
  check_f32("add_f32", dfy, want, n, kTolExact);
  release_all();
}

static void test_bias(void) {
  int64_t n = 37, f = 1001;
  float *x = random_host(n * f, -2, 2, 1), *bias = random_host(f, -1, 1, 1);
  float *want = host_alloc((size_t)(n * f) * sizeof *want);
  srt_cpu_bias_add_forward(want, x, bias, n, f);
  srt_bf16 *dy = out_dev((size_t)(n * f) * 2);
  LAUNCH(srt_cuda_bias_add(dy, up_bf16(x, n * f), up_bf16(bias, f), n, f, 0));
  check_bf16("bias_add [37, 1001]", dy, want, n * f, kTolBf16);

  // One chunk; several; more 256-row spans than chunks (a narrow k_proj bias).
  const int64_t shapes[3][2] = {{333, 517}, {3333, 517}, {20000, 128}};
  for (int k = 0; k < 3; ++k) {
    int64_t rows = shapes[k][0], cols = shapes[k][1];
    // The reference sums in double (a long fp32 sum is itself off by more).
    float *g = random_host(rows * cols, -1, 1, 1), *db = host_alloc((size_t)cols * sizeof *db);
    for (int64_t c = 0; c < cols; ++c) {
      double sum = 0.0;
      for (int64_t r = 0; r < rows; ++r)
        sum += g[r * cols + c];
      db[c] = (float)sum;
    }
    float *ddb = out_dev((size_t)cols * sizeof(float));
    float *scratch = dev_alloc((size_t)srt_cuda_column_sum_scratch(rows, cols) * sizeof(float));
    LAUNCH(srt_cuda_column_sum(ddb, up_bf16(g, rows * cols), rows, cols, scratch, 0));
    char name[64];
    snprintf(name, sizeof name, "column_sum [%lld, %lld]", (long long)rows, (long long)cols);
    check_f32(name, ddb, db, cols, kTolF32);
    if (k == 0) {
      float *zeros = host_alloc((size_t)cols * sizeof *zeros);
      LAUNCH(srt_cuda_column_sum(ddb, NULL, 0, cols, NULL, 0)); // no rows: zeros
      check_f32("column_sum n == 0 writes zeros", ddb, zeros, cols, 0.0);
    }
  }
  release_all();
}

static void test_activations(void) {
  int64_t n = 10001;
  float *gate = random_host(n, -6, 6, 1), *up = random_host(n, -2, 2, 1);
  float *dy = random_host(n, -1, 1, 1);
  srt_bf16 *dgate_in = up_bf16(gate, n), *dup_in = up_bf16(up, n), *ddy = up_bf16(dy, n);
  float *want = host_alloc((size_t)n * sizeof *want), *want2 = host_alloc((size_t)n * 4);
  for (int act = 0; act < 2; ++act) {
    const char *names[2][3] = {{"glu_forward silu", "glu_backward silu dgate",
                                "glu_backward silu dup"},
                               {"glu_forward gelu", "glu_backward gelu dgate",
                                "glu_backward gelu dup"}};
    srt_glu_activation a = act ? SRT_GLU_GELU_TANH : SRT_GLU_SILU;
    srt_cpu_glu_forward(want, gate, up, n, a);
    srt_bf16 *y = out_dev((size_t)n * 2);
    LAUNCH(srt_cuda_glu_forward(y, dgate_in, dup_in, n, act, 0));
    check_bf16(names[act][0], y, want, n, kTolBf16);
    srt_cpu_glu_backward(want, want2, dy, gate, up, n, a);
    srt_bf16 *dg = out_dev((size_t)n * 2), *du = out_dev((size_t)n * 2);
    LAUNCH(srt_cuda_glu_backward(dg, du, ddy, dgate_in, dup_in, n, act, 0));
    check_bf16(names[act][1], dg, want, n, kTolBf16);
    check_bf16(names[act][2], du, want2, n, kTolBf16);
  }
  int64_t m = 4099;
  float *x = random_host(m, -3, 3, 1), *g = random_host(m, -1, 1, 1);
  srt_bf16 *dx = up_bf16(x, m), *dg = up_bf16(g, m), *y = out_dev((size_t)m * 2);
  srt_cpu_relu2_forward(want, x, m);
  LAUNCH(srt_cuda_relu2_forward(y, dx, m, 0));
  check_bf16("relu2_forward", y, want, m, kTolBf16);
  srt_cpu_relu2_backward(want, g, x, m);
  srt_bf16 *gx = out_dev((size_t)m * 2);
  LAUNCH(srt_cuda_relu2_backward(gx, dg, dx, m, 0));
  check_bf16("relu2_backward", gx, want, m, kTolBf16);
  release_all();
}

//===----------------------------------------------------------------------===//
// Embedding, RMSNorm, rotary
//===----------------------------------------------------------------------===//

// A vocabulary-parallel shard [100, 150) with ids on both sides of it and
// repeated rows; hidden 200 takes the vector path, 67 the scalar one.
static void embedding_case(int64_t hidden, float scale, int64_t pad) {
  int64_t n = 300, start = 100, local = 50;
  int64_t *ids = host_alloc((size_t)n * sizeof *ids);
  for (int64_t t = 0; t < n; ++t)
    ids[t] = 80 + (int64_t)(uniform01() * 90.0); // [80, 170)
  float *w = random_host(local * hidden, -1, 1, 1), *dy = random_host(n * hidden, -1, 1, 1);
  float *want = host_alloc((size_t)(n * hidden) * sizeof *want);
  srt_cpu_embedding_forward(want, ids, w, n, hidden, start, local, scale);
  int64_t *dids = up_bytes(ids, (size_t)n * sizeof *ids);
  srt_bf16 *y = out_dev((size_t)(n * hidden) * 2);
  LAUNCH(srt_cuda_embedding_forward(y, dids, up_bf16(w, local * hidden), n, hidden, start, local,
                                    scale, 0));
  char name[64];
  snprintf(name, sizeof name, "embedding_forward hidden %lld", (long long)hidden);
  check_bf16(name, y, want, n * hidden, kTolBf16);

  float *dw = host_alloc((size_t)(local * hidden) * sizeof *dw);
  srt_cpu_embedding_backward(dw, dy, ids, n, hidden, start, local, scale, pad);
  float *ddw = out_dev((size_t)(local * hidden) * sizeof(float));
  LAUNCH(srt_cuda_embedding_backward(ddw, up_bf16(dy, n * hidden), dids, n, hidden, start, local,
                                     scale, pad, 0));
  snprintf(name, sizeof name, "embedding_backward hidden %lld padding_idx %lld",
           (long long)hidden, (long long)pad);
  check_f32(name, ddw, dw, local * hidden, kTolExact);
  release_all();
}

// Plain norms on both team sizes (group 1031 > 1024: a block per row; 640:
// a warp) and a per-head q_norm (group 96 < features 384) with Gemma's 1 + w.
static void rms_norm_case(int64_t n, int64_t features, int64_t group, float offset) {
  int64_t g = group ? group : features, total = n * features;
  float eps = 1e-6f;
  float *x = random_host(total, -2, 2, 1), *w = random_host(g, -1, 1, 1);
  float *dy = random_host(total, -1, 1, 1);
  float *want = host_alloc((size_t)total * sizeof *want), *dw = host_alloc((size_t)g * 4);
  srt_bf16 *dx_in = up_bf16(x, total), *dw_in = up_bf16(w, g), *ddy = up_bf16(dy, total);
  char name[96];

  srt_cpu_rms_norm_forward(want, x, w, n, features, group, eps, offset);
  srt_bf16 *y = out_dev((size_t)total * 2);
  LAUNCH(srt_cuda_rms_norm_forward(y, dx_in, dw_in, n, features, group, eps, offset, 0));
  snprintf(name, sizeof name, "rms_norm_forward [%lld, %lld] group %lld", (long long)n,
           (long long)features, (long long)g);
  check_bf16(name, y, want, total, kTolBf16);

  float *partials = host_alloc(
      (size_t)srt_cpu_rms_norm_backward_workspace_floats(n, features, group) * sizeof(float));
  srt_cpu_rms_norm_backward(want, dw, dy, x, w, n, features, group, eps, offset, partials);
  srt_bf16 *dx = out_dev((size_t)total * 2);
  LAUNCH(srt_cuda_rms_norm_backward_input(dx, dx_in, dw_in, ddy, n, features, group, eps, offset,
                                          0));
  snprintf(name, sizeof name, "rms_norm_backward_input group %lld", (long long)g);
  check_bf16(name, dx, want, total, kTolBf16);

  int64_t scratch_n = srt_cuda_rms_norm_backward_weight_scratch(n, features, group);
  float *scratch = dev_alloc((size_t)scratch_n * sizeof(float));
  float *ddw = out_dev((size_t)g * sizeof(float));
  LAUNCH(srt_cuda_rms_norm_backward_weight(ddw, dx_in, ddy, n, features, group, eps, scratch, 0));
  snprintf(name, sizeof name, "rms_norm_backward_weight group %lld", (long long)g);
  check_f32(name, ddw, dw, g, kTolF32);
  release_all();
}

// The fused residual add + norm against the cpu's add, the sum rounded to
// bf16 (what the unfused step stores), then the norm: both outputs.
static void add_rms_norm_case(int64_t n, int64_t features, float offset) {
  int64_t total = n * features;
  float eps = 1e-6f;
  float *a = random_host(total, -2, 2, 1), *b = random_host(total, -2, 2, 1);
  float *w = random_host(features, -1, 1, 1);
  float *sum = host_alloc((size_t)total * sizeof *sum), *want = host_alloc((size_t)total * 4);
  srt_cpu_add_forward(sum, a, b, total);
  for (int64_t i = 0; i < total; ++i)
    sum[i] = round_bf16(sum[i]);
  srt_cpu_rms_norm_forward(want, sum, w, n, features, 0, eps, offset);
  srt_bf16 *dsum = out_dev((size_t)total * 2), *y = out_dev((size_t)total * 2);
  LAUNCH(srt_cuda_add_rms_norm_forward(dsum, y, up_bf16(a, total), up_bf16(b, total),
                                       up_bf16(w, features), n, features, 0, eps, offset, 0));
  char name[96];
  snprintf(name, sizeof name, "add_rms_norm_forward sum [%lld, %lld]", (long long)n,
           (long long)features);
  check_bf16(name, dsum, sum, total, kTolBf16);
  snprintf(name, sizeof name, "add_rms_norm_forward norm [%lld, %lld]", (long long)n,
           (long long)features);
  check_bf16(name, y, want, total, kTolBf16);
  release_all();
}

static void test_rotary(void) {
  int64_t B = 2, S = 37, heads = 3, hd = 64;
  srt_rope_config rc = {.head_dim = hd, .theta = 10000.0, .type = SRT_ROPE_DEFAULT};
  float inv_freq[32];
  srt_status st = srt_cpu_rotary_inv_freq(inv_freq, &rc);
  float *cosw = host_alloc((size_t)(B * S * hd) * 4), *sinw = host_alloc((size_t)(B * S * hd) * 4);
  if (!st)
    st = srt_cpu_rotary_embedding_forward(cosw, sinw, NULL, B, S, &rc);
  if (st) {
    check_true("rotary reference", 0, srt_status_message(st));
    srt_status_free(st);
    release_all();
    return;
  }
  float *dc = out_dev((size_t)(B * S * hd) * 4), *ds = out_dev((size_t)(B * S * hd) * 4);
  LAUNCH(srt_cuda_rotary_tables(dc, ds, up_f32(inv_freq, hd / 2), NULL, B, S, hd, 0));
  check_f32("rotary_tables cos", dc, cosw, B * S * hd, kTolExact);
  check_f32("rotary_tables sin", ds, sinw, B * S * hd, kTolExact);

  int64_t total = B * S * heads * hd;
  float *x = random_host(total, -2, 2, 1), *want = host_alloc((size_t)total * 4);
  srt_bf16 *dx = up_bf16(x, total), *y = out_dev((size_t)total * 2);
  float *dcos = up_f32(cosw, B * S * hd), *dsin = up_f32(sinw, B * S * hd);
  srt_cpu_apply_rotary_forward(want, x, cosw, sinw, B, S, heads, hd);
  LAUNCH(srt_cuda_apply_rotary_forward(y, dx, dcos, dsin, B, S, heads, hd, 0));
  check_bf16("apply_rotary_forward", y, want, total, kTolBf16);
  srt_cpu_apply_rotary_backward(want, x, cosw, sinw, B, S, heads, hd);
  srt_bf16 *g = out_dev((size_t)total * 2);
  LAUNCH(srt_cuda_apply_rotary_backward(g, dx, dcos, dsin, B, S, heads, hd, 0));
  check_bf16("apply_rotary_backward", g, want, total, kTolBf16);
  release_all();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// part [rows, hd] = head h of full [rows, heads * hd].
static void gather_head(const float *full, float *part, int64_t rows, int64_t heads, int64_t hd,
                        int64_t h) {
  for (int64_t r = 0; r < rows; ++r)
    memcpy(part + r * hd, full + (r * heads + h) * hd, (size_t)hd * sizeof *part);
}

// Head h of full = part, or += part when `add`.
static void scatter_head(float *full, const float *part, int64_t rows, int64_t heads,
                         int64_t hd, int64_t h, int add) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < hd; ++d) {
      float *f = full + (r * heads + h) * hd + d;
      *f = add ? *f + part[r * hd + d] : part[r * hd + d];
    }
}

static srt_attention_config cpu_config(const srt_cuda_attention_shape *s, int64_t heads,
                                       int64_t kv) {
  return (srt_attention_config){.batch = s->batch,
                                .seq = s->seq,
                                .heads = heads,
                                .kv_heads = kv,
                                .head_dim = s->head_dim,
                                .causal = s->causal != 0,
                                .scale = s->scale,
                                .sliding_window = s->sliding_window,
                                .softcap = s->softcap,
                                .cp_size = s->cp_size,
                                .cp_rank = s->cp_rank};
}

static int cpu_ok(srt_status st) {
  if (!st)
    return 1;
  check_true("attention reference", 0, srt_status_message(st));
  srt_status_free(st);
  return 0;
}

// The CPU reference of one attention call, forward (out, lse) and backward
// (dq, dk, dv given dout and the forward's out_in, lse_in). Replicated KV
// (q_head_offset > 0 or global_heads != heads) runs the CPU kernel per local
// head with its KV head found from the GLOBAL index, as
// runtime/src/ops/attention.c does; dk/dv sum over the local heads.
static int attention_reference(const srt_cuda_attention_shape *s, const int64_t *seg,
                               const float *q, const float *k, const float *v,
                               const float *dout, const float *out_in, const float *lse_in,
                               float *out, float *lse, float *dq, float *dk, float *dv) {
  int64_t B = s->batch, S = s->seq, H = s->heads, KV = s->kv_heads, hd = s->head_dim;
  int64_t rows = B * S;
  if (s->q_head_offset == 0 && s->global_heads == H) {
    srt_attention_config c = cpu_config(s, H, KV);
    float *ws = host_alloc((size_t)srt_cpu_attention_workspace_floats(&c) * 4);
    if (out && !cpu_ok(srt_cpu_attention_forward(out, lse, q, k, v, seg, ws, &c)))
      return 0;
    return !dq || cpu_ok(srt_cpu_attention_backward(dq, dk, dv, dout, q, k, v, out_in, lse_in,
                                                    seg, ws, &c));
  }
  srt_attention_config c = cpu_config(s, 1, 1);
  float *ws = host_alloc((size_t)srt_cpu_attention_workspace_floats(&c) * 4);
  float *qs = host_alloc((size_t)(rows * hd) * 4), *ks = host_alloc((size_t)(rows * hd) * 4);
  float *vs = host_alloc((size_t)(rows * hd) * 4), *os = host_alloc((size_t)(rows * hd) * 4);
  float *gs = host_alloc((size_t)(rows * hd) * 4), *dqs = host_alloc((size_t)(rows * hd) * 4);
  float *dks = host_alloc((size_t)(rows * hd) * 4), *dvs = host_alloc((size_t)(rows * hd) * 4);
  float *ls = host_alloc((size_t)(B * S) * 4);
  if (dk) {
    memset(dk, 0, (size_t)(rows * KV * hd) * 4);
    memset(dv, 0, (size_t)(rows * KV * hd) * 4);
  }
  int64_t group = s->global_heads / KV;
  for (int64_t h = 0; h < H; ++h) {
    int64_t kvh = (s->q_head_offset + h) / group;
    gather_head(q, qs, rows, H, hd, h);
    gather_head(k, ks, rows, KV, hd, kvh);
    gather_head(v, vs, rows, KV, hd, kvh);
    if (out) {
      if (!cpu_ok(srt_cpu_attention_forward(os, ls, qs, ks, vs, seg, ws, &c)))
        return 0;
      scatter_head(out, os, rows, H, hd, h, 0);
      for (int64_t b = 0; b < B; ++b)
        memcpy(lse + (b * H + h) * S, ls + b * S, (size_t)S * 4);
    }
    if (!dq)
      continue;
    gather_head(dout, gs, rows, H, hd, h);
    gather_head(out_in, os, rows, H, hd, h);
    for (int64_t b = 0; b < B; ++b)
      memcpy(ls + b * S, lse_in + (b * H + h) * S, (size_t)S * 4);
    if (!cpu_ok(srt_cpu_attention_backward(dqs, dks, dvs, gs, qs, ks, vs, os, ls, seg, ws, &c)))
      return 0;
    scatter_head(dq, dqs, rows, H, hd, h, 0);
    scatter_head(dk, dks, rows, KV, hd, kvh, 1);
    scatter_head(dv, dvs, rows, KV, hd, kvh, 1);
  }
  return 1;
}

// One shape against the CPU kernel; seg: segment ids [B, S] (packed
// documents, no padding: every lse finite) or NULL. A context-parallel
// shape (cp_size > 1) has S / cp query rows (the CPU kernel's cp path is
// the reference; only with q_head_offset 0 and global_heads = heads).
static void attention_case_seg(const char *label, srt_cuda_attention_shape s,
                               const int64_t *seg) {
  int64_t B = s.batch, S = s.seq, H = s.heads, KV = s.kv_heads, hd = s.head_dim;
  int64_t Sq = s.cp_size > 1 ? S / s.cp_size : S;
  int64_t nq = B * Sq * H * hd, nk = B * S * KV * hd, nl = B * H * Sq;
  float *q = random_host(nq, -1, 1, 1), *k = random_host(nk, -1, 1, 1);
  float *v = random_host(nk, -1, 1, 1), *dout = random_host(nq, -1, 1, 1);
  float *out = host_alloc((size_t)nq * 4), *lse = host_alloc((size_t)nl * 4);
  char name[128];
  if (!attention_reference(&s, seg, q, k, v, NULL, NULL, NULL, out, lse, NULL, NULL, NULL)) {
    release_all();
    return;
  }
  srt_bf16 *dq_in = up_bf16(q, nq), *dk_in = up_bf16(k, nk), *dv_in = up_bf16(v, nk);
  srt_bf16 *dout_in = up_bf16(dout, nq), *gout = out_dev((size_t)nq * 2);
  float *glse = out_dev((size_t)nl * 4);
  const int64_t *gseg = seg ? up_bytes(seg, (size_t)(B * S) * sizeof *seg) : NULL;
  LAUNCH(srt_cuda_attention_forward(gout, glse, dq_in, dk_in, dv_in, gseg, &s, 0));
  float *out_gpu = down_bf16(gout, nq), *lse_gpu = down_f32(glse, nl);
  snprintf(name, sizeof name, "attention_forward %s out", label);
  check(name, out_gpu, out, nq, kTolBf16);
  snprintf(name, sizeof name, "attention_forward %s lse", label);
  check(name, lse_gpu, lse, nl, kTolF32);

  // The backward of both sides reads the GPU forward's out and lse.
  float *dq = host_alloc((size_t)nq * 4), *dk = host_alloc((size_t)nk * 4);
  float *dv = host_alloc((size_t)nk * 4);
  if (!attention_reference(&s, seg, q, k, v, dout, out_gpu, lse_gpu, NULL, NULL, dq, dk, dv)) {
    release_all();
    return;
  }
  srt_bf16 *gdq = out_dev((size_t)nq * 2), *gdk = out_dev((size_t)nk * 2);
  srt_bf16 *gdv = out_dev((size_t)nk * 2);
  float *delta = out_dev((size_t)nl * 4);
  LAUNCH(srt_cuda_attention_backward(gdq, gdk, gdv, dout_in, dq_in, dk_in, dv_in, gout, glse,
                                     delta, gseg, &s, 0));
  snprintf(name, sizeof name, "attention_backward %s dq", label);
  check_bf16(name, gdq, dq, nq, kTolBf16);
  snprintf(name, sizeof name, "attention_backward %s dk", label);
  check_bf16(name, gdk, dk, nk, kTolBf16);
  snprintf(name, sizeof name, "attention_backward %s dv", label);
  check_bf16(name, gdv, dv, nk, kTolBf16);
  release_all();
}

static void attention_case(const char *label, srt_cuda_attention_shape s) {
  attention_case_seg(label, s, NULL);
}

// Packed documents: row 0 of 77 tokens holds documents of 30, 17 and 30,
// row 1 of 20 and 57, with the window of Gemma (17) inside the longer ones.
static void attention_documents(void) {
  static int64_t seg[2 * 77];
  const int64_t ends[2][3] = {{30, 47, 77}, {20, 77, 77}};
  for (int b = 0; b < 2; ++b)
    for (int64_t t = 0, d = 0; t < 77; ++t) {
      while (t >= ends[b][d])
        ++d;
      seg[b * 77 + t] = d;
    }
  srt_cuda_attention_shape s = {.batch = 2, .seq = 77, .heads = 4, .kv_heads = 2,
                                .head_dim = 64, .global_heads = 4, .causal = 1,
                                .scale = 0.125f};
  attention_case_seg("documents causal hd64", s, seg);
  s.sliding_window = 17;
  s.softcap = 20.0f;
  attention_case_seg("documents window17 softcap20 hd64", s, seg);
}

// Context parallelism: every rank of cp 2 and 3 over 96 tokens (chunks of
// 24 and 16 against query tiles of 16), causal, then packed documents of
// 30, 41 and 25 (boundaries inside chunks, the 41 across several) with a
// window of 17 and softcap; each rank's local rows and its dk/dv share
// against the CPU kernel's cp path (itself checked against the unsharded
// attention in test/unit/kernels/attention_test.c).
static void attention_context_parallel(void) {
  static int64_t seg[96];
  for (int64_t t = 0; t < 96; ++t)
    seg[t] = t < 30 ? 0 : t < 71 ? 1 : 2;
  char label[96];
  for (int64_t cp = 2; cp <= 3; ++cp)
    for (int64_t r = 0; r < cp; ++r) {
      srt_cuda_attention_shape s = {.batch = 1, .seq = 96, .heads = 4, .kv_heads = 2,
                                    .head_dim = 64, .global_heads = 4, .causal = 1,
                                    .scale = 0.125f, .cp_size = cp, .cp_rank = r};
      snprintf(label, sizeof label, "cp%lld rank%lld causal hd64", (long long)cp, (long long)r);
      attention_case_seg(label, s, NULL);
      s.sliding_window = 17;
      s.softcap = 20.0f;
      snprintf(label, sizeof label, "cp%lld rank%lld documents window17 softcap20",
               (long long)cp, (long long)r);
      attention_case_seg(label, s, seg);
    }
}

// Shapes the kernels cannot run are refused before any launch.
static void attention_refusals(void) {
  srt_cuda_attention_shape bad[5] = {
      {.batch = 1, .seq = 8, .heads = 2, .kv_heads = 1, .head_dim = 300, .global_heads = 2},
      {.batch = 1, .seq = 8, .heads = 2, .kv_heads = 1, .head_dim = 64, .global_heads = 0},
      {.batch = 1, .seq = 8, .heads = 2, .kv_heads = 2, .head_dim = 64, .q_head_offset = 2,
       .global_heads = 2},
      {.batch = 1, .seq = 6, .heads = 2, .kv_heads = 1, .head_dim = 64, .global_heads = 2,
       .cp_size = 2}, // 2 cp = 4 does not divide 6
      {.batch = 1, .seq = 8, .heads = 2, .kv_heads = 1, .head_dim = 64, .global_heads = 2,
       .cp_size = 2, .cp_rank = 2}};
  int refused = 0;
  for (int i = 0; i < 5; ++i)
    refused += srt_cuda_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, &bad[i], 0) ==
               cudaErrorInvalidValue;
  CUDA_OK(cudaGetLastError());
  check_true("attention refuses bad shapes", refused == 5,
             refused == 5 ? "5 of 5 refused" : "a bad shape was accepted");
}

static void test_attention(void) {
  attention_refusals();
  attention_documents();
  attention_context_parallel();
  // GQA (4 query heads on 2 KV heads), causal, seq not a multiple of a tile.
  attention_case("gqa causal hd64",
                 (srt_cuda_attention_shape){.batch = 2, .seq = 77, .heads = 4, .kv_heads = 2,
                                            .head_dim = 64, .global_heads = 4, .causal = 1,
                                            .scale = 0.125f});
  // Causal + sliding window + softcap (Gemma), head_dim 80 (partial lanes).
  attention_case("causal window17 softcap20 hd80",
                 (srt_cuda_attention_shape){.batch = 1, .seq = 100, .heads = 4, .kv_heads = 2,
                                            .head_dim = 80, .global_heads = 4, .causal = 1,
                                            .sliding_window = 17, .scale = 0.11f,
                                            .softcap = 20.0f});
  // Bidirectional sliding window at the largest head_dim.
  attention_case("bidirectional window9 hd256",
                 (srt_cuda_attention_shape){.batch = 1, .seq = 45, .heads = 2, .kv_heads = 1,
                                            .head_dim = 256, .global_heads = 2,
                                            .sliding_window = 9, .scale = 0.0625f});
  // Replicated KV: local query heads 2..5 of 8 read KV heads 1, 1, 2, 2 of
  // 4; KV heads 0 and 3 must get zero gradients.
  attention_case("replicated kv offset2 hd32",
                 (srt_cuda_attention_shape){.batch = 2, .seq = 50, .heads = 4, .kv_heads = 4,
                                            .head_dim = 32, .q_head_offset = 2,
                                            .global_heads = 8, .causal = 1,
                                            .scale = 0.17677669f});
  // Replicated KV, tp = 4 of 8 heads on 2 KV heads: local heads 6, 7 both
  // read KV head 1 (group 4).
  attention_case("replicated kv offset6 hd48",
                 (srt_cuda_attention_shape){.batch = 1, .seq = 33, .heads = 2, .kv_heads = 2,
                                            .head_dim = 48, .q_head_offset = 6,
                                            .global_heads = 8, .causal = 1,
                                            .scale = 0.144f});
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

// One vocabulary shard [start, start + lv) of a vocab of `vocab`; every
// fifth label is ignore_index. `bad_at` (>= 0) also checks a bad label
// there, which must be reported iff a row scores it.
static void ce_case(const char *label, int64_t lv, int64_t start, int64_t vocab, int shift,
                    int64_t bad_at, int64_t bad_row) {
  int64_t B = 3, S = 17, rows = B * S, ignore = -100;
  float *logits = random_host(rows * lv, -4, 4, 1);
  int64_t *labels = host_alloc((size_t)rows * sizeof *labels);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 5 == 2 ? ignore : (int64_t)(uniform01() * (double)vocab);
  // A few labels surely in this shard.
  labels[3] = start + 1;
  labels[S + 7] = start + lv - 1;
  srt_cross_entropy_config c = {.batch = B, .seq = S, .vocab = vocab, .vocab_start = start,
                                .local_vocab = lv, .shift = shift != 0, .ignore_index = ignore};
  srt_cuda_ce_shape cs = {.batch = B, .seq = S, .vocab = vocab, .vocab_start = start,
                          .local_vocab = lv, .ignore_index = ignore, .shift = shift};
  char name[128];

  float *max = host_alloc((size_t)rows * 4), *se = host_alloc((size_t)rows * 4);
  float *tg = host_alloc((size_t)rows * 4);
  srt_cpu_cross_entropy_logit_max(max, logits, rows, lv);
  srt_bf16 *dlog = up_bf16(logits, rows * lv);
  int64_t *dlab = up_bytes(labels, (size_t)rows * sizeof *labels);
  float *gmax = out_dev((size_t)rows * 4);
  LAUNCH(srt_cuda_ce_logit_max(gmax, dlog, rows, lv, 0));
  snprintf(name, sizeof name, "ce_logit_max %s", label);
  check_f32(name, gmax, max, rows, kTolExact);

  srt_status st = srt_cpu_cross_entropy_partial_sums(se, tg, logits, labels, max, &c);
  if (st) {
    check_true("ce reference", 0, srt_status_message(st));
    srt_status_free(st);
    release_all();
    return;
  }
  float *gse = out_dev((size_t)rows * 4), *gtg = out_dev((size_t)rows * 4);
  int64_t zero2[2] = {0, 0}, bad[2];
  int64_t *dbad = up_bytes(zero2, sizeof zero2);
  LAUNCH(srt_cuda_ce_partial_sums(gse, gtg, dlog, dlab, gmax, &cs, dbad, 0));
  snprintf(name, sizeof name, "ce_partial_sums %s sum_exp", label);
  check_f32(name, gse, se, rows, kTolF32);
  snprintf(name, sizeof name, "ce_partial_sums %s target", label);
  check_f32(name, gtg, tg, rows, kTolExact);
  CUDA_OK(cudaMemcpy(bad, dbad, sizeof bad, cudaMemcpyDeviceToHost));
  snprintf(name, sizeof name, "ce_partial_sums %s no bad label", label);
  check_true(name, bad[0] == 0 && bad[1] == 0, bad[0] ? "bad_label set" : "bad_label clear");

  float pair[2], *gpair = out_dev(2 * 4);
  srt_cpu_cross_entropy_loss_sum(pair, max, se, tg, labels, &c);
  LAUNCH(srt_cuda_ce_loss_sum(gpair, gmax, gse, gtg, dlab, &cs, 0));
  float *gp = down_f32(gpair, 2);
  snprintf(name, sizeof name, "ce_loss_sum %s sum", label);
  check(name, gp, pair, 1, kTolF32);
  snprintf(name, sizeof name, "ce_loss_sum %s count", label);
  check(name, gp + 1, pair + 1, 1, 0.0);
  float loss = srt_cpu_cross_entropy_mean(gp), *gloss = out_dev(4);
  LAUNCH(srt_cuda_ce_mean(gloss, gpair, 0));
  snprintf(name, sizeof name, "ce_mean %s", label);
  check_f32(name, gloss, &loss, 1, kTolExact);

  // The gradient from the GPU's own phases on both sides.
  float *gmax_h = down_f32(gmax, rows), *gse_h = down_f32(gse, rows);
  float *lse = host_alloc((size_t)rows * 4), *dl = host_alloc((size_t)(rows * lv) * 4);
  srt_cpu_cross_entropy_lse(lse, gmax_h, gse_h, rows);
  srt_cpu_cross_entropy_backward(dl, logits, lse, labels, 1.0f, gp[1], &c);
  srt_bf16 *gdl = out_dev((size_t)(rows * lv) * 2);
  LAUNCH(srt_cuda_ce_logits_grad(gdl, dlog, dlab, gmax, gse, gpair, &cs, 0));
  snprintf(name, sizeof name, "ce_logits_grad %s", label);
  check_bf16(name, gdl, dl, rows * lv, kTolBf16);

  // A bad label: reported with its row iff a row scores it.
  int64_t wrong = labels[bad_at] = bad_at % 2 ? vocab + 7 : -3;
  CUDA_OK(cudaMemcpy(dlab, labels, (size_t)rows * sizeof *labels, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dbad, zero2, sizeof zero2, cudaMemcpyHostToDevice));
  LAUNCH(srt_cuda_ce_partial_sums(gse, gtg, dlog, dlab, gmax, &cs, dbad, 0));
  CUDA_OK(cudaMemcpy(bad, dbad, sizeof bad, cudaMemcpyDeviceToHost));
  char detail[128];
  snprintf(detail, sizeof detail, "bad_label {%lld, %lld}, want {%lld, %lld}", (long long)bad[0],
           (long long)bad[1], (long long)(bad_row < 0 ? 0 : bad_row + 1),
           (long long)(bad_row < 0 ? 0 : wrong));
  snprintf(name, sizeof name, "ce_partial_sums %s label %lld at %lld", label, (long long)wrong,
           (long long)bad_at);
  check_true(name,
             bad_row < 0 ? bad[0] == 0 && bad[1] == 0 : bad[0] == bad_row + 1 && bad[1] == wrong,
             detail);
  release_all();
}

static void test_cross_entropy(void) {
  int64_t S = 17;
  // Rank 1 of 2, shifted: labels[S + 5] is scored by row S + 4; labels[0]
  // (position 0 of a sequence) by no row.
  ce_case("shift rank1 lv1001", 1001, 1001, 2002, 1, S + 5, S + 4);
  ce_case("shift unscored label", 1001, 1001, 2002, 1, 2 * S, -1);
  // Rank 0 of 2, unshifted, local vocabulary a multiple of 8 (vector path).
  ce_case("noshift rank0 lv512", 512, 0, 1024, 0, 2 * S + 3, 2 * S + 3);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

enum { kSlots = 8 };
static const int64_t kNumel[kSlots] = {1000, 7, 0, 4099, 1, 65537, 3, 300000};
static const int32_t kCounted[kSlots] = {1, 0, 1, 1, 1, 0, 1, 1};

// Host arrays of every slot back to back, their device copies and the
// device table.
typedef struct slots {
  int64_t total;
  float *param, *grad, *m, *v;     // host
  float *dparam, *dgrad, *dm, *dv; // device
  srt_bf16 *dcompute;
  srt_cuda_param_slot *table; // device
} slots;

static slots make_slots(void) {
  slots s = {0};
  for (int i = 0; i < kSlots; ++i)
    s.total += kNumel[i];
  s.param = random_host(s.total, -1, 1, 0);
  s.grad = random_host(s.total, -0.1f, 0.1f, 0);
  s.m = random_host(s.total, -0.01f, 0.01f, 0);
  s.v = random_host(s.total, 0.0f, 1e-4f, 0);
  s.dparam = up_f32(s.param, s.total);
  s.dgrad = up_f32(s.grad, s.total);
  s.dm = up_f32(s.m, s.total);
  s.dv = up_f32(s.v, s.total);
  s.dcompute = out_dev((size_t)s.total * 2);
  srt_cuda_param_slot table[kSlots];
  int64_t start = 0;
  for (int i = 0; i < kSlots; ++i) {
    table[i] = (srt_cuda_param_slot){.param = s.dparam + start, .grad = s.dgrad + start,
                                     .m = s.dm + start, .v = s.dv + start,
                                     .compute = s.dcompute + start, .numel = kNumel[i],
                                     .start = start, .counted = kCounted[i]};
    start += kNumel[i];
  }
  s.table = up_bytes(table, sizeof table);
  return s;
}

// sum |g|^p (max for p = inf) over the counted slots, in double.
static double host_norm(const float *grad, double p) {
  double acc = 0.0;
  int64_t start = 0;
  for (int i = 0; i < kSlots; start += kNumel[i], ++i)
    for (int64_t j = 0; kCounted[i] && j < kNumel[i]; ++j) {
      double a = fabs((double)grad[start + j]);
      if (isinf(p))
        acc = a > acc ? a : acc;
      else
        acc += p == 1.0 ? a : p == 2.0 ? a * a : pow(a, p);
    }
  return acc;
}

static void norm_check(const char *name, const slots *s, double p, double want, double flag) {
  double *dout = out_dev(2 * sizeof(double)), got[2];
  double *partials = dev_alloc(2 * SRT_CUDA_NORM_PARTIALS * sizeof(double));
  LAUNCH(srt_cuda_grad_norm_partial(dout, s->table, kSlots, s->total, p, partials, 0));
  CUDA_OK(cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost));
  // Both sides sum in double, in different orders: about sqrt(n) ulp apart.
  double err = fabs(got[0] - want) / (fabs(want) > 1e-300 ? fabs(want) : 1e-300);
  int ok = err <= 1e-10 && got[1] == flag;
  if (!ok)
    g_failures++;
  printf("%s %-44s error %.3e (tol 1e-10), flag %g (want %g)\n", ok ? "PASS" : "FAIL", name,
         isnan(err) ? INFINITY : err, got[1], flag);
}

static void test_grad_norm(void) {
  slots s = make_slots();
  const double ps[4] = {1.0, 2.0, 3.0, INFINITY};
  const char *names[4] = {"grad_norm_partial p=1", "grad_norm_partial p=2",
                          "grad_norm_partial p=3", "grad_norm_partial p=inf"};
  for (int i = 0; i < 4; ++i)
    norm_check(names[i], &s, ps[i], host_norm(s.grad, ps[i]), 0.0);
  // NaN in a slot that is not counted: no flag; in a counted one: flag, 0.
  float nan = NAN;
  int64_t uncounted = kNumel[0] + 3, counted = s.total - 5;
  CUDA_OK(cudaMemcpy(s.dgrad + uncounted, &nan, 4, cudaMemcpyHostToDevice));
  norm_check("grad_norm_partial NaN not counted", &s, 2.0, host_norm(s.grad, 2.0), 0.0);
  CUDA_OK(cudaMemcpy(s.dgrad + counted, &nan, 4, cudaMemcpyHostToDevice));
  norm_check("grad_norm_partial NaN counted p=2", &s, 2.0, 0.0, 1.0);
  norm_check("grad_norm_partial NaN counted p=inf", &s, INFINITY, 0.0, 1.0);
  release_all();
}

static void adamw_case(const char *label, srt_cuda_adamw_args a) {
  slots s = make_slots();
  float *param = copy_host(s.param, s.total), *grad = copy_host(s.grad, s.total);
  float *grad0 = copy_host(s.grad, s.total);
  float *m = copy_host(s.m, s.total), *v = copy_host(s.v, s.total);
  srt_adamw_config c = {.lr = a.lr, .beta1 = a.beta1, .beta2 = a.beta2, .eps = a.eps,
                        .weight_decay = a.weight_decay};
  if (a.clip_coef < 1.0f)
    for (int64_t i = 0; i < s.total; ++i)
      grad[i] *= a.clip_coef;
  int64_t start = 0;
  for (int i = 0; i < kSlots; start += kNumel[i], ++i)
    srt_cpu_adamw_step(param + start, m + start, v + start, grad + start, 1.0f, kNumel[i],
                       a.step, &c);
  LAUNCH(srt_cuda_adamw(s.table, kSlots, s.total, a, 0));
  char name[96];
  float *gparam = down_f32(s.dparam, s.total);
  snprintf(name, sizeof name, "adamw %s param", label);
  check(name, gparam, param, s.total, kTolExact);
  snprintf(name, sizeof name, "adamw %s exp_avg", label);
  check_f32(name, s.dm, m, s.total, kTolExact);
  snprintf(name, sizeof name, "adamw %s exp_avg_sq", label);
  check_f32(name, s.dv, v, s.total, kTolExact);
  snprintf(name, sizeof name, "adamw %s grad (left unscaled)", label);
  check_f32(name, s.dgrad, grad0, s.total, kTolExact);
  float *want = host_alloc((size_t)s.total * 4);
  for (int64_t i = 0; i < s.total; ++i)
    want[i] = round_bf16(gparam[i]);
  snprintf(name, sizeof name, "adamw %s compute = bf16(param)", label);
  check_bf16(name, s.dcompute, want, s.total, 0.0);

  CUDA_OK(cudaMemset(s.dcompute, 0xff, (size_t)s.total * 2));
  LAUNCH(srt_cuda_refresh_compute(s.table, kSlots, s.total, 0));
  snprintf(name, sizeof name, "refresh_compute %s", label);
  check_bf16(name, s.dcompute, want, s.total, 0.0);
  release_all();
}

static void test_adamw(void) {
  adamw_case("step5 clip0.5", (srt_cuda_adamw_args){.step = 5, .lr = 1e-3f, .beta1 = 0.9f,
                                                    .beta2 = 0.999f, .eps = 1e-8f,
                                                    .weight_decay = 0.1f, .clip_coef = 0.5f});
  // beta1 < 0.5 takes lerp's other branch; clip_coef 1 leaves grads alone.
  adamw_case("step1 beta1=0.3 noclip",
             (srt_cuda_adamw_args){.step = 1, .lr = 3e-3f, .beta1 = 0.3f, .beta2 = 0.95f,
                                   .eps = 1e-6f, .weight_decay = 0.0f, .clip_coef = 1.0f});
}

int main(void) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    printf("SKIP: no CUDA device (%s)\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  test_casts();
  test_add();
  test_bias();
  test_activations();
  embedding_case(200, 1.0f, -1);
  embedding_case(67, 1.5f, 120); // a row of this shard, hit by some ids
  rms_norm_case(19, 1031, 0, 0.0f);
  rms_norm_case(5, 640, 0, 1.0f);
  rms_norm_case(23, 384, 96, 1.0f);
  add_rms_norm_case(19, 896, 0.0f);
  add_rms_norm_case(3, 2051, 1.0f);
  test_rotary();
  test_attention();
  test_cross_entropy();
  test_grad_norm();
  test_adamw();
  printf("%s: %d check(s) failed\n", g_failures ? "FAILED" : "OK", g_failures);
  return g_failures ? 1 : 0;
}
