// lower-to-runtime{backend=cpu|cuda}: turns a partitioned training step into
// an LLVM-dialect module that calls the runtime: from the step's buffer plan
// (buffer_plan.h: one arena per rank, every value's offset and dtype, the
// parameter table, the regions), one `srt_op_*` call per op
// (runtime/include/shardrt/ops.h) with byte offsets and local sizes as
// constants, a status check after each, and the `srt_program shard_program`
// table (program_table.c) the training driver reads.
//
// What each call passes comes from the op table (shardrt/ops.def): every
// SRT_OP row names the op it lowers and where each argument comes from;
// this file defines those sources (IN, NUMEL, ATTR_I, ...) and knows no op
// by name but the add + rms_norm fusion. The module is built through the
// MLIR C API (llvm_builder.h), each call at the location of the op it
// lowers (its config key or IR line, and its Hugging Face module), so an
// error in the generated code points at its source.
//
// backend=cuda plans mixed precision (the reference's MixedPrecisionPolicy:
// bf16 compute, fp32 reductions): each parameter also gets a bf16 compute
// copy in the persistent region, which is what the ops read; activations
// are bf16; parameter gradients (and every collective or add on them), the
// loss statistics and the rotary cos/sin tables stay fp32. Ops whose
// buffers may be either (add, collectives) take the dtype as an argument.
// The program table points at the backend (srt_cuda_backend), whose ops
// the calls dispatch to.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_plan.h"
#include "lower_run.h"
#include "diagnostic.h"
#include "llvm_builder.h"
#include "memory_report.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "nn.h"
#include "pass.h"
#include "program_table.h"
#include "ptr_map.h"
#include "shard_ops.h"
#include "shardrt/ops.h"
#include "shardrt/program.h"
#include "shardrt/types.h" // SRT_MAX_PENDING

enum {
  kOptBackend,
  kOptKeepLogits,
  kOptMemoryReport,
  kOptDeviceMemory,
  kOptAccumulate,
  kOptCpuOffload,
  kOptParamDtype
};

enum { kF32 = TP_BUF_F32, kBF16 = TP_BUF_BF16, kI64 = TP_BUF_I64 };

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//



static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

// The buffer of value `v`: its offset and element type.
int64_t lr_find_value(lower_run *r, MlirValue v) {
  int64_t offset = 0;
  int dtype;
  if (!tp_buffer_of(&r->plan, v, &offset, &dtype))
    lr_fail(r, "internal error: a value has no buffer");
  return offset;
}

static int dtype_of(lower_run *r, MlirValue v) {
  int64_t offset;
  int dtype = kF32;
  if (!tp_buffer_of(&r->plan, v, &offset, &dtype))
    lr_fail(r, "internal error: a value has no buffer");
  return dtype;
}

static nn_shape shape(MlirValue v) {
  nn_shape s = {0};
  nn_shape_of(mlirValueGetType(v), &s);
  return s;
}

//===----------------------------------------------------------------------===//
// Argument sources of the op table (shardrt/ops.def)
//===----------------------------------------------------------------------===//

// Every SRT_OP row's call (the exec and its arguments) fits kMaxArgs,
// checked when this file compiles.
#define COUNT_ARGS(args) COUNT_A args(END, _, _)
#define COUNT_A(kind, name, src) COUNT_##kind SRT_OP_NEXT_##kind(COUNT_B)
#define COUNT_B(kind, name, src) COUNT_##kind SRT_OP_NEXT_##kind(COUNT_A)
#define COUNT_BUF +1
#define COUNT_OPT_BUF +1
#define COUNT_SIZE +1
#define COUNT_INT +1
#define COUNT_AXIS +1
#define COUNT_DTYPE +1
#define COUNT_F64 +1
#define COUNT_ATTENTION +1
#define COUNT_BUCKET +1
#define COUNT_PROGRAM +1
#define COUNT_OPTIONS +1
#define COUNT_RESULT +1
#define COUNT_REQUIRE
#define COUNT_END
#define SRT_OP(name, source, check, args)                                                  \
  _Static_assert(1 COUNT_ARGS(args) <= kMaxArgs, "srt_op_" #name ": more than kMaxArgs");
#include "shardrt/ops.def"


void lr_push(lower_call *c, MlirValue v) {
  if (c->n == kMaxArgs) {
    lr_fail(c->r, "internal error: a runtime call with more than %d arguments", kMaxArgs);
    return;
  }
  c->args[c->n++] = v;
}

static void arg_i(lower_call *c, int64_t v) {
  lr_push(c, lb_const_int(&c->r->at, c->r->at.i64, v));
}
static void arg_f(lower_call *c, double v) { lr_push(c, lb_const_f64(&c->r->at, v)); }
// A buffer argument: the value's arena offset, or -1 for a null value.
static void arg_buf(lower_call *c, MlirValue v) {
  arg_i(c, mlirValueIsNull(v) ? -1 : lr_find_value(c->r, v));
}

static MlirValue in_of(MlirOperation op, int i) {
  return i < mlirOperationGetNumOperands(op) ? mlirOperationGetOperand(op, i)
                                             : (MlirValue){NULL};
}

int64_t lr_numel(MlirValue v) {
  nn_shape s = shape(v);
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  return n;
}

static int64_t dim(MlirValue v, int d) {
  nn_shape s = shape(v);
  return d < s.rank ? s.dims[d] : 1;
}

static int64_t last_dim(MlirValue v) {
  nn_shape s = shape(v);
  return s.rank ? s.dims[s.rank - 1] : 1;
}

// Rows of [..., features]: elements / features (0 for no features).
static int64_t rows(MlirValue v) {
  int64_t f = last_dim(v);
  return f ? lr_numel(v) / f : 0;
}

// The code of the op's string attribute `name`: its index in `names`
// (NULL-terminated; the enum of the runtime's kernel lists the same values
// in the same order), names[0] (the default) when the op has no such
// attribute (or an empty one), -1 for another string (nn-verify refuses those; the op's
// runtime check refuses a code outside the enum).
static int64_t attr_code(MlirOperation op, const char *name, const char *const *names) {
  MlirStringRef v = nn_attr_str(op, name);
  if (!v.length)
    return 0;
  for (int64_t i = 0; names[i]; ++i)
    if (mlirStringRefEqual(v, str(names[i])))
      return i;
  return -1;
}

// A norm's group: its head_dim (per-head q/k norms), else the whole row.
static int64_t norm_group(MlirOperation norm) {
  int64_t group = nn_attr_int(norm, "head_dim", 0);
  return group > 0 ? group : last_dim(mlirOperationGetOperand(norm, 0));
}

// The rank of a collective's input; at most 4 (the runtime's shape args).
static int64_t rank4(lower_call *c, MlirValue v) {
  nn_shape s = shape(v);
  if (s.rank > 4)
    lr_fail(c->r, "collectives on tensors of rank %d are not supported (at most 4)", s.rank);
  return s.rank;
}

// A collective's one mesh axis.
int64_t lr_grid_axis(lower_call *c) {
  MlirAttribute axes = mlirOperationGetAttributeByName(c->op, str("grid_axes"));
  if (mlirAttributeIsNull(axes) || !mlirAttributeIsADenseI16Array(axes) ||
      mlirDenseArrayGetNumElements(axes) != 1) {
    lr_fail(c->r, "a collective over other than one grid axis is not supported");
    return 0;
  }
  return mlirDenseI16ArrayGetElement(axes, 0);
}

static int64_t is_max(lower_call *c) {
  MlirAttribute red = mlirOperationGetAttributeByName(c->op, str("reduction"));
  return !mlirAttributeIsNull(red) &&
         mlirAttributeEqual(red, mlirAttributeParseGet(c->r->ctx, str("#shard<partial max>")));
}

#define IN(i) in_of(c->op, i)
#define IN_OPT(i) in_of(c->op, i)
#define IN_OPT_BEFORE_LAST(i) \
  (mlirOperationGetNumOperands(c->op) > (i) + 1 ? in_of(c->op, i) : (MlirValue){NULL})
#define OUT(i) mlirOperationGetResult(c->op, i)
#define NUM_IN mlirOperationGetNumOperands(c->op)
#define NUMEL(v) lr_numel(v)
#define ROWS(v) rows(v)
#define LAST(v) last_dim(v)
#define DIM(v, d) dim(v, d)
#define DIM_OR_1(v, d) dim(v, d)
#define RANK4(v) rank4(c, v)
#define DTYPE(v) lr_op_dtype(c, v)
#define ATTR_I(name, fallback) nn_attr_int(c->op, name, fallback)
#define ATTR_F(name, fallback) nn_attr_float(c->op, name, fallback)
#define ATTR_CODE(name, ...) attr_code(c->op, name, (const char *const[]){__VA_ARGS__, NULL})
#define NORM_GROUP norm_group(c->op)
#define GRID_AXIS lr_grid_axis(c)
#define IS_MAX is_max(c)
#define START_SLOT c->r->slot
#define WAIT_SLOT c->r->slot
#define BUCKET_KIND lr_bucket_kind(c->op)
#define FUSED_IN(i) in_of(c->fused, i)
#define FUSED_OUT(i) mlirOperationGetResult(c->fused, i)
#define FUSED_ATTR_F(name, fallback) nn_attr_float(c->fused, name, fallback)
#define FUSED_NORM_GROUP norm_group(c->fused)

// The dtype argument of an op on `v`: fp32 or bf16 (no op computes on the
// int64 input ids or labels).
int64_t lr_op_dtype(lower_call *c, MlirValue v) {
  int dtype = dtype_of(c->r, v);
  if (dtype == kI64)
    lr_fail(c->r, "an add or a collective of integer tensors (input ids, labels) is not "
               "supported");
  return dtype;
}

static void arg_attention(lower_call *c);
static void arg_program_ptr(lower_call *c, int which);

// The packing of one argument tuple, walked as shardrt/op_table.h describes.
#define PACK(args) PACK_A args(END, _, _)
#define PACK_A(kind, name, src) PACK_##kind(name, src) SRT_OP_NEXT_##kind(PACK_B)
#define PACK_B(kind, name, src) PACK_##kind(name, src) SRT_OP_NEXT_##kind(PACK_A)
#define PACK_BUF(name, src) arg_buf(c, src);
#define PACK_OPT_BUF(name, src) arg_buf(c, src);
#define PACK_SIZE(name, src) arg_i(c, src);
#define PACK_INT(name, src) arg_i(c, src);
#define PACK_AXIS(name, src) arg_i(c, src);
#define PACK_DTYPE(name, src) arg_i(c, src);
#define PACK_F64(name, src) arg_f(c, src);
#define PACK_ATTENTION(name, src) arg_attention(c);
#define PACK_BUCKET(name, src) lr_arg_bucket(c);
#define PACK_PROGRAM(name, src) arg_program_ptr(c, 0);
#define PACK_OPTIONS(name, src) arg_program_ptr(c, 1);
#define PACK_RESULT(name, src) arg_program_ptr(c, 2);
#define PACK_REQUIRE(cond, msg)                                                          \
  if (!(cond)) {                                                                         \
    lr_fail(c->r, "%s", msg);                                                               \
    return;                                                                              \
  }
#define PACK_END(name, src)

#define SRT_OP(name, source, check, args)                                                \
  static void pack_##name(lower_call *c) { PACK(args) }
#include "shardrt/ops.def"


static const lowering kLowerings[] = {
#define SRT_OP(name, source, check, args) {"srt_op_" #name, source, pack_##name},
#include "shardrt/ops.def"
};

enum { kNumLowerings = sizeof kLowerings / sizeof *kLowerings };

// The lowering of `op` (by its name), or NULL if it has none.
static const lowering *lowering_of(MlirOperation op) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  for (int i = 0; i < kNumLowerings; ++i)
    if (kLowerings[i].source && mlirStringRefEqual(str(kLowerings[i].source), name))
      return &kLowerings[i];
  return NULL;
}

// The lowering calling runtime function `fn`, or NULL.
const lowering *lr_lowering_named(const char *fn) {
  for (int i = 0; i < kNumLowerings; ++i)
    if (!strcmp(kLowerings[i].fn, fn))
      return &kLowerings[i];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

// The attention configuration of c->op as a private constant global
// (SRT_ATTENTION_CONFIG_FIELDS); its address is the argument.
static void arg_attention(lower_call *c) {
  lower_run *r = c->r;
  MlirOperation op = c->op;
  nn_shape q = shape(IN(0));
  int64_t heads = ATTR_I("num_heads", 0);
  const struct {
    bool is_f64;
    int64_t i;
    double f;
  } values[] = {{false, q.dims[0], 0},
                {false, q.dims[1], 0},
                {false, heads, 0},
                {false, ATTR_I("num_kv_heads", 0), 0},
                {false, ATTR_I("head_dim", 0), 0},
                {false, ATTR_I("causal", 1), 0},
                {false, ATTR_I("sliding_window", 0), 0},
                {true, 0, ATTR_F("scale", 0)},
                {true, 0, ATTR_F("softcap", 0)},
                {false, ATTR_I("nn.q_head_offset_axis", -1), 0},
                {false, ATTR_I("nn.global_num_heads", heads), 0},
                {false, ATTR_I("cp_size", 1), 0}};
#define FIELD(type, name) _Generic((type)0, double: r->top.f64, default: r->top.i64),
  MlirType fields[] = {SRT_ATTENTION_CONFIG_FIELDS(FIELD)};
#undef FIELD
  enum { kFields = sizeof fields / sizeof *fields };
  _Static_assert(sizeof values / sizeof *values == kFields,
                 "one value per SRT_ATTENTION_CONFIG_FIELDS field");
  MlirType type = mlirLLVMStructTypeLiteralGet(r->ctx, kFields, fields, false);
  char name[48];
  snprintf(name, sizeof name, "attention_config_%d", r->num_attention++);
  MlirBlock init;
  lb_builder b = r->top;
  b.loc = mlirOperationGetLocation(op);
  lb_global(&b, name, type, false, &init);
  b.block = init;
  MlirValue agg = lb_zero(&b, type);
  for (int64_t i = 0; i < kFields; ++i) {
    if (values[i].is_f64 != mlirTypeIsAF64(fields[i]))
      lr_fail(r, "internal error: attention config field %d has the wrong type", (int)i);
    MlirValue v = values[i].is_f64 ? lb_const_f64(&b, values[i].f)
                                   : lb_const_int(&b, b.i64, values[i].i);
    agg = lb_insert(&b, agg, v, 1, &i);
  }
  lb_return(&b, agg);
  lr_push(c, lb_address_of(&r->at, name));
}

// The step's program table (0), options (1) or result (2).
static void arg_program_ptr(lower_call *c, int which) {
  lower_run *r = c->r;
  lr_push(c, which == 0 ? lb_address_of(&r->at, "shard_program")
          : which == 1 ? r->options : r->result);
}

// Declares the function of `l` (once) with the types of c's arguments.
static void declare(lower_run *r, const lowering *l, const lower_call *c) {
  size_t i = (size_t)(l - kLowerings);
  if (r->declared[i])
    return;
  r->declared[i] = true;
  MlirType types[kMaxArgs];
  for (int k = 0; k < c->n; ++k)
    types[k] = mlirValueGetType(c->args[k]);
  lb_builder b = r->top;
  b.loc = mlirOperationGetLocation(c->op);
  lb_func(&b, l->fn, mlirLLVMFunctionTypeGet(b.ptr, c->n, types, false), NULL);
}

// The call of `l` for `op` (and the second op of a fusion): its
// arguments, the call, and a check that returns a failure at once.
void lr_lower_op(lower_run *r, const lowering *l, MlirOperation op, MlirOperation fused) {
  r->at.loc = mlirOperationGetLocation(op);
  lower_call c = {.r = r, .op = op, .fused = fused};
  lr_push(&c, r->exec);
  l->pack(&c);
  if (r->errors)
    return;
  declare(r, l, &c);
  MlirValue status = lb_call(&r->at, l->fn, c.n, c.args, r->at.ptr);
  MlirValue failed = lb_icmp_ne(&r->at, status, lb_zero(&r->at, r->at.ptr));
  MlirBlock next = mlirBlockCreate(0, NULL, NULL);
  mlirRegionInsertOwnedBlockBefore(r->step_region, r->fail_block, next);
  lb_cond_br(&r->at, failed, r->fail_block, 1, &status, next);
  r->at.block = next;
}

// The step function: its entry block (exec, options, result) and the
// failure block that returns a call's status.
static void begin_step(lower_run *r) {
  MlirType ptr = r->top.ptr, args[3] = {ptr, ptr, ptr};
  MlirBlock entry;
  MlirOperation step =
      lb_func(&r->top, "shard_step", mlirLLVMFunctionTypeGet(ptr, 3, args, false), &entry);
  r->step_region = mlirOperationGetRegion(step, 0);
  r->exec = mlirBlockGetArgument(entry, 0);
  r->options = mlirBlockGetArgument(entry, 1);
  r->result = mlirBlockGetArgument(entry, 2);
  MlirLocation loc = mlirOperationGetLocation(r->func);
  r->fail_block = mlirBlockCreate(1, &ptr, &loc);
  mlirRegionAppendOwnedBlock(r->step_region, r->fail_block);
  lb_builder fb = r->top;
  fb.block = r->fail_block;
  lb_return(&fb, mlirBlockGetArgument(r->fail_block, 0));
  r->at = r->top;
  r->at.block = entry;
}

// After the op defining the loss: an evaluation (srt_step_options
// forward_only) runs the optimizer op at once, which only reports the loss,
// and returns, so no backward runs.
static void branch_if_forward_only(lower_run *r, MlirOperation optimizer) {
  MlirType i64 = mlirIntegerTypeGet(r->ctx, 64), ptr = r->top.ptr;
  lb_builder b = r->top;
  b.loc = mlirOperationGetLocation(r->func);
  lb_func(&b, "srt_step_forward_only", mlirLLVMFunctionTypeGet(i64, 1, &ptr, false), NULL);
  MlirValue flag = lb_call(&r->at, "srt_step_forward_only", 1, &r->options, i64);
  MlirValue yes = lb_icmp_ne(&r->at, flag, lb_zero(&r->at, i64));
  MlirBlock eval = mlirBlockCreate(0, NULL, NULL), next = mlirBlockCreate(0, NULL, NULL);
  mlirRegionInsertOwnedBlockBefore(r->step_region, r->fail_block, eval);
  mlirRegionInsertOwnedBlockBefore(r->step_region, r->fail_block, next);
  lb_cond_br(&r->at, yes, eval, 0, NULL, next);
  r->at.block = eval;
  // Collectives still in flight complete before the evaluation returns.
  const lowering *wait = lr_lowering_named("srt_op_collective_wait");
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (!mlirValueIsNull(r->in_flight[i])) {
      r->slot = i;
      lr_lower_op(r, wait, optimizer, (MlirOperation){NULL});
    }
  lr_lower_op(r, lowering_of(optimizer), optimizer, (MlirOperation){NULL});
  lb_return(&r->at, lb_zero(&r->at, ptr));
  r->at.block = next;
}

static void end_step(lower_run *r) {
  r->at.loc = mlirOperationGetLocation(r->func);
  lb_return(&r->at, lb_zero(&r->at, r->at.ptr));
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

void lr_fail(lower_run *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(r->current, "lower-to-runtime", fmt, ap);
  va_end(ap);
  ++r->errors;
}

static MlirOperation find_func(MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f))
      return f;
  return (MlirOperation){NULL};
}

// Lowers every op of the step.
static void lower_ops(lower_run *r) {
  bool has_optimizer = false;
  // The optimizer op and the op defining its loss operand (the end of the
  // forward, where an evaluation stops).
  MlirOperation optimizer = {NULL}, loss_def = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_OPTIMIZER_STEP) {
      optimizer = op;
      MlirValue loss = mlirOperationGetOperand(op, 0);
      if (mlirValueIsAOpResult(loss))
        loss_def = mlirOpResultGetOwner(loss);
    }
  const lowering *fusion = lr_lowering_named("srt_op_add_rms_norm");
  MlirOperation fused = {NULL}; // a norm already lowered with its add
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body);
       !mlirOperationIsNull(op) && !r->errors; op = mlirOperationGetNextInBlock(op)) {
    r->current = op;
    nn_op_kind kind = nn_op_kind_of(op);
    if (op.ptr == fused.ptr)
      continue;
    MlirOperation next = mlirOperationGetNextInBlock(op);
    if (fusion && tp_buffer_fused_norm(&r->plan, r->cuda, op, next)) {
      lr_lower_op(r, fusion, op, next);
      fused = next;
      if (!mlirOperationIsNull(loss_def) && (op.ptr == loss_def.ptr || next.ptr == loss_def.ptr))
        branch_if_forward_only(r, optimizer);
      continue;
    }
    if (kind == NN_OP_OPTIMIZER_STEP && has_optimizer) {
      lr_fail(r, "more than one nn.optimizer_step: run nn-optimizer once");
      break;
    }
    has_optimizer |= kind == NN_OP_OPTIMIZER_STEP;
    // No call: the gradient already lives in its slot; annotations and the
    // return have no buffers of their own.
    if (kind == NN_OP_STORE_GRAD || tp_op_is(op, "func.return") ||
        tp_op_is(op, "shard.sharding"))
      continue;
    const lowering *l = lowering_of(op);
    if (lr_bucket_id(lr_collective_of(op)) >= 0) {
      if (!lr_lower_bucket_op(r, op))
        break;
      continue;
    }
    // A collective an nn.wait completes is started non-blocking.
    const lowering *start = l && kind == NN_OP_NONE ? lr_start_form(r, op) : NULL;
    if (start && !lr_take_slot(r, op))
      break;
    l = start ? start : l;
    int freed = kind == NN_OP_WAIT ? lr_free_slot(r, op) : 1;
    if (freed < 0)
      break;
    if (!freed)
      continue; // completed before its wait
    if (!l) {
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
      lr_fail(r, "no lowering for '%.*s'", (int)name.length, name.data);
      break;
    }
    lr_lower_op(r, l, op, (MlirOperation){NULL});
    if (op.ptr == loss_def.ptr && !r->errors)
      branch_if_forward_only(r, optimizer);
  }
  r->current = r->func;
  if (!r->errors && !has_optimizer)
    lr_fail(r, "the step has no nn.optimizer_step: run nn-autodiff and nn-optimizer first");
}

// Replaces the module's contents by the ops of `staging`.
static void replace_module(MlirOperation module, MlirBlock staging) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    mlirOperationDestroy(op);
    op = next;
  }
  for (MlirOperation op = mlirBlockGetFirstOperation(staging); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    mlirOperationRemoveFromParent(op);
    mlirBlockAppendOwnedOperation(body, op);
    op = next;
  }
}

static void free_run(lower_run *r) {
  tp_buffer_plan_free(&r->plan);
  tp_ptr_map_free(&r->early);
  free(r->declared);
}

// What the cuda backend has no kernel for: the Mamba2 mixer under context
// parallelism (runtime/cuda/ops_mamba2.c has no cp form). Refused once, at
// the first, before anything is planned.
static bool cuda_supports(lower_run *r) {
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind k = nn_op_kind_of(op);
    bool mamba2 = k == NN_OP_MAMBA2_MIXER || k == NN_OP_MAMBA2_MIXER_GRAD;
    int64_t cp = mamba2 ? nn_attr_int(op, "cp_size", 1) : 1;
    if (cp > 1) {
      r->current = op;
      lr_fail(r, "'%s' has no CUDA kernel under context parallelism (cp=%lld) yet: compile "
              "NemotronH with cp 1 on cuda, or for the cpu backend (shard-compile "
              "--backend=cpu)",
              nn_op_name(k), (long long)cp);
      return false;
    }
  }
  return true;
}

// Whether the step computes in bf16 (mixed precision): param-dtype, or the
// backend's default ("": bf16 on cuda, f32 on the cpu). False after an
// error (an unknown dtype, or f32 on cuda, whose kernels are bf16 only).
static bool param_dtype_of(lower_run *r, const char *dtype, bool *bf16) {
  if (strcmp(dtype, "") && strcmp(dtype, "f32") && strcmp(dtype, "bf16")) {
    lr_fail(r, "param-dtype '%s' is not one of 'f32', 'bf16'", dtype);
    return false;
  }
  if (r->cuda && !strcmp(dtype, "f32")) {
    lr_fail(r, "param-dtype f32: the cuda backend computes in bf16 only (fp32 master "
            "weights, gradients and moments): compile with param-dtype bf16, or backend=cpu");
    return false;
  }
  *bf16 = r->cuda || !strcmp(dtype, "bf16");
  return true;
}

// The memory figures of the plan (of a step of `accum` micro-batches) with
// the buckets' staging the runtime keeps per slot, checked against the
// device's bytes and written to `path` when given (memory_report.h).
static void report_memory(lower_run *r, int64_t accum, const char *path, int64_t device_bytes) {
  int64_t staging = 0;
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    staging += r->stage_bytes[i];
  tp_buffer_plan_figures(&r->plan, r->func, &r->mesh, &r->policy, accum, staging);
  if (!tp_memory_report_emit(&r->plan.mem, path, device_bytes, r->func, "lower-to-runtime"))
    ++r->errors;
}

static MlirLogicalResult run_lower(MlirOperation module, const tp_option_value *o) {
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  lower_run r = {.ctx = mlirOperationGetContext(module), .current = module};
  if (strcmp(o[kOptBackend].s, "cpu") != 0 && strcmp(o[kOptBackend].s, "cuda") != 0) {
    lr_fail(&r, "backend '%s' is not one of 'cpu', 'cuda'", o[kOptBackend].s);
    return mlirLogicalResultFailure();
  }
  r.cuda = !strcmp(o[kOptBackend].s, "cuda");
  r.func = find_func(module);
  if (mlirOperationIsNull(r.func) || !tp_read_grid(module, &r.mesh)) {
    lr_fail(&r, "expected a partitioned training step: run nn-autodiff, nn-optimizer, "
             "tp-plan and tp-partition first");
    return mlirLogicalResultFailure();
  }
  r.current = r.func;
  r.body = mlirRegionGetFirstBlock(mlirOperationGetRegion(r.func, 0));
  if (mlirBlockGetNumArguments(r.body) < 2 ||
      shape(mlirBlockGetArgument(r.body, 0)).rank != 2) {
    lr_fail(&r, "the step's first arguments must be input_ids and labels ([batch, seq] int64)");
    return mlirLogicalResultFailure();
  }
  bool bf16 = false;
  if (!param_dtype_of(&r, o[kOptParamDtype].s, &bf16))
    return mlirLogicalResultFailure();
  r.policy = (tp_buffer_policy){.mixed_precision = bf16,
                                 .backend = r.cuda ? "cuda" : "cpu",
                                 .offload = o[kOptCpuOffload].b,
                                 .keep_logits = o[kOptKeepLogits].b,
                                 .count_workspace = !r.cuda,
                                 .count_bf16_staging = bf16 && !r.cuda,
                                 .pass = "lower-to-runtime"};
  if (r.policy.offload && !r.cuda) {
    lr_fail(&r, "cpu-offload keeps the fp32 master weights and AdamW moments in host memory "
             "for a GPU backend; the cpu backend's arena is host memory already: compile "
             "with backend=cuda, or without cpu-offload");
    return mlirLogicalResultFailure();
  }
  if (r.cuda && !cuda_supports(&r))
    return mlirLogicalResultFailure();
  if (o[kOptAccumulate].i < 1 || o[kOptAccumulate].i > (1 << 20)) {
    lr_fail(&r, "accumulate-steps %lld must lie in [1, 2^20]", (long long)o[kOptAccumulate].i);
    return mlirLogicalResultFailure();
  }
  if (r.cuda && o[kOptAccumulate].i > 1) {
    lr_fail(&r, "gradient accumulation (accumulate-steps %lld) is not available on the cuda "
             "backend yet: compile with backend=cpu, or without micro-batches",
         (long long)o[kOptAccumulate].i);
    return mlirLogicalResultFailure();
  }
  if (!tp_buffer_plan_build(r.func, &r.mesh, &r.policy, &r.plan)) {
    free_run(&r);
    return mlirLogicalResultFailure();
  }
  MlirBlock staging = mlirBlockCreate(0, NULL, NULL);
  r.top = lb_create(r.ctx, staging, mlirOperationGetLocation(r.func));
  r.declared = calloc(kNumLowerings, sizeof *r.declared);
  begin_step(&r);
  lower_ops(&r);
  end_step(&r);
  // After the calls: the buckets' staging is known once slots are assigned.
  if (!r.errors)
    report_memory(&r, o[kOptAccumulate].i, o[kOptMemoryReport].s, o[kOptDeviceMemory].i);
  if (!r.errors) {
    nn_shape ids = shape(mlirBlockGetArgument(r.body, 0));
    // A graph of one cp rank (tp-plan's check_cp): [batch x cp, seq / cp].
    int64_t cp = nn_attr_int(module, "nn.cp_size", 1);
    MlirStringRef model = nn_attr_str(module, "nn.config_path");
    char model_path[1024];
    snprintf(model_path, sizeof model_path, "%.*s", (int)model.length, model.data);
    tp_program_desc d = {.model = model_path,
                         .config_json = nn_attr_str(module, "nn.config_json"),
                         .checkpoint_names = nn_attr_str(module, "nn.checkpoint_names"),
                         .tokenizer_json = nn_attr_str(module, "nn.tokenizer_json"),
                         .mesh = r.mesh,
                         .cp = cp,
                         .batch = ids.dims[0] * r.mesh.size[0] * o[kOptAccumulate].i / cp,
                         .accum = (int)o[kOptAccumulate].i,
                         .seq = ids.dims[1] * cp,
                         .vocab = r.plan.vocab,
                         .initializer_range = nn_attr_float(module, "nn.initializer_range", 0.02),
                         .flops_per_token = nn_attr_float(module, "nn.flops_per_token", 0),
                         .arena = r.plan.arena,
                         .persistent = r.plan.persistent,
                         .offload = r.policy.offload ? r.plan.offload : 0,
                         .ids_offset = r.plan.ids_offset,
                         .labels_offset = r.plan.labels_offset,
                         .position_ids_offset = r.plan.position_ids_offset,
                         .segment_ids_offset = r.plan.segment_ids_offset,
                         .params = r.plan.params,
                         .num_params = r.plan.num_params,
                         .step = "shard_step",
                         .keep_logits = r.policy.keep_logits,
                         .logits_offset = r.policy.keep_logits ? lr_find_value(&r, r.plan.logits) : -1,
                         .logits = r.policy.keep_logits ? shape(r.plan.logits) : (nn_shape){0},
                         .backend = r.cuda ? "srt_cuda_backend"
                                   : bf16 ? "srt_cpu_bf16_backend"
                                          : "srt_cpu_backend"};
    tp_emit_program_table(&r.top, &d);
  }
  bool ok = !r.errors;
  if (ok)
    replace_module(module, staging);
  mlirBlockDestroy(staging);
  free_run(&r);
  return ok ? mlirLogicalResultSuccess() : mlirLogicalResultFailure();
}

static const tp_option_info kOptions[] = {
    [kOptBackend] = {"backend", TP_OPTION_STRING, "cpu",
                     "cpu (fp32, libshardrt) or cuda (bf16 compute with fp32 master weights, "
                     "gradients and moments; libshardrt_cuda)"},
    [kOptKeepLogits] = {"keep-logits", TP_OPTION_BOOL, "false",
                        "keep the lm_head output live to the end of the step and record it in "
                        "the program table (for checks against a reference; costs its memory)"},
    [kOptMemoryReport] = {"memory-report", TP_OPTION_STRING, "",
                          "write the per-rank memory figures (persistent, temporaries, "
                          "scratch, total) to this JSON file and print them"},
    [kOptDeviceMemory] = {"device-memory", TP_OPTION_INT, "0",
                          "refuse a plan whose per-rank total exceeds this many bytes (0: no "
                          "limit)"},
    [kOptAccumulate] = {"accumulate-steps", TP_OPTION_INT, "1",
                        "micro-batches per optimizer step (gradient accumulation; the graph "
                        "is one micro-batch): recorded in the program table for the driver"},
    [kOptCpuOffload] = {"cpu-offload", TP_OPTION_BOOL, "false",
                        "cuda: keep the fp32 master weights and AdamW moments in pinned host "
                        "memory and step AdamW there (torch FSDP2's CPUOffloadPolicy); the "
                        "device holds the bf16 weights and fp32 gradients"},
    [kOptParamDtype] = {"param-dtype", TP_OPTION_STRING, "",
                        "f32 or bf16: the compute dtype of parameters and activations (bf16: "
                        "FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), "
                        "fp32 master weights, gradients and moments); empty: the backend's "
                        "default, f32 on cpu, bf16 on cuda (which has no f32)"},
};

const tp_pass_info tp_lower_to_runtime_pass = {
    .argument = "lower-to-runtime",
    .summary = "Lower a partitioned step to runtime calls with a static memory plan (LLVM dialect)",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = sizeof kOptions / sizeof *kOptions,
    .creates = mlirGetDialectHandle__llvm__,
    .run = run_lower,
};
