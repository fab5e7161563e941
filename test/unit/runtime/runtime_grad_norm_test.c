// MPI tests of srt_get_grad_norm and srt_clip_grad_by_total_norm on a
// dp x 2 mesh (-np 2: dp=1, -np 4: dp=2): p = 1, 2, 3 and inf on 65,536
// log-uniform values against a float64 computation over all values; a mix
// of tp-sharded and tp-replicated gradients whose norm must equal the
// unsharded model's (and the reference's counting, which would not);
// clipping on both sides of coef = 1; inf and NaN reported, nothing scaled.
#include "runtime_test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "shardrt/context.h"
#include "shardrt/grad_norm.h"
#include "shardrt/tensor.h"

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

static srt_group *dpcp(void) { return srt_context_group(g_ctx, SRT_GROUP_DP_CP); }
static srt_group *tpg(void) { return srt_context_group(g_ctx, SRT_GROUP_TP); }

// Element `idx` of the global gradient `id`: magnitude 10^u, u uniform in
// [-2, 2] (so 1e-2 .. 1e2, log-uniform), random sign; every rank can
// compute any element, so each builds its own shard independently.
static float global_grad(uint64_t id, int64_t idx) {
  uint64_t s = (id << 40) ^ (uint64_t)idx;
  test_rng_next(&s);
  double u = -2.0 + 4.0 * test_rng_uniform(&s);
  double sign = (test_rng_next(&s) & 1) ? -1.0 : 1.0;
  return (float)(sign * pow(10.0, u));
}

// A gradient of global shape `shape` with `placements`, its local shard
// filled from global_grad(id, .) at this rank's offset.
static srt_tensor make_grad(const char *name, uint64_t id, int ndim,
                            const int64_t *shape, srt_placement dp,
                            srt_placement tp) {
  srt_tensor t;
  srt_placement p[SRT_MESH_NDIMS] = {dp, tp};
  const srt_mesh *m = srt_context_mesh(g_ctx);
  ASSERT_OK(srt_tensor_init(&t, name, SRT_F32, ndim, shape, p, m));
  ASSERT_OK(srt_tensor_alloc(&t));
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  int64_t off[SRT_MAX_RANK];
  ASSERT_OK(srt_local_offset(name, ndim, shape, p, m, c, off));
  float *x = t.data;
  int64_t n = srt_tensor_local_numel(&t);
  for (int64_t q = 0; q < n; ++q) {
    // local multi-index of q, shifted to global, flattened globally
    int64_t rest = q, flat = 0, stride = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t li = rest % t.local_shape[d];
      rest /= t.local_shape[d];
      flat += (li + off[d]) * stride;
      stride *= shape[d];
    }
    x[q] = global_grad(id, flat);
  }
  return t;
}

// Compensated (Neumaier) float64 sum of |g|^p over every element of the
// global gradient `id` with `n` elements; max |g| for p = inf.
typedef struct ref_sum {
  double s, c;
} ref_sum;

static void ref_add(ref_sum *r, uint64_t id, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i) {
    double a = fabs((double)global_grad(id, i));
    if (isinf(p)) {
      r->s = a > r->s ? a : r->s;
      continue;
    }
    double v = p == 1 ? a : p == 2 ? a * a : pow(a, p);
    double t = r->s + v;
    r->c += fabs(r->s) >= fabs(v) ? (r->s - t) + v : (v - t) + r->s;
    r->s = t;
  }
}

static double ref_norm(ref_sum r, double p) {
  return isinf(p) ? r.s : pow(r.s + r.c, 1.0 / p);
}

static void check_rel(double got, double want, double tol, const char *what, double p) {
  double rel = fabs(got - want) / want;
  if (!(rel <= tol))
    fail_msg("%s p=%g: got %.17g, float64 reference %.17g, relative error %.3g > %.3g",
             what, p, got, want, rel, tol);
}

// Tolerances. Every term |g|^p is rounded once to the accumulation dtype
// (u = 2^-24 for F32, 2^-53 for F64; p=1 exact, p=2 one product, p=3 pow
// in double then rounded). The library sums pairwise: leaves of <= 512
// values in 8 lanes (<= 64 + 8 roundings on any path), log2(65536/512) = 7
// levels above, then <= 3 additions across gradients and the two
// all-reduces: at most ~85 roundings on the path of any term, so the sum's
// relative error is <= 85u = 5.1e-6 (F32) or 9.4e-15 (F64), and the norm's
// is 1/p of that. The float64 reference is compensated (~2 ulp). Hence:
#define TOL_F32 1e-5  // bound 5.1e-6 (a naive F32 loop could reach n*u = 4e-3)
#define TOL_F64 1e-13 // bound 9.4e-15 plus the reference's ~4.4e-16
// p = inf is a max of the same float values: exact, tolerance 0.

static void test_norm_65536_values(void **state) {
  (void)state;
  const int64_t N = 65536;
  const double ps[] = {1.0, 2.0, 3.0, INFINITY};
  // Layout A: split over every rank (Shard(0) on dp and on tp).
  // Layout B: dp replicas hold the same reduced gradient (Replicate on dp),
  // tp shards it: the dp copies must not inflate the norm.
  srt_tensor a = make_grad("a", 1, 1, &N, srt_shard(0), srt_shard(0));
  srt_tensor b = make_grad("b", 1, 1, &N, srt_replicate(), srt_shard(0));
  int world = srt_group_size(srt_context_group(g_ctx, SRT_GROUP_WORLD));
  assert_int_equal(srt_tensor_local_numel(&a), N / world);
  for (size_t k = 0; k < sizeof ps / sizeof *ps; ++k) {
    double p = ps[k];
    ref_sum r = {0, 0};
    ref_add(&r, 1, N, p);
    double want = ref_norm(r, p);
    for (int acc = 0; acc < 2; ++acc) {
      srt_grad_norm_options o = srt_grad_norm_default_options();
      o.norm_type = p;
      o.accum_dtype = acc ? SRT_F64 : SRT_F32;
      double tol = isinf(p) ? 0.0 : acc ? TOL_F64 : TOL_F32;
      double got;
      ASSERT_OK(srt_get_grad_norm(&a, 1, dpcp(), tpg(), &o, &got));
      check_rel(got, want, tol, acc ? "sharded, F64" : "sharded, F32", p);
      ASSERT_OK(srt_get_grad_norm(&b, 1, dpcp(), tpg(), &o, &got));
      check_rel(got, want, tol, acc ? "dp-replicated, F64" : "dp-replicated, F32", p);
    }
  }
  srt_tensor_release(&a);
  srt_tensor_release(&b);
}

static void test_tp_mixed_sharded_and_replicated(void **state) {
  (void)state;
  // A tiny model: two tp-sharded weights (rows, columns) and two weights
  // the plan leaves Replicate on tp (a norm weight, a bias). All are
  // Replicate on dp (already averaged over dp).
  const int64_t s_q[2] = {8, 6}, s_o[2] = {4, 10}, s_norm = 6, s_bias = 10;
  srt_tensor g[4] = {
      make_grad("q_proj.weight", 11, 2, s_q, srt_replicate(), srt_shard(0)),
      make_grad("o_proj.weight", 12, 2, s_o, srt_replicate(), srt_shard(1)),
      make_grad("input_layernorm.weight", 13, 1, &s_norm, srt_replicate(),
                srt_replicate()),
      make_grad("o_proj.bias", 14, 1, &s_bias, srt_replicate(), srt_replicate()),
  };
  int dp = srt_context_mesh(g_ctx)->shape[SRT_MESH_DP];
  int tp = srt_context_mesh(g_ctx)->shape[SRT_MESH_TP];
  const double ps[] = {1.0, 2.0, 3.0, INFINITY};
  for (size_t k = 0; k < sizeof ps / sizeof *ps; ++k) {
    double p = ps[k];
    ref_sum sharded = {0, 0}, replicated = {0, 0};
    ref_add(&sharded, 11, 48, p);
    ref_add(&sharded, 12, 40, p);
    ref_add(&replicated, 13, 6, p);
    ref_add(&replicated, 14, 10, p);
    // The unsharded model's norm: every element once.
    ref_sum all = sharded;
    ref_add(&all, 13, 6, p);
    ref_add(&all, 14, 10, p);
    double want = ref_norm(all, p);

    srt_grad_norm_options o = srt_grad_norm_default_options();
    o.norm_type = p;
    o.accum_dtype = SRT_F64;
    double got;
    ASSERT_OK(srt_get_grad_norm(g, 4, dpcp(), tpg(), &o, &got));
    check_rel(got, want, isinf(p) ? 0.0 : TOL_F64, "mixed tp", p);

    // The reference's counting: every rank adds all its local elements, so
    // replicated gradients count tp times and everything dp times. Our
    // test above would fail on it: it differs from the unsharded norm by
    // far more than the tolerance (for finite p).
    o.reference_counting = 1;
    double inflated;
    ASSERT_OK(srt_get_grad_norm(g, 4, dpcp(), tpg(), &o, &inflated));
    if (isinf(p)) {
      assert_true(inflated == want); // a max cannot be inflated by copies
      continue;
    }
    double ref_style = pow(dp * ((sharded.s + sharded.c) +
                                 tp * (replicated.s + replicated.c)),
                           1.0 / p);
    check_rel(inflated, ref_style, TOL_F64, "reference counting", p);
    double rel = fabs(inflated - want) / want;
    if (!(rel > 1e3 * TOL_F64))
      fail_msg("p=%g: reference counting %.17g should differ from %.17g", p,
               inflated, want);
  }
  for (int i = 0; i < 4; ++i)
    srt_tensor_release(&g[i]);
}

static void test_partial_refused_and_bad_options(void **state) {
  (void)state;
  const int64_t n = 4;
  srt_tensor t = make_grad("lm_head.weight", 3, 1, &n, srt_replicate(), srt_replicate());
  t.placements[SRT_MESH_TP] = srt_partial();
  double got;
  ASSERT_ERROR(srt_get_grad_norm(&t, 1, dpcp(), tpg(), NULL, &got),
               SRT_INVALID_ARGUMENT,
               "'lm_head.weight' is Partial on mesh axis tp; reduce it");
  t.placements[SRT_MESH_TP] = srt_replicate();
  srt_grad_norm_options o = srt_grad_norm_default_options();
  o.norm_type = 0;
  ASSERT_ERROR(srt_get_grad_norm(&t, 1, dpcp(), tpg(), &o, &got),
               SRT_INVALID_ARGUMENT, "norm_type must be > 0");
  o.norm_type = NAN;
  ASSERT_ERROR(srt_get_grad_norm(&t, 1, dpcp(), tpg(), &o, &got),
               SRT_INVALID_ARGUMENT, "norm_type must be > 0");
  o.norm_type = 2;
  o.accum_dtype = SRT_BF16;
  ASSERT_ERROR(srt_get_grad_norm(&t, 1, dpcp(), tpg(), &o, &got),
               SRT_INVALID_ARGUMENT, "accumulation dtype must be F32 or F64");
  srt_clip_action act;
  ASSERT_ERROR(srt_clip_grad_by_total_norm(&t, 1, 0.0, 1.0, &act, NULL),
               SRT_INVALID_ARGUMENT, "max_norm must be finite and > 0");
  srt_tensor_release(&t);
}

// Copies the local data of `g[0..n)` into one malloc'ed array.
static float *snapshot(const srt_tensor *g, int n, int64_t *count) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i)
    total += srt_tensor_local_numel(&g[i]);
  float *s = malloc(sizeof(float) * (size_t)(total ? total : 1)), *w = s;
  for (int i = 0; i < n; ++i) {
    int64_t k = srt_tensor_local_numel(&g[i]);
    memcpy(w, g[i].data, sizeof(float) * (size_t)k);
    w += k;
  }
  *count = total;
  return s;
}

static void test_clip_only_below_one(void **state) {
  (void)state;
  const int64_t s_w[2] = {6, 4}, s_b = 5;
  srt_tensor g[2] = {
      make_grad("w", 21, 2, s_w, srt_replicate(), srt_shard(1)),
      make_grad("b", 22, 1, &s_b, srt_replicate(), srt_replicate()),
  };
  double total;
  ASSERT_OK(srt_get_grad_norm(g, 2, dpcp(), tpg(), NULL, &total));
  int64_t n;
  float *before = snapshot(g, 2, &n);
  srt_clip_action act;
  double coef;

  // coef >= 1: max_norm above the norm, and exactly at coef == 1.
  const double not_clipping[] = {2.0 * total, total + 1e-6};
  for (int k = 0; k < 2; ++k) {
    ASSERT_OK(srt_clip_grad_by_total_norm(g, 2, not_clipping[k], total, &act, &coef));
    assert_int_equal(act, SRT_CLIP_NOT_NEEDED);
    assert_true(coef >= 1.0);
    int64_t m;
    float *after = snapshot(g, 2, &m);
    assert_memory_equal(after, before, sizeof(float) * (size_t)n);
    free(after);
  }

  // coef < 1: max_norm = total (coef = total / (total + 1e-6), just below
  // one, scaled like the reference), then a real clip to 0.3 of it.
  const double clipping[] = {total, 0.3 * total};
  for (int k = 0; k < 2; ++k) {
    float *prev = snapshot(g, 2, &n);
    ASSERT_OK(srt_clip_grad_by_total_norm(g, 2, clipping[k], total, &act, &coef));
    assert_int_equal(act, SRT_CLIP_SCALED);
    double want_coef = clipping[k] / (total + 1e-6);
    assert_true(coef == want_coef && coef < 1.0);
    int64_t m;
    float *after = snapshot(g, 2, &m);
    for (int64_t i = 0; i < n; ++i)
      assert_true(after[i] == prev[i] * (float)want_coef);
    free(after);
    free(prev);
    double new_total;
    ASSERT_OK(srt_get_grad_norm(g, 2, dpcp(), tpg(), NULL, &new_total));
    // The clipped norm is max_norm, up to total/(total + 1e-6) and F32
    // rounding of the scaling and the norm (<= TOL_F32 each).
    check_rel(new_total, clipping[k], 3 * TOL_F32, "norm after clipping", 2.0);
    total = new_total; // the next case clips the already clipped gradients
  }
  free(before);
  for (int i = 0; i < 2; ++i)
    srt_tensor_release(&g[i]);
}

static void test_non_finite_reported_nothing_scaled(void **state) {
  (void)state;
  int world = srt_group_size(srt_context_group(g_ctx, SRT_GROUP_WORLD));
  int rank = srt_context_rank(g_ctx);
  const float bad[2] = {INFINITY, NAN};
  for (int k = 0; k < 2; ++k) {
    const int64_t s = 64;
    srt_tensor g[2] = {
        make_grad("w", 31, 1, &s, srt_shard(0), srt_shard(0)),
        make_grad("n", 32, 1, &s, srt_replicate(), srt_replicate()),
    };
    if (rank == world - 1) // one element on one rank only
      ((float *)g[0].data)[3] = bad[k];
    const double ps[] = {2.0, 1.0, INFINITY};
    for (int j = 0; j < 3; ++j) {
      srt_grad_norm_options o = srt_grad_norm_default_options();
      o.norm_type = ps[j];
      double total;
      ASSERT_OK(srt_get_grad_norm(g, 2, dpcp(), tpg(), &o, &total));
      if (k == 0 && !isinf(total))
        fail_msg("inf gradient, p=%g: total %g, expected inf", ps[j], total);
      if (k == 1 && !isnan(total))
        fail_msg("NaN gradient, p=%g: total %g, expected NaN", ps[j], total);
      int64_t n;
      float *before = snapshot(g, 2, &n);
      srt_clip_action act;
      double coef;
      ASSERT_OK(srt_clip_grad_by_total_norm(g, 2, 1.0, total, &act, &coef));
      assert_int_equal(act, SRT_CLIP_SKIP_STEP);
      assert_true(isnan(coef));
      float *after = snapshot(g, 2, &n);
      assert_memory_equal(after, before, sizeof(float) * (size_t)n);
      free(before);
      free(after);
    }
    srt_tensor_release(&g[0]);
    srt_tensor_release(&g[1]);
  }
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_norm_65536_values),
      cmocka_unit_test(test_tp_mixed_sharded_and_replicated),
      cmocka_unit_test(test_partial_refused_and_bad_options),
      cmocka_unit_test(test_clip_only_below_one),
      cmocka_unit_test(test_non_finite_reported_nothing_scaled),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  MPI_Finalize();
  return failed;
}
