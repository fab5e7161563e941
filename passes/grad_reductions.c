// Scheduling of the gradients' reductions in a partitioned step (see
// grad_reductions.h).
#include "grad_reductions.h"

#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "nn.h"
#include "shard_ops.h"

enum { kMaxChain = TP_MESH_AXES };

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

// A reduction chain: the collectives a gradient goes through to its store,
// first applied first.
typedef struct chain {
  int n;
  MlirOperation ops[kMaxChain];
  bool scatters; // some link is a reduce-scatter (its result is smaller)
} chain;

static bool one_use(MlirValue v) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  return !mlirOpOperandIsNull(u) && mlirOpOperandIsNull(mlirOpOperandGetNextUse(u));
}

// The chain between `store` and the gradient (returned in *source), each
// collective's only user the next link.
static chain chain_of(MlirOperation store, MlirValue *source) {
  chain c = {0};
  MlirValue v = mlirOperationGetOperand(store, 0);
  MlirOperation found[kMaxChain];
  while (c.n < kMaxChain && mlirValueIsAOpResult(v) && one_use(v) &&
         tp_is_collective(mlirOpResultGetOwner(v))) {
    found[c.n++] = mlirOpResultGetOwner(v);
    v = mlirOperationGetOperand(found[c.n - 1], 0);
  }
  for (int i = 0; i < c.n; ++i) {
    c.ops[i] = found[c.n - 1 - i];
    c.scatters |= tp_op_is(c.ops[i], "shard.reduce_scatter");
  }
  *source = v;
  return c;
}

// The later of two ops of one block.
static MlirOperation later(MlirOperation a, MlirOperation b) {
  return mlirOperationIsBeforeInBlock(a, b) ? b : a;
}

// An nn.add like `add` (its attributes) of `lhs` and `rhs` with result type
// `type`, placed after `after`.
static MlirOperation add_after(MlirBlock body, MlirOperation add, MlirValue lhs, MlirValue rhs,
                               MlirType type, MlirOperation after) {
  MlirOperationState st = mlirOperationStateGet(mlirStringRefCreateFromCString("nn.add"),
                                                mlirOperationGetLocation(add));
  MlirValue ops[2] = {lhs, rhs};
  mlirOperationStateAddOperands(&st, 2, ops);
  mlirOperationStateAddResults(&st, 1, &type);
  intptr_t n = mlirOperationGetNumAttributes(add);
  for (intptr_t i = 0; i < n; ++i) {
    MlirNamedAttribute a = mlirOperationGetAttribute(add, i);
    mlirOperationStateAddAttributes(&st, 1, &a);
  }
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationAfter(body, after, op);
  return op;
}

// `v` reduced through copies of `c`'s collectives (or `c`'s own when `reuse`)
// placed right after v's definition; *last receives the op defining the
// result. A scattering chain is pushed through an nn.add that only it reads
// (a tied weight's two gradients): each addend is reduced as soon as it is
// complete and the shards are added, so neither whole addend outlives its
// own computation.
static MlirValue reduce_early(MlirBlock body, MlirValue v, const chain *c, bool reuse,
                              MlirOperation *last) {
  MlirOperation def = mlirOpResultGetOwner(v);
  if (c->scatters && nn_op_kind_of(def) == NN_OP_ADD && one_use(v) &&
      mlirValueIsAOpResult(mlirOperationGetOperand(def, 0)) &&
      mlirValueIsAOpResult(mlirOperationGetOperand(def, 1))) {
    MlirOperation la, lb;
    MlirValue a = reduce_early(body, mlirOperationGetOperand(def, 0), c, false, &la);
    MlirValue b = reduce_early(body, mlirOperationGetOperand(def, 1), c, false, &lb);
    MlirOperation sum = add_after(body, def, a, b, mlirValueGetType(a), later(la, lb));
    *last = sum;
    return mlirOperationGetResult(sum, 0);
  }
  MlirOperation after = def;
  for (int i = 0; i < c->n; ++i) {
    MlirOperation link = reuse ? c->ops[i] : mlirOperationClone(c->ops[i]);
    if (reuse)
      mlirOperationMoveAfter(link, after);
    else
      mlirBlockInsertOwnedOperationAfter(body, after, link);
    mlirOperationSetOperand(link, 0, v);
    v = mlirOperationGetResult(link, 0);
    after = link;
  }
  *last = after;
  return v;
}

// Erases the ops of `c` and the nn.add tree below them that reduce_early
// replaced (each op's results unused by then).
static void erase_replaced(MlirValue v, const chain *c) {
  for (int i = c->n - 1; i >= 0; --i)
    mlirOperationDestroy(c->ops[i]);
  MlirOperation def = mlirOpResultGetOwner(v);
  if (nn_op_kind_of(def) != NN_OP_ADD || !mlirOpOperandIsNull(mlirValueGetFirstUse(v)))
    return;
  MlirValue a = mlirOperationGetOperand(def, 0), b = mlirOperationGetOperand(def, 1);
  mlirOperationDestroy(def);
  chain none = {0};
  if (mlirValueIsAOpResult(a))
    erase_replaced(a, &none);
  if (mlirValueIsAOpResult(b))
    erase_replaced(b, &none);
}

void tp_schedule_grad_reductions(MlirBlock body) {
  size_t n_stores = 0, cap = 0;
  MlirOperation *stores = NULL;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_STORE_GRAD) {
      if (n_stores == cap) {
        cap = cap ? 2 * cap : 256;
        stores = realloc(stores, cap * sizeof *stores);
      }
      stores[n_stores++] = op;
    }
  for (size_t s = 0; s < n_stores; ++s) {
    MlirValue source;
    chain c = chain_of(stores[s], &source);
    if (c.n == 0 || !mlirValueIsAOpResult(source))
      continue;
    bool split = c.scatters && nn_op_kind_of(mlirOpResultGetOwner(source)) == NN_OP_ADD;
    MlirOperation last;
    MlirValue reduced = reduce_early(body, source, &c, !split, &last);
    mlirOperationMoveAfter(stores[s], last);
    if (split) {
      mlirOperationSetOperand(stores[s], 0, reduced);
      erase_replaced(source, &c);
    }
  }
  free(stores);
}

void tp_fold_gather_slices(MlirBlock body) {
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    MlirValue in = tp_op_is(op, "shard.all_slice") ? mlirOperationGetOperand(op, 0)
                                                    : (MlirValue){NULL};
    MlirOperation gather = !mlirValueIsNull(in) && mlirValueIsAOpResult(in)
                               ? mlirOpResultGetOwner(in)
                               : (MlirOperation){NULL};
    if (!mlirOperationIsNull(gather) && tp_op_is(gather, "shard.all_gather") &&
        mlirAttributeEqual(mlirOperationGetAttributeByName(op, str("grid_axes")),
                           mlirOperationGetAttributeByName(gather, str("grid_axes"))) &&
        nn_attr_int(op, "slice_axis", -1) == nn_attr_int(gather, "gather_axis", -2)) {
      mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0),
                                    mlirOperationGetOperand(gather, 0));
      mlirOperationDestroy(op);
      if (mlirOpOperandIsNull(mlirValueGetFirstUse(in)))
        mlirOperationDestroy(gather);
    }
    op = next;
  }
}
