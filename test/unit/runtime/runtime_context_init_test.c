// MPI test of a context that starts MPI itself: the program never calls
// MPI_Init, srt_context_create does, and srt_context_destroy finalises it.
// (Plain main, not cmocka groups: MPI lives exactly as long as the context.)
#include "runtime_test_util.h"

#include <mpi.h>

#include "shardrt/collectives.h"
#include "shardrt/context.h"

static void test_context_owns_mpi(void **state) {
  (void)state;
  int flag = 1;
  MPI_Initialized(&flag);
  assert_false(flag);
  srt_context_options o = srt_context_default_options(); // tp = 1, dp inferred
  srt_context *ctx;
  ASSERT_OK(srt_context_create(&o, &ctx));
  MPI_Initialized(&flag);
  assert_true(flag);
  int world = srt_group_size(srt_context_group(ctx, SRT_GROUP_WORLD));
  assert_int_equal(srt_context_mesh(ctx)->shape[SRT_MESH_DP], world);
  assert_int_equal(srt_group_size(srt_context_group(ctx, SRT_GROUP_TP)), 1);
  float x = 1.0f;
  ASSERT_OK(srt_all_reduce(srt_context_group(ctx, SRT_GROUP_DP), &x, 1, SRT_F32,
                           SRT_REDUCE_SUM));
  assert_true(x == (float)world);
  ASSERT_OK(srt_context_destroy(ctx));
  MPI_Finalized(&flag);
  assert_true(flag);
  // MPI cannot start again: a clear error, not a crash.
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_FAILED_PRECONDITION,
               "already finalised");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_context_owns_mpi)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
