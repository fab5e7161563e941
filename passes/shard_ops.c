// Generic-form construction of upstream shard dialect ops (grid, sharding,
// shard, collectives) and reading of grid shapes and split axes.
#include "shard_ops.h"

#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static MlirAttribute parse_attr(MlirContext ctx, const char *text) {
  return mlirAttributeParseGet(ctx, str(text));
}

static MlirNamedAttribute named(MlirContext ctx, const char *name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, str(name)), a);
}

bool tp_op_is(MlirOperation op, const char *name) {
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  return n.length == strlen(name) && !memcmp(n.data, name, n.length);
}

bool tp_is_collective(MlirOperation op) {
  return tp_op_is(op, "shard.all_reduce") || tp_op_is(op, "shard.reduce_scatter") ||
         tp_op_is(op, "shard.all_gather") || tp_op_is(op, "shard.all_slice") ||
         tp_op_is(op, "shard.all_to_all");
}

bool tp_check_functions(MlirOperation module) {
  bool ok = true;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f)) {
    if (!tp_op_is(f, "func.func"))
      continue;
    MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0));
    ok &= mlirBlockIsNull(entry) || tp_is_defined_func(f);
  }
  return ok;
}

bool tp_is_defined_func(MlirOperation op) {
  if (!tp_op_is(op, "func.func"))
    return false;
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  if (mlirBlockIsNull(entry))
    return false;
  if (!mlirBlockIsNull(mlirBlockGetNextInRegion(entry))) {
    mlirEmitError(mlirOperationGetLocation(op),
                  "a function with more than one block is not supported by the sharding "
                  "passes (model graphs are straight-line code)");
    return false;
  }
  return true;
}

// Creates the op described by `state` at `at`.
static MlirOperation insert(tp_insert *at, MlirOperationState *state) {
  MlirOperation op = mlirOperationCreate(state);
  if (mlirOperationIsNull(at->before))
    mlirBlockAppendOwnedOperation(at->block, op);
  else
    mlirBlockInsertOwnedOperationBefore(at->block, at->before, op);
  return op;
}

static MlirOperation find_grid(MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (!tp_op_is(op, "shard.grid"))
      continue;
    MlirAttribute name = mlirOperationGetAttributeByName(op, str("sym_name"));
    MlirStringRef s = mlirStringAttrGetValue(name);
    if (s.length == strlen(TP_GRID_NAME) && !memcmp(s.data, TP_GRID_NAME, s.length))
      return op;
  }
  return (MlirOperation){NULL};
}

bool tp_read_grid(MlirOperation module, tp_mesh *mesh) {
  MlirOperation grid = find_grid(module);
  if (mlirOperationIsNull(grid))
    return false;
  MlirAttribute shape = mlirOperationGetAttributeByName(grid, str("shape"));
  if (!mlirAttributeIsADenseI64Array(shape) || mlirDenseArrayGetNumElements(shape) != 2)
    return false;
  for (int i = 0; i < 2; ++i) {
    mesh->size[i] = mlirDenseI64ArrayGetElement(shape, i);
    if (mesh->size[i] < 1)
      return false; // 0 or dynamic ('?'): not a mesh we can run on
  }
  return true;
}

bool tp_ensure_grid(MlirOperation module, const tp_mesh *mesh, char *err,
                    size_t errlen) {
  tp_mesh have;
  if (tp_read_grid(module, &have)) {
    if (have.size[0] == mesh->size[0] && have.size[1] == mesh->size[1])
      return true;
    snprintf(err, errlen,
             "the module already has shard.grid @" TP_GRID_NAME
             " of shape %lldx%lld, but dp x tp is %lldx%lld",
             (long long)have.size[0], (long long)have.size[1],
             (long long)mesh->size[0], (long long)mesh->size[1]);
    return false;
  }
  MlirContext ctx = mlirOperationGetContext(module);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  tp_insert at = {ctx, body, mlirBlockGetFirstOperation(body),
                  mlirOperationGetLocation(module)};
  MlirOperationState st = mlirOperationStateGet(str("shard.grid"), at.loc);
  MlirNamedAttribute attrs[2] = {
      named(ctx, "sym_name", mlirStringAttrGet(ctx, str(TP_GRID_NAME))),
      named(ctx, "shape", mlirDenseI64ArrayGet(ctx, 2, mesh->size))};
  mlirOperationStateAddAttributes(&st, 2, attrs);
  insert(&at, &st);
  return true;
}

MlirValue tp_build_sharding(tp_insert *at, const tp_layout *layout, int rank) {
  // split_axes: for each tensor dim, the grid axes splitting it.
  char text[256];
  int n = snprintf(text, sizeof text, "#shard<axisarray[");
  int last_split = -1;
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (layout->on[axis].kind == TP_SHARD && layout->on[axis].dim > last_split)
      last_split = layout->on[axis].dim;
  if (last_split < 0)
    n += snprintf(text + n, sizeof text - (size_t)n, "[]");
  for (int d = 0; d <= last_split && d < rank; ++d) {
    n += snprintf(text + n, sizeof text - (size_t)n, "%s[", d ? ", " : "");
    bool first = true;
    for (int axis = 0; axis < TP_MESH_AXES; ++axis)
      if (layout->on[axis].kind == TP_SHARD && layout->on[axis].dim == d) {
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", first ? "" : ", ", axis);
        first = false;
      }
    n += snprintf(text + n, sizeof text - (size_t)n, "]");
  }
  snprintf(text + n, sizeof text - (size_t)n, "]>");
  MlirContext ctx = at->ctx;
  MlirOperationState st = mlirOperationStateGet(str("shard.sharding"), at->loc);
  MlirNamedAttribute attrs[] = {
      named(ctx, "grid", mlirFlatSymbolRefAttrGet(ctx, str(TP_GRID_NAME))),
      named(ctx, "split_axes", parse_attr(ctx, text)),
      named(ctx, "operandSegmentSizes", parse_attr(ctx, "array<i32: 0, 0>")),
      named(ctx, "static_halo_sizes", mlirDenseI64ArrayGet(ctx, 0, NULL)),
      named(ctx, "static_sharded_dims_offsets", mlirDenseI64ArrayGet(ctx, 0, NULL)),
  };
  mlirOperationStateAddAttributes(&st, 5, attrs);
  MlirType type = mlirTypeParseGet(ctx, str("!shard.sharding"));
  mlirOperationStateAddResults(&st, 1, &type);
  return mlirOperationGetResult(insert(at, &st), 0);
}

MlirValue tp_build_shard(tp_insert *at, MlirValue value, MlirValue sharding,
                         bool annotate_for_users) {
  MlirOperationState st = mlirOperationStateGet(str("shard.shard"), at->loc);
  MlirValue operands[2] = {value, sharding};
  mlirOperationStateAddOperands(&st, 2, operands);
  MlirType type = mlirValueGetType(value);
  mlirOperationStateAddResults(&st, 1, &type);
  if (annotate_for_users) {
    MlirNamedAttribute a = named(at->ctx, "annotate_for_users", mlirUnitAttrGet(at->ctx));
    mlirOperationStateAddAttributes(&st, 1, &a);
  }
  return mlirOperationGetResult(insert(at, &st), 0);
}

typedef struct text_sink {
  char buf[256];
  size_t used;
} text_sink;

static void append_text(MlirStringRef r, void *data) {
  text_sink *t = data;
  size_t n = r.length < sizeof t->buf - 1 - t->used ? r.length : sizeof t->buf - 1 - t->used;
  memcpy(t->buf + t->used, r.data, n);
  t->used += n;
  t->buf[t->used] = '\0';
}

bool tp_read_sharding(MlirOperation sharding_op, tp_layout *layout) {
  if (!tp_op_is(sharding_op, "shard.sharding"))
    return false;
  *layout = (tp_layout){{TP_R, TP_R}};
  // split_axes prints as #shard<axisarray[[..], [..]]>; the C API has no
  // accessor, so read the text: dim d's list names the grid axes splitting it.
  text_sink t = {.used = 0};
  t.buf[0] = '\0';
  mlirAttributePrint(mlirOperationGetAttributeByName(sharding_op, str("split_axes")),
                     append_text, &t);
  const char *p = strstr(t.buf, "[[");
  if (!p)
    p = strstr(t.buf, "[");
  if (!p)
    return false;
  int depth = 0, dim = -1;
  for (; *p; ++p) {
    if (*p == '[' && ++depth == 2)
      ++dim;
    else if (*p == ']')
      --depth;
    else if (depth == 2 && *p >= '0' && *p <= '9') {
      int axis = *p - '0';
      if (axis < TP_MESH_AXES)
        layout->on[axis] = TP_S(dim);
    }
  }
  return true;
}

MlirValue tp_build_collective(tp_insert *at, tp_collective kind, MlirValue value,
                              int axis, int dim, int dim2, bool reduction_max,
                              MlirType result_type) {
  static const char *const names[] = {"shard.all_reduce", "shard.all_gather",
                                      "shard.reduce_scatter", "shard.all_to_all",
                                      "shard.all_slice"};
  MlirContext ctx = at->ctx;
  MlirOperationState st = mlirOperationStateGet(str(names[kind]), at->loc);
  mlirOperationStateAddOperands(&st, 1, &value);
  mlirOperationStateAddResults(&st, 1, &result_type);
  int16_t axes[1] = {(int16_t)axis};
  MlirType index = mlirIndexTypeGet(ctx);
  MlirNamedAttribute attrs[5];
  int n = 0;
  attrs[n++] = named(ctx, "grid", mlirFlatSymbolRefAttrGet(ctx, str(TP_GRID_NAME)));
  attrs[n++] = named(ctx, "grid_axes", mlirDenseI16ArrayGet(ctx, 1, axes));
  switch (kind) {
  case TP_ALL_REDUCE:
  case TP_REDUCE_SCATTER:
    attrs[n++] = named(ctx, "reduction",
                       parse_attr(ctx, reduction_max ? "#shard<partial max>"
                                                     : "#shard<partial sum>"));
    if (kind == TP_REDUCE_SCATTER)
      attrs[n++] = named(ctx, "scatter_axis", mlirIntegerAttrGet(index, dim));
    break;
  case TP_ALL_GATHER:
    attrs[n++] = named(ctx, "gather_axis", mlirIntegerAttrGet(index, dim));
    break;
  case TP_ALL_TO_ALL:
    attrs[n++] = named(ctx, "split_axis", mlirIntegerAttrGet(index, dim));
    attrs[n++] = named(ctx, "concat_axis", mlirIntegerAttrGet(index, dim2));
    break;
  case TP_ALL_SLICE:
    attrs[n++] = named(ctx, "slice_axis", mlirIntegerAttrGet(index, dim));
    break;
  }
  mlirOperationStateAddAttributes(&st, n, attrs);
  return mlirOperationGetResult(insert(at, &st), 0);
}
