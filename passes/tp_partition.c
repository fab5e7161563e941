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
// What the factors alone cannot say (the split loss, a rowwise bias, local
// head counts) is each op's partition hook (partition.h,
// partition_hooks.c): this file knows no op.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "diagnostic.h"
#include "grad_reductions.h"
#include "nn.h"
#include "partition.h"
#include "pass.h"
#include "shardrt/types.h"
#include "ptr_map.h"
#include "shard_ops.h"
#include "rule_table.h"
#include "sharding_rules.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

//===----------------------------------------------------------------------===//
// Value maps
//===----------------------------------------------------------------------===//

enum { kMaxReshards = 4, kMaxStash = 4 };

// What an original value became: its local value, its layout, whether it is
// a parameter, an epilogue still to apply once its Partial is reduced (a
// rowwise bias), and the reshards already made of it (so users share one
// collective). A parameter's dp gather (FSDP) is shared only within one
// module's run of forward or of backward ops (`reshard_region`,
// `reshard_module`): the backward gathers again rather than keep the
// forward's copy alive (FSDP2's reshard after forward), and a tied weight
// is gathered for each of its modules.
typedef struct mapped {
  MlirValue value;
  tp_layout layout;
  bool is_param;
  tp_epilogue epilogue;
  int num_reshards;
  tp_layout reshard_layout[kMaxReshards];
  MlirValue reshard_value[kMaxReshards];
  int reshard_region[kMaxReshards];
  MlirAttribute reshard_module[kMaxReshards];
} mapped;

// Values an op's hook remembered for a later op (tp_part_stash).
typedef struct stashed {
  int n;
  MlirValue values[kMaxStash];
} stashed;

typedef struct tp_part {
  MlirContext ctx;
  tp_mesh mesh;
  tp_insert at; // the new function's body, appending
  // Original value -> index into `values`.
  tp_ptr_map index;
  mapped *values;
  size_t num_values, cap_values;
  tp_ptr_map stash_index;
  stashed *stash;
  size_t num_stash;
  MlirOperation func; // the original function (its parameters)
  MlirBlock old;      // and its body
  MlirOperation current; // the original op being rewritten, for diagnostics
  MlirAttribute source_module; // nn.module given to the collectives being built
  // Runs of forward and of backward ops, counted as the walk alternates
  // between them (the forward, then with recomputation a layer's forward
  // again before its backward): a parameter gather is shared within one.
  int region;
  bool in_backward;
  int errors;
} part_run;

static mapped *map_find(part_run *r, MlirValue v) {
  intptr_t i;
  return tp_ptr_map_get(&r->index, v.ptr, &i) ? &r->values[i] : NULL;
}

static void map_put(part_run *r, MlirValue old, mapped m) {
  intptr_t i;
  if (!tp_ptr_map_get(&r->index, old.ptr, &i)) {
    if (r->num_values == r->cap_values) {
      r->cap_values = r->cap_values ? 2 * r->cap_values : 1024;
      r->values = realloc(r->values, r->cap_values * sizeof *r->values);
    }
    i = (intptr_t)r->num_values++;
    tp_ptr_map_put(&r->index, old.ptr, i);
  }
  r->values[i] = m;
}

static bool layout_equal(const tp_layout *a, const tp_layout *b) {
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    if (!tp_placement_equal(a->on[axis], b->on[axis]))
      return false;
  return true;
}

__attribute__((format(printf, 2, 3))) static void report(part_run *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(r->current, "tp-partition", fmt, ap);
  va_end(ap);
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

enum { kDp = 0, kTp = 1 };

// Whether the tp step of `l` to `to` would gather or split a dim that dp
// shards in `l`. A dim sharded on both axes is a dp slice of the tp shard
// (the runtime's layout, FSDP over TP; runtime/src/tensor.c): dp is the
// inner axis, so a dp step is always local to the tp shard, but a tp step
// on that dim must first have dp's slices gathered.
static bool tp_step_nests(const tp_layout *l, tp_placement to) {
  tp_placement dp = l->on[kDp], from = l->on[kTp];
  if (dp.kind != TP_SHARD || tp_placement_equal(from, to))
    return false;
  return (from.kind == TP_SHARD && from.dim == dp.dim) ||
         (to.kind == TP_SHARD && to.dim == dp.dim);
}

// The dp placement to step to now on the way from `l` to `to`: `to`'s,
// unless the tp step still to come would then nest wrongly; then the
// current one (a Partial waits for tp's reduction), or Replicate if the
// current one already nests.
static tp_placement dp_step(const tp_layout *l, const tp_layout *to) {
  tp_layout after = *l;
  after.on[kDp] = to->on[kDp];
  if (!tp_step_nests(&after, to->on[kTp]))
    return to->on[kDp];
  return tp_step_nests(l, to->on[kTp]) ? TP_R : l->on[kDp];
}

// `v` from `layout` to `to`, axis by axis: Partial axes first (their
// reductions also add a pending bias; dp's first where it can go to its
// target, as its reduce-scatter shrinks what tp's moves), then dp, then tp.
// A step that would nest wrongly (tp_step_nests) goes through Replicate:
// a tp reduce-scatter becomes an all-reduce, a dp shard is gathered before
// the tp step and sliced again after it.
static MlirValue reshard_steps(part_run *r, MlirValue v, MlirType global, tp_layout *layout,
                               const tp_layout *to) {
  if (layout->on[kDp].kind == TP_PARTIAL)
    v = reshard_axis(r, v, global, layout, kDp, dp_step(layout, to));
  if (layout->on[kTp].kind == TP_PARTIAL)
    v = reshard_axis(r, v, global, layout, kTp,
                     tp_step_nests(layout, to->on[kTp]) ? TP_R : to->on[kTp]);
  v = reshard_axis(r, v, global, layout, kDp, dp_step(layout, to));
  v = reshard_axis(r, v, global, layout, kTp, to->on[kTp]);
  return reshard_axis(r, v, global, layout, kDp, to->on[kDp]);
}

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

// Whether resharding `m` to `to` gathers a parameter over dp (FSDP).
static bool gathers_param(const mapped *m, const tp_layout *to) {
  return m->is_param && m->layout.on[0].kind == TP_SHARD && to->on[0].kind != TP_SHARD;
}

// The nn.module of the op being rewritten (null for none).
static MlirAttribute current_module(part_run *r) {
  return mlirOperationIsNull(r->current)
             ? (MlirAttribute){NULL}
             : mlirOperationGetAttributeByName(r->current, str(NN_MODULE_ATTR));
}

// The cached reshard of `m` to `to` usable here, or -1.
static int cached_reshard(part_run *r, const mapped *m, const tp_layout *to) {
  bool param = gathers_param(m, to);
  MlirAttribute module = current_module(r);
  for (int i = 0; i < m->num_reshards; ++i)
    if (layout_equal(&m->reshard_layout[i], to) &&
        (!param || (m->reshard_region[i] == r->region &&
                    mlirAttributeIsNull(m->reshard_module[i]) == mlirAttributeIsNull(module) &&
                    (mlirAttributeIsNull(module) ||
                     mlirAttributeEqual(m->reshard_module[i], module)))))
      return i;
  return -1;
}

// Remembers `v` as `m`'s reshard to `to` (a parameter's gather replaces the
// one of an earlier module or region).
static void cache_reshard(part_run *r, mapped *m, const tp_layout *to, MlirValue v) {
  int slot = m->num_reshards;
  for (int i = 0; gathers_param(m, to) && i < m->num_reshards; ++i)
    if (layout_equal(&m->reshard_layout[i], to))
      slot = i;
  if (slot == kMaxReshards)
    return;
  m->reshard_layout[slot] = *to;
  m->reshard_value[slot] = v;
  m->reshard_region[slot] = r->region;
  m->reshard_module[slot] = current_module(r);
  if (slot == m->num_reshards)
    ++m->num_reshards;
}

// `old`'s local value in layout `to` (collectives emitted once per target;
// a parameter's dp gather once per module and region).
static MlirValue reshard(part_run *r, MlirValue old, const tp_layout *to) {
  mapped *m = map_find(r, old);
  if (!m) {
    report(r, "internal error: a value was used before it was defined");
    return old;
  }
  if (layout_equal(&m->layout, to))
    return m->value;
  int hit = cached_reshard(r, m, to);
  if (hit >= 0)
    return m->reshard_value[hit];
  MlirType global = global_type_of(m->value, &m->layout, &r->mesh);
  r->source_module = source_module(old);
  tp_layout layout = m->layout;
  MlirValue v = m->value;
  tp_epilogue epilogue = m->epilogue;
  v = reshard_steps(r, v, global, &layout, to);
  if (epilogue.fn)
    v = epilogue.fn(r, v, &layout, epilogue.arg);
  m = map_find(r, old); // the epilogue may have grown the map
  cache_reshard(r, m, to, v);
  return v;
}

//===----------------------------------------------------------------------===//
// Building local ops
//===----------------------------------------------------------------------===//

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

static void partition_nn_op(part_run *r, MlirOperation op) {
  tp_rule rule;
  nn_op_kind kind = nn_op_kind_of(op);
  if (!tp_rule_of(op, &rule)) {
    report(r, "no sharding rule for %s", nn_op_name(kind));
    return;
  }
  if (!rule.operands[0] && rule.rewrite) {
    rule.rewrite(r, op);
    return;
  }
  int n = (int)mlirOperationGetNumOperands(op);
  int nres = (int)mlirOperationGetNumResults(op);
  if (n > TP_RULE_MAX_VALUES || nres > TP_RULE_MAX_VALUES) {
    report(r, "%s with %d operands and %d results is not supported (at most %d each)",
           nn_op_name(kind), n, nres, TP_RULE_MAX_VALUES);
    return;
  }
  // The rules name every dim: an operand or result of another rank (or of
  // no static shape) has no rule.
  for (int i = 0; i < n + nres; ++i) {
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
  tp_layout original[TP_RULE_MAX_VALUES], current[TP_RULE_MAX_VALUES];
  bool is_param[TP_RULE_MAX_VALUES], pending[TP_RULE_MAX_VALUES];
  for (int i = 0; i < n; ++i) {
    mapped *m = map_find(r, mlirOperationGetOperand(op, i));
    if (!m) {
      report(r, "operand %d is not defined before its use", i);
      return;
    }
    original[i] = current[i] = m->layout;
    is_param[i] = m->is_param;
    pending[i] = m->epilogue.fn != NULL;
    for (int axis = 0; axis < TP_MESH_AXES; ++axis)
      if (current[i].on[axis].kind == TP_PARTIAL)
        current[i].on[axis] = TP_R; // reduced by the reshard below
    // A parameter's Shard over dp is storage (FSDP), not a split of the
    // op's work: the op sees it gathered.
    if (is_param[i] && current[i].on[0].kind == TP_SHARD)
      current[i].on[0] = TP_R;
  }
  tp_decision d;
  char err[512];
  if (!tp_rule_decide(op, &rule, &r->mesh, current, is_param, &d, err, sizeof err)) {
    report(r, "%s", err);
    return;
  }
  if (rule.refine)
    rule.refine(op, original, pending, &d);
  MlirValue operands[TP_RULE_MAX_VALUES];
  for (int i = 0; i < n; ++i) {
    tp_layout want = d.operands[i];
    if (rule.placement_only == i + 1 && is_param[i])
      want.on[0] = original[i].on[0]; // never read: keep the FSDP shard
    operands[i] = reshard(r, mlirOperationGetOperand(op, i), &want);
  }
  if (rule.partition && rule.partition(r, op, &d, operands))
    return;
  MlirType types[TP_RULE_MAX_VALUES];
  for (int i = 0; i < nres; ++i)
    types[i] = local_type(r, mlirValueGetType(mlirOperationGetResult(op, i)), &d.results[i]);
  MlirOperation local = build(r, mlirIdentifierStr(mlirOperationGetName(op)).data, op, n,
                              operands, nres, types);
  if (rule.localize)
    rule.localize(r, local, &d);
  for (int i = 0; i < nres; ++i)
    map_put(r, mlirOperationGetResult(op, i),
            (mapped){.value = mlirOperationGetResult(local, i), .layout = d.results[i]});
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

// The parts of dim 0 of a Mamba2 mixer's packed weight `arg` (a parameter
// split by heads on tp): in_proj's rows [z, x, B, C, dt] or conv1d's
// channels [x, B, C], each of which the ranks split separately (Megatron's
// layout). Returns their count, 0 when `arg` is no such weight.
static int mamba2_blocks(MlirValue arg, int64_t blocks[SRT_MAX_TP_BLOCKS], int depth) {
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation op = mlirOpOperandGetOwner(u);
    nn_op_kind k = nn_op_kind_of(op);
    unsigned i = mlirOpOperandGetOperandNumber(u);
    // Through the plan's annotations (shard.shard) to the users.
    if (k == NN_OP_NONE && depth < 4 && mlirOperationGetNumResults(op) == 1) {
      int n = mamba2_blocks(mlirOperationGetResult(op, 0), blocks, depth + 1);
      if (n)
        return n;
      continue;
    }
    if ((k != NN_OP_MAMBA2_MIXER && k != NN_OP_MAMBA2_MIXER_GRAD) || i < 1 || i > 3)
      continue;
    int64_t inner = nn_attr_int(op, "num_heads", 0) * nn_attr_int(op, "head_dim", 0);
    int64_t gn = nn_attr_int(op, "n_groups", 0) * nn_attr_int(op, "state_size", 0);
    int64_t parts[5] = {inner, inner, gn, gn, nn_attr_int(op, "num_heads", 0)};
    int n = i == 1 ? 5 : 3, first = i == 1 ? 0 : 1;
    for (int b = 0; b < n; ++b)
      blocks[b] = parts[first + b];
    return n;
  }
  return 0;
}

// Argument attributes: the originals plus nn.placements ([dp, tp]) and
// nn.global_shape, which checkpoint loading needs to slice, and for a
// weight split part by part on tp its parts (nn.tp_blocks).
static MlirAttribute arg_attrs(part_run *r, MlirOperation func, int n, MlirValue arg,
                               const tp_layout *l) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, str("arg_attrs"));
  MlirNamedAttribute items[16];
  int count = 0;
  if (!mlirAttributeIsNull(all) && n < mlirArrayAttrGetNumElements(all)) {
    MlirAttribute dict = mlirArrayAttrGetElement(all, n);
    for (intptr_t i = 0; i < mlirDictionaryAttrGetNumElements(dict) && count < 13; ++i)
      items[count++] = mlirDictionaryAttrGetElement(dict, i);
  }
  nn_shape s;
  if (nn_shape_of(mlirValueGetType(arg), &s)) {
    items[count++] = mlirNamedAttributeGet(mlirIdentifierGet(r->ctx, str("nn.placements")),
                                           placements_attr(r, l));
    items[count++] = mlirNamedAttributeGet(mlirIdentifierGet(r->ctx, str("nn.global_shape")),
                                           mlirDenseI64ArrayGet(r->ctx, s.rank, s.dims));
    int64_t blocks[SRT_MAX_TP_BLOCKS];
    int nb = l->on[1].kind == TP_SHARD && l->on[1].dim == 0 ? mamba2_blocks(arg, blocks, 0) : 0;
    if (nb)
      items[count++] = mlirNamedAttributeGet(mlirIdentifierGet(r->ctx, str("nn.tp_blocks")),
                                             mlirDenseI64ArrayGet(r->ctx, nb, blocks));
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

static void partition_func(part_run *r, MlirOperation func) {
  MlirBlock old = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  int nargs = (int)mlirBlockGetNumArguments(old);
  MlirType *types = calloc((size_t)nargs + 1, sizeof *types);
  MlirLocation *locs = calloc((size_t)nargs + 1, sizeof *locs);
  MlirAttribute *attrs = calloc((size_t)nargs + 1, sizeof *attrs);
  tp_layout *layouts = calloc((size_t)nargs + 1, sizeof *layouts);
  r->current = func;
  r->func = func;
  r->old = old;
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
    } else if (nn_op_kind_of(op) != NN_OP_NONE) {
      // nn.add sums gradients as well as residuals: it starts no region.
      bool backward = nn_op_phase_of(nn_op_kind_of(op)) != NN_PHASE_FORWARD;
      if (nn_op_kind_of(op) != NN_OP_ADD && backward != r->in_backward) {
        r->in_backward = backward;
        ++r->region;
      }
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
    tp_schedule_grad_reductions(body);
    tp_fold_gather_slices(body);
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

//===----------------------------------------------------------------------===//
// What partition hooks may ask (partition.h)
//===----------------------------------------------------------------------===//

const tp_mesh *tp_part_mesh(const tp_part *p) { return &p->mesh; }

MlirOperation tp_part_build(tp_part *p, const char *name, MlirOperation like, int nops,
                            const MlirValue *ops, int nres, const MlirType *types) {
  return build(p, name, like, nops, ops, nres, types);
}

MlirValue tp_part_collective(tp_part *p, tp_collective kind, MlirValue v, int axis, int dim,
                             int dim2, bool is_max, MlirType type, MlirOperation of) {
  MlirValue out = tp_build_collective(&p->at, kind, v, axis, dim, dim2, is_max, type);
  MlirAttribute m = mlirOperationGetAttributeByName(of, str(NN_MODULE_ATTR));
  if (!mlirAttributeIsNull(m))
    mlirOperationSetAttributeByName(mlirOpResultGetOwner(out), str(NN_MODULE_ATTR), m);
  return out;
}

MlirValue tp_part_reshard_axis(tp_part *p, MlirValue v, MlirType global, tp_layout *layout,
                               int axis, tp_placement to) {
  return reshard_axis(p, v, global, layout, axis, to);
}

MlirValue tp_part_reshard(tp_part *p, MlirValue old, const tp_layout *to) {
  return reshard(p, old, to);
}

void tp_part_define(tp_part *p, MlirValue old, MlirValue local, const tp_layout *layout,
                    const tp_epilogue *epilogue) {
  map_put(p, old, (mapped){.value = local,
                           .layout = *layout,
                           .epilogue = epilogue ? *epilogue : (tp_epilogue){NULL, {NULL}}});
}

MlirType tp_part_local_type(tp_part *p, MlirType global, const tp_layout *layout) {
  return local_type(p, global, layout);
}

void tp_part_stash(tp_part *p, const void *key, int n, const MlirValue *values) {
  stashed st = {.n = n < kMaxStash ? n : kMaxStash};
  for (int i = 0; i < st.n; ++i)
    st.values[i] = values[i];
  intptr_t i;
  if (!tp_ptr_map_get(&p->stash_index, key, &i)) {
    p->stash = realloc(p->stash, (p->num_stash + 1) * sizeof *p->stash);
    i = (intptr_t)p->num_stash++;
    tp_ptr_map_put(&p->stash_index, key, i);
  }
  p->stash[i] = st;
}

bool tp_part_stashed(const tp_part *p, const void *key, int n, MlirValue *values) {
  intptr_t i;
  if (!tp_ptr_map_get(&p->stash_index, key, &i) || p->stash[i].n < n)
    return false;
  for (int k = 0; k < n; ++k)
    values[k] = p->stash[i].values[k];
  return true;
}

bool tp_part_param_layout(tp_part *p, MlirAttribute name, tp_layout *out) {
  return !mlirAttributeIsNull(name) && param_layout(p, p->func, p->old, name, out);
}

void tp_part_error(tp_part *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(p->current, "tp-partition", fmt, ap);
  va_end(ap);
  ++p->errors;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

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
    tp_error(module, "tp-partition",
             "no 2-D shard.grid @" TP_GRID_NAME " (dp x tp) in the module: run tp-plan first");
    return mlirLogicalResultFailure();
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f) && !r.errors)
      partition_func(&r, f);
  tp_ptr_map_free(&r.index);
  free(r.values);
  tp_ptr_map_free(&r.stash_index);
  free(r.stash);
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
