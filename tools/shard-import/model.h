// The whole imported graph of a config (model.c): the skeleton around the
// layers of the config's model family.
#ifndef SHARD_IMPORT_MODEL_H
#define SHARD_IMPORT_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "graph.h"
#include "mlir-c/IR.h"

/// Builds the graph of `cfg` in `ctx` (which must have the nn, func dialects
/// loaded, e.g. from nn_context_create). Every op gets the location
/// `"<nn.module>"(PATH:LINE:COL)` of the config key that sized it. On
/// failure (only out of memory) writes `err` and returns false. The caller
/// frees `out` with import_model_free before destroying `ctx`.
bool import_model_build(MlirContext ctx, const import_config *cfg,
                        const import_options *opts, import_model *out,
                        char *err, size_t errlen);

/// Destroys the module and frees the parameter list; `m` is left empty
/// (module null, no parameters), so a second call does nothing.
void import_model_free(import_model *m);

#endif // SHARD_IMPORT_MODEL_H
