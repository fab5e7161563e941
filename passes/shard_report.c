// shard-report: what one rank of a partitioned graph holds and moves per
// step: parameter bytes, activation bytes, and for each collective kind and
// mesh axis its count, payload and the bytes each rank sends with ring
// algorithms (all-reduce 2(n-1)/n x S, all-gather and reduce-scatter
// (n-1)/n x the full tensor, all-to-all (n-1)/n x S; all_slice moves
// nothing), how many of them are overlapped (started non-blocking and
// read through an nn.wait: overlap-collectives) and how many runtime calls
// they make (a bucket of a layer's small tensors is one). For a training
// step (a function with an nn.optimizer_step) also its buffer plan
// (buffer_plan.h), as lower-to-runtime would build it, without lowering:
// the arena's regions, the parameter table and the memory figures. Printed
// to stderr as tables; the IR is unchanged.
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cp_traffic.h"
#include "buffer_plan.h"
#include "diagnostic.h"
#include "memory_report.h"
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
  long long overlapped[kKinds][TP_MESH_AXES]; // read through an nn.wait
  long long calls[kKinds][TP_MESH_AXES]; // runtime calls: a bucket is one
  long long last_bucket; // nn.bucket of the last collective visited, or -1
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
    // A bucket's members are adjacent (overlap-collectives): one call.
    long long bucket = nn_attr_int(op, "nn.bucket", -1);
    rep->calls[k][axis] += bucket < 0 || bucket != rep->last_bucket;
    rep->last_bucket = bucket;
    MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, 0));
    if (!mlirOpOperandIsNull(u) && nn_op_kind_of(mlirOpOperandGetOwner(u)) == NN_OP_WAIT)
      rep->overlapped[k][axis] += 1;
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
  if (nn_op_kind_of(op) == NN_OP_WAIT) // its collective's buffer, counted there
    return MlirWalkResultAdvance;
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

// The parameters by name pattern (each all-digit path segment, a layer
// index, read as '*'), in first-seen order: global shape, placements and
// the local shape each rank holds, and how many tensors share them.
enum { kGroups = 256 };
typedef struct param_group {
  char pattern[160], global[64], local[64], placements[48];
  int count;
} param_group;

// Appends to buf (of `size`) at *at, never past its end: *at stays below
// size (the text is cut instead).
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t size, size_t *at,
                                                         const char *fmt, ...) {
  if (*at + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *at, size - *at, fmt, ap);
  va_end(ap);
  if (n > 0)
    *at = *at + (size_t)n < size ? *at + (size_t)n : size - 1;
}

static void shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < rank && at < n; ++d)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (at < n)
    snprintf(buf + at, n - at, "]");
}

static void pattern_of(MlirStringRef name, char *out, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < name.length && o + 2 < n;) {
    size_t j = i;
    while (j < name.length && name.data[j] >= '0' && name.data[j] <= '9')
      ++j;
    bool segment = j > i && (i == 0 || name.data[i - 1] == '.') &&
                   (j == name.length || name.data[j] == '.');
    if (segment) {
      out[o++] = '*';
      i = j;
    } else {
      out[o++] = name.data[i++];
    }
  }
  out[o] = 0;
}

static void print_param_groups(FILE *o, MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  MlirAttribute attrs = mlirOperationGetAttributeByName(
      func, mlirStringRefCreateFromCString("arg_attrs"));
  static param_group groups[kGroups];
  int n = 0;
  for (intptr_t i = 0; !mlirAttributeIsNull(attrs) && i < mlirBlockGetNumArguments(body) &&
                       i < mlirArrayAttrGetNumElements(attrs);
       ++i) {
    MlirAttribute dict = mlirArrayAttrGetElement(attrs, i);
    MlirAttribute pname = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString(NN_PARAM_ATTR));
    nn_shape local;
    if (mlirAttributeIsNull(pname) ||
        !nn_shape_of(mlirValueGetType(mlirBlockGetArgument(body, i)), &local))
      continue;
    param_group g = {.count = 1};
    pattern_of(mlirStringAttrGetValue(pname), g.pattern, sizeof g.pattern);
    shape_str(g.local, sizeof g.local, local.rank, local.dims);
    // Attributes of the wrong kind (hand-written IR) read as absent.
    MlirAttribute gs = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString("nn.global_shape"));
    bool has_gs = !mlirAttributeIsNull(gs) && mlirAttributeIsADenseI64Array(gs) &&
                  mlirDenseArrayGetNumElements(gs) == local.rank;
    int64_t global[NN_MAX_RANK];
    for (int d = 0; d < local.rank; ++d)
      global[d] = has_gs ? mlirDenseI64ArrayGetElement(gs, d) : local.dims[d];
    shape_str(g.global, sizeof g.global, local.rank, global);
    MlirAttribute pl = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString("nn.placements"));
    size_t at = 0;
    for (intptr_t a = 0; !mlirAttributeIsNull(pl) && mlirAttributeIsAArray(pl) &&
                         a < mlirArrayAttrGetNumElements(pl);
         ++a) {
      MlirAttribute e = mlirArrayAttrGetElement(pl, a);
      MlirStringRef v = mlirAttributeIsAString(e) ? mlirStringAttrGetValue(e)
                                                  : mlirStringRefCreateFromCString("?");
      append(g.placements, sizeof g.placements, &at, "%s%.*s", a ? ", " : "", (int)v.length,
             v.data);
    }
    MlirAttribute parts = mlirDictionaryAttrGetElementByName(
        dict, mlirStringRefCreateFromCString("nn.tp_blocks"));
    if (!mlirAttributeIsNull(parts) && mlirAttributeIsADenseI64Array(parts))
      append(g.placements, sizeof g.placements, &at, " in %d parts", // Megatron's Mamba2 split
             (int)mlirDenseArrayGetNumElements(parts));
    int k = 0;
    while (k < n && (strcmp(groups[k].pattern, g.pattern) || strcmp(groups[k].local, g.local)))
      ++k;
    if (k < n)
      ++groups[k].count;
    else if (n < kGroups)
      groups[n++] = g;
  }
  if (!n)
    return;
  fprintf(o, "  %-52s %-16s %-31s %-16s %s\n", "parameter", "global", "placements [dp, tp]",
          "local", "tensors");
  for (int k = 0; k < n; ++k)
    fprintf(o, "  %-52s %-16s %-31s %-16s %d\n", groups[k].pattern, groups[k].global,
            groups[k].placements, groups[k].local, groups[k].count);
}

static void print_report(const report *rep, MlirStringRef name, int64_t cp) {
  FILE *o = stderr;
  char cp_axis[96] = "";
  if (cp > 1) // the grid's axis 0 is dp x cp (tp-plan's check_cp)
    snprintf(cp_axis, sizeof cp_axis, " x cp=%lld", (long long)cp);
  fprintf(o, "shard-report: @%.*s, per rank, mesh dp=%lld%s x tp=%lld (every rank runs "
             "the same program; bytes per step%s)\n",
          (int)name.length, name.data, (long long)(rep->mesh.size[0] / cp), cp_axis,
          (long long)rep->mesh.size[1], cp > 1 ? "; axis dp below is dp x cp" : "");
  fprintf(o, "  %-16s %18lld bytes  (%lld elements in %lld tensors)\n", "parameters",
          rep->param_bytes, rep->param_elements, rep->params);
  fprintf(o, "  %-16s %18lld bytes  (input_ids, labels, position/segment ids)\n", "inputs",
          rep->input_bytes);
  fprintf(o, "  %-16s %18lld bytes  (every intermediate value, before buffer reuse)\n",
          "activations", rep->activation_bytes);
  fprintf(o, "  %-16s %4s %6s %18s %20s %12s %6s\n", "collective", "axis", "count",
          "payload bytes", "bytes sent per rank", "overlapped", "calls");
  double total = 0;
  for (int k = 0; k < kKinds; ++k)
    for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
      if (!rep->count[k][axis])
        continue;
      fprintf(o, "  %-16s %4s %6lld %18.0f %20.0f %12lld %6lld\n", kNames[k],
              axis ? "tp" : "dp", rep->count[k][axis], rep->payload[k][axis],
              rep->sent[k][axis], rep->overlapped[k][axis], rep->calls[k][axis]);
      total += rep->sent[k][axis];
    }
  fprintf(o, "  %-16s %4s %6s %18s %20.0f\n", "total", "", "", "", total);
}

// The attention's traffic over cp, which the collectives above do not show
// (the attention op all-gathers and reduce-scatters within its call).
static void print_cp_traffic(tp_cp_traffic t) {
  if (t.cp <= 1)
    return;
  fprintf(stderr,
          "  context parallel (cp=%lld): K/V all-gathered over cp, %lld bytes received per "
          "rank per attention layer in the forward and again in the backward; dK/dV "
          "reduce-scattered, %lld bytes; %lld attention layers, %lld bytes per step\n",
          (long long)t.cp, (long long)t.gather_per_layer, (long long)t.grad_per_layer,
          (long long)t.backward_ops, (long long)t.step);
}

enum { kOptBackend, kNumOptions };

// Whether `func` is a training step lower-to-runtime takes: input_ids and
// labels [batch, seq] first, and an nn.optimizer_step.
static bool is_step(MlirOperation func) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  nn_shape ids;
  if (mlirBlockGetNumArguments(body) < 2 ||
      !nn_shape_of(mlirValueGetType(mlirBlockGetArgument(body, 0)), &ids) || ids.rank != 2)
    return false;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_OPTIMIZER_STEP)
      return true;
  return false;
}

static void print_param_slots(FILE *o, const char *which, const tp_program_param *p) {
  fprintf(o, "    %-6s %.*s: weights %lld, gradient %lld, moments %lld, %lld", which,
          (int)p->name.length, p->name.data, (long long)p->offset, (long long)p->grad,
          (long long)p->m, (long long)p->v);
  if (p->compute >= 0)
    fprintf(o, ", compute copy %lld", (long long)p->compute);
  fputc('\n', o);
}

// The buffer plan of training step `func` for `backend` (the policy
// lower-to-runtime takes for it, without offload or kept logits): the
// regions of the arena, the parameter table (its size, first and last
// entries) and the memory figures, less the buckets' staging, which only
// the lowering knows. False after the plan's own errors (reported at
// their ops).
static bool print_buffer_plan(MlirOperation func, const tp_mesh *mesh, bool cuda) {
  FILE *o = stderr;
  if (!is_step(func)) {
    fprintf(o, "  buffer plan: none (a training step has one: nn-autodiff and nn-optimizer "
               "before tp-plan)\n");
    return true;
  }
  tp_buffer_policy policy = {
      .mixed_precision = cuda, .backend = cuda ? "cuda" : "cpu", .count_workspace = !cuda,
      .pass = "shard-report"};
  tp_buffer_plan plan = {0};
  bool ok = tp_buffer_plan_build(func, mesh, &policy, &plan);
  if (ok) {
    tp_buffer_plan_figures(&plan, func, mesh, &policy, 1, 0);
    fprintf(o, "  buffer plan (%s backend; byte offsets in the rank's arena, memory figures "
               "less the buckets' staging, which lowering adds):\n",
            cuda ? "cuda" : "cpu");
    fprintf(o, "    persistent [0, %lld), input_ids at %lld, labels at %lld; temporaries "
               "[%lld, %lld); %zu values placed\n",
            (long long)plan.persistent, (long long)plan.ids_offset,
            (long long)plan.labels_offset, (long long)plan.persistent, (long long)plan.arena,
            plan.num_values);
    fprintf(o, "    parameter table: %d entries\n", plan.num_params);
    if (plan.num_params > 0)
      print_param_slots(o, "first", &plan.params[0]);
    if (plan.num_params > 1)
      print_param_slots(o, "last", &plan.params[plan.num_params - 1]);
    char text[4096];
    tp_memory_report_text(&plan.mem, text, sizeof text);
    for (const char *line = text; *line;) {
      size_t n = strcspn(line, "\n");
      fprintf(o, "    %.*s\n", (int)n, line);
      line += n + (line[n] == '\n');
    }
  }
  tp_buffer_plan_free(&plan);
  return ok;
}

static MlirLogicalResult run_shard_report(MlirOperation module, const tp_option_value *o) {
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  bool cuda = !strcmp(o[kOptBackend].s, "cuda");
  if (!cuda && strcmp(o[kOptBackend].s, "cpu") != 0) {
    tp_error(module, "shard-report", "backend '%s' is not one of 'cpu', 'cuda'",
             o[kOptBackend].s);
    return mlirLogicalResultFailure();
  }
  bool ok = true;
  report base = {.last_bucket = -1};
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
    tp_cp_traffic cp = tp_cp_traffic_of(module, f, cuda ? 2 : 4);
    print_report(&rep, mlirStringAttrGetValue(name), cp.cp);
    print_cp_traffic(cp);
    print_param_groups(stderr, f);
    ok = print_buffer_plan(f, &base.mesh, cuda) && ok;
  }
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static const tp_option_info kOptions[kNumOptions] = {
    [kOptBackend] = {"backend", TP_OPTION_STRING, "cpu",
                     "the backend whose buffer plan a training step shows: cpu (fp32) or cuda "
                     "(bf16 activations and compute copies)"},
};

const tp_pass_info tp_shard_report_pass = {
    .argument = "shard-report",
    .summary = "Print per-rank parameter and activation bytes, collective traffic and a "
               "training step's buffer plan",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = kNumOptions,
    .run = run_shard_report,
};
