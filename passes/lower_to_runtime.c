// lower-to-runtime{backend=cpu|cuda}: turns a partitioned training step into
// an LLVM-dialect module that calls the runtime: a static memory plan (one
// arena per rank: a persistent region for parameters, gradients and AdamW
// moments, then temporaries placed by liveness), one `srt_op_*` call per op
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
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnostic.h"
#include "llvm_builder.h"
#include "memory_plan.h"
#include "memory_report.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "nn.h"
#include "pass.h"
#include "program_table.h"
#include "ptr_map.h"
#include "shard_ops.h"
#include "shardrt/kernels.h" // srt_rope_type
#include "shardrt/ops.h"
#include "shardrt/output.h"
#include "shardrt/program.h"
#include "shardrt/types.h" // SRT_MAX_PENDING

enum {
  kOptBackend,
  kOptKeepLogits,
  kOptMemoryReport,
  kOptDeviceMemory,
  kOptAccumulate,
  kOptCpuOffload
};

// Element types of arena buffers: kF32 and kBF16 are srt_op_dtype; kI64
// (input ids, labels) is never an op's dtype.
enum { kF32 = SRT_OP_F32, kBF16 = SRT_OP_BF16, kI64 = 2 };

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

typedef struct lower_run {
  MlirContext ctx;
  MlirOperation func, current;
  MlirBlock body;
  tp_mesh mesh;
  bool cuda;
  // --cpu-offload: the fp32 parameters and moments in a host-only prefix
  // [0, offload) of the persistent region (plan_params).
  bool cpu_offload;
  int64_t offload;
  // Buffers: each value's arena offset and element type (kF32 or kBF16;
  // always kF32 on the cpu), by MlirValue.ptr -> index.
  tp_ptr_map index;
  int64_t *offsets;
  char *dtypes;
  size_t nvalues, cap;
  tp_program_param *params;
  int num_params;
  int64_t ids_offset, labels_offset, persistent, arena;
  // The logits (the lm_head linear's result): kept live to the end of the
  // step when `keep_logits` (so a driver can read them after the step).
  bool keep_logits;
  MlirValue logits;
  // What is built: module-level ops (declarations, globals, the step) go to
  // `top`; the step's calls to `at`, whose block changes after each check.
  lb_builder top, at;
  MlirRegion step_region;
  MlirBlock fail_block;
  MlirValue exec, options, result;
  bool *declared; // per lowering: its function is declared
  int num_attention;
  // Non-blocking collectives in flight while the calls are emitted: each
  // slot's collective result (null: free), and the slot of the call being
  // packed (START_SLOT / WAIT_SLOT).
  MlirValue in_flight[SRT_MAX_PENDING];
  int64_t taken[SRT_MAX_PENDING], num_taken; // the order slots were taken in
  tp_ptr_map early; // collective results completed before their nn.wait
  int64_t slot;
  // The staging bytes the runtime keeps per slot for buckets (the largest
  // bucket that slot carried), and the buckets' tables emitted.
  int64_t stage_bytes[SRT_MAX_PENDING];
  int num_buckets;
  tp_memory_figures mem; // what --memory-report writes
  int errors;
} lower_run;

__attribute__((format(printf, 2, 3))) static void fail(lower_run *r, const char *fmt, ...);

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static size_t value_index(lower_run *r, MlirValue v) {
  intptr_t i;
  if (tp_ptr_map_get(&r->index, v.ptr, &i))
    return (size_t)i;
  fail(r, "internal error: a value has no buffer");
  return (size_t)-1;
}

static int64_t find_value(lower_run *r, MlirValue v) {
  size_t i = value_index(r, v);
  return i == (size_t)-1 ? 0 : r->offsets[i];
}

static int dtype_of(lower_run *r, MlirValue v) {
  size_t i = value_index(r, v);
  return i == (size_t)-1 ? kF32 : r->dtypes[i];
}

static void set_value(lower_run *r, MlirValue v, int64_t offset, int dtype) {
  if (r->nvalues == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 1024;
    r->offsets = realloc(r->offsets, r->cap * sizeof *r->offsets);
    r->dtypes = realloc(r->dtypes, r->cap);
  }
  tp_ptr_map_put(&r->index, v.ptr, (intptr_t)r->nvalues);
  r->dtypes[r->nvalues] = (char)dtype;
  r->offsets[r->nvalues++] = offset;
}

static nn_shape shape(MlirValue v) {
  nn_shape s = {0};
  nn_shape_of(mlirValueGetType(v), &s);
  return s;
}

// Bytes of a buffer of `type`; a float tensor stored as bf16 takes 2 bytes
// per element.
static int64_t bytes_as(MlirType type, int dtype) {
  nn_shape s;
  if (!nn_shape_of(type, &s))
    return 0;
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  if (mlirTypeIsAFloat(s.element))
    return n * (dtype == kBF16 ? 2 : (mlirFloatTypeGetWidth(s.element) + 7) / 8);
  return n * ((mlirIntegerTypeGetWidth(s.element) + 7) / 8);
}

static int64_t bytes_of(MlirType type) { return bytes_as(type, kF32); }

//===----------------------------------------------------------------------===//
// Memory plan
//===----------------------------------------------------------------------===//

static const tp_program_param *param_named(const lower_run *r, MlirAttribute name) {
  if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name))
    return NULL;
  MlirStringRef s = mlirStringAttrGetValue(name);
  for (int i = 0; i < r->num_params; ++i)
    if (mlirStringRefEqual(r->params[i].name, s))
      return &r->params[i];
  return NULL;
}

static int init_kind(MlirStringRef name) {
  // Hugging Face's _init_weights: biases zero; norm weights one, except
  // Gemma's (1 + w) norms (zero); everything else normal.
  bool norm = false, bias = name.length >= 5 && !memcmp(name.data + name.length - 5, ".bias", 5);
  for (size_t i = 0; i + 4 <= name.length; ++i)
    norm |= !memcmp(name.data + i, "norm", 4);
  return bias ? 1 : norm ? 2 : 0;
}

enum { kMaxParamUses = 16 };

// The uses of parameter `arg` by ops, through its FSDP gathers over dp (a
// shard.all_gather of the argument, and its nn.wait when it is
// non-blocking): at most kMaxParamUses, in use order.
static int param_uses(MlirValue arg, MlirOpOperand uses[kMaxParamUses]) {
  int n = 0;
  for (MlirOpOperand u = mlirValueGetFirstUse(arg); !mlirOpOperandIsNull(u) && n < kMaxParamUses;
       u = mlirOpOperandGetNextUse(u)) {
    MlirOperation owner = mlirOpOperandGetOwner(u);
    if (!tp_op_is(owner, "shard.all_gather")) {
      uses[n++] = u;
      continue;
    }
    MlirValue gathered = mlirOperationGetResult(owner, 0);
    MlirOpOperand first = mlirValueGetFirstUse(gathered);
    // A non-blocking gather (overlap-collectives): the uses of its nn.wait.
    if (!mlirOpOperandIsNull(first) &&
        nn_op_kind_of(mlirOpOperandGetOwner(first)) == NN_OP_WAIT)
      gathered = mlirOperationGetResult(mlirOpOperandGetOwner(first), 0);
    for (MlirOpOperand g = mlirValueGetFirstUse(gathered);
         !mlirOpOperandIsNull(g) && n < kMaxParamUses; g = mlirOpOperandGetNextUse(g))
      uses[n++] = g;
  }
  return n;
}

// The padding_idx of the nn.embedding that looks rows of `arg` up, or -1:
// transformers' _init_weights zeroes that row of a fresh nn.Embedding.
static int64_t padding_row(MlirValue arg) {
  MlirOpOperand uses[kMaxParamUses];
  for (int i = 0, n = param_uses(arg, uses); i < n; ++i) {
    MlirOpOperand u = uses[i];
    MlirOperation owner = mlirOpOperandGetOwner(u);
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(owner));
    if (mlirStringRefEqual(name, str("nn.embedding")) && mlirOpOperandGetOperandNumber(u) == 1)
      return nn_attr_int(owner, "padding_idx", -1);
  }
  return -1;
}

// The init of a Mamba2 mixer's A_log, D or dt_bias (its operands 5, 6, 4),
// by use rather than by name; -1 for any other parameter.
static int mamba2_init(MlirValue arg) {
  MlirOpOperand uses[kMaxParamUses];
  for (int i = 0, n = param_uses(arg, uses); i < n; ++i) {
    MlirOpOperand u = uses[i];
    if (nn_op_kind_of(mlirOpOperandGetOwner(u)) != NN_OP_MAMBA2_MIXER)
      continue;
    switch (mlirOpOperandGetOperandNumber(u)) {
    case 4: return SRT_INIT_DT_BIAS;
    case 5: return SRT_INIT_A_LOG;
    case 6: return SRT_INIT_ONES;
    default: return -1;
    }
  }
  return -1;
}

// Whether the first op using `arg` reads it as a Gemma (1 + w) norm weight.
static bool offset_norm_weight(MlirValue arg) {
  MlirOpOperand uses[kMaxParamUses];
  int n = param_uses(arg, uses);
  return n > 0 && nn_attr_float(mlirOpOperandGetOwner(uses[0]), "offset", 0) == 1.0;
}

// The parts a parameter's dim 0 is split over tp in, one by one
// (nn.tp_blocks, tp-partition's for a Mamba2 in_proj or conv1d): checked
// here, at compile time, as the runtime would check them at its first load:
// an i64 array of 1..SRT_MAX_TP_BLOCKS positive parts, each divisible by
// tp, summing to dim 0, on a Shard(0) over tp (and maybe over dp too: FSDP
// then splits the concatenated tp shard).
static void tp_blocks_of(lower_run *r, tp_program_param *p, MlirAttribute blocks) {
  p->num_tp_blocks = 0;
  if (mlirAttributeIsNull(blocks))
    return;
  intptr_t nb = mlirAttributeIsADenseI64Array(blocks) ? mlirDenseArrayGetNumElements(blocks) : 0;
  int64_t tp = r->mesh.size[1], sum = 0;
  bool ok = nb >= 1 && nb <= SRT_MAX_TP_BLOCKS && p->local.rank >= 1 &&
            p->layout.on[1].kind == TP_SHARD && p->layout.on[1].dim == 0;
  for (intptr_t b = 0; ok && b < nb; ++b) {
    int64_t v = mlirDenseI64ArrayGetElement(blocks, b);
    ok = v > 0 && v % tp == 0;
    sum += v;
    p->tp_blocks[b] = v;
  }
  if (!ok || sum != p->global[0]) {
    fail(r, "parameter '%.*s': nn.tp_blocks must be an array<i64> of 1 to %d positive parts, "
            "each divisible by the tp size %lld, summing to dim 0 (%lld), on a Shard(0) over tp",
         (int)p->name.length, p->name.data, SRT_MAX_TP_BLOCKS, (long long)tp,
         (long long)(p->local.rank >= 1 ? p->global[0] : 0));
    return;
  }
  p->num_tp_blocks = (int)nb;
}

// A parameter's layout from its nn.placements argument attribute (absent:
// replicated): one placement string per mesh axis.
static tp_layout placements_of(lower_run *r, const tp_program_param *p, MlirAttribute dict) {
  tp_layout layout = {{TP_R, TP_R}};
  MlirAttribute pl = mlirDictionaryAttrGetElementByName(dict, str("nn.placements"));
  if (mlirAttributeIsNull(pl))
    return layout;
  bool ok = mlirAttributeIsAArray(pl) && mlirArrayAttrGetNumElements(pl) == TP_MESH_AXES;
  for (int axis = 0; ok && axis < TP_MESH_AXES; ++axis) {
    MlirAttribute a = mlirArrayAttrGetElement(pl, axis);
    MlirStringRef s = mlirAttributeIsAString(a) ? mlirStringAttrGetValue(a) : str("");
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)s.length, s.data);
    ok = s.length < sizeof buf && tp_placement_parse(buf, &layout.on[axis]);
  }
  if (!ok)
    fail(r, "parameter '%.*s': nn.placements must be [dp, tp] placement strings",
         (int)p->name.length, p->name.data);
  return layout;
}

// Where plan_params puts the next buffer of each kind. Without offload one
// cursor walks everything: each parameter's fp32 weights, gradient, m and v
// side by side (then its bf16 copy on cuda), input ids and labels where
// they come. With offload: [weights, m, v] of every parameter first (the
// host-only prefix), then every gradient, every bf16 copy, the inputs:
// each kind contiguous, so the optimizer moves gradients to the host and
// bf16 copies back in few copies.
typedef struct persistent_cursors {
  int64_t master, grad, compute, inputs;
} persistent_cursors;

// The bytes of a parameter argument's fp32 buffer and of its bf16 copy.
static int64_t param_bytes(MlirValue arg) { return tp_align(bytes_of(mlirValueGetType(arg))); }
static int64_t copy_bytes(MlirValue arg) {
  return tp_align(bytes_as(mlirValueGetType(arg), kBF16));
}

static persistent_cursors offload_cursors(lower_run *r, MlirAttribute all) {
  int64_t master = 0, grads = 0, copies = 0;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(r->body); ++i) {
    MlirAttribute dict = mlirAttributeIsNull(all) ? (MlirAttribute){NULL}
                                                  : mlirArrayAttrGetElement(all, i);
    if (mlirAttributeIsNull(dict) ||
        mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, str(NN_PARAM_ATTR))))
      continue;
    MlirValue arg = mlirBlockGetArgument(r->body, i);
    master += 3 * param_bytes(arg);
    grads += param_bytes(arg);
    copies += copy_bytes(arg);
  }
  r->offload = master;
  return (persistent_cursors){0, master, master + grads, master + grads + copies};
}

// Takes `bytes` at cursor *at.
static int64_t take(int64_t *at, int64_t bytes) {
  int64_t offset = *at;
  *at += bytes;
  return offset;
}

static void plan_params(lower_run *r) {
  intptr_t nargs = mlirBlockGetNumArguments(r->body);
  MlirAttribute all = mlirOperationGetAttributeByName(r->func, str("arg_attrs"));
  r->params = calloc((size_t)nargs + 1, sizeof *r->params);
  persistent_cursors c = {0};
  if (r->cpu_offload)
    c = offload_cursors(r, all);
  int64_t *grad_at = r->cpu_offload ? &c.grad : &c.master;
  int64_t *compute_at = r->cpu_offload ? &c.compute : &c.master;
  int64_t *inputs_at = r->cpu_offload ? &c.inputs : &c.master;
  int ints = 0;
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirValue arg = mlirBlockGetArgument(r->body, i);
    MlirAttribute dict = mlirAttributeIsNull(all) ? (MlirAttribute){NULL}
                                                  : mlirArrayAttrGetElement(all, i);
    MlirAttribute name = mlirAttributeIsNull(dict) ? (MlirAttribute){NULL}
                             : mlirDictionaryAttrGetElementByName(dict, str(NN_PARAM_ATTR));
    int64_t bytes = param_bytes(arg);
    if (mlirAttributeIsNull(name)) {
      // input_ids, then labels (int64 [local_batch, seq]).
      int64_t at = take(inputs_at, bytes);
      if (ints == 0)
        r->ids_offset = at;
      else if (ints == 1)
        r->labels_offset = at;
      else
        fail(r, "argument %ld is neither a parameter nor input_ids/labels", (long)i);
      ++ints;
      set_value(r, arg, at, kI64);
      r->mem.inputs += bytes;
      continue;
    }
    if (!mlirAttributeIsAString(name)) {
      fail(r, "argument %ld: nn.param must be a string (the Hugging Face tensor name)",
           (long)i);
      return;
    }
    tp_program_param *p = &r->params[r->num_params++];
    p->name = mlirStringAttrGetValue(name);
    if (!nn_shape_of(mlirValueGetType(arg), &p->local)) {
      fail(r, "parameter '%.*s' must be a statically shaped ranked tensor",
           (int)p->name.length, p->name.data);
      return;
    }
    if (!mlirTypeIsAF32(p->local.element))
      fail(r, "parameter '%.*s' must be f32 (master weights are fp32 on every backend)",
           (int)p->name.length, p->name.data);
    p->init = mamba2_init(arg) >= 0 ? mamba2_init(arg) : init_kind(p->name);
    p->zero_row = padding_row(arg);
    if (p->init == 2) {
      // Gemma's norms compute (1 + w): they start at zero.
      if (offset_norm_weight(arg))
        p->init = 1;
    }
    MlirAttribute gshape = mlirDictionaryAttrGetElementByName(dict, str("nn.global_shape"));
    for (int d = 0; d < p->local.rank; ++d)
      p->global[d] = mlirAttributeIsNull(gshape) ? p->local.dims[d]
                                                 : mlirDenseI64ArrayGetElement(gshape, d);
    p->layout = placements_of(r, p, dict);
    tp_blocks_of(r, p, mlirDictionaryAttrGetElementByName(dict, str("nn.tp_blocks")));
    p->offset = take(&c.master, bytes);
    p->grad = take(grad_at, bytes);
    p->m = take(&c.master, bytes);
    p->v = take(&c.master, bytes);
    r->mem.params += bytes;
    r->mem.grads += bytes;
    r->mem.moments += 2 * bytes;
    p->compute = -1;
    if (r->cuda) { // the ops read the bf16 copy
      p->compute = take(compute_at, copy_bytes(arg));
      r->mem.compute_copies += copy_bytes(arg);
    }
    set_value(r, arg, r->cuda ? p->compute : p->offset, r->cuda ? kBF16 : kF32);
  }
  r->persistent = r->cpu_offload ? c.inputs : c.master;
}

// The result of the forward nn.linear whose nn.module is "lm_head", or null.
static MlirValue find_logits(lower_run *r) {
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_LINEAR && mlirStringRefEqual(nn_module_of(op), str("lm_head")))
      return mlirOperationGetResult(op, 0);
  return (MlirValue){NULL};
}

// The buffer dtype of `op`'s result `i`: always fp32 on the cpu. On cuda:
// fp32 for parameter gradients, loss statistics, rotary tables and
// attention's lse; an add or a collective keeps its first operand's; bf16
// for everything else.
static int result_dtype(lower_run *r, MlirOperation op, intptr_t i) {
  if (!r->cuda)
    return kF32;
  switch (nn_op_kind_of(op)) {
  case NN_OP_ATTENTION:
    return i == 1 ? kF32 : kBF16;
  case NN_OP_EMBEDDING_GRAD:
  case NN_OP_LINEAR_GRAD_WEIGHT:
  case NN_OP_LINEAR_GRAD_BIAS:
  case NN_OP_RMS_NORM_GRAD_WEIGHT:
  case NN_OP_CROSS_ENTROPY:
  case NN_OP_CE_LOGIT_MAX:
  case NN_OP_CE_PARTIAL_SUMS:
  case NN_OP_CE_LOSS_SUM:
  case NN_OP_CE_MEAN:
  case NN_OP_ROTARY_EMBEDDING:
    return kF32;
  case NN_OP_ADD:
  case NN_OP_WAIT:
    return dtype_of(r, mlirOperationGetOperand(op, 0));
  case NN_OP_NONE: // collectives (and shard.sharding, which has no buffer)
    if (mlirOperationGetNumOperands(op) == 0)
      return kF32;
    if (dtype_of(r, mlirOperationGetOperand(op, 0)) == kI64) {
      r->current = op;
      fail(r, "collectives of integer tensors (input ids, labels) are not supported on the "
              "cuda backend");
    }
    return dtype_of(r, mlirOperationGetOperand(op, 0));
  default:
    return kBF16;
  }
}

// Whether `norm` is an nn.rms_norm of the bf16 result of `add`, the nn.add
// just before it: on cuda the two run as one call (srt_op_add_rms_norm) at
// the add, so the norm's result is defined there too.
static bool add_feeds_norm(lower_run *r, MlirOperation add, MlirOperation norm) {
  if (!r->cuda || mlirOperationIsNull(add) || mlirOperationIsNull(norm) ||
      nn_op_kind_of(add) != NN_OP_ADD || nn_op_kind_of(norm) != NN_OP_RMS_NORM)
    return false;
  MlirValue sum = mlirOperationGetResult(add, 0);
  // Both operands bf16: an add of mixed dtypes is lowered (and refused) alone.
  return mlirOperationGetOperand(norm, 0).ptr == sum.ptr &&
         dtype_of(r, mlirOperationGetOperand(add, 0)) == kBF16 &&
         dtype_of(r, mlirOperationGetOperand(add, 1)) == kBF16;
}

// The most temporary bytes live at one op (of `nops`), and what they are:
// by the phase of the op that made each.
static void live_peak(lower_run *r, const tp_interval *iv, const int64_t *fixed,
                      const char *phase, const MlirOperation *owner, int n, int nops) {
  int64_t *delta = calloc((size_t)nops + 2, sizeof *delta);
  int64_t *gathered = calloc((size_t)nops + 2, sizeof *gathered);
  for (int j = 0; j < n; ++j)
    if (!fixed[j] && iv[j].first >= 0 && iv[j].last < nops + 1) {
      int64_t *d = phase[j] == 3 ? gathered : delta;
      d[iv[j].first] += iv[j].bytes;
      d[iv[j].last + 1] -= iv[j].bytes;
    }
  int64_t live = 0, best = 0, live_gathered = 0;
  int at = -1;
  r->mem.gathered_max = 0;
  for (int i = 0; i <= nops; ++i) {
    live_gathered += gathered[i];
    live += delta[i] + gathered[i];
    if (live > best) {
      best = live;
      at = i;
    }
    if (live_gathered > r->mem.gathered_max)
      r->mem.gathered_max = live_gathered;
  }
  free(delta);
  free(gathered);
  r->mem.peak_live = best;
  int64_t by[4] = {0, 0, 0, 0};
  for (int j = 0; at >= 0 && j < n; ++j)
    if (!fixed[j] && iv[j].first <= at && at <= iv[j].last)
      by[(int)phase[j]] += iv[j].bytes;
  r->mem.peak_forward = by[0];
  r->mem.peak_backward = by[1];
  r->mem.peak_optimizer = by[2];
  r->mem.peak_gathered = by[3];
  for (int j = 0; at >= 0 && j < n; ++j)
    if (iv[j].first == at || (j + 1 == n)) { // the op defined at the peak
      MlirStringRef m = nn_module_of(owner[j]);
      snprintf(r->mem.peak_module, sizeof r->mem.peak_module, "%.*s", (int)m.length, m.data);
      break;
    }
}

// A gradient is summed in its parameter's slot: over uses (nn.add chains: a
// tied embedding's lookup and lm_head gradients) and over ranks (the
// all-reduce of a Partial gradient over dp or tp, and the nn.wait of a
// non-blocking one). The sum's first operand,
// when only the sum reads it and it is an fp32 temporary of the same size,
// lives in the slot too (the sum runs in place, which the add kernels, MPI
// and NCCL all allow), and so on down the chain. The addends and the
// reduced copies then take no temporary memory while the backward runs on.
static void sum_in_place(lower_run *r, int64_t *fixed, const MlirValue *vals, size_t first,
                         int n) {
  for (int j = 0; j < n; ++j) {
    if (!fixed[j])
      continue;
    int at = j;
    for (int depth = 0; depth < 64 && mlirValueIsAOpResult(vals[at]); ++depth) {
      MlirOperation add = mlirOpResultGetOwner(vals[at]);
      if (nn_op_kind_of(add) != NN_OP_ADD && nn_op_kind_of(add) != NN_OP_WAIT &&
          !tp_op_is(add, "shard.all_reduce"))
        break;
      MlirValue a = mlirOperationGetOperand(add, 0);
      intptr_t k;
      MlirOpOperand use = mlirValueGetFirstUse(a);
      if (!tp_ptr_map_get(&r->index, a.ptr, &k) || (size_t)k < first ||
          (size_t)k >= first + (size_t)n || mlirOpOperandIsNull(use) ||
          !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)) || r->dtypes[k] != kF32 ||
          r->dtypes[first + (size_t)at] != kF32 || fixed[(size_t)k - first] ||
          bytes_of(mlirValueGetType(a)) != bytes_of(mlirValueGetType(vals[at])))
        break;
      fixed[(size_t)k - first] = fixed[j];
      at = (int)((size_t)k - first);
    }
  }
}

// The logits' gradient takes the logits' buffer when the gradient op is
// their last reader (the cross-entropy gradient kernels read each element
// before writing it: in place is allowed): one [B, S, V] buffer fewer at the
// loss, the largest tensor of most steps. The logits' interval grows to
// cover the gradient's; the gradient is planned with it.
static void logits_grad_in_place(lower_run *r, tp_interval *iv, const int64_t *fixed, int *alias,
                                 const MlirValue *vals, size_t first, int n) {
  for (int j = 0; j < n; ++j) {
    if (!mlirValueIsAOpResult(vals[j]))
      continue;
    MlirOperation op = mlirOpResultGetOwner(vals[j]);
    nn_op_kind kind = nn_op_kind_of(op);
    if ((kind != NN_OP_CROSS_ENTROPY_GRAD && kind != NN_OP_CE_LOGITS_GRAD) ||
        mlirOperationGetNumResults(op) != 1)
      continue;
    intptr_t k;
    if (!tp_ptr_map_get(&r->index, mlirOperationGetOperand(op, 0).ptr, &k) ||
        (size_t)k < first || (size_t)k >= first + (size_t)n)
      continue;
    int l = (int)((size_t)k - first);
    if (fixed[j] || fixed[l] || alias[l] || iv[l].last != iv[j].first ||
        iv[l].bytes != iv[j].bytes || r->dtypes[k] != r->dtypes[first + (size_t)j])
      continue;
    alias[j] = l + 1;
    if (iv[j].last > iv[l].last)
      iv[l].last = iv[j].last;
  }
}

// A non-blocking collective's nn.wait gives back the collective's own
// buffer: the wait's result takes it (in a gradient slot when the wait's
// result is stored there: sum_in_place fixed both) and the collective's
// interval grows over the wait's readers.
static void waits_in_place(lower_run *r, tp_interval *iv, const int64_t *fixed, int *alias,
                           const MlirValue *vals, size_t first, int n) {
  for (int j = 0; j < n; ++j) {
    if (!mlirValueIsAOpResult(vals[j]) ||
        nn_op_kind_of(mlirOpResultGetOwner(vals[j])) != NN_OP_WAIT)
      continue;
    intptr_t k;
    MlirValue in = mlirOperationGetOperand(mlirOpResultGetOwner(vals[j]), 0);
    if (!tp_ptr_map_get(&r->index, in.ptr, &k) || (size_t)k < first ||
        (size_t)k >= first + (size_t)n) {
      r->current = mlirOpResultGetOwner(vals[j]);
      fail(r, "nn.wait of a value no collective of the step defines");
      continue;
    }
    int l = (int)((size_t)k - first);
    if (fixed[j] != fixed[l]) {
      r->current = mlirOpResultGetOwner(vals[j]);
      fail(r, "internal error: an nn.wait and its collective in different gradient slots");
      continue;
    }
    if (fixed[j])
      continue;
    alias[j] = l + 1;
    if (iv[j].last > iv[l].last)
      iv[l].last = iv[j].last;
  }
}

// The op defining operand 0 of nn.wait `op` (a collective), or null.
static MlirOperation waited_collective(MlirOperation op) {
  MlirValue v = mlirOperationGetOperand(op, 0);
  return mlirValueIsAOpResult(v) ? mlirOpResultGetOwner(v) : (MlirOperation){NULL};
}

// Temporaries: each op result gets an interval [definition, last use];
// a value handed to nn.store_grad lives in its parameter's gradient slot;
// with keep_logits, the logits live to the end of the step. The operands of
// a non-blocking collective live to its nn.wait (the transfer reads them
// until then), and the wait's result is the collective's buffer.
static void plan_temporaries(lower_run *r) {
  int nops = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    nops += (int)mlirOperationGetNumResults(op);
  tp_interval *iv = calloc((size_t)nops + 1, sizeof *iv);
  int64_t *fixed = calloc((size_t)nops + 1, sizeof *fixed);
  // 0 forward, 1 backward, 2 optimizer, 3 a parameter gathered over dp
  char *phase = calloc((size_t)nops + 1, 1);
  MlirValue *vals = calloc((size_t)nops + 1, sizeof *vals);
  MlirOperation *owner = calloc((size_t)nops + 1, sizeof *owner);
  bool backward_seen = false;
  size_t first = r->nvalues;
  int n = 0, index = 0;
  MlirOperation prev = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       prev = op, op = mlirOperationGetNextInBlock(op), ++index) {
    // A fused norm writes its result while the add reads its operands: the
    // result must not share their memory.
    int defined = add_feeds_norm(r, prev, op) ? index - 1 : index;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
      intptr_t k;
      if (!tp_ptr_map_get(&r->index, mlirOperationGetOperand(op, i).ptr, &k) ||
          (size_t)k < first)
        continue; // an argument: persistent
      int j = (int)((size_t)k - first);
      iv[j].last = index;
      if (nn_op_kind_of(op) == NN_OP_STORE_GRAD) {
        const tp_program_param *p =
            param_named(r, mlirOperationGetAttributeByName(op, str("nn.grad_of")));
        if (!p) {
          r->current = op;
          fail(r, "nn.store_grad: nn.grad_of does not name a parameter of the step");
        }
        fixed[j] = p ? p->grad + 1 : 0; // +1: 0 means "not fixed"
        if (r->dtypes[k] != kF32) {
          r->current = op;
          fail(r, "internal error: a gradient stored to its parameter is not fp32");
        }
      }
    }
    MlirOperation started = nn_op_kind_of(op) == NN_OP_WAIT ? waited_collective(op)
                                                            : (MlirOperation){NULL};
    for (intptr_t i = 0; !mlirOperationIsNull(started) &&
                         i < mlirOperationGetNumOperands(started); ++i) {
      intptr_t k;
      if (tp_ptr_map_get(&r->index, mlirOperationGetOperand(started, i).ptr, &k) &&
          (size_t)k >= first)
        iv[(size_t)k - first].last = index;
    }
    nn_op_phase ph = nn_op_phase_of(nn_op_kind_of(op));
    backward_seen |= ph == NN_PHASE_BACKWARD;
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
      MlirValue v = mlirOperationGetResult(op, i);
      int dtype = result_dtype(r, op, i);
      // A collective (no nn phase) counts with the ops around it, but for
      // the FSDP gather of a parameter (an argument).
      bool gathered = tp_op_is(op, "shard.all_gather") &&
                      mlirValueIsABlockArgument(mlirOperationGetOperand(op, 0));
      phase[n] = gathered ? 3
                 : ph == NN_PHASE_OPTIMIZER ? 2
                 : ph == NN_PHASE_BACKWARD || backward_seen ? 1 : 0;
      owner[n] = op;
      vals[n] = v;
      iv[n] = (tp_interval){defined, index, bytes_as(mlirValueGetType(v), dtype), 0};
      // Defined before later ops look its dtype up (offset set below).
      set_value(r, v, -1, dtype);
      ++n;
    }
  }
  intptr_t logits;
  if (r->keep_logits && tp_ptr_map_get(&r->index, r->logits.ptr, &logits))
    iv[(size_t)logits - first].last = index;
  sum_in_place(r, fixed, vals, first, n);
  int *alias = calloc((size_t)nops + 1, sizeof *alias);
  logits_grad_in_place(r, iv, fixed, alias, vals, first, n);
  waits_in_place(r, iv, fixed, alias, vals, first, n);
  // Gradient slots are fixed: plan the rest around nothing else (they are
  // in the persistent region, below `persistent`); an in-place result takes
  // its operand's buffer.
  tp_interval *free_iv = calloc((size_t)n + 1, sizeof *free_iv);
  int64_t *skip = calloc((size_t)nops + 1, sizeof *skip);
  int nfree = 0;
  for (int j = 0; j < n; ++j) {
    skip[j] = fixed[j] || alias[j];
    if (!skip[j])
      free_iv[nfree++] = iv[j];
  }
  r->arena = tp_plan_memory(free_iv, nfree, r->persistent);
  for (int j = 0, k = 0; j < n; ++j)
    r->offsets[first + (size_t)j] = fixed[j] ? fixed[j] - 1 : alias[j] ? -1 : free_iv[k++].offset;
  for (int j = 0; j < n; ++j)
    if (alias[j])
      r->offsets[first + (size_t)j] = r->offsets[first + (size_t)alias[j] - 1];
  live_peak(r, iv, skip, phase, owner, n, index);
  free(alias);
  free(skip);
  free(iv);
  free(fixed);
  free(free_iv);
  free(phase);
  free(owner);
  free(vals);
}

//===----------------------------------------------------------------------===//
// Argument sources of the op table (shardrt/ops.def)
//===----------------------------------------------------------------------===//

enum { kMaxArgs = 40 };

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

// One call being packed: the op it lowers (and the second op of a fusion),
// and its arguments so far (the exec first).
typedef struct lower_call {
  lower_run *r;
  MlirOperation op, fused;
  int n;
  MlirValue args[kMaxArgs];
} lower_call;

static void push(lower_call *c, MlirValue v) {
  if (c->n == kMaxArgs) {
    fail(c->r, "internal error: a runtime call with more than %d arguments", kMaxArgs);
    return;
  }
  c->args[c->n++] = v;
}

static void arg_i(lower_call *c, int64_t v) {
  push(c, lb_const_int(&c->r->at, c->r->at.i64, v));
}
static void arg_f(lower_call *c, double v) { push(c, lb_const_f64(&c->r->at, v)); }
// A buffer argument: the value's arena offset, or -1 for a null value.
static void arg_buf(lower_call *c, MlirValue v) {
  arg_i(c, mlirValueIsNull(v) ? -1 : find_value(c->r, v));
}

static MlirValue in_of(MlirOperation op, int i) {
  return i < mlirOperationGetNumOperands(op) ? mlirOperationGetOperand(op, i)
                                             : (MlirValue){NULL};
}

static int64_t numel(MlirValue v) {
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
  return f ? numel(v) / f : 0;
}

static int64_t attr_is(MlirOperation op, const char *name, const char *value) {
  return mlirStringRefEqual(nn_attr_str(op, name), str(value));
}

// srt_rope_type of the op's "rope_type" (nn-verify allows only these).
static int64_t rope_type(MlirOperation op) {
  return attr_is(op, "rope_type", "llama3")   ? SRT_ROPE_LLAMA3
         : attr_is(op, "rope_type", "linear") ? SRT_ROPE_LINEAR
                                              : SRT_ROPE_DEFAULT;
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
    fail(c->r, "collectives on tensors of rank %d are not supported (at most 4)", s.rank);
  return s.rank;
}

// A collective's one mesh axis.
static int64_t grid_axis(lower_call *c) {
  MlirAttribute axes = mlirOperationGetAttributeByName(c->op, str("grid_axes"));
  if (mlirAttributeIsNull(axes) || !mlirAttributeIsADenseI16Array(axes) ||
      mlirDenseArrayGetNumElements(axes) != 1) {
    fail(c->r, "a collective over other than one grid axis is not supported");
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
#define OUT(i) mlirOperationGetResult(c->op, i)
#define NUM_IN mlirOperationGetNumOperands(c->op)
#define NUMEL(v) numel(v)
#define ROWS(v) rows(v)
#define LAST(v) last_dim(v)
#define DIM(v, d) dim(v, d)
#define DIM_OR_1(v, d) dim(v, d)
#define RANK4(v) rank4(c, v)
#define DTYPE(v) op_dtype(c, v)
#define ATTR_I(name, fallback) nn_attr_int(c->op, name, fallback)
#define ATTR_F(name, fallback) nn_attr_float(c->op, name, fallback)
#define ATTR_IS(name, value) attr_is(c->op, name, value)
#define ATTR_ROPE_TYPE rope_type(c->op)
#define NORM_GROUP norm_group(c->op)
#define GRID_AXIS grid_axis(c)
#define IS_MAX is_max(c)
#define START_SLOT c->r->slot
#define WAIT_SLOT c->r->slot
#define BUCKET_KIND bucket_kind(c->op)
#define FUSED_IN(i) in_of(c->fused, i)
#define FUSED_OUT(i) mlirOperationGetResult(c->fused, i)
#define FUSED_ATTR_F(name, fallback) nn_attr_float(c->fused, name, fallback)
#define FUSED_NORM_GROUP norm_group(c->fused)

// The dtype argument of an op on `v`: fp32 or bf16 (no op computes on the
// int64 input ids or labels).
static int64_t op_dtype(lower_call *c, MlirValue v) {
  int dtype = dtype_of(c->r, v);
  if (dtype == kI64)
    fail(c->r, "an add or a collective of integer tensors (input ids, labels) is not "
               "supported");
  return dtype;
}

static void arg_attention(lower_call *c);
static void arg_bucket(lower_call *c);
static int64_t bucket_kind(MlirOperation op);
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
#define PACK_BUCKET(name, src) arg_bucket(c);
#define PACK_PROGRAM(name, src) arg_program_ptr(c, 0);
#define PACK_OPTIONS(name, src) arg_program_ptr(c, 1);
#define PACK_RESULT(name, src) arg_program_ptr(c, 2);
#define PACK_REQUIRE(cond, msg)                                                          \
  if (!(cond)) {                                                                         \
    fail(c->r, "%s", msg);                                                               \
    return;                                                                              \
  }
#define PACK_END(name, src)

#define SRT_OP(name, source, check, args)                                                \
  static void pack_##name(lower_call *c) { PACK(args) }
#include "shardrt/ops.def"

// One lowering per runtime op: its function, the op it lowers, its packing.
typedef struct lowering {
  const char *fn, *source;
  void (*pack)(lower_call *c);
} lowering;

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
static const lowering *lowering_named(const char *fn) {
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
                {false, ATTR_I("nn.global_num_heads", heads), 0}};
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
      fail(r, "internal error: attention config field %d has the wrong type", (int)i);
    MlirValue v = values[i].is_f64 ? lb_const_f64(&b, values[i].f)
                                   : lb_const_int(&b, b.i64, values[i].i);
    agg = lb_insert(&b, agg, v, 1, &i);
  }
  lb_return(&b, agg);
  push(c, lb_address_of(&r->at, name));
}

// The step's program table (0), options (1) or result (2).
static void arg_program_ptr(lower_call *c, int which) {
  lower_run *r = c->r;
  push(c, which == 0 ? lb_address_of(&r->at, "shard_program")
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
static void lower_op(lower_run *r, const lowering *l, MlirOperation op, MlirOperation fused) {
  r->at.loc = mlirOperationGetLocation(op);
  lower_call c = {.r = r, .op = op, .fused = fused};
  push(&c, r->exec);
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
  const lowering *wait = lowering_named("srt_op_collective_wait");
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (!mlirValueIsNull(r->in_flight[i])) {
      r->slot = i;
      lower_op(r, wait, optimizer, (MlirOperation){NULL});
    }
  lower_op(r, lowering_of(optimizer), optimizer, (MlirOperation){NULL});
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

static void fail(lower_run *r, const char *fmt, ...) {
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

// The ops the cuda backend has no kernel for (the Mamba2 mixer): refused
// once, at the first, before anything is planned.
static bool cuda_supports(lower_run *r) {
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind k = nn_op_kind_of(op);
    if (k == NN_OP_MAMBA2_MIXER || k == NN_OP_MAMBA2_MIXER_GRAD) {
      r->current = op;
      fail(r, "'%s' has no CUDA kernel yet: compile NemotronH for the cpu backend "
              "(shard-compile --backend=cpu)",
           nn_op_name(k));
      return false;
    }
  }
  return true;
}

// Checks the keep-logits request: an lm_head output that one rank's buffer
// holds whole.
static bool check_keep_logits(lower_run *r) {
  if (r->cuda) {
    fail(r, "keep-logits is only available on the cpu backend (the cuda backend keeps "
            "logits in bf16 on the device)");
    return false;
  }
  r->logits = find_logits(r);
  if (mlirValueIsNull(r->logits) || shape(r->logits).rank != 3) {
    fail(r, "keep-logits: the step has no nn.linear with nn.module \"lm_head\" and a "
            "[batch, seq, vocab] result");
    return false;
  }
  for (MlirOpOperand u = mlirValueGetFirstUse(r->logits); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u))
    if (tp_op_is(mlirOpOperandGetOwner(u), "shard.all_reduce")) {
      fail(r, "keep-logits: the lm_head output is Partial (all-reduced afterwards), so no "
              "rank's buffer holds its logits");
      return false;
    }
  return true;
}

// The non-blocking form of collective `op` when its result's one reader is
// an nn.wait (overlap-collectives made it so), else NULL.
static const lowering *start_form(lower_run *r, MlirOperation op) {
  if (mlirOperationGetNumResults(op) != 1)
    return NULL;
  MlirOpOperand u = mlirValueGetFirstUse(mlirOperationGetResult(op, 0));
  if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u)) ||
      nn_op_kind_of(mlirOpOperandGetOwner(u)) != NN_OP_WAIT)
    return NULL;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  char fn[64];
  const lowering *l = NULL;
  if (name.length > 6 && !memcmp(name.data, "shard.", 6) &&
      snprintf(fn, sizeof fn, "srt_op_%.*s_start", (int)name.length - 6, name.data + 6) <
          (int)sizeof fn)
    l = lowering_named(fn);
  if (!l)
    fail(r, "nn.wait of '%.*s', which has no non-blocking form (all_reduce, all_gather and "
            "reduce_scatter have)",
         (int)name.length, name.data);
  return l;
}

static int64_t bucket_id(MlirOperation op);

// Completes the collective in flight longest, here (before `at`), so that
// its slot can be taken again: completing early is always safe (its
// buffers are live from its start to its nn.wait), and its nn.wait then
// lowers to nothing. Returns the slot.
static int complete_oldest(lower_run *r, MlirOperation at) {
  int oldest = 0;
  for (int i = 1; i < SRT_MAX_PENDING; ++i)
    if (r->taken[i] < r->taken[oldest])
      oldest = i;
  MlirOperation c = mlirOpResultGetOwner(r->in_flight[oldest]);
  bool bucket = bucket_id(c) >= 0;
  r->slot = oldest;
  lower_op(r, lowering_named(bucket ? "srt_op_bucket_wait" : "srt_op_collective_wait"),
           bucket ? c : at, (MlirOperation){NULL});
  tp_ptr_map_put(&r->early, r->in_flight[oldest].ptr, 1);
  r->in_flight[oldest] = (MlirValue){NULL};
  return oldest;
}

// Takes an in-flight slot for the result of `op` into r->slot: a free one,
// else the oldest's once complete_oldest has completed it.
static bool take_slot(lower_run *r, MlirOperation op) {
  int slot = -1;
  for (int i = 0; i < SRT_MAX_PENDING && slot < 0; ++i)
    if (mlirValueIsNull(r->in_flight[i]))
      slot = i;
  if (slot < 0)
    slot = complete_oldest(r, op);
  r->in_flight[slot] = mlirOperationGetResult(op, 0);
  r->taken[slot] = r->num_taken++;
  r->slot = slot;
  return !r->errors;
}

// Frees the slot of the collective nn.wait `op` waits for into r->slot:
// 1, or 0 when complete_oldest completed it already (no call), or -1 (an
// error) when no collective before it started it.
static int free_slot(lower_run *r, MlirOperation op) {
  MlirValue v = mlirOperationGetOperand(op, 0);
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (r->in_flight[i].ptr == v.ptr) {
      r->in_flight[i] = (MlirValue){NULL};
      r->slot = i;
      return 1;
    }
  intptr_t done;
  if (tp_ptr_map_get(&r->early, v.ptr, &done))
    return 0;
  fail(r, "nn.wait of a value no non-blocking collective before it defines (a collective "
          "is started non-blocking only when its one reader is a single nn.wait)");
  return -1;
}

//===----------------------------------------------------------------------===//
// Buckets (overlap-collectives' nn.bucket)
//===----------------------------------------------------------------------===//

enum { kMaxBucket = SRT_MAX_BUCKET };

static int64_t bucket_id(MlirOperation op) { return nn_attr_int(op, "nn.bucket", -1); }


// The collective an op stands for: an nn.wait's operand's definition, or
// the op itself.
static MlirOperation collective_of(MlirOperation op) {
  if (nn_op_kind_of(op) == NN_OP_WAIT) {
    MlirOperation c = waited_collective(op);
    return mlirOperationIsNull(c) ? op : c;
  }
  return op;
}

// The members of the bucket of collective `op`, in block order (at most
// kMaxBucket; more fail).
static int bucket_members(lower_run *r, MlirOperation op, MlirOperation m[kMaxBucket]) {
  int64_t id = bucket_id(op);
  int n = 0;
  for (MlirOperation o = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(o);
       o = mlirOperationGetNextInBlock(o))
    if (nn_op_kind_of(o) == NN_OP_NONE && bucket_id(o) == id) {
      if (n == kMaxBucket) {
        fail(r, "bucket %lld has more than %d members", (long long)id, kMaxBucket);
        return 0;
      }
      m[n++] = o;
    }
  return n;
}

// The srt_bucket_kind of a bucket's collectives.
static int64_t bucket_kind(MlirOperation op) {
  op = collective_of(op);
  return tp_op_is(op, "shard.all_gather")       ? SRT_BUCKET_ALL_GATHER
         : tp_op_is(op, "shard.reduce_scatter") ? SRT_BUCKET_REDUCE_SCATTER
                                                : SRT_BUCKET_ALL_REDUCE;
}

// A bucket member's element count: the smaller of its sides.
static int64_t member_count(MlirOperation m) {
  int64_t in = numel(mlirOperationGetOperand(m, 0)), out = numel(mlirOperationGetResult(m, 0));
  return in < out ? in : out;
}

// The bucket of c->op as a private constant [n, (in, out, count) x n]; its
// address is the argument. Every member must be the first one's kind, axis
// and dtype, with its sides in the group size's ratio.
static void arg_bucket(lower_call *c) {
  lower_run *r = c->r;
  MlirOperation m[kMaxBucket];
  int n = bucket_members(r, collective_of(c->op), m);
  int64_t values[1 + 3 * kMaxBucket] = {n}, bytes = 0, axis = -1, dtype = -1;
  for (int j = 0; j < n; ++j) {
    lower_call mc = {.r = r, .op = m[j]};
    int64_t ax = grid_axis(&mc), dt = op_dtype(&mc, mlirOperationGetOperand(m[j], 0));
    int64_t in = numel(mlirOperationGetOperand(m[j], 0)), out = numel(mlirOperationGetResult(m[j], 0));
    int64_t parts = r->mesh.size[ax < 0 || ax > 1 ? 0 : ax];
    bool sides = bucket_kind(m[j]) == SRT_BUCKET_ALL_GATHER ? out == in * parts
                 : bucket_kind(m[j]) == SRT_BUCKET_REDUCE_SCATTER ? in == out * parts
                                                                        : in == out;
    if ((j && (ax != axis || dt != dtype || bucket_kind(m[j]) != bucket_kind(m[0]))) || !sides) {
      r->current = m[j];
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(m[0]));
      fail(r, "bucket %lld: member %d is not a %.*s of the first member's axis and dtype",
           (long long)bucket_id(m[0]), j, (int)name.length, name.data);
      return;
    }
    axis = ax;
    dtype = dt;
    values[1 + 3 * j] = find_value(r, mlirOperationGetOperand(m[j], 0));
    values[2 + 3 * j] = find_value(r, mlirOperationGetResult(m[j], 0));
    values[3 + 3 * j] = member_count(m[j]);
    bytes += (in + out) * (dtype == kBF16 ? 2 : 4);
  }
  if (r->cuda) // srt_cuda_stage grows by a quarter and 256 bytes over the request
    bytes += bytes / 4 + 256;
  if (r->stage_bytes[r->slot] < bytes)
    r->stage_bytes[r->slot] = bytes;
  char name[48];
  snprintf(name, sizeof name, "bucket_%d", r->num_buckets++);
  MlirType type = mlirLLVMArrayTypeGet(r->top.i64, (unsigned)(1 + 3 * n));
  MlirBlock init;
  lb_builder b = r->top;
  b.loc = mlirOperationGetLocation(m[0]);
  lb_global(&b, name, type, false, &init);
  b.block = init;
  MlirValue agg = lb_zero(&b, type);
  for (int64_t i = 0; i < 1 + 3 * n; ++i)
    agg = lb_insert(&b, agg, lb_const_int(&b, b.i64, values[i]), 1, &i);
  lb_return(&b, agg);
  push(c, lb_address_of(&r->at, name));
}

// Lowers bucket member `op` (a collective or its nn.wait): its first
// collective starts the bucket, its first wait completes it; the other
// members lower to nothing. False on failure.
static bool lower_bucket_op(lower_run *r, MlirOperation op) {
  MlirOperation m[kMaxBucket];
  int n = bucket_members(r, collective_of(op), m);
  if (!n)
    return false;
  MlirValue first = mlirOperationGetResult(m[0], 0);
  if (nn_op_kind_of(op) != NN_OP_WAIT) {
    if (op.ptr != m[0].ptr)
      return true;
    if (!take_slot(r, op))
      return false;
    lower_op(r, lowering_named("srt_op_bucket_start"), op, (MlirOperation){NULL});
    return !r->errors;
  }
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (r->in_flight[i].ptr == first.ptr) {
      r->in_flight[i] = (MlirValue){NULL};
      r->slot = i;
      lower_op(r, lowering_named("srt_op_bucket_wait"), op, (MlirOperation){NULL});
      return !r->errors;
    }
  return true; // a later member's wait: the first one unpacked it
}

// Lowers every op of the step; returns the global vocabulary (from the
// embedding's weight).
static int64_t lower_ops(lower_run *r) {
  bool has_optimizer = false;
  int64_t vocab = 0;
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
  const lowering *fusion = lowering_named("srt_op_add_rms_norm");
  MlirOperation fused = {NULL}; // a norm already lowered with its add
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body);
       !mlirOperationIsNull(op) && !r->errors; op = mlirOperationGetNextInBlock(op)) {
    r->current = op;
    nn_op_kind kind = nn_op_kind_of(op);
    if (op.ptr == fused.ptr)
      continue;
    MlirOperation next = mlirOperationGetNextInBlock(op);
    if (fusion && add_feeds_norm(r, op, next)) {
      lower_op(r, fusion, op, next);
      fused = next;
      if (!mlirOperationIsNull(loss_def) && (op.ptr == loss_def.ptr || next.ptr == loss_def.ptr))
        branch_if_forward_only(r, optimizer);
      continue;
    }
    if (kind == NN_OP_OPTIMIZER_STEP && has_optimizer) {
      fail(r, "more than one nn.optimizer_step: run nn-optimizer once");
      break;
    }
    has_optimizer |= kind == NN_OP_OPTIMIZER_STEP;
    if (kind == NN_OP_EMBEDDING)
      vocab = shape(mlirOperationGetOperand(op, 1)).dims[0] *
              (nn_attr_int(op, "nn.vocab_parallel_axis", -1) >= 0 ? r->mesh.size[1] : 1);
    // No call: the gradient already lives in its slot; annotations and the
    // return have no buffers of their own.
    if (kind == NN_OP_STORE_GRAD || tp_op_is(op, "func.return") ||
        tp_op_is(op, "shard.sharding"))
      continue;
    const lowering *l = lowering_of(op);
    if (bucket_id(collective_of(op)) >= 0) {
      if (!lower_bucket_op(r, op))
        break;
      continue;
    }
    // A collective an nn.wait completes is started non-blocking.
    const lowering *start = l && kind == NN_OP_NONE ? start_form(r, op) : NULL;
    if (start && !take_slot(r, op))
      break;
    l = start ? start : l;
    int freed = kind == NN_OP_WAIT ? free_slot(r, op) : 1;
    if (freed < 0)
      break;
    if (!freed)
      continue; // completed before its wait
    if (!l) {
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
      fail(r, "no lowering for '%.*s'", (int)name.length, name.data);
      break;
    }
    lower_op(r, l, op, (MlirOperation){NULL});
    if (op.ptr == loss_def.ptr && !r->errors)
      branch_if_forward_only(r, optimizer);
  }
  r->current = r->func;
  if (!r->errors && !has_optimizer)
    fail(r, "the step has no nn.optimizer_step: run nn-autodiff and nn-optimizer first");
  return vocab;
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
  tp_ptr_map_free(&r->index);
  tp_ptr_map_free(&r->early);
  free(r->offsets);
  free(r->dtypes);
  free(r->params);
  free(r->declared);
}

// The largest scratch an op allocates at run time that the kernels' own
// formula gives (the cpu Mamba2 kernels', one thread's tiles; the RMSNorm
// weight gradient's partial sums); 0 on cuda, whose scratch is not modelled.
static int64_t op_workspace(lower_run *r) {
  int64_t most = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !r->cuda && !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind k = nn_op_kind_of(op);
    if (k == NN_OP_RMS_NORM_GRAD_WEIGHT) {
      nn_shape x = shape(mlirOperationGetOperand(op, 0));
      int64_t features = x.dims[x.rank - 1], rows = 1;
      for (int d = 0; d + 1 < x.rank; ++d)
        rows *= x.dims[d];
      int64_t floats = srt_cpu_rms_norm_backward_workspace_floats(
          rows, features, norm_group(op));
      most = floats * 4 > most ? floats * 4 : most;
      continue;
    }
    if (k != NN_OP_MAMBA2_MIXER && k != NN_OP_MAMBA2_MIXER_GRAD)
      continue;
    nn_shape x = shape(mlirOperationGetOperand(op, 0));
    srt_mamba2_config c = {.batch = x.dims[0], .seq = x.dims[1], .hidden = x.dims[2],
                           .heads = nn_attr_int(op, "num_heads", 0),
                           .head_dim = nn_attr_int(op, "head_dim", 0),
                           .groups = nn_attr_int(op, "n_groups", 0),
                           .state = nn_attr_int(op, "state_size", 0),
                           .conv_kernel = nn_attr_int(op, "conv_kernel", 0),
                           .chunk = nn_attr_int(op, "chunk_size", 0)};
    double parts[SRT_MAMBA2_WORKSPACE_PARTS];
    double floats = srt_mamba2_workspace_parts(&c, k == NN_OP_MAMBA2_MIXER_GRAD, 1, parts);
    if (floats * 4 > (double)most && floats * 4 < 9e18)
      most = (int64_t)(floats * 4);
  }
  return most;
}

// The memory figures (of a step of `accum` micro-batches): the summary
// printed and written to `path` as JSON
// when given; a plan whose total exceeds `device_bytes` (> 0) is refused with
// the summary.
static void report_memory(lower_run *r, int64_t accum, const char *path, int64_t device_bytes) {
  tp_memory_figures *m = &r->mem;
  m->backend = r->cuda ? "cuda" : "cpu";
  m->dp = r->mesh.size[0];
  m->tp = r->mesh.size[1];
  m->fsdp = false;
  for (int i = 0; i < r->num_params; ++i)
    m->fsdp |= r->params[i].layout.on[0].kind == TP_SHARD;
  m->micro_batch = shape(mlirBlockGetArgument(r->body, 0)).dims[0];
  m->accum = accum;
  m->batch = m->micro_batch * m->dp * accum;
  m->seq = shape(mlirBlockGetArgument(r->body, 0)).dims[1];
  m->persistent = r->persistent;
  m->cpu_offload = r->cpu_offload;
  if (r->cpu_offload) { // the prefix stays on the host; the host mirrors the rest
    m->host_params = m->params;
    m->host_moments = m->moments;
    m->params = m->moments = 0;
    m->persistent = r->persistent - r->offload;
    m->host_staging = m->persistent;
    m->host_total = r->persistent;
  }
  m->temporaries = r->arena - r->persistent;
  m->workspace = op_workspace(r);
  for (int i = 0; i < SRT_MAX_PENDING; ++i) // the runtime's bucket staging
    m->workspace += r->stage_bytes[i];
  m->total = m->persistent + m->temporaries + m->workspace;
  char text[4096];
  tp_memory_report_text(m, text, sizeof text);
  if (device_bytes > 0 && m->total > device_bytes) {
    r->current = r->func;
    fail(r, "the step needs %lld bytes per rank (%.2f GiB), more than the device's %lld "
            "(--device-memory):\n%s",
         (long long)m->total, (double)m->total / (1024.0 * 1024 * 1024), (long long)device_bytes,
         text);
    return;
  }
  if (!path || !*path)
    return;
  fputs(text, stderr);
  // The shared writer (shardrt/output.h): a temporary of its own renamed
  // over the file, so two compiles at once each leave a whole report.
  char *json = tp_memory_report_json(m);
  size_t n = json ? strlen(json) : 0;
  if (json)
    json[n] = '\n'; // the NUL's byte: the file ends with a newline
  srt_status s = json ? srt_write_file("memory report", path, json, n + 1) : NULL;
  if (!json)
    fail(r, "cannot write the memory report '%s': out of memory", path);
  else if (s)
    fail(r, "cannot write the memory report: %s", srt_status_message(s));
  srt_status_free(s);
  free(json);
}

static MlirLogicalResult run_lower(MlirOperation module, const tp_option_value *o) {
  if (!tp_check_functions(module))
    return mlirLogicalResultFailure();
  lower_run r = {.ctx = mlirOperationGetContext(module), .current = module};
  if (strcmp(o[kOptBackend].s, "cpu") != 0 && strcmp(o[kOptBackend].s, "cuda") != 0) {
    fail(&r, "backend '%s' is not one of 'cpu', 'cuda'", o[kOptBackend].s);
    return mlirLogicalResultFailure();
  }
  r.cuda = !strcmp(o[kOptBackend].s, "cuda");
  r.func = find_func(module);
  if (mlirOperationIsNull(r.func) || !tp_read_grid(module, &r.mesh)) {
    fail(&r, "expected a partitioned training step: run nn-autodiff, nn-optimizer, "
             "tp-plan and tp-partition first");
    return mlirLogicalResultFailure();
  }
  r.current = r.func;
  r.body = mlirRegionGetFirstBlock(mlirOperationGetRegion(r.func, 0));
  if (mlirBlockGetNumArguments(r.body) < 2 ||
      shape(mlirBlockGetArgument(r.body, 0)).rank != 2) {
    fail(&r, "the step's first arguments must be input_ids and labels ([batch, seq] int64)");
    return mlirLogicalResultFailure();
  }
  r.keep_logits = o[kOptKeepLogits].b;
  r.cpu_offload = o[kOptCpuOffload].b;
  if (r.cpu_offload && !r.cuda) {
    fail(&r, "cpu-offload keeps the fp32 master weights and AdamW moments in host memory "
             "for a GPU backend; the cpu backend's arena is host memory already: compile "
             "with backend=cuda, or without cpu-offload");
    return mlirLogicalResultFailure();
  }
  if (r.cuda && !cuda_supports(&r))
    return mlirLogicalResultFailure();
  if (o[kOptAccumulate].i < 1 || o[kOptAccumulate].i > (1 << 20)) {
    fail(&r, "accumulate-steps %lld must lie in [1, 2^20]", (long long)o[kOptAccumulate].i);
    return mlirLogicalResultFailure();
  }
  if (r.cuda && o[kOptAccumulate].i > 1) {
    fail(&r, "gradient accumulation (accumulate-steps %lld) is not available on the cuda "
             "backend yet: compile with backend=cpu, or without micro-batches",
         (long long)o[kOptAccumulate].i);
    return mlirLogicalResultFailure();
  }
  if (r.keep_logits && !check_keep_logits(&r))
    return mlirLogicalResultFailure();
  plan_params(&r);
  plan_temporaries(&r);
  if (r.arena < 0)
    fail(&r, "out of memory planning the arena");
  MlirBlock staging = mlirBlockCreate(0, NULL, NULL);
  r.top = lb_create(r.ctx, staging, mlirOperationGetLocation(r.func));
  r.declared = calloc(kNumLowerings, sizeof *r.declared);
  int64_t vocab = 0;
  if (!r.errors) {
    begin_step(&r);
    vocab = lower_ops(&r);
    end_step(&r);
  }
  // After the calls: the buckets' staging is known once slots are assigned.
  if (!r.errors)
    report_memory(&r, o[kOptAccumulate].i, o[kOptMemoryReport].s, o[kOptDeviceMemory].i);
  if (!r.errors) {
    nn_shape ids = shape(mlirBlockGetArgument(r.body, 0));
    MlirStringRef model = nn_attr_str(module, "nn.config_path");
    char model_path[1024];
    snprintf(model_path, sizeof model_path, "%.*s", (int)model.length, model.data);
    tp_program_desc d = {.model = model_path,
                         .config_json = nn_attr_str(module, "nn.config_json"),
                         .checkpoint_names = nn_attr_str(module, "nn.checkpoint_names"),
                         .tokenizer_json = nn_attr_str(module, "nn.tokenizer_json"),
                         .mesh = r.mesh,
                         .batch = ids.dims[0] * r.mesh.size[0] * o[kOptAccumulate].i,
                         .accum = (int)o[kOptAccumulate].i,
                         .seq = ids.dims[1],
                         .vocab = vocab,
                         .initializer_range = nn_attr_float(module, "nn.initializer_range", 0.02),
                         .arena = r.arena,
                         .persistent = r.persistent,
                         .offload = r.cpu_offload ? r.offload : 0,
                         .ids_offset = r.ids_offset,
                         .labels_offset = r.labels_offset,
                         .params = r.params,
                         .num_params = r.num_params,
                         .step = "shard_step",
                         .keep_logits = r.keep_logits,
                         .logits_offset = r.keep_logits ? find_value(&r, r.logits) : -1,
                         .logits = r.keep_logits ? shape(r.logits) : (nn_shape){0},
                         .backend = r.cuda ? "srt_cuda_backend" : NULL};
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
