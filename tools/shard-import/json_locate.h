// Source positions of keys in JSON text: jansson reports positions only for
// syntax errors, so the importer finds where a (nested) key is written to
// point errors and op locations at that line of config.json.
#ifndef SHARD_IMPORT_JSON_LOCATE_H
#define SHARD_IMPORT_JSON_LOCATE_H

#include <stdbool.h>
#include <stddef.h>

/// Finds the key `path` in the JSON document `text` (`len` bytes, already
/// known to be valid JSON). `path` names nested object keys separated by
/// dots ("text_config.rope_scaling.factor"); keys written with escapes do
/// not match. On success stores the 1-based line and column (in bytes) of
/// the key's opening quote and returns true; returns false if any component
/// is missing or a non-final one is not an object.
bool json_locate(const char *text, size_t len, const char *path, int *line,
                 int *col);

#endif // SHARD_IMPORT_JSON_LOCATE_H
