// LLVM's reading of extended regular expressions, for regcomp (ere.h).
// The rules and messages are those of LLVM's regcomp.c/regerror.c (from
// 4.4BSD), checked against mlir-opt 22's "invalid regex:" output.
#include "ere.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kSpecial[] = "()^$|*+?.[]\\{}";

static void put(tool_text *out, const char *s, size_t n) {
  tool_text_append(mlirStringRefCreate(s, n), out);
}

void tool_ere_append_literal(tool_text *out, const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (s[i] && strchr(kSpecial, s[i]))
      put(out, "\\", 1);
    put(out, s + i, 1);
  }
}

// LLVM's message for a regcomp error code.
static const char *message(int code) {
  switch (code) {
  case REG_ECOLLATE: return "invalid collating element";
  case REG_ECTYPE: return "invalid character class";
  case REG_EESCAPE: return "trailing backslash (\\)";
  case REG_ESUBREG: return "invalid backreference number";
  case REG_EBRACK: return "brackets ([ ]) not balanced";
  case REG_EPAREN: return "parentheses not balanced";
  case REG_EBRACE: return "braces not balanced";
  case REG_BADBR: return "invalid repetition count(s)";
  case REG_ERANGE: return "invalid character range";
  case REG_ESPACE: return "out of memory";
  case REG_BADRPT: return "repetition-operator operand invalid";
  default: return "invalid regular expression";
  }
}

enum { kEmpty = -1 }; // LLVM's REG_EMPTY, which glibc lacks
enum { kMaxDepth = 64, kDupMax = 255 };

// The end of the bracket expression starting at re[i] == '[', or 0 when
// it is not closed.
static size_t bracket_end(const char *re, size_t n, size_t i) {
  size_t j = i + 1;
  if (j < n && re[j] == '^')
    ++j;
  if (j < n && re[j] == ']')
    ++j;
  while (j < n && re[j] != ']') {
    if (re[j] == '[' && j + 1 < n && strchr(":.=", re[j + 1])) {
      char kind = re[j + 1];
      size_t k = j + 2;
      while (k + 1 < n && !(re[k] == kind && re[k + 1] == ']'))
        ++k;
      if (k + 1 >= n)
        return 0;
      j = k + 2;
    } else {
      ++j;
    }
  }
  return j < n ? j : 0;
}

// Reads decimal digits at re[*j], capped just past kDupMax.
static long read_count(const char *re, size_t n, size_t *j) {
  long v = 0;
  for (; *j < n && isdigit((unsigned char)re[*j]); ++*j)
    v = v > kDupMax ? v : v * 10 + (re[*j] - '0');
  return v;
}

// An interval "{m}", "{m,}" or "{m,n}" at re[i], checked in LLVM's order
// (the counts before the closing brace); its end (the '}') in *end.
static int interval(const char *re, size_t n, size_t i, size_t *end) {
  size_t j = i + 1;
  long lo = read_count(re, n, &j);
  if (lo > kDupMax)
    return REG_BADBR;
  if (j < n && re[j] == ',') {
    ++j;
    long hi = j < n && isdigit((unsigned char)re[j]) ? read_count(re, n, &j) : kDupMax;
    if (hi > kDupMax || lo > hi)
      return REG_BADBR;
  }
  if (j >= n || re[j] != '}')
    return memchr(re + j, '}', n - j) ? REG_BADBR : REG_EBRACE;
  *end = j;
  return 0;
}

// Walks `re` as LLVM's parser does, copying it to `out` in glibc's
// spelling; returns 0 or the error code.
static int translate(const char *re, size_t n, tool_text *out) {
  bool branch_has_atom[kMaxDepth] = {false};
  int depth = 0;
  bool can_repeat = false, repeated = false;
  for (size_t i = 0; i < n; ++i) {
    char c = re[i];
    bool rep = c == '*' || c == '+' || c == '?' ||
               (c == '{' && i + 1 < n && isdigit((unsigned char)re[i + 1]));
    if (rep) {
      if (!can_repeat || repeated)
        return REG_BADRPT;
      size_t end = i;
      if (c == '{') {
        int err = interval(re, n, i, &end);
        if (err)
          return err;
      }
      put(out, re + i, end - i + 1);
      i = end;
      repeated = true;
      continue;
    }
    repeated = false;
    can_repeat = true;
    if (c == '(' && i + 1 < n && re[i + 1] == ')') {
      put(out, "()", 2);
      ++i;
    } else if (c == '(') {
      if (++depth >= kMaxDepth)
        return REG_ESPACE;
      branch_has_atom[depth] = false;
      can_repeat = false;
      put(out, "(", 1);
      continue;
    } else if (c == ')') {
      if (depth == 0)
        return REG_EPAREN;
      if (!branch_has_atom[depth])
        return kEmpty;
      --depth;
      put(out, ")", 1);
    } else if (c == '|') {
      if (!branch_has_atom[depth])
        return kEmpty;
      branch_has_atom[depth] = false;
      can_repeat = false;
      put(out, "|", 1);
      continue;
    } else if (c == '\\') {
      if (i + 1 >= n)
        return REG_EESCAPE;
      char e = re[++i];
      if (e >= '1' && e <= '9')
        put(out, re + i - 1, 2); // a back-reference
      else
        tool_ere_append_literal(out, &e, 1); // LLVM has no \w, \b, ...
    } else if (c == '[') {
      size_t end = bracket_end(re, n, i);
      if (!end)
        return REG_EBRACK;
      put(out, re + i, end - i + 1);
      i = end;
    } else if (c == '{') {
      put(out, "\\{", 2); // not an interval: a literal brace
    } else if (c == '$' && i + 1 < n && strchr("*+?{", re[i + 1])) {
      put(out, "($)", 3); // LLVM repeats an end anchor; glibc needs a group
    } else {
      can_repeat = c != '^'; // '^*' is refused
      put(out, re + i, 1);
    }
    branch_has_atom[depth] = true;
  }
  if (depth > 0)
    return REG_EPAREN;
  return branch_has_atom[0] ? 0 : kEmpty;
}

bool tool_ere_append_group(tool_text *out, const char *re, size_t n, char *why,
                           size_t whylen) {
  // Checked alone, as LLVM checks each {{...}} (back-references count
  // from its own groups), then added as a group.
  tool_text part = {0};
  put(&part, "", 0);
  int err = translate(re, n, &part);
  if (!err && part.data) {
    regex_t check;
    err = regcomp(&check, part.data, REG_EXTENDED | REG_NOSUB);
    if (!err)
      regfree(&check);
  }
  if (err || !part.data)
    snprintf(why, whylen, "%s",
             err == kEmpty ? "empty (sub)expression" : message(part.data ? err : REG_ESPACE));
  else {
    put(out, "(", 1);
    put(out, part.data, part.len);
    put(out, ")", 1);
  }
  free(part.data);
  return !err && part.data;
}
