// A Hugging Face checkpoint as transformers' from_pretrained finds it: one
// safetensors file, a model directory (model.safetensors.index.json and the
// shards it names, or model.safetensors), or the index file itself. All of
// its tensors are seen as one name-sorted list, each with the file that
// holds it, whatever the number of shards.
#ifndef SHARDRT_CHECKPOINT_SOURCE_H
#define SHARDRT_CHECKPOINT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "shardrt/safetensors.h"
#include "shardrt/status.h"

/// An open checkpoint (its files mapped read-only).
typedef struct srt_checkpoint_source srt_checkpoint_source;

/// The index file transformers writes beside sharded weights.
#define SRT_HF_INDEX_NAME "model.safetensors.index.json"
/// The weights file of an unsharded model directory.
#define SRT_HF_WEIGHTS_NAME "model.safetensors"

/// Opens `path`: a directory is read through its SRT_HF_INDEX_NAME when
/// present, else its SRT_HF_WEIGHTS_NAME; a file whose name ends in
/// ".json" is an index; any other file is one safetensors file. An index
/// (at most 64 MiB, a regular file) is a JSON object whose "weight_map"
/// maps every tensor name to a plain file name in the index's directory
/// (no '/', not "." or ".."); every named file is opened and validated by
/// srt_safetensors_open, must hold each tensor the map puts in it, and may
/// hold no tensor the map does not list there.
/// Errors: SRT_NOT_FOUND (no such path; a directory with neither file);
/// SRT_DATA_LOSS naming the index and the entry (malformed JSON, a bad
/// weight_map entry, a listed tensor missing from its shard, an unlisted
/// tensor in a shard); the errors of srt_safetensors_open; SRT_IO;
/// SRT_RESOURCE_EXHAUSTED. On error *out is NULL.
srt_status srt_checkpoint_source_open(const char *path, srt_checkpoint_source **out);

/// Unmaps and frees `src` (NULL is fine).
void srt_checkpoint_source_close(srt_checkpoint_source *src);

/// The path given to srt_checkpoint_source_open.
const char *srt_checkpoint_source_path(const srt_checkpoint_source *src);

/// The directory of the checkpoint's files: `path` itself for a directory,
/// else the part of `path` up to its last '/' ("" when none); it ends in
/// '/' unless empty.
const char *srt_checkpoint_source_dir(const srt_checkpoint_source *src);

/// Whether it was opened through an index (sharded weights).
bool srt_checkpoint_source_sharded(const srt_checkpoint_source *src);

/// The first weights file (the only one when not sharded): the one whose
/// `__metadata__` describes a training checkpoint (srt_checkpoint_read_meta).
const srt_safetensors *srt_checkpoint_source_first(const srt_checkpoint_source *src);

/// Number of tensors over all files.
size_t srt_checkpoint_source_count(const srt_checkpoint_source *src);

/// Tensor `i` (0 <= i < count) in ascending name order over all files, and
/// in *file (when not NULL) the file holding it; NULL when out of range.
const srt_tensor_info *srt_checkpoint_source_get(const srt_checkpoint_source *src, size_t i,
                                                 const srt_safetensors **file);

/// The tensor called `name` and its file (binary search), or NULL.
const srt_tensor_info *srt_checkpoint_source_lookup(const srt_checkpoint_source *src,
                                                    const char *name,
                                                    const srt_safetensors **file);

#endif // SHARDRT_CHECKPOINT_SOURCE_H
