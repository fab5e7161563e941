// GPU test of the cuda backend's plumbing (needs a CUDA device; without one
// it prints "SKIP: no CUDA device" and exits 77, which ctest reports as
// skipped): the backend's open / to_device / to_host, cuBLASLt linear
// forward and backward against the CPU kernels on the same bf16-rounded
// inputs (relative error < 1e-2), every NCCL collective at world size 1
// (all_reduce sum/max, all_gather, reduce_scatter, all_slice, all_to_all,
// fp32 and bf16: exact), and the optimizer step (grad norm vs a float64
// sum, clipping + AdamW vs srt_cpu_adamw_step, the bf16 compute copy).
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_ops_test_util.h"
#include "shardrt/kernels.h"

static float uniform(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

enum { kArena = 16 << 20, N = 48, IN = 40, OUT = 24 };

// Byte offsets of the fake program's buffers.
enum {
  P_W = 0, P_G = P_W + 4096, P_M = P_G + 4096, P_V = P_M + 4096, P_C = P_V + 4096,
  PERSISTENT = P_C + 2048, X = PERSISTENT, W = X + 8192, B = W + 8192, Y = B + 4096,
  DY = Y + 4096, DX = DY + 4096, DW = DX + 8192, T0 = DW + 8192, T1 = T0 + 8192,
};

static srt_param_info g_param = {"w", SRT_INIT_NORMAL, 2, {16, 64}, {16, 64},
                                 {{SRT_REPLICATE, 0}, {SRT_REPLICATE, 0}},
                                 P_W, P_G, P_M, P_V, P_C, -1, 0, {0}};

static uint8_t g_host[kArena];

static void test_linear(srt_exec *e, const srt_program *p) {
  static float x[N * IN], w[OUT * IN], b[OUT], dy[N * OUT];
  static float y[N * OUT], ref[N * OUT], dx[N * IN], dxr[N * IN], dw[OUT * IN], dwr[OUT * IN];
  unsigned st = 7;
  for (int i = 0; i < N * IN; ++i)
    x[i] = float_of(bf16_of(uniform(&st)));
  for (int i = 0; i < OUT * IN; ++i)
    w[i] = float_of(bf16_of(uniform(&st)));
  for (int i = 0; i < OUT; ++i)
    b[i] = float_of(bf16_of(uniform(&st)));
  for (int i = 0; i < N * OUT; ++i)
    dy[i] = float_of(bf16_of(uniform(&st)));
  put_bf16(g_host, X, x, N * IN);
  put_bf16(g_host, W, w, OUT * IN);
  put_bf16(g_host, B, b, OUT);
  put_bf16(g_host, DY, dy, N * OUT);
  const srt_backend *be = &srt_cuda_backend;
  TRY(be->to_device(e->device, p, g_host, X, T1 - X));
  TRY(srt_op_linear(e, X, W, B, Y, N, IN, OUT));
  TRY(srt_op_linear_grad_input(e, DY, W, DX, N, IN, OUT));
  TRY(srt_op_linear_grad_weight(e, DY, X, DW, N, IN, OUT));
  TRY(be->to_host(e->device, p, g_host, X, T1 - X));
  get_bf16(g_host, Y, y, N * OUT);
  get_bf16(g_host, DX, dx, N * IN);
  memcpy(dw, g_host + DW, sizeof dw); // fp32
  TRY(srt_cpu_linear_forward(ref, x, w, b, N, IN, OUT));
  memset(dwr, 0, sizeof dwr);
  TRY(srt_cpu_linear_backward(dxr, dwr, NULL, dy, x, w, N, IN, OUT));
  double e1 = rel_err(y, ref, N * OUT), e2 = rel_err(dx, dxr, N * IN),
         e3 = rel_err(dw, dwr, OUT * IN);
  check(e1 < 1e-2, "linear forward + bias epilogue (cuBLASLt) vs cpu", e1);
  check(e2 < 1e-2, "linear grad input (cuBLASLt) vs cpu", e2);
  check(e3 < 1e-4, "linear grad weight, fp32 out (cuBLASLt) vs cpu", e3);
}

// At world size 1 every collective returns its input: exact.
static void test_collectives(srt_exec *e, const srt_program *p) {
  enum { D0 = 2, D1 = 6, D2 = 5, NUM = D0 * D1 * D2 };
  static float x[NUM], got[NUM];
  unsigned st = 11;
  for (int i = 0; i < NUM; ++i)
    x[i] = float_of(bf16_of(uniform(&st)));
  for (int dtype = 0; dtype < 2; ++dtype) {
    if (dtype)
      put_bf16(g_host, T0, x, NUM);
    else
      memcpy(g_host + T0, x, sizeof x);
    TRY(srt_cuda_backend.to_device(e->device, p, g_host, T0, (int64_t)sizeof x));
    for (int c = 0; c < 6; ++c) {
      const char *names[] = {"all_reduce sum", "all_reduce max", "all_gather dim 1",
                             "reduce_scatter dim 1", "all_slice dim 2", "all_to_all 1->2"};
      memset(g_host + T1, 0xFF, sizeof got); // NaN pattern: every element must be written
      TRY(srt_cuda_backend.to_device(e->device, p, g_host, T1, (int64_t)sizeof got));
      srt_status s = c < 2   ? srt_op_all_reduce(e, T0, T1, NUM, 1, c, dtype)
                     : c == 2 ? srt_op_all_gather(e, T0, T1, 1, 1, 3, D0, D1, D2, 1, dtype)
                     : c == 3 ? srt_op_reduce_scatter(e, T0, T1, 1, 1, 3, D0, D1, D2, 1,
                                                           dtype)
                     : c == 4 ? srt_op_all_slice(e, T0, T1, 1, 2, 3, D0, D1, D2, 1, dtype)
                              : srt_op_all_to_all(e, T0, T1, 1, 1, 2, 3, D0, D1, D2, 1,
                                                       dtype);
      if (s) {
        fail_status(s, names[c]);
        continue;
      }
      TRY(srt_cuda_backend.to_host(e->device, p, g_host, T1, (int64_t)sizeof got));
      if (dtype)
        get_bf16(g_host, T1, got, NUM);
      else
        memcpy(got, g_host + T1, sizeof got);
      char what[96];
      snprintf(what, sizeof what, "NCCL %s, world size 1, %s", names[c], dtype ? "bf16" : "fp32");
      double err = rel_err(got, x, NUM);
      check(err == 0, what, err);
    }
  }
}

// One parameter [16, 64]: the norm, clipping and AdamW against the host.
static void test_optimizer(srt_exec *e, const srt_program *p) {
  enum { PN = 16 * 64 };
  static float w[PN], g[PN], m[PN], v[PN], wr[PN], mr[PN], vr[PN], gr[PN], got[PN];
  unsigned st = 5;
  double sq = 0;
  for (int i = 0; i < PN; ++i) {
    w[i] = uniform(&st);
    g[i] = uniform(&st) * 3;
    m[i] = uniform(&st) * 0.1f;
    v[i] = fabsf(uniform(&st)) * 0.01f;
    sq += (double)g[i] * g[i];
  }
  memcpy(g_host + P_W, w, sizeof w);
  memcpy(g_host + P_G, g, sizeof g);
  memcpy(g_host + P_M, m, sizeof m);
  memcpy(g_host + P_V, v, sizeof v);
  memset(g_host + T0, 0, 4); // the "loss"
  TRY(srt_cuda_backend.to_device(e->device, p, g_host, 0, PERSISTENT));
  TRY(srt_cuda_backend.to_device(e->device, p, g_host, T0, 4));
  srt_step_options o = {.step = 3, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                        .weight_decay = 0.1f, .max_grad_norm = 1.0f, .norm_type = 2};
  srt_step_result r = {0};
  TRY(srt_op_optimizer_step(e, p, &o, T0, &r));
  double norm = sqrt(sq);
  check(fabs(r.grad_norm - norm) <= 1e-6 * norm, "grad norm (one pass) vs float64", fabs(r.grad_norm - norm) / norm);
  float coef = (float)(1.0 / (norm + 1e-6));
  memcpy(wr, w, sizeof w);
  memcpy(mr, m, sizeof m);
  memcpy(vr, v, sizeof v);
  for (int i = 0; i < PN; ++i)
    gr[i] = g[i] * coef;
  srt_adamw_config ac = {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                         .weight_decay = o.weight_decay};
  srt_cpu_adamw_step(wr, mr, vr, gr, 1.0f, PN, o.step, &ac);
  TRY(srt_cuda_backend.to_host(e->device, p, g_host, 0, PERSISTENT));
  memcpy(got, g_host + P_W, sizeof got);
  double err = rel_err(got, wr, PN);
  check(err < 1e-6, "clipping + AdamW (one launch) vs srt_cpu_adamw_step", err);
  memcpy(got, g_host + P_V, sizeof got);
  err = rel_err(got, vr, PN);
  check(err < 1e-6, "AdamW second moment vs cpu", err);
  get_bf16(g_host, P_C, got, PN);
  err = rel_err(got, wr, PN);
  check(err < 4e-3, "bf16 compute copy refreshed after the update", err);
}

static void body(srt_exec *e, const srt_program *p) {
  test_linear(e, p);
  test_collectives(e, p);
  test_optimizer(e, p);
}

int main(int argc, char **argv) {
  srt_program p = {.abi = SRT_PROGRAM_ABI, .model = "ops_test", .dp = 1, .tp = 1, .batch = 1,
                   .seq = 1, .local_batch = 1, .vocab = 1, .arena_bytes = kArena,
                   .persistent_bytes = PERSISTENT, .num_params = 1, .params = &g_param};
  return run_on_cuda(argc, argv, &p, "cuda ops", body);
}
