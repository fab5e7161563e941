// The helpers every architecture builds with: parameter arguments, op
// locations, linear layers and norms (model.c puts the skeleton around a
// family's layers).
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

const char *import_param_kind_name(import_param_kind kind) {
  static const char *const names[IMPORT_PARAM_KIND_COUNT] = {
      [IMPORT_PARAM_EMBEDDING] = "embedding", [IMPORT_PARAM_ATTENTION] = "attention",
      [IMPORT_PARAM_MLP] = "mlp",             [IMPORT_PARAM_MAMBA] = "mamba",
      [IMPORT_PARAM_NORM] = "norm",           [IMPORT_PARAM_LM_HEAD] = "lm_head",
  };
  return (unsigned)kind < IMPORT_PARAM_KIND_COUNT ? names[kind] : "?";
}

int64_t import_param_numel(const import_param *p) {
  int64_t n = 1;
  for (int i = 0; i < p->rank; ++i)
    n *= p->dims[i];
  return n;
}

const char *graph_name(char *buf, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, IMPORT_NAME_MAX, fmt, ap);
  va_end(ap);
  return buf;
}

//===----------------------------------------------------------------------===//
// Locations and parameters
//===----------------------------------------------------------------------===//

MlirLocation graph_location(import_graph *g, const char *key) {
  for (int i = 0; i < g->num_locs; ++i)
    if (g->locs[i].key == key || !strcmp(g->locs[i].key, key))
      return g->locs[i].loc;
  int line, col;
  import_config_locate(g->cfg, key, &line, &col);
  MlirLocation loc =
      mlirLocationFileLineColGet(g->ctx, str(g->cfg->path), (unsigned)line,
                                 (unsigned)col);
  if (g->num_locs < IMPORT_LOC_CACHE) {
    g->locs[g->num_locs].key = key;
    g->locs[g->num_locs++].loc = loc;
  }
  return loc;
}

void graph_at(import_graph *g, const char *module, const char *key) {
  g->b.loc = mlirLocationNameGet(g->ctx, str(module), graph_location(g, key));
}

MlirValue graph_param(import_graph *g, import_param_kind kind, int rank,
                      const int64_t *dims, const char *fmt, ...) {
  import_model *m = g->model;
  if (m->num_params == g->cap) {
    int cap = g->cap ? 2 * g->cap : 256;
    import_param *bigger = realloc(m->params, (size_t)cap * sizeof *bigger);
    if (!bigger) {
      g->oom = true;
      return mlirBlockGetArgument(g->b.block, 0); // keeps building; reported later
    }
    m->params = bigger;
    g->cap = cap;
  }
  import_param *p = &m->params[m->num_params];
  char name[IMPORT_NAME_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  *p = (import_param){.name = strdup(name), .kind = kind, .init = NN_INIT_NORMAL, .rank = rank};
  if (!p->name) {
    g->oom = true;
    return mlirBlockGetArgument(g->b.block, 0);
  }
  memcpy(p->dims, dims, (size_t)rank * sizeof *dims);
  ++m->num_params;
  MlirType t = nn_tensor_type(g->ctx, rank, dims, g->element);
  return mlirBlockAddArgument(g->b.block, t, g->b.loc);
}

void graph_param_init(import_graph *g, MlirValue param, nn_param_init init) {
  // Parameters follow the step's inputs (input_ids, labels, position_ids,
  // segment_ids); after an allocation failure graph_param returned argument
  // 0 (reported later).
  intptr_t i = mlirBlockArgumentGetArgNumber(param) - IMPORT_NUM_INPUTS;
  if (i >= 0 && i < g->model->num_params)
    g->model->params[i].init = init;
}

MlirValue graph_linear(import_graph *g, const char *module, const char *key,
                       import_param_kind kind, MlirValue x, int64_t out,
                       int64_t in, bool bias) {
  graph_at(g, module, key);
  MlirValue w = graph_param(g, kind, 2, (int64_t[]){out, in}, "%s.weight", module);
  MlirValue b = {NULL};
  if (bias) {
    b = graph_param(g, kind, 1, (int64_t[]){out}, "%s.bias", module);
    graph_param_init(g, b, NN_INIT_ZEROS);
  }
  return nn_build_linear(&g->b, module, x, w, b);
}

MlirValue graph_rms_norm(import_graph *g, const char *module, MlirValue x,
                         int64_t size, int64_t head_dim) {
  graph_at(g, module, g->cfg->arch->eps_key);
  MlirValue w =
      graph_param(g, IMPORT_PARAM_NORM, 1, (int64_t[]){size}, "%s.weight", module);
  // Gemma's norms multiply by (1 + w): w starts at zero there.
  graph_param_init(g, w, g->cfg->arch->norm_offset == 1.0 ? NN_INIT_ZEROS : NN_INIT_ONES);
  return nn_build_like(&g->b, NN_OP_RMS_NORM, module, 2, (MlirValue[]){x, w}, 3,
                       (nn_attr[]){NN_FLOAT("eps", g->cfg->eps),
                                   NN_FLOAT("offset", g->cfg->arch->norm_offset),
                                   NN_INT("head_dim", head_dim)});
}
