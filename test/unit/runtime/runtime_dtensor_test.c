// MPI tests of srt_to_local and srt_full_tensor on a dp x 2 mesh: every
// combination of Replicate / Shard(0,1,2) on dp and tp (including both axes
// on one dim) gives this rank's expected box of the full tensor (computed
// here from the mesh coordinate by hand), and full_tensor(to_local(x)) == x
// bit for bit; Partial is summed; to_local refuses Partial.
#include "runtime_test_util.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/context.h"
#include "shardrt/dtensor.h"
#include "shardrt/tensor.h"

static srt_context *g_ctx;

static int setup(void **state) {
  (void)state;
  srt_context_options o = srt_context_default_options();
  o.tp = 2;
  srt_status s = srt_context_create(&o, &g_ctx);
  srt_status_free(s);
  return s ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  srt_status s = srt_context_destroy(g_ctx);
  srt_status_free(s);
  return s ? -1 : 0;
}

static float value(int64_t i, int64_t j, int64_t k) {
  return (float)(i * 10000 + j * 100 + k) - 0.5f;
}

static void test_round_trip(void **state) {
  (void)state;
  const srt_mesh *m = srt_context_mesh(g_ctx);
  int dp = m->shape[SRT_MESH_DP], tp = m->shape[SRT_MESH_TP];
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  const int64_t s[3] = {4 * dp, 6, 4 * tp};
  float *full = malloc(sizeof(float) * (size_t)(s[0] * s[1] * s[2]));
  float *back = malloc(sizeof(float) * (size_t)(s[0] * s[1] * s[2]));
  for (int64_t i = 0, q = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      for (int64_t k = 0; k < s[2]; ++k)
        full[q++] = value(i, j, k);
  // -1 = Replicate, d >= 0 = Shard(d).
  for (int pd = -1; pd < 3; ++pd)
    for (int pt = -1; pt < 3; ++pt) {
      srt_placement p[2] = {pd < 0 ? srt_replicate() : srt_shard(pd),
                            pt < 0 ? srt_replicate() : srt_shard(pt)};
      int64_t gs[3] = {s[0], s[1], s[2]};
      if (pd == 1 || pt == 1) // dim 1 (6) must split by dp and/or tp
        gs[1] = 6 * (pd == 1 ? dp : 1) * (pt == 1 ? tp : 1);
      float *g = full;
      if (gs[1] != s[1]) { // rebuild the full tensor for this shape
        g = malloc(sizeof(float) * (size_t)(gs[0] * gs[1] * gs[2]));
        for (int64_t i = 0, q = 0; i < gs[0]; ++i)
          for (int64_t j = 0; j < gs[1]; ++j)
            for (int64_t k = 0; k < gs[2]; ++k)
              g[q++] = value(i, j, k);
      }
      srt_tensor t;
      ASSERT_OK(srt_tensor_init(&t, "x", SRT_F32, 3, gs, p, m));
      ASSERT_OK(srt_tensor_alloc(&t));
      ASSERT_OK(srt_to_local(m, c, g, &t));
      // Expected box, by hand: tp splits first, dp within tp's chunk (FSDP
      // over TP).
      int64_t lo[3] = {0, 0, 0}, len[3] = {gs[0], gs[1], gs[2]};
      if (pt >= 0) {
        len[pt] /= tp;
        lo[pt] += c[SRT_MESH_TP] * len[pt];
      }
      if (pd >= 0) {
        len[pd] /= dp;
        lo[pd] += c[SRT_MESH_DP] * len[pd];
      }
      const float *x = t.data;
      int64_t q = 0;
      for (int64_t i = 0; i < len[0]; ++i)
        for (int64_t j = 0; j < len[1]; ++j)
          for (int64_t k = 0; k < len[2]; ++k, ++q)
            if (x[q] != value(lo[0] + i, lo[1] + j, lo[2] + k))
              fail_msg("to_local dp=%d tp=%d: local %lld is %g, expected %g", pd,
                       pt, (long long)q, x[q],
                       value(lo[0] + i, lo[1] + j, lo[2] + k));
      assert_int_equal(q, srt_tensor_local_numel(&t));
      int64_t n = gs[0] * gs[1] * gs[2];
      float *b = g == full ? back : malloc(sizeof(float) * (size_t)n);
      memset(b, 0, sizeof(float) * (size_t)n);
      ASSERT_OK(srt_full_tensor(g_ctx, &t, b));
      if (memcmp(b, g, sizeof(float) * (size_t)n) != 0)
        fail_msg("full_tensor(to_local(x)) != x for placements dp=%d tp=%d", pd, pt);
      if (g != full) {
        free(g);
        free(b);
      }
      srt_tensor_release(&t);
    }
  free(full);
  free(back);
}

static void test_partial(void **state) {
  (void)state;
  const srt_mesh *m = srt_context_mesh(g_ctx);
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  // Shard(1) on dp, Partial on tp: tp rank k holds (k + 1) * x.
  const int64_t s[2] = {3, 2 * m->shape[SRT_MESH_DP]};
  srt_tensor t;
  ASSERT_OK(srt_tensor_init(&t, "p", SRT_F32, 2, s,
                            (srt_placement[]){srt_shard(1), srt_partial()}, m));
  ASSERT_OK(srt_tensor_alloc(&t));
  float *x = t.data;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      x[i * 2 + j] = (float)(c[SRT_MESH_TP] + 1) * value(0, i, 2 * c[SRT_MESH_DP] + j);
  float full[3 * 8];
  ASSERT_OK(srt_full_tensor(g_ctx, &t, full));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      assert_true(full[i * s[1] + j] == 3.0f * value(0, i, j)); // 1 + 2
  ASSERT_ERROR(srt_to_local(m, c, full, &t), SRT_INVALID_ARGUMENT,
               "tensor 'p' is Partial on mesh axis tp");
  srt_tensor_release(&t);
}

// A Shard(0) on tp part by part (a Mamba2 in_proj): rank r holds its
// slice of each part, in part order; full_tensor puts every part back.
// With a dp Shard(0) too (FSDP), dp rank d holds rows [d L/dp, (d+1) L/dp)
// of that tp shard (L rows), which may cut a part's slice; with a dp
// Shard(1), columns [d C/dp, (d+1) C/dp) of it.
static void check_parts(const srt_placement p[2]) {
  const srt_mesh *m = srt_context_mesh(g_ctx);
  int tp = m->shape[SRT_MESH_TP], dp = m->shape[SRT_MESH_DP];
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  const int64_t parts[3] = {3 * tp, 4 * tp, 5 * tp}, rows = 12 * tp, cols = 6;
  float *full = malloc(sizeof(float) * (size_t)(rows * cols));
  float *back = calloc((size_t)(rows * cols), sizeof(float));
  for (int64_t i = 0; i < rows * cols; ++i)
    full[i] = value(i / cols, i % cols, 0);
  srt_tensor t;
  ASSERT_OK(srt_tensor_init(&t, "in_proj", SRT_F32, 2, (int64_t[]){rows, cols}, p, m));
  t.num_tp_blocks = 3;
  memcpy(t.tp_blocks, parts, sizeof parts);
  ASSERT_OK(srt_tensor_alloc(&t));
  ASSERT_OK(srt_to_local(m, c, full, &t));
  // By hand: the tp shard's rows are part 0's rows [3r, 3r + 3), then part
  // 1's [3tp + 4r, ...), then part 2's [7tp + 5r, ...); at dp 2 the halves
  // cut part 1.
  int64_t shard_rows[12], q = 0, start = 0;
  for (int b = 0; b < 3; ++b) {
    int64_t n = parts[b] / tp;
    for (int64_t i = 0; i < n; ++i)
      shard_rows[q++] = start + c[SRT_MESH_TP] * n + i;
    start += parts[b];
  }
  bool fsdp = p[SRT_MESH_DP].kind == SRT_SHARD && p[SRT_MESH_DP].dim == 0;
  bool split_cols = p[SRT_MESH_DP].kind == SRT_SHARD && p[SRT_MESH_DP].dim == 1;
  int64_t local = fsdp ? 12 / dp : 12, first = fsdp ? c[SRT_MESH_DP] * local : 0;
  int64_t width = split_cols ? cols / dp : cols, col0 = split_cols ? c[SRT_MESH_DP] * width : 0;
  assert_int_equal(t.local_shape[0], local);
  assert_int_equal(t.local_shape[1], width);
  const float *x = t.data;
  for (int64_t i = 0; i < local; ++i)
    for (int64_t j = 0; j < width; ++j)
      if (x[i * width + j] != value(shard_rows[first + i], col0 + j, 0))
        fail_msg("local row %lld is %g, expected full row %lld", (long long)i,
                 x[i * width + j], (long long)shard_rows[first + i]);
  ASSERT_OK(srt_full_tensor(g_ctx, &t, back));
  assert_memory_equal(back, full, sizeof(float) * (size_t)(rows * cols));
  // Parts that do not sum to dim 0 are refused.
  t.tp_blocks[2] -= tp;
  srt_status s = srt_to_local(m, c, full, &t);
  assert_non_null(s);
  assert_non_null(strstr(srt_status_message(s), "parts summing to dim 0"));
  srt_status_free(s);
  srt_tensor_release(&t);
  free(full);
  free(back);
}

static void test_parts(void **state) {
  (void)state;
  check_parts((srt_placement[]){srt_replicate(), srt_shard(0)});
  check_parts((srt_placement[]){srt_shard(0), srt_shard(0)});
  check_parts((srt_placement[]){srt_shard(1), srt_shard(0)});
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_partial),
      cmocka_unit_test(test_parts),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  MPI_Finalize();
  return failed;
}
