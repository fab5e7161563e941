// The hybrid Mamba-2 / attention / MLP layer stack of Nemotron-H
// (nemotron_h.c).
#ifndef SHARD_IMPORT_NEMOTRON_H_H
#define SHARD_IMPORT_NEMOTRON_H_H

#include "graph.h"
#include "mlir-c/IR.h"

/// The Nemotron-H layers: takes the embedding output and returns the hidden
/// state before the final norm.
MlirValue import_build_nemotron_h(import_graph *g, MlirValue x);

#endif // SHARD_IMPORT_NEMOTRON_H_H
