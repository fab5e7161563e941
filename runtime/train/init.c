// Hugging Face-style weight initialisation that does not depend on the mesh:
// element i of a parameter's FULL tensor is normal(0, std) drawn from a
// counter-based generator keyed by (seed, hash of the name), so every rank
// computes just the elements of its slice and a tp=1 run and a tp=2 run
// start from the same global weights.
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

srt_status train_init_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              uint64_t seed) {
  const srt_mesh *mesh = srt_context_mesh(ctx);
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
    if (pi->init != SRT_INIT_NORMAL)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "init: parameter '%s' has unknown init kind %d",
                       pi->name, (int)pi->init);
    int64_t offset[SRT_MAX_RANK];
    SRT_RETURN_IF_ERROR(srt_local_offset(pi->name, pi->rank, pi->global_shape,
                                         pi->placement, mesh, coord, offset));
    uint64_t key = mix64(seed ^ mix64(name_hash(pi->name)));
    double std = p->initializer_range;
    // Walk the local elements in row-major order, keeping the global
    // multi-index idx = offset + local index.
    int64_t idx[SRT_MAX_RANK];
    for (int d = 0; d < pi->rank; ++d)
      idx[d] = 0;
    for (int64_t i = 0; i < numel; ++i) {
      uint64_t global = 0;
      for (int d = 0; d < pi->rank; ++d)
        global = global * (uint64_t)pi->global_shape[d] + (uint64_t)(offset[d] + idx[d]);
      w[i] = (float)(std * normal(key, global));
      for (int d = pi->rank - 1; d >= 0; --d) {
        if (++idx[d] < pi->local_shape[d])
          break;
        idx[d] = 0;
      }
    }
  }
  return NULL;
}
