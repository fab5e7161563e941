// The context-parallel traffic of a partitioned step (cp_traffic.h).
#include "cp_traffic.h"

#include "nn.h"

// Bytes of one rank's local tensor `v` at `elem` bytes per element.
static int64_t local_bytes(MlirValue v, int64_t elem) {
  nn_shape s;
  if (mlirValueIsNull(v) || !nn_shape_of(mlirValueGetType(v), &s))
    return 0;
  int64_t n = elem;
  for (int d = 0; d < s.rank; ++d)
    n *= s.dims[d];
  return n;
}

tp_cp_traffic tp_cp_traffic_of(MlirOperation module, MlirOperation func, int64_t kv_bytes) {
  tp_cp_traffic t = {.cp = mlirOperationIsNull(module) ? 1 : nn_attr_int(module, "nn.cp_size", 1)};
  if (t.cp <= 1)
    return t;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind kind = nn_op_kind_of(op);
    if (kind != NN_OP_ATTENTION && kind != NN_OP_ATTENTION_GRAD)
      continue;
    // Operands q, k, v[, segment_ids] (forward); q, k, v, out, lse, dy[,
    // segment_ids] (backward).
    intptr_t seg_at = kind == NN_OP_ATTENTION ? 3 : 6;
    MlirValue seg = mlirOperationGetNumOperands(op) > seg_at ? mlirOperationGetOperand(op, seg_at)
                                                             : (MlirValue){NULL};
    int64_t kv = local_bytes(mlirOperationGetOperand(op, 1), kv_bytes) +
                 local_bytes(mlirOperationGetOperand(op, 2), kv_bytes);
    int64_t gather = (t.cp - 1) * (kv + local_bytes(seg, 8));
    if (kind == NN_OP_ATTENTION) {
      ++t.forward_ops;
      t.gather_per_layer = gather;
    } else {
      ++t.backward_ops;
      t.grad_per_layer = (t.cp - 1) * kv;
      t.step += gather + t.grad_per_layer;
      continue;
    }
    t.step += gather;
  }
  return t;
}
