// The loss ops: srt_op_cross_entropy(_grad) against the kernel, and the
// split loss (logit max, partial sums, loss sum, mean, logits grad) with its
// all-reduces over tp (vocabulary split on 2 ranks) giving the unsharded
// loss and each rank's slice of the unsharded gradient; ignored labels and
// the shift included. The mean of the split loss divides by the global
// count of the (sum, count) pair.
#include "runtime_ops_test_util.h"

#include <string.h>

#include "shardrt/kernels.h"

enum { B = 3, S = 7, V = 10, N = B * S };

static int64_t make_labels(void) {
  int64_t labels = arena_alloc(N * 8);
  for (int64_t i = 0; i < N; ++i)
    I(labels)[i] = i % 5 == 2 ? -100 : (i * 7 + 1) % V;
  return labels;
}

// `s` is an error with `code` whose message is `text` followed by this
// rank's context, once: the op dispatcher adds it to the errors of the
// shared checks and of the cpu kernels alike (srt_status_annotate).
static void expect_rank_once(const srt_exec *e, srt_status s, srt_code code, const char *text) {
  char want[512];
  snprintf(want, sizeof want, "%s (rank %d)", text, srt_context_rank(e->ctx));
  assert_non_null(s);
  assert_int_equal(srt_status_code(s), code);
  assert_string_equal(srt_status_message(s), want);
  assert_int_equal(srt_status_rank(s), srt_context_rank(e->ctx));
  srt_status_free(s);
}

static void test_unsharded(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  int64_t logits = arena_floats(31, N * V), labels = make_labels();
  int64_t loss = arena_alloc(4), dl = arena_alloc(N * V * 4), ref = arena_alloc(N * V * 4);
  srt_cross_entropy_config c = {B, S, V, 0, V, true, -100, NULL, NULL};
  float want, *ws = malloc((size_t)(3 * N) * 4);
  ASSERT_OK(srt_cpu_cross_entropy_forward(&want, ws, F(logits), I(labels), ws + N, &c));
  srt_cpu_cross_entropy_backward(F(ref), F(logits), ws, I(labels), 1.0f,
                                 (float)srt_cpu_cross_entropy_count(I(labels), &c), &c);
  free(ws);
  ASSERT_OK(srt_op_cross_entropy(&e, logits, labels, loss, B, S, V, -100, 1));
  assert_true(*F(loss) == want);
  poison(dl, N * V);
  ASSERT_OK(srt_op_cross_entropy_grad(&e, logits, labels, dl, B, S, V, -100, 1));
  assert_close(F(dl), F(ref), N * V, 0, "cross-entropy grad");
  I(labels)[1] = V; // out of the vocabulary (label 0 is never scored: shift)
  expect_rank_once(&e, srt_op_cross_entropy(&e, logits, labels, loss, B, S, V, -100, 1),
                   SRT_OUT_OF_RANGE,
                   "cross_entropy: label 10 at [0, 1] outside the vocabulary [0, 10) and not "
                   "ignore_index -100");
  expect_rank_once(&e, srt_op_cross_entropy(&e, logits, labels, loss, B, S, -V, -100, 1),
                   SRT_INVALID_ARGUMENT, "srt_op_cross_entropy: size 'vocab' is negative (-10)");
}

static void test_split_equals_unsharded(void **state) {
  (void)state;
  arena_reset();
  srt_exec e = test_exec();
  int tp = tp_size(), idx = tp_index();
  int64_t lv = V / tp;
  int64_t logits = arena_floats(32, N * V), labels = make_labels();
  int64_t loss_ref = arena_alloc(4), dref = arena_alloc(N * V * 4);
  ASSERT_OK(srt_op_cross_entropy(&e, logits, labels, loss_ref, B, S, V, -100, 1));
  ASSERT_OK(srt_op_cross_entropy_grad(&e, logits, labels, dref, B, S, V, -100, 1));

  int64_t local = arena_alloc(N * lv * 4);
  for (int64_t r = 0; r < N; ++r)
    memcpy(F(local) + r * lv, F(logits) + r * V + idx * lv, (size_t)lv * 4);
  int64_t max = arena_alloc(N * 4), sums = arena_alloc(2 * N * 4), sc = arena_alloc(8),
          loss = arena_alloc(4), dl = arena_alloc(N * lv * 4);
  int64_t sum_exp = sums, target = sums + 4 * N;
  ASSERT_OK(srt_op_ce_logit_max(&e, local, max, N, lv));
  ASSERT_OK(srt_op_all_reduce(&e, max, max, N, 1, 1, SRT_OP_F32));
  ASSERT_OK(srt_op_ce_partial_sums(&e, local, labels, max, sum_exp, target, B, S, lv, 1,
                                   -100, 1));
  ASSERT_OK(srt_op_all_reduce(&e, sums, sums, 2 * N, 1, 0, SRT_OP_F32));
  ASSERT_OK(srt_op_ce_loss_sum(&e, max, sum_exp, target, labels, sc, B, S, -100, 1));
  ASSERT_OK(srt_op_ce_mean(&e, sc, loss));
  assert_close(F(loss), F(loss_ref), 1, 1e-6, "split loss");
  poison(dl, N * lv);
  ASSERT_OK(srt_op_ce_logits_grad(&e, local, labels, max, sum_exp, sc, dl, B, S, lv, 1, -100,
                                  1));
  for (int64_t r = 0; r < N; ++r)
    assert_close(F(dl) + r * lv, F(dref) + r * V + idx * lv, lv, 1e-6, "split grad slice");

  // A count summed over a data-parallel split: the gradient divides by it.
  F(sc)[1] *= 2;
  ASSERT_OK(srt_op_ce_logits_grad(&e, local, labels, max, sum_exp, sc, dl, B, S, lv, 1, -100,
                                  1));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < lv; ++j)
      assert_true(fabsf(2 * F(dl)[r * lv + j] - F(dref)[r * V + idx * lv + j]) <= 1e-6f);
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unsharded),
      cmocka_unit_test(test_split_equals_unsharded),
  };
  int failed = cmocka_run_group_tests(tests, ops_setup, ops_teardown);
  MPI_Finalize();
  return failed;
}
