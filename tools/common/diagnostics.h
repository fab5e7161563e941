// Diagnostics for our command-line tools: MLIR diagnostics printed to stderr
// as `file:line:col: error: message`, the form editors and lit understand.
#ifndef SHARD_TOOLS_DIAGNOSTICS_H
#define SHARD_TOOLS_DIAGNOSTICS_H

#include <stdio.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

/// State of one attached handler. `column_shift_line1`: columns on line 1
/// are reduced by this many characters (the driver's wrapping of an input
/// in `module {` shifts them). `errors` counts the errors printed.
typedef struct tool_diagnostics {
  FILE *out;
  int column_shift_line1;
  int errors;
} tool_diagnostics;

/// Makes `state` receive every diagnostic of `ctx` (printed to state->out,
/// which defaults to stderr if NULL). `state` must outlive the context or
/// the handler (mlirContextDetachDiagnosticHandler with the returned id).
MlirDiagnosticHandlerID tool_diagnostics_attach(MlirContext ctx,
                                                tool_diagnostics *state);

#endif // SHARD_TOOLS_DIAGNOSTICS_H
