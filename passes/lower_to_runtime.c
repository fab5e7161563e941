// lower-to-runtime{backend=cpu|cuda}: turns a partitioned training step into
// an LLVM-dialect module that calls the runtime: a static memory plan (one
// arena per rank: a persistent region for parameters, gradients and AdamW
// moments, then temporaries placed by liveness), one `srt_op_*` call per op
// (runtime/include/shardrt/ops.h) with byte offsets and local sizes as
// constants, a status check after each, and the `srt_program shard_program`
// table (runtime/include/shardrt/program.h) the training driver reads.
//
// backend=cuda calls `srt_cuda_op_*` (runtime/include/shardrt/cuda.h) and
// plans mixed precision (the reference's MixedPrecisionPolicy: bf16 compute,
// fp32 reductions): each parameter also gets a bf16 compute copy in the
// persistent region, which is what the ops read; activations are bf16;
// parameter gradients (and every collective or add on them), the loss
// statistics and the rotary cos/sin tables stay fp32. Ops whose operands
// may be either (add, collectives) take the dtype as a last argument.
// The module is written as LLVM-dialect text and parsed: the C API has no
// builders for the llvm dialect, and text keeps this file readable.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_plan.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "nn.h"
#include "pass.h"
#include "shard_ops.h"

enum { kOptBackend, kOptKeepLogits };

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

typedef struct text {
  char *data;
  size_t len, cap;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = (t->len + (size_t)n + 1) * 2;
    t->data = realloc(t->data, t->cap);
  }
  va_start(ap, fmt);
  vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

typedef struct param {
  MlirStringRef name;
  int init;
  nn_shape local;
  int64_t global[NN_MAX_RANK];
  tp_layout layout;
  int64_t offset, grad, m, v;
  int64_t compute; // the bf16 copy (cuda), or -1
} param;

// Element types of arena buffers: kF32 and kBF16 are the `dtype` argument
// of srt_cuda_op_*; kI64 (input ids, labels) is never an op's dtype.
enum { kF32 = 0, kBF16 = 1, kI64 = 2 };

typedef struct lower_run {
  MlirContext ctx;
  MlirOperation func, current;
  MlirBlock body;
  tp_mesh mesh;
  // Values: block arguments first, then op results in order, with the
  // element type of their buffer (kF32 or kBF16; always kF32 on the cpu).
  const void **keys;
  int64_t *offsets;
  char *dtypes;
  bool cuda;
  size_t nvalues, cap;
  param *params;
  int num_params;
  int64_t ids_offset, labels_offset, persistent, arena;
  // The logits (the lm_head linear's result): kept live to the end of the
  // step when `keep_logits` (so a driver can read them after the step).
  bool keep_logits;
  MlirValue logits;
  text decls, globals, code;
  char declared[64][64];
  int num_declared;
  int ssa, block, attn;
  int errors;
} lower_run;

__attribute__((format(printf, 2, 3))) static void fail(lower_run *r, const char *fmt, ...) {
  char msg[1024];
  int n = snprintf(msg, sizeof msg, "lower-to-runtime: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  mlirEmitError(mlirOperationGetLocation(r->current), msg);
  ++r->errors;
}

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

static size_t value_index(lower_run *r, MlirValue v) {
  for (size_t i = r->nvalues; i-- > 0;)
    if (r->keys[i] == v.ptr)
      return i;
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
    r->keys = realloc(r->keys, r->cap * sizeof *r->keys);
    r->offsets = realloc(r->offsets, r->cap * sizeof *r->offsets);
    r->dtypes = realloc(r->dtypes, r->cap);
  }
  r->keys[r->nvalues] = v.ptr;
  r->dtypes[r->nvalues] = (char)dtype;
  r->offsets[r->nvalues++] = offset;
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

static const param *param_named(const lower_run *r, MlirAttribute name) {
  MlirStringRef s = mlirStringAttrGetValue(name);
  for (int i = 0; i < r->num_params; ++i)
    if (r->params[i].name.length == s.length && !memcmp(r->params[i].name.data, s.data, s.length))
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

static void plan_params(lower_run *r) {
  intptr_t nargs = mlirBlockGetNumArguments(r->body);
  MlirAttribute all = mlirOperationGetAttributeByName(r->func, str("arg_attrs"));
  r->params = calloc((size_t)nargs + 1, sizeof *r->params);
  int64_t at = 0;
  int ints = 0;
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirValue arg = mlirBlockGetArgument(r->body, i);
    MlirAttribute dict = mlirAttributeIsNull(all) ? (MlirAttribute){NULL}
                                                  : mlirArrayAttrGetElement(all, i);
    MlirAttribute name = mlirAttributeIsNull(dict) ? (MlirAttribute){NULL}
                             : mlirDictionaryAttrGetElementByName(dict, str(NN_PARAM_ATTR));
    int64_t bytes = tp_align(bytes_of(mlirValueGetType(arg)));
    if (mlirAttributeIsNull(name)) {
      // input_ids, then labels (int64 [local_batch, seq]).
      if (ints == 0)
        r->ids_offset = at;
      else if (ints == 1)
        r->labels_offset = at;
      else
        fail(r, "argument %ld is neither a parameter nor input_ids/labels", (long)i);
      ++ints;
      set_value(r, arg, at, kI64);
      at += bytes;
      continue;
    }
    param *p = &r->params[r->num_params++];
    p->name = mlirStringAttrGetValue(name);
    nn_shape_of(mlirValueGetType(arg), &p->local);
    if (!mlirTypeIsAF32(p->local.element))
      fail(r, "parameter '%.*s' must be f32 (master weights are fp32 on every backend)",
           (int)p->name.length, p->name.data);
    p->init = init_kind(p->name);
    if (p->init == 2) {
      // Gemma's norms compute (1 + w): they start at zero.
      MlirOperation user = mlirOpOperandGetOwner(mlirValueGetFirstUse(arg));
      if (!mlirOperationIsNull(user) && nn_attr_float(user, "offset", 0) == 1.0)
        p->init = 1;
    }
    MlirAttribute gshape = mlirDictionaryAttrGetElementByName(dict, str("nn.global_shape"));
    for (int d = 0; d < p->local.rank; ++d)
      p->global[d] = mlirAttributeIsNull(gshape) ? p->local.dims[d]
                                                 : mlirDenseI64ArrayGetElement(gshape, d);
    p->layout = (tp_layout){{TP_R, TP_R}};
    MlirAttribute pl = mlirDictionaryAttrGetElementByName(dict, str("nn.placements"));
    for (int axis = 0; !mlirAttributeIsNull(pl) && axis < TP_MESH_AXES; ++axis) {
      MlirStringRef s = mlirStringAttrGetValue(mlirArrayAttrGetElement(pl, axis));
      char buf[32];
      snprintf(buf, sizeof buf, "%.*s", (int)s.length, s.data);
      tp_placement_parse(buf, &p->layout.on[axis]);
    }
    p->offset = at;
    p->grad = at + bytes;
    p->m = at + 2 * bytes;
    p->v = at + 3 * bytes;
    at += 4 * bytes;
    p->compute = -1;
    if (r->cuda) { // the ops read the bf16 copy
      p->compute = at;
      at += tp_align(bytes_as(mlirValueGetType(arg), kBF16));
    }
    set_value(r, arg, r->cuda ? p->compute : p->offset, r->cuda ? kBF16 : kF32);
  }
  r->persistent = at;
}

// The result of the forward nn.linear whose nn.module is "lm_head", or null.
static MlirValue find_logits(lower_run *r) {
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirAttribute m = mlirOperationGetAttributeByName(op, str(NN_MODULE_ATTR));
    if (nn_op_kind_of(op) == NN_OP_LINEAR && !mlirAttributeIsNull(m) &&
        mlirAttributeIsAString(m) &&
        mlirStringRefEqual(mlirStringAttrGetValue(m), str("lm_head")))
      return mlirOperationGetResult(op, 0);
  }
  return (MlirValue){NULL};
}

// The buffer dtype of `op`'s results: always fp32 on the cpu. On cuda:
// fp32 for parameter gradients, loss statistics and rotary tables; an add
// or a collective keeps its first operand's; bf16 for everything else.
static int result_dtype(lower_run *r, MlirOperation op) {
  if (!r->cuda)
    return kF32;
  switch (nn_op_kind_of(op)) {
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
// just before it: on cuda the two run as one kernel (srt_cuda_op_add_rms_norm)
// at the add, so the norm's result is defined there too.
static bool add_feeds_norm(lower_run *r, MlirOperation add, MlirOperation norm) {
  if (!r->cuda || mlirOperationIsNull(add) || mlirOperationIsNull(norm) ||
      nn_op_kind_of(add) != NN_OP_ADD || nn_op_kind_of(norm) != NN_OP_RMS_NORM)
    return false;
  MlirValue sum = mlirOperationGetResult(add, 0);
  return mlirOperationGetOperand(norm, 0).ptr == sum.ptr && dtype_of(r, sum) == kBF16;
}

// Temporaries: each op result gets an interval [definition, last use];
// a value handed to nn.store_grad lives in its parameter's gradient slot;
// with keep_logits, the logits live to the end of the step.
static void plan_temporaries(lower_run *r) {
  int nops = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    nops += (int)mlirOperationGetNumResults(op);
  tp_interval *iv = calloc((size_t)nops + 1, sizeof *iv);
  MlirValue *vals = calloc((size_t)nops + 1, sizeof *vals);
  int64_t *fixed = calloc((size_t)nops + 1, sizeof *fixed);
  char *dtypes = calloc((size_t)nops + 1, 1);
  size_t first = r->nvalues;
  int n = 0, index = 0;
  MlirOperation prev = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(r->body); !mlirOperationIsNull(op);
       prev = op, op = mlirOperationGetNextInBlock(op), ++index) {
    // A fused norm writes its result while the add reads its operands: the
    // result must not share their memory.
    int defined = add_feeds_norm(r, prev, op) ? index - 1 : index;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
      MlirValue v = mlirOperationGetOperand(op, i);
      for (int j = n; j-- > 0;)
        if (vals[j].ptr == v.ptr) {
          iv[j].last = index;
          if (nn_op_kind_of(op) == NN_OP_STORE_GRAD) {
            const param *p = param_named(
                r, mlirOperationGetAttributeByName(op, str("nn.grad_of")));
            fixed[j] = p ? p->grad + 1 : 0; // +1: 0 means "not fixed"
            if (dtypes[j] != kF32) {
              r->current = op;
              fail(r, "internal error: a gradient stored to its parameter is not fp32");
            }
          }
          break;
        }
    }
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
      vals[n] = mlirOperationGetResult(op, i);
      dtypes[n] = (char)result_dtype(r, op);
      iv[n] = (tp_interval){defined, index, bytes_as(mlirValueGetType(vals[n]), dtypes[n]), 0};
      // Defined before later ops look its dtype up (offset set below).
      set_value(r, vals[n], -1, dtypes[n]);
      ++n;
    }
  }
  if (r->keep_logits)
    for (int j = 0; j < n; ++j)
      if (vals[j].ptr == r->logits.ptr)
        iv[j].last = index;
  // Gradient slots are fixed: plan the rest around nothing else (they are
  // in the persistent region, below `persistent`).
  tp_interval *free_iv = calloc((size_t)n + 1, sizeof *free_iv);
  int nfree = 0;
  for (int j = 0; j < n; ++j)
    if (!fixed[j])
      free_iv[nfree++] = iv[j];
  r->arena = tp_plan_memory(free_iv, nfree, r->persistent);
  for (int j = 0, k = 0; j < n; ++j)
    r->offsets[first + (size_t)j] = fixed[j] ? fixed[j] - 1 : free_iv[k++].offset;
  free(iv);
  free(vals);
  free(fixed);
  free(dtypes);
  free(free_iv);
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

enum { kMaxArgs = 20 };

typedef struct call {
  const char *fn;
  int n;
  char kind[kMaxArgs]; // 'i' i64, 'f' f64, 'p' ptr (an SSA name)
  int64_t i[kMaxArgs];
  double f[kMaxArgs];
  const char *p[kMaxArgs];
} call;

static void arg_i(call *c, int64_t v) { c->kind[c->n] = 'i', c->i[c->n++] = v; }
static void arg_f(call *c, double v) { c->kind[c->n] = 'f', c->f[c->n++] = v; }
static void arg_p(call *c, const char *ssa) { c->kind[c->n] = 'p', c->p[c->n++] = ssa; }
static void arg_v(lower_run *r, call *c, MlirValue v) { arg_i(c, find_value(r, v)); }

static const char *type_name(char kind) {
  return kind == 'i' ? "i64" : kind == 'f' ? "f64" : "!llvm.ptr";
}

static void declare(lower_run *r, const call *c) {
  for (int i = 0; i < r->num_declared; ++i)
    if (!strcmp(r->declared[i], c->fn))
      return;
  snprintf(r->declared[r->num_declared++], sizeof r->declared[0], "%s", c->fn);
  put(&r->decls, "  llvm.func @%s(!llvm.ptr", c->fn);
  for (int i = 0; i < c->n; ++i)
    put(&r->decls, ", %s", type_name(c->kind[i]));
  put(&r->decls, ") -> !llvm.ptr\n");
}

// Emits constants for the arguments, the call, and the status check that
// returns a failure at once.
static void emit(lower_run *r, const call *c_in) {
  call renamed = *c_in;
  const call *c = &renamed;
  char cuda_name[64];
  if (r->cuda && !strncmp(c_in->fn, "srt_op_", 7)) { // srt_op_X -> srt_cuda_op_X
    snprintf(cuda_name, sizeof cuda_name, "srt_cuda_op_%s", c_in->fn + 7);
    renamed.fn = cuda_name;
  }
  int first = r->ssa;
  for (int i = 0; i < c->n; ++i) {
    if (c->kind[i] == 'i')
      put(&r->code, "    %%c%d = llvm.mlir.constant(%lld : i64) : i64\n", r->ssa + i,
          (long long)c->i[i]);
    else if (c->kind[i] == 'f') {
      uint64_t bits;
      memcpy(&bits, &c->f[i], sizeof bits);
      put(&r->code, "    %%c%d = llvm.mlir.constant(0x%016llX : f64) : f64\n", r->ssa + i,
          (unsigned long long)bits);
    }
  }
  r->ssa += c->n;
  int s = r->ssa++;
  put(&r->code, "    %%s%d = llvm.call @%s(%%exec", s, c->fn);
  for (int i = 0; i < c->n; ++i) {
    if (c->kind[i] == 'p')
      put(&r->code, ", %s", c->p[i]);
    else
      put(&r->code, ", %%c%d", first + i);
  }
  put(&r->code, ") : (!llvm.ptr");
  for (int i = 0; i < c->n; ++i)
    put(&r->code, ", %s", type_name(c->kind[i]));
  put(&r->code, ") -> !llvm.ptr\n");
  int b = r->block++;
  put(&r->code,
      "    %%z%d = llvm.mlir.zero : !llvm.ptr\n"
      "    %%f%d = llvm.icmp \"ne\" %%s%d, %%z%d : !llvm.ptr\n"
      "    llvm.cond_br %%f%d, ^fail(%%s%d : !llvm.ptr), ^bb%d\n"
      "  ^bb%d:\n",
      s, s, s, s, s, s, b, b);
  declare(r, c);
}

static void start(call *c, const char *fn) {
  memset(c, 0, sizeof *c);
  c->fn = fn;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static nn_shape shape(MlirValue v) {
  nn_shape s = {0};
  nn_shape_of(mlirValueGetType(v), &s);
  return s;
}

static int64_t numel(MlirValue v) {
  nn_shape s = shape(v);
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  return n;
}

static int64_t last_dim(MlirValue v) {
  nn_shape s = shape(v);
  return s.rank ? s.dims[s.rank - 1] : 1;
}

static int64_t rows(MlirValue v) { return numel(v) / last_dim(v); }

static MlirValue in(MlirOperation op, int i) { return mlirOperationGetOperand(op, i); }
static MlirValue out(MlirOperation op, int i) { return mlirOperationGetResult(op, i); }

static int64_t ai(MlirOperation op, const char *name, int64_t fallback) {
  return nn_attr_int(op, name, fallback);
}
static double af(MlirOperation op, const char *name) { return nn_attr_float(op, name, 0); }

static int64_t activation(MlirOperation op) {
  MlirStringRef a = nn_attr_str(op, "activation");
  return a.length == 9 && !memcmp(a.data, "gelu_tanh", 9);
}

// A private constant srt_op_attention_config for `op`; returns its name.
static const char *attention_config(lower_run *r, MlirOperation op, char *name, size_t len) {
  nn_shape q = shape(in(op, 0));
  int64_t ints[7] = {q.dims[0], q.dims[1], ai(op, "num_heads", 0), ai(op, "num_kv_heads", 0),
                     ai(op, "head_dim", 0), ai(op, "causal", 1), ai(op, "sliding_window", 0)};
  double floats[2] = {af(op, "scale"), af(op, "softcap")};
  int64_t tail[2] = {ai(op, "nn.q_head_offset_axis", -1),
                     ai(op, "nn.global_num_heads", ai(op, "num_heads", 0))};
  const char *type = "!llvm.struct<(i64, i64, i64, i64, i64, i64, i64, f64, f64, i64, i64)>";
  int id = r->attn++;
  snprintf(name, len, "@attention_config_%d", id);
  put(&r->globals, "  llvm.mlir.global private constant %s() {addr_space = 0 : i32} : %s {\n",
      name, type);
  put(&r->globals, "    %%0 = llvm.mlir.undef : %s\n", type);
  for (int i = 0; i < 11; ++i) {
    if (i < 7 || i > 8)
      put(&r->globals, "    %%v%d = llvm.mlir.constant(%lld : i64) : i64\n", i,
          (long long)(i < 7 ? ints[i] : tail[i - 9]));
    else {
      uint64_t bits;
      memcpy(&bits, &floats[i - 7], sizeof bits);
      put(&r->globals, "    %%v%d = llvm.mlir.constant(0x%016llX : f64) : f64\n", i,
          (unsigned long long)bits);
    }
    put(&r->globals, "    %%%d = llvm.insertvalue %%v%d, %%%d[%d] : %s\n", i + 1, i, i, i, type);
  }
  put(&r->globals, "    llvm.return %%11 : %s\n  }\n", type);
  put(&r->code, "    %%attn%d = llvm.mlir.addressof %s : !llvm.ptr\n", id, name);
  snprintf(name, len, "%%attn%d", id);
  return name;
}

// Shape arguments of a collective: rank and up to four dims of the input.
static bool shape_args(lower_run *r, call *c, MlirValue v) {
  nn_shape s = shape(v);
  if (s.rank > 4) {
    fail(r, "collectives on tensors of rank %d are not supported (at most 4)", s.rank);
    return false;
  }
  arg_i(c, s.rank);
  for (int d = 0; d < 4; ++d)
    arg_i(c, d < s.rank ? s.dims[d] : 1);
  return true;
}

static int64_t grid_axis(MlirOperation op) {
  MlirAttribute axes = mlirOperationGetAttributeByName(op, str("grid_axes"));
  return mlirDenseArrayGetNumElements(axes) == 1 ? mlirDenseI16ArrayGetElement(axes, 0) : -1;
}

static int64_t index_attr(MlirOperation op, const char *name) {
  return mlirIntegerAttrGetValueInt(mlirOperationGetAttributeByName(op, str(name)));
}

static bool lower_collective(lower_run *r, MlirOperation op) {
  call c;
  int64_t axis = grid_axis(op);
  if (axis < 0) {
    fail(r, "a collective over several grid axes is not supported");
    return true;
  }
  if (tp_op_is(op, "shard.all_reduce")) {
    MlirAttribute red = mlirOperationGetAttributeByName(op, str("reduction"));
    bool is_max = !mlirAttributeIsNull(red) &&
                  mlirAttributeEqual(red, mlirAttributeParseGet(r->ctx, str("#shard<partial max>")));
    start(&c, "srt_op_all_reduce");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, numel(in(op, 0)));
    arg_i(&c, axis);
    arg_i(&c, is_max);
    if (r->cuda)
      arg_i(&c, dtype_of(r, in(op, 0)));
  } else {
    static const struct {
      const char *op, *fn, *dim;
    } kinds[] = {{"shard.all_gather", "srt_op_all_gather", "gather_axis"},
                 {"shard.reduce_scatter", "srt_op_reduce_scatter", "scatter_axis"},
                 {"shard.all_slice", "srt_op_all_slice", "slice_axis"},
                 {"shard.all_to_all", "srt_op_all_to_all", "split_axis"}};
    size_t k = 0;
    while (k < 4 && !tp_op_is(op, kinds[k].op))
      ++k;
    if (k == 4)
      return false;
    start(&c, kinds[k].fn);
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, axis);
    arg_i(&c, index_attr(op, kinds[k].dim));
    if (k == 3)
      arg_i(&c, index_attr(op, "concat_axis"));
    if (!shape_args(r, &c, in(op, 0)))
      return true;
    if (r->cuda)
      arg_i(&c, dtype_of(r, in(op, 0)));
  }
  emit(r, &c);
  return true;
}

static void lower_rotary(lower_run *r, MlirOperation op) {
  if (mlirOperationGetNumOperands(op)) {
    fail(r, "rotary embeddings from explicit position_ids are not supported yet");
    return;
  }
  nn_shape cs = shape(out(op, 0));
  MlirStringRef type = nn_attr_str(op, "rope_type");
  call c;
  start(&c, "srt_op_rotary_embedding");
  arg_v(r, &c, out(op, 0));
  arg_v(r, &c, out(op, 1));
  arg_i(&c, cs.dims[0]);
  arg_i(&c, cs.dims[1]);
  arg_i(&c, ai(op, "head_dim", 0));
  arg_f(&c, af(op, "theta"));
  arg_i(&c, type.length == 6 && !memcmp(type.data, "llama3", 6));
  arg_f(&c, nn_attr_float(op, "factor", 1));
  arg_f(&c, nn_attr_float(op, "low_freq_factor", 1));
  arg_f(&c, nn_attr_float(op, "high_freq_factor", 4));
  arg_i(&c, ai(op, "original_max_position_embeddings", 8192));
  emit(r, &c);
}

// The fused residual add + norm (add_feeds_norm) as one call.
static void lower_add_rms_norm(lower_run *r, MlirOperation add, MlirOperation norm) {
  MlirValue sum = out(add, 0);
  int64_t group = ai(norm, "head_dim", 0);
  call c;
  start(&c, "srt_op_add_rms_norm");
  arg_v(r, &c, in(add, 0));
  arg_v(r, &c, in(add, 1));
  arg_v(r, &c, sum);
  arg_v(r, &c, in(norm, 1));
  arg_v(r, &c, out(norm, 0));
  arg_i(&c, rows(sum));
  arg_i(&c, last_dim(sum));
  arg_i(&c, group > 0 ? group : last_dim(sum));
  arg_f(&c, af(norm, "eps"));
  arg_f(&c, af(norm, "offset"));
  emit(r, &c);
}

// Emits the call(s) of one nn op; false if there is no lowering for it.
static bool lower_nn(lower_run *r, MlirOperation op) {
  call c;
  nn_op_kind kind = nn_op_kind_of(op);
  int64_t vocab_axis = ai(op, "nn.vocab_parallel_axis", -1);
  char cfg[64];
  switch (kind) {
  case NN_OP_EMBEDDING:
  case NN_OP_EMBEDDING_GRAD: {
    bool grad = kind == NN_OP_EMBEDDING_GRAD;
    MlirValue w = in(op, grad ? 2 : 1);
    start(&c, grad ? "srt_op_embedding_grad" : "srt_op_embedding");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, grad ? in(op, 1) : w);
    arg_v(r, &c, out(op, 0));
    arg_i(&c, numel(in(op, 0)));
    arg_i(&c, last_dim(w));
    arg_i(&c, shape(w).dims[0]);
    arg_i(&c, vocab_axis);
    arg_f(&c, nn_attr_float(op, "scale", 1));
    break;
  }
  case NN_OP_LINEAR:
    start(&c, "srt_op_linear");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, in(op, 1));
    arg_i(&c, mlirOperationGetNumOperands(op) == 3 ? find_value(r, in(op, 2)) : -1);
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(in(op, 0)));
    arg_i(&c, shape(in(op, 1)).dims[1]);
    arg_i(&c, shape(in(op, 1)).dims[0]);
    break;
  case NN_OP_LINEAR_GRAD_INPUT:
  case NN_OP_LINEAR_GRAD_WEIGHT: {
    bool weight = kind == NN_OP_LINEAR_GRAD_WEIGHT;
    MlirValue w = in(op, weight ? 2 : 1);
    start(&c, weight ? "srt_op_linear_grad_weight" : "srt_op_linear_grad_input");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, weight ? in(op, 1) : w);
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(in(op, 0)));
    arg_i(&c, shape(w).dims[1]);
    arg_i(&c, shape(w).dims[0]);
    break;
  }
  case NN_OP_LINEAR_GRAD_BIAS:
    start(&c, "srt_op_linear_grad_bias");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(in(op, 0)));
    arg_i(&c, last_dim(in(op, 0)));
    break;
  case NN_OP_BIAS_ADD:
    start(&c, "srt_op_bias_add");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, in(op, 1));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(in(op, 0)));
    arg_i(&c, last_dim(in(op, 0)));
    break;
  case NN_OP_RMS_NORM:
  case NN_OP_RMS_NORM_GRAD_INPUT:
  case NN_OP_RMS_NORM_GRAD_WEIGHT: {
    int64_t group = ai(op, "head_dim", 0);
    MlirValue x = in(op, 0);
    start(&c, kind == NN_OP_RMS_NORM ? "srt_op_rms_norm"
              : kind == NN_OP_RMS_NORM_GRAD_INPUT ? "srt_op_rms_norm_grad_input"
                                                  : "srt_op_rms_norm_grad_weight");
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
      arg_v(r, &c, in(op, (int)i));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(x));
    arg_i(&c, last_dim(x));
    arg_i(&c, group > 0 ? group : last_dim(x));
    arg_f(&c, af(op, "eps"));
    if (kind != NN_OP_RMS_NORM_GRAD_WEIGHT)
      arg_f(&c, af(op, "offset"));
    break;
  }
  case NN_OP_ROTARY_EMBEDDING:
    lower_rotary(r, op);
    return true;
  case NN_OP_APPLY_ROTARY:
  case NN_OP_APPLY_ROTARY_GRAD: {
    nn_shape x = shape(in(op, 0));
    int64_t hd = ai(op, "head_dim", 1);
    start(&c, kind == NN_OP_APPLY_ROTARY ? "srt_op_apply_rotary" : "srt_op_apply_rotary_grad");
    for (int i = 0; i < 3; ++i)
      arg_v(r, &c, in(op, i));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, x.dims[0]);
    arg_i(&c, x.dims[1]);
    arg_i(&c, x.dims[2] / hd);
    arg_i(&c, hd);
    break;
  }
  case NN_OP_ATTENTION:
  case NN_OP_ATTENTION_GRAD: {
    bool grad = kind == NN_OP_ATTENTION_GRAD;
    const char *config = attention_config(r, op, cfg, sizeof cfg);
    start(&c, grad ? "srt_op_attention_grad" : "srt_op_attention");
    for (int i = 0; i < (grad ? 4 : 3); ++i)
      arg_v(r, &c, in(op, i));
    for (int i = 0; i < (grad ? 3 : 1); ++i)
      arg_v(r, &c, out(op, i));
    arg_p(&c, config);
    break;
  }
  case NN_OP_GLU:
  case NN_OP_GLU_GRAD: {
    bool grad = kind == NN_OP_GLU_GRAD;
    start(&c, grad ? "srt_op_glu_grad" : "srt_op_glu");
    for (int i = 0; i < (grad ? 3 : 2); ++i)
      arg_v(r, &c, in(op, i));
    for (int i = 0; i < (grad ? 2 : 1); ++i)
      arg_v(r, &c, out(op, i));
    arg_i(&c, numel(in(op, 0)));
    arg_i(&c, activation(op));
    break;
  }
  case NN_OP_RELU2:
  case NN_OP_RELU2_GRAD:
  case NN_OP_ADD: {
    start(&c, kind == NN_OP_RELU2 ? "srt_op_relu2"
              : kind == NN_OP_RELU2_GRAD ? "srt_op_relu2_grad" : "srt_op_add");
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i)
      arg_v(r, &c, in(op, (int)i));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, numel(in(op, 0)));
    if (r->cuda && kind == NN_OP_ADD) {
      if (dtype_of(r, in(op, 0)) != dtype_of(r, in(op, 1)))
        fail(r, "nn.add of a bf16 activation and an fp32 gradient (no mixed-dtype add)");
      arg_i(&c, dtype_of(r, in(op, 0)));
    }
    break;
  }
  case NN_OP_CROSS_ENTROPY:
  case NN_OP_CROSS_ENTROPY_GRAD: {
    nn_shape l = shape(in(op, 0));
    start(&c, kind == NN_OP_CROSS_ENTROPY ? "srt_op_cross_entropy" : "srt_op_cross_entropy_grad");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, in(op, 1));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, l.dims[0]);
    arg_i(&c, l.dims[1]);
    arg_i(&c, l.dims[2]);
    arg_i(&c, ai(op, "ignore_index", -100));
    arg_i(&c, ai(op, "shift", 1));
    break;
  }
  case NN_OP_CE_LOGIT_MAX:
    start(&c, "srt_op_ce_logit_max");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, rows(in(op, 0)));
    arg_i(&c, last_dim(in(op, 0)));
    break;
  case NN_OP_CE_PARTIAL_SUMS:
  case NN_OP_CE_LOGITS_GRAD: {
    bool grad = kind == NN_OP_CE_LOGITS_GRAD;
    nn_shape l = shape(in(op, 0));
    start(&c, grad ? "srt_op_ce_logits_grad" : "srt_op_ce_partial_sums");
    for (int i = 0; i < (grad ? 5 : 3); ++i)
      arg_v(r, &c, in(op, i));
    for (int i = 0; i < (grad ? 1 : 2); ++i)
      arg_v(r, &c, out(op, i));
    arg_i(&c, l.dims[0]);
    arg_i(&c, l.dims[1]);
    arg_i(&c, l.dims[2]);
    arg_i(&c, vocab_axis);
    arg_i(&c, ai(op, "ignore_index", -100));
    arg_i(&c, ai(op, "shift", 1));
    break;
  }
  case NN_OP_CE_LOSS_SUM: {
    nn_shape m = shape(in(op, 0));
    start(&c, "srt_op_ce_loss_sum");
    for (int i = 0; i < 4; ++i)
      arg_v(r, &c, in(op, i));
    arg_v(r, &c, out(op, 0));
    arg_i(&c, m.dims[0]);
    arg_i(&c, m.dims[1]);
    arg_i(&c, ai(op, "ignore_index", -100));
    arg_i(&c, ai(op, "shift", 1));
    break;
  }
  case NN_OP_CE_MEAN:
    start(&c, "srt_op_ce_mean");
    arg_v(r, &c, in(op, 0));
    arg_v(r, &c, out(op, 0));
    break;
  case NN_OP_STORE_GRAD:
    return true; // its operand already lives in the gradient slot
  case NN_OP_OPTIMIZER_STEP:
    put(&r->code, "    %%program = llvm.mlir.addressof @shard_program : !llvm.ptr\n");
    start(&c, "srt_op_optimizer_step");
    arg_p(&c, "%program");
    arg_p(&c, "%options");
    arg_v(r, &c, in(op, 0));
    arg_p(&c, "%result");
    break;
  default:
    return false;
  }
  emit(r, &c);
  return true;
}

//===----------------------------------------------------------------------===//
// The program table
//===----------------------------------------------------------------------===//

static const char *kParamType =
    "!llvm.struct<(ptr, i32, i32, array<8 x i64>, array<8 x i64>, "
    "array<2 x struct<(i32, i32)>>, i64, i64, i64, i64, i64)>";
static const char *kProgramType =
    "!llvm.struct<(i32, ptr, i64, i64, i64, i64, i64, i64, f64, i64, i64, i64, i64, i32, "
    "ptr, ptr, i32, i64, array<3 x i64>, array<2 x struct<(i32, i32)>>, ptr)>";

static void string_global(text *t, const char *name, const char *s, size_t len) {
  put(t, "  llvm.mlir.global private constant %s(\"", name);
  for (size_t i = 0; i < len; ++i) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 32 || ch == '"' || ch == '\\' || ch > 126)
      put(t, "\\%02X", ch);
    else
      put(t, "%c", ch);
  }
  put(t, "\\00\") {addr_space = 0 : i32} : !llvm.array<%zu x i8>\n", len + 1);
}

// Emits `%<name> = llvm.insertvalue <constant>` chains into t; returns the
// next SSA number. Fields are written by path (e.g. "3, 1" for [3][1]).
static int insert_i(text *t, int at, const char *type, const char *path, const char *itype,
                    long long v) {
  put(t, "    %%k%d = llvm.mlir.constant(%lld : %s) : %s\n", at, v, itype, itype);
  put(t, "    %%a%d = llvm.insertvalue %%k%d, %%a%d[%s] : %s\n", at + 1, at, at - 1, path, type);
  return at + 2;
}

static void program_globals(lower_run *r, const char *model, int64_t batch, int64_t seq,
                            int64_t vocab, double init_std) {
  text *t = &r->globals;
  for (int i = 0; i < r->num_params; ++i) {
    char name[32];
    snprintf(name, sizeof name, "@param_name_%d", i);
    string_global(t, name, r->params[i].name.data, r->params[i].name.length);
  }
  string_global(t, "@model_path", model, strlen(model));
  put(t, "  llvm.mlir.global private constant @params() {addr_space = 0 : i32} : "
         "!llvm.array<%d x %s> {\n", r->num_params > 0 ? r->num_params : 1, kParamType);
  put(t, "    %%a0 = llvm.mlir.undef : !llvm.array<%d x %s>\n",
      r->num_params > 0 ? r->num_params : 1, kParamType);
  int at = 1;
  char array_type[512];
  snprintf(array_type, sizeof array_type, "!llvm.array<%d x %s>",
           r->num_params > 0 ? r->num_params : 1, kParamType);
  for (int i = 0; i < r->num_params; ++i) {
    const param *p = &r->params[i];
    char path[64];
    put(t, "    %%n%d = llvm.mlir.addressof @param_name_%d : !llvm.ptr\n", i, i);
    put(t, "    %%a%d = llvm.insertvalue %%n%d, %%a%d[%d, 0] : %s\n", at, i, at - 1, i,
        array_type);
    ++at;
    snprintf(path, sizeof path, "%d, 1", i);
    at = insert_i(t, at, array_type, path, "i32", p->init);
    snprintf(path, sizeof path, "%d, 2", i);
    at = insert_i(t, at, array_type, path, "i32", p->local.rank);
    for (int d = 0; d < 8; ++d) {
      snprintf(path, sizeof path, "%d, 3, %d", i, d);
      at = insert_i(t, at, array_type, path, "i64", d < p->local.rank ? p->global[d] : 1);
      snprintf(path, sizeof path, "%d, 4, %d", i, d);
      at = insert_i(t, at, array_type, path, "i64", d < p->local.rank ? p->local.dims[d] : 1);
    }
    for (int axis = 0; axis < 2; ++axis) {
      tp_placement pl = p->layout.on[axis];
      // srt_placement_kind: SRT_REPLICATE 0, SRT_SHARD 1, SRT_PARTIAL 2.
      int kindv = pl.kind == TP_SHARD ? 1 : pl.kind == TP_PARTIAL ? 2 : 0;
      snprintf(path, sizeof path, "%d, 5, %d, 0", i, axis);
      at = insert_i(t, at, array_type, path, "i32", kindv);
      snprintf(path, sizeof path, "%d, 5, %d, 1", i, axis);
      at = insert_i(t, at, array_type, path, "i32", pl.kind == TP_SHARD ? pl.dim : 0);
    }
    int64_t offs[5] = {p->offset, p->grad, p->m, p->v, p->compute};
    for (int k = 0; k < 5; ++k) {
      snprintf(path, sizeof path, "%d, %d", i, 6 + k);
      at = insert_i(t, at, array_type, path, "i64", offs[k]);
    }
  }
  put(t, "    llvm.return %%a%d : %s\n  }\n", at - 1, array_type);

  // srt_program shard_program.
  put(t, "  llvm.mlir.global external constant @shard_program() {addr_space = 0 : i32} : %s {\n",
      kProgramType);
  put(t, "    %%a0 = llvm.mlir.undef : %s\n", kProgramType);
  at = 1;
  at = insert_i(t, at, kProgramType, "0", "i32", 3); // SRT_PROGRAM_ABI
  put(t, "    %%model = llvm.mlir.addressof @model_path : !llvm.ptr\n");
  put(t, "    %%a%d = llvm.insertvalue %%model, %%a%d[1] : %s\n", at, at - 1, kProgramType);
  ++at;
  int64_t fields[] = {r->mesh.size[0], r->mesh.size[1], batch, seq,
                      batch / r->mesh.size[0], vocab};
  for (int k = 0; k < 6; ++k) {
    char path[8];
    snprintf(path, sizeof path, "%d", 2 + k);
    at = insert_i(t, at, kProgramType, path, "i64", fields[k]);
  }
  uint64_t bits;
  memcpy(&bits, &init_std, sizeof bits);
  put(t, "    %%k%d = llvm.mlir.constant(0x%016llX : f64) : f64\n", at, (unsigned long long)bits);
  put(t, "    %%a%d = llvm.insertvalue %%k%d, %%a%d[8] : %s\n", at + 1, at, at - 1, kProgramType);
  at += 2;
  int64_t layout[] = {r->arena, r->persistent, r->ids_offset, r->labels_offset};
  for (int k = 0; k < 4; ++k) {
    char path[8];
    snprintf(path, sizeof path, "%d", 9 + k);
    at = insert_i(t, at, kProgramType, path, "i64", layout[k]);
  }
  at = insert_i(t, at, kProgramType, "13", "i32", r->num_params);
  put(t, "    %%params = llvm.mlir.addressof @params : !llvm.ptr\n");
  put(t, "    %%a%d = llvm.insertvalue %%params, %%a%d[14] : %s\n", at, at - 1, kProgramType);
  ++at;
  put(t, "    %%step = llvm.mlir.addressof @shard_step : !llvm.ptr\n");
  put(t, "    %%a%d = llvm.insertvalue %%step, %%a%d[15] : %s\n", at, at - 1, kProgramType);
  ++at;
  // The logits (fields 16..19): kept flag, offset, local shape, placements.
  at = insert_i(t, at, kProgramType, "16", "i32", r->keep_logits);
  at = insert_i(t, at, kProgramType, "17", "i64", r->keep_logits ? find_value(r, r->logits) : -1);
  nn_shape ls = {0};
  if (r->keep_logits)
    ls = shape(r->logits);
  for (int d = 0; d < 3; ++d) {
    char path[16];
    snprintf(path, sizeof path, "18, %d", d);
    at = insert_i(t, at, kProgramType, path, "i64", d < ls.rank ? ls.dims[d] : 0);
  }
  // Placements: Shard(d) where the local size differs from the global
  // [batch, seq, vocab]: the batch over dp; the sequence (sequence
  // parallel) or the vocabulary over tp.
  const int64_t global[3] = {batch, seq, vocab};
  for (int axis = 0; axis < 2; ++axis) {
    int dim = -1;
    for (int d = axis == 0 ? 0 : 1; ls.rank == 3 && d < (axis == 0 ? 1 : 3); ++d)
      if (ls.dims[d] != global[d])
        dim = d;
    char path[16];
    snprintf(path, sizeof path, "19, %d, 0", axis);
    at = insert_i(t, at, kProgramType, path, "i32", dim >= 0 ? 1 : 0);
    snprintf(path, sizeof path, "19, %d, 1", axis);
    at = insert_i(t, at, kProgramType, path, "i32", dim >= 0 ? dim : 0);
  }
  // The backend (field 20): srt_cuda_backend (libshardrt_cuda) or NULL.
  if (r->cuda)
    put(t, "    %%backend = llvm.mlir.addressof @srt_cuda_backend : !llvm.ptr\n");
  else
    put(t, "    %%backend = llvm.mlir.zero : !llvm.ptr\n");
  put(t, "    %%a%d = llvm.insertvalue %%backend, %%a%d[20] : %s\n", at, at - 1, kProgramType);
  ++at;
  put(t, "    llvm.return %%a%d : %s\n  }\n", at - 1, kProgramType);
  if (r->cuda)
    put(t, "  llvm.mlir.global external constant @srt_cuda_backend() {addr_space = 0 : i32} : "
           "!llvm.array<1 x i8>\n");
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

static MlirOperation find_func(MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation f = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(f);
       f = mlirOperationGetNextInBlock(f))
    if (tp_is_defined_func(f))
      return f;
  return (MlirOperation){NULL};
}

// Replaces the module's contents by the ops of the parsed `llvm` text.
static bool replace_module(lower_run *r, MlirOperation module, const text *t) {
  MlirModule parsed = mlirModuleCreateParse(r->ctx, mlirStringRefCreate(t->data, t->len));
  if (mlirModuleIsNull(parsed)) {
    fail(r, "internal error: the generated LLVM-dialect module does not parse");
    return false;
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    mlirOperationDestroy(op);
    op = next;
  }
  MlirBlock src = mlirModuleGetBody(parsed);
  for (MlirOperation op = mlirBlockGetFirstOperation(src); !mlirOperationIsNull(op);) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    mlirOperationRemoveFromParent(op);
    mlirBlockAppendOwnedOperation(body, op);
    op = next;
  }
  mlirModuleDestroy(parsed);
  return true;
}

static void free_run(lower_run *r) {
  free(r->keys);
  free(r->offsets);
  free(r->dtypes);
  free(r->params);
  free(r->decls.data);
  free(r->globals.data);
  free(r->code.data);
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
  r.keep_logits = o[kOptKeepLogits].b;
  if (r.keep_logits && r.cuda) {
    fail(&r, "keep-logits is only available on the cpu backend (the cuda backend keeps "
             "logits in bf16 on the device)");
    return mlirLogicalResultFailure();
  }
  if (r.keep_logits) {
    r.logits = find_logits(&r);
    if (mlirValueIsNull(r.logits) || shape(r.logits).rank != 3) {
      fail(&r, "keep-logits: the step has no nn.linear with nn.module \"lm_head\" and a "
               "[batch, seq, vocab] result");
      return mlirLogicalResultFailure();
    }
    for (MlirOpOperand u = mlirValueGetFirstUse(r.logits); !mlirOpOperandIsNull(u);
         u = mlirOpOperandGetNextUse(u))
      if (tp_op_is(mlirOpOperandGetOwner(u), "shard.all_reduce")) {
        fail(&r, "keep-logits: the lm_head output is Partial (all-reduced afterwards), so no "
                 "rank's buffer holds its logits");
        return mlirLogicalResultFailure();
      }
  }
  plan_params(&r);
  plan_temporaries(&r);
  if (r.arena < 0)
    fail(&r, "out of memory planning the arena");
  bool has_optimizer = false;
  int64_t vocab = 0;
  MlirOperation fused = {NULL}; // a norm already lowered with its add
  for (MlirOperation op = mlirBlockGetFirstOperation(r.body);
       !mlirOperationIsNull(op) && !r.errors; op = mlirOperationGetNextInBlock(op)) {
    r.current = op;
    nn_op_kind kind = nn_op_kind_of(op);
    if (op.ptr == fused.ptr)
      continue;
    MlirOperation next = mlirOperationGetNextInBlock(op);
    if (add_feeds_norm(&r, op, next)) {
      lower_add_rms_norm(&r, op, next);
      fused = next;
      continue;
    }
    if (kind == NN_OP_OPTIMIZER_STEP && has_optimizer) {
      fail(&r, "more than one nn.optimizer_step: run nn-optimizer once");
      break;
    }
    has_optimizer |= kind == NN_OP_OPTIMIZER_STEP;
    if (kind == NN_OP_EMBEDDING) {
      nn_shape w = shape(in(op, 1));
      vocab = w.dims[0] * (ai(op, "nn.vocab_parallel_axis", -1) >= 0 ? r.mesh.size[1] : 1);
    }
    if (tp_op_is(op, "func.return") || tp_op_is(op, "shard.sharding"))
      continue;
    if (kind != NN_OP_NONE ? lower_nn(&r, op) : lower_collective(&r, op))
      continue;
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    fail(&r, "no lowering for '%.*s'", (int)name.length, name.data);
  }
  r.current = r.func;
  if (!r.errors && !has_optimizer)
    fail(&r, "the step has no nn.optimizer_step: run nn-autodiff and nn-optimizer first");
  if (r.errors) {
    free_run(&r);
    return mlirLogicalResultFailure();
  }
  nn_shape ids = shape(mlirBlockGetArgument(r.body, 0));
  MlirStringRef model = nn_attr_str(module, "nn.config_path");
  char model_path[1024];
  snprintf(model_path, sizeof model_path, "%.*s", (int)model.length, model.data);
  double init_std = nn_attr_float(module, "nn.initializer_range", 0.02);
  program_globals(&r, model_path, ids.dims[0] * r.mesh.size[0], ids.dims[1], vocab, init_std);
  text all = {0};
  put(&all, "module {\n%s%s", r.decls.data ? r.decls.data : "",
      r.globals.data ? r.globals.data : "");
  put(&all, "  llvm.func @shard_step(%%exec: !llvm.ptr, %%options: !llvm.ptr, "
            "%%result: !llvm.ptr) -> !llvm.ptr {\n    llvm.br ^entry\n  ^entry:\n%s",
      r.code.data ? r.code.data : "");
  put(&all, "    %%ok = llvm.mlir.zero : !llvm.ptr\n    llvm.return %%ok : !llvm.ptr\n"
            "  ^fail(%%status: !llvm.ptr):\n    llvm.return %%status : !llvm.ptr\n  }\n}\n");
  bool ok = replace_module(&r, module, &all);
  free(all.data);
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
};

const tp_pass_info tp_lower_to_runtime_pass = {
    .argument = "lower-to-runtime",
    .summary = "Lower a partitioned step to runtime calls with a static memory plan (LLVM dialect)",
    .anchor = "builtin.module",
    .options = kOptions,
    .num_options = sizeof kOptions / sizeof *kOptions,
    .run = run_lower,
};
