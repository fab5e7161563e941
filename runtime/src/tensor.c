// srt_tensor: placements, local shapes and offsets of Shard(d), allocation.
#include "shardrt/tensor.h"

#include <stdlib.h>
#include <string.h>

static const char *const kAxisNames[SRT_MESH_NDIMS] = {"dp", "tp"};

srt_placement srt_replicate(void) { return (srt_placement){SRT_REPLICATE, 0}; }
srt_placement srt_shard(int dim) { return (srt_placement){SRT_SHARD, dim}; }
srt_placement srt_partial(void) { return (srt_placement){SRT_PARTIAL, 0}; }

int64_t srt_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d)
    n *= shape[d];
  return n;
}

// Walks the mesh axes tp first, then dp, splitting `cur` (starts as the
// global shape) and, if `coord` is given, accumulating the shard's start
// into `offset`. The order only matters for a dim both axes shard: FSDP over
// TP splits each tp shard dp-ways (torch's _StridedShard), so that gathering
// over dp alone gives back the tp shard the ops use.
static srt_status split(const char *name, int ndim, const int64_t *global_shape,
                        const srt_placement *placements,
                        const srt_mesh *mesh, const int *coord, int64_t *cur,
                        int64_t *offset) {
  if (!name)
    name = "?";
  if (ndim < 0 || ndim > SRT_MAX_RANK)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "tensor '%s': rank %d outside [0, %d]", name, ndim, SRT_MAX_RANK);
  for (int d = 0; d < ndim; ++d) {
    if (global_shape[d] < 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "tensor '%s': dim %d has size %lld",
                       name, d, (long long)global_shape[d]);
    cur[d] = global_shape[d];
    if (offset)
      offset[d] = 0;
  }
  for (int k = 0; k < SRT_MESH_NDIMS; ++k) {
    int axis = SRT_MESH_NDIMS - 1 - k; // tp, then dp
    srt_placement p = placements[axis];
    int n = mesh->shape[axis];
    if (p.kind == SRT_REPLICATE || p.kind == SRT_PARTIAL)
      continue;
    if (p.kind != SRT_SHARD)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "tensor '%s': unknown placement kind %d on mesh axis %s",
                       name, (int)p.kind, kAxisNames[axis]);
    if (p.dim < 0 || p.dim >= ndim)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "tensor '%s': Shard(%d) on mesh axis %s, but the tensor "
                       "has rank %d",
                       name, p.dim, kAxisNames[axis], ndim);
    if (cur[p.dim] % n != 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "tensor '%s': dim %d of size %lld is not divisible by "
                       "%s=%d (Shard(%d) on mesh axis %s)",
                       name, p.dim, (long long)cur[p.dim], kAxisNames[axis], n,
                       p.dim, kAxisNames[axis]);
    cur[p.dim] /= n;
    if (offset)
      offset[p.dim] += (int64_t)coord[axis] * cur[p.dim];
  }
  return NULL;
}

srt_status srt_local_shape(const char *name, int ndim, const int64_t *global_shape,
                           const srt_placement *placements,
                           const srt_mesh *mesh, int64_t *local_shape) {
  return split(name, ndim, global_shape, placements, mesh, NULL, local_shape, NULL);
}

srt_status srt_local_offset(const char *name, int ndim, const int64_t *global_shape,
                            const srt_placement *placements,
                            const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS],
                            int64_t *offset) {
  int64_t cur[SRT_MAX_RANK];
  return split(name, ndim, global_shape, placements, mesh, coord, cur, offset);
}

int srt_tensor_pieces(const srt_tensor *t, const srt_mesh *mesh,
                      const int coord[SRT_MESH_NDIMS], int64_t *offset,
                      srt_tensor_piece pieces[SRT_MAX_TP_BLOCKS], srt_status *err) {
  const char *name = t->name ? t->name : "?";
  *err = srt_local_offset(name, t->ndim, t->global_shape, t->placements, mesh, coord, offset);
  if (*err)
    return -1;
  if (t->num_tp_blocks == 0) {
    pieces[0] = (srt_tensor_piece){0, t->ndim ? offset[0] : 0, t->ndim ? t->local_shape[0] : 1};
    return 1;
  }
  srt_placement tp = t->placements[SRT_MESH_TP], dp = t->placements[SRT_MESH_DP];
  int64_t n = mesh->shape[SRT_MESH_TP], sum = 0;
  for (int b = 0; b < t->num_tp_blocks && b < SRT_MAX_TP_BLOCKS; ++b)
    sum += t->tp_blocks[b];
  if (t->ndim < 1 || tp.kind != SRT_SHARD || tp.dim != 0 ||
      t->num_tp_blocks > SRT_MAX_TP_BLOCKS || sum != t->global_shape[0]) {
    *err = SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "tensor '%s': %d parts split over tp need a tp Shard(0) and parts "
                     "summing to dim 0 (%lld), got %lld",
                     name, t->num_tp_blocks, (long long)(t->ndim ? t->global_shape[0] : 0),
                     (long long)sum);
    return -1;
  }
  // A dp Shard(0) (FSDP) keeps rows [lo, lo + local) of the tp shard, the
  // concatenation of this tp rank's slice of every part.
  int64_t local = t->local_shape[0];
  int64_t lo = dp.kind == SRT_SHARD && dp.dim == 0 ? coord[SRT_MESH_DP] * local : 0;
  int64_t full = 0, tp_row = 0;
  int count = 0;
  for (int b = 0; b < t->num_tp_blocks; ++b) {
    if (t->tp_blocks[b] % n != 0) {
      *err = SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "tensor '%s': part %d of dim 0 (%lld rows) does not split over tp %lld",
                       name, b, (long long)t->tp_blocks[b], (long long)n);
      return -1;
    }
    int64_t rows = t->tp_blocks[b] / n;
    int64_t a = tp_row > lo ? tp_row : lo;
    int64_t z = tp_row + rows < lo + local ? tp_row + rows : lo + local;
    if (a < z)
      pieces[count++] = (srt_tensor_piece){a - lo, full + coord[SRT_MESH_TP] * rows + (a - tp_row),
                                           z - a};
    tp_row += rows;
    full += t->tp_blocks[b];
  }
  offset[0] = count ? pieces[0].full_row : 0;
  return count;
}

srt_status srt_tensor_init(srt_tensor *t, const char *name, srt_dtype dtype,
                           int ndim, const int64_t *global_shape,
                           const srt_placement *placements,
                           const srt_mesh *mesh) {
  memset(t, 0, sizeof *t);
  if (srt_dtype_size(dtype) == 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "tensor '%s': invalid dtype %d",
                     name ? name : "?", (int)dtype);
  SRT_RETURN_IF_ERROR(
      srt_local_shape(name, ndim, global_shape, placements, mesh, t->local_shape));
  t->name = name;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->global_shape, global_shape, (size_t)ndim * sizeof *global_shape);
  t->placements[SRT_MESH_DP] = placements[SRT_MESH_DP];
  t->placements[SRT_MESH_TP] = placements[SRT_MESH_TP];
  return NULL;
}

int64_t srt_tensor_local_numel(const srt_tensor *t) {
  return srt_shape_numel(t->ndim, t->local_shape);
}

size_t srt_tensor_local_bytes(const srt_tensor *t) {
  return (size_t)srt_tensor_local_numel(t) * srt_dtype_size(t->dtype);
}

srt_status srt_tensor_alloc(srt_tensor *t) {
  if (t->data)
    return SRT_ERROR(SRT_FAILED_PRECONDITION, "tensor '%s': already has data",
                     t->name ? t->name : "?");
  size_t bytes = srt_tensor_local_bytes(t);
  size_t rounded = (bytes + SRT_ARENA_ALIGN - 1) / SRT_ARENA_ALIGN * SRT_ARENA_ALIGN;
  void *p = aligned_alloc(SRT_ARENA_ALIGN, rounded ? rounded : SRT_ARENA_ALIGN);
  if (!p)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "tensor '%s': cannot allocate %zu bytes", t->name ? t->name : "?",
                     bytes);
  memset(p, 0, rounded);
  t->data = p;
  t->owns_data = 1;
  return NULL;
}

srt_status srt_tensor_alloc_in(srt_tensor *t, srt_arena *arena) {
  if (t->data)
    return SRT_ERROR(SRT_FAILED_PRECONDITION, "tensor '%s': already has data",
                     t->name ? t->name : "?");
  SRT_RETURN_IF_ERROR(
      srt_arena_alloc(arena, srt_tensor_local_bytes(t), t->name, &t->data));
  t->owns_data = 0;
  return NULL;
}

void srt_tensor_release(srt_tensor *t) {
  if (t->owns_data)
    free(t->data);
  t->data = NULL;
  t->owns_data = 0;
}
