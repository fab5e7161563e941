// Printing of locations and warnings for passes (see warning.h).
#include "warning.h"

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

void tp_print_location(FILE *out, MlirLocation loc, int column_shift_line1) {
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

static tp_warning_handler g_handler;
static void *g_handler_data;

void tp_set_warning_handler(tp_warning_handler fn, void *data) {
  g_handler = fn;
  g_handler_data = data;
}

void tp_emit_warning(MlirLocation loc, const char *message) {
  if (g_handler) {
    g_handler(loc, message, g_handler_data);
    return;
  }
  tp_print_location(stderr, loc, 0);
  fprintf(stderr, ": warning: %s\n", message);
}
