// Command-line values of the drivers, parsed strictly.
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

#endif // SHARD_TOOLS_ARGS_H
