// Building and reading upstream `shard` dialect ops from C: the grid, the
// sharding annotations (shard.sharding / shard.shard) and the collectives
// (all_reduce, all_gather, reduce_scatter, all_to_all, all_slice). The C API
// has no builders for them, so ops are created in generic form with their
// inherent attributes, and MLIR's verifier checks them.
#ifndef SHARD_PASSES_SHARD_OPS_H
#define SHARD_PASSES_SHARD_OPS_H

#include <stdbool.h>

#include "mlir-c/IR.h"
#include "sharding_rules.h"

/// The name of the grid the sharding passes create ("mesh": axis 0 = dp,
/// axis 1 = tp).
#define TP_GRID_NAME "mesh"

/// Where shard ops are inserted: before `before` in `block` (or appended if
/// `before` is null).
typedef struct tp_insert {
  MlirContext ctx;
  MlirBlock block;
  MlirOperation before;
  MlirLocation loc;
} tp_insert;

/// Inserts `shard.grid @mesh(shape = DPxTP)` at the start of `module`'s body
/// unless one named "mesh" exists; returns false if one exists with another
/// shape (writing both shapes to err).
bool tp_ensure_grid(MlirOperation module, const tp_mesh *mesh, char *err,
                    size_t errlen);

/// Reads the shape of `shard.grid @mesh` in `module` into `mesh`; false if
/// there is none or it is not 2-D.
bool tp_read_grid(MlirOperation module, tp_mesh *mesh);

/// `shard.sharding @mesh split_axes = ...` for `layout` on a tensor of
/// `rank` dims; returns its result.
MlirValue tp_build_sharding(tp_insert *at, const tp_layout *layout, int rank);

/// `shard.shard %value to %sharding [annotate_for_users]`.
MlirValue tp_build_shard(tp_insert *at, MlirValue value, MlirValue sharding,
                         bool annotate_for_users);

/// The layout a `shard.sharding` op describes (its split_axes; no partial
/// axes exist in LLVM 22's shard dialect). False if `op` is not one.
bool tp_read_sharding(MlirOperation sharding_op, tp_layout *layout);

typedef enum tp_collective {
  TP_ALL_REDUCE,
  TP_ALL_GATHER,
  TP_REDUCE_SCATTER,
  TP_ALL_TO_ALL,
  TP_ALL_SLICE,
} tp_collective;

/// Builds one collective on grid axis `axis` producing `result_type`.
/// `dim` is the gather/scatter/slice axis (all_to_all: the split axis, with
/// `dim2` the concat axis); `reduction_max` picks max over sum.
MlirValue tp_build_collective(tp_insert *at, tp_collective kind, MlirValue value,
                              int axis, int dim, int dim2, bool reduction_max,
                              MlirType result_type);

/// True if `op` is the upstream op `name` (e.g. "shard.shard").
bool tp_op_is(MlirOperation op, const char *name);

/// True if `op` is one of the collectives tp_build_collective builds
/// (shard.all_reduce, all_gather, reduce_scatter, all_slice, all_to_all).
bool tp_is_collective(MlirOperation op);

/// Reports every multi-block func.func in `module`; returns false if any.
bool tp_check_functions(MlirOperation module);

/// True if `op` is a func.func with a body (not a declaration). A body of
/// more than one block is reported as an error on `op` (the passes handle
/// straight-line model graphs only) and gives false too.
bool tp_is_defined_func(MlirOperation op);

#endif // SHARD_PASSES_SHARD_OPS_H
