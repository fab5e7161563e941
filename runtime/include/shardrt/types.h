// Basic runtime vocabulary shared by every part of libshardrt: element
// types, reduction operators and DTensor-style placements.
#ifndef SHARDRT_TYPES_H
#define SHARDRT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/status.h"

/// Maximum tensor rank handled by the runtime.
#define SRT_MAX_RANK 8

/// Most parts a tensor's dim 0 is split over tp in, part by part (a Mamba2
/// in_proj's [z, x, B, C, dt]; see srt_tensor.tp_blocks).
#define SRT_MAX_TP_BLOCKS 5

/// Non-blocking collectives in flight at once on one context: the slots
/// [0, SRT_MAX_PENDING) of shardrt/collectives.h's _start functions.
#define SRT_MAX_PENDING 64

/// Most members of one bucket (srt_bucket_start).
#define SRT_MAX_BUCKET 64

/// A bucket's collective: one call for several small tensors (a layer's
/// norm weights and biases), each member's data packed into the slot's
/// staging buffer, moved at once, and unpacked at the wait.
typedef enum srt_bucket_kind {
  /// Each member's `in` (count elements) gathered over the group into `out`
  /// (group size x count, rank-major): all-gather on dim 0.
  SRT_BUCKET_ALL_GATHER = 0,
  /// Each member's `in` (group size x count) summed over the group, this
  /// rank's chunk (count) into `out`: reduce-scatter on dim 0.
  SRT_BUCKET_REDUCE_SCATTER = 1,
  /// Each member's `in` (count) summed over the group into `out` (count;
  /// in == out allowed).
  SRT_BUCKET_ALL_REDUCE = 2,
} srt_bucket_kind;

/// Element types; the names match safetensors' dtype strings.
typedef enum srt_dtype {
  SRT_F64,
  SRT_F32,
  SRT_F16,
  SRT_BF16,
  SRT_I64,
  SRT_I32,
  SRT_I16,
  SRT_I8,
  SRT_U8,
  SRT_BOOL,
  SRT_DTYPE_COUNT,
} srt_dtype;

/// Size of one element in bytes (0 for an invalid dtype).
size_t srt_dtype_size(srt_dtype dtype);

/// safetensors' name of `dtype` ("F32", "BF16", ...); "?" if invalid.
const char *srt_dtype_name(srt_dtype dtype);

/// Writes a shape as "[8, 6]" ("[]" for rank 0) into buf (`len` bytes,
/// truncated when short) and returns buf, for messages.
const char *srt_shape_format(char *buf, size_t len, int rank, const int64_t *shape);

/// Parses a safetensors dtype name of `len` bytes; returns SRT_DTYPE_COUNT
/// if it is not one of ours.
srt_dtype srt_dtype_parse(const char *name, size_t len);

/// Reductions of all-reduce and reduce-scatter.
typedef enum srt_reduce_op { SRT_REDUCE_SUM, SRT_REDUCE_MAX } srt_reduce_op;

/// How a tensor lives on one mesh axis (PyTorch DTensor's placements):
/// Replicate, Shard(dim) (split evenly along `dim`, non-negative here) or
/// Partial (each rank holds an addend; the value is their sum).
typedef enum srt_placement_kind {
  SRT_REPLICATE,
  SRT_SHARD,
  SRT_PARTIAL,
} srt_placement_kind;

typedef struct srt_placement {
  srt_placement_kind kind;
  int dim; // for SRT_SHARD
} srt_placement;

/// An in-place all-reduce of `count` float32 values over a process group,
/// as a function pointer so that kernels needing one (vocabulary-parallel
/// cross-entropy) do not depend on the communication backend.
typedef srt_status (*srt_allreduce_f32_fn)(void *group, float *data,
                                           int64_t count, srt_reduce_op op);

#endif // SHARDRT_TYPES_H
