// Building LLVM-dialect ops through the MLIR C API (generic operation state
// and the types of mlir-c/Dialect/LLVM.h): the few ops lower-to-runtime
// emits (functions, globals, constants, aggregates, calls, branches), each
// at a given location. The C API has no typed builders for the llvm
// dialect; these fill in the ops' inherent attributes as the dialect
// defines them (see `mlir-opt --mlir-print-op-generic` of any llvm op).
#ifndef SHARD_PASSES_LLVM_BUILDER_H
#define SHARD_PASSES_LLVM_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlir-c/IR.h"

/// Where ops go: appended to `block` at location `loc`; the common types.
typedef struct lb_builder {
  MlirContext ctx;
  MlirBlock block;
  MlirLocation loc;
  MlirType ptr, i1, i32, i64, f64;
} lb_builder;

/// A builder for `ctx` appending to `block` (null: none yet) at `loc`.
lb_builder lb_create(MlirContext ctx, MlirBlock block, MlirLocation loc);

//===----------------------------------------------------------------------===//
// Module level
//===----------------------------------------------------------------------===//

/// `llvm.func @name` of LLVM function type `type`: a declaration when
/// `body` is NULL, else a definition whose entry block (arguments of the
/// type's inputs) is returned in *body.
MlirOperation lb_func(lb_builder *b, const char *name, MlirType type, MlirBlock *body);

/// A private constant global holding `len` bytes of `data` and a NUL
/// (!llvm.array<len + 1 x i8>).
MlirOperation lb_global_string(lb_builder *b, const char *name, const char *data, size_t len);

/// A constant global of `type` (external linkage when `external`, else
/// private); with `init`, its initializer region's block is returned there
/// (end it with lb_return of the value), else it is a declaration.
MlirOperation lb_global(lb_builder *b, const char *name, MlirType type, bool external,
                        MlirBlock *init);

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

/// An integer constant of integer type `type`.
MlirValue lb_const_int(lb_builder *b, MlirType type, int64_t v);
/// An f64 constant (bit exact).
MlirValue lb_const_f64(lb_builder *b, double v);
/// The zero value of `type`: the null pointer, or an aggregate of zeros.
MlirValue lb_zero(lb_builder *b, MlirType type);
/// An undefined value of `type` (the start of an aggregate).
MlirValue lb_undef(lb_builder *b, MlirType type);
/// The address of the global or function `name`.
MlirValue lb_address_of(lb_builder *b, const char *name);
/// `agg` with `v` inserted at the `n`-index `position`.
MlirValue lb_insert(lb_builder *b, MlirValue agg, MlirValue v, int n, const int64_t *position);

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

/// A call of `callee` with `n` arguments returning `result` (one value).
MlirValue lb_call(lb_builder *b, const char *callee, int n, const MlirValue *args,
                  MlirType result);
/// i1: a != b (pointers or integers).
MlirValue lb_icmp_ne(lb_builder *b, MlirValue a, MlirValue c);
/// Branches to `yes` with `nargs` arguments when `cond`, else to `no`.
void lb_cond_br(lb_builder *b, MlirValue cond, MlirBlock yes, int nargs,
                const MlirValue *args, MlirBlock no);
/// Returns `v`.
void lb_return(lb_builder *b, MlirValue v);

#endif // SHARD_PASSES_LLVM_BUILDER_H
