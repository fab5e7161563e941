// Checkpoints of sharded tensors: each rank loads only its slice of a full
// Hugging Face safetensors checkpoint; saves go either to one file per rank
// (local shards) or to one consolidated file written by rank 0, always
// atomically (safetensors_write.h), so a crash never damages the previous
// checkpoint.
#ifndef SHARDRT_CHECKPOINT_H
#define SHARDRT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/context.h"
#include "shardrt/mesh.h"
#include "shardrt/safetensors.h"
#include "shardrt/status.h"
#include "shardrt/tensor.h"

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

/// Loads into t->data the shard of tensor `t->name` that the rank at mesh
/// coordinate `coord` holds, from a full (unsharded) checkpoint `file`:
/// the box srt_local_offset / t->local_shape of the stored tensor, read
/// row by row from the mapping (only those pages are touched) and converted
/// to float32 (F32 copied, BF16/F16 widened exactly, F64 rounded).
/// `t`: F32, initialised for the mesh (srt_tensor_init), with data of
/// srt_tensor_local_bytes(t) (caller-owned). No communication.
/// Errors: SRT_NOT_FOUND (no such tensor in the file); SRT_INVALID_ARGUMENT
/// when the stored shape differs from t->global_shape (both printed), the
/// stored dtype cannot be converted, t is not F32, has no data, or is
/// Partial. Messages name the tensor, the file and the rank's coordinate.
srt_status srt_checkpoint_load_shard(const srt_safetensors *file,
                                     const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     srt_tensor *t);

/// srt_checkpoint_load_shard of the tensor stored as `stored` in `file`
/// (a checkpoint layout that names it otherwise than t->name, e.g.
/// transformers' on-disk "language_model.model.*" for an in-memory
/// "model.language_model.*"). Errors: as srt_checkpoint_load_shard,
/// naming `stored`.
srt_status srt_checkpoint_load_shard_as(const srt_safetensors *file, const char *stored,
                                        const srt_mesh *mesh,
                                        const int coord[SRT_MESH_NDIMS], srt_tensor *t);

/// Loads t->data from a per-rank file written by srt_checkpoint_save_local:
/// the stored tensor `t->name` must have t->local_shape, and the file's
/// mesh and coordinate (metadata) must be this rank's. Same conversions as
/// srt_checkpoint_load_shard. Errors: as above, plus SRT_FAILED_PRECONDITION
/// when the file was written for another mesh or coordinate.
srt_status srt_checkpoint_load_local(const srt_safetensors *file,
                                     const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     srt_tensor *t);

/// What a training checkpoint's metadata says about its optimizer state.
typedef struct srt_checkpoint_meta {
  /// "shardrt.optimizer": the optimizer file's name, a plain file name in
  /// the checkpoint's directory (points into `file`'s metadata, valid while
  /// it is open); NULL for a file without optimizer state (a Hugging Face
  /// checkpoint, or the optimizer file itself).
  const char *optimizer;
  int64_t step;      ///< "shardrt.step": steps trained; -1 when absent
  int64_t adam_step; ///< "shardrt.adam_step": AdamW's step count; -1 when absent
} srt_checkpoint_meta;

/// The largest step count a checkpoint may record (and --steps may ask
/// for): 2^50, so that step arithmetic never nears int64 overflow.
#define SRT_CHECKPOINT_MAX_STEP (INT64_C(1) << 50)

/// Reads the training metadata of `file` (a checkpoint's weights file or
/// its optimizer file) into `out`. Step counts are decimal digits only
/// (no sign, no space; leading zeros allowed), at most
/// SRT_CHECKPOINT_MAX_STEP, and adam_step <= step. Errors: SRT_DATA_LOSS,
/// naming the file, the key and the value (its first 64 bytes), when a
/// step count is written but is not one, when adam_step exceeds step, when
/// `file` names an optimizer file but lacks either step count, or when that
/// name is not a plain file name ("", ".", "..", anything with a '/', more
/// than 255 bytes: a checkpoint never leads out of its directory).
srt_status srt_checkpoint_read_meta(const srt_safetensors *file,
                                    srt_checkpoint_meta *out);

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

/// "<prefix>-rank<r>-of-<n>.safetensors" (r, n zero-padded to 5 digits)
/// into buf[len]. Errors: SRT_OUT_OF_RANGE if it does not fit.
srt_status srt_checkpoint_shard_path(char *buf, size_t len, const char *prefix,
                                     int rank, int world_size);

/// Writes this rank's local shards `tensors[0..n)` (their local shapes,
/// dtypes and data) to `path` atomically, with metadata recording the mesh
/// ("shardrt.mesh" = "DPxTP"), the coordinate ("shardrt.coord" = "d,t")
/// and, per tensor, its global shape and placements
/// ("shardrt.tensor.<name>" = "[8,6] dp=Replicate tp=Shard(0)").
/// No communication: every rank writes its own file (see
/// srt_checkpoint_shard_path). Errors: as srt_safetensors_write.
srt_status srt_checkpoint_save_local(const char *path, const srt_mesh *mesh,
                                     const int coord[SRT_MESH_NDIMS],
                                     const srt_tensor *tensors, size_t n);

/// Writes one Hugging Face style file with every tensor whole (global
/// shapes, the tensors' dtypes): each tensor is assembled with
/// srt_full_tensor (one at a time, so memory peaks at one full tensor) and
/// rank 0 streams it to `path` atomically. Collective over ctx's world,
/// tp and dp groups; every rank returns rank 0's outcome (a failed write
/// on rank 0 gives SRT_IO on every rank), so all ranks agree on whether the
/// checkpoint exists. Errors: as srt_full_tensor and srt_safetensors_write.
srt_status srt_checkpoint_save_consolidated(srt_context *ctx, const char *path,
                                            const srt_tensor *tensors, size_t n);

/// srt_checkpoint_save_consolidated with extra `__metadata__` entries:
/// `metadata` holds `n_metadata` (key, value) pairs, alternating (may be
/// NULL when n_metadata is 0), written after "format": "pt". Only rank 0's
/// metadata is used. Errors: as srt_checkpoint_save_consolidated.
srt_status srt_checkpoint_save_consolidated_meta(srt_context *ctx, const char *path,
                                                 const srt_tensor *tensors, size_t n,
                                                 const char *const *metadata,
                                                 size_t n_metadata);

/// One tensor of a file srt_checkpoint_save_items writes.
typedef struct srt_checkpoint_item {
  const char *name;            ///< its name in the file
  srt_dtype dtype;             ///< stored dtype of `tensor`: F32, BF16 or F16
                               ///< (rounded to nearest even); ignored for `raw`
  const srt_tensor *tensor;    ///< F32, sharded: gathered whole (collective), or NULL
  const srt_tensor_info *raw;  ///< when `tensor` is NULL: a tensor of an open file,
                               ///< written byte for byte (its dtype and shape)
} srt_checkpoint_item;

/// srt_checkpoint_save_consolidated_meta of `items` (a carried tensor's
/// bytes are copied from its mapping on rank 0; every rank must pass the
/// same items). Errors: SRT_INVALID_ARGUMENT naming an item that is
/// neither or both, or a tensor that is not F32 or a stored dtype other
/// than F32, BF16, F16; else as srt_checkpoint_save_consolidated_meta.
srt_status srt_checkpoint_save_items(srt_context *ctx, const char *path,
                                     const srt_checkpoint_item *items, size_t n,
                                     const char *const *metadata, size_t n_metadata);

#endif // SHARDRT_CHECKPOINT_H
