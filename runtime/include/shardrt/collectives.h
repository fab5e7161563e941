// Collectives on a process group of a context (world, dp, tp, dp_cp):
// all-reduce, all-gather and reduce-scatter along any tensor dimension,
// all-to-all (Shard(a) -> Shard(b)) and broadcast, through MPI on the CPU,
// or over an env launch's TCP mesh (srt_context_options.tcp_mesh), where
// every call completes before it returns (the non-blocking forms too) and
// reductions run in group-rank order.
#ifndef SHARDRT_COLLECTIVES_H
#define SHARDRT_COLLECTIVES_H

#include <stdint.h>

#include "shardrt/context.h"
#include "shardrt/status.h"
#include "shardrt/types.h"

// Conventions for every function below:
// - Collective: every rank of `group` calls it with the same dtype, shapes,
//   dims, op and root (the SPMD program guarantees this; a rank passing
//   different arguments is a caller bug that MPI may detect or hang on).
//   Argument errors are found before any communication and depend only on
//   those shared arguments, so all ranks fail alike and nobody waits.
// - Tensors are row-major and contiguous; `ndim` <= SRT_MAX_RANK.
// - Buffers belong to the caller; `in` and `out` must not overlap.
// - Dtypes: reductions take F32, F64, I32, I64 (SUM and MAX; MAX of a NaN
//   is whatever MPI does, so check finiteness separately) and BF16 (two
//   bytes an element; SUM adds in fp32 and rounds each partial sum to
//   bf16, nearest even, as NCCL's bf16 sum does; MAX exact); data movement
//   (gather, all-to-all, broadcast) takes every dtype, 16-bit floats as bits.
// - Per-rank element counts must fit in an int (MPI's count type); larger
//   messages give SRT_OUT_OF_RANGE.
// - Gathers and scatters along a dim other than the outermost non-trivial
//   one pack into the context's scratch buffer (grown once to the largest
//   message, see srt_context_options.scratch_bytes) and unpack from it.
// - Errors: SRT_INVALID_ARGUMENT for a bad dim, dtype, op, root or a size
//   not divisible by the group size; SRT_UNAVAILABLE for an MPI failure,
//   naming the call, the group and this rank.

/// In place: data[i] = op over the group of every rank's data[i],
/// `count` elements.
srt_status srt_all_reduce(srt_group *group, void *data, int64_t count,
                          srt_dtype dtype, srt_reduce_op op);

/// Concatenates every rank's `in` (shape local_shape[0..ndim)) along `dim`
/// in group-rank order into `out` (local_shape with dim scaled by the group
/// size): Shard(dim) -> Replicate.
srt_status srt_all_gather(srt_group *group, const void *in, void *out,
                          srt_dtype dtype, int ndim, const int64_t *local_shape,
                          int dim);

/// Reduces `in` (shape full_shape[0..ndim)) over the group with `op` and
/// leaves this rank's chunk along `dim` in `out` (full_shape with dim
/// divided by the group size): Partial -> Shard(dim).
srt_status srt_reduce_scatter(srt_group *group, const void *in, void *out,
                              srt_dtype dtype, int ndim, const int64_t *full_shape,
                              int dim, srt_reduce_op op);

/// Reshards Shard(from_dim) -> Shard(to_dim): `in` is this rank's shard
/// (shape in_shape: from_dim already split, to_dim whole); `out` gets the
/// shard with from_dim whole and to_dim split (in_shape[from_dim] * size,
/// in_shape[to_dim] / size). from_dim == to_dim copies `in` to `out`.
srt_status srt_all_to_all(srt_group *group, const void *in, void *out,
                          srt_dtype dtype, int ndim, const int64_t *in_shape,
                          int from_dim, int to_dim);

/// In place: every rank's `data` (count elements) becomes `root`'s
/// (root is a rank in the group).
srt_status srt_broadcast(srt_group *group, void *data, int64_t count,
                         srt_dtype dtype, int root);

/// Non-blocking forms of srt_all_reduce, srt_all_gather and
/// srt_reduce_scatter (same arguments and errors), completed by
/// srt_collective_wait(ctx, slot) on the group's context: until then `in`
/// (`data`) must not change and `out` must not be read. Every rank of the
/// group starts its collectives in the same order (MPI's rule for
/// non-blocking collectives on a communicator; a compiled step's program
/// order guarantees it). A gather or scatter that must pack through the
/// context's scratch (along a dim other than the outermost non-trivial
/// one) completes before returning, the slot left free. Errors, besides
/// the blocking forms': SRT_INVALID_ARGUMENT for a slot outside
/// [0, SRT_MAX_PENDING) or one still in flight.
srt_status srt_all_reduce_start(srt_group *group, void *data, int64_t count,
                                srt_dtype dtype, srt_reduce_op op, int slot);
srt_status srt_all_gather_start(srt_group *group, const void *in, void *out,
                                srt_dtype dtype, int ndim, const int64_t *local_shape,
                                int dim, int slot);
srt_status srt_reduce_scatter_start(srt_group *group, const void *in, void *out,
                                    srt_dtype dtype, int ndim, const int64_t *full_shape,
                                    int dim, srt_reduce_op op, int slot);

/// Lets MPI advance the collectives in flight on `ctx` (one MPI_Test of
/// each, completing none from the caller's view): Open MPI progresses a
/// non-blocking collective only inside MPI calls, so the cpu backend calls
/// this between ops to move data while the ops compute. Errors are left
/// for the wait to report.
void srt_collectives_progress(srt_context *ctx);

/// Waits for the collective started in `slot` against the context's
/// deadline (as the blocking forms do) and frees the slot; a free slot
/// returns at once. Errors: SRT_INVALID_ARGUMENT for a slot outside
/// [0, SRT_MAX_PENDING); SRT_DEADLINE_EXCEEDED or SRT_UNAVAILABLE as the
/// blocking forms.
srt_status srt_collective_wait(srt_context *ctx, int slot);

/// One tensor of a bucket: its buffers and its element count (the smaller
/// side: the local shard of a gather, the chunk of a reduce-scatter).
typedef struct srt_bucket_member {
  const void *in;
  void *out;
  int64_t count;
} srt_bucket_member;

/// Starts `kind` over `group` for the `n` members `m` (1..SRT_MAX_BUCKET,
/// every rank the same counts and order) into `slot`, non-blocking: packs
/// every member's `in` into the slot's staging buffer (kept by the context,
/// grown to the largest bucket) and starts one MPI collective on it. The
/// members' `in` may change once this returns; their `out` are written by
/// srt_bucket_wait. Errors: as srt_all_reduce_start, and
/// SRT_INVALID_ARGUMENT for an unknown kind, n outside [1, SRT_MAX_BUCKET],
/// a negative count or a total over INT_MAX; SRT_RESOURCE_EXHAUSTED when
/// the staging buffer cannot grow.
srt_status srt_bucket_start(srt_group *group, srt_bucket_kind kind,
                            const srt_bucket_member *m, int n, srt_dtype dtype, int slot);

/// Completes the bucket started in `slot` (as srt_collective_wait) and
/// unpacks it into the members' `out`; `m` and `n` must be those the start
/// was given. A free slot returns at once, writing nothing. Errors: as
/// srt_collective_wait.
srt_status srt_bucket_wait(srt_context *ctx, const srt_bucket_member *m, int n, int slot);

/// srt_all_reduce on F32 data/// srt_all_reduce on F32 data with `group` an srt_group*; has the type
/// srt_allreduce_f32_fn, for kernels that must not depend on the backend
/// (vocabulary-parallel cross-entropy: pass it with the tp group).
srt_status srt_allreduce_f32(void *group, float *data, int64_t count,
                             srt_reduce_op op);

#endif // SHARDRT_COLLECTIVES_H
