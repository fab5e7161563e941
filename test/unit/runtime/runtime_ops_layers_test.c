// srt_op_* forward and backward of the per-token layers against their CPU
// kernels: the ops must give the kernels' values bit for bit, WRITE every
// output (poisoned beforehand, so an accumulation shows), and take the
// vocabulary range of a vocabulary-parallel embedding from the rank's tp
// index (on 2 ranks: each rank's rows, summed over tp, give the unsharded
// embedding; each rank's weight gradient is its slice of the unsharded one);
// the Mamba2 mixer ops pass their segment_ids through.
#include "runtime_ops_test_util.h"

#include <string.h>

#include "shardrt/kernels.h"

static void test_embedding_vocab_axis(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  enum { N = 12, HID = 5, VOCAB = 8 };
  int tp = tp_size(), idx = tp_index();
  int64_t lv = VOCAB / tp;
  int64_t ids = arena_alloc(N * 8), w_full = arena_floats(1, VOCAB * HID);
  for (int64_t t = 0; t < N; ++t)
    I(ids)[t] = (t * 5 + 3) % VOCAB;
  int64_t w = arena_alloc(lv * HID * 4), y = arena_alloc(N * HID * 4);
  memcpy(F(w), F(w_full) + idx * lv * HID, (size_t)(lv * HID) * 4);
  poison(y, N * HID);
  ASSERT_OK(srt_op_embedding(&e, ids, w, y, N, HID, lv, 1, 2.0));
  for (int64_t t = 0; t < N; ++t) {
    int64_t id = I(ids)[t];
    int mine = id >= idx * lv && id < (idx + 1) * lv;
    for (int64_t h = 0; h < HID; ++h)
      assert_true(F(y)[t * HID + h] == (mine ? 2.0f * F(w_full)[id * HID + h] : 0.0f));
  }
  // Partial over tp: the sum is the unsharded embedding.
  int64_t ref = arena_alloc(N * HID * 4);
  srt_cpu_embedding_forward(F(ref), I(ids), F(w_full), N, HID, 0, VOCAB, 2.0f);
  ASSERT_OK(srt_op_all_reduce(&e, y, y, N * HID, 1, 0, SRT_OP_F32));
  assert_close(F(y), F(ref), N * HID, 0, "embedding summed over tp");

  // Gradient: this rank's slice of the unsharded gradient, written.
  int64_t dy = arena_floats(2, N * HID), dw = arena_alloc(lv * HID * 4);
  int64_t dw_full = arena_alloc(VOCAB * HID * 4);
  memset(F(dw_full), 0, VOCAB * HID * 4);
  srt_cpu_embedding_backward(F(dw_full), F(dy), I(ids), N, HID, 0, VOCAB, 2.0f, -1);
  poison(dw, lv * HID);
  ASSERT_OK(srt_op_embedding_grad(&e, ids, dy, dw, N, HID, lv, 1, 2.0, -1));
  assert_close(F(dw), F(dw_full) + idx * lv * HID, lv * HID, 0, "embedding grad slice");
  // No axis: the whole vocabulary on every rank.
  poison(y, N * HID);
  ASSERT_OK(srt_op_embedding(&e, ids, w_full, y, N, HID, VOCAB, -1, 2.0));
  assert_close(F(y), F(ref), N * HID, 0, "embedding without axis");
  ASSERT_ERROR(srt_op_embedding(&e, ids, w, y, N, HID, lv, 2, 1.0), SRT_INVALID_ARGUMENT,
               "mesh axis 2");
  ASSERT_ERROR(srt_op_embedding(&e, -64, w, y, N, HID, lv, 1, 1.0), SRT_INVALID_ARGUMENT,
               "negative arena offset");
}

static void test_linear_and_grads(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  enum { N = 7, IN = 6, OUT = 5 };
  int64_t x = arena_floats(3, N * IN), w = arena_floats(4, OUT * IN), b = arena_floats(5, OUT);
  int64_t y = arena_alloc(N * OUT * 4), ref = arena_alloc(N * OUT * 4);
  ASSERT_OK(srt_cpu_linear_forward(F(ref), F(x), F(w), F(b), N, IN, OUT));
  poison(y, N * OUT);
  ASSERT_OK(srt_op_linear(&e, x, w, b, y, N, IN, OUT));
  assert_close(F(y), F(ref), N * OUT, 0, "linear with bias");
  ASSERT_OK(srt_cpu_linear_forward(F(ref), F(x), F(w), NULL, N, IN, OUT));
  ASSERT_OK(srt_op_linear(&e, x, w, -1, y, N, IN, OUT));
  assert_close(F(y), F(ref), N * OUT, 0, "linear without bias");
  // bias_add
  ASSERT_OK(srt_op_bias_add(&e, ref, b, y, N, OUT));
  for (int64_t i = 0; i < N * OUT; ++i)
    assert_true(F(y)[i] == F(ref)[i] + F(b)[i % OUT]);

  int64_t dy = arena_floats(6, N * OUT);
  int64_t dx = arena_alloc(N * IN * 4), dw = arena_alloc(OUT * IN * 4), db = arena_alloc(OUT * 4);
  int64_t rdx = arena_alloc(N * IN * 4), rdw = arena_alloc(OUT * IN * 4), rdb = arena_alloc(OUT * 4);
  memset(F(rdw), 0, OUT * IN * 4);
  memset(F(rdb), 0, OUT * 4);
  ASSERT_OK(srt_cpu_linear_backward(F(rdx), F(rdw), F(rdb), F(dy), F(x), F(w), N, IN, OUT));
  poison(dx, N * IN);
  poison(dw, OUT * IN);
  poison(db, OUT);
  ASSERT_OK(srt_op_linear_grad_input(&e, dy, w, dx, N, IN, OUT));
  ASSERT_OK(srt_op_linear_grad_weight(&e, dy, x, dw, N, IN, OUT));
  ASSERT_OK(srt_op_linear_grad_bias(&e, dy, db, N, OUT));
  assert_close(F(dx), F(rdx), N * IN, 0, "linear grad input");
  assert_close(F(dw), F(rdw), OUT * IN, 0, "linear grad weight");
  assert_close(F(db), F(rdb), OUT, 1e-6, "linear grad bias");
}

static void test_rms_norm_and_grads(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  enum { N = 5, FEAT = 8, GROUP = 4 };
  int64_t x = arena_floats(7, N * FEAT), w = arena_floats(8, GROUP), dy = arena_floats(9, N * FEAT);
  int64_t y = arena_alloc(N * FEAT * 4), ref = arena_alloc(N * FEAT * 4);
  srt_cpu_rms_norm_forward(F(ref), F(x), F(w), N, FEAT, GROUP, 1e-6f, 1.0f);
  poison(y, N * FEAT);
  ASSERT_OK(srt_op_rms_norm(&e, x, w, y, N, FEAT, GROUP, 1e-6, 1.0));
  assert_close(F(y), F(ref), N * FEAT, 0, "rms_norm grouped");
  int64_t dx = arena_alloc(N * FEAT * 4), dw = arena_alloc(GROUP * 4);
  int64_t rdx = arena_alloc(N * FEAT * 4), rdw = arena_alloc(GROUP * 4);
  memset(F(rdw), 0, GROUP * 4);
  float *partials = malloc((size_t)srt_cpu_rms_norm_backward_workspace_floats(N, FEAT, GROUP) * 4);
  srt_cpu_rms_norm_backward(F(rdx), F(rdw), F(dy), F(x), F(w), N, FEAT, GROUP, 1e-6f, 1.0f,
                            partials);
  free(partials);
  poison(dx, N * FEAT);
  poison(dw, GROUP);
  ASSERT_OK(srt_op_rms_norm_grad_input(&e, x, w, dy, dx, N, FEAT, GROUP, 1e-6, 1.0));
  ASSERT_OK(srt_op_rms_norm_grad_weight(&e, x, dy, dw, N, FEAT, GROUP, 1e-6));
  assert_close(F(dx), F(rdx), N * FEAT, 0, "rms_norm grad input");
  assert_close(F(dw), F(rdw), GROUP, 0, "rms_norm grad weight");
  ASSERT_ERROR(srt_op_rms_norm(&e, x, w, y, N, FEAT, 3, 1e-6, 0.0), SRT_INVALID_ARGUMENT,
               "does not divide");
}

static void test_rotary(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  enum { B = 2, S = 5, HD = 8, HEADS = 3 };
  srt_rope_config rc = {.head_dim = HD, .theta = 10000.0, .type = SRT_ROPE_LLAMA3,
                        .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                        .original_max_position_embeddings = 16};
  int64_t cos = arena_alloc(B * S * HD * 4), sin = arena_alloc(B * S * HD * 4);
  int64_t rcos = arena_alloc(B * S * HD * 4), rsin = arena_alloc(B * S * HD * 4);
  ASSERT_OK(srt_cpu_rotary_embedding_forward(F(rcos), F(rsin), NULL, B, S, &rc));
  ASSERT_OK(srt_op_rotary_embedding(&e, -1, cos, sin, B, S, HD, 10000.0, 1, 8, 1, 4, 16));
  assert_close(F(cos), F(rcos), B * S * HD, 0, "rotary cos");
  assert_close(F(sin), F(rsin), B * S * HD, 0, "rotary sin");
  // Packed documents: positions restarting at 0 go through to the kernel.
  int64_t pos = arena_alloc(B * S * 8);
  for (int64_t t = 0; t < B * S; ++t)
    I(pos)[t] = t % 3;
  ASSERT_OK(srt_cpu_rotary_embedding_forward(F(rcos), F(rsin), I(pos), B, S, &rc));
  ASSERT_OK(srt_op_rotary_embedding(&e, pos, cos, sin, B, S, HD, 10000.0, 1, 8, 1, 4, 16));
  assert_close(F(cos), F(rcos), B * S * HD, 0, "rotary cos from positions");
  assert_close(F(sin), F(rsin), B * S * HD, 0, "rotary sin from positions");
  int64_t x = arena_floats(10, B * S * HEADS * HD), y = arena_alloc(B * S * HEADS * HD * 4);
  int64_t ref = arena_alloc(B * S * HEADS * HD * 4);
  srt_cpu_apply_rotary_forward(F(ref), F(x), F(cos), F(sin), B, S, HEADS, HD);
  ASSERT_OK(srt_op_apply_rotary(&e, x, cos, sin, y, B, S, HEADS, HD));
  assert_close(F(y), F(ref), B * S * HEADS * HD, 0, "apply_rotary");
  srt_cpu_apply_rotary_backward(F(ref), F(x), F(cos), F(sin), B, S, HEADS, HD);
  ASSERT_OK(srt_op_apply_rotary_grad(&e, x, cos, sin, y, B, S, HEADS, HD));
  assert_close(F(y), F(ref), B * S * HEADS * HD, 0, "apply_rotary grad");
  ASSERT_ERROR(srt_op_rotary_embedding(&e, -1, cos, sin, B, S, HD, 1e4, 7, 0, 0, 0, 0),
               SRT_INVALID_ARGUMENT, "rope_type 7");
}

static void test_elementwise(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  enum { N = 33 };
  int64_t a = arena_floats(11, N), b = arena_floats(12, N), dy = arena_floats(13, N);
  int64_t y = arena_alloc(N * 4), ref = arena_alloc(N * 4), y2 = arena_alloc(N * 4),
          ref2 = arena_alloc(N * 4);
  for (int act = 0; act < 2; ++act) {
    srt_glu_activation ka = act ? SRT_GLU_GELU_TANH : SRT_GLU_SILU;
    srt_cpu_glu_forward(F(ref), F(a), F(b), N, ka);
    ASSERT_OK(srt_op_glu(&e, a, b, y, N, act));
    assert_close(F(y), F(ref), N, 0, "glu");
    srt_cpu_glu_backward(F(ref), F(ref2), F(dy), F(a), F(b), N, ka);
    poison(y, N);
    poison(y2, N);
    ASSERT_OK(srt_op_glu_grad(&e, a, b, dy, y, y2, N, act));
    assert_close(F(y), F(ref), N, 0, "glu grad gate");
    assert_close(F(y2), F(ref2), N, 0, "glu grad up");
  }
  ASSERT_ERROR(srt_op_glu(&e, a, b, y, N, 2), SRT_INVALID_ARGUMENT, "activation 2");
  ASSERT_ERROR(srt_op_glu_grad(&e, a, b, dy, y, y2, N, -1), SRT_INVALID_ARGUMENT,
               "activation -1");
  // No backend means none: the cpu is srt_cpu_backend, named like any other.
  srt_exec none = e;
  none.backend = NULL;
  ASSERT_ERROR(srt_op_glu(&none, a, b, y, N, 0), SRT_INVALID_ARGUMENT, "backend is NULL");
  srt_cpu_relu2_forward(F(ref), F(a), N);
  ASSERT_OK(srt_op_relu2(&e, a, y, N));
  assert_close(F(y), F(ref), N, 0, "relu2");
  srt_cpu_relu2_backward(F(ref), F(dy), F(a), N);
  ASSERT_OK(srt_op_relu2_grad(&e, a, dy, y, N));
  assert_close(F(y), F(ref), N, 0, "relu2 grad");
  ASSERT_OK(srt_op_add(&e, a, b, y, N, SRT_OP_F32));
  for (int64_t i = 0; i < N; ++i)
    assert_true(F(y)[i] == F(a)[i] + F(b)[i]);
}

// The Mamba2 mixer ops pass segment_ids (an int64 [batch, seq] arena
// buffer, -1 for none) to the kernels: forward and gradients bit for bit the
// kernels' with the same ids, and ids that start documents change the
// values (so they are not dropped on the way).
enum { MB = 2, MS = 8, MHID = 8, MH = 4, MP = 2, MG = 2, MN = 4, MK = 4, MCH = 4 };
enum { MINNER = MH * MP, MCONV = MINNER + 2 * MG * MN, MPROJ = MINNER + MCONV + MH };

static void mamba2_kernel_grads(int64_t dx, const int64_t *g, int64_t dout, int64_t x,
                                const int64_t *seg, const srt_mamba2_weights *w,
                                const srt_mamba2_config *c) {
  const int64_t n[8] = {MPROJ * MHID, MCONV * MK, MCONV, MH, MH, MH, MINNER, MHID * MINNER};
  for (int i = 0; i < 8; ++i)
    memset(F(g[i]), 0, (size_t)n[i] * 4);
  srt_mamba2_grads gr = {F(g[0]), F(g[1]), F(g[2]), F(g[3]), F(g[4]), F(g[5]), F(g[6]), F(g[7])};
  float *ws = test_malloc((size_t)srt_cpu_mamba2_workspace_floats(c, true) * 4);
  ASSERT_OK(srt_cpu_mamba2_backward(F(dx), &gr, F(dout), F(x), seg, w, ws, c));
  test_free(ws);
}

static void test_mamba2_segment_ids(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  const int64_t size[8] = {MPROJ * MHID, MCONV * MK, MCONV, MH, MH, MH, MINNER, MHID * MINNER};
  int64_t wt[8], g[8], gk[8];
  for (int i = 0; i < 8; ++i) {
    wt[i] = arena_floats(10 + (uint64_t)i, size[i]);
    g[i] = arena_alloc(size[i] * 4);
    gk[i] = arena_alloc(size[i] * 4);
  }
  int64_t x = arena_floats(1, MB * MS * MHID), dout = arena_floats(2, MB * MS * MHID);
  int64_t y = arena_alloc(MB * MS * MHID * 4), ref = arena_alloc(MB * MS * MHID * 4);
  int64_t dx = arena_alloc(MB * MS * MHID * 4), seg = arena_alloc(MB * MS * 8);
  const int64_t ids[MB * MS] = {0, 0, 0, 1, 1, 1, 1, 1, 5, 5, 5, 5, 2, 2, 2, 2};
  memcpy(I(seg), ids, sizeof ids);
  srt_mamba2_config c = {.batch = MB, .seq = MS, .hidden = MHID, .heads = MH, .head_dim = MP,
                         .groups = MG, .state = MN, .conv_kernel = MK, .chunk = MCH,
                         .eps = 1e-5f, .dt_min = 0.0f, .dt_max = INFINITY};
  srt_mamba2_weights w = {F(wt[0]), F(wt[1]), F(wt[2]), F(wt[3]),
                          F(wt[4]), F(wt[5]), F(wt[6]), F(wt[7])};
  float *ws = test_malloc((size_t)srt_cpu_mamba2_workspace_floats(&c, false) * 4);
  float whole[MB * MS * MHID];
  ASSERT_OK(srt_cpu_mamba2_forward(whole, F(x), NULL, &w, ws, &c));
  for (int pass = 0; pass < 2; ++pass) {
    int64_t s = pass ? seg : -1;
    const int64_t *sp = pass ? I(seg) : NULL;
    ASSERT_OK(srt_cpu_mamba2_forward(F(ref), F(x), sp, &w, ws, &c));
    poison(y, MB * MS * MHID);
    ASSERT_OK(srt_op_mamba2_mixer(&e, x, wt[0], wt[1], wt[2], wt[3], wt[4], wt[5], wt[6],
                                  wt[7], s, MB, MS, MHID, MH, MP, MG, MN, MK, MCH, 1e-5, 0.0,
                                  1, y));
    assert_close(F(y), F(ref), MB * MS * MHID, 0, "mamba2 op vs kernel");
    mamba2_kernel_grads(ref, gk, dout, x, sp, &w, &c);
    poison(dx, MB * MS * MHID);
    ASSERT_OK(srt_op_mamba2_mixer_grad(&e, x, wt[0], wt[1], wt[2], wt[3], wt[4], wt[5], wt[6],
                                       wt[7], s, MB, MS, MHID, MH, MP, MG, MN, MK, MCH, 1e-5,
                                       0.0, 1, dout, dx, g[0], g[1], g[2], g[3], g[4], g[5], g[6],
                                       g[7]));
    assert_close(F(dx), F(ref), MB * MS * MHID, 0, "mamba2 grad op dx vs kernel");
    for (int i = 0; i < 8; ++i)
      assert_close(F(g[i]), F(gk[i]), size[i], 0, "mamba2 grad op weights vs kernel");
  }
  bool changed = false; // F(y) holds the packed forward now
  for (int64_t i = 0; i < MB * MS * MHID; ++i)
    changed |= F(y)[i] != whole[i];
  assert_true(changed);
  test_free(ws);
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding_vocab_axis), cmocka_unit_test(test_linear_and_grads),
      cmocka_unit_test(test_rms_norm_and_grads),   cmocka_unit_test(test_rotary),
      cmocka_unit_test(test_elementwise),          cmocka_unit_test(test_mamba2_segment_ids),
  };
  int failed = cmocka_run_group_tests(tests, ops_setup, ops_teardown);
  MPI_Finalize();
  return failed;
}
