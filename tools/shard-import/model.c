// The whole graph of a config: the forward function and its parameter
// arguments, the embedding, the layers of the config's family (decoder.c,
// nemotron_h.c), the final norm, the (possibly tied) lm_head and the loss.
// Above the family builders and the helpers of graph.c, which need neither
// it nor each other's families.
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"
#include "flops.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nemotron_h.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

//===----------------------------------------------------------------------===//
// The function
//===----------------------------------------------------------------------===//

// Rounds `x` to the nearest bfloat16 (ties to even), as torch does when it
// makes a bf16 tensor of Gemma's embedding scale.
static double round_to_bf16(double x) {
  float f = (float)x;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static MlirNamedAttribute named(MlirContext ctx, const char *name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, str(name)), a);
}

// Wraps the finished body into func.func @forward inside a new module.
static MlirModule make_module(import_graph *g, MlirBlock body, int nresults,
                              const MlirType *results) {
  MlirContext ctx = g->ctx;
  MlirLocation loc = graph_location(g, "architectures");
  intptr_t nargs = mlirBlockGetNumArguments(body);
  MlirType *inputs = malloc((size_t)nargs * sizeof *inputs);
  MlirAttribute *arg_attrs = malloc((size_t)nargs * sizeof *arg_attrs);
  if (!inputs || !arg_attrs) {
    free(inputs);
    free(arg_attrs);
    mlirBlockDestroy(body);
    return (MlirModule){NULL};
  }
  MlirIdentifier param_id = mlirIdentifierGet(ctx, str(NN_PARAM_ATTR));
  MlirIdentifier init_id = mlirIdentifierGet(ctx, str(NN_INIT_ATTR));
  for (intptr_t i = 0; i < nargs; ++i) {
    inputs[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
    if (i < IMPORT_NUM_INPUTS) {
      arg_attrs[i] = mlirDictionaryAttrGet(ctx, 0, NULL);
    } else {
      const import_param *param = &g->model->params[i - IMPORT_NUM_INPUTS];
      MlirNamedAttribute p[2] = {
          mlirNamedAttributeGet(param_id, mlirStringAttrGet(ctx, str(param->name))),
          mlirNamedAttributeGet(init_id,
                                mlirStringAttrGet(ctx, str(nn_param_init_name(param->init)))),
      };
      arg_attrs[i] = mlirDictionaryAttrGet(ctx, 2, p);
    }
  }
  MlirType fn_type = mlirFunctionTypeGet(ctx, nargs, inputs, nresults, results);
  MlirNamedAttribute attrs[3] = {
      named(ctx, "sym_name", mlirStringAttrGet(ctx, str("forward"))),
      named(ctx, "function_type", mlirTypeAttrGet(fn_type)),
      named(ctx, "arg_attrs", mlirArrayAttrGet(ctx, nargs, arg_attrs)),
  };
  free(inputs);
  free(arg_attrs);

  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, body);
  MlirOperationState state = mlirOperationStateGet(str("func.func"), loc);
  mlirOperationStateAddAttributes(&state, 3, attrs);
  mlirOperationStateAddOwnedRegions(&state, 1, &region);
  MlirOperation fn = mlirOperationCreate(&state);

  MlirModule module = mlirModuleCreateEmpty(loc);
  mlirBlockAppendOwnedOperation(mlirModuleGetBody(module), fn);
  // The (text) config's model_type: tp-plan's 'hf' plan is chosen by it.
  mlirOperationSetAttributeByName(
      mlirModuleGetOperation(module), str("nn.model_type"),
      mlirStringAttrGet(ctx, str(g->cfg->arch->model_type)));
  // What a compiled training binary needs to know about its model.
  mlirOperationSetAttributeByName(mlirModuleGetOperation(module), str("nn.config_path"),
                                  mlirStringAttrGet(ctx, str(g->cfg->path)));
  mlirOperationSetAttributeByName(
      mlirModuleGetOperation(module), str("nn.initializer_range"),
      mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx), g->cfg->initializer_range));
  // The driver's MFU: the model FLOPs of a token at this sequence length.
  mlirOperationSetAttributeByName(
      mlirModuleGetOperation(module), str("nn.flops_per_token"),
      mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx),
                             import_flops_per_token(g->cfg, g->model, g->opts->seq)));
  // A graph built for context parallelism: tp-plan's cp must match it,
  // lower-to-runtime puts it in the program table.
  if (g->opts->cp > 1)
    mlirOperationSetAttributeByName(
        mlirModuleGetOperation(module), str("nn.cp_size"),
        mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), g->opts->cp));
  return module;
}

bool import_model_build(MlirContext ctx, const import_config *cfg,
                        const import_options *opts, import_model *out,
                        char *err, size_t errlen) {
  *out = (import_model){.tied_to = -1};
  import_graph g = {.cfg = cfg, .opts = opts, .ctx = ctx, .model = out};
  g.element = opts->bf16 ? mlirBF16TypeGet(ctx) : mlirF32TypeGet(ctx);
  int64_t cp = opts->cp > 1 ? opts->cp : 1;
  MlirType ids_type = nn_tensor_type(ctx, 2, (int64_t[]){opts->batch * cp, opts->seq / cp},
                                     mlirIntegerTypeGet(ctx, 64));
  MlirLocation top = graph_location(&g, "architectures");
  // input_ids, labels, position_ids, segment_ids: int64 [batch, seq] each.
  MlirBlock body = mlirBlockCreate(IMPORT_NUM_INPUTS,
                                   (MlirType[]){ids_type, ids_type, ids_type, ids_type},
                                   (MlirLocation[]){top, top, top, top});
  g.b = (nn_builder){.ctx = ctx, .block = body, .loc = top};
  MlirValue ids = mlirBlockGetArgument(body, 0);
  MlirValue labels = mlirBlockGetArgument(body, 1);
  g.position_ids = mlirBlockGetArgument(body, 2);
  g.segment_ids = mlirBlockGetArgument(body, 3);

  // Embedding (Gemma scales it by sqrt(hidden), rounded to the weight dtype).
  const import_arch *arch = cfg->arch;
  char module[IMPORT_NAME_MAX];
  graph_name(module, "%s.%s", arch->prefix, arch->embed);
  graph_at(&g, module, "vocab_size");
  int embed_index = 0;
  MlirValue embed = graph_param(&g, IMPORT_PARAM_EMBEDDING, 2,
                                (int64_t[]){cfg->vocab, cfg->hidden}, "%s.weight",
                                module);
  double scale = 1.0;
  if (arch->scale_embeddings) {
    scale = sqrt((double)cfg->hidden);
    scale = opts->bf16 ? round_to_bf16(scale) : (double)(float)scale;
  }
  MlirValue x = nn_build_embedding(&g.b, module, ids, embed, scale, cfg->padding_idx);

  x = arch->family == IMPORT_NEMOTRON_H ? import_build_nemotron_h(&g, x)
                                        : import_build_decoder(&g, x);

  graph_name(module, "%s.%s", arch->prefix, arch->final_norm);
  x = graph_rms_norm(&g, module, x, cfg->hidden, 0);

  MlirValue logits;
  if (cfg->tie) {
    graph_at(&g, "lm_head", "vocab_size");
    logits = nn_build_linear(&g.b, "lm_head", x, embed, (MlirValue){NULL});
    out->tied_name = "lm_head.weight";
    out->tied_to = embed_index;
  } else {
    logits = graph_linear(&g, "lm_head", "vocab_size", IMPORT_PARAM_LM_HEAD, x,
                          cfg->vocab, cfg->hidden, false);
  }
  graph_at(&g, "loss", "architectures");
  MlirValue loss = nn_build_cross_entropy(&g.b, "loss", logits, labels, -100, cp == 1);

  MlirValue results[2] = {loss, logits};
  int nresults = opts->logits ? 2 : 1;
  MlirOperationState ret = mlirOperationStateGet(str("func.return"), g.b.loc);
  mlirOperationStateAddOperands(&ret, nresults, results);
  mlirBlockAppendOwnedOperation(body, mlirOperationCreate(&ret));

  MlirType result_types[2] = {mlirValueGetType(loss), mlirValueGetType(logits)};
  if (!g.oom)
    out->module = make_module(&g, body, nresults, result_types);
  else
    mlirBlockDestroy(body);
  if (g.oom || mlirModuleIsNull(out->module)) {
    snprintf(err, errlen, "%s: error: out of memory while building the graph",
             cfg->path);
    import_model_free(out);
    return false;
  }
  // The compiler's limit (nn-autodiff), checked here in milliseconds: its
  // passes would take minutes over such a graph before refusing it.
  if (out->num_params > NN_MAX_FUNC_ARGS - IMPORT_NUM_INPUTS) {
    int line = 1, col = 1;
    import_config_locate(cfg, "num_hidden_layers", &line, &col);
    snprintf(err, errlen,
             "%s:%d:%d: error: num_hidden_layers %lld give %d parameter tensors, more than a "
             "compiled step takes (limit %d: %d function arguments, less the input ids, "
             "labels, position ids and segment ids)",
             cfg->path, line, col, (long long)cfg->layers, out->num_params,
             NN_MAX_FUNC_ARGS - IMPORT_NUM_INPUTS, NN_MAX_FUNC_ARGS);
    import_model_free(out);
    return false;
  }
  return true;
}

void import_model_free(import_model *m) {
  if (!mlirModuleIsNull(m->module))
    mlirModuleDestroy(m->module);
  for (int i = 0; i < m->num_params; ++i)
    free(m->params[i].name);
  free(m->params);
  *m = (import_model){.tied_to = -1};
}
