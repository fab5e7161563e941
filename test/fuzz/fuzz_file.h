// Fuzz inputs handed to the readers as files: the readers under test take
// paths (they map or stat what they read), so each input is written to a
// private temporary folder first.
#ifndef SHARD_FUZZ_FILE_H
#define SHARD_FUZZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/// The path of `name` in this process's temporary folder (created under
/// $TMPDIR, else /tmp, on first use and removed at exit). Aborts if the
/// folder cannot be made: a fuzzer that cannot write its inputs finds nothing.
const char *fuzz_path(const char *name);

/// Writes data[0, size) to fuzz_path(name), replacing what was there, and
/// returns that path. Aborts on a write error.
const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size);

#endif // SHARD_FUZZ_FILE_H
