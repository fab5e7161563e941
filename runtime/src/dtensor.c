// to_local (the shard of a full tensor) and full_tensor (its inverse).
#include "shardrt/dtensor.h"

#include <stdlib.h>
#include <string.h>

#include "shardrt/collectives.h"
#include "slice.h"

typedef struct copy_args {
  const unsigned char *src;
  unsigned char *dst;
  size_t elem;
} copy_args;

static void copy_row(int64_t src, int64_t dst, int64_t n, void *arg) {
  copy_args *a = arg;
  memcpy(a->dst + (size_t)dst * a->elem, a->src + (size_t)src * a->elem,
         (size_t)n * a->elem);
}

srt_status srt_to_local(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS],
                        const void *full, srt_tensor *t) {
  const char *name = t->name ? t->name : "?";
  for (int a = 0; a < SRT_MESH_NDIMS; ++a)
    if (t->placements[a].kind == SRT_PARTIAL)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "to_local: tensor '%s' is Partial on mesh axis %s; only "
                       "Shard and Replicate can be cut from a full tensor",
                       name, a == SRT_MESH_DP ? "dp" : "tp");
  if (!t->data && srt_tensor_local_numel(t) > 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "to_local: tensor '%s' has no data", name);
  int64_t box[SRT_MAX_RANK];
  SRT_RETURN_IF_ERROR(
      srt_local_shape(name, t->ndim, t->global_shape, t->placements, mesh, box));
  for (int d = 0; d < t->ndim; ++d)
    if (box[d] != t->local_shape[d])
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "to_local: tensor '%s' has local size %lld on dim %d, but "
                       "its placements on a %dx%d mesh give %lld",
                       name, (long long)t->local_shape[d], d,
                       mesh->shape[SRT_MESH_DP], mesh->shape[SRT_MESH_TP],
                       (long long)box[d]);
  copy_args args = {full, t->data, srt_dtype_size(t->dtype)};
  return srt_slice_shard(t, mesh, coord, copy_row, &args);
}

// The tp all-gather of a tensor split part by part leaves each rank's
// slices of every part together ([rank 0: p0 p1 ..][rank 1: p0 p1 ..]);
// the full tensor has each part's slices together ([p0: rank 0, 1 ..] ..).
// Copies `from` in the first order to `to` in the second (srt_tensor_pieces
// validated the parts when the shard was made); `shape` is the gathered
// data's, its dims after the first one row (dp's gather of a dim >= 1, done
// before tp's, is in it).
static void unblock(const srt_tensor *t, const int64_t *shape, int64_t ranks, int64_t local_rows,
                    size_t elem, const unsigned char *from, unsigned char *to) {
  size_t row = (size_t)srt_shape_numel(t->ndim - 1, shape + 1) * elem;
  int64_t full = 0, local = 0;
  for (int b = 0; b < t->num_tp_blocks; ++b) {
    int64_t rows = t->tp_blocks[b] / ranks;
    for (int64_t r = 0; r < ranks; ++r)
      memcpy(to + (size_t)(full + r * rows) * row, from + (size_t)(r * local_rows + local) * row,
             (size_t)rows * row);
    full += t->tp_blocks[b];
    local += rows;
  }
}

srt_status srt_full_tensor(srt_context *ctx, const srt_tensor *t, void *full) {
  size_t elem = srt_dtype_size(t->dtype);
  size_t bytes = (size_t)srt_shape_numel(t->ndim, t->global_shape) * elem;
  size_t local_bytes = srt_tensor_local_bytes(t);
  if (bytes == 0)
    return NULL;
  if (!t->data)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "full_tensor: tensor '%s' has no data",
                     t->name ? t->name : "?");
  unsigned char *work = malloc(bytes);
  if (!work)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "full_tensor: cannot allocate %zu bytes for '%s'", bytes,
                     t->name ? t->name : "?");
  memcpy(work, t->data, local_bytes);
  // Ping-pong between `work` and `full`; `cur` holds the data so far.
  unsigned char *cur = work, *other = full;
  int64_t shape[SRT_MAX_RANK];
  memcpy(shape, t->local_shape, sizeof shape);
  static const srt_group_kind kGroup[SRT_MESH_NDIMS] = {SRT_GROUP_DP_CP, SRT_GROUP_TP};
  srt_status s = NULL;
  // dp first, then tp: the inverse of srt_local_shape's order (a dim both
  // axes shard is a dp slice of a tp shard).
  for (int a = 0; a < SRT_MESH_NDIMS && !s; ++a) {
    srt_group *g = srt_context_group(ctx, kGroup[a]);
    srt_placement p = t->placements[a];
    if (p.kind == SRT_SHARD) {
      int64_t local_rows = shape[0];
      s = srt_all_gather(g, cur, other, t->dtype, t->ndim, shape, p.dim);
      shape[p.dim] *= srt_group_size(g);
      unsigned char *tmp = cur;
      cur = other;
      other = tmp;
      if (!s && a == SRT_MESH_TP && t->num_tp_blocks > 0) { // rank-major -> part-major
        unblock(t, shape, srt_group_size(g), local_rows, elem, cur, other);
        tmp = cur;
        cur = other;
        other = tmp;
      }
    } else if (p.kind == SRT_PARTIAL) {
      s = srt_all_reduce(g, cur, srt_shape_numel(t->ndim, shape), t->dtype,
                         SRT_REDUCE_SUM);
    }
  }
  if (!s && cur != full)
    memcpy(full, cur, bytes);
  free(work);
  return s;
}
