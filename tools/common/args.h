// Command-line values of the tools, parsed strictly (on shardrt/args.h,
// which the training driver reads its flags with too); messages printed.
#ifndef SHARD_TOOLS_ARGS_H
#define SHARD_TOOLS_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/// Parses `v`, the value of `flag`, as a count in [1, max]: decimal digits
/// only (no sign, no spaces, nothing after), no overflow. On failure prints
/// "<tool>: <flag> expects an integer in [1, max], got '<v>'" (the text as
/// given) and returns false.
bool tool_parse_count(const char *tool, const char *flag, const char *v, int64_t max,
                      int64_t *out);

/// The flags a parser has met, to refuse one given twice (a second value
/// would silently replace the first).
typedef struct tool_seen {
  int count[64]; // per entry of the caller's flag table
} tool_seen;

/// Looks up argument `arg` (a flag position: "--name", "--name=value" or
/// "-o", "-oFILE"; compared up to its '=') in `flags`, a NULL-terminated table whose entries list a flag's
/// spellings separated by '|' (e.g. "-o|--output"); at most 64 entries.
/// Records it in `seen`. Returns false, printing "<tool>: <arg> given
/// twice (a flag takes one value)", when the entry was met before; true
/// for its first time and for an argument that is in no entry.
bool tool_seen_once(tool_seen *seen, const char *tool, const char *const *flags,
                    const char *arg);

/// Checks a file-name argument before it is used: false, printing
/// "<tool>: <what>: empty path" or "<tool>: <what>: a path of N bytes is
/// longer than the system allows (PATH_MAX 4096)", when it is either.
bool tool_check_path(const char *tool, const char *what, const char *path);

#endif // SHARD_TOOLS_ARGS_H
