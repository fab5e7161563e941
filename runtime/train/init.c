// Hugging Face-style weight initialisation that does not depend on the mesh:
// element i of a parameter's FULL tensor is normal(0, std) drawn from a
// counter-based generator keyed by (seed, hash of the name), so every rank
// computes just the elements of its slice and a tp=1 run and a tp=2 run
// start from the same global weights.
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "shardrt/tensor.h"
#include "train_internal.h"

// splitmix64's finaliser: a bijective mix of 64 bits.
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of a NUL-terminated name.
static uint64_t name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

// The c-th uniform of stream `key`, in (0, 1].
static double uniform(uint64_t key, uint64_t c) {
  return (double)((mix64(key + (c + 1) * 0x9E3779B97F4A7C15ull) >> 11) + 1) * 0x1.0p-53;
}

// Standard normal number i of stream `key` (Box-Muller, cosine branch).
static double normal(uint64_t key, uint64_t i) {
  double u1 = uniform(key, 2 * i), u2 = uniform(key, 2 * i + 1);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

// Fills this rank's slice `w` (local shape, at `offset` in the global
// tensor) with std * normal(key, global row-major index). Rows of the last
// dim are independent, so they are filled in parallel (OpenMP): the values
// do not depend on the number of threads.
static void fill_normal(float *w, const srt_param_info *pi, const int64_t *offset, uint64_t key,
                        double std) {
  int last = pi->rank - 1;
  int64_t inner = pi->rank > 0 ? pi->local_shape[last] : 1;
  int64_t rows = inner > 0 ? srt_shape_numel(pi->rank, pi->local_shape) / inner : 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    // The row's local multi-index over dims 0..last-1, then its first
    // element's global index.
    int64_t idx[SRT_MAX_RANK], rem = r;
    for (int d = last - 1; d >= 0; --d) {
      idx[d] = rem % pi->local_shape[d];
      rem /= pi->local_shape[d];
    }
    uint64_t global = 0;
    for (int d = 0; d < last; ++d)
      global = global * (uint64_t)pi->global_shape[d] + (uint64_t)(offset[d] + idx[d]);
    if (pi->rank > 0)
      global = global * (uint64_t)pi->global_shape[last] + (uint64_t)offset[last];
    for (int64_t j = 0; j < inner; ++j)
      w[r * inner + j] = (float)(std * normal(key, global + (uint64_t)j));
  }
}

// A number of the program's config.json (`key`, or NemotronHConfig's
// `alias` for it), or `fallback` (the class default).
static double config_number(json_t *c, const char *key, const char *alias, double fallback) {
  json_t *v = json_object_get(c, alias);
  if (!json_is_number(v))
    v = json_object_get(c, key);
  return json_is_number(v) ? json_number_value(v) : fallback;
}

// A Mamba2 mixer's A_log (log of the 1-based global head) or dt_bias (the
// inverse softplus of a log-uniform dt in [time_step_min, time_step_max],
// floored at time_step_floor), as NemotronHPreTrainedModel._init_weights;
// the uniforms come from the counter-based stream of the name (mesh-free).
static srt_status init_mamba2(float *w, const srt_program *p, const srt_param_info *pi,
                              const srt_mesh *mesh, const int *coord, uint64_t seed) {
  int64_t offset[SRT_MAX_RANK];
  SRT_RETURN_IF_ERROR(
      srt_local_offset(pi->name, pi->rank, pi->global_shape, pi->placement, mesh, coord, offset));
  if (pi->rank != 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "init: Mamba2 parameter '%s' has rank %d, not 1",
                     pi->name, (int)pi->rank);
  json_t *c = p->config_json ? json_loads(p->config_json, 0, NULL) : NULL;
  double lo = log(config_number(c, "time_step_min", "mamba_dt_min", 0.001));
  double hi = log(config_number(c, "time_step_max", "mamba_dt_max", 0.1));
  double floor_dt = config_number(c, "time_step_floor", "mamba_dt_init_floor", 1e-4);
  json_decref(c);
  uint64_t key = mix64(seed ^ mix64(name_hash(pi->name)));
  for (int64_t i = 0; i < pi->local_shape[0]; ++i) {
    uint64_t h = (uint64_t)(offset[0] + i);
    if (pi->init == SRT_INIT_A_LOG) {
      w[i] = (float)log((double)(h + 1));
    } else {
      double dt = fmax(exp(uniform(key, h) * (hi - lo) + lo), floor_dt);
      w[i] = (float)(dt + log(-expm1(-dt))); // softplus^-1 (pytorch#72759)
    }
  }
  return NULL;
}

srt_status train_init_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              uint64_t seed) {
  const srt_mesh *mesh = srt_context_placement_mesh(ctx);
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
  for (int32_t k = 0; k < p->num_params; ++k) {
    const srt_param_info *pi = &p->params[k];
    int64_t numel = srt_shape_numel(pi->rank, pi->local_shape);
    float *w = (float *)(void *)(arena + pi->offset);
    memset(arena + pi->grad_offset, 0, (size_t)numel * sizeof(float));
    memset(arena + pi->m_offset, 0, (size_t)numel * sizeof(float));
    memset(arena + pi->v_offset, 0, (size_t)numel * sizeof(float));
    if (pi->init == SRT_INIT_ZEROS || pi->init == SRT_INIT_ONES) {
      float value = pi->init == SRT_INIT_ONES ? 1.0f : 0.0f;
      for (int64_t i = 0; i < numel; ++i)
        w[i] = value;
      continue;
    }
    if (pi->init == SRT_INIT_A_LOG || pi->init == SRT_INIT_DT_BIAS) {
      SRT_RETURN_IF_ERROR(init_mamba2(w, p, pi, mesh, coord, seed));
      continue;
    }
    if (pi->init != SRT_INIT_NORMAL)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "init: parameter '%s' has unknown init kind %d",
                       pi->name, (int)pi->init);
    // Piece by piece: a weight split part by part over tp (a Mamba2
    // in_proj) holds a slice of every part.
    int64_t offset[SRT_MAX_RANK];
    srt_tensor_piece pieces[SRT_MAX_TP_BLOCKS];
    srt_tensor view = train_param_view(pi, pi->name, arena, pi->offset);
    srt_status err = NULL;
    int np = srt_tensor_pieces(&view, mesh, coord, offset, pieces, &err);
    if (np < 0)
      return err;
    int64_t width = pi->rank > 0 ? srt_shape_numel(pi->rank - 1, pi->local_shape + 1) : 1;
    for (int i = 0; i < np; ++i) {
      srt_param_info part = *pi;
      if (pi->rank > 0) {
        part.local_shape[0] = pieces[i].rows;
        offset[0] = pieces[i].full_row;
      }
      fill_normal(w + pieces[i].local_row * width, &part, offset,
                  mix64(seed ^ mix64(name_hash(pi->name))), p->initializer_range);
    }
    // An embedding's padding_idx row starts at zero (transformers'
    // _init_weights): zeroed in the piece that holds it, if any.
    for (int i = 0; pi->rank >= 1 && pi->zero_row >= 0 && i < np; ++i) {
      int64_t row = pi->zero_row - pieces[i].full_row;
      if (row >= 0 && row < pieces[i].rows)
        memset(w + (pieces[i].local_row + row) * width, 0, (size_t)width * sizeof(float));
    }
  }
  return NULL;
}
