// Prints or checks MLIR diagnostics (diagnostics.h).
#include "diagnostics.h"

#include <stdlib.h>
#include <string.h>

#include "warning.h"

static char *message_of(MlirDiagnostic d) {
  tool_text t = {0};
  mlirDiagnosticPrint(d, tool_text_append, &t);
  return t.data ? t.data : calloc(1, 1);
}

// The note MLIR attaches to an op's error naming the op ("see current
// operation: ..."). mlir-opt turns it off under --verify-diagnostics
// (printOpOnDiagnostic), which the C API cannot; it is skipped there.
static bool is_op_dump(const char *msg) {
  return !strncmp(msg, "see current operation: ", 23);
}

static void check(tool_diagnostics *st, MlirDiagnostic d) {
  char *msg = message_of(d);
  if (msg)
    tool_expectations_check(st->expect, st->out, mlirDiagnosticGetLocation(d),
                            st->column_shift_line1, mlirDiagnosticGetSeverity(d), msg);
  free(msg);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
    MlirDiagnostic note = mlirDiagnosticGetNote(d, i);
    char *text = message_of(note);
    if (text && !is_op_dump(text))
      tool_expectations_check(st->expect, st->out, mlirDiagnosticGetLocation(note),
                              st->column_shift_line1, MlirDiagnosticNote, text);
    free(text);
  }
}

// As MLIR's SourceMgrDiagnosticHandler: the diagnostic, then its notes,
// each quoting its line unless it is at the location just printed.
static void print(tool_diagnostics *st, MlirDiagnostic d) {
  MlirLocation prev = mlirDiagnosticGetLocation(d);
  char *msg = message_of(d);
  if (msg)
    tool_message_loc(st->out, st->source, prev, st->column_shift_line1,
                     mlirDiagnosticGetSeverity(d), msg, true);
  free(msg);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i) {
    MlirDiagnostic note = mlirDiagnosticGetNote(d, i);
    MlirLocation loc = mlirDiagnosticGetLocation(note);
    char *text = message_of(note);
    if (text)
      tool_message_loc(st->out, st->source, loc, st->column_shift_line1,
                       mlirDiagnosticGetSeverity(note), text, !mlirLocationEqual(prev, loc));
    free(text);
    prev = loc;
  }
}

static MlirLogicalResult handle(MlirDiagnostic d, void *data) {
  tool_diagnostics *st = data;
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
    ++st->errors;
  if (st->expect)
    check(st, d);
  else
    print(st, d);
  fflush(st->out);
  return mlirLogicalResultSuccess();
}

static void warn(MlirLocation loc, const char *message, void *data) {
  tool_diagnostics *st = data;
  if (st->expect)
    tool_expectations_check(st->expect, st->out, loc, st->column_shift_line1,
                            MlirDiagnosticWarning, message);
  else
    tool_message_loc(st->out, st->source, loc, st->column_shift_line1,
                     MlirDiagnosticWarning, message, true);
  fflush(st->out);
}

MlirDiagnosticHandlerID tool_diagnostics_attach(MlirContext ctx,
                                                tool_diagnostics *state) {
  if (!state->out)
    state->out = stderr;
  tp_set_warning_handler(warn, state);
  return mlirContextAttachDiagnosticHandler(ctx, handle, state, NULL);
}
