// shard-report: what one rank of a partitioned graph holds and moves per
// step: parameter bytes, activation bytes, and for each collective kind and
// mesh axis its count, payload and the bytes each rank sends with ring
// algorithms (all-reduce 2(n-1)/n x S, all-gather and reduce-scatter
// (n-1)/n x the full tensor, all-to-all (n-1)/n x S; all_slice moves
// nothing). Printed to stderr as a table; the IR is unchanged.
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nn.h"
#include "pass.h"
#include "shard_ops.h"

enum { kKinds = 5 };
static const char *const kNames[kKinds] = {"all_reduce", "all_gather", "reduce_scatter",
                                           "all_to_all", "all_slice"};

typedef struct report {
  tp_mesh mesh;
  long long param_bytes, param_elements, params;
  long long input_bytes, activation_bytes;
  long long count[kKinds][TP_MESH_AXES];
  double payload[kKinds][TP_MESH_AXES], sent[kKinds][TP_MESH_AXES];
} report;

static long long element_bytes(MlirType t) {
  if (mlirTypeIsAFloat(t))
    return (mlirFloatTypeGetWidth(t) + 7) / 8;
  if (mlirTypeIsAInteger(t))
    return (mlirIntegerTypeGetWidth(t) + 7) / 8;
  if (mlirTypeIsAIndex(t))
    return 8;
  return 0;
}

static long long bytes_of(MlirType type, long long *elements) {
  nn_shape s;
  if (!nn_shape_of(type, &s))
    return 0;
  long long n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  if (elements)
    *elements = n;
  return n * element_bytes(s.element);
}

static void count_collective(report *rep, MlirOperation op) {
  for (int k = 0; k < kKinds; ++k) {
    char name[32];
    snprintf(name, sizeof name, "shard.%s", kNames[k]);
    if (!tp_op_is(op, name))
      continue;
    MlirAttribute axes = mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("grid_axes"));
    int axis = mlirDenseArrayGetNumElements(axes) == 1 ? mlirDenseI16ArrayGetElement(axes, 0) : 1;
    if (axis < 0 || axis >= TP_MESH_AXES)
      return;
    double n = (double)rep->mesh.size[axis];
    double in = (double)bytes_of(mlirValueGetType(mlirOperationGetOperand(op, 0)), NULL);
    double out = (double)bytes_of(mlirValueGetType(mlirOperationGetResult(op, 0)), NULL);
    double sent = 0;
    if (k == 0)
      sent = 2 * (n - 1) / n * in;
    else if (k == 1)
      sent = (n - 1) / n * out;
    else if (k == 2 || k == 3)
      sent = (n - 1) / n * in;
    rep->count[k][axis] += 1;
    rep->payload[k][axis] += in;
    rep->sent[k][axis] += sent;
  }
}

static MlirWalkResult visit(MlirOperation op, void *data) {
  report *rep = data;
  if (tp_op_is(op, "func.func") || tp_op_is(op, "shard.sharding") ||
      tp_op_is(op, "builtin.module"))
    return MlirWalkResultAdvance;
  count_collective(rep, op);
  for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i)
    rep->activation_bytes += bytes_of(mlirValueGetType(mlirOperationGetResult(op, i)), NULL);
  return MlirWalkResultAdvance;
}

static void count_args(report *rep, MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirAttribute attrs = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("arg_attrs"));
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(body); ++i) {
    long long elements = 0;
    long long bytes = bytes_of(mlirValueGetType(mlirBlockGetArgument(body, i)), &elements);
    bool param = !mlirAttributeIsNull(attrs) && i < mlirArrayAttrGetNumElements(attrs) &&
                 !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(
                     mlirArrayAttrGetElement(attrs, i),
                     mlirStringRefCreateFromCString(NN_PARAM_ATTR)));
    if (param) {
      rep->param_bytes += bytes;
      rep->param_elements += elements;
      rep->params += 1;
    } else {
      rep->input_bytes += bytes;
    }
  }
}

static void print_report(const report *rep, MlirStringRef name) {
  FILE *o = stderr;
  fprintf(o, "shard-report: @%.*s, per rank, mesh dp=%lld x tp=%lld (every rank runs "
             "the same program; bytes per step)\n",
          (int)name.length, name.data, (long long)rep->mesh.size[0],
          (long long)rep->mesh.size[1]);
  fprintf(o, "  %-16s %18lld bytes  (%lld elements in %lld tensors)\n", "parameters",
          rep->param_bytes, rep->param_elements, rep->params);
  fprintf(o, "  %-16s %18lld bytes  (input_ids, labels)\n", "inputs", rep->input_bytes);
  fprintf(o, "  %-16s %18lld bytes  (every intermediate value, before buffer reuse)\n",
          "activations", rep->activation_bytes);
  fprintf(o, "  %-16s %4s %6s %18s %20s\n", "collective", "axis", "count", "payload bytes",
          "bytes sent per rank");
  double total = 0;
  for (int k = 0; k < kKinds; ++k)
    for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
      if (!rep->count[k][axis])
        continue;
      fprintf(o, "  %-16s %4s %6lld %18.0f %20.0f\n", kNames[k], axis ? "tp" : "dp",
              rep->count[k][axis], rep->payload[k][axis], rep->sent[k][axis]);
      total += rep->sent[k][axis];
    }
  fprintf(o, "  %-16s %4s %6s %18s %20.0f\n", "total", "", "", "", total);
}

static MlirLogicalResult run_shard_report(MlirOperation module, const tp_option_value *o) {
  (void)o;
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  report base = {0};
  if (!tp_read_grid(module, &base.mesh))
    base.mesh = (tp_mesh){{1, 1}};
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f)) {
    if (!tp_is_defined_func(f))
      continue;
    report rep = base;
    count_args(&rep, f);
    mlirOperationWalk(f, visit, &rep, MlirWalkPreOrder);
    MlirAttribute name = mlirOperationGetAttributeByName(f, mlirStringRefCreateFromCString("sym_name"));
    print_report(&rep, mlirStringAttrGetValue(name));
  }
  return mlirLogicalResultSuccess();
}

const tp_pass_info tp_shard_report_pass = {
    .argument = "shard-report",
    .summary = "Print per-rank parameter and activation bytes and collective traffic",
    .anchor = "builtin.module",
    .options = NULL,
    .num_options = 0,
    .run = run_shard_report,
};
