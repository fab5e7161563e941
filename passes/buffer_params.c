// The persistent region of the buffer plan: the parameter table (each
// nn.param argument's layout, tp blocks, init, and its fp32 weights,
// gradient, AdamW moments and bf16 compute copy), the input ids and labels;
// with offload, the fp32 weights and moments of every parameter first.
// The init of each parameter is its nn.init, which shard-import stamps.
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_plan_internal.h"
#include "memory_plan.h"
#include "shard_ops.h"
#include "shardrt/types.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

// Bytes of a buffer of `type` in its own element type.
static int64_t param_type_bytes(MlirType type) { return tp_buffer_bytes(type, TP_BUF_F32); }

const tp_program_param *tp_buffer_param_named(const tp_buffer_build *b, MlirAttribute name) {
  if (mlirAttributeIsNull(name) || !mlirAttributeIsAString(name))
    return NULL;
  MlirStringRef s = mlirStringAttrGetValue(name);
  for (int i = 0; i < b->plan->num_params; ++i)
    if (mlirStringRefEqual(b->plan->params[i].name, s))
      return &b->plan->params[i];
  return NULL;
}

// nn_param_init is srt_param_init, one for one: the plan copies the kind.
static_assert((int)NN_INIT_NORMAL == (int)SRT_INIT_NORMAL &&
                  (int)NN_INIT_ZEROS == (int)SRT_INIT_ZEROS &&
                  (int)NN_INIT_ONES == (int)SRT_INIT_ONES &&
                  (int)NN_INIT_A_LOG == (int)SRT_INIT_A_LOG &&
                  (int)NN_INIT_DT_BIAS == (int)SRT_INIT_DT_BIAS,
              "nn_param_init and srt_param_init must agree");

// The init of parameter `p` from its nn.init argument attribute. IR
// without one (hand-written) is refused rather than guessed from the name:
// a wrong init trains from a wrong start without any error.
static int init_of(tp_buffer_build *b, const tp_program_param *p, MlirAttribute dict) {
  MlirAttribute a = mlirDictionaryAttrGetElementByName(dict, str(NN_INIT_ATTR));
  int init = !mlirAttributeIsNull(a) && mlirAttributeIsAString(a)
                 ? nn_param_init_parse(mlirStringAttrGetValue(a))
                 : -1;
  if (init < 0)
    tp_buffer_fail(b,
                   "parameter '%.*s': nn.init must be one of \"normal\", \"zeros\", "
                   "\"ones\", \"a_log\", \"dt_bias\" (shard-import stamps it)",
                   (int)p->name.length, p->name.data);
  return init < 0 ? SRT_INIT_NORMAL : init;
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
    if (!mlirOpOperandIsNull(first) && nn_op_kind_of(mlirOpOperandGetOwner(first)) == NN_OP_WAIT)
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

// The parts a parameter's dim 0 is split over tp in, one by one
// (nn.tp_blocks, tp-partition's for a Mamba2 in_proj or conv1d): checked
// here, at compile time, as the runtime would check them at its first load:
// an i64 array of 1..SRT_MAX_TP_BLOCKS positive parts, each divisible by
// tp, summing to dim 0, on a Shard(0) over tp (and maybe over dp too: FSDP
// then splits the concatenated tp shard).
static void tp_blocks_of(tp_buffer_build *b, tp_program_param *p, MlirAttribute blocks) {
  p->num_tp_blocks = 0;
  if (mlirAttributeIsNull(blocks))
    return;
  intptr_t nb = mlirAttributeIsADenseI64Array(blocks) ? mlirDenseArrayGetNumElements(blocks) : 0;
  int64_t tp = b->mesh.size[1], sum = 0;
  bool ok = nb >= 1 && nb <= SRT_MAX_TP_BLOCKS && p->local.rank >= 1 &&
            p->layout.on[1].kind == TP_SHARD && p->layout.on[1].dim == 0;
  for (intptr_t k = 0; ok && k < nb; ++k) {
    int64_t v = mlirDenseI64ArrayGetElement(blocks, k);
    ok = v > 0 && v % tp == 0;
    sum += v;
    p->tp_blocks[k] = v;
  }
  if (!ok || sum != p->global[0]) {
    tp_buffer_fail(b,
                   "parameter '%.*s': nn.tp_blocks must be an array<i64> of 1 "
                   "to %d positive parts, "
                   "each divisible by the tp size %lld, summing to dim 0 "
                   "(%lld), on a Shard(0) over tp",
                   (int)p->name.length, p->name.data, SRT_MAX_TP_BLOCKS, (long long)tp,
                   (long long)(p->local.rank >= 1 ? p->global[0] : 0));
    return;
  }
  p->num_tp_blocks = (int)nb;
}

// A parameter's layout from its nn.placements argument attribute (absent:
// replicated): one placement string per mesh axis.
static tp_layout placements_of(tp_buffer_build *b, const tp_program_param *p, MlirAttribute dict) {
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
    tp_buffer_fail(b, "parameter '%.*s': nn.placements must be [dp, tp] placement strings",
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
static int64_t param_bytes(MlirValue arg) {
  return tp_align(param_type_bytes(mlirValueGetType(arg)));
}
static int64_t copy_bytes(MlirValue arg) {
  return tp_align(tp_buffer_bytes(mlirValueGetType(arg), TP_BUF_BF16));
}

static persistent_cursors offload_cursors(tp_buffer_build *b, MlirAttribute all) {
  int64_t master = 0, grads = 0, copies = 0;
  for (intptr_t i = 0; i < mlirBlockGetNumArguments(b->body); ++i) {
    MlirAttribute dict =
        mlirAttributeIsNull(all) ? (MlirAttribute){NULL} : mlirArrayAttrGetElement(all, i);
    if (mlirAttributeIsNull(dict) ||
        mlirAttributeIsNull(mlirDictionaryAttrGetElementByName(dict, str(NN_PARAM_ATTR))))
      continue;
    MlirValue arg = mlirBlockGetArgument(b->body, i);
    master += 3 * param_bytes(arg);
    grads += param_bytes(arg);
    copies += copy_bytes(arg);
  }
  b->plan->offload = master;
  return (persistent_cursors){0, master, master + grads, master + grads + copies};
}

// Takes `bytes` at cursor *at.
static int64_t take(int64_t *at, int64_t bytes) {
  int64_t offset = *at;
  *at += bytes;
  return offset;
}

void tp_buffer_plan_params(tp_buffer_build *b) {
  intptr_t nargs = mlirBlockGetNumArguments(b->body);
  MlirAttribute all = mlirOperationGetAttributeByName(b->func, str("arg_attrs"));
  b->plan->params = calloc((size_t)nargs + 1, sizeof *b->plan->params);
  b->plan->position_ids_offset = b->plan->segment_ids_offset = -1;
  persistent_cursors c = {0};
  if (b->policy->offload)
    c = offload_cursors(b, all);
  int64_t *grad_at = b->policy->offload ? &c.grad : &c.master;
  int64_t *compute_at = b->policy->offload ? &c.compute : &c.master;
  int64_t *inputs_at = b->policy->offload ? &c.inputs : &c.master;
  int ints = 0;
  for (intptr_t i = 0; i < nargs; ++i) {
    MlirValue arg = mlirBlockGetArgument(b->body, i);
    MlirAttribute dict =
        mlirAttributeIsNull(all) ? (MlirAttribute){NULL} : mlirArrayAttrGetElement(all, i);
    MlirAttribute name = mlirAttributeIsNull(dict)
                             ? (MlirAttribute){NULL}
                             : mlirDictionaryAttrGetElementByName(dict, str(NN_PARAM_ATTR));
    int64_t bytes = param_bytes(arg);
    if (mlirAttributeIsNull(name)) {
      // input_ids, labels, then optionally position_ids and segment_ids
      // (int64 [local_batch, seq]).
      int64_t at = take(inputs_at, bytes);
      int64_t *slots[4] = {&b->plan->ids_offset, &b->plan->labels_offset,
                           &b->plan->position_ids_offset, &b->plan->segment_ids_offset};
      if (ints < 4)
        *slots[ints] = at;
      else
        tp_buffer_fail(b,
                       "argument %ld is neither a parameter nor input_ids, labels, "
                       "position_ids or segment_ids",
                       (long)i);
      ++ints;
      tp_buffer_set(b, arg, at, TP_BUF_I64);
      b->plan->mem.inputs += bytes;
      continue;
    }
    if (!mlirAttributeIsAString(name)) {
      tp_buffer_fail(b,
                     "argument %ld: nn.param must be a string (the Hugging "
                     "Face tensor name)",
                     (long)i);
      return;
    }
    tp_program_param *p = &b->plan->params[b->plan->num_params++];
    p->name = mlirStringAttrGetValue(name);
    if (!nn_shape_of(mlirValueGetType(arg), &p->local)) {
      tp_buffer_fail(b, "parameter '%.*s' must be a statically shaped ranked tensor",
                     (int)p->name.length, p->name.data);
      return;
    }
    if (!mlirTypeIsAF32(p->local.element))
      tp_buffer_fail(b,
                     "parameter '%.*s' must be f32 (master weights are fp32 on "
                     "every backend)",
                     (int)p->name.length, p->name.data);
    p->init = init_of(b, p, dict);
    p->zero_row = padding_row(arg);
    MlirAttribute gshape = mlirDictionaryAttrGetElementByName(dict, str("nn.global_shape"));
    for (int d = 0; d < p->local.rank; ++d)
      p->global[d] =
          mlirAttributeIsNull(gshape) ? p->local.dims[d] : mlirDenseI64ArrayGetElement(gshape, d);
    p->layout = placements_of(b, p, dict);
    tp_blocks_of(b, p, mlirDictionaryAttrGetElementByName(dict, str("nn.tp_blocks")));
    p->offset = take(&c.master, bytes);
    p->grad = take(grad_at, bytes);
    p->m = take(&c.master, bytes);
    p->v = take(&c.master, bytes);
    b->plan->mem.params += bytes;
    b->plan->mem.grads += bytes;
    b->plan->mem.moments += 2 * bytes;
    p->compute = -1;
    if (b->policy->mixed_precision) { // the ops read the bf16 copy
      p->compute = take(compute_at, copy_bytes(arg));
      b->plan->mem.compute_copies += copy_bytes(arg);
    }
    tp_buffer_set(b, arg, b->policy->mixed_precision ? p->compute : p->offset,
                  b->policy->mixed_precision ? TP_BUF_BF16 : TP_BUF_F32);
  }
  b->plan->persistent = b->policy->offload ? c.inputs : c.master;
}
