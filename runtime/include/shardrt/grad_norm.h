// The global gradient norm over a dp x tp mesh and clipping by it — the
// reference's get_grad_norm / clip_grad_by_total_norm_ (spec section 5),
// except that a gradient replicated across a mesh axis is counted once.
#ifndef SHARDRT_GRAD_NORM_H
#define SHARDRT_GRAD_NORM_H

#include <stddef.h>

#include "shardrt/context.h"
#include "shardrt/status.h"
#include "shardrt/tensor.h"

//===----------------------------------------------------------------------===//
// Total norm
//===----------------------------------------------------------------------===//

/// How srt_get_grad_norm computes. Start from srt_grad_norm_default_options().
typedef struct srt_grad_norm_options {
  /// p of the p-norm: 1, 2, any finite p > 0, or INFINITY (max |g|).
  double norm_type;
  /// Accumulation dtype of sum |g|^p: SRT_F32 (the reference's default) or
  /// SRT_F64. Each rank sums its local elements pairwise (blocks of 512 in
  /// 8 lanes, halves combined recursively: error ~(64 + log2 n) ulp instead
  /// of the naive n ulp), and the all-reduce sums in this dtype too.
  srt_dtype accum_dtype;
  /// 0 (default): count every logical gradient element exactly once (see
  /// srt_get_grad_norm). 1: count like the reference — every rank adds all
  /// its local elements, so a gradient replicated across tp adds tp times
  /// (and one replicated across dp, dp times). Only for parity runs.
  int reference_counting;
} srt_grad_norm_options;

/// norm_type 2, accumulation in F32, exact counting.
srt_grad_norm_options srt_grad_norm_default_options(void);

/// The p-norm of all gradients of the model, as if it were not sharded:
///   total = (sum over logical elements g of |g|^p)^(1/p),  or max |g| for inf.
///
/// `grads[0..n_grads)`: this rank's gradients, each F32 with its local shard
/// in `data` and its placements on [dp, tp]. Only local shards are read.
///
/// Counting (the "beat" over the reference): a gradient is added on this
/// rank only if, on every mesh axis where it is Replicate, this rank is
/// rank 0 of that axis's group; Shard(d) axes add on every rank. So each
/// logical element is counted exactly once, bit-for-bit the same for inf
/// (no division by the group size, which would round):
/// - tp: a gradient the plan leaves Replicate (norm weights, ...) is counted
///   on tp rank 0 only; a Shard(d) gradient on every tp rank.
/// - dp: gradients are assumed already reduced (averaged) over dp before the
///   norm, so every dp replica holds the same value and the gradient is
///   Replicate on dp: counted on dp_cp rank 0 only. A gradient sharded over
///   dp (ZeRO/FSDP style, Shard(d) on dp) is counted on every dp rank.
/// - Partial on either axis is refused: reduce the gradient first.
/// Then, like the reference: all-reduce SUM (MAX for inf) over `dp_cp`,
/// then over `tp`, and take the 1/p-th power in float64.
///
/// `options`: NULL means srt_grad_norm_default_options().
/// Groups: `dp_cp` and `tp` from the context (SRT_GROUP_DP_CP, SRT_GROUP_TP);
/// NULL means a group of one (no communication, this rank is its rank 0).
/// Collective over both groups.
///
/// Non-finite: a NaN or inf in any gradient (or an overflow of the sum)
/// makes *total_norm NaN or inf; the call still succeeds. A NaN anywhere
/// gives NaN on every rank (travels as a flag beside the value, since
/// MPI's MAX of a NaN is unspecified). Pass the result to
/// srt_clip_grad_by_total_norm, which reports it so the step is skipped.
///
/// Errors: SRT_INVALID_ARGUMENT for norm_type <= 0 or NaN, an accumulation
/// dtype other than F32/F64, or a gradient that is not F32, has no data or
/// is Partial (message names the gradient and this rank); SRT_UNAVAILABLE
/// for an MPI failure. Argument errors come before any communication.
srt_status srt_get_grad_norm(const srt_tensor *grads, size_t n_grads,
                             srt_group *dp_cp, srt_group *tp,
                             const srt_grad_norm_options *options,
                             double *total_norm);

//===----------------------------------------------------------------------===//
// Clipping
//===----------------------------------------------------------------------===//

/// What srt_clip_grad_by_total_norm did.
typedef enum srt_clip_action {
  SRT_CLIP_NOT_NEEDED, ///< coef >= 1: gradients untouched
  SRT_CLIP_SCALED,     ///< coef < 1: every local gradient multiplied by coef
  SRT_CLIP_SKIP_STEP,  ///< total_norm is NaN or inf: untouched; skip the step
} srt_clip_action;

/// Clips by the total norm, in place (reference clip_grad_by_total_norm_):
///   coef = max_norm / (total_norm + 1e-6), in float64;
///   if coef < 1, every element of every local gradient *= (float)coef.
/// Replicated gradients are scaled on every rank (each holds a copy), so
/// replicas stay identical. No communication.
/// A non-finite total_norm sets *action = SRT_CLIP_SKIP_STEP and changes
/// nothing: the caller must skip the optimizer step.
/// `*coef` (may be NULL) receives the coefficient (NaN when skipping).
/// Errors (nothing is scaled): SRT_INVALID_ARGUMENT for max_norm not finite
/// and > 0, a negative total_norm, or a gradient that is not F32 or has no
/// data (naming it).
srt_status srt_clip_grad_by_total_norm(srt_tensor *grads, size_t n_grads,
                                       double max_norm, double total_norm,
                                       srt_clip_action *action, double *coef);

#endif // SHARDRT_GRAD_NORM_H
