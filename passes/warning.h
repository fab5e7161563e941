// Warnings from our passes. MLIR's C API can emit errors on a location
// (mlirEmitError) but not warnings, so warnings are printed to stderr here
// in the same `file:line:col: warning: message` form the tools use.
#ifndef SHARD_PASSES_WARNING_H
#define SHARD_PASSES_WARNING_H

#include <stdio.h>

#include "mlir-c/IR.h"

/// Prints `loc` as `file:line:col` when it is (or wraps) a file location,
/// else in MLIR's `loc(...)` syntax; columns on line 1 are reduced by
/// `column_shift_line1` (see tools/common/source.h).
void tp_print_location(FILE *out, MlirLocation loc, int column_shift_line1);

/// Prints "LOC: warning: MESSAGE" to stderr.
void tp_emit_warning(MlirLocation loc, const char *message);

#endif // SHARD_PASSES_WARNING_H
