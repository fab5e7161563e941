// Unit tests of the mesh arithmetic, tensor local shapes/offsets and the
// arena (no communication).
#include "runtime_test_util.h"

#include "shardrt.h" // the umbrella header: also checks that it compiles

static void test_mesh_coords_dp2_tp2(void **state) {
  (void)state;
  srt_mesh m;
  ASSERT_OK(srt_mesh_init(&m, 4, 2, 2));
  // tp fastest: rank = dp_index * tp + tp_index.
  const int expect[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  for (int r = 0; r < 4; ++r) {
    int c[SRT_MESH_NDIMS];
    srt_mesh_coord(&m, r, c);
    assert_int_equal(c[SRT_MESH_DP], expect[r][0]);
    assert_int_equal(c[SRT_MESH_TP], expect[r][1]);
    assert_int_equal(srt_mesh_rank(&m, c), r);
  }
}

static void test_mesh_infer_and_mismatch(void **state) {
  (void)state;
  srt_mesh m;
  ASSERT_OK(srt_mesh_init(&m, 8, 0, 4));
  assert_int_equal(m.shape[SRT_MESH_DP], 2);
  assert_int_equal(m.shape[SRT_MESH_TP], 4);
  ASSERT_ERROR(srt_mesh_init(&m, 6, 2, 2), SRT_FAILED_PRECONDITION,
               "world size 6 != dp (2) x tp (2) = 4");
  ASSERT_ERROR(srt_mesh_init(&m, 6, 0, 4), SRT_FAILED_PRECONDITION,
               "world size 6 is not divisible by tp=4");
  ASSERT_ERROR(srt_mesh_init(&m, 4, 4, 0), SRT_INVALID_ARGUMENT, "tp must be >= 1");
}

static void test_mesh_coords_dp2_cp2_tp2(void **state) {
  (void)state;
  srt_mesh m;
  ASSERT_OK(srt_mesh_init_cp(&m, 8, 2, 2, 2));
  assert_int_equal(srt_mesh_size(&m), 8);
  assert_int_equal(srt_mesh_cp(&m), 2);
  // tp fastest, then cp, then dp (Megatron-LM's order): rank 5 = (1*2+0)*2+1.
  for (int r = 0; r < 8; ++r) {
    int c[SRT_MESH_NDIMS];
    srt_mesh_coord(&m, r, c);
    int cpi = srt_mesh_cp_index(&m, r);
    assert_int_equal(c[SRT_MESH_DP], r / 4);
    assert_int_equal(cpi, r / 2 % 2);
    assert_int_equal(c[SRT_MESH_TP], r % 2);
    assert_int_equal(srt_mesh_rank_cp(&m, c, cpi), r);
    assert_int_equal(srt_mesh_rank(&m, c), r / 4 * 4 + r % 2);
  }
  srt_mesh plain = {.shape = {2, 2}}; // no cp field: a mesh without context parallelism
  assert_int_equal(srt_mesh_cp(&plain), 1);
  assert_int_equal(srt_mesh_size(&plain), 4);
}

static void test_mesh_cp_mismatch(void **state) {
  (void)state;
  srt_mesh m;
  ASSERT_OK(srt_mesh_init_cp(&m, 12, 0, 2, 3));
  assert_int_equal(m.shape[SRT_MESH_DP], 2);
  ASSERT_ERROR(srt_mesh_init_cp(&m, 6, 2, 2, 2), SRT_FAILED_PRECONDITION,
               "world size 6 != dp (2) x cp (2) x tp (2) = 8; launch with -np 8");
  ASSERT_ERROR(srt_mesh_init_cp(&m, 6, 0, 4, 1), SRT_FAILED_PRECONDITION,
               "world size 6 is not divisible by cp=4 x tp=1");
  ASSERT_ERROR(srt_mesh_init_cp(&m, 4, 1, 0, 2), SRT_INVALID_ARGUMENT,
               "cp must be >= 1, got cp=0");
}

static void test_local_shape_and_offset(void **state) {
  (void)state;
  srt_mesh m = {.shape = {2, 4}};
  const int64_t g[3] = {8, 12, 6};
  int64_t l[3], off[3];
  // dp shards dim 0, tp shards dim 1.
  srt_placement p1[2] = {srt_shard(0), srt_shard(1)};
  ASSERT_OK(srt_local_shape("w", 3, g, p1, &m, l));
  assert_int_equal(l[0], 4);
  assert_int_equal(l[1], 3);
  assert_int_equal(l[2], 6);
  ASSERT_OK(srt_local_offset("w", 3, g, p1, &m, (int[]){1, 2}, off));
  assert_int_equal(off[0], 4);
  assert_int_equal(off[1], 6);
  assert_int_equal(off[2], 0);
  // Both axes on dim 0: split tp-ways, then each tp shard dp-ways (FSDP
  // over TP): tp rank 2's rows [4, 6), dp rank 1's half of them.
  srt_placement p2[2] = {srt_shard(0), srt_shard(0)};
  ASSERT_OK(srt_local_shape("w", 3, g, p2, &m, l));
  assert_int_equal(l[0], 1);
  ASSERT_OK(srt_local_offset("w", 3, g, p2, &m, (int[]){1, 2}, off));
  assert_int_equal(off[0], 2 * 2 + 1 * 1);
  // Replicate and Partial keep the global shape.
  srt_placement p3[2] = {srt_replicate(), srt_partial()};
  ASSERT_OK(srt_local_shape("w", 3, g, p3, &m, l));
  assert_int_equal(l[0], 8);
  assert_int_equal(l[1], 12);
}

static void test_local_shape_errors(void **state) {
  (void)state;
  srt_mesh m = {.shape = {1, 4}};
  const int64_t g[2] = {10, 8};
  int64_t l[2];
  ASSERT_ERROR(srt_local_shape("model.norm.weight", 2, g,
                               (srt_placement[]){srt_replicate(), srt_shard(0)},
                               &m, l),
               SRT_INVALID_ARGUMENT,
               "tensor 'model.norm.weight': dim 0 of size 10 is not divisible by tp=4");
  ASSERT_ERROR(srt_local_shape("x", 2, g,
                               (srt_placement[]){srt_replicate(), srt_shard(2)},
                               &m, l),
               SRT_INVALID_ARGUMENT, "Shard(2) on mesh axis tp");
  srt_tensor t;
  ASSERT_ERROR(srt_tensor_init(&t, "x", SRT_DTYPE_COUNT, 2, g,
                               (srt_placement[]){srt_replicate(), srt_replicate()},
                               &m),
               SRT_INVALID_ARGUMENT, "invalid dtype");
}

static void test_tensor_alloc(void **state) {
  (void)state;
  srt_mesh m = {.shape = {1, 2}};
  srt_tensor t;
  ASSERT_OK(srt_tensor_init(&t, "emb", SRT_F32, 2, (int64_t[]){6, 4},
                            (srt_placement[]){srt_replicate(), srt_shard(0)}, &m));
  assert_int_equal(srt_tensor_local_numel(&t), 12);
  assert_int_equal(srt_tensor_local_bytes(&t), 48);
  ASSERT_OK(srt_tensor_alloc(&t));
  assert_int_equal((uintptr_t)t.data % SRT_ARENA_ALIGN, 0);
  assert_true(t.owns_data);
  assert_true(((float *)t.data)[11] == 0.0f);
  ASSERT_ERROR(srt_tensor_alloc(&t), SRT_FAILED_PRECONDITION, "already has data");
  srt_tensor_release(&t);
  assert_null(t.data);
}

static void test_arena(void **state) {
  (void)state;
  srt_arena a;
  ASSERT_OK(srt_arena_init(&a, 1000));
  assert_int_equal(a.capacity, 1024);
  void *p, *q, *r;
  ASSERT_OK(srt_arena_alloc(&a, 1, "a", &p));
  ASSERT_OK(srt_arena_alloc(&a, 100, "b", &q));
  assert_int_equal((uintptr_t)p % 64, 0);
  assert_int_equal((uintptr_t)q % 64, 0);
  assert_int_equal((char *)q - (char *)p, 64);
  assert_int_equal(a.used, 64 + 128);
  ASSERT_ERROR(srt_arena_alloc(&a, 900, "big", &r), SRT_RESOURCE_EXHAUSTED,
               "cannot allocate 900 bytes for 'big': 192 of 1024 bytes used");
  assert_null(r);
  srt_tensor t;
  srt_mesh m = {.shape = {1, 1}};
  ASSERT_OK(srt_tensor_init(&t, "x", SRT_F32, 1, (int64_t[]){200},
                            (srt_placement[]){srt_replicate(), srt_replicate()}, &m));
  ASSERT_OK(srt_tensor_alloc_in(&t, &a));
  assert_ptr_equal(t.data, (char *)a.base + 192);
  assert_false(t.owns_data);
  srt_tensor_release(&t); // a view: nothing freed
  srt_arena_reset(&a);
  assert_int_equal(a.used, 0);
  assert_int_equal(a.high_water, 192 + 832);
  ASSERT_OK(srt_arena_alloc(&a, 1024, "all", &p));
  assert_ptr_equal(p, a.base);
  srt_arena_destroy(&a);
  assert_null(a.base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mesh_coords_dp2_tp2),
      cmocka_unit_test(test_mesh_infer_and_mismatch),
      cmocka_unit_test(test_mesh_coords_dp2_cp2_tp2),
      cmocka_unit_test(test_mesh_cp_mismatch),
      cmocka_unit_test(test_local_shape_and_offset),
      cmocka_unit_test(test_local_shape_errors),
      cmocka_unit_test(test_tensor_alloc),
      cmocka_unit_test(test_arena),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
