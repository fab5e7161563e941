// Messages about a place in a source file, laid out as LLVM's SourceMgr
// prints them (and so as mlir-opt prints diagnostics):
//
//   file:line:col: error: message
//     the source line, tabs expanded to 8-column stops
//     ^~~~ a caret under the column, '~' under a range
//
// A message with no source position prints as "<unknown>:0: error: ...";
// one whose line or column cannot be found in the file as
// "file:line:col: error: ..." alone.
#ifndef SHARD_TOOLS_SOURCE_MESSAGE_H
#define SHARD_TOOLS_SOURCE_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

/// A source text held in memory, under the file name its locations carry
/// ("<stdin>" for standard input). Locations naming another file are
/// quoted from that file on disk, read when needed, as mlir-opt does.
typedef struct tool_source {
  const char *name;
  const char *text;
  size_t len;
} tool_source;

/// The file position of a location: the first `file:line:col` location in
/// it (a name location's child, a call site's callee then caller, each
/// part of a fused location, in that order), as MLIR's findInstanceOf
/// finds it. `found` is false when it has none. Columns on line 1 are
/// reduced by `column_shift_line1` (see tools/common/source.h).
typedef struct tool_file_loc {
  MlirStringRef file;
  unsigned line, col;
  bool found;
} tool_file_loc;

tool_file_loc tool_find_file_loc(MlirLocation loc, int column_shift_line1);

/// "error", "warning", "note" or "remark".
const char *tool_severity_name(MlirDiagnosticSeverity s);

/// Prints `msg` at byte `offset` of `src` (its line and column counted
/// from there), with '~' under the `range_len` bytes from `offset` (0: a
/// caret alone).
void tool_message_at(FILE *out, const tool_source *src, size_t offset, size_t range_len,
                     MlirDiagnosticSeverity severity, const char *msg);

/// Prints `msg` with no source position: "<unknown>:0: KIND: MSG".
void tool_message_unknown(FILE *out, MlirDiagnosticSeverity severity, const char *msg);

/// Prints `msg` at location `loc` as MLIR's SourceMgrDiagnosticHandler
/// does: at its file position, with the source line and caret when
/// `show_line` and the position is in `src` (or in the named file on
/// disk); a location without a file position is printed before the
/// message ("<unknown>:0: error: loc(...): msg"), an unknown one not at all.
void tool_message_loc(FILE *out, const tool_source *src, MlirLocation loc,
                      int column_shift_line1, MlirDiagnosticSeverity severity,
                      const char *msg, bool show_line);

/// A growable NUL-terminated string, filled by tool_text_append (an
/// MlirStringCallback) for the C API's printers. Free `data` with free().
typedef struct tool_text {
  char *data;
  size_t len, cap;
} tool_text;

void tool_text_append(MlirStringRef s, void *text);

#endif // SHARD_TOOLS_SOURCE_MESSAGE_H
