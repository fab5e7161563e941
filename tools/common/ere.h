// POSIX extended regular expressions as LLVM's Regex reads them (its
// BSD-derived engine), translated for the C library's regcomp: the two
// disagree on a few patterns, and --verify-diagnostics must accept and
// refuse what mlir-opt does, with its messages.
//
// LLVM's reading, where glibc's differs: '{' not followed by a digit is a
// literal brace; an unmatched ')' is an error; a repetition operator right
// after another ('a**') is an error; an empty pattern or alternative
// ('', 'a||b', '(|a)') is an error, an empty group '()' is not.
#ifndef SHARD_TOOLS_ERE_H
#define SHARD_TOOLS_ERE_H

#include <stdbool.h>
#include <stddef.h>

#include "source_message.h"

/// Appends `s[0..n)` to `out` with every character that is special in an
/// extended regex ("()^$|*+?.[]\{}") escaped by a backslash, as LLVM's
/// Regex::escape does.
void tool_ere_append_literal(tool_text *out, const char *s, size_t n);

/// Checks `re[0..n)` as LLVM's Regex would and appends it to `out` as a
/// group "(...)" in glibc's spelling. On an invalid pattern returns false
/// with LLVM's message for it ("parentheses not balanced", "repetition-
/// operator operand invalid", ...) in `why` (size `whylen`).
bool tool_ere_append_group(tool_text *out, const char *re, size_t n, char *why,
                           size_t whylen);

#endif // SHARD_TOOLS_ERE_H
