// Reading MLIR sources for the drivers: whole files or stdin, split into
// `// -----` chunks that keep their original line numbers in diagnostics.
#ifndef SHARD_TOOLS_SOURCE_H
#define SHARD_TOOLS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "mlir-c/IR.h"

/// One chunk, ready to parse: the original text wrapped as
/// `module {<newlines>TEXT\n}` where the newlines put TEXT on its original
/// line. The wrapper shifts columns on line 1 by `column_shift_line1`.
typedef struct tool_chunk {
  char *text;
  size_t len;
  int column_shift_line1;
} tool_chunk;

/// Reads all of `path` ("-" = stdin) into a NUL-terminated buffer the caller
/// frees; sets *len to its size in bytes. Anything but a regular file (a
/// directory, a device such as /dev/zero that would never end, a FIFO that
/// could block) is refused before reading, and so is more than `max_bytes`
/// (checked before reading a regular file, while reading stdin). Returns NULL with a message naming the path and the sizes in
/// `err` on failure.
char *tool_read_file(const char *path, size_t max_bytes, size_t *len, char *err,
                     size_t errlen);

/// Splits `text` at lines that are exactly `// -----` (when `split` is true;
/// else one chunk). Allocates `*chunks` (free with tool_free_chunks) and
/// returns their count, or -1 when out of memory.
int tool_split_source(const char *text, size_t len, bool split,
                      tool_chunk **chunks);

void tool_free_chunks(tool_chunk *chunks, int n);

/// Parses `chunk` with file name `name` for locations. A chunk holding one
/// `builtin.module` yields that module; any other top-level ops are wrapped
/// in a new module, as mlir-opt does. Returns a null operation after
/// reporting parse errors as diagnostics. The caller owns the result.
MlirOperation tool_parse_chunk(MlirContext ctx, const tool_chunk *chunk,
                               const char *name);

/// An MlirStringCallback writing to the FILE* in `data` (for printing ops).
void tool_print_to_file(MlirStringRef s, void *data);

/// A monotonic clock in milliseconds, for the tools' --timing.
double tool_now_ms(void);

#endif // SHARD_TOOLS_SOURCE_H
