// Prints MLIR diagnostics as `file:line:col: severity: message` on stderr.
#include "diagnostics.h"

static void print_to_file(MlirStringRef s, void *data) {
  fwrite(s.data, 1, s.length, (FILE *)data);
}

// The innermost file location of `loc` (through name, call-site and fused
// locations), or a null location.
static MlirLocation file_location(MlirLocation loc) {
  for (int depth = 0; depth < 16; ++depth) {
    if (mlirLocationIsAFileLineColRange(loc))
      return loc;
    if (mlirLocationIsAName(loc))
      loc = mlirLocationNameGetChildLoc(loc);
    else if (mlirLocationIsACallSite(loc))
      loc = mlirLocationCallSiteGetCallee(loc);
    else if (mlirLocationIsAFused(loc) && mlirLocationFusedGetNumLocations(loc) > 0) {
      MlirLocation first[1];
      if (mlirLocationFusedGetNumLocations(loc) != 1)
        break;
      mlirLocationFusedGetLocations(loc, first);
      loc = first[0];
    } else
      break;
  }
  return (MlirLocation){NULL};
}

void tool_print_location(FILE *out, MlirLocation loc, int column_shift_line1) {
  MlirLocation file = file_location(loc);
  if (mlirLocationIsNull(file)) {
    mlirLocationPrint(loc, print_to_file, out);
    return;
  }
  MlirStringRef name = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(file));
  int line = mlirLocationFileLineColRangeGetStartLine(file);
  int col = mlirLocationFileLineColRangeGetStartColumn(file);
  if (line == 1 && col > column_shift_line1)
    col -= column_shift_line1;
  fprintf(out, "%.*s:%d:%d", (int)name.length, name.data, line, col);
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
  tool_print_location(st->out, mlirDiagnosticGetLocation(d), st->column_shift_line1);
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
