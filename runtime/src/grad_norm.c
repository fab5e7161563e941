// Global gradient p-norm (local shards, replicated gradients counted once,
// all-reduce over dp_cp then tp) and clipping by it.
#include "shardrt/grad_norm.h"

#include <math.h>
#include <stdio.h>

#include "../cpu/vmath.h"
#include "context_internal.h"
#include "shardrt/collectives.h"

typedef enum pkind { P_ONE, P_TWO, P_GENERAL, P_INF } pkind;

// Leaves of the pairwise sums: LEAF elements in 16 independent lanes (one
// AVX-512 register of fp32), which also lets the compiler vectorise.
enum { LEAF = 1024, LANES = 16 };

#define SUM_LEAF(ACC, x, n, term)                                              \
  do {                                                                         \
    ACC lane[LANES] = {0};                                                     \
    int64_t i = 0;                                                             \
    for (; i + LANES <= (n); i += LANES)                                       \
      for (int j = 0; j < LANES; ++j) {                                        \
        ACC v = (ACC)(x)[i + j];                                               \
        lane[j] += (term);                                                     \
      }                                                                        \
    ACC s = 0;                                                                 \
    for (; i < (n); ++i) {                                                     \
      ACC v = (ACC)(x)[i];                                                     \
      s += (term);                                                             \
    }                                                                          \
    for (int j = 0; j < LANES; ++j)                                            \
      s += lane[j];                                                            \
    return s;                                                                  \
  } while (0)

// Pairwise subtrees of at least TASK elements run as OpenMP tasks: the tree
// (where each sum splits) depends on n only, so any thread count gives the
// same bytes.
enum { TASK = 1 << 16 };

// One leaf (n <= LEAF) of sum |x|^p in float and in double, compiled for
// each ISA (the same lanes and order in every clone: the same bytes).
SRT_CPU_CLONES
static float leaf_f32(const float *x, int64_t n, pkind k, double p) {
  switch (k) {
  case P_ONE: SUM_LEAF(float, x, n, fabsf(v));
  case P_TWO: SUM_LEAF(float, x, n, v * v);
  default: SUM_LEAF(float, x, n, (float)pow(fabs((double)v), p));
  }
}

SRT_CPU_CLONES
static double leaf_f64(const float *x, int64_t n, pkind k, double p) {
  switch (k) {
  case P_ONE: SUM_LEAF(double, x, n, fabs(v));
  case P_TWO: SUM_LEAF(double, x, n, v * v);
  default: SUM_LEAF(double, x, n, pow(fabs(v), p));
  }
}

// sum |x|^p in float, pairwise.
static float sum_pow_f32(const float *x, int64_t n, pkind k, double p) {
  if (n > LEAF) {
    int64_t h = n / 2 / LANES * LANES;
    float a, b;
#pragma omp task shared(a) if (n >= TASK)
    a = sum_pow_f32(x, h, k, p);
    b = sum_pow_f32(x + h, n - h, k, p);
#pragma omp taskwait
    return a + b;
  }
  return leaf_f32(x, n, k, p);
}

// sum |x|^p in double, pairwise.
static double sum_pow_f64(const float *x, int64_t n, pkind k, double p) {
  if (n > LEAF) {
    int64_t h = n / 2 / LANES * LANES;
    double a, b;
#pragma omp task shared(a) if (n >= TASK)
    a = sum_pow_f64(x, h, k, p);
    b = sum_pow_f64(x + h, n - h, k, p);
#pragma omp taskwait
    return a + b;
  }
  return leaf_f64(x, n, k, p);
}

// The pairwise sums on the kernels' threads: one thread walks the tree and
// hands its large subtrees to the others as tasks.
static double sum_pow_f64_threaded(const float *x, int64_t n, pkind k, double p) {
  double s = 0.0;
#pragma omp parallel if (n >= TASK)
#pragma omp single
  s = sum_pow_f64(x, n, k, p);
  return s;
}

static float sum_pow_f32_threaded(const float *x, int64_t n, pkind k, double p) {
  float s = 0.0f;
#pragma omp parallel if (n >= TASK)
#pragma omp single
  s = sum_pow_f32(x, n, k, p);
  return s;
}

// max |x|; *nan set if any element is NaN (which a plain max would drop).
// (max is exact, so the threads' split changes nothing.)
static float max_abs(const float *x, int64_t n, int *nan) {
  float m = 0.0f;
  int any_nan = 0;
#pragma omp parallel for simd reduction(max : m) reduction(| : any_nan) if (n >= TASK)
  for (int64_t i = 0; i < n; ++i) {
    float a = fabsf(x[i]);
    any_nan |= a != a;
    m = a > m ? a : m;
  }
  if (any_nan)
    *nan = 1;
  return m;
}

srt_grad_norm_options srt_grad_norm_default_options(void) {
  srt_grad_norm_options o = {2.0, SRT_F32, 0};
  return o;
}

static srt_status check_grad(const srt_tensor *g, size_t i, const char *what,
                             int allow_partial) {
  const char *name = g->name ? g->name : "?";
  if (g->dtype != SRT_F32)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: gradient %zu '%s' has dtype %s; F32 is supported", what,
                     i, name, srt_dtype_name(g->dtype));
  if (!g->data && srt_tensor_local_numel(g) > 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: gradient %zu '%s' has no data",
                     what, i, name);
  for (int a = 0; a < SRT_MESH_NDIMS && !allow_partial; ++a)
    if (g->placements[a].kind == SRT_PARTIAL)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s: gradient %zu '%s' is Partial on mesh axis %s; reduce "
                       "it (all-reduce or reduce-scatter) before the norm",
                       what, i, name, a == SRT_MESH_DP ? "dp" : "tp");
  return NULL;
}

static int group_rank(const srt_group *g) { return g ? srt_group_rank(g) : 0; }

// This process's world rank, for messages (-1 without groups).
static int world_rank_of(const srt_group *a, const srt_group *b) {
  return a ? a->world_rank : b ? b->world_rank : -1;
}

// `s` naming world rank `wr` (none when -1: no groups).
static srt_status at_world_rank(int wr, srt_status s) {
  return wr >= 0 ? srt_status_annotate(s, wr, "world rank %d", wr) : s;
}

// All-reduces value[0..2) over `g` (if any) in `dtype`.
static srt_status reduce2(srt_group *g, double v[2], srt_dtype dtype,
                          srt_reduce_op op) {
  if (!g)
    return NULL;
  if (dtype == SRT_F64)
    return srt_all_reduce(g, v, 2, SRT_F64, op);
  float f[2] = {(float)v[0], (float)v[1]};
  SRT_RETURN_IF_ERROR(srt_all_reduce(g, f, 2, SRT_F32, op));
  v[0] = f[0];
  v[1] = f[1];
  return NULL;
}

srt_status srt_get_grad_norm(const srt_tensor *grads, size_t n_grads,
                             srt_group *dp_cp, srt_group *tp,
                             const srt_grad_norm_options *options,
                             double *total_norm) {
  static const char what[] = "get_grad_norm";
  *total_norm = NAN;
  srt_grad_norm_options o = options ? *options : srt_grad_norm_default_options();
  int wr = world_rank_of(dp_cp, tp);
  double p = o.norm_type;
  if (!(p > 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: norm_type must be > 0 or INFINITY, got %g", what, p);
  if (o.accum_dtype != SRT_F32 && o.accum_dtype != SRT_F64)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: accumulation dtype must be F32 or F64, got %s", what,
                     srt_dtype_name(o.accum_dtype));
  for (size_t i = 0; i < n_grads; ++i)
    SRT_RETURN_IF_ERROR(at_world_rank(wr, check_grad(&grads[i], i, what, 0)));
  pkind k = isinf(p) ? P_INF : p == 1.0 ? P_ONE : p == 2.0 ? P_TWO : P_GENERAL;

  const int coord[SRT_MESH_NDIMS] = {group_rank(dp_cp), group_rank(tp)};
  double local = 0.0;  // sum or max of this rank's counted elements
  float local_f32 = 0.0f;
  int nan = 0;
  for (size_t i = 0; i < n_grads; ++i) {
    const srt_tensor *g = &grads[i];
    int counted = 1;
    for (int a = 0; a < SRT_MESH_NDIMS && !o.reference_counting; ++a)
      if (g->placements[a].kind == SRT_REPLICATE && coord[a] != 0)
        counted = 0;
    if (!counted)
      continue;
    const float *x = g->data;
    int64_t n = srt_tensor_local_numel(g);
    if (k == P_INF) {
      double m = max_abs(x, n, &nan);
      if (m > local)
        local = m;
    } else if (o.accum_dtype == SRT_F64) {
      local += sum_pow_f64_threaded(x, n, k, p);
    } else {
      local_f32 += sum_pow_f32_threaded(x, n, k, p);
    }
  }
  if (k != P_INF && o.accum_dtype == SRT_F32)
    local = local_f32;
  if (local != local)
    nan = 1;

  // [value, NaN flag]: the flag survives MAX and SUM alike.
  double v[2] = {nan ? 0.0 : local, nan ? 1.0 : 0.0};
  srt_reduce_op op = k == P_INF ? SRT_REDUCE_MAX : SRT_REDUCE_SUM;
  SRT_RETURN_IF_ERROR(reduce2(dp_cp, v, o.accum_dtype, op));
  SRT_RETURN_IF_ERROR(reduce2(tp, v, o.accum_dtype, op));
  if (v[1] != 0.0)
    *total_norm = NAN;
  else if (k == P_INF || k == P_ONE)
    *total_norm = v[0];
  else if (k == P_TWO)
    *total_norm = sqrt(v[0]);
  else
    *total_norm = pow(v[0], 1.0 / p);
  return NULL;
}

srt_status srt_clip_grad_by_total_norm(srt_tensor *grads, size_t n_grads,
                                       double max_norm, double total_norm,
                                       srt_clip_action *action, double *coef) {
  static const char what[] = "clip_grad_by_total_norm";
  *action = SRT_CLIP_NOT_NEEDED;
  if (coef)
    *coef = NAN;
  if (!(max_norm > 0) || isinf(max_norm))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: max_norm must be finite and > 0, got %g", what, max_norm);
  if (total_norm < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: total_norm %g is negative", what,
                     total_norm);
  for (size_t i = 0; i < n_grads; ++i)
    SRT_RETURN_IF_ERROR(check_grad(&grads[i], i, what, 1));
  if (!isfinite(total_norm)) {
    *action = SRT_CLIP_SKIP_STEP;
    return NULL;
  }
  double c = max_norm / (total_norm + 1e-6);
  if (coef)
    *coef = c;
  if (!(c < 1.0))
    return NULL;
  float cf = (float)c;
  for (size_t i = 0; i < n_grads; ++i) {
    float *x = grads[i].data;
    int64_t n = srt_tensor_local_numel(&grads[i]);
#pragma omp parallel for simd schedule(static) if (n >= TASK)
    for (int64_t j = 0; j < n; ++j)
      x[j] *= cf;
  }
  *action = SRT_CLIP_SCALED;
  return NULL;
}
