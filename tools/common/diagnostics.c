// Prints MLIR diagnostics as `file:line:col: severity: message` on stderr.
#include "diagnostics.h"

#include "warning.h"

static void print_to_file(MlirStringRef s, void *data) {
  fwrite(s.data, 1, s.length, (FILE *)data);
}

static const char *severity_name(MlirDiagnosticSeverity s) {
  switch (s) {
  case MlirDiagnosticError: return "error";
  case MlirDiagnosticWarning: return "warning";
  case MlirDiagnosticNote: return "note";
  case MlirDiagnosticRemark: return "remark";
  }
  return "error";
}

static void print_one(tool_diagnostics *st, MlirDiagnostic d) {
  tp_print_location(st->out, mlirDiagnosticGetLocation(d), st->column_shift_line1);
  fprintf(st->out, ": %s: ", severity_name(mlirDiagnosticGetSeverity(d)));
  mlirDiagnosticPrint(d, print_to_file, st->out);
  fputc('\n', st->out);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); ++i)
    print_one(st, mlirDiagnosticGetNote(d, i));
}

static MlirLogicalResult handle(MlirDiagnostic d, void *data) {
  tool_diagnostics *st = data;
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
    ++st->errors;
  print_one(st, d);
  fflush(st->out);
  return mlirLogicalResultSuccess();
}

MlirDiagnosticHandlerID tool_diagnostics_attach(MlirContext ctx,
                                                tool_diagnostics *state) {
  if (!state->out)
    state->out = stderr;
  return mlirContextAttachDiagnosticHandler(ctx, handle, state, NULL);
}
