// The `nn` dialect from C: IRDL loading, op kinds, attribute accessors and
// typed builders (IRDL-defined dialects get no generated C++ or C classes).
#include "nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/IRDL.h"
#include "mlir-c/RegisterEverything.h"

// The IRDL text of nn.irdl.mlir, embedded at build time (nn_irdl.c).
extern const char nn_irdl_text[];
extern const size_t nn_irdl_text_len;

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

//===----------------------------------------------------------------------===//
// Dialect loading
//===----------------------------------------------------------------------===//

MlirLogicalResult nn_load_dialect(MlirContext ctx) {
  if (!mlirDialectIsNull(mlirContextGetOrLoadDialect(ctx, str("nn"))))
    return mlirLogicalResultSuccess();
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__irdl__(), ctx);
  MlirModule defs = mlirModuleCreateParse(
      ctx, mlirStringRefCreate(nn_irdl_text, nn_irdl_text_len));
  if (mlirModuleIsNull(defs))
    return mlirLogicalResultFailure();
  // The loaded dialect keeps its own constraint objects, so the IRDL module
  // is not needed afterwards.
  MlirLogicalResult result = mlirLoadIRDLDialects(defs);
  mlirModuleDestroy(defs);
  return result;
}

MlirContext nn_context_create(void) {
  MlirContext ctx = mlirContextCreate();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllPasses();
  // Builders create ops of these directly, so they must be loaded, not only
  // registered (the parser loads dialects on demand, builders do not).
  static const char *const eager[] = {"func", "shard", "arith", "tensor"};
  for (size_t i = 0; i < sizeof eager / sizeof *eager; ++i)
    mlirContextGetOrLoadDialect(ctx, str(eager[i]));
  if (mlirLogicalResultIsFailure(nn_load_dialect(ctx))) {
    mlirContextDestroy(ctx);
    return (MlirContext){NULL};
  }
  return ctx;
}

//===----------------------------------------------------------------------===//
// Op kinds
//===----------------------------------------------------------------------===//

static const char *const kOpNames[NN_OP_COUNT] = {
#define NN_OP(KIND, name, phase, rule, verify) [NN_OP_##KIND] = "nn." #name,
#include "shardrt/ops.def"
};

static const nn_op_phase kPhases[NN_OP_COUNT] = {
#define NN_OP(KIND, name, phase, rule, verify) [NN_OP_##KIND] = NN_PHASE_##phase,
#include "shardrt/ops.def"
};

// Every NN_VJP row (grouped by forward op, in table order) and the forward
// op of each.
static const nn_vjp kVjps[] = {
#define NN_VJP(KIND, GRAD, operands, targets) {NN_OP_##GRAD, operands, targets},
#include "shardrt/ops.def"
};
static const nn_op_kind kVjpForward[] = {
#define NN_VJP(KIND, GRAD, operands, targets) NN_OP_##KIND,
#include "shardrt/ops.def"
};

static const bool kNoVjp[NN_OP_COUNT] = {
#define NN_NO_VJP(KIND) [NN_OP_##KIND] = true,
#include "shardrt/ops.def"
};

const char *nn_op_name(nn_op_kind kind) {
  return kind < NN_OP_COUNT ? kOpNames[kind] : NULL;
}

nn_op_phase nn_op_phase_of(nn_op_kind kind) {
  return kind < NN_OP_COUNT ? kPhases[kind] : NN_PHASE_FORWARD;
}

bool nn_op_is_forward(nn_op_kind kind) {
  return kind < NN_OP_COUNT && kPhases[kind] == NN_PHASE_FORWARD;
}

int nn_op_vjps(nn_op_kind kind, const nn_vjp **vjps) {
  enum { kNumVjps = sizeof kVjps / sizeof *kVjps };
  int first = 0;
  while (first < kNumVjps && kVjpForward[first] != kind)
    ++first;
  int n = 0;
  while (first + n < kNumVjps && kVjpForward[first + n] == kind)
    ++n;
  *vjps = n ? &kVjps[first] : NULL;
  return n ? n : kind < NN_OP_COUNT && kNoVjp[kind] ? 0 : -1;
}

nn_op_kind nn_op_kind_of(MlirOperation op) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (name.length < 3 || strncmp(name.data, "nn.", 3) != 0)
    return NN_OP_NONE;
  for (int k = 0; k < NN_OP_COUNT; ++k)
    if (strlen(kOpNames[k]) == name.length &&
        memcmp(kOpNames[k], name.data, name.length) == 0)
      return (nn_op_kind)k;
  return NN_OP_NONE;
}

//===----------------------------------------------------------------------===//
// Attributes and shapes
//===----------------------------------------------------------------------===//

MlirStringRef nn_module_of(MlirOperation op) {
  return nn_attr_str(op, NN_MODULE_ATTR);
}

static const char *const kParamInits[NN_INIT_COUNT] = {
    [NN_INIT_NORMAL] = "normal", [NN_INIT_ZEROS] = "zeros",     [NN_INIT_ONES] = "ones",
    [NN_INIT_A_LOG] = "a_log",   [NN_INIT_DT_BIAS] = "dt_bias",
};

const char *nn_param_init_name(nn_param_init init) {
  return init >= 0 && init < NN_INIT_COUNT ? kParamInits[init] : NULL;
}

int nn_param_init_parse(MlirStringRef s) {
  for (int i = 0; i < NN_INIT_COUNT; ++i)
    if (mlirStringRefEqual(s, str(kParamInits[i])))
      return i;
  return -1;
}

size_t nn_layer_prefix(MlirStringRef m) {
  for (size_t i = 0; i + 7 <= m.length; ++i) {
    if ((i && m.data[i - 1] != '.') || memcmp(m.data + i, "layers.", 7))
      continue;
    size_t j = i + 7;
    while (j < m.length && m.data[j] >= '0' && m.data[j] <= '9')
      ++j;
    if (j > i + 7 && (j == m.length || m.data[j] == '.'))
      return j;
  }
  return 0;
}

int64_t nn_attr_int(MlirOperation op, const char *name, int64_t fallback) {
  MlirAttribute a = mlirOperationGetAttributeByName(op, str(name));
  if (mlirAttributeIsNull(a))
    return fallback;
  if (mlirAttributeIsABool(a))
    return mlirBoolAttrGetValue(a) ? 1 : 0;
  if (mlirAttributeIsAInteger(a))
    return mlirIntegerAttrGetValueInt(a);
  return fallback;
}

double nn_attr_float(MlirOperation op, const char *name, double fallback) {
  MlirAttribute a = mlirOperationGetAttributeByName(op, str(name));
  if (mlirAttributeIsNull(a) || !mlirAttributeIsAFloat(a))
    return fallback;
  return mlirFloatAttrGetValueDouble(a);
}

MlirStringRef nn_attr_str(MlirOperation op, const char *name) {
  MlirAttribute a = mlirOperationGetAttributeByName(op, str(name));
  if (mlirAttributeIsNull(a) || !mlirAttributeIsAString(a))
    return mlirStringRefCreate("", 0);
  return mlirStringAttrGetValue(a);
}

bool nn_shape_of(MlirType type, nn_shape *out) {
  if (!mlirTypeIsARankedTensor(type) || !mlirShapedTypeHasStaticShape(type))
    return false;
  int64_t rank = mlirShapedTypeGetRank(type);
  if (rank > NN_MAX_RANK)
    return false;
  out->rank = (int)rank;
  for (int i = 0; i < out->rank; ++i)
    out->dims[i] = mlirShapedTypeGetDimSize(type, i);
  out->element = mlirShapedTypeGetElementType(type);
  return true;
}

MlirType nn_tensor_type(MlirContext ctx, int rank, const int64_t *dims,
                        MlirType element) {
  (void)ctx;
  return mlirRankedTensorTypeGet(rank, dims, element, mlirAttributeGetNull());
}

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

// Up to this many inherent attributes per op, plus nn.module.
enum { kMaxAttrs = 12 };
_Static_assert(NN_MAX_BUILD_ATTRS + 1 <= kMaxAttrs, "nn_build_like: room for nn.module");

typedef struct op_spec {
  nn_builder *b;
  MlirOperationState state;
  MlirNamedAttribute attrs[kMaxAttrs];
  int nattrs;
} op_spec;

static void spec_init(op_spec *s, nn_builder *b, nn_op_kind kind,
                      const char *module) {
  s->b = b;
  s->state = mlirOperationStateGet(str(nn_op_name(kind)), b->loc);
  s->nattrs = 0;
  s->attrs[s->nattrs++] = mlirNamedAttributeGet(
      mlirIdentifierGet(b->ctx, str(NN_MODULE_ATTR)),
      mlirStringAttrGet(b->ctx, str(module)));
}

static void spec_attr(op_spec *s, const char *name, MlirAttribute value) {
  s->attrs[s->nattrs++] =
      mlirNamedAttributeGet(mlirIdentifierGet(s->b->ctx, str(name)), value);
}

static void spec_int(op_spec *s, const char *name, int64_t v) {
  spec_attr(s, name, mlirIntegerAttrGet(mlirIntegerTypeGet(s->b->ctx, 64), v));
}

static void spec_float(op_spec *s, const char *name, double v) {
  spec_attr(s, name, mlirFloatAttrDoubleGet(s->b->ctx, mlirF64TypeGet(s->b->ctx), v));
}

static void spec_bool(op_spec *s, const char *name, bool v) {
  spec_attr(s, name, mlirBoolAttrGet(s->b->ctx, v));
}

static void spec_str(op_spec *s, const char *name, const char *v) {
  spec_attr(s, name, mlirStringAttrGet(s->b->ctx, str(v)));
}

static void spec_operands(op_spec *s, int n, const MlirValue *v) {
  mlirOperationStateAddOperands(&s->state, n, v);
}

// Creates the op with `nresults` results and appends it to the block.
static MlirOperation spec_finish(op_spec *s, int nresults,
                                 const MlirType *results) {
  mlirOperationStateAddResults(&s->state, nresults, results);
  mlirOperationStateAddAttributes(&s->state, s->nattrs, s->attrs);
  MlirOperation op = mlirOperationCreate(&s->state);
  mlirBlockAppendOwnedOperation(s->b->block, op);
  return op;
}

static MlirValue finish1(op_spec *s, MlirType result) {
  return mlirOperationGetResult(spec_finish(s, 1, &result), 0);
}

MlirValue nn_build_embedding(nn_builder *b, const char *module, MlirValue ids,
                             MlirValue weight, double scale, int64_t padding_idx) {
  nn_shape is, ws;
  nn_shape_of(mlirValueGetType(ids), &is);
  nn_shape_of(mlirValueGetType(weight), &ws);
  int64_t dims[3] = {is.dims[0], is.dims[1], ws.dims[1]};
  op_spec s;
  spec_init(&s, b, NN_OP_EMBEDDING, module);
  spec_operands(&s, 2, (MlirValue[]){ids, weight});
  spec_float(&s, "scale", scale);
  spec_int(&s, "padding_idx", padding_idx);
  return finish1(&s, nn_tensor_type(b->ctx, 3, dims, ws.element));
}

MlirValue nn_build_linear(nn_builder *b, const char *module, MlirValue x,
                          MlirValue weight, MlirValue bias) {
  nn_shape xs, ws;
  nn_shape_of(mlirValueGetType(x), &xs);
  nn_shape_of(mlirValueGetType(weight), &ws);
  xs.dims[xs.rank - 1] = ws.dims[0];
  op_spec s;
  spec_init(&s, b, NN_OP_LINEAR, module);
  spec_operands(&s, 2, (MlirValue[]){x, weight});
  if (!mlirValueIsNull(bias))
    spec_operands(&s, 1, &bias);
  return finish1(&s, nn_tensor_type(b->ctx, xs.rank, xs.dims, xs.element));
}

MlirValue nn_build_like(nn_builder *b, nn_op_kind kind, const char *module, int num_operands,
                        const MlirValue *operands, int num_attrs, const nn_attr *attrs) {
  if (num_attrs > NN_MAX_BUILD_ATTRS) {
    fprintf(stderr, "nn_build_like: %s with %d attributes, more than %d\n", nn_op_name(kind),
            num_attrs, NN_MAX_BUILD_ATTRS);
    abort();
  }
  op_spec s;
  spec_init(&s, b, kind, module);
  spec_operands(&s, num_operands, operands);
  for (int i = 0; i < num_attrs; ++i) {
    const nn_attr *a = &attrs[i];
    switch (a->kind) {
    case NN_ATTR_INT:
      spec_int(&s, a->name, a->i);
      break;
    case NN_ATTR_FLOAT:
      spec_float(&s, a->name, a->f);
      break;
    case NN_ATTR_BOOL:
      spec_bool(&s, a->name, a->b);
      break;
    case NN_ATTR_STR:
      spec_str(&s, a->name, a->s);
      break;
    }
  }
  return finish1(&s, mlirValueGetType(operands[0]));
}

void nn_build_rotary_embedding(nn_builder *b, const char *module,
                               const nn_rope *rope, MlirValue position_ids,
                               int64_t batch, int64_t seq, MlirType element,
                               MlirValue *cos, MlirValue *sin) {
  int64_t dims[3] = {batch, seq, rope->head_dim};
  MlirType t = nn_tensor_type(b->ctx, 3, dims, element);
  op_spec s;
  spec_init(&s, b, NN_OP_ROTARY_EMBEDDING, module);
  if (!mlirValueIsNull(position_ids))
    spec_operands(&s, 1, &position_ids);
  spec_int(&s, "head_dim", rope->head_dim);
  spec_float(&s, "theta", rope->theta);
  spec_str(&s, "rope_type", rope->rope_type);
  if (strcmp(rope->rope_type, "linear") == 0)
    spec_float(&s, "factor", rope->factor);
  if (strcmp(rope->rope_type, "llama3") == 0) {
    spec_float(&s, "factor", rope->factor);
    spec_float(&s, "low_freq_factor", rope->low_freq_factor);
    spec_float(&s, "high_freq_factor", rope->high_freq_factor);
    spec_int(&s, "original_max_position_embeddings",
             rope->original_max_position_embeddings);
  }
  MlirOperation op = spec_finish(&s, 2, (MlirType[]){t, t});
  *cos = mlirOperationGetResult(op, 0);
  *sin = mlirOperationGetResult(op, 1);
}

MlirValue nn_build_attention(nn_builder *b, const char *module, MlirValue q,
                             MlirValue k, MlirValue v, MlirValue segment_ids,
                             const nn_attention_config *cfg) {
  op_spec s;
  spec_init(&s, b, NN_OP_ATTENTION, module);
  bool segments = !mlirValueIsNull(segment_ids);
  spec_operands(&s, segments ? 4 : 3, (MlirValue[]){q, k, v, segment_ids});
  spec_int(&s, "num_heads", cfg->num_heads);
  spec_int(&s, "num_kv_heads", cfg->num_kv_heads);
  spec_int(&s, "head_dim", cfg->head_dim);
  spec_bool(&s, "causal", cfg->causal);
  spec_float(&s, "scale", cfg->scale);
  spec_int(&s, "sliding_window", cfg->sliding_window);
  spec_float(&s, "softcap", cfg->softcap);
  if (cfg->cp_size > 1) // absent at cp 1: graphs without cp print as before
    spec_int(&s, "cp_size", cfg->cp_size);
  nn_shape qs;
  nn_shape_of(mlirValueGetType(q), &qs);
  int64_t lse_dims[3] = {qs.dims[0], cfg->num_heads, qs.dims[1]};
  MlirType types[2] = {mlirValueGetType(q),
                       nn_tensor_type(b->ctx, 3, lse_dims, mlirF32TypeGet(b->ctx))};
  return mlirOperationGetResult(spec_finish(&s, 2, types), 0);
}

MlirOperation nn_build_op(nn_builder *b, nn_op_kind kind, MlirStringRef module,
                          int num_operands, const MlirValue *operands,
                          int num_results, const MlirType *results,
                          MlirOperation attrs_from) {
  MlirOperationState st = mlirOperationStateGet(str(nn_op_name(kind)), b->loc);
  mlirOperationStateAddOperands(&st, num_operands, operands);
  mlirOperationStateAddResults(&st, num_results, results);
  MlirNamedAttribute attrs[kMaxAttrs];
  int n = 0;
  attrs[n++] = mlirNamedAttributeGet(mlirIdentifierGet(b->ctx, str(NN_MODULE_ATTR)),
                                     mlirStringAttrGet(b->ctx, module));
  intptr_t count = mlirOperationIsNull(attrs_from) ? 0 : mlirOperationGetNumAttributes(attrs_from);
  for (intptr_t i = 0; i < count && n < kMaxAttrs; ++i) {
    MlirNamedAttribute a = mlirOperationGetAttribute(attrs_from, i);
    MlirStringRef name = mlirIdentifierStr(a.name);
    if (name.length == strlen(NN_MODULE_ATTR) && !memcmp(name.data, NN_MODULE_ATTR, name.length))
      continue;
    attrs[n++] = a;
  }
  mlirOperationStateAddAttributes(&st, n, attrs);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockAppendOwnedOperation(b->block, op);
  return op;
}

MlirValue nn_build_cross_entropy(nn_builder *b, const char *module,
                                 MlirValue logits, MlirValue labels,
                                 int64_t ignore_index, bool shift) {
  op_spec s;
  spec_init(&s, b, NN_OP_CROSS_ENTROPY, module);
  spec_operands(&s, 2, (MlirValue[]){logits, labels});
  spec_int(&s, "ignore_index", ignore_index);
  spec_bool(&s, "shift", shift);
  return finish1(&s, nn_tensor_type(b->ctx, 0, NULL, mlirF32TypeGet(b->ctx)));
}

MlirValue nn_build_mamba2_mixer(nn_builder *b, const char *module, MlirValue x,
                                MlirValue segment_ids, const nn_mamba2_params *p,
                                const nn_mamba2_config *cfg) {
  op_spec s;
  spec_init(&s, b, NN_OP_MAMBA2_MIXER, module);
  spec_operands(&s, mlirValueIsNull(segment_ids) ? 9 : 10,
                (MlirValue[]){x, p->in_proj_weight, p->conv1d_weight,
                              p->conv1d_bias, p->dt_bias, p->A_log, p->D,
                              p->norm_weight, p->out_proj_weight, segment_ids});
  spec_int(&s, "num_heads", cfg->num_heads);
  spec_int(&s, "head_dim", cfg->head_dim);
  spec_int(&s, "n_groups", cfg->n_groups);
  spec_int(&s, "state_size", cfg->state_size);
  spec_int(&s, "conv_kernel", cfg->conv_kernel);
  spec_int(&s, "chunk_size", cfg->chunk_size);
  spec_float(&s, "eps", cfg->eps);
  spec_float(&s, "dt_min", cfg->dt_min);
  if (cfg->cp_size > 1) // absent at cp 1: graphs without cp print as before
    spec_int(&s, "cp_size", cfg->cp_size);
  return finish1(&s, mlirValueGetType(x));
}
