// Source-quoting messages in LLVM SourceMgr's layout (source_message.h).
// The layout (location prefix, tab stops of 8, '~' ranges, caret, trailing
// blanks trimmed, no caret line for a line with non-ASCII bytes) follows
// llvm/lib/Support/SourceMgr.cpp (SMDiagnostic::print), which mlir-opt
// prints its diagnostics with.
#include "source_message.h"

#include <stdlib.h>
#include <string.h>

#include "source.h"

enum { kTabStop = 8 };

void tool_text_append(MlirStringRef s, void *data) {
  tool_text *t = data;
  if (t->len + s.length + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + s.length + 1)
      cap *= 2;
    char *bigger = realloc(t->data, cap);
    if (!bigger)
      return; // out of memory: the message is cut short, never overrun
    t->data = bigger;
    t->cap = cap;
  }
  memcpy(t->data + t->len, s.data, s.length);
  t->len += s.length;
  t->data[t->len] = '\0';
}

const char *tool_severity_name(MlirDiagnosticSeverity s) {
  switch (s) {
  case MlirDiagnosticError: return "error";
  case MlirDiagnosticWarning: return "warning";
  case MlirDiagnosticNote: return "note";
  case MlirDiagnosticRemark: return "remark";
  }
  return "error";
}

static bool find_in(MlirLocation loc, int depth, tool_file_loc *out) {
  if (depth > 64)
    return false;
  if (mlirLocationIsAFileLineColRange(loc)) {
    out->file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    out->line = (unsigned)mlirLocationFileLineColRangeGetStartLine(loc);
    out->col = (unsigned)mlirLocationFileLineColRangeGetStartColumn(loc);
    return out->found = true;
  }
  if (mlirLocationIsAName(loc))
    return find_in(mlirLocationNameGetChildLoc(loc), depth + 1, out);
  if (mlirLocationIsACallSite(loc))
    return find_in(mlirLocationCallSiteGetCallee(loc), depth + 1, out) ||
           find_in(mlirLocationCallSiteGetCaller(loc), depth + 1, out);
  if (mlirLocationIsAFused(loc)) {
    unsigned n = mlirLocationFusedGetNumLocations(loc);
    MlirLocation *parts = n ? malloc(n * sizeof *parts) : NULL;
    bool found = false;
    if (parts) {
      mlirLocationFusedGetLocations(loc, parts);
      for (unsigned i = 0; i < n && !found; ++i)
        found = find_in(parts[i], depth + 1, out);
    }
    free(parts);
    return found;
  }
  return false;
}

tool_file_loc tool_find_file_loc(MlirLocation loc, int column_shift_line1) {
  tool_file_loc f = {.found = false};
  if (find_in(loc, 0, &f) && f.line == 1 && f.col > (unsigned)column_shift_line1)
    f.col -= (unsigned)column_shift_line1;
  return f;
}

// The source line [s, s+n) with each tab widened to the next 8-column stop.
static void print_source_line(FILE *out, const char *s, size_t n) {
  size_t col = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s[i] != '\t') {
      fputc(s[i], out);
      ++col;
      continue;
    }
    do {
      fputc(' ', out);
      ++col;
    } while (col % kTabStop != 0);
  }
  fputc('\n', out);
}

// The caret line under [s, s+n): '~' on columns [rb, re), '^' on column
// `caret` (0-based; past the end: just after it), tabs widened as in the
// source line, trailing blanks dropped.
static void print_caret_line(FILE *out, const char *s, size_t n, size_t caret, size_t rb,
                             size_t re) {
  char *line = malloc(n + 2);
  if (!line)
    return;
  memset(line, ' ', n + 1);
  for (size_t i = rb; i < re && i < n + 1; ++i)
    line[i] = '~';
  line[caret <= n ? caret : n] = '^';
  size_t len = n + 1;
  while (len > 0 && line[len - 1] == ' ')
    --len;
  size_t col = 0;
  for (size_t i = 0; i < len; ++i) {
    if (i >= n || s[i] != '\t') {
      fputc(line[i], out);
      ++col;
      continue;
    }
    do {
      fputc(line[i], out);
      ++col;
    } while (col % kTabStop != 0);
  }
  fputc('\n', out);
  free(line);
}

// One message: the location prefix (when `file`), the kind and message,
// then the quoted line [ls, ls+ln) with its caret at 0-based column `caret`
// and '~' on [rb, re), when `ls`.
static void print_message(FILE *out, const char *prefix, MlirDiagnosticSeverity severity,
                          const char *msg, const char *ls, size_t ln, size_t caret,
                          size_t rb, size_t re) {
  fprintf(out, "%s%s: %s\n", prefix, tool_severity_name(severity), msg);
  if (!ls)
    return;
  for (size_t i = 0; i < ln; ++i)
    if ((unsigned char)ls[i] & 0x80) {
      print_source_line(out, ls, ln);
      return;
    }
  print_source_line(out, ls, ln);
  print_caret_line(out, ls, ln, caret, rb, re);
}

void tool_message_unknown(FILE *out, MlirDiagnosticSeverity severity, const char *msg) {
  print_message(out, "<unknown>:0: ", severity, msg, NULL, 0, 0, 0, 0);
}

void tool_message_at(FILE *out, const tool_source *src, size_t offset, size_t range_len,
                     MlirDiagnosticSeverity severity, const char *msg) {
  const char *text = src->text, *end = src->text + src->len, *at = text + offset;
  const char *ls = at, *le = at;
  while (ls > text && ls[-1] != '\n' && ls[-1] != '\r')
    --ls;
  while (le < end && *le != '\n' && *le != '\r')
    ++le;
  // Line and column as SourceMgr counts them: newlines before `at`, and the
  // bytes since the last one.
  unsigned line = 1;
  const char *last_nl = NULL;
  for (const char *p = text; p < at; ++p)
    if (*p == '\n') {
      ++line;
      last_nl = p;
    }
  size_t col = (size_t)(at - (last_nl ? last_nl + 1 : text)) + 1;
  size_t rb = (size_t)(at - ls), re = rb + range_len;
  if (re > (size_t)(le - ls))
    re = (size_t)(le - ls);
  char prefix[4200];
  snprintf(prefix, sizeof prefix, "%.4000s:%u:%zu: ", src->name, line, col);
  print_message(out, prefix, severity, msg, ls, (size_t)(le - ls), (size_t)(at - ls),
                range_len ? rb : 0, range_len ? re : 0);
}

// The byte of `text` at 1-based `line` and `col`, as SourceMgr's
// FindLocForLineAndColumn finds it; NULL when the file has no such line or
// the line no such column.
static const char *find_line_col(const char *text, size_t len, unsigned line, unsigned col) {
  const char *p = text, *end = text + len;
  for (unsigned l = 1; l < line; ++l) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      return NULL;
    p = nl + 1;
  }
  size_t skip = col - 1;
  if ((size_t)(end - p) < skip)
    return NULL;
  for (size_t i = 0; i < skip; ++i)
    if (p[i] == '\n' || p[i] == '\r')
      return NULL;
  return p + skip;
}

// Prints `msg` at `f` quoting its line when the file (`src`, or on disk)
// has it; returns false, printing nothing, when it does not.
static bool message_quoting(FILE *out, const tool_source *src, tool_file_loc f,
                            MlirDiagnosticSeverity severity, const char *msg) {
  if (f.line == 0 || f.col == 0)
    return false;
  tool_source file = {.name = NULL};
  char *loaded = NULL;
  char name[4096];
  snprintf(name, sizeof name, "%.*s", (int)f.file.length, f.file.data);
  if (src && src->name && !strcmp(src->name, name)) {
    file = *src;
  } else {
    char why[64];
    size_t len = 0;
    // A file named by a location is read as mlir-opt reads it; one that is
    // not a readable regular file (or is huge) is quoted from nowhere.
    if (!(loaded = tool_read_file(name, (size_t)1 << 30, &len, why, sizeof why)))
      return false;
    file = (tool_source){.name = name, .text = loaded, .len = len};
  }
  const char *at = find_line_col(file.text, file.len, f.line, f.col);
  if (at)
    tool_message_at(out, &file, (size_t)(at - file.text), 0, severity, msg);
  free(loaded);
  return at != NULL;
}

void tool_message_loc(FILE *out, const tool_source *src, MlirLocation loc,
                      int column_shift_line1, MlirDiagnosticSeverity severity,
                      const char *msg, bool show_line) {
  tool_file_loc f = tool_find_file_loc(loc, column_shift_line1);
  if (!f.found) {
    tool_text t = {0};
    if (!mlirLocationEqual(loc, mlirLocationUnknownGet(mlirLocationGetContext(loc)))) {
      mlirLocationPrint(loc, tool_text_append, &t);
      tool_text_append(mlirStringRefCreateFromCString(": "), &t);
    }
    tool_text_append(mlirStringRefCreateFromCString(msg), &t);
    tool_message_unknown(out, severity, t.data ? t.data : msg);
    free(t.data);
    return;
  }
  if (show_line && message_quoting(out, src, f, severity, msg))
    return;
  char prefix[4200];
  snprintf(prefix, sizeof prefix, "%.*s:%u:%u: ", (int)(f.file.length < 4000 ? f.file.length : 4000),
           f.file.data, f.line, f.col);
  print_message(out, prefix, severity, msg, NULL, 0, 0, 0, 0);
}
