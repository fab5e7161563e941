// GPU test of the cuda backend's Mamba2 mixer ops (runtime/cuda/ops_mamba2.c,
// kernels/mamba2.cu; needs a CUDA device: without one it prints "SKIP: no
// CUDA device" and exits 77): srt_op_mamba2_mixer and _grad through the
// dispatcher on a cuda arena against srt_cpu_mamba2_forward / _backward on
// the same bf16-rounded inputs, one document per row and packed documents
// (a one-token document, one across the chunk border of the cpu's form).
//
// Error of a check: max |gpu - cpu| / max |cpu|. Tolerances: 1e-2 where the
// GPU rounds to bf16 on the way (out and dx are bf16; out_proj reads the
// norm's output in bf16, in_proj's gradients read dproj in bf16: 2^-9
// relative per element); 1e-4 for the gradients computed in fp32 from the
// same inputs (conv, dt_bias, A_log, D, norm weight: cuBLASLt's fp32 sums
// of in_proj against the cpu's, then fp32 kernels; the math itself is
// checked to 3e-5 on the host by kernels_cuda_mamba2_math_test).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops_test_util.h"
#include "shardrt/kernels.h"

static float uniform(unsigned *state, float lo, float hi) {
  *state = *state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)((*state >> 8) & 0xFFFF) / 65536.0f;
}

// The case: inner 64, conv_dim 128, proj 200 (multiples of 8, as the GEMMs
// of a real config are).
enum { kArena = 4 << 20, B = 2, S = 24, H = 64, HEADS = 8, P = 8, G = 2, NS = 16, K = 4 };
enum { NR = B * S, INNER = HEADS * P, CONV = INNER + 2 * G * NS, PROJ = INNER + CONV + HEADS };
enum { kWeights = 8 };
static const int64_t kSize[kWeights] = {PROJ * H, CONV * K, CONV, HEADS, HEADS, HEADS, INNER,
                                        H * INNER};
static const char *kName[kWeights] = {"in_proj", "conv_w", "conv_b", "dt_bias",
                                      "A_log",   "D",      "norm_w", "out_proj"};

// Byte offsets in the arena: each buffer 256-byte aligned after the one
// parameter slot the fake program declares.
typedef struct offsets {
  int64_t x, w[kWeights], seg, out, dout, dx, g[kWeights], end;
} offsets;

static int64_t place(int64_t *at, int64_t bytes) {
  int64_t o = *at;
  *at += (bytes + 255) / 256 * 256;
  return o;
}

static offsets offsets_of(int64_t start) {
  offsets o;
  int64_t at = start;
  o.x = place(&at, NR * H * 2);
  for (int i = 0; i < kWeights; ++i)
    o.w[i] = place(&at, kSize[i] * 2);
  o.seg = place(&at, NR * 8);
  o.out = place(&at, NR * H * 2);
  o.dout = place(&at, NR * H * 2);
  o.dx = place(&at, NR * H * 2);
  for (int i = 0; i < kWeights; ++i)
    o.g[i] = place(&at, kSize[i] * 4);
  o.end = at;
  return o;
}

enum { P_W = 0, P_G = 256, P_M = 512, P_V = 768, P_C = 1024, PERSISTENT = 1280 };
static srt_param_info g_param = {"w", SRT_INIT_NORMAL, 1, {64}, {64},
                                 {{SRT_REPLICATE, 0}, {SRT_REPLICATE, 0}},
                                 P_W, P_G, P_M, P_V, P_C, -1, 0, {0}};

static uint8_t g_host[kArena];

// bf16-rounded inputs in the ranges of runtime/cpu's test: softplus(dt)
// near 1, A in [-4.5, -0.4], D and the norm weight near 1.
static void fill(float *x, float *w[kWeights], float *dout, unsigned seed) {
  static const float lo[kWeights] = {-0.2f, -0.5f, -0.5f, -0.5f, -1.0f, 0.5f, 0.5f, -0.2f};
  static const float hi[kWeights] = {0.2f, 0.5f, 0.5f, 1.0f, 1.5f, 1.5f, 1.5f, 0.2f};
  unsigned st = seed;
  for (int64_t i = 0; i < NR * H; ++i) {
    x[i] = float_of(bf16_of(uniform(&st, -1.5f, 1.5f)));
    dout[i] = float_of(bf16_of(uniform(&st, -1.0f, 1.0f)));
  }
  for (int k = 0; k < kWeights; ++k)
    for (int64_t i = 0; i < kSize[k]; ++i)
      w[k][i] = float_of(bf16_of(uniform(&st, lo[k], hi[k])));
}

static void run_case(srt_exec *e, const srt_program *p, const int64_t *seg, const char *label) {
  static float x[NR * H], dout[NR * H], out[NR * H], dx[NR * H], ref[NR * H], dxr[NR * H];
  float *w[kWeights], *g[kWeights], *gr[kWeights];
  for (int k = 0; k < kWeights; ++k) {
    w[k] = malloc((size_t)kSize[k] * sizeof(float));
    g[k] = malloc((size_t)kSize[k] * sizeof(float));
    gr[k] = calloc((size_t)kSize[k], sizeof(float));
  }
  fill(x, w, dout, 7);
  offsets o = offsets_of(PERSISTENT);
  memset(g_host + PERSISTENT, 0xFF, (size_t)(o.end - PERSISTENT)); // NaN: unwritten
  put_bf16(g_host, o.x, x, NR * H);
  put_bf16(g_host, o.dout, dout, NR * H);
  for (int k = 0; k < kWeights; ++k)
    put_bf16(g_host, o.w[k], w[k], kSize[k]);
  if (seg)
    memcpy(g_host + o.seg, seg, NR * sizeof(int64_t));
  int64_t so = seg ? o.seg : -1;
  const srt_backend *be = &srt_cuda_backend;
  TRY(be->to_device(e->device, p, g_host, PERSISTENT, o.end - PERSISTENT));
  TRY(srt_op_mamba2_mixer(e, o.x, o.w[0], o.w[1], o.w[2], o.w[3], o.w[4], o.w[5], o.w[6],
                          o.w[7], so, B, S, H, HEADS, P, G, NS, K, 8, 1e-5, 0.0, 1, o.out));
  TRY(srt_op_mamba2_mixer_grad(e, o.x, o.w[0], o.w[1], o.w[2], o.w[3], o.w[4], o.w[5], o.w[6],
                               o.w[7], so, B, S, H, HEADS, P, G, NS, K, 8, 1e-5, 0.0, 1, o.dout,
                               o.dx, o.g[0], o.g[1], o.g[2], o.g[3], o.g[4], o.g[5], o.g[6],
                               o.g[7]));
  TRY(be->to_host(e->device, p, g_host, PERSISTENT, o.end - PERSISTENT));
  get_bf16(g_host, o.out, out, NR * H);
  get_bf16(g_host, o.dx, dx, NR * H);
  for (int k = 0; k < kWeights; ++k)
    memcpy(g[k], g_host + o.g[k], (size_t)kSize[k] * sizeof(float));

  srt_mamba2_config c = {.batch = B, .seq = S, .hidden = H, .heads = HEADS, .head_dim = P,
                         .groups = G, .state = NS, .conv_kernel = K, .chunk = 8, .eps = 1e-5f,
                         .dt_min = 0.0f, .dt_max = INFINITY};
  float *ws = malloc((size_t)srt_cpu_mamba2_workspace_floats(&c, true) * sizeof(float));
  srt_mamba2_weights cw = {w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]};
  srt_mamba2_grads cg = {gr[0], gr[1], gr[2], gr[3], gr[4], gr[5], gr[6], gr[7]};
  TRY(srt_cpu_mamba2_forward(ref, x, seg, &cw, ws, &c));
  TRY(srt_cpu_mamba2_backward(dxr, &cg, dout, x, seg, &cw, ws, &c));
  char what[96];
  double err = rel_err(out, ref, NR * H);
  snprintf(what, sizeof what, "%s: out (bf16) vs cpu", label);
  check(err < 1e-2, what, err);
  err = rel_err(dx, dxr, NR * H);
  snprintf(what, sizeof what, "%s: dx (bf16) vs cpu", label);
  check(err < 1e-2, what, err);
  for (int k = 0; k < kWeights; ++k) {
    double tol = k == 0 || k == kWeights - 1 ? 1e-2 : 1e-4; // in_proj, out_proj: bf16 operands
    err = rel_err(g[k], gr[k], kSize[k]);
    snprintf(what, sizeof what, "%s: d %s (fp32) vs cpu", label, kName[k]);
    check(err < tol, what, err);
  }
  free(ws);
  for (int k = 0; k < kWeights; ++k) {
    free(w[k]);
    free(g[k]);
    free(gr[k]);
  }
}

// Row 0: documents of 3, 1 and 20 tokens; row 1: 13 and 11.
static void body(srt_exec *e, const srt_program *p) {
  static int64_t seg[NR];
  for (int t = 0; t < S; ++t) {
    seg[t] = t < 3 ? 5 : t < 4 ? 2 : 9;
    seg[S + t] = t < 13 ? 1 : 4;
  }
  run_case(e, p, NULL, "one document per row");
  run_case(e, p, seg, "packed documents");
}

int main(int argc, char **argv) {
  srt_program p = {.abi = SRT_PROGRAM_ABI, .model = "mamba2_test", .dp = 1, .tp = 1,
                   .batch = B, .seq = S, .local_batch = B, .vocab = 1, .arena_bytes = kArena,
                   .persistent_bytes = PERSISTENT, .num_params = 1, .params = &g_param};
  return run_on_cuda(argc, argv, &p, "cuda mamba2", body);
}
