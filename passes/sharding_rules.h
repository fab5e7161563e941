// Per-op sharding rules as data, in the manner of DTensor op strategies and
// Shardy's einsum-like factor rules: every operand and result dimension of
// an nn op is labelled with a factor letter; a factor is parallel (sharding
// it shards the result the same way), a reduction (sharding it makes the
// result Partial: linear's in_features, embedding's vocabulary), whole (it
// must stay complete: a norm's features, attention's key sequence) or heads
// (shardable in whole heads of `head_dim` only). Sharding propagation and
// partitioning read these tables; nothing here knows about models.
#ifndef SHARD_PASSES_SHARDING_RULES_H
#define SHARD_PASSES_SHARDING_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "nn.h"
#include "plan.h"

enum { TP_RULE_MAX_VALUES = 11, TP_MESH_AXES = 2 };

/// The mesh: axis 0 = dp, axis 1 = tp.
typedef struct tp_mesh {
  int64_t size[TP_MESH_AXES];
} tp_mesh;

/// A value's placement on every mesh axis.
typedef struct tp_layout {
  tp_placement on[TP_MESH_AXES];
} tp_layout;

struct tp_part;
struct tp_decision;

/// The factor labels of one op: `operands[i]` / `results[i]` give one letter
/// per tensor dim ("bsk": batch, sequence, in_features). Factor kinds are
/// given by the strings `reduction`, `whole` and `heads`; every other letter
/// is parallel. The optional hooks (partition_hooks.c, through partition.h)
/// say what the factors alone cannot: tp-partition calls `refine` on the
/// decision, then `partition` to build the local op(s) (when it returns
/// false, or there is none, the op is cloned with local types and
/// `localize` sets the attributes that depend on them). An op with no
/// factors (operands[0] NULL) is partitioned by `rewrite` alone.
typedef struct tp_rule {
  const char *operands[TP_RULE_MAX_VALUES];
  const char *results[TP_RULE_MAX_VALUES];
  const char *reduction;
  const char *whole;
  const char *heads;
  /// 1 + the operand only read for its placement (a weight beside its
  /// gradient), 0 for none: a parameter there is not gathered over dp.
  int placement_only;
  /// Adjusts the decision; `current` are the operands' layouts before any
  /// Partial one is reduced and `pending` says which have an epilogue left.
  void (*refine)(MlirOperation op, const tp_layout *current, const bool *pending,
                 struct tp_decision *d);
  /// Builds the local form from the resharded `operands` and defines every
  /// result; false to fall back to the clone.
  bool (*partition)(struct tp_part *p, MlirOperation op, const struct tp_decision *d,
                    const MlirValue *operands);
  /// Sets the local clone's shape-dependent attributes.
  void (*localize)(struct tp_part *p, MlirOperation local, const struct tp_decision *d);
  /// Partitions an op without factors.
  void (*rewrite)(struct tp_part *p, MlirOperation op);
} tp_rule;

/// What a rule decides for one op: the placement every operand must have
/// and the placement of every result, per mesh axis.
typedef struct tp_decision {
  tp_layout operands[TP_RULE_MAX_VALUES];
  tp_layout results[TP_RULE_MAX_VALUES];
  char factor[TP_MESH_AXES]; // factor sharded on each axis, 0 for none
} tp_decision;

/// Decides placements for `op` given its operands' current layouts and
/// which operands are parameters (placement fixed by the plan: a sharded
/// parameter decides the factor first). Partial operands must be made
/// Replicate (a collective) first. On a factor that cannot be sharded as
/// required (heads not whole), writes a message to err and returns false.
bool tp_rule_decide(MlirOperation op, const tp_rule *rule, const tp_mesh *mesh,
                    const tp_layout *current, const bool *is_param,
                    tp_decision *out, char *err, size_t errlen);

/// `dims` (the global shape, rank `rank`) divided per `layout` on `mesh`:
/// the local shape. Returns false, leaving the message in err, when a
/// sharded dim is not divisible by its axis size.
bool tp_local_shape(const tp_mesh *mesh, const tp_layout *layout, int rank,
                    const int64_t *dims, int64_t *local, char *err, size_t errlen);

#endif // SHARD_PASSES_SHARDING_RULES_H
