// Test helper: writes safetensors files, well-formed or deliberately broken,
// so that the reader and --weights tests make their own inputs.
#ifndef SHARD_TEST_ST_WRITER_H
#define SHARD_TEST_ST_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Writes `path`: the 8-byte little-endian `header_len` field, the first
/// `header_bytes` bytes of `header` (both may disagree, to test that), then
/// `data_len` bytes of `data` (NULL: a byte pattern). Returns false on I/O
/// failure.
bool st_write_raw(const char *path, uint64_t header_len, const char *header,
                  size_t header_bytes, const void *data, size_t data_len);

/// Like st_write_raw with header_len = strlen(header).
bool st_write_text(const char *path, const char *header, const void *data,
                   size_t data_len);

/// One tensor of a well-formed file.
typedef struct st_tensor {
  const char *name;
  const char *dtype; // "F32", "BF16", ...
  int rank;
  int64_t shape[4];
} st_tensor;

/// Writes a well-formed file holding `n` tensors laid out back to back (the
/// header padded with spaces to a multiple of 8 bytes, as writers do); the
/// data of tensor i is bytes with value (i + 1). Returns false on failure.
bool st_write(const char *path, const st_tensor *t, int n);

/// A new empty directory under $TMPDIR (or /tmp); the caller frees the
/// returned path and removes the directory with st_remove_tree.
char *st_make_temp_dir(void);

/// Removes `dir` and the files directly in it.
void st_remove_tree(const char *dir);

#endif // SHARD_TEST_ST_WRITER_H
