// Warnings from our passes. MLIR's C API can emit errors on a location
// (mlirEmitError) but not warnings, so warnings go to a handler the driver
// sets (tools/common/diagnostics.h), or to stderr in the same
// `file:line:col: warning: message` form.
#ifndef SHARD_PASSES_WARNING_H
#define SHARD_PASSES_WARNING_H

#include <stdio.h>

#include "mlir-c/IR.h"

/// Prints `loc` as `file:line:col` when it is (or wraps) a file location,
/// else in MLIR's `loc(...)` syntax; columns on line 1 are reduced by
/// `column_shift_line1` (see tools/common/source.h).
void tp_print_location(FILE *out, MlirLocation loc, int column_shift_line1);

/// Reports a warning of a pass at `loc`: to the handler set with
/// tp_set_warning_handler, else as "LOC: warning: MESSAGE" on stderr.
void tp_emit_warning(MlirLocation loc, const char *message);

/// A receiver of the passes' warnings (a driver's diagnostics: printed
/// with the source line, or checked by --verify-diagnostics).
typedef void (*tp_warning_handler)(MlirLocation loc, const char *message, void *data);

/// Sends every later tp_emit_warning to `fn` with `data` (NULL: back to
/// stderr). Process-wide: a driver sets it once, before running passes.
void tp_set_warning_handler(tp_warning_handler fn, void *data);

#endif // SHARD_PASSES_WARNING_H
