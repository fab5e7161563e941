// tp-partition: the SPMD rewrite. Reads the shard annotations of tp-plan and
// rebuilds each function as the program every rank runs: local shapes, nn
// ops with local attributes, and an explicit upstream collective
// (shard.all_reduce, all_gather, reduce_scatter, all_to_all, all_slice) for
// every placement change on the dp or tp mesh axis. Per-op decisions come
// from the sharding rules (sharding_rules.c), so Megatron's collectives fall
// out of the rules rather than being special cases: a rowwise linear gives a
// Partial result whose annotation asks for Replicate (an all-reduce) or
// Shard(1) (a reduce-scatter, with sequence parallel); reshards of one value
// to one placement are made once and shared (q/k/v share one all-gather).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "nn.h"
#include "pass.h"
#include "shard_ops.h"
#include "sharding_rules.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

//===----------------------------------------------------------------------===//
// Value maps
//===----------------------------------------------------------------------===//

enum { kMaxReshards = 4 };

// What an original value became: its local value, its layout, whether it is
// a parameter, a rowwise bias still to add once its Partial is reduced, and
// the reshards already made of it (so users share one collective).
typedef struct mapped {
  const void *key;
  MlirValue value;
  tp_layout layout;
  bool is_param;
  MlirValue pending_bias;
  int num_reshards;
  tp_layout reshard_layout[kMaxReshards];
  MlirValue reshard_value[kMaxReshards];
} mapped;

typedef struct part_run {
  MlirContext ctx;
  tp_mesh mesh;
  tp_insert at; // the new function's body, appending
  mapped *map;
  size_t map_cap, map_len;
  MlirOperation current; // the original op being rewritten, for diagnostics
  MlirAttribute source_module; // nn.module given to the collectives being built
  // The split loss's global statistics, by the (original) logits value, so
  // its backward reuses them.
  struct ce_stats {
    const void *logits;
    MlirValue max, sum_exp, sum_and_count;
  } ce[8];
  int num_ce;
  int errors;
} part_run;

static size_t hash_ptr(const void *p) { return ((size_t)p >> 4) * 0x9E3779B97F4A7C15ull; }

static mapped *map_find(part_run *r, MlirValue v) {
  if (!r->map_cap)
    return NULL;
  for (size_t i = hash_ptr(v.ptr) & (r->map_cap - 1);; i = (i + 1) & (r->map_cap - 1)) {
    if (r->map[i].key == v.ptr)
      return &r->map[i];
    if (!r->map[i].key)
      return NULL;
  }
}

static void map_put(part_run *r, MlirValue old, mapped m) {
  if (2 * (r->map_len + 1) > r->map_cap) {
    size_t cap = r->map_cap ? 2 * r->map_cap : 1024;
    mapped *grown = calloc(cap, sizeof *grown);
    for (size_t i = 0; i < r->map_cap; ++i)
      if (r->map[i].key)
        for (size_t j = hash_ptr(r->map[i].key) & (cap - 1);; j = (j + 1) & (cap - 1))
          if (!grown[j].key) {
            grown[j] = r->map[i];
            break;
          }
    free(r->map);
    r->map = grown;
    r->map_cap = cap;
  }
  m.key = old.ptr;
  for (size_t i = hash_ptr(old.ptr) & (r->map_cap - 1);; i = (i + 1) & (r->map_cap - 1))
    if (!r->map[i].key || r->map[i].key == old.ptr) {
      r->map_len += !r->map[i].key;
      r->map[i] = m;
      return;
    }
}

static bool layout_equal(const tp_layout *a, const tp_layout *b) {
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (!tp_placement_equal(a->on[axis], b->on[axis]))
      return false;
  return true;
}

__attribute__((format(printf, 2, 3))) static void report(part_run *r, const char *fmt, ...) {
  char msg[1024];
  MlirStringRef m = nn_module_of(r->current);
  int n = snprintf(msg, sizeof msg, "tp-partition: ");
  if (m.length)
    n += snprintf(msg + n, sizeof msg - (size_t)n, "'%.*s': ",
                  (int)(m.length < 256 ? m.length : 256), m.data);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  mlirEmitError(mlirOperationGetLocation(r->current), msg);
  ++r->errors;
}

//===----------------------------------------------------------------------===//
// Types and resharding
//===----------------------------------------------------------------------===//

// The local type of a value of global type `global` under `layout`.
static MlirType local_type(part_run *r, MlirType global, const tp_layout *layout) {
  nn_shape s;
  if (!nn_shape_of(global, &s))
    return global;
  int64_t local[NN_MAX_RANK];
  char err[256];
  if (!tp_local_shape(&r->mesh, layout, s.rank, s.dims, local, err, sizeof err)) {
    report(r, "%s", err);
    return global;
  }
  return nn_tensor_type(r->ctx, s.rank, local, s.element);
}

static MlirType global_type_of(MlirValue local, const tp_layout *layout,
                               const tp_mesh *mesh) {
  nn_shape s;
  if (!nn_shape_of(mlirValueGetType(local), &s))
    return mlirValueGetType(local);
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (layout->on[axis].kind == TP_SHARD)
      s.dims[layout->on[axis].dim] *= mesh->size[axis];
  return nn_tensor_type(mlirTypeGetContext(s.element), s.rank, s.dims, s.element);
}

// One axis of a reshard: `v` (global type `global`) from `from` to `to`.
static MlirValue reshard_axis(part_run *r, MlirValue v, MlirType global,
                              tp_layout *layout, int axis, tp_placement to) {
  tp_placement from = layout->on[axis];
  if (tp_placement_equal(from, to))
    return v;
  tp_layout next = *layout;
  next.on[axis] = to;
  // On an axis of one rank every placement holds the whole tensor.
  if (r->mesh.size[axis] == 1 && to.kind != TP_PARTIAL) {
    *layout = next;
    return v;
  }
  MlirType type = local_type(r, global, &next);
  MlirValue out = {NULL};
  if (to.kind == TP_PARTIAL) {
    char a[32];
    report(r, "cannot reshard a %s value to Partial", tp_placement_str(from, a, sizeof a));
    return v;
  }
  if (from.kind == TP_PARTIAL && to.kind == TP_REPLICATE)
    out = tp_build_collective(&r->at, TP_ALL_REDUCE, v, axis, 0, 0, false, type);
  else if (from.kind == TP_PARTIAL)
    out = tp_build_collective(&r->at, TP_REDUCE_SCATTER, v, axis, to.dim, 0, false, type);
  else if (from.kind == TP_SHARD && to.kind == TP_REPLICATE)
    out = tp_build_collective(&r->at, TP_ALL_GATHER, v, axis, from.dim, 0, false, type);
  else if (from.kind == TP_REPLICATE)
    out = tp_build_collective(&r->at, TP_ALL_SLICE, v, axis, to.dim, 0, false, type);
  else
    out = tp_build_collective(&r->at, TP_ALL_TO_ALL, v, axis, to.dim, from.dim, false, type);
  if (!mlirAttributeIsNull(r->source_module))
    mlirOperationSetAttributeByName(mlirOpResultGetOwner(out), str(NN_MODULE_ATTR),
                                    r->source_module);
  *layout = next;
  return out;
}

static MlirValue add_bias(part_run *r, MlirValue v, const tp_layout *layout,
                          MlirValue bias);

// The nn.module of the op that produced `old` (through shard annotations):
// collectives resharding it carry it, so a reader sees whose output moves.
static MlirAttribute source_module(MlirValue old) {
  for (int depth = 0; depth < 4 && mlirValueIsAOpResult(old); ++depth) {
    MlirOperation op = mlirOpResultGetOwner(old);
    if (!tp_op_is(op, "shard.shard"))
      return mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(NN_MODULE_ATTR));
    old = mlirOperationGetOperand(op, 0);
  }
  return (MlirAttribute){NULL};
}

// `old`'s local value in layout `to` (collectives emitted once per target).
static MlirValue reshard(part_run *r, MlirValue old, const tp_layout *to) {
  mapped *m = map_find(r, old);
  if (!m) {
    report(r, "internal error: a value was used before it was defined");
    return old;
  }
  if (layout_equal(&m->layout, to))
    return m->value;
  for (int i = 0; i < m->num_reshards; ++i)
    if (layout_equal(&m->reshard_layout[i], to))
      return m->reshard_value[i];
  MlirType global = global_type_of(m->value, &m->layout, &r->mesh);
  r->source_module = source_module(old);
  tp_layout layout = m->layout;
  MlirValue v = m->value;
  MlirValue bias = m->pending_bias;
  // Partial axes first (their reductions also add a pending bias), then the rest.
  for (int pass = 0; pass < 2; ++pass)
    for (int axis = 0; axis < TP_MESH_AXES; ++axis)
      if ((layout.on[axis].kind == TP_PARTIAL) == (pass == 0))
        v = reshard_axis(r, v, global, &layout, axis, to->on[axis]);
  if (!mlirValueIsNull(bias))
    v = add_bias(r, v, &layout, bias);
  m = map_find(r, old); // no insertion happened, but stay safe
  if (m->num_reshards < kMaxReshards) {
    m->reshard_layout[m->num_reshards] = *to;
    m->reshard_value[m->num_reshards++] = v;
  }
  return v;
}

//===----------------------------------------------------------------------===//
// Building local ops
//===----------------------------------------------------------------------===//

static void set_int(part_run *r, MlirOperation op, const char *name, int64_t v) {
  mlirOperationSetAttributeByName(op, str(name),
                                  mlirIntegerAttrGet(mlirIntegerTypeGet(r->ctx, 64), v));
}

// Creates `name` with operands, result types and the attributes of `like`.
static MlirOperation build(part_run *r, const char *name, MlirOperation like, int nops,
                           const MlirValue *ops, int nres, const MlirType *types) {
  MlirOperationState st = mlirOperationStateGet(str(name), r->at.loc);
  mlirOperationStateAddOperands(&st, nops, ops);
  mlirOperationStateAddResults(&st, nres, types);
  if (!mlirOperationIsNull(like)) {
    intptr_t n = mlirOperationGetNumAttributes(like);
    MlirNamedAttribute *attrs = calloc((size_t)n + 1, sizeof *attrs);
    for (intptr_t i = 0; i < n; ++i)
      attrs[i] = mlirOperationGetAttribute(like, i);
    mlirOperationStateAddAttributes(&st, n, attrs);
    free(attrs);
  }
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockAppendOwnedOperation(r->at.block, op);
  return op;
}

static MlirValue add_bias(part_run *r, MlirValue v, const tp_layout *layout,
                          MlirValue bias) {
  // The bias [F] follows the features' placement: complete unless the last
  // dim itself is split.
  nn_shape s;
  nn_shape_of(mlirValueGetType(v), &s);
  tp_layout bl = {{TP_R, TP_R}};
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (layout->on[axis].kind == TP_SHARD && layout->on[axis].dim == s.rank - 1) {
      tp_layout from = bl;
      MlirType global = mlirValueGetType(bias);
      bias = reshard_axis(r, bias, global, &from, axis, TP_S(0));
      bl = from;
    }
  MlirOperationState st = mlirOperationStateGet(str("nn.bias_add"), r->at.loc);
  MlirValue ops[2] = {v, bias};
  mlirOperationStateAddOperands(&st, 2, ops);
  MlirType t = mlirValueGetType(v);
  mlirOperationStateAddResults(&st, 1, &t);
  // The bias belongs to the linear whose Partial output is being reduced.
  if (!mlirAttributeIsNull(r->source_module)) {
    MlirNamedAttribute a = mlirNamedAttributeGet(
        mlirIdentifierGet(r->ctx, str(NN_MODULE_ATTR)), r->source_module);
    mlirOperationStateAddAttributes(&st, 1, &a);
  }
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockAppendOwnedOperation(r->at.block, op);
  return mlirOperationGetResult(op, 0);
}

static void copy_module(MlirOperation to, MlirOperation from) {
  mlirOperationSetAttributeByName(to, str(NN_MODULE_ATTR),
                                  mlirOperationGetAttributeByName(from, str(NN_MODULE_ATTR)));
}

static MlirType f32_tensor(part_run *r, int rank, const int64_t *dims) {
  return nn_tensor_type(r->ctx, rank, dims, mlirF32TypeGet(r->ctx));
}

// Cross-entropy on split logits: max, sums and target logit reduced over tp
// (never gathering the logits), then (sum, count) reduced over dp.
static MlirValue partition_cross_entropy(part_run *r, MlirOperation op,
                                         const tp_decision *d, MlirValue logits,
                                         MlirValue labels) {
  nn_shape ls;
  nn_shape_of(mlirValueGetType(logits), &ls);
  int64_t bs[2] = {ls.dims[0], ls.dims[1]};
  MlirType stat = f32_tensor(r, 2, bs);
  bool vocab = d->factor[1] == 'v';
  bool batch = d->factor[0] == 'b';
  MlirOperation max_op = build(r, "nn.ce_logit_max", (MlirOperation){NULL}, 1, &logits, 1, &stat);
  copy_module(max_op, op);
  MlirValue max = mlirOperationGetResult(max_op, 0);
  if (vocab) {
    max = tp_build_collective(&r->at, TP_ALL_REDUCE, max, 1, 0, 0, true, stat);
    copy_module(mlirOpResultGetOwner(max), op);
  }
  MlirValue in3[3] = {logits, labels, max};
  MlirType two[2] = {stat, stat};
  MlirOperation sums = build(r, "nn.ce_partial_sums", op, 3, in3, 2, two);
  if (vocab)
    set_int(r, sums, "nn.vocab_parallel_axis", 1);
  MlirValue se = mlirOperationGetResult(sums, 0), tg = mlirOperationGetResult(sums, 1);
  if (vocab) {
    se = tp_build_collective(&r->at, TP_ALL_REDUCE, se, 1, 0, 0, false, stat);
    copy_module(mlirOpResultGetOwner(se), op);
    tg = tp_build_collective(&r->at, TP_ALL_REDUCE, tg, 1, 0, 0, false, stat);
    copy_module(mlirOpResultGetOwner(tg), op);
  }
  int64_t two_dims[1] = {2};
  MlirType sc_type = f32_tensor(r, 1, two_dims);
  MlirValue in4[4] = {max, se, tg, labels};
  MlirValue sc = mlirOperationGetResult(build(r, "nn.ce_loss_sum", op, 4, in4, 1, &sc_type), 0);
  if (batch) {
    sc = tp_build_collective(&r->at, TP_ALL_REDUCE, sc, 0, 0, 0, false, sc_type);
    copy_module(mlirOpResultGetOwner(sc), op);
  }
  if (r->num_ce < 8)
    r->ce[r->num_ce++] = (struct ce_stats){mlirOperationGetOperand(op, 0).ptr, max, se, sc};
  MlirType loss_type = f32_tensor(r, 0, NULL);
  MlirOperation mean = build(r, "nn.ce_mean", (MlirOperation){NULL}, 1, &sc, 1, &loss_type);
  copy_module(mean, op);
  return mlirOperationGetResult(mean, 0);
}

// The split loss's gradient, from the statistics its forward computed.
static void partition_cross_entropy_grad(part_run *r, MlirOperation op,
                                         const tp_decision *d, MlirValue logits,
                                         MlirValue labels) {
  const void *key = mlirOperationGetOperand(op, 0).ptr;
  for (int i = 0; i < r->num_ce; ++i) {
    if (r->ce[i].logits != key)
      continue;
    MlirValue ops[5] = {logits, labels, r->ce[i].max, r->ce[i].sum_exp,
                        r->ce[i].sum_and_count};
    MlirType t = mlirValueGetType(logits);
    MlirOperation g = build(r, "nn.ce_logits_grad", op, 5, ops, 1, &t);
    if (d->factor[1] == 'v')
      set_int(r, g, "nn.vocab_parallel_axis", 1);
    map_put(r, mlirOperationGetResult(op, 0),
            (mapped){.value = mlirOperationGetResult(g, 0), .layout = d->results[0]});
    return;
  }
  report(r, "the loss gradient comes before the split loss it differentiates");
}

// Attributes that depend on the local shapes.
static void localize_attributes(part_run *r, MlirOperation local, nn_op_kind kind,
                                const tp_decision *d) {
  int64_t tp = r->mesh.size[1];
  if ((kind == NN_OP_EMBEDDING || kind == NN_OP_EMBEDDING_GRAD) && d->factor[1] == 'v')
    set_int(r, local, "nn.vocab_parallel_axis", 1);
  if ((kind == NN_OP_ATTENTION || kind == NN_OP_ATTENTION_GRAD) && d->factor[1] == 'h') {
    int64_t heads = nn_attr_int(local, "num_heads", 0);
    set_int(r, local, "num_heads", heads / tp);
    if (d->operands[1].on[1].kind == TP_SHARD) {
      set_int(r, local, "num_kv_heads", nn_attr_int(local, "num_kv_heads", 0) / tp);
    } else {
      // Replicated KV heads: local query head i is global head
      // tp_index * num_heads + i, which picks its KV head by the global ratio.
      set_int(r, local, "nn.q_head_offset_axis", 1);
      set_int(r, local, "nn.global_num_heads", heads);
    }
  }
}

static void partition_nn_op(part_run *r, MlirOperation op) {
  tp_rule rule;
  nn_op_kind kind = nn_op_kind_of(op);
  if (!tp_rule_of(op, &rule)) {
    report(r, "no sharding rule for %s", nn_op_name(kind));
    return;
  }
  int n = (int)mlirOperationGetNumOperands(op);
  if (n > TP_RULE_MAX_VALUES) {
    report(r, "%s with %d operands is not supported", nn_op_name(kind), n);
    return;
  }
  // The rules name every dim: an operand or result of another rank (or of
  // no static shape) has no rule.
  for (int i = 0; i < n + (int)mlirOperationGetNumResults(op); ++i) {
    bool is_result = i >= n;
    MlirValue v = is_result ? mlirOperationGetResult(op, i - n) : mlirOperationGetOperand(op, i);
    const char *label = is_result ? rule.results[i - n] : rule.operands[i];
    nn_shape s;
    if (!nn_shape_of(mlirValueGetType(v), &s)) {
      report(r, "%s %d of %s must be a statically shaped ranked tensor",
             is_result ? "result" : "operand", is_result ? i - n : i, nn_op_name(kind));
      return;
    }
    if (label && (int)strlen(label) != s.rank) {
      report(r, "no sharding rule for %s with a rank-%d %s %d (expected rank %d)",
             nn_op_name(kind), s.rank, is_result ? "result" : "operand",
             is_result ? i - n : i, (int)strlen(label));
      return;
    }
  }
  tp_layout current[TP_RULE_MAX_VALUES];
  bool is_param[TP_RULE_MAX_VALUES];
  bool both_partial[TP_MESH_AXES] = {false, false};
  for (int i = 0; i < n && i < TP_RULE_MAX_VALUES; ++i) {
    MlirValue old = mlirOperationGetOperand(op, i);
    mapped *m = map_find(r, old);
    if (!m) {
      report(r, "operand %d is not defined before its use", i);
      return;
    }
    current[i] = m->layout;
    is_param[i] = m->is_param;
    for (int axis = 0; axis < TP_MESH_AXES; ++axis)
      if (current[i].on[axis].kind == TP_PARTIAL)
        current[i].on[axis] = TP_R; // reduced by the reshard below
  }
  // A sum of two Partial values is Partial: gradients from several users
  // are added before one reduction (Megatron's single all-reduce of the
  // input gradient of q/k/v, or of gate/up).
  if (kind == NN_OP_ADD)
    for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
      mapped *a = map_find(r, mlirOperationGetOperand(op, 0));
      mapped *b = map_find(r, mlirOperationGetOperand(op, 1));
      both_partial[axis] = a->layout.on[axis].kind == TP_PARTIAL &&
                           b->layout.on[axis].kind == TP_PARTIAL &&
                           mlirValueIsNull(a->pending_bias) && mlirValueIsNull(b->pending_bias);
    }
  tp_decision d;
  char err[512];
  if (!tp_rule_decide(op, &rule, &r->mesh, current, is_param, &d, err, sizeof err)) {
    report(r, "%s", err);
    return;
  }
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (both_partial[axis] && d.factor[axis] == 0) {
      d.operands[0].on[axis] = d.operands[1].on[axis] = d.results[0].on[axis] = TP_P;
    }
  // Replicated KV heads: each rank's query heads give part of dk and dv.
  if (kind == NN_OP_ATTENTION_GRAD && d.factor[1] == 'h' &&
      d.operands[1].on[1].kind == TP_REPLICATE)
    d.results[1].on[1] = d.results[2].on[1] = TP_P;
  MlirValue operands[TP_RULE_MAX_VALUES];
  for (int i = 0; i < n && i < TP_RULE_MAX_VALUES; ++i)
    operands[i] = reshard(r, mlirOperationGetOperand(op, i), &d.operands[i]);
  if (kind == NN_OP_CROSS_ENTROPY_GRAD && (d.factor[0] || d.factor[1])) {
    partition_cross_entropy_grad(r, op, &d, operands[0], operands[1]);
    return;
  }
  if (kind == NN_OP_CROSS_ENTROPY && (d.factor[0] || d.factor[1])) {
    MlirValue loss = partition_cross_entropy(r, op, &d, operands[0], operands[1]);
    map_put(r, mlirOperationGetResult(op, 0), (mapped){.value = loss, .layout = {{TP_R, TP_R}}});
    return;
  }
  // A rowwise linear's bias is added once, after the reduction.
  bool defer_bias = kind == NN_OP_LINEAR && n == 3 &&
                    (d.results[0].on[0].kind == TP_PARTIAL ||
                     d.results[0].on[1].kind == TP_PARTIAL);
  int nres = (int)mlirOperationGetNumResults(op);
  MlirType types[TP_RULE_MAX_VALUES];
  for (int i = 0; i < nres; ++i)
    types[i] = local_type(r, mlirValueGetType(mlirOperationGetResult(op, i)), &d.results[i]);
  MlirOperation local = build(r, mlirIdentifierStr(mlirOperationGetName(op)).data, op,
                              defer_bias ? 2 : n, operands, nres, types);
  localize_attributes(r, local, kind, &d);
  for (int i = 0; i < nres; ++i)
    map_put(r, mlirOperationGetResult(op, i),
            (mapped){.value = mlirOperationGetResult(local, i),
                     .layout = d.results[i],
                     .pending_bias = defer_bias ? operands[2] : (MlirValue){NULL}});
}

// shard.shard: the annotated value in the annotation's layout.
static void partition_shard_op(part_run *r, MlirOperation op) {
  MlirValue src = mlirOperationGetOperand(op, 0);
  MlirValue sharding = mlirOperationGetOperand(op, 1);
  tp_layout target;
  if (!mlirValueIsAOpResult(sharding) ||
      !tp_read_sharding(mlirOpResultGetOwner(sharding), &target)) {
    report(r, "shard.shard needs a shard.sharding operand defined in the function");
    return;
  }
  mapped *m = map_find(r, src);
  if (!m) {
    report(r, "annotated value is not defined before its use");
    return;
  }
  bool is_param = m->is_param;
  MlirValue v = reshard(r, src, &target);
  map_put(r, mlirOperationGetResult(op, 0), (mapped){.value = v, .layout = target,
                                                     .is_param = is_param});
}

static void partition_other(part_run *r, MlirOperation op) {
  int n = (int)mlirOperationGetNumOperands(op);
  MlirValue operands[16];
  tp_layout rep = {{TP_R, TP_R}};
  if (n > 16) {
    report(r, "op with %d operands is not supported", n);
    return;
  }
  for (int i = 0; i < n; ++i)
    operands[i] = reshard(r, mlirOperationGetOperand(op, i), &rep);
  if (mlirOperationGetNumRegions(op) > 0) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    report(r, "no sharding rule for '%.*s' (an op with regions)", (int)name.length, name.data);
    return;
  }
  int nres = (int)mlirOperationGetNumResults(op);
  if (nres > 16) {
    report(r, "op with %d results is not supported", nres);
    return;
  }
  MlirType types[16];
  for (int i = 0; i < nres; ++i)
    types[i] = mlirValueGetType(mlirOperationGetResult(op, i));
  MlirOperation local = build(r, mlirIdentifierStr(mlirOperationGetName(op)).data, op, n,
                              operands, nres, types);
  for (int i = 0; i < nres && i < 16; ++i)
    map_put(r, mlirOperationGetResult(op, i),
            (mapped){.value = mlirOperationGetResult(local, i), .layout = rep});
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

enum { kMaxResults = 4096 };

// The layout of argument `arg`: that of its parameter annotation, if any.
static tp_layout arg_layout(MlirValue arg) {
  tp_layout l = {{TP_R, TP_R}};
  MlirOpOperand use = mlirValueGetFirstUse(arg);
  if (mlirOpOperandIsNull(use) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)))
    return l;
  MlirOperation user = mlirOpOperandGetOwner(use);
  if (!tp_op_is(user, "shard.shard") ||
      !mlirAttributeIsNull(mlirOperationGetAttributeByName(user, str("annotate_for_users"))))
    return l;
  MlirValue sharding = mlirOperationGetOperand(user, 1);
  if (mlirValueIsAOpResult(sharding))
    tp_read_sharding(mlirOpResultGetOwner(sharding), &l);
  return l;
}

static MlirAttribute placements_attr(part_run *r, const tp_layout *l) {
  MlirAttribute items[TP_MESH_AXES];
  for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
    char buf[32];
    items[axis] = mlirStringAttrGet(r->ctx, str(tp_placement_str(l->on[axis], buf, sizeof buf)));
  }
  return mlirArrayAttrGet(r->ctx, TP_MESH_AXES, items);
}

// Argument attributes: the originals plus nn.placements ([dp, tp]) and
// nn.global_shape, which checkpoint loading needs to slice.
static MlirAttribute arg_attrs(part_run *r, MlirOperation func, int n, MlirValue arg,
                               const tp_layout *l) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, str("arg_attrs"));
  MlirNamedAttribute items[16];
  int count = 0;
  if (!mlirAttributeIsNull(all) && n < mlirArrayAttrGetNumElements(all)) {
    MlirAttribute dict = mlirArrayAttrGetElement(all, n);
    for (intptr_t i = 0; i < mlirDictionaryAttrGetNumElements(dict) && count < 14; ++i)
      items[count++] = mlirDictionaryAttrGetElement(dict, i);
  }
  nn_shape s;
  if (nn_shape_of(mlirValueGetType(arg), &s)) {
    items[count++] = mlirNamedAttributeGet(mlirIdentifierGet(r->ctx, str("nn.placements")),
                                           placements_attr(r, l));
    items[count++] = mlirNamedAttributeGet(mlirIdentifierGet(r->ctx, str("nn.global_shape")),
                                           mlirDenseI64ArrayGet(r->ctx, s.rank, s.dims));
  }
  return mlirDictionaryAttrGet(r->ctx, count, items);
}

// The layout of the parameter named `name` (an argument's nn.param).
static bool param_layout(part_run *r, MlirOperation func, MlirBlock old, MlirAttribute name,
                         tp_layout *out) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, str("arg_attrs"));
  for (intptr_t i = 0; !mlirAttributeIsNull(all) && i < mlirArrayAttrGetNumElements(all); ++i) {
    MlirAttribute p = mlirDictionaryAttrGetElementByName(mlirArrayAttrGetElement(all, i),
                                                         str(NN_PARAM_ATTR));
    if (!mlirAttributeIsNull(p) && mlirAttributeEqual(p, name)) {
      mapped *m = map_find(r, mlirBlockGetArgument(old, i));
      *out = m->layout;
      return true;
    }
  }
  return false;
}

// The layout a function result or optimizer operand must have: a gradient
// (named by `grad_of`) lives like its parameter, anything else replicated.
static tp_layout target_layout(part_run *r, MlirOperation func, MlirBlock old,
                               MlirAttribute grad_of) {
  tp_layout l = {{TP_R, TP_R}};
  if (!mlirAttributeIsNull(grad_of) && !param_layout(r, func, old, grad_of, &l))
    report(r, "no parameter named by nn.grad_of");
  return l;
}

// nn.store_grad: the gradient in its parameter's layout (named by
// nn.grad_of), so the optimizer finds each rank's shard of it.
static void partition_store_grad(part_run *r, MlirOperation func, MlirBlock old,
                                 MlirOperation op) {
  tp_layout want = target_layout(r, func, old,
                                 mlirOperationGetAttributeByName(op, str("nn.grad_of")));
  MlirValue v = reshard(r, mlirOperationGetOperand(op, 0), &want);
  build(r, "nn.store_grad", op, 1, &v, 0, NULL);
}

static void partition_func(part_run *r, MlirOperation func) {
  MlirBlock old = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  int nargs = (int)mlirBlockGetNumArguments(old);
  MlirType *types = calloc((size_t)nargs + 1, sizeof *types);
  MlirLocation *locs = calloc((size_t)nargs + 1, sizeof *locs);
  MlirAttribute *attrs = calloc((size_t)nargs + 1, sizeof *attrs);
  tp_layout *layouts = calloc((size_t)nargs + 1, sizeof *layouts);
  r->current = func;
  for (int i = 0; i < nargs; ++i) {
    MlirValue arg = mlirBlockGetArgument(old, i);
    layouts[i] = arg_layout(arg);
    types[i] = local_type(r, mlirValueGetType(arg), &layouts[i]);
    locs[i] = mlirOperationGetLocation(func);
    attrs[i] = arg_attrs(r, func, i, arg, &layouts[i]);
  }
  MlirBlock body = mlirBlockCreate(nargs, types, locs);
  r->at = (tp_insert){r->ctx, body, {NULL}, mlirOperationGetLocation(func)};
  MlirAttribute all_attrs = mlirOperationGetAttributeByName(func, str("arg_attrs"));
  for (int i = 0; i < nargs; ++i) {
    MlirValue arg = mlirBlockGetArgument(old, i);
    bool param = false;
    if (!mlirAttributeIsNull(all_attrs) && i < mlirArrayAttrGetNumElements(all_attrs))
      param = !mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(
          mlirArrayAttrGetElement(all_attrs, i), str(NN_PARAM_ATTR)));
    map_put(r, arg, (mapped){.value = mlirBlockGetArgument(body, i), .layout = layouts[i],
                             .is_param = param});
  }
  MlirType *results = calloc(kMaxResults, sizeof *results);
  int nresults = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(old); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    r->current = op;
    r->at.loc = mlirOperationGetLocation(op);
    if (tp_op_is(op, "shard.sharding"))
      continue;
    if (tp_op_is(op, "shard.shard")) {
      partition_shard_op(r, op);
    } else if (nn_op_kind_of(op) == NN_OP_STORE_GRAD) {
      partition_store_grad(r, func, old, op);
    } else if (nn_op_kind_of(op) != NN_OP_NONE) {
      partition_nn_op(r, op);
    } else if (tp_op_is(op, "func.return")) {
      int n = (int)mlirOperationGetNumOperands(op);
      if (n > kMaxResults) {
        report(r, "more than %d results", kMaxResults);
        break;
      }
      MlirValue *vals = calloc((size_t)n + 1, sizeof *vals);
      MlirAttribute res_attrs = mlirOperationGetAttributeByName(func, str("res_attrs"));
      for (int i = 0; i < n; ++i) {
        MlirAttribute grad_of = {NULL};
        if (!mlirAttributeIsNull(res_attrs) && i < mlirArrayAttrGetNumElements(res_attrs))
          grad_of = mlirDictionaryAttrGetElementByName(mlirArrayAttrGetElement(res_attrs, i),
                                                       str("nn.grad_of"));
        tp_layout want = target_layout(r, func, old, grad_of);
        vals[i] = reshard(r, mlirOperationGetOperand(op, i), &want);
        results[nresults++] = mlirValueGetType(vals[i]);
      }
      build(r, "func.return", (MlirOperation){NULL}, n, vals, 0, NULL);
      free(vals);
    } else {
      partition_other(r, op);
    }
    if (r->errors)
      break;
  }
  if (r->errors) {
    mlirBlockDestroy(body);
  } else {
    // The new function replaces the old one in place, keeping its name.
    MlirRegion region = mlirOperationGetRegion(func, 0);
    mlirRegionInsertOwnedBlockBefore(region, old, body);
    mlirBlockDetach(old);
    mlirBlockDestroy(old);
    MlirType fn = mlirFunctionTypeGet(r->ctx, nargs, types, nresults, results);
    mlirOperationSetAttributeByName(func, str("function_type"), mlirTypeAttrGet(fn));
    mlirOperationSetAttributeByName(func, str("arg_attrs"),
                                    mlirArrayAttrGet(r->ctx, nargs, attrs));
  }
  free(types);
  free(locs);
  free(attrs);
  free(layouts);
  free(results);
}

static MlirLogicalResult run_tp_partition(MlirOperation module, const tp_option_value *o) {
  (void)o;
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  part_run r = {.ctx = mlirOperationGetContext(module)};
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  bool any = false;
  for (MlirOperation f = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    any |= tp_is_defined_func(f);
  if (!any)
    return mlirLogicalResultSuccess(); // declarations only: nothing to partition
  if (!tp_read_grid(module, &r.mesh)) {
    mlirEmitError(mlirOperationGetLocation(module),
                  "tp-partition: no 2-D shard.grid @" TP_GRID_NAME " (dp x tp) in the "
                  "module: run tp-plan first");
    return mlirLogicalResultFailure();
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f) && !r.errors)
      partition_func(&r, f);
  free(r.map);
  return r.errors ? mlirLogicalResultFailure() : mlirLogicalResultSuccess();
}

const tp_pass_info tp_partition_pass = {
    .argument = "tp-partition",
    .summary = "Rewrite annotated graphs into per-rank (SPMD) graphs with collectives",
    .anchor = "builtin.module",
    .options = NULL,
    .num_options = 0,
    .run = run_tp_partition,
};
