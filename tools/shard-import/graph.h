// The imported model graph: `func.func @forward(input_ids, labels,
// position_ids, segment_ids, params...)`
// in the nn dialect, built from an import_config, plus the list of its
// parameters (Hugging Face names, shapes, kinds) that --summary and
// --weights read, and the helpers at the end of this header through which
// the family builders (decoder.c, nemotron_h.c) add layers. model.h builds
// the whole graph.
#ifndef SHARD_IMPORT_GRAPH_H
#define SHARD_IMPORT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "mlir-c/IR.h"
#include "nn.h"

//===----------------------------------------------------------------------===//
// The result
//===----------------------------------------------------------------------===//

/// What a parameter belongs to, for --summary's per-kind counts.
typedef enum import_param_kind {
  IMPORT_PARAM_EMBEDDING,
  IMPORT_PARAM_ATTENTION, // q/k/v/o projection weights and biases
  IMPORT_PARAM_MLP,
  IMPORT_PARAM_MAMBA,
  IMPORT_PARAM_NORM,      // every RMSNorm weight (incl. q_norm / k_norm)
  IMPORT_PARAM_LM_HEAD,
  IMPORT_PARAM_KIND_COUNT,
} import_param_kind;

/// "embedding", "attention", ... for `kind`.
const char *import_param_kind_name(import_param_kind kind);

/// One function argument carrying `nn.param`.
typedef struct import_param {
  char *name; // Hugging Face tensor name, e.g. "model.norm.weight"
  import_param_kind kind;
  nn_param_init init; // its nn.init: how it starts without a checkpoint
  int rank;   // 1..3
  int64_t dims[3];
} import_param;

/// Number of elements of `p`.
int64_t import_param_numel(const import_param *p);

typedef struct import_options {
  int64_t batch, seq; // the step's rows and sequence length, both >= 1
  // Context parallelism (0 or 1: none). cp > 1 builds one dp x cp rank's
  // view: each row cut into cp chunk rows, so the inputs are [batch x cp,
  // seq / cp] (2 cp divides seq), the attention all-gathers K/V over cp
  // (attribute cp_size), and the loss does not shift (the driver shifts
  // the labels over the whole row: docs/runtime.md, "Context parallelism").
  int64_t cp;
  bool bf16;          // parameter element type bf16 (else f32)
  bool logits;        // also return the logits [B, S, vocab]
} import_options;

/// The step's inputs before its parameters: input_ids, labels,
/// position_ids (each token's rotary position: transformers' position_ids,
/// restarting at 0 in each packed document) and segment_ids (each token's
/// document within its row, -1 for padding), all int64 [batch, seq].
enum { IMPORT_NUM_INPUTS = 4 };

typedef struct import_model {
  MlirModule module;
  import_param *params; // params[i] is function argument i + IMPORT_NUM_INPUTS
  int num_params;
  const char *tied_name; // "lm_head.weight" when lm_head is tied, else NULL
  int tied_to;           // index in params that lm_head reuses, or -1
} import_model;

//===----------------------------------------------------------------------===//
// For the architecture builders
//===----------------------------------------------------------------------===//

enum { IMPORT_LOC_CACHE = 24 };

/// The graph under construction.
typedef struct import_graph {
  const import_config *cfg;
  const import_options *opts;
  MlirContext ctx;
  MlirType element; // parameter and activation element type
  nn_builder b;     // appends to the function body; b.loc set by graph_at
  MlirValue position_ids, segment_ids; // block arguments 2 and 3, int64 [B, S]
  import_model *model;
  int cap;          // capacity of model->params
  bool oom;
  struct {
    const char *key;
    MlirLocation loc;
  } locs[IMPORT_LOC_CACHE]; // file locations of config keys
  int num_locs;
} import_graph;

/// The file location of config key `key` (see import_config_locate),
/// cached per key.
MlirLocation graph_location(import_graph *g, const char *key);

/// Sets the location of the next ops: NameLoc(`module`) around the file
/// location of config key `key` (see import_config_locate).
void graph_at(import_graph *g, const char *module, const char *key);

/// Adds a parameter argument named printf(`fmt`, ...) with shape
/// dims[0..rank) in the graph's element type and returns its value.
MlirValue graph_param(import_graph *g, import_param_kind kind, int rank,
                      const int64_t *dims, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/// Sets the nn.init of parameter `param` (a graph_param result; normal
/// unless set) to `init`.
void graph_param_init(import_graph *g, MlirValue param, nn_param_init init);

/// nn.linear at `module` with parameters `module`.weight [out, in] and,
/// when `bias`, `module`.bias [out] (which starts at zero); located at
/// config key `key`.
MlirValue graph_linear(import_graph *g, const char *module, const char *key,
                       import_param_kind kind, MlirValue x, int64_t out,
                       int64_t in, bool bias);

/// nn.rms_norm at `module` with parameter `module`.weight [size]; `head_dim`
/// 0 normalizes the whole last dim. Uses the config's eps and the arch's
/// weight offset; the weight starts at one, or at zero for a (1 + w) norm.
MlirValue graph_rms_norm(import_graph *g, const char *module, MlirValue x,
                         int64_t size, int64_t head_dim);

/// Size of the buffers module paths and parameter names are formatted into.
enum { IMPORT_NAME_MAX = 256 };

/// Formats into `buf` (IMPORT_NAME_MAX bytes, truncating) and returns it.
const char *graph_name(char *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif // SHARD_IMPORT_GRAPH_H
