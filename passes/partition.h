// What an op's partition hooks (sharding_rules.h: tp_rule.refine,
// .localize, .partition, .rewrite; passes/partition_hooks.c) may ask of
// tp-partition while it rewrites one op of the global graph into its
// per-rank form: where local ops go, resharding, collectives, and what
// each original result became. Like upstream shard's
// ShardingInterface::partition, a hook builds the local form of its own op;
// tp_partition.c itself knows no op.
#ifndef SHARD_PASSES_PARTITION_H
#define SHARD_PASSES_PARTITION_H

#include <stdbool.h>

#include "mlir-c/IR.h"
#include "shard_ops.h"
#include "sharding_rules.h"

/// The partitioner's state (tp_partition.c).
typedef struct tp_part tp_part;

/// A function applied to a Partial value once it is reduced (a rowwise
/// linear's bias, added once after the all-reduce): returns the value that
/// replaces `v`, whose layout is *layout.
typedef MlirValue (*tp_epilogue_fn)(tp_part *p, MlirValue v, const tp_layout *layout,
                                    MlirValue arg);
typedef struct tp_epilogue {
  tp_epilogue_fn fn; // NULL: none
  MlirValue arg;
} tp_epilogue;

/// The mesh.
const tp_mesh *tp_part_mesh(const tp_part *p);

/// Creates op `name` at the end of the local function, at the location of
/// the op being partitioned: operands, result types and, when `like` is not
/// null, every attribute of `like`.
MlirOperation tp_part_build(tp_part *p, const char *name, MlirOperation like, int nops,
                            const MlirValue *ops, int nres, const MlirType *types);

/// A collective on `v` (tp_build_collective's arguments) that carries the
/// nn.module of `of`, the op whose output it moves.
MlirValue tp_part_collective(tp_part *p, tp_collective kind, MlirValue v, int axis, int dim,
                             int dim2, bool is_max, MlirType type, MlirOperation of);

/// Local value `v` (global type `global`, layout *layout) resharded on mesh
/// `axis` to `to`; updates *layout.
MlirValue tp_part_reshard_axis(tp_part *p, MlirValue v, MlirType global, tp_layout *layout,
                               int axis, tp_placement to);

/// The local value of original value `old` in layout `to` (collectives made
/// once per target and shared).
MlirValue tp_part_reshard(tp_part *p, MlirValue old, const tp_layout *to);

/// Records that original value `old` became local value `local` in
/// `layout`, with `epilogue` (or NULL) still to apply once it is reduced.
void tp_part_define(tp_part *p, MlirValue old, MlirValue local, const tp_layout *layout,
                    const tp_epilogue *epilogue);

/// The local type of a value of global type `global` in `layout` (an error
/// when a sharded dim does not divide).
MlirType tp_part_local_type(tp_part *p, MlirType global, const tp_layout *layout);

/// Remembers `n` values under `key` (an original value's pointer) for a later
/// op (a loss's statistics for its gradient); tp_part_stashed finds them.
void tp_part_stash(tp_part *p, const void *key, int n, const MlirValue *values);
bool tp_part_stashed(const tp_part *p, const void *key, int n, MlirValue *values);

/// The layout of the parameter named `name` (an nn.param string attribute).
bool tp_part_param_layout(tp_part *p, MlirAttribute name, tp_layout *out);

/// An error at the op being partitioned ("tp-partition: '<module>': ...").
__attribute__((format(printf, 2, 3))) void tp_part_error(tp_part *p, const char *fmt, ...);

#endif // SHARD_PASSES_PARTITION_H
