// DTensor-style conversions between a full (global) tensor and one rank's
// local shard: srt_to_local (the shard of a full tensor, no communication)
// and srt_full_tensor (its inverse, assembling the full tensor from every
// rank's shard with all-gathers and all-reduces).
#ifndef SHARDRT_DTENSOR_H
#define SHARDRT_DTENSOR_H

#include "shardrt/context.h"
#include "shardrt/mesh.h"
#include "shardrt/status.h"
#include "shardrt/tensor.h"

/// Copies the shard of `full` that the rank at mesh coordinate `coord`
/// holds into t->data. `full` is the whole tensor, row-major, shape
/// t->global_shape, dtype t->dtype; t->data must have room for
/// srt_tensor_local_bytes(t) (the caller owns both). Shard(d) axes take the
/// coordinate's chunk (dp then tp, as srt_local_offset); Replicate axes take
/// everything. Errors: SRT_INVALID_ARGUMENT for a Partial placement (a full
/// value has no canonical split into addends), for t->data NULL, or for
/// placements inconsistent with the mesh (naming the tensor).
srt_status srt_to_local(const srt_mesh *mesh, const int coord[SRT_MESH_NDIMS],
                        const void *full, srt_tensor *t);

/// The inverse of srt_to_local (DTensor.full_tensor()): every rank gets the
/// whole tensor in `full` (shape t->global_shape, row-major; caller-owned,
/// room for the global size). Per mesh axis, tp first then dp: Shard(d) is
/// all-gathered along d over that axis's group, Partial is all-reduced
/// (SUM) over it, Replicate needs nothing. Collective over the tp and dp
/// groups of `ctx`. Partial needs a dtype that MPI can sum (F32, F64, I32,
/// I64). Uses one temporary buffer of the global size (malloc: this is for
/// checkpoints and checks, not the training step). Errors: as the
/// collectives; SRT_RESOURCE_EXHAUSTED if the buffer cannot be allocated.
srt_status srt_full_tensor(srt_context *ctx, const srt_tensor *t, void *full);

#endif // SHARDRT_DTENSOR_H
