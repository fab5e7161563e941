// nn-autodiff: appends the backward graph of each function on the global
// (unpartitioned) graph, like XLA/GSPMD: differentiate once, partition
// everything. The function's first result must be a loss produced by
// nn.cross_entropy; afterwards the function also returns the gradient of
// every parameter (argument with `nn.param`), each result marked
// `nn.grad_of = "<HF name>"`. Backward ops are fused per module like the
// forward ones and carry the forward op's nn.module, so the partitioner's
// rules place them and Megatron's collectives follow (the gradient of a
// replicated input consumed by a sharded op is Partial: an all-reduce).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nn.h"
#include "pass.h"
#include "diagnostic.h"
#include "ptr_map.h"
#include "recompute.h"
#include "shard_ops.h"

// Operands and results of one backward op, at most (the Mamba2 mixer's: x,
// eight weights, segment_ids and dy). Every NN_VJP row of the op table is
// checked against it when this file compiles, so no row is ever cut short.
enum { NN_MAX_VJP_VALUES = 11 };
#define NN_VJP(KIND, GRAD, operands, targets)                                             \
  _Static_assert(sizeof(operands) - 1 <= NN_MAX_VJP_VALUES &&                             \
                     sizeof(targets) - 1 <= NN_MAX_VJP_VALUES,                            \
                 "NN_VJP(" #KIND "): more values than NN_MAX_VJP_VALUES");
#include "shardrt/ops.def"

//===----------------------------------------------------------------------===//
// Value -> value maps (gradients, and the values that need one)
//===----------------------------------------------------------------------===//

// A value's gradient (or, for `requires`, the value itself), as the
// MlirValue's pointer in a tp_ptr_map.
static MlirValue map_get(const tp_ptr_map *m, MlirValue key) {
  intptr_t v;
  return tp_ptr_map_get(m, key.ptr, &v) ? (MlirValue){(void *)v} : (MlirValue){NULL};
}

static void map_set(tp_ptr_map *m, MlirValue key, MlirValue value) {
  tp_ptr_map_put(m, key.ptr, (intptr_t)value.ptr);
}

//===----------------------------------------------------------------------===//
// The backward of each op
//===----------------------------------------------------------------------===//

typedef struct ad_run {
  nn_builder b;
  tp_ptr_map grads;    // value -> its gradient so far
  tp_ptr_map requires; // value -> itself when it depends on a parameter
  tp_recompute rc;     // activation checkpointing: forward values recomputed
  int errors;
} ad_run;

static bool requires_grad(ad_run *r, MlirValue v) {
  return !mlirValueIsNull(map_get(&r->requires, v));
}

// Adds `g` to the gradient of `v` (an nn.add when `v` already has one: a
// value used twice gets the sum of its users' gradients).
static void accumulate(ad_run *r, MlirValue v, MlirValue g, MlirStringRef module) {
  if (!requires_grad(r, v))
    return;
  MlirValue old = map_get(&r->grads, v);
  if (!mlirValueIsNull(old)) {
    MlirValue ops[2] = {old, g};
    MlirType t = mlirValueGetType(old);
    g = mlirOperationGetResult(nn_build_op(&r->b, NN_OP_ADD, module, 2, ops, 1, &t,
                                           (MlirOperation){NULL}),
                               0);
  }
  map_set(&r->grads, v, g);
}

static MlirValue operand(MlirOperation op, int i) { return mlirOperationGetOperand(op, i); }

static MlirType type_of(MlirValue v) { return mlirValueGetType(v); }

// Operand `code` of a backward op of `fwd` (an NN_VJP operand letter): dy,
// or a forward operand or result, recomputed where its segment is.
static MlirValue vjp_operand(ad_run *r, MlirOperation fwd, char code, MlirValue dy) {
  if (code == 'd')
    return dy;
  MlirValue v = code >= 'A' && code <= 'J' ? mlirOperationGetResult(fwd, code - 'A')
                                           : operand(fwd, code - '0');
  return tp_recompute_value(&r->rc, v);
}

// Builds one backward op of `fwd` (an NN_VJP row of the op table) and
// accumulates its results into the gradients of the forward operands it
// targets. Skipped when no target needs a gradient (or exists: an absent
// optional operand).
static void apply_vjp(ad_run *r, MlirOperation fwd, const nn_vjp *vjp, MlirValue dy) {
  MlirStringRef m = nn_module_of(fwd);
  // Backward ops (and the adds of their gradients) are located at their
  // forward op: a diagnostic on them points at the module's source.
  r->b.loc = mlirOperationGetLocation(fwd);
  intptr_t nfwd = mlirOperationGetNumOperands(fwd);
  MlirValue targets[NN_MAX_VJP_VALUES];
  MlirType types[NN_MAX_VJP_VALUES];
  int nt = 0;
  bool needed = false;
  for (const char *t = vjp->targets; *t && nt < NN_MAX_VJP_VALUES; ++t) {
    if (*t - '0' >= nfwd)
      return; // an absent optional operand (a linear without bias)
    targets[nt] = operand(fwd, *t - '0');
    types[nt] = type_of(targets[nt]);
    needed |= requires_grad(r, targets[nt++]);
  }
  if (!needed)
    return;
  MlirValue ops[NN_MAX_VJP_VALUES];
  int n = 0;
  for (const char *o = vjp->operands; *o && n < NN_MAX_VJP_VALUES; ++o)
    if (*o < '0' || *o > '9' || *o - '0' < nfwd) // an absent optional operand is left out
      ops[n++] = vjp_operand(r, fwd, *o, dy);
  if (vjp->grad == NN_OP_NONE) { // the gradient passes through (an add)
    for (int i = 0; i < nt; ++i)
      accumulate(r, targets[i], ops[0], m);
    return;
  }
  MlirOperation g = nn_build_op(&r->b, vjp->grad, m, n, ops, nt, types, fwd);
  for (int i = 0; i < nt; ++i)
    accumulate(r, targets[i], mlirOperationGetResult(g, i), m);
}

static void backward(ad_run *r, MlirOperation op, MlirValue dy) {
  const nn_vjp *vjps;
  int n = nn_op_vjps(nn_op_kind_of(op), &vjps);
  if (n < 0) {
    tp_error(op, "nn-autodiff", "no backward for %s", nn_op_name(nn_op_kind_of(op)));
    ++r->errors;
  }
  for (int i = 0; i < n; ++i)
    apply_vjp(r, op, &vjps[i], dy);
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static MlirAttribute arg_attr(MlirOperation func, intptr_t i, const char *name) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, str("arg_attrs"));
  if (mlirAttributeIsNull(all) || i >= mlirArrayAttrGetNumElements(all))
    return (MlirAttribute){NULL};
  return mlirDictionaryAttrGetElementByName(mlirArrayAttrGetElement(all, i), str(name));
}

// Marks every value that depends on a parameter.
static void mark_requires(ad_run *r, MlirBlock body, MlirOperation func) {
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(body); ++i)
    if (!mlirAttributeIsNull(arg_attr(func, i, NN_PARAM_ATTR)))
      map_set(&r->requires, mlirBlockGetArgument(body, i), mlirBlockGetArgument(body, i));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    bool any = false;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
      any |= requires_grad(r, operand(op, i));
    for (intptr_t i = 0; any && i < mlirOperationGetNumResults(op); ++i)
      map_set(&r->requires, mlirOperationGetResult(op, i), mlirOperationGetResult(op, i));
  }
}

// An error at `op` (a function, or the op at fault).
static void fail_at(ad_run *r, MlirOperation op, const char *msg) {
  tp_error(op, "nn-autodiff", "%s", msg);
  ++r->errors;
}

static bool differentiate(ad_run *r, MlirOperation func, MlirBlock body,
                          MlirOperation ret) {
  MlirValue loss = mlirOperationGetNumOperands(ret) ? operand(ret, 0) : (MlirValue){NULL};
  MlirOperation ce = !mlirValueIsNull(loss) && mlirValueIsAOpResult(loss)
                         ? mlirOpResultGetOwner(loss)
                         : (MlirOperation){NULL};
  if (mlirOperationIsNull(ce) || nn_op_kind_of(ce) != NN_OP_CROSS_ENTROPY) {
    fail_at(r, func, "the function's first result must be the loss of an "
                     "nn.cross_entropy");
    return false;
  }
  // The loss's gradient is 1: the loss op's backward (which reads no
  // incoming gradient) starts the chain.
  backward(r, ce, (MlirValue){NULL});
  // The C API walks blocks forward only: list the forward ops, then go back.
  size_t n = 0, cap = 256;
  MlirOperation *ops = malloc(cap * sizeof *ops);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       !mlirOperationIsNull(op) && !mlirOperationEqual(op, ce);
       op = mlirOperationGetNextInBlock(op)) {
    if (n == cap)
      ops = realloc(ops, (cap *= 2) * sizeof *ops);
    ops[n++] = op;
  }
  r->rc.ops = ops;
  r->rc.num_ops = n;
  while (n-- > 0) {
    MlirOperation op = ops[n];
    tp_recompute_before(&r->rc, body, n);
    if (nn_op_kind_of(op) == NN_OP_NONE || !nn_op_is_forward(nn_op_kind_of(op)) ||
        mlirOperationGetNumResults(op) == 0)
      continue;
    // Every forward op has one differentiable result, its first: the others
    // (attention's lse) are saved for the backward, never read by a
    // differentiable op (that gradient would be lost: refused).
    for (intptr_t i = 1; i < mlirOperationGetNumResults(op); ++i)
      if (!mlirValueIsNull(map_get(&r->grads, mlirOperationGetResult(op, i))))
        fail_at(r, op, "a result other than the first needs a gradient (only the first "
                       "is differentiable)");
    MlirValue dy = map_get(&r->grads, mlirOperationGetResult(op, 0));
    if (!mlirValueIsNull(dy))
      backward(r, op, dy);
  }
  free(ops);
  r->b.loc = mlirOperationGetLocation(func);
  return r->errors == 0;
}

// Replaces the return with (original results..., gradients...) and updates
// the function type and result attributes.
static void rebuild_return(ad_run *r, MlirOperation func, MlirBlock body,
                           MlirOperation ret) {
  intptr_t nret = mlirOperationGetNumOperands(ret);
  intptr_t nargs = mlirBlockGetNumArguments(body);
  MlirValue *vals = calloc((size_t)(nret + nargs), sizeof *vals);
  MlirType *types = calloc((size_t)(nret + nargs), sizeof *types);
  MlirAttribute *res_attrs = calloc((size_t)(nret + nargs), sizeof *res_attrs);
  int n = 0;
  for (intptr_t i = 0; i < nret; ++i) {
    vals[n] = operand(ret, i);
    res_attrs[n++] = mlirDictionaryAttrGet(r->b.ctx, 0, NULL);
  }
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirAttribute name = arg_attr(func, i, NN_PARAM_ATTR);
    if (mlirAttributeIsNull(name))
      continue;
    MlirValue g = map_get(&r->grads, mlirBlockGetArgument(body, i));
    if (mlirValueIsNull(g)) {
      char msg[512];
      MlirStringRef s = mlirStringAttrGetValue(name);
      snprintf(msg, sizeof msg, "parameter '%.*s' does not reach the loss: "
                                "it has no gradient", (int)s.length, s.data);
      fail_at(r, func, msg);
      continue;
    }
    vals[n] = g;
    MlirNamedAttribute a =
        mlirNamedAttributeGet(mlirIdentifierGet(r->b.ctx, str("nn.grad_of")), name);
    res_attrs[n++] = mlirDictionaryAttrGet(r->b.ctx, 1, &a);
  }
  if (!r->errors) {
    for (int i = 0; i < n; ++i)
      types[i] = type_of(vals[i]);
    MlirOperationState st = mlirOperationStateGet(str("func.return"),
                                                  mlirOperationGetLocation(ret));
    mlirOperationStateAddOperands(&st, n, vals);
    mlirBlockAppendOwnedOperation(body, mlirOperationCreate(&st));
    mlirOperationDestroy(ret);
    MlirType inputs[NN_MAX_FUNC_ARGS];
    for (intptr_t i = 0; i < nargs && i < NN_MAX_FUNC_ARGS; ++i)
      inputs[i] = type_of(mlirBlockGetArgument(body, i));
    mlirOperationSetAttributeByName(
        func, str("function_type"),
        mlirTypeAttrGet(mlirFunctionTypeGet(r->b.ctx, nargs, inputs, n, types)));
    mlirOperationSetAttributeByName(func, str("res_attrs"),
                                    mlirArrayAttrGet(r->b.ctx, n, res_attrs));
  }
  free(vals);
  free(types);
  free(res_attrs);
}

static MlirLogicalResult autodiff_func(MlirOperation func, tp_recompute_mode mode) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation ret = mlirBlockGetTerminator(body);
  ad_run r = {.b = {mlirOperationGetContext(func), body, mlirOperationGetLocation(func)},
              .rc = {.mode = mode}};
  if (mlirOperationIsNull(ret) || !tp_op_is(ret, "func.return")) {
    fail_at(&r, func, "the function has no func.return");
    return mlirLogicalResultFailure();
  }
  if (mlirBlockGetNumArguments(body) > NN_MAX_FUNC_ARGS) {
    char msg[128];
    snprintf(msg, sizeof msg, "more than %d arguments (the input ids, the labels and one per "
             "parameter tensor)", NN_MAX_FUNC_ARGS);
    fail_at(&r, func, msg);
    return mlirLogicalResultFailure();
  }
  // Differentiating a graph twice would append a second backward.
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_phase_of(nn_op_kind_of(op)) == NN_PHASE_BACKWARD ||
        nn_op_phase_of(nn_op_kind_of(op)) == NN_PHASE_OPTIMIZER) {
      fail_at(&r, op, "the function already has backward or optimizer ops: "
                      "run nn-autodiff once, on the forward graph");
      return mlirLogicalResultFailure();
    }
  mark_requires(&r, body, func);
  // Backward ops are appended after the forward ones; the return goes last.
  mlirOperationRemoveFromParent(ret);
  bool ok = differentiate(&r, func, body, ret);
  tp_recompute_finish(&r.rc);
  if (ok)
    rebuild_return(&r, func, body, ret);
  if (r.errors)
    mlirBlockAppendOwnedOperation(body, ret); // keep the function well formed
  tp_ptr_map_free(&r.grads);
  tp_ptr_map_free(&r.requires);
  return r.errors ? mlirLogicalResultFailure() : mlirLogicalResultSuccess();
}

static MlirLogicalResult run_nn_autodiff(MlirOperation module, const tp_option_value *o) {
  tp_recompute_mode mode;
  if (!tp_recompute_parse(o[0].s, &mode)) {
    tp_error(module, "nn-autodiff", "recompute '%s' is not one of none, full, attention",
             o[0].s);
    return mlirLogicalResultFailure();
  }
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  MlirLogicalResult result = mlirLogicalResultSuccess();
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f) && mlirLogicalResultIsFailure(autodiff_func(f, mode)))
      result = mlirLogicalResultFailure();
  return result;
}

static const tp_option_info kOptions[] = {
    {"recompute", TP_OPTION_STRING, "none",
     "activation checkpointing: none; full (each decoder layer's forward recomputed before "
     "its backward from the layer's input); attention (only each attention module's)"},
};

const tp_pass_info tp_nn_autodiff_pass = {
    .argument = "nn-autodiff",
    .summary = "Append the backward graph: each function also returns its parameters' gradients",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = 1,
    .run = run_nn_autodiff,
};
