// srt_tensor: a DTensor-like description of one rank's piece of a tensor —
// dtype, global and local shape, one placement per mesh axis — plus the
// local-shape and local-offset arithmetic for Shard(d) placements.
#ifndef SHARDRT_TENSOR_H
#define SHARDRT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/arena.h"
#include "shardrt/mesh.h"
#include "shardrt/status.h"
#include "shardrt/types.h"

//===----------------------------------------------------------------------===//
// Placements
//===----------------------------------------------------------------------===//

/// Replicate(): every rank on the axis holds the whole (local) tensor.
srt_placement srt_replicate(void);
/// Shard(dim): the axis splits dimension `dim` evenly, rank i holding the
/// i-th contiguous chunk.
srt_placement srt_shard(int dim);
/// Partial(): every rank holds an addend; the value is the sum over the axis.
srt_placement srt_partial(void);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// Product of `shape[0..ndim)` (1 for ndim = 0).
int64_t srt_shape_numel(int ndim, const int64_t *shape);

/// The local shape of a tensor of global shape `global_shape[0..ndim)` with
/// `placements[SRT_MESH_DP]`, `placements[SRT_MESH_TP]` on `mesh`, into
/// `local_shape[0..ndim)`. A dim sharded by both dp and tp is split tp-ways,
/// then each tp shard dp-ways (FSDP over TP, torch's _StridedShard; plain
/// DTensor order would be the reverse), so a dp all-gather alone rebuilds
/// the tp shard.
/// Replicate and Partial leave the shape alone.
/// Errors (SRT_INVALID_ARGUMENT), naming `name` (may be NULL), the dim, its
/// size and the axis size: ndim outside [0, SRT_MAX_RANK], a negative size,
/// a Shard dim outside [0, ndim), and a size not divisible by the axis size
/// (uneven shards are not supported).
srt_status srt_local_shape(const char *name, int ndim, const int64_t *global_shape,
                           const srt_placement *placements,
                           const srt_mesh *mesh, int64_t *local_shape);

/// Where the local shard of the rank at mesh coordinate `coord` starts in
/// the global tensor: `offset[d]` is the global index of local index 0 along
/// dim d (0 on dims that are not sharded). Same errors as srt_local_shape.
srt_status srt_local_offset(const char *name, int ndim, const int64_t *global_shape,
                            const srt_placement *placements,
                            const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS],
                            int64_t *offset);

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// One rank's view of a (possibly sharded) tensor. `data` holds the local
/// shard, row-major and contiguous, `local_shape` elements of `dtype`.
/// A plain struct: fill it with srt_tensor_init, then give it memory with
/// srt_tensor_alloc (owned), srt_tensor_alloc_in (arena view) or by setting
/// `data` to the caller's buffer (view; owns_data = 0).
typedef struct srt_tensor {
  const char *name; ///< borrowed (must outlive the tensor); for messages; may be NULL
  srt_dtype dtype;
  int ndim;
  int64_t global_shape[SRT_MAX_RANK];
  int64_t local_shape[SRT_MAX_RANK];
  srt_placement placements[SRT_MESH_NDIMS]; ///< [SRT_MESH_DP], [SRT_MESH_TP]
  void *data;    ///< local shard, or NULL before allocation
  int owns_data; ///< 1: srt_tensor_release frees `data`
  /// A Shard(0) on tp taken part by part (Megatron's Mamba2 in_proj [z, x,
  /// B, C, dt], conv1d [x, B, C]): dim 0 is these num_tp_blocks parts, each
  /// split evenly over tp, and the local shard is this rank's slice of every
  /// part in order. 0: one part (a plain Shard).
  int num_tp_blocks;
  int64_t tp_blocks[SRT_MAX_TP_BLOCKS];
} srt_tensor;

/// One run of dim-0 rows of a local shard that comes from one place of the
/// full tensor: local rows [local_row, local_row + rows) are full rows
/// [full_row, full_row + rows), the other dims at `offset` (of
/// srt_local_offset) and `local_shape`.
typedef struct srt_tensor_piece {
  int64_t local_row, full_row, rows;
} srt_tensor_piece;

/// The pieces of the shard of `t` held by the rank at `coord`: one for a
/// plain tensor (all its local rows at offset[0]), one per part for a
/// tensor split part by part (tp_blocks). `offset` receives the local
/// shard's offset on every dim (dim 0: the first piece's). Returns the
/// number of pieces, or -1 with `*err` set: as srt_local_offset, and
/// SRT_INVALID_ARGUMENT when parts are given but tp is not Shard(0), a part
/// is not divisible by tp or the parts do not sum to dim 0. With parts and a
/// dp Shard(0) (FSDP) the rank holds its dp slice of the tp shard: the
/// pieces are the parts' slices clipped to it (0 to num_tp_blocks pieces,
/// local_row counted from the slice's start).
int srt_tensor_pieces(const srt_tensor *t, const srt_mesh *mesh,
                      const int coord[SRT_MESH_NDIMS], int64_t *offset,
                      srt_tensor_piece pieces[SRT_MAX_TP_BLOCKS], srt_status *err);

/// Fills `*t` (data = NULL) from `placements[0..SRT_MESH_NDIMS)` (dp, tp):
/// validates the dtype, computes the local shape.
/// Errors: as srt_local_shape, plus SRT_INVALID_ARGUMENT for a bad dtype.
srt_status srt_tensor_init(srt_tensor *t, const char *name, srt_dtype dtype,
                           int ndim, const int64_t *global_shape,
                           const srt_placement *placements,
                           const srt_mesh *mesh);

/// Number of local elements.
int64_t srt_tensor_local_numel(const srt_tensor *t);

/// Bytes of the local shard.
size_t srt_tensor_local_bytes(const srt_tensor *t);

/// Allocates the local shard on the heap (64-byte aligned, zeroed); the
/// tensor owns it until srt_tensor_release. Errors: SRT_RESOURCE_EXHAUSTED
/// naming the tensor and the size; SRT_FAILED_PRECONDITION if t->data is set.
srt_status srt_tensor_alloc(srt_tensor *t);

/// Points the local shard at a fresh piece of `arena` (not zeroed; a view:
/// valid until the arena is reset). Errors: as srt_arena_alloc, and
/// SRT_FAILED_PRECONDITION if t->data is set.
srt_status srt_tensor_alloc_in(srt_tensor *t, srt_arena *arena);

/// Frees the data if the tensor owns it; sets data to NULL either way.
void srt_tensor_release(srt_tensor *t);

#endif // SHARDRT_TENSOR_H
