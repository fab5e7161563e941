// MPI tests of the collectives with every rank holding different,
// non-symmetric data: all-reduce (sum, max; F32, F64, I32, I64; BF16
// against a reference rounding),
// all-gather and reduce-scatter along dims 0, 1 and 2 (the last),
// all-to-all between every pair of dims, broadcast, the non-blocking forms
// (several in flight at once) and buckets (several tensors in one
// collective), on the world group and
// on the tp groups (which run side by side under -np 4). Expected values
// are built by plain index loops, independent of the library's packing;
// all values are small integers or halves, so float results are exact.
#include "runtime_test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/collectives.h"
#include "shardrt/context.h"
#include "shardrt/convert.h"

static srt_context *g_ctx;

static int setup(void **state) {
  (void)state;
  srt_context_options o = srt_context_default_options();
  o.tp = 2;
  srt_status s = srt_context_create(&o, &g_ctx);
  if (s) {
    char buf[512];
    fprintf(stderr, "%s\n", srt_status_format(s, buf, sizeof buf));
    srt_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  srt_status s = srt_context_destroy(g_ctx);
  srt_status_free(s);
  return s ? -1 : 0;
}

// The "global" tensor of shape s[3] seen by the group of this rank: a
// distinct integer per element, shifted by `tag` (different per tp group).
static float global_value(const int64_t *s, int64_t i, int64_t j, int64_t k, int tag) {
  (void)s;
  return (float)(i * 10000 + j * 100 + k) + 0.5f * (float)tag;
}

// Chunk `r` of `n` of the global tensor along `dim`, by index loops.
static void chunk_of(const int64_t *s, int dim, int n, int r, int tag, float *out) {
  int64_t lo[3] = {0, 0, 0}, hi[3] = {s[0], s[1], s[2]};
  lo[dim] = s[dim] / n * r;
  hi[dim] = s[dim] / n * (r + 1);
  int64_t p = 0;
  for (int64_t i = lo[0]; i < hi[0]; ++i)
    for (int64_t j = lo[1]; j < hi[1]; ++j)
      for (int64_t k = lo[2]; k < hi[2]; ++k)
        out[p++] = global_value(s, i, j, k, tag);
}

// Rank r's addend for element idx: uneven and not symmetric in r.
static float addend(int r, int64_t idx) {
  return (float)((idx * 7 + r * 13) % 17) + 0.25f * (float)(r * r) - (float)r;
}

static void run_gather_scatter(srt_group *g, int tag) {
  int n = srt_group_size(g), r = srt_group_rank(g);
  const int64_t s[3] = {2 * n, 3 * n, 2 * n};
  const int64_t total = s[0] * s[1] * s[2];
  float *full = malloc(sizeof(float) * (size_t)total);
  float *local = malloc(sizeof(float) * (size_t)total);
  float *got = malloc(sizeof(float) * (size_t)total);
  float *expect = malloc(sizeof(float) * (size_t)total);
  for (int dim = 0; dim < 3; ++dim) {
    // all-gather: chunks along dim -> the global tensor.
    chunk_of(s, dim, n, r, tag, local);
    int64_t ls[3] = {s[0], s[1], s[2]};
    ls[dim] /= n;
    for (int64_t i = 0; i < total; ++i)
      got[i] = -1.0f;
    ASSERT_OK(srt_all_gather(g, local, got, SRT_F32, 3, ls, dim));
    chunk_of(s, dim, 1, 0, tag, full);
    for (int64_t i = 0; i < total; ++i)
      if (got[i] != full[i])
        fail_msg("all_gather dim %d on %s: element %lld is %g, expected %g", dim,
                 srt_group_name(g), (long long)i, got[i], full[i]);

    // reduce-scatter SUM: every rank's input is the global tensor scaled
    // and shifted by its rank; this rank keeps chunk r of the sum.
    for (int64_t i = 0; i < total; ++i)
      local[i] = full[i] * (float)(r + 1) + addend(r, i);
    ASSERT_OK(srt_reduce_scatter(g, local, got, SRT_F32, 3, s, dim, SRT_REDUCE_SUM));
    float *sum = malloc(sizeof(float) * (size_t)total);
    for (int64_t i = 0; i < total; ++i) {
      double acc = 0;
      for (int q = 0; q < n; ++q)
        acc += (double)full[i] * (q + 1) + addend(q, i);
      sum[i] = (float)acc;
    }
    // Chunk r of `sum` along dim, by index.
    int64_t p = 0, lo = s[dim] / n * r, hi = s[dim] / n * (r + 1);
    for (int64_t i = 0; i < s[0]; ++i)
      for (int64_t j = 0; j < s[1]; ++j)
        for (int64_t k = 0; k < s[2]; ++k) {
          int64_t at = dim == 0 ? i : dim == 1 ? j : k;
          if (at >= lo && at < hi)
            expect[p++] = sum[(i * s[1] + j) * s[2] + k];
        }
    for (int64_t i = 0; i < p; ++i)
      if (got[i] != expect[i])
        fail_msg("reduce_scatter SUM dim %d on %s: element %lld is %g, expected %g",
                 dim, srt_group_name(g), (long long)i, got[i], expect[i]);

    // reduce-scatter MAX of rank-dependent addends.
    for (int64_t i = 0; i < total; ++i)
      local[i] = addend(r, i);
    ASSERT_OK(srt_reduce_scatter(g, local, got, SRT_F32, 3, s, dim, SRT_REDUCE_MAX));
    p = 0;
    for (int64_t i = 0; i < s[0]; ++i)
      for (int64_t j = 0; j < s[1]; ++j)
        for (int64_t k = 0; k < s[2]; ++k) {
          int64_t at = dim == 0 ? i : dim == 1 ? j : k;
          if (at < lo || at >= hi)
            continue;
          int64_t idx = (i * s[1] + j) * s[2] + k;
          float m = addend(0, idx);
          for (int q = 1; q < n; ++q)
            m = addend(q, idx) > m ? addend(q, idx) : m;
          if (got[p] != m)
            fail_msg("reduce_scatter MAX dim %d: element %lld is %g, expected %g",
                     dim, (long long)p, got[p], m);
          ++p;
        }
    free(sum);
  }
  free(full);
  free(local);
  free(got);
  free(expect);
}

static void test_gather_scatter_world(void **state) {
  (void)state;
  run_gather_scatter(srt_context_group(g_ctx, SRT_GROUP_WORLD), 0);
}

static void test_gather_scatter_tp(void **state) {
  (void)state;
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  // Each tp group gathers its own data (tag = dp index).
  run_gather_scatter(srt_context_group(g_ctx, SRT_GROUP_TP), c[SRT_MESH_DP]);
}

static void test_all_to_all(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  const int64_t s[3] = {2 * n, 3 * n, n};
  const int64_t total = s[0] * s[1] * s[2];
  float *in = malloc(sizeof(float) * (size_t)total);
  float *out = malloc(sizeof(float) * (size_t)total);
  float *expect = malloc(sizeof(float) * (size_t)total);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      // Shard(a) -> Shard(b): in = chunk r along a; out = chunk r along b.
      chunk_of(s, a, n, r, 0, in);
      int64_t ls[3] = {s[0], s[1], s[2]};
      ls[a] /= n;
      for (int64_t i = 0; i < total / n; ++i)
        out[i] = -1.0f;
      ASSERT_OK(srt_all_to_all(g, in, out, SRT_F32, 3, ls, a, b));
      chunk_of(s, b, n, r, 0, expect);
      for (int64_t i = 0; i < total / n; ++i)
        if (out[i] != expect[i])
          fail_msg("all_to_all Shard(%d)->Shard(%d): element %lld is %g, expected %g",
                   a, b, (long long)i, out[i], expect[i]);
    }
  // to_dim not divisible by the group size: refused before any traffic.
  int64_t odd[3] = {2, 3, 1};
  ASSERT_ERROR(srt_all_to_all(g, in, out, SRT_F32, 3, odd, 0, 2),
               SRT_INVALID_ARGUMENT, "to_dim size not divisible");
  free(in);
  free(out);
  free(expect);
}

static void test_all_reduce(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  enum { N = 37 };
  float f[N];
  double d[N];
  int32_t i32[N];
  int64_t i64[N];
  for (int i = 0; i < N; ++i) {
    f[i] = addend(r, i);
    d[i] = addend(r, i) * 1e-3;
    i32[i] = (int32_t)((i * 5 + r * 11) % 23) - r;
    i64[i] = ((int64_t)i << 33) * (r + 1) + r;
  }
  ASSERT_OK(srt_all_reduce(g, f, N, SRT_F32, SRT_REDUCE_SUM));
  ASSERT_OK(srt_all_reduce(g, d, N, SRT_F64, SRT_REDUCE_MAX));
  ASSERT_OK(srt_all_reduce(g, i32, N, SRT_I32, SRT_REDUCE_MAX));
  ASSERT_OK(srt_all_reduce(g, i64, N, SRT_I64, SRT_REDUCE_SUM));
  for (int i = 0; i < N; ++i) {
    double sum = 0, max = -1e300;
    int32_t m32 = INT32_MIN;
    int64_t s64 = 0;
    for (int q = 0; q < n; ++q) {
      sum += addend(q, i);
      max = addend(q, i) * 1e-3 > max ? addend(q, i) * 1e-3 : max;
      int32_t v = (int32_t)((i * 5 + q * 11) % 23) - q;
      m32 = v > m32 ? v : m32;
      s64 += ((int64_t)i << 33) * (q + 1) + q;
    }
    assert_true(f[i] == (float)sum);
    assert_true(d[i] == max);
    assert_int_equal(i32[i], m32);
    assert_true(i64[i] == s64);
  }
  // The srt_allreduce_f32_fn adapter, on the tp group.
  srt_allreduce_f32_fn fn = srt_allreduce_f32;
  float x[3] = {(float)r, 1.0f, -(float)r};
  ASSERT_OK(fn(srt_context_group(g_ctx, SRT_GROUP_TP), x, 3, SRT_REDUCE_SUM));
  int base = r / 2 * 2; // tp partners: base, base + 1
  assert_true(x[0] == (float)(2 * base + 1));
  assert_true(x[1] == 2.0f);
  assert_true(x[2] == -(float)(2 * base + 1));
  uint16_t h[2] = {0};
  // The group's context, once, after the message (srt_group_annotate).
  char want[256];
  snprintf(want, sizeof want,
           "all_reduce: dtype F16 is not supported for reductions (F32, F64, I32, I64, BF16 "
           "are) (on group 'world', rank %d of %d, world rank %d)",
           r, n, r);
  srt_status s = srt_all_reduce(g, h, 2, SRT_F16, SRT_REDUCE_SUM);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  assert_string_equal(srt_status_message(s), want);
  assert_int_equal(srt_status_rank(s), r);
  srt_status_free(s);
}

// bf16 bits of a double with at most 8 significant bits in bf16's normal
// range, rounded to 8 bits first (nearest, ties to even: rint in the
// default rounding mode): the reference rounding, by frexp rather than by
// the library's bit trick.
static uint16_t ref_bf16(double x) {
  int e;
  double m = frexp(x, &e); // |m| in [0.5, 1)
  float f = (float)ldexp(rint(m * 256.0) / 256.0, e);
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

// Rank q's bf16 addend for element i: 8 significant bits, exponents -4..4,
// both signs; elements 0 and 1 put a bf16 tie on ranks 0 and 1 (1 + 2^-8
// rounds down to 1, 1 + 3 x 2^-8 up to 1 + 2^-6: ties to even), the
// other ranks adding 0.
static double bf16_addend(int q, int i) {
  static const double ties[2][2] = {{1.0, 0x1.02p0}, {0x1p-8, 0x1p-8}};
  if (i < 2)
    return q < 2 ? ties[q][i] : 0.0;
  double m = 1.0 + (double)((i * 37 + q * 11) % 128) / 128.0;
  return ldexp((i + q) % 3 ? m : -m, (i + 3 * q) % 9 - 4);
}

// bf16 reductions (the context's user ops): a sum adds in fp32 and rounds
// each partial sum to bf16, so over 2 ranks it is the bf16 nearest the
// exact sum (ties included), and over n ranks within (n - 1) u sum |x_q|
// of it, u = 2^-8 (one rounding per partial sum, each at most u of the
// partial's magnitude, itself at most sum |x_q|); every rank gets the same
// bits; a max compares values (-1 beats -2, whose bits are larger as
// integers); the non-blocking sum and a bf16 gather bucket give the
// blocking forms' bits.
static void test_all_reduce_bf16(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  enum { N = 41 };
  uint16_t sum[N], late[N], max[2] = {ref_bf16(-1.0 - r), ref_bf16(0.5 * r)};
  for (int i = 0; i < N; ++i)
    sum[i] = late[i] = ref_bf16(bf16_addend(r, i));
  ASSERT_OK(srt_all_reduce(g, sum, N, SRT_BF16, SRT_REDUCE_SUM));
  ASSERT_OK(srt_all_reduce_start(g, late, N, SRT_BF16, SRT_REDUCE_SUM, 2));
  ASSERT_OK(srt_all_reduce(g, max, 2, SRT_BF16, SRT_REDUCE_MAX));
  ASSERT_OK(srt_collective_wait(g_ctx, 2));
  assert_memory_equal(late, sum, sizeof sum);
  assert_int_equal(max[0], 0xbf80); // -1
  assert_true(srt_bf16_to_f32(max[1]) == 0.5 * (n - 1));
  assert_int_equal(sum[0], 0x3f80);                  // 1 + 2^-8: a tie, to even
  assert_int_equal(sum[1], ref_bf16(0x1.04p0));      // 1 + 3 x 2^-8: up to 1 + 2^-6
  for (int i = 0; i < N; ++i) {
    double exact = 0, mass = 0;
    for (int q = 0; q < n; ++q) {
      exact += bf16_addend(q, i);
      mass += fabs(bf16_addend(q, i));
    }
    if (n == 2)
      assert_int_equal(sum[i], exact == 0 ? 0 : ref_bf16(exact));
    else
      assert_true(fabs(srt_bf16_to_f32(sum[i]) - exact) <= (n - 1) * 0x1p-8 * mass);
  }
  // Every rank the same bits: rank 0's, bucket-gathered as bf16.
  uint16_t all[4 * N];
  srt_bucket_member m = {sum, all, N};
  ASSERT_OK(srt_bucket_start(g, SRT_BUCKET_ALL_GATHER, &m, 1, SRT_BF16, 3));
  ASSERT_OK(srt_bucket_wait(g_ctx, &m, 1, 3));
  for (int q = 0; q < n; ++q)
    assert_memory_equal(all + q * N, sum, sizeof sum);
}

// The non-blocking forms: four collectives in flight at once (a dim-0
// gather, a dim-1 gather, which packs and so completes at its start, a
// reduce-scatter and an all-reduce), waited for out of order, give the
// blocking forms' bytes; slots out of range or still in flight are refused
// before anything is sent; waiting on a free slot returns at once.
static void test_non_blocking(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  enum { N = 24 };
  const int64_t local[2] = {2, 3}, full[2] = {2 * n, 3};
  float in[N], row_in[N], red_in[N * 4], sum[N];
  float got0[N * 4], want0[N * 4], got1[N * 4], want1[N * 4], rs[N], want_rs[N];
  for (int i = 0; i < N; ++i) {
    in[i] = addend(r, i);
    row_in[i] = addend(r, i + 100);
    sum[i] = addend(r, i + 200);
  }
  for (int i = 0; i < 6 * n; ++i)
    red_in[i] = addend(r, i + 300);
  ASSERT_OK(srt_all_gather(g, in, want0, SRT_F32, 2, local, 0));
  ASSERT_OK(srt_all_gather(g, row_in, want1, SRT_F32, 2, local, 1));
  ASSERT_OK(srt_reduce_scatter(g, red_in, want_rs, SRT_F32, 2, full, 0, SRT_REDUCE_SUM));
  float want_sum[N];
  memcpy(want_sum, sum, sizeof sum);
  ASSERT_OK(srt_all_reduce(g, want_sum, N, SRT_F32, SRT_REDUCE_SUM));

  ASSERT_OK(srt_all_gather_start(g, in, got0, SRT_F32, 2, local, 0, 0));
  ASSERT_OK(srt_all_gather_start(g, row_in, got1, SRT_F32, 2, local, 1, 5));
  ASSERT_OK(srt_reduce_scatter_start(g, red_in, rs, SRT_F32, 2, full, 0, SRT_REDUCE_SUM, 1));
  ASSERT_OK(srt_all_reduce_start(g, sum, N, SRT_F32, SRT_REDUCE_SUM, SRT_MAX_PENDING - 1));
  ASSERT_ERROR(srt_all_reduce_start(g, sum, N, SRT_F32, SRT_REDUCE_SUM, 1),
               SRT_INVALID_ARGUMENT, "slot still in flight");
  ASSERT_ERROR(srt_all_gather_start(g, in, got0, SRT_F32, 2, local, 0, SRT_MAX_PENDING),
               SRT_INVALID_ARGUMENT, "slot outside [0, SRT_MAX_PENDING)");
  ASSERT_ERROR(srt_collective_wait(g_ctx, -1), SRT_INVALID_ARGUMENT, "slot -1 outside");
  ASSERT_OK(srt_collective_wait(g_ctx, SRT_MAX_PENDING - 1));
  ASSERT_OK(srt_collective_wait(g_ctx, 1));
  ASSERT_OK(srt_collective_wait(g_ctx, 5)); // completed at its start: free
  ASSERT_OK(srt_collective_wait(g_ctx, 0));
  ASSERT_OK(srt_collective_wait(g_ctx, 0)); // free again
  assert_memory_equal(got0, want0, sizeof(float) * (size_t)(6 * n));
  assert_memory_equal(got1, want1, sizeof(float) * (size_t)(6 * n));
  assert_memory_equal(rs, want_rs, sizeof(float) * 6);
  assert_memory_equal(sum, want_sum, sizeof sum);
}

// Buckets: three members of different sizes moved as one collective of
// each kind give, member by member, the bytes of their own blocking
// collectives; a reduce-scatter and an all-reduce bucket in flight at once
// with a gather; an all-reduce bucket in place (in == out).
static void test_buckets(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  enum { K = 3, MAX = 4 * 7 };
  const int64_t count[K] = {5, 1, 7};
  float in[K][MAX], gathered[K][MAX], want_g[K][MAX], scattered[K][MAX], want_s[K][MAX];
  float summed[K][MAX], want_r[K][MAX];
  srt_bucket_member ag[K], rs[K], ar[K];
  for (int j = 0; j < K; ++j) {
    for (int i = 0; i < MAX; ++i)
      in[j][i] = summed[j][i] = want_r[j][i] = addend(r, 100 * j + i);
    const int64_t local[1] = {count[j]}, full[1] = {count[j] * n};
    ASSERT_OK(srt_all_gather(g, in[j], want_g[j], SRT_F32, 1, local, 0));
    ASSERT_OK(srt_reduce_scatter(g, in[j], want_s[j], SRT_F32, 1, full, 0, SRT_REDUCE_SUM));
    ASSERT_OK(srt_all_reduce(g, want_r[j], count[j], SRT_F32, SRT_REDUCE_SUM));
    ag[j] = (srt_bucket_member){in[j], gathered[j], count[j]};
    rs[j] = (srt_bucket_member){in[j], scattered[j], count[j]};
    ar[j] = (srt_bucket_member){summed[j], summed[j], count[j]};
  }
  ASSERT_OK(srt_bucket_start(g, SRT_BUCKET_ALL_GATHER, ag, K, SRT_F32, 2));
  ASSERT_OK(srt_bucket_start(g, SRT_BUCKET_REDUCE_SCATTER, rs, K, SRT_F32, 3));
  ASSERT_OK(srt_bucket_start(g, SRT_BUCKET_ALL_REDUCE, ar, K, SRT_F32, 4));
  ASSERT_ERROR(srt_bucket_start(g, SRT_BUCKET_ALL_REDUCE, ar, 0, SRT_F32, 6),
               SRT_INVALID_ARGUMENT, "member count");
  ASSERT_OK(srt_bucket_wait(g_ctx, rs, K, 3));
  ASSERT_OK(srt_bucket_wait(g_ctx, ar, K, 4));
  ASSERT_OK(srt_bucket_wait(g_ctx, ag, K, 2));
  for (int j = 0; j < K; ++j) {
    assert_memory_equal(gathered[j], want_g[j], sizeof(float) * (size_t)(count[j] * n));
    assert_memory_equal(scattered[j], want_s[j], sizeof(float) * (size_t)count[j]);
    assert_memory_equal(summed[j], want_r[j], sizeof(float) * (size_t)count[j]);
  }
}

static void test_broadcast(void **state) {
  (void)state;
  srt_group *g = srt_context_group(g_ctx, SRT_GROUP_WORLD);
  int n = srt_group_size(g), r = srt_group_rank(g);
  int root = n - 1;
  float f[5];
  uint16_t b[4];
  for (int i = 0; i < 5; ++i)
    f[i] = addend(r, i);
  for (int i = 0; i < 4; ++i)
    b[i] = (uint16_t)(0x3f80 + r * 16 + i); // bf16 bit patterns
  ASSERT_OK(srt_broadcast(g, f, 5, SRT_F32, root));
  ASSERT_OK(srt_broadcast(g, b, 4, SRT_BF16, root));
  for (int i = 0; i < 5; ++i)
    assert_true(f[i] == addend(root, i));
  for (int i = 0; i < 4; ++i)
    assert_int_equal(b[i], 0x3f80 + root * 16 + i);
  ASSERT_ERROR(srt_broadcast(g, f, 5, SRT_F32, n), SRT_INVALID_ARGUMENT,
               "root outside the group");
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_scatter_world),
      cmocka_unit_test(test_gather_scatter_tp),
      cmocka_unit_test(test_all_to_all),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_all_reduce_bf16),
      cmocka_unit_test(test_broadcast),
      cmocka_unit_test(test_non_blocking),
      cmocka_unit_test(test_buckets),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  MPI_Finalize();
  return failed;
}
