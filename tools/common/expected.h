// --verify-diagnostics: checking the diagnostics a run produces against
// the `expected-*` comments of its input, with the semantics and messages
// of MLIR 22's SourceMgrDiagnosticVerifierHandler (mlir/lib/IR/
// Diagnostics.cpp), which mlir-opt uses; the C API has no binding of it.
//
// A comment `expected-KIND[-re] [@+N|@-N|@above|@below|@unknown] {{TEXT}}`
// (KIND: error, warning, note, remark) expects a diagnostic of that kind on
// its own line, N lines below or above, on the nearest line above or below
// that holds no expectation, or at an unknown location. Its message must
// contain TEXT; with `-re`, each `{{...}}` inside TEXT is a POSIX extended
// regular expression and the rest literal text. Each diagnostic that no
// expectation matches is an "unexpected" error; each expectation that no
// diagnostic matched is reported at the end ("was not produced").
#ifndef SHARD_TOOLS_EXPECTED_H
#define SHARD_TOOLS_EXPECTED_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "source_message.h"

/// One expected diagnostic.
typedef struct tool_expected {
  MlirDiagnosticSeverity kind;
  unsigned line;   // the 1-based line it must be reported on
  bool unknown;    // @unknown: at a location without a file position
  size_t at;       // byte offset of its "expected-" in the source
  size_t text_at;  // TEXT: byte offset and length in the source
  size_t text_len;
  bool is_regex;   // -re: `re` holds TEXT's pattern
  regex_t re;
  bool never;      // -re whose whole pattern failed to compile: no match
  bool matched;
} tool_expected;

/// The expectations of one source, and the verdict so far.
typedef struct tool_expectations {
  const tool_source *src;
  tool_expected *items;
  int count;
  bool only_expected; // --verify-diagnostics=only-expected: ignore others
  bool failed;
} tool_expectations;

/// Scans all of `src` (the whole input, before any split: expectations may
/// point across `// -----` lines, as mlir-opt's do) for expectations,
/// printing to `out` each malformed regex ("invalid regex: ...", "found
/// start of regex with no end '}}'"), which then fails the check. `src`
/// must outlive `e`. Returns false when out of memory.
bool tool_expectations_scan(tool_expectations *e, const tool_source *src,
                            bool only_expected, FILE *out);

/// Checks one diagnostic (a note is checked on its own): marks the
/// expectation it matches, or prints "unexpected KIND: MSG" at its location
/// (a near miss, an expectation of another kind on that line matching the
/// message, prints "'KIND' diagnostic emitted when expecting a 'KIND'" at
/// the expectation instead) and records the failure.
void tool_expectations_check(tool_expectations *e, FILE *out, MlirLocation loc,
                             int column_shift_line1, MlirDiagnosticSeverity kind,
                             const char *msg);

/// Prints each expectation that nothing matched ("expected KIND \"TEXT\"
/// was not produced", file ones in file order, then @unknown ones).
/// Returns true when every check passed.
bool tool_expectations_finish(tool_expectations *e, FILE *out);

void tool_expectations_free(tool_expectations *e);

#endif // SHARD_TOOLS_EXPECTED_H
