// --weights: checks a checkpoint against the imported graph, tensor by
// tensor (name, shape, dtype), before anything is trained or loaded.
#ifndef SHARD_IMPORT_WEIGHTS_H
#define SHARD_IMPORT_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "graph.h"
#include "shardrt/types.h"

/// Checks the checkpoint at `path` against `m`: a .safetensors file, a
/// model.safetensors.index.json, or a directory holding either
/// (srt_checkpoint_source_open). Its names may follow any layout of
/// `checkpoint_names` (shardrt/checkpoint_names.h text; NULL: the
/// in-memory names only): the one that holds the most parameters is
/// checked. Every parameter must be present with the graph's shape, stored
/// as `dtype` (or, when `any_float`, any dtype training converts: F32, BF16,
/// F16, F64); any other tensor is an error, except lm_head.weight
/// duplicating a tied embedding and the tensors of carried modules. On the
/// first problem writes `FILE: error: ...` naming the tensor to `err` and
/// returns false; the checkpoint reader's errors are passed on.
bool import_check_weights(const char *path, const import_model *m, srt_dtype dtype,
                          bool any_float, const char *checkpoint_names, char *err,
                          size_t errlen);

#endif // SHARD_IMPORT_WEIGHTS_H
