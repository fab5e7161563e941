// Writing safetensors files atomically: the bytes go to a temporary of
// their own beside the file ("<path>.tmp.XXXXXX", srt_output_temp), are
// flushed and fsync'ed, then renamed over <path> and the directory is
// fsync'ed — so a crash at any moment leaves either the previous file or
// the new one at <path>, never a torn one. (Reading: safetensors.h.)
#ifndef SHARDRT_SAFETENSORS_WRITE_H
#define SHARDRT_SAFETENSORS_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/status.h"
#include "shardrt/types.h"

/// One tensor of a file to write. Pointers are borrowed for the call.
typedef struct srt_safetensors_entry {
  const char *name;     ///< unique, not "__metadata__"
  srt_dtype dtype;
  int ndim;             ///< 0 .. SRT_MAX_RANK
  const int64_t *shape; ///< ndim sizes >= 0
  const void *data;     ///< product(shape) elements, row-major (may be NULL
                        ///< for the streaming writer, which takes data later)
} srt_safetensors_entry;

/// A file being written (streaming: header first, then each tensor's bytes
/// in entry order, so a caller can produce one tensor at a time).
typedef struct srt_safetensors_writer srt_safetensors_writer;

/// Creates a unique temporary "<path>.tmp.XXXXXX" (two writers of one path
/// never share it; one a crash left behind is not reused; an flock(2) on
/// it is held until the writer ends, which tells a live writer's temporary
/// from a dead one's) and writes the
/// header: the JSON object with `__metadata__` (from
/// `metadata`, alternating keys and values, `n_metadata` pairs; may be
/// NULL) and every entry's dtype, shape and data_offsets, in entry order
/// and contiguous, padded with spaces to a multiple of 8 bytes. Writers of
/// one path at a time each rename a whole file of their own over it. Errors: SRT_INVALID_ARGUMENT for a bad entry (naming
/// it: dtype, rank, negative size, duplicate or reserved name), for `path`
/// naming standard output other than a character device
/// (srt_output_check_seekable) or a link whose target cannot be named
/// (srt_output_destination); SRT_IO
/// naming the file and the OS error. On error *out is NULL and no temporary
/// file is left.
srt_status srt_safetensors_writer_begin(const char *path,
                                        const srt_safetensors_entry *entries,
                                        size_t n_entries,
                                        const char *const *metadata,
                                        size_t n_metadata,
                                        srt_safetensors_writer **out);

/// Appends the bytes of the next entry (entries in order; `data` holds its
/// product(shape) * dtype-size bytes, borrowed). Errors: SRT_IO;
/// SRT_FAILED_PRECONDITION when every entry was already written. After an
/// error, call srt_safetensors_writer_abort.
srt_status srt_safetensors_writer_put(srt_safetensors_writer *w, const void *data);

/// Finishes: checks every entry was written, fflush, fsync, fclose, rename
/// over the final path, fsync of the directory. Frees `w` whatever
/// happens; on error removes the temporary file and the previous file at
/// the path is untouched. Errors: SRT_FAILED_PRECONDITION (entries missing),
/// SRT_IO naming the step, the file and the OS error.
srt_status srt_safetensors_writer_commit(srt_safetensors_writer *w);

/// Gives up: closes and removes the temporary file, frees `w` (NULL fine).
void srt_safetensors_writer_abort(srt_safetensors_writer *w);

/// begin + put of every entry's `data` + commit.
srt_status srt_safetensors_write(const char *path,
                                 const srt_safetensors_entry *entries,
                                 size_t n_entries, const char *const *metadata,
                                 size_t n_metadata);

#endif // SHARDRT_SAFETENSORS_WRITE_H
