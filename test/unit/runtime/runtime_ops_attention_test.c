// srt_op_attention / srt_op_attention_grad against the CPU kernel on the
// whole problem: with KV heads sharded like the query heads (each rank runs
// its slice), and with replicated KV heads (6 query heads over 3 KV heads on
// 2 ranks, so a rank's local heads read two KV heads and one KV head is read
// from both ranks): each rank's output and dq are its slice of the
// unsharded ones, its lse [B, H, S] the unsharded lse's heads, and dk/dv
// summed over tp equal the unsharded dk/dv. The backward reads the lse and
// output the op's forward wrote.
#include "runtime_ops_test_util.h"

#include <string.h>

#include "shardrt/kernels.h"

enum { B = 2, S = 9, HD = 4 };

// The unsharded forward and backward: out, dq [B, S, H*HD], lse [B, H, S],
// dk, dv [B, S, KV*HD].
static void reference(int64_t q, int64_t k, int64_t v, int64_t dy, int64_t H, int64_t KV,
                      float softcap, int64_t window, int64_t out, int64_t lse, int64_t dq,
                      int64_t dk, int64_t dv) {
  srt_attention_config c = {.batch = B, .seq = S, .heads = H, .kv_heads = KV,
                            .head_dim = HD, .causal = true, .scale = 0.5f,
                            .sliding_window = window, .softcap = softcap};
  int64_t ws = srt_cpu_attention_workspace_floats(&c);
  float *scratch = malloc((size_t)ws * 4);
  ASSERT_OK(srt_cpu_attention_forward(F(out), F(lse), F(q), F(k), F(v), NULL, scratch, &c));
  ASSERT_OK(srt_cpu_attention_backward(F(dq), F(dk), F(dv), F(dy), F(q), F(k), F(v), F(out),
                                       F(lse), NULL, scratch, &c));
  free(scratch);
}

// Copies heads [h0, h0 + n) of full [B*S, H*HD] into part [B*S, n*HD].
static void take_heads(int64_t full, int64_t part, int64_t H, int64_t h0, int64_t n) {
  for (int64_t r = 0; r < B * S; ++r)
    memcpy(F(part) + r * n * HD, F(full) + r * H * HD + h0 * HD, (size_t)(n * HD) * 4);
}

// One configuration: H query heads, KV heads, replicated KV or not.
static void check(int64_t H, int64_t KV, int replicated, float softcap, int64_t window) {
  arena_reset();
  srt_exec e = test_exec();
  int tp = tp_size(), idx = tp_index();
  int64_t q = arena_floats(21, B * S * H * HD), k = arena_floats(22, B * S * KV * HD),
          v = arena_floats(23, B * S * KV * HD), dy = arena_floats(24, B * S * H * HD);
  int64_t out = arena_alloc(B * S * H * HD * 4), dq = arena_alloc(B * S * H * HD * 4),
          dk = arena_alloc(B * S * KV * HD * 4), dv = arena_alloc(B * S * KV * HD * 4),
          lse = arena_alloc(B * H * S * 4);
  reference(q, k, v, dy, H, KV, softcap, window, out, lse, dq, dk, dv);

  int64_t lh = H / tp, lkv = replicated ? KV : KV / tp;
  int64_t lq = arena_alloc(B * S * lh * HD * 4), ldy = arena_alloc(B * S * lh * HD * 4);
  int64_t lk = arena_alloc(B * S * lkv * HD * 4), lv = arena_alloc(B * S * lkv * HD * 4);
  take_heads(q, lq, H, idx * lh, lh);
  take_heads(dy, ldy, H, idx * lh, lh);
  take_heads(k, lk, KV, replicated ? 0 : idx * lkv, lkv);
  take_heads(v, lv, KV, replicated ? 0 : idx * lkv, lkv);
  srt_op_attention_config c = {B, S, lh, lkv, HD, 1, window, 0.5, softcap,
                               replicated ? 1 : -1, H, 1};
  int64_t lout = arena_alloc(B * S * lh * HD * 4), ldq = arena_alloc(B * S * lh * HD * 4),
          ldk = arena_alloc(B * S * lkv * HD * 4), ldv = arena_alloc(B * S * lkv * HD * 4),
          llse = arena_alloc(B * lh * S * 4);
  poison(lout, B * S * lh * HD);
  poison(llse, B * lh * S);
  poison(ldk, B * S * lkv * HD);
  poison(ldv, B * S * lkv * HD);
  ASSERT_OK(srt_op_attention(&e, lq, lk, lv, -1, lout, llse, &c));
  ASSERT_OK(srt_op_attention_grad(&e, lq, lk, lv, lout, llse, ldy, -1, ldq, ldk, ldv, &c));

  int64_t want = arena_alloc(B * S * H * HD * 4);
  take_heads(out, want, H, idx * lh, lh);
  assert_close(F(lout), F(want), B * S * lh * HD, 1e-5, "attention out slice");
  for (int64_t b = 0; b < B; ++b) // lse [B, H, S]: heads idx*lh.. of each batch
    memcpy(F(want) + b * lh * S, F(lse) + (b * H + idx * lh) * S, (size_t)(lh * S) * 4);
  assert_close(F(llse), F(want), B * lh * S, 1e-5, "attention lse slice");
  take_heads(dq, want, H, idx * lh, lh);
  assert_close(F(ldq), F(want), B * S * lh * HD, 1e-5, "attention dq slice");
  if (replicated) { // Partial: the sum over tp is the unsharded gradient
    ASSERT_OK(srt_op_all_reduce(&e, ldk, ldk, B * S * KV * HD, 1, 0, SRT_OP_F32));
    ASSERT_OK(srt_op_all_reduce(&e, ldv, ldv, B * S * KV * HD, 1, 0, SRT_OP_F32));
  }
  take_heads(dk, want, KV, replicated ? 0 : idx * lkv, lkv);
  assert_close(F(ldk), F(want), B * S * lkv * HD, 1e-5, "attention dk");
  take_heads(dv, want, KV, replicated ? 0 : idx * lkv, lkv);
  assert_close(F(ldv), F(want), B * S * lkv * HD, 1e-5, "attention dv");
}

static void test_sharded_kv(void **state) {
  (void)state;
  check(4, 2, 0, 0.0f, 0);
  check(4, 2, 0, 5.0f, 3); // softcap and a sliding window
}

static void test_replicated_kv(void **state) {
  (void)state;
  check(6, 3, 1, 0.0f, 0); // runs of heads per KV head; KV head 1 on both ranks
  check(4, 1, 1, 0.0f, 4); // MQA: every local head reads the one KV head
  check(6, 3, 1, 5.0f, 0);
}

static void test_bad_config(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  int64_t buf = arena_alloc(4096);
  srt_op_attention_config c = {B, S, 3, 3, HD, 1, 0, 0.5, 0, 1, 7, 1};
  ASSERT_ERROR(srt_op_attention(&e, buf, buf, buf, -1, buf, buf, &c), SRT_INVALID_ARGUMENT,
               "replicated KV");
  c.batch = 0;
  ASSERT_ERROR(srt_op_attention(&e, buf, buf, buf, -1, buf, buf, &c), SRT_INVALID_ARGUMENT,
               "must be positive");
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sharded_kv),
      cmocka_unit_test(test_replicated_kv),
      cmocka_unit_test(test_bad_config),
  };
  int failed = cmocka_run_group_tests(tests, ops_setup, ops_teardown);
  MPI_Finalize();
  return failed;
}
