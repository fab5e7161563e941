// --weights: checks a checkpoint against the imported graph, tensor by
// tensor (name, shape, dtype), before anything is trained or loaded.
#ifndef SHARD_IMPORT_WEIGHTS_H
#define SHARD_IMPORT_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "graph.h"
#include "shardrt/types.h"

/// Checks the checkpoint at `path` against `m`: a .safetensors file, or a
/// directory holding model.safetensors.index.json (whose weight_map names a
/// shard file in the same directory for each tensor) or model.safetensors.
/// Every parameter must be present with the graph's shape and dtype `dtype`;
/// any other tensor is an error, except lm_head.weight duplicating a tied
/// embedding with the same shape and dtype. On the first problem writes
/// `FILE: error: ...` naming the tensor to `err` and returns false. Files
/// are validated by srt_safetensors_open, whose errors are passed on.
bool import_check_weights(const char *path, const import_model *m,
                          srt_dtype dtype, char *err, size_t errlen);

#endif // SHARD_IMPORT_WEIGHTS_H
