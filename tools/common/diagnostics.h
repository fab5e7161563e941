// Diagnostics for our command-line tools: MLIR diagnostics printed to
// stderr as mlir-opt prints them (`file:line:col: error: message`, the
// source line and a caret under the column; see source_message.h), or,
// under --verify-diagnostics, checked against the input's expected-*
// comments instead (expected.h). Warnings of our passes (passes/warning.h)
// take the same way.
#ifndef SHARD_TOOLS_DIAGNOSTICS_H
#define SHARD_TOOLS_DIAGNOSTICS_H

#include <stdio.h>

#include "expected.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "source_message.h"

/// State of one attached handler. `column_shift_line1`: columns on line 1
/// are reduced by this many characters (the driver's wrapping of an input
/// in `module {` shifts them). `errors` counts the errors seen. `source`:
/// the input text, quoted under messages about it (NULL: files are read
/// from disk when a location names them). `expect`: when set, diagnostics
/// are checked against it rather than printed.
typedef struct tool_diagnostics {
  FILE *out;
  int column_shift_line1;
  int errors;
  const tool_source *source;
  tool_expectations *expect;
} tool_diagnostics;

/// Makes `state` receive every diagnostic of `ctx` (printed to state->out,
/// which defaults to stderr if NULL), and the warnings of our passes.
/// `state` must outlive the context or the handler
/// (mlirContextDetachDiagnosticHandler with the returned id).
MlirDiagnosticHandlerID tool_diagnostics_attach(MlirContext ctx,
                                                tool_diagnostics *state);

#endif // SHARD_TOOLS_DIAGNOSTICS_H
