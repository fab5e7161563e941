// When the gradients' reductions run: tp-partition emits each gradient's
// reduction (the dp reduce-scatter of FSDP or all-reduce, a tp all-reduce)
// where the optimizer takes the gradient, after the whole backward; this
// moves them to where the gradient is complete.
#ifndef SHARD_PASSES_GRAD_REDUCTIONS_H
#define SHARD_PASSES_GRAD_REDUCTIONS_H

#include "mlir-c/IR.h"

/// Moves each nn.store_grad and the collectives feeding it (each read by
/// the next only) up to just after the op that completes the gradient, in
/// `body`, a partitioned function's block: the whole unreduced gradient is
/// then a short-lived temporary (FSDP keeps only its shard) and each
/// collective is issued as soon as its layer's gradient is ready. A
/// reduce-scatter of an nn.add (a tied weight's gradients, summed) is
/// pushed through the add: each addend is reduce-scattered when it is
/// complete and the shards are added (the same sum: the reduction is
/// linear), so no whole addend lives across the backward.
void tp_schedule_grad_reductions(MlirBlock body);

/// Folds each `shard.all_slice` of a `shard.all_gather` over the same grid
/// axis and tensor dim (a round trip that gives back this rank's own
/// shard: tp-partition's reshard of a weight an op reads in its stored
/// placement) to the gather's operand, and erases the gathers left unread:
/// a collective and a copy fewer, the same values.
void tp_fold_gather_slices(MlirBlock body);

#endif // SHARD_PASSES_GRAD_REDUCTIONS_H
