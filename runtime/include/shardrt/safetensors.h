// Reading safetensors files: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then raw data.
// The file is memory-mapped read-only and validated completely on open, so
// every tensor handed out afterwards is known to be in bounds.
#ifndef SHARDRT_SAFETENSORS_H
#define SHARDRT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/status.h"
#include "shardrt/types.h"

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// One tensor of an open file. Every pointer in it is owned by the file and
/// stays valid until srt_safetensors_close.
/// The metadata key of a tensor's CRC-32 (zlib's, of its data bytes, as 8
/// lower-case hex digits): "shardrt.crc32.<tensor name>". The runtime's
/// writer records one per tensor; loads verify it where it is present.
#define SRT_CHECKSUM_KEY_PREFIX "shardrt.crc32."

/// zlib's CRC-32 of `n` bytes at `data`.
uint32_t srt_crc32(const void *data, size_t n);

typedef struct srt_tensor_info {
  const char *name;             // NUL-terminated, e.g. "model.norm.weight"
  srt_dtype dtype;
  int rank;                     // 0 (scalar) .. SRT_MAX_RANK
  int64_t shape[SRT_MAX_RANK];  // elements per dimension; unused dims are 0
  const void *data;             // first byte, inside the read-only mapping;
                                // NOT necessarily aligned to the element size
  size_t nbytes;                // product(shape) * srt_dtype_size(dtype)
  uint64_t offset;              // data's offset from the start of the data
                                // section (the header's data_offsets[0])
} srt_tensor_info;

/// Number of elements of `t` (1 for a scalar).
int64_t srt_tensor_numel(const srt_tensor_info *t);

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// An open, validated safetensors file.
typedef struct srt_safetensors srt_safetensors;

/// Largest header accepted, in bytes (as the reference implementation).
#define SRT_SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)

/// Opens and maps `path` and validates it: the file holds at least the
/// 8-byte header length; the header fits in the file and is a JSON object
/// (`__metadata__`, if present, maps strings to strings); every other entry
/// has a known `dtype`, a `shape` of at most SRT_MAX_RANK non-negative
/// integers and `data_offsets` [begin, end] with end - begin equal to the
/// shape's byte size, end within the data section, and no two tensors'
/// bytes overlapping; names are unique. Gaps between tensors are allowed.
///
/// On success stores a new file in *out (close it with
/// srt_safetensors_close). On failure *out is NULL and the status (DATA_LOSS
/// for malformed content, IO for OS errors, RESOURCE_EXHAUSTED for memory)
/// names the file and, where one is involved, the tensor.
srt_status srt_safetensors_open(const char *path, srt_safetensors **out);

/// Unmaps and frees `file`; NULL is fine. Invalidates every srt_tensor_info
/// and string obtained from it.
void srt_safetensors_close(srt_safetensors *file);

/// The path given to srt_safetensors_open.
const char *srt_safetensors_path(const srt_safetensors *file);

/// Number of tensors (the `__metadata__` entry is not one).
size_t srt_safetensors_count(const srt_safetensors *file);

/// Tensor `i`, 0 <= i < count, in ascending name order (strcmp); NULL when
/// `i` is out of range.
const srt_tensor_info *srt_safetensors_get(const srt_safetensors *file,
                                           size_t i);

/// Looks `name` up (binary search). Stores the tensor in *out and returns
/// OK, or returns NOT_FOUND naming the file and the tensor (*out = NULL).
srt_status srt_safetensors_find(const srt_safetensors *file, const char *name,
                                const srt_tensor_info **out);

/// Like srt_safetensors_find without a status: the tensor or NULL.
const srt_tensor_info *srt_safetensors_lookup(const srt_safetensors *file,
                                              const char *name);

/// The `__metadata__` value of `key`, or NULL if the file has none.
const char *srt_safetensors_metadata(const srt_safetensors *file,
                                     const char *key);

#endif // SHARDRT_SAFETENSORS_H
