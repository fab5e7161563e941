// Per-op partition hooks (partition_hooks.h), through tp-partition's hook
// interface (partition.h).
#include "partition_hooks.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nn.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static void set_int(MlirOperation op, const char *name, int64_t v) {
  MlirContext ctx = mlirOperationGetContext(op);
  mlirOperationSetAttributeByName(op, str(name),
                                  mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), v));
}

static void copy_module(MlirOperation to, MlirOperation from) {
  MlirAttribute m = mlirOperationGetAttributeByName(from, str(NN_MODULE_ATTR));
  if (!mlirAttributeIsNull(m))
    mlirOperationSetAttributeByName(to, str(NN_MODULE_ATTR), m);
}

//===----------------------------------------------------------------------===//
// Local attributes and decisions
//===----------------------------------------------------------------------===//

void tp_localize_vocab(tp_part *p, MlirOperation local, const tp_decision *d) {
  if (d->factor[1] == 'v')
    set_int(local, "nn.vocab_parallel_axis", 1);
}

void tp_localize_heads(tp_part *p, MlirOperation local, const tp_decision *d) {
  if (d->factor[1] != 'h')
    return;
  int64_t tp = tp_part_mesh(p)->size[1];
  int64_t heads = nn_attr_int(local, "num_heads", 0);
  set_int(local, "num_heads", heads / tp);
  if (d->operands[1].on[1].kind == TP_SHARD) {
    set_int(local, "num_kv_heads", nn_attr_int(local, "num_kv_heads", 0) / tp);
  } else {
    // Replicated KV heads: local query head i is global head
    // tp_index * num_heads + i, which picks its KV head by the global ratio.
    set_int(local, "nn.q_head_offset_axis", 1);
    set_int(local, "nn.global_num_heads", heads);
  }
}

void tp_localize_mamba2(tp_part *p, MlirOperation local, const tp_decision *d) {
  if (d->factor[1] != 'm')
    return;
  int64_t tp = tp_part_mesh(p)->size[1];
  set_int(local, "num_heads", nn_attr_int(local, "num_heads", 0) / tp);
  set_int(local, "n_groups", nn_attr_int(local, "n_groups", 0) / tp);
}

void tp_refine_replicated_kv_grad(MlirOperation op, const tp_layout *current,
                                  const bool *pending, tp_decision *d) {
  if (d->factor[1] == 'h' && d->operands[1].on[1].kind == TP_REPLICATE)
    d->results[1].on[1] = d->results[2].on[1] = TP_P;
}

void tp_refine_partial_sum(MlirOperation op, const tp_layout *current, const bool *pending,
                           tp_decision *d) {
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (current[0].on[axis].kind == TP_PARTIAL && current[1].on[axis].kind == TP_PARTIAL &&
        !pending[0] && !pending[1] && d->factor[axis] == 0)
      d->operands[0].on[axis] = d->operands[1].on[axis] = d->results[0].on[axis] = TP_P;
}

//===----------------------------------------------------------------------===//
// The rowwise linear's bias
//===----------------------------------------------------------------------===//

// The epilogue: v + bias, the bias [F] following the features' placement
// (complete unless the last dim itself is split).
static MlirValue add_bias(tp_part *p, MlirValue v, const tp_layout *layout, MlirValue bias) {
  nn_shape s;
  nn_shape_of(mlirValueGetType(v), &s);
  tp_layout bl = {{TP_R, TP_R}};
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (layout->on[axis].kind == TP_SHARD && layout->on[axis].dim == s.rank - 1)
      bias = tp_part_reshard_axis(p, bias, mlirValueGetType(bias), &bl, axis, TP_S(0));
  MlirValue ops[2] = {v, bias};
  MlirType t = mlirValueGetType(v);
  MlirOperation op = tp_part_build(p, "nn.bias_add", (MlirOperation){NULL}, 2, ops, 1, &t);
  // The bias belongs to the linear whose output is being reduced.
  if (mlirValueIsAOpResult(v))
    copy_module(op, mlirOpResultGetOwner(v));
  return mlirOperationGetResult(op, 0);
}

bool tp_partition_linear(tp_part *p, MlirOperation op, const tp_decision *d,
                         const MlirValue *operands) {
  if (mlirOperationGetNumOperands(op) != 3 ||
      (d->results[0].on[0].kind != TP_PARTIAL && d->results[0].on[1].kind != TP_PARTIAL))
    return false;
  MlirValue result = mlirOperationGetResult(op, 0);
  MlirType type = tp_part_local_type(p, mlirValueGetType(result), &d->results[0]);
  MlirOperation local = tp_part_build(p, "nn.linear", op, 2, operands, 1, &type);
  tp_epilogue bias = {add_bias, operands[2]};
  tp_part_define(p, result, mlirOperationGetResult(local, 0), &d->results[0], &bias);
  return true;
}

//===----------------------------------------------------------------------===//
// The split loss
//===----------------------------------------------------------------------===//

static MlirType f32_tensor(MlirContext ctx, int rank, const int64_t *dims) {
  return nn_tensor_type(ctx, rank, dims, mlirF32TypeGet(ctx));
}

// One collective over `axis` of the loss's statistic `v`.
static MlirValue reduce(tp_part *p, MlirOperation loss, MlirValue v, int axis, bool is_max) {
  return tp_part_collective(p, TP_ALL_REDUCE, v, axis, 0, 0, is_max, mlirValueGetType(v),
                            loss);
}

bool tp_partition_cross_entropy(tp_part *p, MlirOperation op, const tp_decision *d,
                                const MlirValue *operands) {
  if (!d->factor[0] && !d->factor[1])
    return false;
  MlirContext ctx = mlirOperationGetContext(op);
  MlirValue logits = operands[0], labels = operands[1];
  nn_shape ls;
  nn_shape_of(mlirValueGetType(logits), &ls);
  int64_t bs[2] = {ls.dims[0], ls.dims[1]};
  MlirType stat = f32_tensor(ctx, 2, bs);
  bool vocab = d->factor[1] == 'v', batch = d->factor[0] == 'b';
  MlirOperation max_op = tp_part_build(p, "nn.ce_logit_max", (MlirOperation){NULL}, 1,
                                       &logits, 1, &stat);
  copy_module(max_op, op);
  MlirValue max = mlirOperationGetResult(max_op, 0);
  if (vocab)
    max = reduce(p, op, max, 1, true);
  MlirValue in3[3] = {logits, labels, max};
  MlirType two[2] = {stat, stat};
  MlirOperation sums = tp_part_build(p, "nn.ce_partial_sums", op, 3, in3, 2, two);
  if (vocab)
    set_int(sums, "nn.vocab_parallel_axis", 1);
  MlirValue se = mlirOperationGetResult(sums, 0), tg = mlirOperationGetResult(sums, 1);
  if (vocab) {
    se = reduce(p, op, se, 1, false);
    tg = reduce(p, op, tg, 1, false);
  }
  int64_t two_dims[1] = {2};
  MlirType sc_type = f32_tensor(ctx, 1, two_dims);
  MlirValue in4[4] = {max, se, tg, labels};
  MlirValue sc =
      mlirOperationGetResult(tp_part_build(p, "nn.ce_loss_sum", op, 4, in4, 1, &sc_type), 0);
  if (batch)
    sc = reduce(p, op, sc, 0, false);
  MlirValue stats[3] = {max, se, sc};
  tp_part_stash(p, mlirOperationGetOperand(op, 0).ptr, 3, stats);
  MlirType loss_type = f32_tensor(ctx, 0, NULL);
  MlirOperation mean =
      tp_part_build(p, "nn.ce_mean", (MlirOperation){NULL}, 1, &sc, 1, &loss_type);
  copy_module(mean, op);
  tp_layout replicated = {{TP_R, TP_R}};
  tp_part_define(p, mlirOperationGetResult(op, 0), mlirOperationGetResult(mean, 0), &replicated,
                 NULL);
  return true;
}

bool tp_partition_cross_entropy_grad(tp_part *p, MlirOperation op, const tp_decision *d,
                                     const MlirValue *operands) {
  if (!d->factor[0] && !d->factor[1])
    return false;
  MlirValue stats[3];
  if (!tp_part_stashed(p, mlirOperationGetOperand(op, 0).ptr, 3, stats)) {
    tp_part_error(p, "the loss gradient comes before the split loss it differentiates");
    return true;
  }
  MlirValue ops[5] = {operands[0], operands[1], stats[0], stats[1], stats[2]};
  MlirType t = mlirValueGetType(operands[0]);
  MlirOperation g = tp_part_build(p, "nn.ce_logits_grad", op, 5, ops, 1, &t);
  if (d->factor[1] == 'v')
    set_int(g, "nn.vocab_parallel_axis", 1);
  tp_part_define(p, mlirOperationGetResult(op, 0), mlirOperationGetResult(g, 0), &d->results[0],
                 NULL);
  return true;
}

//===----------------------------------------------------------------------===//
// The optimizer's hand-off
//===----------------------------------------------------------------------===//

void tp_rewrite_store_grad(tp_part *p, MlirOperation op) {
  tp_layout want;
  if (!tp_part_param_layout(p, mlirOperationGetAttributeByName(op, str("nn.grad_of")), &want)) {
    tp_part_error(p, "no parameter named by nn.grad_of");
    return;
  }
  MlirValue v = tp_part_reshard(p, mlirOperationGetOperand(op, 0), &want);
  tp_part_build(p, "nn.store_grad", op, 1, &v, 0, NULL);
}
