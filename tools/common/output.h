// Writing the tools' outputs so that a failed run never clobbers the
// previous output: a new or regular file is written as a temporary of its
// own beside it ("<path>.tmp.XXXXXX", created exclusively, so two runs
// writing one path never share it) and renamed over `path` only when everything succeeded (a symbolic link
// is written through: the file it resolves to is staged and replaced, the
// link kept). Stdout ("-", or a path naming the file stdout is open on,
// such as /dev/stdout) and character devices (/dev/null) are written
// directly.
#ifndef SHARD_TOOLS_OUTPUT_H
#define SHARD_TOOLS_OUTPUT_H

#include <stdbool.h>

/// Checks that `tool` may write `path` ("-" is stdout): stdout, a new or
/// regular file (or a link to one) or a character device, and not the file
/// `input` (NULL: none; stdout redirected onto `input` counts as it).
/// Prints "<tool>: ..." naming the path and returns false otherwise.
bool tool_check_output(const char *tool, const char *path, const char *input);

/// An output being written.
typedef struct tool_output {
  const char *path;  ///< the path the user named
  char dest[4096];   ///< the file a staged write replaces (a link's target)
  char target[4096]; ///< where to write now: `path` itself or "<dest>.tmp.XXXXXX"
  bool staged;       ///< `target` is the temporary, renamed by tool_output_finish
  bool to_stdout;    ///< "-" or the file stdout is open on: write to stdout
} tool_output;

/// Chooses where `path` is written (fills `out`; `path` must outlive it):
/// stdout (`to_stdout`: the caller writes to stdout), a device in place, or
/// a staged temporary beside the file (the one a link resolves to), created
/// empty here: call tool_output_finish whatever happens after a true
/// return, so that it is renamed or removed.
/// Returns false after printing "<tool>: ..." when the path is no longer
/// writable, a link's target cannot be named (srt_output_destination) or
/// the temporary's name would not fit in `target`.
bool tool_output_begin(const char *tool, const char *path, tool_output *out);

/// Ends the write: when `ok`, renames the temporary over `dest`; otherwise
/// removes it, leaving `path` as it was. Returns `ok` and whether the rename
/// succeeded (a failed rename is printed as "<tool>: cannot rename ...").
bool tool_output_finish(const char *tool, tool_output *out, bool ok);

#endif // SHARD_TOOLS_OUTPUT_H
