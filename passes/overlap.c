// overlap-collectives: lets a partitioned training step's parameter gathers
// and gradient reductions run while other ops compute, as FSDP2 (prefetched
// all-gathers, reduce-scatters on their own stream) and DDP (gradient
// all-reduces during the backward) do at run time.
//
// Each such collective gets an nn.wait: the collective is started
// non-blocking where it stands and its result read through the wait, which
// lower-to-runtime turns into the completion (srt_op_*_start and
// srt_op_collective_wait). Then:
// - Gathers of parameters (a shard.all_gather of a block argument) are
//   waited for just before their first reader, and started one layer ahead:
//   the gathers of a layer's forward (or backward) move to just after the
//   first wait of the layer before, so they travel while that layer
//   computes. Groups are decoder layers (nn.module "...layers.N"; any other
//   module is a group of its own; a recomputed layer's forward and its
//   backward are two); nothing moves across the start of the backward.
// - Gradient reductions (a reduce-scatter or all-reduce whose one reader is
//   nn.store_grad, or the nn.add of a tied weight's two shards) are waited
//   for just before the first reduction of another layer starts (or before
//   the optimizer step): a layer's reductions travel while the backward of
//   the next layer down runs, and at most about two layers' unreduced
//   gradients are live.
// - Buckets: the rank-1 members (norm weights, biases) of a layer's gathers,
//   or of a layer's reductions of one kind and axis, travel as one
//   collective: they are marked `nn.bucket = <id>` and made adjacent (a
//   bucket of gathers at its first member, of reductions at its last, the
//   stores following), and lower-to-runtime packs them into one call.
// The memory plan keeps a collective's operands live to its wait, so the
// figures of --memory-report include what overlapping costs.
#include <stdlib.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nn.h"
#include "pass.h"
#include "shard_ops.h"
#include "shardrt/types.h" // SRT_MAX_BUCKET

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

// The layer of `op`: its decoder layer's path, else its whole module.
static MlirStringRef layer_key(MlirOperation op) {
  MlirStringRef m = nn_module_of(op);
  size_t n = nn_layer_prefix(m);
  return n ? (MlirStringRef){m.data, n} : m;
}

static MlirOperation only_user(MlirValue v) {
  MlirOpOperand u = mlirValueGetFirstUse(v);
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u)))
    return (MlirOperation){NULL};
  return mlirOpOperandGetOwner(u);
}

static bool is_param_gather(MlirOperation op) {
  return tp_op_is(op, "shard.all_gather") &&
         mlirValueIsABlockArgument(mlirOperationGetOperand(op, 0));
}

// A reduction whose result is a gradient's last step before its store.
static bool is_grad_reduction(MlirOperation op) {
  if (!tp_op_is(op, "shard.reduce_scatter") && !tp_op_is(op, "shard.all_reduce"))
    return false;
  MlirOperation user = only_user(mlirOperationGetResult(op, 0));
  if (mlirOperationIsNull(user))
    return false;
  if (nn_op_kind_of(user) == NN_OP_ADD)
    user = only_user(mlirOperationGetResult(user, 0));
  return !mlirOperationIsNull(user) && nn_op_kind_of(user) == NN_OP_STORE_GRAD;
}

// The first reader of `v` in block order, or null.
static MlirOperation first_reader(MlirValue v) {
  MlirOperation first = {NULL};
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation o = mlirOpOperandGetOwner(u);
    if (mlirOperationIsNull(first) || mlirOperationIsBeforeInBlock(o, first))
      first = o;
  }
  return first;
}

// Inserts `%w = nn.wait %r` (r: op's result) before `first`, r's first
// reader, and reads r through it; returns the wait.
static MlirOperation add_wait(MlirBlock body, MlirOperation op, MlirOperation first) {
  MlirValue r = mlirOperationGetResult(op, 0);
  MlirOperationState st = mlirOperationStateGet(str("nn.wait"), mlirOperationGetLocation(op));
  MlirType type = mlirValueGetType(r);
  mlirOperationStateAddOperands(&st, 1, &r);
  mlirOperationStateAddResults(&st, 1, &type);
  MlirAttribute m = mlirOperationGetAttributeByName(op, str(NN_MODULE_ATTR));
  if (!mlirAttributeIsNull(m)) {
    MlirNamedAttribute a = mlirNamedAttributeGet(
        mlirIdentifierGet(mlirOperationGetContext(op), str(NN_MODULE_ATTR)), m);
    mlirOperationStateAddAttributes(&st, 1, &a);
  }
  MlirOperation wait = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(body, first, wait);
  mlirValueReplaceAllUsesOfWith(r, mlirOperationGetResult(wait, 0));
  mlirOperationSetOperand(wait, 0, r);
  return wait;
}

// Moves the readers of op's results that now precede it to just after it
// (and theirs after them).
static void sink_readers(MlirOperation op) {
  for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i)
    for (MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, i));
         !mlirOpOperandIsNull(u); u = mlirOpOperandGetNextUse(u)) {
      MlirOperation reader = mlirOpOperandGetOwner(u);
      if (mlirOperationIsBeforeInBlock(reader, op)) {
        mlirOperationMoveAfter(reader, op);
        sink_readers(reader);
      }
    }
}

typedef struct collective {
  MlirOperation op, wait;
  MlirStringRef key;
  bool backward; // its wait is at or after the first backward op
  int group;     // assign_groups: consecutive entries of one layer and side
} collective;

typedef struct list {
  collective *at;
  int n;
} list;

static void append(list *l, collective c) {
  l->at = realloc(l->at, (size_t)(l->n + 1) * sizeof *l->at);
  l->at[l->n++] = c;
}

// Each reduction waited for before the first later reduction of another
// layer, else before the optimizer step.
static void bound_reductions(const list *red, MlirOperation optimizer) {
  MlirOperation *bound = calloc((size_t)red->n + 1, sizeof *bound);
  for (int i = 0; i < red->n; ++i) {
    bound[i] = optimizer;
    for (int j = i + 1; j < red->n; ++j)
      if (!mlirStringRefEqual(red->at[j].key, red->at[i].key)) {
        bound[i] = red->at[j].op;
        break;
      }
  }
  for (int i = 0; i < red->n; ++i)
    if (!mlirOperationIsNull(bound[i])) {
      mlirOperationMoveBefore(red->at[i].wait, bound[i]);
      sink_readers(red->at[i].wait);
    }
  free(bound);
}

// Numbers the groups of `l`: a new one where the key or the side of the
// backward's start changes, or where a parameter repeats (a recomputed
// layer's forward gathers, then its backward's: two runs of one layer).
static void assign_groups(list *l) {
  for (int i = 0, start = 0, group = 0; i < l->n; ++i) {
    bool repeats = false;
    MlirValue in = mlirOperationGetOperand(l->at[i].op, 0);
    for (int k = start; k < i && mlirValueIsABlockArgument(in); ++k)
      repeats |= mlirOperationGetOperand(l->at[k].op, 0).ptr == in.ptr;
    if (i > start && (repeats || l->at[i].backward != l->at[start].backward ||
                      !mlirStringRefEqual(l->at[i].key, l->at[start].key))) {
      ++group;
      start = i;
    }
    l->at[i].group = group;
  }
}

// The gathers of each group start just after the first wait of the group
// before, on the same side of the backward's start (never after their own
// wait).
static void prefetch_gathers(const list *g) {
  int prev = -1; // the previous group's first gather
  for (int start = 0, end; start < g->n; prev = start, start = end) {
    for (end = start + 1; end < g->n && g->at[end].group == g->at[start].group; ++end) {
    }
    if (prev < 0 || g->at[prev].backward != g->at[start].backward)
      continue;
    MlirOperation after = g->at[prev].wait;
    for (int k = start; k < end; ++k)
      if (mlirOperationIsBeforeInBlock(g->at[prev].wait, g->at[k].wait)) {
        mlirOperationMoveAfter(g->at[k].op, after);
        after = g->at[k].op;
      }
  }
}

static bool rank1_result(MlirOperation op) {
  nn_shape sh;
  return nn_shape_of(mlirValueGetType(mlirOperationGetResult(op, 0)), &sh) && sh.rank == 1;
}

static bool same_attr(MlirOperation a, MlirOperation b, const char *name) {
  MlirAttribute x = mlirOperationGetAttributeByName(a, str(name));
  MlirAttribute y = mlirOperationGetAttributeByName(b, str(name));
  return mlirAttributeIsNull(x) ? mlirAttributeIsNull(y)
                                : !mlirAttributeIsNull(y) && mlirAttributeEqual(x, y);
}

// Whether `b` can share a bucket with `a`: the same collective over the same
// axis and tensor dim, of the same element type; a reduction's result stored
// as it is (not a tied weight's add).
static bool bucket_mates(MlirOperation a, MlirOperation b, bool gathers) {
  MlirType ta = mlirValueGetType(mlirOperationGetResult(a, 0));
  MlirType tb = mlirValueGetType(mlirOperationGetResult(b, 0));
  return mlirStringRefEqual(mlirIdentifierStr(mlirOperationGetName(a)),
                            mlirIdentifierStr(mlirOperationGetName(b))) &&
         same_attr(a, b, "grid_axes") && same_attr(a, b, "gather_axis") &&
         same_attr(a, b, "scatter_axis") &&
         mlirTypeEqual(mlirShapedTypeGetElementType(ta), mlirShapedTypeGetElementType(tb)) &&
         (gathers || nn_op_kind_of(only_user(mlirOperationGetResult(b, 0))) == NN_OP_STORE_GRAD);
}

static void mark_bucket(MlirOperation op, int id) {
  MlirContext ctx = mlirOperationGetContext(op);
  mlirOperationSetAttributeByName(op, str("nn.bucket"),
                                  mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), id));
}

// The rank-1 members of l->at[start, end) that can share a bucket with the
// first of them (bucket_mates), at most SRT_MAX_BUCKET, into `m`.
static int bucket_of(const list *l, int start, int end, bool gathers, int *m) {
  int n = 0;
  for (int k = start; k < end && n < SRT_MAX_BUCKET; ++k) {
    MlirOperation op = l->at[k].op;
    if (rank1_result(op) && bucket_mates(n ? l->at[m[0]].op : op, op, gathers))
      m[n++] = k;
  }
  return n;
}

// Buckets the rank-1 collectives of each group of `l` (assign_groups):
// gathers move up to their first member, reductions down to their last
// (their readers after them).
static void make_buckets(const list *l, bool gathers, int *next_id) {
  int *m = calloc((size_t)l->n + 1, sizeof *m);
  for (int start = 0, end; start < l->n; start = end) {
    for (end = start + 1; end < l->n && l->at[end].group == l->at[start].group; ++end) {
    }
    int n = bucket_of(l, start, end, gathers, m);
    if (n < 2)
      continue;
    int id = (*next_id)++;
    for (int k = 0; k < n; ++k) {
      MlirOperation op = l->at[m[k]].op;
      mark_bucket(op, id);
      if (gathers && k > 0) {
        mlirOperationMoveAfter(op, l->at[m[k - 1]].op);
      } else if (!gathers && k + 1 < n) {
        mlirOperationMoveBefore(op, l->at[m[n - 1]].op);
        sink_readers(op);
      }
    }
  }
  free(m);
}

static int by_position(const void *a, const void *b) {
  MlirOperation x = ((const collective *)a)->op, y = ((const collective *)b)->op;
  return x.ptr == y.ptr ? 0 : mlirOperationIsBeforeInBlock(x, y) ? -1 : 1;
}

static void overlap_func(MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirOperation optimizer = {NULL}, first_backward = {NULL};
  list gathers = {0}, reductions = {0};
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind k = nn_op_kind_of(op);
    if (k == NN_OP_OPTIMIZER_STEP)
      optimizer = op;
    if (mlirOperationIsNull(first_backward) && k != NN_OP_NONE &&
        nn_op_phase_of(k) == NN_PHASE_BACKWARD)
      first_backward = op;
  }
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    bool gather = is_param_gather(op);
    if (!gather && !is_grad_reduction(op))
      continue;
    MlirOperation reader = first_reader(mlirOperationGetResult(op, 0));
    if (mlirOperationIsNull(reader))
      continue;
    collective c = {.op = op,
                    .key = layer_key(gather ? reader : op),
                    .backward = !mlirOperationIsNull(first_backward) &&
                                !mlirOperationIsBeforeInBlock(reader, first_backward)};
    list *l = gather ? &gathers : &reductions;
    if (!c.key.length && l->n) // a reader of no module: with the one before
      c.key = l->at[l->n - 1].key;
    append(l, c);
  }
  assign_groups(&gathers);
  assign_groups(&reductions);
  int next_id = 0;
  make_buckets(&reductions, false, &next_id);
  if (reductions.n > 1) // (qsort's array may not be NULL, even for none)
    qsort(reductions.at, (size_t)reductions.n, sizeof *reductions.at, by_position);
  for (int i = 0; i < gathers.n; ++i)
    gathers.at[i].wait =
        add_wait(body, gathers.at[i].op, first_reader(mlirOperationGetResult(gathers.at[i].op, 0)));
  for (int i = 0; i < reductions.n; ++i)
    reductions.at[i].wait = add_wait(
        body, reductions.at[i].op, first_reader(mlirOperationGetResult(reductions.at[i].op, 0)));
  bound_reductions(&reductions, optimizer);
  prefetch_gathers(&gathers);
  make_buckets(&gathers, true, &next_id);
  free(gathers.at);
  free(reductions.at);
}

static MlirLogicalResult run_overlap(MlirOperation module, const tp_option_value *o) {
  (void)o;
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  MlirBlock top = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(top); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f))
      overlap_func(f);
  return mlirLogicalResultSuccess();
}

const tp_pass_info tp_overlap_pass = {
    .argument = "overlap-collectives",
    .summary = "Start parameter gathers a layer ahead and let gradient reductions run "
               "under the backward (nn.wait after each)",
    .anchor = "builtin.module",
    .options = NULL,
    .num_options = 0,
    .run = run_overlap,
};
