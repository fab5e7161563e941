// MPI tests of srt_context: rank -> mesh coordinate, membership of the tp,
// dp, dp_cp and cp groups (with and without context parallelism), refusal
// of a world size that is not dp x cp x tp, ranks
// disagreeing on the mesh, a caller-given communicator, the arena.
// Run under mpirun with an even number of ranks (2 and 4 in ctest).
#include "runtime_test_util.h"

#include <mpi.h>
#include <stdio.h>

#include "shardrt/context.h"

static int world_rank(void) {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

static int world_size(void) {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// The world ranks of the members of `g`, in group-rank order.
static void members(srt_group *g, int *out) {
  int me = world_rank();
  MPI_Allgather(&me, 1, MPI_INT, out, 1, MPI_INT, srt_group_comm(g));
}

static void test_mesh_and_groups(void **state) {
  (void)state;
  int rank = world_rank(), size = world_size();
  srt_context_options o = srt_context_default_options();
  o.tp = 2;
  srt_context *ctx;
  ASSERT_OK(srt_context_create(&o, &ctx));
  const srt_mesh *m = srt_context_mesh(ctx);
  assert_int_equal(m->shape[SRT_MESH_DP], size / 2);
  assert_int_equal(m->shape[SRT_MESH_TP], 2);
  assert_int_equal(srt_context_rank(ctx), rank);
  int c[SRT_MESH_NDIMS];
  srt_context_coord(ctx, c);
  assert_int_equal(c[SRT_MESH_DP], rank / 2); // tp fastest
  assert_int_equal(c[SRT_MESH_TP], rank % 2);

  srt_group *tp = srt_context_group(ctx, SRT_GROUP_TP);
  srt_group *dp = srt_context_group(ctx, SRT_GROUP_DP);
  srt_group *dpcp = srt_context_group(ctx, SRT_GROUP_DP_CP);
  srt_group *world = srt_context_group(ctx, SRT_GROUP_WORLD);
  assert_string_equal(srt_group_name(tp), "tp");
  assert_string_equal(srt_group_name(dpcp), "dp_cp");
  assert_int_equal(srt_group_size(world), size);
  assert_int_equal(srt_group_size(tp), 2);
  assert_int_equal(srt_group_rank(tp), rank % 2);
  assert_int_equal(srt_group_size(dp), size / 2);
  assert_int_equal(srt_group_rank(dp), rank / 2);
  int mem[8];
  // tp group of rank r: {2*(r/2), 2*(r/2)+1}.
  members(tp, mem);
  assert_int_equal(mem[0], 2 * (rank / 2));
  assert_int_equal(mem[1], 2 * (rank / 2) + 1);
  // dp group: the ranks with the same tp index, striding by tp.
  members(dp, mem);
  for (int i = 0; i < size / 2; ++i)
    assert_int_equal(mem[i], i * 2 + rank % 2);
  members(dpcp, mem);
  for (int i = 0; i < size / 2; ++i)
    assert_int_equal(mem[i], i * 2 + rank % 2);
  // dp_cp is its own communicator with dp's members and order.
  int cmp;
  MPI_Comm_compare(srt_group_comm(dp), srt_group_comm(dpcp), &cmp);
  assert_int_equal(cmp, MPI_CONGRUENT);
  MPI_Comm_compare(srt_group_comm(world), MPI_COMM_WORLD, &cmp);
  assert_int_equal(cmp, MPI_CONGRUENT); // a duplicate, not the caller's comm
  assert_null(srt_context_arena(ctx));
  assert_null(srt_context_group(ctx, SRT_GROUP_COUNT));
  ASSERT_OK(srt_context_destroy(ctx));
}

// The groups of a dp x cp x tp mesh: each one's members, in group-rank
// order, from the rank arithmetic (tp fastest, then cp, then dp).
static void check_cp_mesh(int dp, int cp, int tp) {
  int rank = world_rank();
  srt_context_options o = srt_context_default_options();
  o.dp = dp;
  o.cp = cp;
  o.tp = tp;
  srt_context *ctx;
  ASSERT_OK(srt_context_create(&o, &ctx));
  assert_int_equal(srt_mesh_cp(srt_context_mesh(ctx)), cp);
  int d = rank / (cp * tp), c = rank / tp % cp, t = rank % tp, mem[8];
  srt_group *g = srt_context_group(ctx, SRT_GROUP_CP);
  assert_string_equal(srt_group_name(g), "cp");
  assert_int_equal(srt_group_size(g), cp);
  assert_int_equal(srt_group_rank(g), c);
  members(g, mem);
  for (int i = 0; i < cp; ++i)
    assert_int_equal(mem[i], (d * cp + i) * tp + t);
  g = srt_context_group(ctx, SRT_GROUP_TP);
  members(g, mem);
  for (int i = 0; i < tp; ++i)
    assert_int_equal(mem[i], (d * cp + c) * tp + i);
  g = srt_context_group(ctx, SRT_GROUP_DP);
  members(g, mem);
  for (int i = 0; i < dp; ++i)
    assert_int_equal(mem[i], (i * cp + c) * tp + t);
  g = srt_context_group(ctx, SRT_GROUP_DP_CP);
  assert_int_equal(srt_group_size(g), dp * cp);
  assert_int_equal(srt_group_rank(g), d * cp + c);
  members(g, mem);
  for (int i = 0; i < dp * cp; ++i)
    assert_int_equal(mem[i], i * tp + t);
  ASSERT_OK(srt_context_destroy(ctx));
}

static void test_cp_groups(void **state) {
  (void)state;
  int size = world_size();
  check_cp_mesh(1, 2, size / 2);  // cp 2 x tp (np 2: tp 1; np 4: tp 2)
  check_cp_mesh(size / 2, 2, 1);  // dp x cp 2
}

static void test_world_size_mismatch(void **state) {
  (void)state;
  int size = world_size();
  char expect[128];
  snprintf(expect, sizeof expect, "world size %d != dp (3) x tp (2) = 6", size);
  srt_context_options o = srt_context_default_options();
  o.dp = 3;
  o.tp = 2;
  srt_context *ctx = (srt_context *)&o; // must be reset to NULL
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_FAILED_PRECONDITION, expect);
  assert_null(ctx);
  o.dp = 0;
  o.tp = 3;
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_FAILED_PRECONDITION,
               "is not divisible by tp=3");
  o.tp = 0;
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_INVALID_ARGUMENT, "tp must be >= 1");
  snprintf(expect, sizeof expect, "world size %d != dp (1) x cp (3) x tp (2) = 6", size);
  o.dp = 1;
  o.cp = 3;
  o.tp = 2;
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_FAILED_PRECONDITION, expect);
}

static void test_ranks_disagree(void **state) {
  (void)state;
  srt_context_options o = srt_context_default_options();
  o.tp = world_rank() == 0 ? 1 : 2;
  srt_context *ctx;
  ASSERT_ERROR(srt_context_create(&o, &ctx), SRT_INVALID_ARGUMENT,
               "ranks disagree on the mesh");
  assert_null(ctx);
}

static void test_caller_communicator_and_arena(void **state) {
  (void)state;
  int rank = world_rank(), size = world_size();
  // The caller's communicator orders ranks backwards.
  MPI_Comm rev;
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - 1 - rank, &rev);
  srt_context_options o = srt_context_default_options();
  o.comm = rev;
  o.tp = 2;
  o.arena_bytes = 4096;
  srt_context *ctx;
  ASSERT_OK(srt_context_create(&o, &ctx));
  int r = size - 1 - rank;
  assert_int_equal(srt_context_rank(ctx), r);
  int c[SRT_MESH_NDIMS];
  srt_context_coord(ctx, c);
  assert_int_equal(c[SRT_MESH_DP], r / 2);
  assert_int_equal(c[SRT_MESH_TP], r % 2);
  srt_arena *a = srt_context_arena(ctx);
  assert_non_null(a);
  assert_int_equal(a->capacity, 4096);
  ASSERT_OK(srt_context_destroy(ctx));
  MPI_Comm_free(&rev);
  assert_null(srt_context_destroy(NULL));
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mesh_and_groups),
      cmocka_unit_test(test_cp_groups),
      cmocka_unit_test(test_world_size_mismatch),
      cmocka_unit_test(test_ranks_disagree),
      cmocka_unit_test(test_caller_communicator_and_arena),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  MPI_Finalize();
  return failed;
}
