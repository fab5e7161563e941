// The collective ops on both mesh axes (np 2: tp = 2; np 4: dp = 2 x tp = 2)
// against tensors every rank can regenerate: all-reduce (sum, max, in and
// out of place), all-gather and reduce-scatter along an inner dim,
// all-to-all and the local all-slice, from the LOCAL input's shape.
#include "runtime_ops_test_util.h"

#include <string.h>

// Element i of global tensor `id` as an exactly summable value.
static float gval(uint64_t id, int64_t i) { return (float)((int64_t)(id * 131 + i * 7) % 97); }

static int axis_index(int axis) {
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  return c[axis];
}
static int axis_size(int axis) { return srt_context_mesh(g_ctx)->shape[axis]; }

static void test_all_reduce(void **state) {
  (void)state;
  for (int axis = 0; axis < 2; ++axis) {
    arena_reset();
    srt_exec e = test_exec();
    enum { N = 10 };
    int me = axis_index(axis), n = axis_size(axis);
    int64_t in = arena_alloc(N * 4), out = arena_alloc(N * 4);
    for (int64_t i = 0; i < N; ++i)
      F(in)[i] = (float)(me * 100 + i);
    ASSERT_OK(srt_op_all_reduce(&e, in, out, N, axis, 0, SRT_OP_F32));
    for (int64_t i = 0; i < N; ++i)
      assert_true(F(out)[i] == (float)(100 * n * (n - 1) / 2 + n * i));
    assert_true(F(in)[1] == (float)(me * 100 + 1)); // out of place
    ASSERT_OK(srt_op_all_reduce(&e, in, in, N, axis, 1, SRT_OP_F32));
    for (int64_t i = 0; i < N; ++i)
      assert_true(F(in)[i] == (float)((n - 1) * 100 + i));
  }
  srt_exec e = test_exec();
  ASSERT_ERROR(srt_op_all_reduce(&e, 0, 0, 1, 2, 0, SRT_OP_F32), SRT_INVALID_ARGUMENT, "mesh axis 2");
}

// Global [2, 4 * n, 3] split on dim 1 over `axis`: gather, reduce-scatter,
// slice; then an all-to-all from Shard(1) to Shard(2) of [2, 2n, 2n].
static void test_gather_scatter_slice_all_to_all(void **state) {
  (void)state;
  for (int axis = 0; axis < 2; ++axis) {
    arena_reset();
    srt_exec e = test_exec();
    int me = axis_index(axis), n = axis_size(axis);
    int64_t d1 = 4 * n, l1 = 4;
    int64_t full = arena_alloc(2 * d1 * 3 * 4), local = arena_alloc(2 * l1 * 3 * 4),
            out = arena_alloc(2 * d1 * 3 * 4);
    for (int64_t i = 0; i < 2 * d1 * 3; ++i)
      F(full)[i] = gval(1, i);
    for (int64_t a = 0; a < 2; ++a)
      memcpy(F(local) + a * l1 * 3, F(full) + (a * d1 + me * l1) * 3, (size_t)(l1 * 3) * 4);
    ASSERT_OK(srt_op_all_gather(&e, local, out, axis, 1, 3, 2, l1, 3, 0, SRT_OP_F32));
    assert_close(F(out), F(full), 2 * d1 * 3, 0, "all_gather dim 1");
    poison(out, 2 * l1 * 3);
    ASSERT_OK(srt_op_all_slice(&e, full, out, axis, 1, 3, 2, d1, 3, 0, SRT_OP_F32));
    assert_close(F(out), F(local), 2 * l1 * 3, 0, "all_slice dim 1");
    // reduce-scatter of n identical copies: n x this rank's chunk.
    ASSERT_OK(srt_op_reduce_scatter(&e, full, out, axis, 1, 3, 2, d1, 3, 0, SRT_OP_F32));
    for (int64_t i = 0; i < 2 * l1 * 3; ++i)
      assert_true(F(out)[i] == (float)n * F(local)[i]);

    // all-to-all: global G [2, 2n, 2n]; input Shard(1) (local [2, 2, 2n]);
    // split dim 2 and concat dim 1 -> Shard(2) (local [2, 2n, 2]).
    int64_t m = 2 * n;
    int64_t in2 = arena_alloc(2 * 2 * m * 4), out2 = arena_alloc(2 * m * 2 * 4);
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t c = 0; c < m; ++c)
          F(in2)[(a * 2 + b) * m + c] = gval(2, (a * m + me * 2 + b) * m + c);
    ASSERT_OK(srt_op_all_to_all(&e, in2, out2, axis, 2, 1, 3, 2, 2, m, 0, SRT_OP_F32));
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < m; ++b)
        for (int64_t c = 0; c < 2; ++c)
          assert_true(F(out2)[(a * m + b) * 2 + c] == gval(2, (a * m + b) * m + me * 2 + c));
  }
  srt_exec e = test_exec();
  ASSERT_ERROR(srt_op_all_gather(&e, 0, 64, 1, 3, 3, 2, 2, 2, 0, SRT_OP_F32), SRT_INVALID_ARGUMENT,
               "outside a rank-3");
  if (axis_size(1) > 1)
    ASSERT_ERROR(srt_op_all_slice(&e, 0, 64, 1, 0, 1, 3, 0, 0, 0, SRT_OP_F32), SRT_INVALID_ARGUMENT,
                 "does not split");
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_gather_scatter_slice_all_to_all),
  };
  int failed = cmocka_run_group_tests(tests, ops_setup, ops_teardown);
  MPI_Finalize();
  return failed;
}
