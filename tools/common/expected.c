// --verify-diagnostics (expected.h): the expectations of a source, and the
// checking of each diagnostic against them.
#include "expected.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ere.h"

static const char *const kKinds[] = {"error", "warning", "note", "remark"};
static const MlirDiagnosticSeverity kSeverities[] = {MlirDiagnosticError, MlirDiagnosticWarning,
                                                     MlirDiagnosticNote, MlirDiagnosticRemark};

// Does [s, e) start with the NUL-terminated `word`?
static bool starts(const char *s, const char *e, const char *word) {
  size_t n = strlen(word);
  return (size_t)(e - s) >= n && !memcmp(s, word, n);
}

// The designator parts of one line, as MLIR's pattern
// `expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *{{(.*)}}$`
// reads them from the line with its trailing blanks removed.
typedef struct designator {
  const char *start; // "expected-"
  int kind;          // index into kKinds
  bool re;
  char where;        // 0 (none), '+', '-', 'a'bove, 'b'elow, 'u'nknown
  unsigned offset;   // N of @+N / @-N
  const char *text;  // between the first {{ and the last }}
  size_t text_len;
} designator;

// Parses a designator starting at `p` (a "expected-" in [p, e)).
static bool parse_at(const char *p, const char *e, designator *d) {
  *d = (designator){.start = p};
  p += strlen("expected-");
  d->kind = -1;
  for (int k = 0; k < 4 && d->kind < 0; ++k)
    if (starts(p, e, kKinds[k])) {
      d->kind = k;
      p += strlen(kKinds[k]);
    }
  if (d->kind < 0)
    return false;
  if ((d->re = starts(p, e, "-re")))
    p += 3;
  while (p < e && *p == ' ')
    ++p;
  if (p < e && *p == '@') {
    ++p;
    if (p < e && (*p == '+' || *p == '-') && p + 1 < e && isdigit((unsigned char)p[1])) {
      d->where = *p++;
      const char *digits = p;
      while (p < e && isdigit((unsigned char)*p))
        ++p;
      // LLVM's getAsInteger with radix 0: a leading 0 means octal.
      d->offset = (unsigned)strtoul(digits, NULL, digits[0] == '0' ? 8 : 10);
    } else if (starts(p, e, "above") || starts(p, e, "below") || starts(p, e, "unknown")) {
      d->where = *p;
      p += *p == 'u' ? 7 : 5;
    } else {
      return false;
    }
    while (p < e && *p == ' ')
      ++p;
  }
  if (!starts(p, e, "{{") || e - p < 4 || e[-1] != '}' || e[-2] != '}')
    return false;
  d->text = p + 2;
  d->text_len = (size_t)(e - 2 - d->text);
  return true;
}

// The leftmost designator of line [s, e) (trailing blanks not removed yet).
static bool find_designator(const char *s, const char *e, designator *d) {
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\v' || e[-1] == '\f' ||
                   e[-1] == '\r' || e[-1] == '\n'))
    --e;
  for (const char *p = s; p < e; ++p)
    if (*p == 'e' && starts(p, e, "expected-") && parse_at(p, e, d))
      return true;
  return false;
}

static void scan_error(tool_expectations *e, FILE *out, const tool_expected *x,
                       const char *msg) {
  tool_message_at(out, e->src, x->at, x->text_len, MlirDiagnosticError, msg);
  e->failed = true;
}

// Builds the pattern of a -re expectation: literal text escaped, each
// {{...}} part a group. Prints the error and returns false when a part is
// unclosed or not a valid regex.
static bool compile_regex(tool_expectations *e, FILE *out, tool_expected *x) {
  const char *s = e->src->text + x->text_at, *end = s + x->text_len;
  tool_text pattern = {0};
  tool_text_append(mlirStringRefCreate("", 0), &pattern);
  while (s < end) {
    const char *open = s;
    while (open < end && !starts(open, end, "{{"))
      ++open;
    tool_ere_append_literal(&pattern, s, (size_t)(open - s));
    if (open == end)
      break;
    const char *close = open + 2;
    while (close < end && !starts(close, end, "}}"))
      ++close;
    if (close == end) {
      scan_error(e, out, x, "found start of regex with no end '}}'");
      free(pattern.data);
      return false;
    }
    char why[128] = "invalid regex: ";
    if (!tool_ere_append_group(&pattern, open + 2, (size_t)(close - open - 2),
                               why + strlen(why), sizeof why - strlen(why))) {
      scan_error(e, out, x, why);
      free(pattern.data);
      return false;
    }
    s = close + 2;
  }
  // The parts were each valid; should the whole not compile (a back-
  // reference counts the groups added around the parts), it matches
  // nothing, as an invalid llvm::Regex does.
  x->is_regex = true;
  x->never = !pattern.data || regcomp(&x->re, pattern.data, REG_EXTENDED | REG_NOSUB) != 0;
  free(pattern.data);
  return true;
}

// Records the designator `d` of 0-based line `line`; `below` collects the
// indices of @below expectations waiting for the next plain line.
static bool add(tool_expectations *e, FILE *out, const designator *d, unsigned line,
                unsigned last_plain, unsigned num_lines, int **below, int *num_below) {
  tool_expected x = {
      .kind = kSeverities[d->kind],
      .line = line + 1,
      .at = (size_t)(d->start - e->src->text),
      .text_at = (size_t)(d->text - e->src->text),
      .text_len = d->text_len,
  };
  if (d->re && !compile_regex(e, out, &x))
    return true; // reported; the expectation is dropped, as MLIR drops it
  if (d->where == '+')
    x.line += d->offset;
  else if (d->where == '-')
    x.line -= d->offset;
  else if (d->where == 'a')
    x.line = last_plain + 1;
  else if (d->where == 'b')
    x.line = num_lines; // dangling until a plain line follows
  x.unknown = d->where == 'u';
  tool_expected *grown = realloc(e->items, (size_t)(e->count + 1) * sizeof *grown);
  bool is_below = d->where == 'b';
  int *waiting = is_below ? realloc(*below, (size_t)(*num_below + 1) * sizeof **below) : NULL;
  if (grown)
    e->items = grown;
  if (waiting)
    *below = waiting;
  if (!grown || (is_below && !waiting)) {
    if (x.is_regex && !x.never)
      regfree(&x.re);
    return false;
  }
  if (d->where == 'b')
    (*below)[(*num_below)++] = e->count;
  e->items[e->count++] = x;
  return true;
}

bool tool_expectations_scan(tool_expectations *e, const tool_source *src,
                            bool only_expected, FILE *out) {
  *e = (tool_expectations){.src = src, .only_expected = only_expected};
  const char *text = src->text, *end = text + src->len;
  unsigned num_lines = 1;
  for (const char *p = text; p < end; ++p)
    num_lines += *p == '\n';
  int *below = NULL, num_below = 0;
  unsigned last_plain = 0, line = 0;
  bool ok = true;
  for (const char *s = text; ok && line < num_lines; ++line) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *le = nl ? nl : end;
    designator d;
    if (find_designator(s, le, &d)) {
      ok = add(e, out, &d, line, last_plain, num_lines, &below, &num_below);
    } else {
      for (int i = 0; i < num_below; ++i)
        e->items[below[i]].line = line + 1;
      num_below = 0;
      last_plain = line;
    }
    s = nl ? nl + 1 : end;
  }
  free(below);
  return ok;
}

// Does the message match expectation `x`?
static bool matches(const tool_expectations *e, const tool_expected *x, const char *msg) {
  if (x->is_regex)
    return !x->never && regexec(&x->re, msg, 0, NULL, 0) == 0;
  const char *text = e->src->text + x->text_at;
  size_t n = x->text_len, len = strlen(msg);
  for (size_t i = 0; i + n <= len; ++i)
    if (!memcmp(msg + i, text, n))
      return true;
  return false;
}

void tool_expectations_check(tool_expectations *e, FILE *out, MlirLocation loc,
                             int column_shift_line1, MlirDiagnosticSeverity kind,
                             const char *msg) {
  tool_file_loc f = tool_find_file_loc(loc, column_shift_line1);
  // Expectations live in the input; a diagnostic in another file has none.
  bool in_source = f.found && f.file.length == strlen(e->src->name) &&
                   !memcmp(f.file.data, e->src->name, f.file.length);
  tool_expected *near = NULL;
  for (int i = 0; (in_source || !f.found) && i < e->count; ++i) {
    tool_expected *x = &e->items[i];
    if (x->unknown == f.found || (f.found && x->line != f.line) || !matches(e, x, msg))
      continue;
    if (x->kind == kind) {
      x->matched = true;
      return;
    }
    near = x;
  }
  if (e->only_expected)
    return;
  e->failed = true;
  char buf[160];
  if (near) {
    snprintf(buf, sizeof buf, "'%s' diagnostic emitted when expecting a '%s'",
             tool_severity_name(kind), tool_severity_name(near->kind));
    if (near->unknown)
      tool_message_unknown(out, MlirDiagnosticError, buf);
    else
      tool_message_at(out, e->src, near->at, 0, MlirDiagnosticError, buf);
    return;
  }
  size_t n = strlen(msg) + 32;
  char *unexpected = malloc(n);
  if (!unexpected)
    return;
  snprintf(unexpected, n, "unexpected %s: %s", tool_severity_name(kind), msg);
  tool_message_loc(out, e->src, loc, column_shift_line1, MlirDiagnosticError, unexpected,
                   true);
  free(unexpected);
}

bool tool_expectations_finish(tool_expectations *e, FILE *out) {
  for (int unknown = 0; unknown < 2; ++unknown)
    for (int i = 0; i < e->count; ++i) {
      tool_expected *x = &e->items[i];
      if (x->matched || x->unknown != unknown)
        continue;
      size_t n = x->text_len + 64;
      char *msg = malloc(n);
      if (!msg)
        return false;
      snprintf(msg, n, "expected %s \"%.*s\" was not produced", tool_severity_name(x->kind),
               (int)x->text_len, e->src->text + x->text_at);
      if (x->unknown)
        tool_message_unknown(out, MlirDiagnosticError, msg);
      else
        tool_message_at(out, e->src, x->at, x->text_len, MlirDiagnosticError, msg);
      free(msg);
      e->failed = true;
    }
  return !e->failed;
}

void tool_expectations_free(tool_expectations *e) {
  for (int i = 0; i < e->count; ++i)
    if (e->items[i].is_regex && !e->items[i].never)
      regfree(&e->items[i].re);
  free(e->items);
  e->items = NULL;
  e->count = 0;
}
