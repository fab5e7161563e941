// The partition hooks of the ops whose local form the factor rules alone do
// not give (sharding_rules.c attaches them to the ops' rules): the split
// cross-entropy and its gradient, the rowwise linear's deferred bias, the
// local head counts of attention and replicated-KV gradients, the
// vocabulary range of a split embedding, the sum of two Partial gradients,
// and the optimizer's gradient hand-off.
#ifndef SHARD_PASSES_PARTITION_HOOKS_H
#define SHARD_PASSES_PARTITION_HOOKS_H

#include "partition.h"

/// Embedding (and its gradient) with a split vocabulary: the local op's
/// nn.vocab_parallel_axis (its rows are the rank's slice of the vocabulary).
void tp_localize_vocab(tp_part *p, MlirOperation local, const tp_decision *d);

/// localize of nn.mamba2_mixer(_grad) split by its heads (factor 'm' on tp):
/// num_heads and n_groups become this rank's, num_heads / tp and n_groups /
/// tp (tp-plan checked that tp divides both).
void tp_localize_mamba2(tp_part *p, MlirOperation local, const tp_decision *d);

/// Attention (and its gradient) split by heads: local num_heads and
/// num_kv_heads, or, when the KV heads stay replicated (fewer than ranks),
/// nn.q_head_offset_axis and nn.global_num_heads.
void tp_localize_heads(tp_part *p, MlirOperation local, const tp_decision *d);

/// Attention's gradient with replicated KV heads: each rank's query heads
/// give part of dk and dv (Partial over tp).
void tp_refine_replicated_kv_grad(MlirOperation op, const tp_layout *current,
                                  const bool *pending, tp_decision *d);

/// A sum of two Partial values stays Partial: the gradients of several
/// users are added before one reduction (Megatron's single all-reduce of the
/// input gradient of q/k/v, or of gate/up).
void tp_refine_partial_sum(MlirOperation op, const tp_layout *current, const bool *pending,
                           tp_decision *d);

/// A linear whose output is Partial (rowwise) with a bias: the bias is
/// added once, after the reduction (an epilogue: nn.bias_add).
bool tp_partition_linear(tp_part *p, MlirOperation op, const tp_decision *d,
                         const MlirValue *operands);

/// Cross-entropy on split logits: max, sums and target logit reduced over
/// tp (never gathering the logits), then (sum, count) over dp.
bool tp_partition_cross_entropy(tp_part *p, MlirOperation op, const tp_decision *d,
                                const MlirValue *operands);

/// The split loss's gradient, from the statistics its forward computed.
bool tp_partition_cross_entropy_grad(tp_part *p, MlirOperation op, const tp_decision *d,
                                     const MlirValue *operands);

/// nn.store_grad: the gradient in its parameter's layout (named by
/// nn.grad_of), so the optimizer finds each rank's shard of it.
void tp_rewrite_store_grad(tp_part *p, MlirOperation op);

#endif // SHARD_PASSES_PARTITION_HOOKS_H
