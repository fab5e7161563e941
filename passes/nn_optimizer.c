// nn-optimizer: ends a training step. After nn-autodiff, each function
// returns (loss, gradients...) with `nn.grad_of` on the gradients; this pass
// hands each to its parameter (`nn.store_grad`) and ends with one
// `nn.optimizer_step` (total gradient norm with each
// logical element counted once, clipping by total norm, AdamW: the runtime's
// semantics, docs/runtime.md) and leaves the function returning the loss.
// Options are the step's defaults; the training driver may override them.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "diagnostic.h"
#include "nn.h"
#include "pass.h"
#include "shard_ops.h"

enum { kMaxGradNorm, kNormType, kLr, kBetas, kEps, kWeightDecay };

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static MlirAttribute f64(MlirContext ctx, double v) {
  return mlirFloatAttrDoubleGet(ctx, mlirF64TypeGet(ctx), v);
}

static MlirLogicalResult optimize_func(MlirOperation func, const tp_option_value *o,
                                       double beta1, double beta2) {
  MlirContext ctx = mlirOperationGetContext(func);
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation ret = mlirBlockGetTerminator(body);
  MlirAttribute res_attrs = mlirOperationGetAttributeByName(func, str("res_attrs"));
  intptr_t n = mlirOperationGetNumOperands(ret);
  if (n < 2 || mlirAttributeIsNull(res_attrs) || mlirArrayAttrGetNumElements(res_attrs) != n) {
    tp_error(func, "nn-optimizer", "the function returns no gradients: run nn-autodiff first");
    return mlirLogicalResultFailure();
  }
  MlirLocation loc = mlirOperationGetLocation(ret);
  nn_builder b = {ctx, body, loc};
  MlirValue loss_value = mlirOperationGetOperand(ret, 0);
  mlirOperationRemoveFromParent(ret);
  for (intptr_t i = 1; i < n; ++i) {
    MlirAttribute name = mlirDictionaryAttrGetElementByName(
        mlirArrayAttrGetElement(res_attrs, i), str("nn.grad_of"));
    if (mlirAttributeIsNull(name))
      continue; // not a gradient (e.g. the logits)
    MlirValue g = mlirOperationGetOperand(ret, i);
    MlirOperation store = nn_build_op(&b, NN_OP_STORE_GRAD, str("optimizer"), 1, &g, 0,
                                      NULL, (MlirOperation){NULL});
    mlirOperationSetAttributeByName(store, str("nn.grad_of"), name);
  }
  MlirOperation step = nn_build_op(&b, NN_OP_OPTIMIZER_STEP, str("optimizer"), 1,
                                   &loss_value, 0, NULL, (MlirOperation){NULL});
  struct {
    const char *name;
    double value;
  } attrs[] = {{"max_grad_norm", o[kMaxGradNorm].f}, {"norm_type", o[kNormType].f},
               {"lr", o[kLr].f}, {"beta1", beta1}, {"beta2", beta2},
               {"eps", o[kEps].f}, {"weight_decay", o[kWeightDecay].f}};
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs; ++i)
    mlirOperationSetAttributeByName(step, str(attrs[i].name), f64(ctx, attrs[i].value));
  // The function now returns the loss only.
  MlirOperationState st = mlirOperationStateGet(str("func.return"), loc);
  mlirOperationStateAddOperands(&st, 1, &loss_value);
  mlirBlockAppendOwnedOperation(body, mlirOperationCreate(&st));
  mlirOperationDestroy(ret);
  intptr_t nargs = mlirBlockGetNumArguments(body);
  MlirType *inputs = calloc((size_t)nargs + 1, sizeof *inputs);
  for (intptr_t i = 0; i < nargs; ++i)
    inputs[i] = mlirValueGetType(mlirBlockGetArgument(body, i));
  MlirType loss = mlirValueGetType(loss_value);
  mlirOperationSetAttributeByName(
      func, str("function_type"),
      mlirTypeAttrGet(mlirFunctionTypeGet(ctx, nargs, inputs, 1, &loss)));
  MlirAttribute empty = mlirDictionaryAttrGet(ctx, 0, NULL);
  mlirOperationSetAttributeByName(func, str("res_attrs"), mlirArrayAttrGet(ctx, 1, &empty));
  free(inputs);
  return mlirLogicalResultSuccess();
}

static MlirLogicalResult run_nn_optimizer(MlirOperation module, const tp_option_value *o) {
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  double beta1 = 0, beta2 = 0;
  char tail = 0;
  if (!o[kBetas].s || sscanf(o[kBetas].s, "%lf,%lf%c", &beta1, &beta2, &tail) != 2 ||
      !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) {
    tp_error(module, "nn-optimizer", "betas must be two numbers in [0, 1) as B1,B2, got '%s'",
             o[kBetas].s ? o[kBetas].s : "");
    return mlirLogicalResultFailure();
  }
  struct {
    const char *name;
    double value;
    bool ok;
  } checks[] = {{"lr", o[kLr].f, o[kLr].f >= 0 && isfinite(o[kLr].f)},
                {"eps", o[kEps].f, o[kEps].f > 0 && isfinite(o[kEps].f)},
                {"weight-decay", o[kWeightDecay].f,
                 o[kWeightDecay].f >= 0 && isfinite(o[kWeightDecay].f)},
                {"norm-type", o[kNormType].f, o[kNormType].f > 0},
                {"max-grad-norm", o[kMaxGradNorm].f, !isnan(o[kMaxGradNorm].f)}};
  for (size_t i = 0; i < sizeof checks / sizeof *checks; ++i)
    if (!checks[i].ok) {
      tp_error(module, "nn-optimizer",
               "option '%s' = %g is out of range (lr, weight-decay >= 0 and finite; eps > 0; "
               "norm-type > 0; max-grad-norm not NaN)",
               checks[i].name, checks[i].value);
      return mlirLogicalResultFailure();
    }
  MlirLogicalResult result = mlirLogicalResultSuccess();
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f) &&
        mlirLogicalResultIsFailure(optimize_func(f, o, beta1, beta2)))
      result = mlirLogicalResultFailure();
  return result;
}

static const tp_option_info kOptions[] = {
    [kMaxGradNorm] = {"max-grad-norm", TP_OPTION_FLOAT, "1.0",
                      "clip the total gradient norm to this (<= 0: no clipping)"},
    [kNormType] = {"norm-type", TP_OPTION_FLOAT, "2", "p of the gradient norm (inf allowed)"},
    [kLr] = {"lr", TP_OPTION_FLOAT, "1e-3", "AdamW learning rate"},
    [kBetas] = {"betas", TP_OPTION_STRING, "0.9,0.999", "AdamW betas as B1,B2"},
    [kEps] = {"eps", TP_OPTION_FLOAT, "1e-8", "AdamW epsilon"},
    [kWeightDecay] = {"weight-decay", TP_OPTION_FLOAT, "0.01", "AdamW decoupled weight decay"},
};

const tp_pass_info tp_nn_optimizer_pass = {
    .argument = "nn-optimizer",
    .summary = "End the step: grad norm (each element once), clipping, AdamW",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = sizeof kOptions / sizeof *kOptions,
    .run = run_nn_optimizer,
};
