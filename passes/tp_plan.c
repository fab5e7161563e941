// tp-plan: matches a tensor-parallel plan's entries to nn ops by their
// `nn.module`, checks every split before anything runs (heads, KV heads,
// intermediate size, vocabulary, sequence under sequence parallel), and
// annotates the graph with upstream shard ops: `shard.grid @mesh(dp x tp)`,
// parameters `shard.shard %arg to %s`, module inputs
// `shard.shard %x to %s annotate_for_users` and module outputs
// `shard.shard %y to %s`. tp-partition turns the annotations into per-rank
// shapes and collectives. Style semantics: reference-behavior.md §1-§3.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "diagnostic.h"
#include "nn.h"
#include "pass.h"
#include "plan.h"
#include "shard_ops.h"
#include "warning.h"

enum { kOptPlan, kOptTp, kOptDp, kOptSp, kOptModelType, kOptDpReplicate, kOptCp };

// What a style does to one op: tp-axis placements of the weight (operand 1)
// and bias (operand 2), the placement wanted for the activation input
// (operand 0) and for each result.
typedef struct style_effect {
  tp_placement weight, bias;
  bool has_input;
  tp_placement input;
  int num_outputs;
  tp_placement outputs[2];
} style_effect;

// The role of a linear op feeding attention (found by tracing back from
// nn.attention through apply_rotary and head-grouped norms).
typedef struct proj_role {
  MlirOperation op;
  bool is_kv;
  int64_t heads;
} proj_role;

// A parameter's wanted placement and the module that asked for it.
typedef struct arg_want {
  bool set;
  tp_placement tp;
  MlirStringRef module;
} arg_want;

typedef struct plan_run {
  MlirContext ctx;
  MlirOperation func;
  MlirBlock body;
  MlirOperation first; // first op of the original body: annotations go before it
  tp_mesh mesh;
  bool sp;
  bool fsdp; // dp > 1 shards every parameter's dim 0 over dp (FSDP)
  tp_plan plan;
  proj_role *roles;
  int num_roles, cap_roles;
  arg_want *args;
  int num_args;
  bool *entry_failed; // per plan entry: report one error per entry
  int errors;
} plan_run;

// An error at `op` through the passes' one formatter ("tp-plan: '<module>':
// ...").
__attribute__((format(printf, 3, 4))) static void report(plan_run *r, MlirOperation op,
                                                         const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(op, "tp-plan", fmt, ap);
  va_end(ap);
  ++r->errors;
}

//===----------------------------------------------------------------------===//
// Projections feeding attention
//===----------------------------------------------------------------------===//

// The linear op producing `v`, looking through ops that keep the heads layout.
static MlirOperation head_producer(MlirValue v) {
  for (int depth = 0; depth < 8 && mlirValueIsAOpResult(v); ++depth) {
    MlirOperation op = mlirOpResultGetOwner(v);
    nn_op_kind k = nn_op_kind_of(op);
    if (k == NN_OP_LINEAR)
      return op;
    if (k != NN_OP_APPLY_ROTARY && k != NN_OP_RMS_NORM)
      break;
    v = mlirOperationGetOperand(op, 0);
  }
  return (MlirOperation){NULL};
}

static void add_role(plan_run *r, MlirOperation op, bool is_kv, int64_t heads) {
  if (mlirOperationIsNull(op))
    return;
  if (r->num_roles == r->cap_roles) {
    r->cap_roles = r->cap_roles ? 2 * r->cap_roles : 64;
    r->roles = realloc(r->roles, (size_t)r->cap_roles * sizeof *r->roles);
  }
  r->roles[r->num_roles++] = (proj_role){op, is_kv, heads};
}

static MlirWalkResult collect_roles(MlirOperation op, void *data) {
  plan_run *r = data;
  if (nn_op_kind_of(op) != NN_OP_ATTENTION)
    return MlirWalkResultAdvance;
  add_role(r, head_producer(mlirOperationGetOperand(op, 0)), false,
           nn_attr_int(op, "num_heads", 0));
  for (int i = 1; i < 3; ++i)
    add_role(r, head_producer(mlirOperationGetOperand(op, i)), true,
             nn_attr_int(op, "num_kv_heads", 0));
  return MlirWalkResultAdvance;
}

static const proj_role *role_of(const plan_run *r, MlirOperation op) {
  for (int i = 0; i < r->num_roles; ++i)
    if (mlirOperationEqual(r->roles[i].op, op))
      return &r->roles[i];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Styles
//===----------------------------------------------------------------------===//

// Fills `eff` for `style` applied to an op of `kind`; false if the style
// does not apply to that op.
static bool style_effect_of(tp_style style, nn_op_kind kind, style_effect *eff) {
  *eff = (style_effect){.weight = TP_R, .bias = TP_R};
  bool col = style == TP_STYLE_COLWISE || style == TP_STYLE_COLWISE_REP ||
             style == TP_STYLE_COLWISE_GATHER_OUTPUT;
  bool row = style == TP_STYLE_ROWWISE || style == TP_STYLE_ROWWISE_REP;
  bool gathered = style == TP_STYLE_COLWISE_REP || style == TP_STYLE_COLWISE_GATHER_OUTPUT;
  if (style == TP_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE)
    return kind == NN_OP_LINEAR || kind == NN_OP_EMBEDDING || kind == NN_OP_RMS_NORM;
  switch (kind) {
  case NN_OP_LINEAR:
    if (col)
      *eff = (style_effect){TP_S(0), TP_S(0), true, TP_R, 1, {gathered ? TP_R : TP_S(-1)}};
    else if (row)
      *eff = (style_effect){TP_S(1), TP_R, true, TP_S(-1), 1, {TP_R}};
    else
      *eff = (style_effect){TP_R, TP_R, true, TP_S(1), 1, {TP_S(1)}};
    return true;
  case NN_OP_EMBEDDING:
    if (row)
      *eff = (style_effect){TP_S(0), TP_R, true, TP_R, 1, {TP_R}};
    else if (col)
      *eff = (style_effect){TP_S(1), TP_R, true, TP_R, 1, {gathered ? TP_R : TP_S(-1)}};
    return row || col;
  case NN_OP_RMS_NORM:
    if (style == TP_STYLE_SEQUENCE_PARALLEL)
      *eff = (style_effect){TP_R, TP_R, true, TP_S(1), 1, {TP_S(1)}};
    return style == TP_STYLE_SEQUENCE_PARALLEL;
  case NN_OP_ROTARY_EMBEDDING:
    // RotaryEmbedParallel: the (cos, sin) tuple is complete on every rank
    // (it depends on positions only); both elements get the same placement.
    if (style == TP_STYLE_SEQUENCE_PARALLEL)
      *eff = (style_effect){TP_R, TP_R, false, TP_R, 2, {TP_R, TP_R}};
    return style == TP_STYLE_SEQUENCE_PARALLEL;
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Annotation
//===----------------------------------------------------------------------===//

static tp_layout layout_for(const plan_run *r, tp_placement tp, bool batched) {
  tp_layout l = {{TP_R, tp}};
  if (batched && r->mesh.size[0] > 1)
    l.on[0] = TP_S(0);
  return l;
}

static int rank_of(MlirValue v) {
  MlirType t = mlirValueGetType(v);
  return mlirTypeIsARankedTensor(t) ? (int)mlirShapedTypeGetRank(t) : 0;
}

// "rank 3" or "ranks 0-2".
static void ranks_str(char *buf, size_t len, int64_t lo, int64_t hi) {
  if (lo == hi)
    snprintf(buf, len, "rank %lld", (long long)lo);
  else
    snprintf(buf, len, "ranks %lld-%lld", (long long)lo, (long long)hi);
}

// Checks that `layout` splits `v` evenly; reports `what` of `op` otherwise,
// naming the local shapes the ranks would get.
static bool check_split(plan_run *r, MlirOperation op, const char *what, MlirValue v,
                        const tp_layout *layout) {
  nn_shape s;
  if (!nn_shape_of(mlirValueGetType(v), &s))
    return false;
  for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
    tp_placement p = layout->on[axis];
    int64_t n = r->mesh.size[axis];
    if (p.kind != TP_SHARD || s.dims[p.dim] % n == 0)
      continue;
    char big[256] = "", small[256] = "";
    size_t nb = 0, ns = 0;
    for (int d = 0; d < s.rank; ++d) {
      int64_t hi = d == p.dim ? (s.dims[d] + n - 1) / n : s.dims[d];
      int64_t lo = d == p.dim ? s.dims[d] / n : s.dims[d];
      nb += (size_t)snprintf(big + nb, sizeof big - nb, "%s%lld", d ? ", " : "", (long long)hi);
      ns += (size_t)snprintf(small + ns, sizeof small - ns, "%s%lld", d ? ", " : "", (long long)lo);
    }
    int64_t rem = s.dims[p.dim] % n;
    char first[48], rest[48];
    ranks_str(first, sizeof first, 0, rem - 1);
    ranks_str(rest, sizeof rest, rem, n - 1);
    report(r, op,
           "%s dim %d (%lld) is not divisible by the %s size %lld: the ranks' local shapes "
           "would differ ([%s] on %s, [%s] on %s)",
           what, p.dim, (long long)s.dims[p.dim], axis == 0 ? "dp" : "tp", (long long)n, big,
           first, small, rest);
    return false;
  }
  return true;
}

// Annotates operand `i` of `op` (an activation) to be `tp` for its users.
// A plan's Shard(d) must name a dim of the value it annotates.
static bool in_range(plan_run *r, MlirOperation op, const char *what, tp_placement *p,
                     MlirValue v) {
  if (tp_placement_normalize(p, rank_of(v)))
    return true;
  report(r, op, "%s placement Shard(%d) is out of range for a rank-%d tensor", what, p->dim,
         rank_of(v));
  return false;
}

static void annotate_input(plan_run *r, MlirOperation op, int i, tp_placement tp) {
  MlirValue v = mlirOperationGetOperand(op, i);
  tp_layout l = layout_for(r, tp, true);
  if (!in_range(r, op, "input", &l.on[1], v) || !check_split(r, op, "input", v, &l))
    return;
  tp_insert at = {r->ctx, r->body, op, mlirOperationGetLocation(op)};
  MlirValue s = tp_build_sharding(&at, &l, rank_of(v));
  mlirOperationSetOperand(op, i, tp_build_shard(&at, v, s, true));
}

// Annotates result `i` of `op` as `tp`; its users see the annotated value.
static void annotate_output(plan_run *r, MlirOperation op, int i, tp_placement tp) {
  MlirValue v = mlirOperationGetResult(op, i);
  tp_layout l = layout_for(r, tp, true);
  if (!in_range(r, op, "output", &l.on[1], v) ||
      !check_split(r, op, i ? "output 1" : "output", v, &l))
    return;
  MlirOperation next = mlirOperationGetNextInBlock(op);
  tp_insert at = {r->ctx, r->body, next, mlirOperationGetLocation(op)};
  MlirValue s = tp_build_sharding(&at, &l, rank_of(v));
  MlirValue annotated = tp_build_shard(&at, v, s, false);
  MlirOperation shard_op = mlirOpResultGetOwner(annotated);
  mlirValueReplaceAllUsesExcept(v, annotated, 1, &shard_op);
}

// The nn.param attribute of argument `n`, or null.
static MlirAttribute param_attr(const plan_run *r, intptr_t n) {
  MlirAttribute all = mlirOperationGetAttributeByName(r->func,
                                                      mlirStringRefCreateFromCString("arg_attrs"));
  if (mlirAttributeIsNull(all) || n >= mlirArrayAttrGetNumElements(all))
    return (MlirAttribute){NULL};
  MlirAttribute a = mlirDictionaryAttrGetElementByName(
      mlirArrayAttrGetElement(all, n), mlirStringRefCreateFromCString(NN_PARAM_ATTR));
  return !mlirAttributeIsNull(a) && mlirAttributeIsAString(a) ? a : (MlirAttribute){NULL};
}

// The nn.param of argument `n` ("?" when it has none).
static MlirStringRef param_name(const plan_run *r, intptr_t n) {
  MlirAttribute a = param_attr(r, n);
  return mlirAttributeIsNull(a) ? mlirStringRefCreate("?", 1) : mlirStringAttrGetValue(a);
}

// Records that parameter operand `i` of `op` (a function argument) wants `tp`.
static void want_param(plan_run *r, MlirOperation op, int i, tp_placement tp) {
  if (i >= mlirOperationGetNumOperands(op))
    return;
  MlirValue v = mlirOperationGetOperand(op, i);
  if (!mlirValueIsABlockArgument(v))
    return;
  intptr_t n = mlirBlockArgumentGetArgNumber(v);
  if (!tp_placement_normalize(&tp, rank_of(v)))
    return;
  arg_want *w = &r->args[n];
  if (w->set && !tp_placement_equal(w->tp, tp)) {
    char a[32], b[32];
    MlirStringRef pname = param_name(r, n);
    report(r, op,
           "parameter '%.*s' is wanted as %s by '%.*s' but as %s by '%.*s' "
           "(a tied parameter needs one placement)",
           (int)pname.length, pname.data, tp_placement_str(w->tp, a, sizeof a),
           (int)w->module.length,
           w->module.data, tp_placement_str(tp, b, sizeof b),
           (int)nn_module_of(op).length, nn_module_of(op).data);
    return;
  }
  tp_layout l = layout_for(r, tp, false);
  if (check_split(r, op, i == 1 ? "weight" : "bias", v, &l))
    *w = (arg_want){true, tp, nn_module_of(op)};
}

// Heads checks for a colwise projection feeding attention; may switch the
// projection to replicated KV heads (the "beat": fewer KV heads than ranks).
static bool check_heads(plan_run *r, MlirOperation op, tp_plan_entry *e,
                        style_effect *eff) {
  const proj_role *role = role_of(r, op);
  int64_t tp = r->mesh.size[1];
  if (!role || eff->weight.kind != TP_SHARD || eff->weight.dim != 0 || tp == 1)
    return true;
  if (role->heads % tp == 0)
    return true;
  if (!role->is_kv) {
    report(r, op, "num_attention_heads %lld is not divisible by the tp size %lld (style %s)",
           (long long)role->heads, (long long)tp, tp_style_name(e->style));
    return false;
  }
  if (tp % role->heads != 0) {
    report(r, op,
           "num_key_value_heads %lld is not divisible by the tp size %lld, nor divides it "
           "(so KV heads cannot be replicated over ranks either; style %s)",
           (long long)role->heads, (long long)tp, tp_style_name(e->style));
    return false;
  }
  // Each KV head is replicated over tp / kv_heads ranks.
  eff->weight = eff->bias = TP_R;
  eff->outputs[0] = TP_R;
  return true;
}

static bool sp_sequence_check(plan_run *r, MlirOperation op) {
  // RotaryEmbedParallel: the hidden states it sees are the local sequence
  // shard; an uneven split is refused naming the local shapes.
  nn_shape s;
  if (!nn_shape_of(mlirValueGetType(mlirOperationGetResult(op, 0)), &s) || s.rank < 2)
    return true;
  tp_layout l = {{TP_R, TP_S(1)}};
  return check_split(r, op, "sequence (of the rotary tuple's hidden states)",
                     mlirOperationGetResult(op, 0), &l);
}

static void apply_entry(plan_run *r, MlirOperation op, tp_plan_entry *e, int index) {
  nn_op_kind kind = nn_op_kind_of(op);
  style_effect eff;
  int errors_before = r->errors;
  if (!style_effect_of(e->style, kind, &eff)) {
    report(r, op, "plan entry '%s' gives it style '%s', which does not apply to an %s",
           e->pattern, tp_style_name(e->style), nn_op_name(kind));
  } else if (check_heads(r, op, e, &eff)) {
    for (int i = 0; i < e->num_outputs && i < 2; ++i)
      eff.outputs[i] = e->outputs[e->num_outputs == 1 ? 0 : i];
    if (kind == NN_OP_ROTARY_EMBEDDING)
      eff.outputs[1] = eff.outputs[0]; // the tuple's elements are treated alike
    if (kind == NN_OP_ROTARY_EMBEDDING && !sp_sequence_check(r, op)) {
      // reported
    } else if (e->style != TP_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE || kind != NN_OP_RMS_NORM) {
      want_param(r, op, 1, eff.weight);
      if (kind == NN_OP_LINEAR)
        want_param(r, op, 2, eff.bias);
      if (eff.has_input)
        annotate_input(r, op, 0, eff.input);
      int nres = (int)mlirOperationGetNumResults(op);
      // One refusal per entry (docs/plans.md): an input that does not split
      // is not followed by the same refusal for the output.
      for (int i = 0; i < eff.num_outputs && i < nres && r->errors == errors_before; ++i)
        annotate_output(r, op, i, eff.outputs[i]);
    } else {
      want_param(r, op, 1, TP_R);
    }
  }
  if (r->errors > errors_before)
    r->entry_failed[index] = true;
}

// Megatron's tensor parallelism of a Mamba2 mixer
// (megatron/core/ssm/mamba_mixer.py), asked for by the plan's entries for the
// mixer's own Linear submodules, `<mixer>.in_proj` colwise and
// `<mixer>.out_proj` rowwise (one op here, so the two come together): every
// weight split by heads and groups (in_proj and conv1d part by part, which
// tp-partition records), the input Replicate, the output as out_proj's entry
// says (Replicate: all-reduced; Shard(1) with sequence parallelism:
// reduce-scattered).
static void apply_mamba2_entries(plan_run *r, MlirOperation op, tp_plan_entry *in,
                                 tp_plan_entry *out);

static void apply_mamba2(plan_run *r, MlirOperation op) {
  MlirStringRef m = nn_module_of(op);
  char in_name[512], out_name[512];
  snprintf(in_name, sizeof in_name, "%.*s.in_proj", (int)m.length, m.data);
  snprintf(out_name, sizeof out_name, "%.*s.out_proj", (int)m.length, m.data);
  tp_plan_entry *in = tp_plan_match(&r->plan, in_name, strlen(in_name));
  tp_plan_entry *out = tp_plan_match(&r->plan, out_name, strlen(out_name));
  if (!in && !out)
    return;
  if (in)
    ++in->matches;
  if (out)
    ++out->matches;
  // One refusal per entry (docs/plans.md), not one per mixer.
  bool *failed = &r->entry_failed[(in ? in : out) - r->plan.entries];
  if (*failed)
    return;
  int errors_before = r->errors;
  apply_mamba2_entries(r, op, in, out);
  *failed = r->errors > errors_before;
}

static void apply_mamba2_entries(plan_run *r, MlirOperation op, tp_plan_entry *in,
                                 tp_plan_entry *out) {
  if (!in || !out || in->style != TP_STYLE_COLWISE || out->style != TP_STYLE_ROWWISE) {
    report(r, op,
           "a Mamba2 mixer is split as a whole (Megatron): its plan needs in_proj colwise "
           "and out_proj rowwise together, got in_proj %s and out_proj %s",
           in ? tp_style_name(in->style) : "(no entry)",
           out ? tp_style_name(out->style) : "(no entry)");
    return;
  }
  int64_t heads = nn_attr_int(op, "num_heads", 0), groups = nn_attr_int(op, "n_groups", 0);
  int64_t tp = r->mesh.size[1];
  if (heads % tp != 0 || groups % tp != 0) {
    report(r, op,
           "mamba_num_heads %lld and n_groups %lld must both be divisible by the tp size %lld "
           "(the mixer is split in whole heads and whole B/C groups, as Megatron requires)",
           (long long)heads, (long long)groups, (long long)tp);
    return;
  }
  for (int i = 1; i <= 7; ++i)
    want_param(r, op, i, TP_S(0));
  want_param(r, op, 8, TP_S(1));
  annotate_input(r, op, 0, TP_R);
  annotate_output(r, op, 0, out->num_outputs ? out->outputs[0] : TP_R);
}

static MlirWalkResult plan_op(MlirOperation op, void *data) {
  plan_run *r = data;
  // Styles apply to the modules' forward ops; backward ops follow by rules.
  // Sums (residual adds, and the gradient sums nn-autodiff labels with the
  // module whose users they add up) are never styled.
  nn_op_kind kind = nn_op_kind_of(op);
  if (kind == NN_OP_NONE || !nn_op_is_forward(kind) || kind == NN_OP_ADD)
    return MlirWalkResultAdvance;
  if (kind == NN_OP_MAMBA2_MIXER) {
    apply_mamba2(r, op);
    return MlirWalkResultAdvance;
  }
  MlirStringRef m = nn_module_of(op);
  tp_plan_entry *e = tp_plan_match(&r->plan, m.data, m.length);
  if (!e)
    return MlirWalkResultAdvance;
  int index = (int)(e - r->plan.entries);
  ++e->matches;
  if (!r->entry_failed[index])
    apply_entry(r, op, e, index);
  return MlirWalkResultAdvance;
}

enum { kMaxFsdpReports = 3 };

// FSDP: parameter `n` (shape `s`, wanted `tp` on the tp axis) is stored
// Shard(0) over dp on its tp shard. Returns false when dp does not divide
// that shard's dim 0 (FSDP2 would pad; we refuse), reporting the parameter
// if it is one of the first kMaxFsdpReports (`*refused` counts them all).
static bool fsdp_layout(plan_run *r, int n, const nn_shape *s, tp_layout *l, int *refused) {
  if (!r->fsdp || s->rank < 1)
    return true;
  int64_t rows = s->dims[0], dp = r->mesh.size[0], tp = r->mesh.size[1];
  bool tp_rows = l->on[1].kind == TP_SHARD && l->on[1].dim == 0;
  if (tp_rows)
    rows /= tp;
  if (rows % dp != 0 && ++*refused > kMaxFsdpReports)
    return false; // counted in annotate_args's summary
  if (rows % dp != 0) {
    MlirStringRef name = param_name(r, n);
    char tp_part[64] = "";
    if (tp_rows)
      snprintf(tp_part, sizeof tp_part, " (its tp=%lld shard of %lld)", (long long)tp,
               (long long)s->dims[0]);
    report(r, r->func,
           "parameter '%.*s': FSDP shards dim 0 over dp, but dim 0 has %lld rows%s, not "
           "divisible by dp=%lld (compile with --dp-replicate to replicate parameters over "
           "dp instead)",
           (int)name.length, name.data, (long long)rows, tp_part, (long long)dp);
    return false;
  }
  l->on[0] = TP_S(0);
  return true;
}

// Inserts `shard.shard %arg to %s` at the top for every wanted parameter
// (and, under FSDP, every parameter), and the dp batch split of integer
// inputs (input_ids, labels, position_ids, segment_ids).
static void annotate_args(plan_run *r) {
  MlirOperation first = mlirBlockGetFirstOperation(r->body);
  int refused = 0;
  for (int n = 0; n < r->num_args; ++n) {
    MlirValue arg = mlirBlockGetArgument(r->body, n);
    nn_shape s;
    if (!nn_shape_of(mlirValueGetType(arg), &s))
      continue;
    bool ints = mlirTypeIsAInteger(s.element);
    bool param = !mlirAttributeIsNull(param_attr(r, n));
    tp_layout l;
    if (r->args[n].set || (param && r->fsdp)) {
      l = layout_for(r, r->args[n].set ? r->args[n].tp : TP_R, false);
      if (param && !fsdp_layout(r, n, &s, &l, &refused))
        continue;
    } else if (ints && r->mesh.size[0] > 1 && s.rank >= 1) {
      l = layout_for(r, TP_R, true);
    } else {
      continue;
    }
    tp_insert at = {r->ctx, r->body, first, mlirOperationGetLocation(r->func)};
    MlirValue sh = tp_build_sharding(&at, &l, s.rank);
    MlirValue annotated = tp_build_shard(&at, arg, sh, false);
    MlirOperation shard_op = mlirOpResultGetOwner(annotated);
    mlirValueReplaceAllUsesExcept(arg, annotated, 1, &shard_op);
  }
  if (refused > kMaxFsdpReports) {
    report(r, r->func, "... and %d more parameters whose dim 0 dp=%lld does not divide",
           refused - kMaxFsdpReports, (long long)r->mesh.size[0]);
  }
}

static bool find_prefix(const char *prefix, void *data) {
  plan_run *r = data;
  size_t n = strlen(prefix);
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef m = nn_module_of(op);
    if (m.length > n && !memcmp(m.data, prefix, n) && m.data[n] == '.')
      return true;
  }
  return false;
}

static MlirOperation module_of(MlirOperation op) {
  while (!mlirOperationIsNull(op) && !tp_op_is(op, "builtin.module"))
    op = mlirOperationGetParentOperation(op);
  return op;
}

// Warns when a built-in plan is applied to a model of another family (it may
// still work, as Qwen2's and Llama's tables are alike, but is likely a slip).
static void check_family(MlirOperation func, const char *plan, const char *model_type) {
  const char *types = tp_plan_model_types(plan);
  if (!model_type[0] || !types)
    return;
  char needle[80];
  snprintf(needle, sizeof needle, " %s ", model_type);
  if (!strstr(types, needle)) {
    char msg[256];
    snprintf(msg, sizeof msg, "tp-plan: the built-in plan '%s' is for%smodels; this "
                              "graph's model_type is '%s'", plan, types, model_type);
    tp_emit_warning(mlirOperationGetLocation(func), msg);
  }
}

// The first Mamba2 mixer of the function's body, or a null op.
static MlirOperation first_mamba2(MlirBlock body) {
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_MAMBA2_MIXER)
      return op;
  return (MlirOperation){NULL};
}

// Context parallelism (cp > 1) splits every row of the step into 2 x cp
// chunks, rank r of cp holding chunks r and 2 x cp - 1 - r (Megatron-LM's
// and torch's head-tail load balance for causal attention). The graph is
// imported as one rank's view (shard-import --cp-size: rows cut into cp
// chunk rows, attention ops with cp_size, an unshifted loss), so here cp
// must be the graph's, and the mesh's axis 0 becomes dp x cp: the step's
// rows, FSDP shards and gradient reductions span both (torchtitan's
// dp_shard_cp); only the attention and the Mamba2 mixer tell cp apart.
static bool check_cp(plan_run *r, MlirOperation func, int64_t cp) {
  if (cp < 1) {
    report(r, func, "the cp size must be positive, got cp=%lld", (long long)cp);
    return false;
  }
  MlirOperation module = module_of(func);
  MlirAttribute a = mlirOperationIsNull(module)
                        ? (MlirAttribute){NULL}
                        : mlirOperationGetAttributeByName(
                              module, mlirStringRefCreateFromCString("nn.cp_size"));
  int64_t graph_cp = !mlirAttributeIsNull(a) && mlirAttributeIsAInteger(a)
                         ? mlirIntegerAttrGetValueInt(a)
                         : 1;
  if (cp == 1 && graph_cp == 1)
    return true;
  if (cp != graph_cp) {
    report(r, func,
           "cp=%lld, but the graph was imported for cp=%lld (module attribute nn.cp_size): "
           "give cp=%lld, or import the graph with shard-import --cp-size %lld (context "
           "parallelism partitions the graph of one cp rank; shard-compile --cp-size does both)",
           (long long)cp, (long long)graph_cp, (long long)graph_cp, (long long)cp);
    return false;
  }
  // A Mamba2 mixer under cp runs 1/cp of its (tp-local) heads with their
  // B/C groups over the whole sequence (runtime/cpu/ops_mamba2.c).
  MlirOperation mamba = first_mamba2(r->body);
  if (mlirOperationIsNull(mamba))
    return true;
  int64_t tp = r->mesh.size[1], heads = nn_attr_int(mamba, "num_heads", 0),
          groups = nn_attr_int(mamba, "n_groups", 0);
  if (heads % (tp * cp) || groups % (tp * cp)) {
    report(r, mamba,
           "context parallelism (cp=%lld) splits the Mamba2 mixer's heads and B/C groups over "
           "tp x cp = %lld ranks (each runs its share over the whole sequence), but "
           "mamba_num_heads %lld and n_groups %lld are not both divisible by it",
           (long long)cp, (long long)(tp * cp), (long long)heads, (long long)groups);
    return false;
  }
  return true;
}

static MlirLogicalResult plan_func(MlirOperation func, const tp_option_value *o,
                                   const char *model_type) {
  plan_run r = {.ctx = mlirOperationGetContext(func), .func = func};
  r.body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  r.mesh = (tp_mesh){{o[kOptDp].i, o[kOptTp].i}};
  r.sp = o[kOptSp].b;
  r.fsdp = r.mesh.size[0] * o[kOptCp].i > 1 && !o[kOptDpReplicate].b;
  if (r.mesh.size[0] < 1 || r.mesh.size[1] < 1) {
    report(&r, func, "tp and dp sizes must be positive, got tp=%lld dp=%lld",
           (long long)r.mesh.size[1], (long long)r.mesh.size[0]);
    return mlirLogicalResultFailure();
  }
  if (!check_cp(&r, func, o[kOptCp].i))
    return mlirLogicalResultFailure();
  r.mesh.size[0] *= o[kOptCp].i; // axis 0 is dp x cp (check_cp)
  MlirAttribute attrs = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("arg_attrs"));
  for (intptr_t i = 0; !mlirAttributeIsNull(attrs) && i < mlirArrayAttrGetNumElements(attrs); ++i)
    if (!mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(
            mlirArrayAttrGetElement(attrs, i), mlirStringRefCreateFromCString("nn.placements")))) {
      report(&r, func, "the function is already partitioned (its arguments carry "
                       "nn.placements): plan and partition the global graph once");
      return mlirLogicalResultFailure();
    }
  char err[1024];
  tp_model_facts facts = {model_type, find_prefix, &r};
  if (!tp_plan_load(o[kOptPlan].s, r.sp, &facts, &r.plan, err, sizeof err)) {
    report(&r, func, "%s", err);
    return mlirLogicalResultFailure();
  }
  check_family(func, o[kOptPlan].s, model_type);
  // Only built-in plans have a sequence-parallel variant: a plan file is used
  // as written (its sequence_parallel styles are its own).
  if (r.sp && (strchr(o[kOptPlan].s, '/') || strstr(o[kOptPlan].s, ".json"))) {
    char msg[640];
    snprintf(msg, sizeof msg,
             "tp-plan: sequence-parallel has no effect with the plan file '%.400s': a plan "
             "file is used as written (give its sequence_parallel styles in it)",
             o[kOptPlan].s);
    tp_emit_warning(mlirOperationGetLocation(func), msg);
  }
  if (!tp_ensure_grid(module_of(func), &r.mesh, err, sizeof err)) {
    report(&r, func, "%s", err);
    tp_plan_free(&r.plan);
    return mlirLogicalResultFailure();
  }
  r.num_args = (int)mlirBlockGetNumArguments(r.body);
  r.args = calloc((size_t)r.num_args + 1, sizeof *r.args);
  r.entry_failed = calloc((size_t)r.plan.num_entries + 1, sizeof(bool));
  mlirOperationWalk(func, collect_roles, &r, MlirWalkPreOrder);
  // Walk a snapshot: annotation inserts ops after the one being visited.
  for (MlirOperation op = mlirBlockGetFirstOperation(r.body); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    plan_op(op, &r);
    op = next;
  }
  if (!r.errors)
    annotate_args(&r);
  for (int i = 0; i < r.plan.num_entries; ++i)
    if (!r.plan.entries[i].matches) {
      char msg[600];
      snprintf(msg, sizeof msg, "tp-plan: %s: plan entry '%s' matches no module",
               r.plan.source, r.plan.entries[i].pattern);
      tp_emit_warning(mlirOperationGetLocation(func), msg);
    }
  free(r.args);
  free(r.roles);
  free(r.entry_failed);
  tp_plan_free(&r.plan);
  return r.errors ? mlirLogicalResultFailure() : mlirLogicalResultSuccess();
}

static MlirLogicalResult run_tp_plan(MlirOperation op, const tp_option_value *o) {
  if (!tp_check_functions(op))
    return mlirLogicalResultFailure();
  // The model type (for the 'hf' plan) comes from the option or the
  // module's `nn.model_type` attribute written by shard-import.
  char model_type[64] = "";
  snprintf(model_type, sizeof model_type, "%s", o[kOptModelType].s ? o[kOptModelType].s : "");
  MlirOperation module = module_of(op);
  MlirStringRef attr = mlirOperationIsNull(module) ? mlirStringRefCreate("", 0)
                                                   : nn_attr_str(module, "nn.model_type");
  if (!model_type[0] && attr.length)
    snprintf(model_type, sizeof model_type, "%.*s", (int)attr.length, attr.data);
  if (!o[kOptPlan].s || !o[kOptPlan].s[0]) {
    mlirEmitError(mlirOperationGetLocation(op), "tp-plan: no plan given (plan=NAME|FILE)");
    return mlirLogicalResultFailure();
  }
  MlirLogicalResult result = mlirLogicalResultSuccess();
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f) &&
        mlirLogicalResultIsFailure(plan_func(f, o, model_type)))
      result = mlirLogicalResultFailure();
  return result;
}

static const tp_option_info kOptions[] = {
    [kOptPlan] = {"plan", TP_OPTION_STRING, "",
                  TP_PLAN_NAMES ", or a JSON plan file"},
    [kOptTp] = {"tp", TP_OPTION_INT, "1", "tensor-parallel size (mesh axis 1)"},
    [kOptDp] = {"dp", TP_OPTION_INT, "1", "data-parallel size (mesh axis 0)"},
    [kOptSp] = {"sequence-parallel", TP_OPTION_BOOL, "false",
                "use the plan's sequence-parallel variant"},
    [kOptModelType] = {"model-type", TP_OPTION_STRING, "",
                       "config.json model_type for the 'hf' plan (default: the "
                       "module's nn.model_type)"},
    [kOptDpReplicate] = {"dp-replicate", TP_OPTION_BOOL, "false",
                         "replicate parameters over dp (DDP) instead of FSDP's Shard(0)"},
    [kOptCp] = {"cp", TP_OPTION_INT, "1",
                "context-parallel size (the sequence split over cp; the graph must be imported for it)"},
};

const tp_pass_info tp_plan_pass = {
    .argument = "tp-plan",
    .summary = "Match a tensor-parallel plan to nn ops, check splits, annotate shardings",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = sizeof kOptions / sizeof *kOptions,
    .run = run_tp_plan,
};
