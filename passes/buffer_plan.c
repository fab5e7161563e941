// The buffer plan (buffer_plan.h): the values' index, the checks of the
// policy, and the order of the parts: the persistent region
// (buffer_params.c), then the temporaries (buffer_liveness.c), then the
// figures.
#include "buffer_plan.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_plan_internal.h"
#include "diagnostic.h"
#include "shard_ops.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

void tp_buffer_fail(tp_buffer_build *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tp_verror(b->current, b->policy->pass, fmt, ap);
  va_end(ap);
  ++b->errors;
}

void tp_buffer_set(tp_buffer_build *b, MlirValue v, int64_t offset, int dtype) {
  tp_buffer_plan *p = b->plan;
  if (p->num_values == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 1024;
    p->offsets = realloc(p->offsets, p->cap * sizeof *p->offsets);
    p->dtypes = realloc(p->dtypes, p->cap);
  }
  tp_ptr_map_put(&p->index, v.ptr, (intptr_t)p->num_values);
  p->dtypes[p->num_values] = (char)dtype;
  p->offsets[p->num_values++] = offset;
}

size_t tp_buffer_index(tp_buffer_build *b, MlirValue v) {
  intptr_t i;
  if (tp_ptr_map_get(&b->plan->index, v.ptr, &i))
    return (size_t)i;
  tp_buffer_fail(b, "internal error: a value has no buffer");
  return (size_t)-1;
}

int tp_buffer_dtype_of(tp_buffer_build *b, MlirValue v) {
  size_t i = tp_buffer_index(b, v);
  return i == (size_t)-1 ? TP_BUF_F32 : b->plan->dtypes[i];
}

int64_t tp_buffer_bytes(MlirType type, int dtype) {
  nn_shape s;
  if (!nn_shape_of(type, &s))
    return 0;
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i)
    n *= s.dims[i];
  if (mlirTypeIsAFloat(s.element))
    return n * (dtype == TP_BUF_BF16 ? 2 : (mlirFloatTypeGetWidth(s.element) + 7) / 8);
  return n * ((mlirIntegerTypeGetWidth(s.element) + 7) / 8);
}

bool tp_buffer_of(const tp_buffer_plan *plan, MlirValue v, int64_t *offset, int *dtype) {
  intptr_t i;
  if (!tp_ptr_map_get(&plan->index, v.ptr, &i))
    return false;
  *offset = plan->offsets[i];
  *dtype = plan->dtypes[i];
  return true;
}

bool tp_buffer_fused_norm(const tp_buffer_plan *plan, bool mixed_precision, MlirOperation add,
                          MlirOperation norm) {
  if (!mixed_precision || mlirOperationIsNull(add) || mlirOperationIsNull(norm) ||
      nn_op_kind_of(add) != NN_OP_ADD || nn_op_kind_of(norm) != NN_OP_RMS_NORM)
    return false;
  MlirValue sum = mlirOperationGetResult(add, 0);
  int64_t at;
  int a = TP_BUF_F32, c = TP_BUF_F32;
  // Both operands bf16: an add of mixed dtypes is lowered (and refused) alone.
  return mlirOperationGetOperand(norm, 0).ptr == sum.ptr &&
         tp_buffer_of(plan, mlirOperationGetOperand(add, 0), &at, &a) && a == TP_BUF_BF16 &&
         tp_buffer_of(plan, mlirOperationGetOperand(add, 1), &at, &c) && c == TP_BUF_BF16;
}

// The result of the forward nn.linear whose nn.module is "lm_head", or null.
static MlirValue find_logits(MlirBlock body) {
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (nn_op_kind_of(op) == NN_OP_LINEAR && mlirStringRefEqual(nn_module_of(op), str("lm_head")))
      return mlirOperationGetResult(op, 0);
  return (MlirValue){NULL};
}

// Checks the keep-logits request: an lm_head output that one rank's buffer
// holds whole, in fp32.
static bool check_keep_logits(tp_buffer_build *b) {
  if (b->policy->mixed_precision) {
    if (!strcmp(b->policy->backend, "cuda"))
      tp_buffer_fail(b, "keep-logits is only available on the cpu backend (the cuda backend "
                        "keeps logits in bf16 on the device)");
    else
      tp_buffer_fail(b, "keep-logits needs fp32 logits: compile with param-dtype f32 (the "
                        "bf16 step keeps its logits in bf16)");
    return false;
  }
  MlirValue logits = find_logits(b->body);
  nn_shape s = {0};
  if (mlirValueIsNull(logits) || !nn_shape_of(mlirValueGetType(logits), &s) || s.rank != 3) {
    tp_buffer_fail(b, "keep-logits: the step has no nn.linear with nn.module \"lm_head\" and "
                      "a [batch, seq, vocab] result");
    return false;
  }
  for (MlirOpOperand u = mlirValueGetFirstUse(logits); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u))
    if (tp_op_is(mlirOpOperandGetOwner(u), "shard.all_reduce")) {
      tp_buffer_fail(b, "keep-logits: the lm_head output is Partial "
                        "(all-reduced afterwards), "
                        "so no rank's buffer holds its logits");
      return false;
    }
  b->plan->logits = logits;
  return true;
}

// The global vocabulary: the last embedding's local rows, times the tp
// size when its rows are split over tp.
static int64_t vocab_of(const tp_buffer_build *b) {
  int64_t vocab = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(b->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_shape w = {0};
    if (nn_op_kind_of(op) == NN_OP_EMBEDDING &&
        nn_shape_of(mlirValueGetType(mlirOperationGetOperand(op, 1)), &w))
      vocab =
          w.dims[0] * (nn_attr_int(op, "nn.vocab_parallel_axis", -1) >= 0 ? b->mesh.size[1] : 1);
  }
  return vocab;
}

bool tp_buffer_plan_build(MlirOperation func, const tp_mesh *mesh, const tp_buffer_policy *policy,
                          tp_buffer_plan *plan) {
  tp_buffer_build b = {.plan = plan,
                       .policy = policy,
                       .mesh = *mesh,
                       .func = func,
                       .current = func,
                       .body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0))};
  if (policy->keep_logits && !check_keep_logits(&b))
    return false;
  tp_buffer_plan_params(&b);
  tp_buffer_plan_temporaries(&b);
  if (plan->arena < 0)
    tp_buffer_fail(&b, "out of memory planning the arena");
  plan->vocab = vocab_of(&b);
  return !b.errors;
}

void tp_buffer_plan_free(tp_buffer_plan *plan) {
  tp_ptr_map_free(&plan->index);
  free(plan->offsets);
  free(plan->dtypes);
  free(plan->params);
}

// The bytes of the fp32 copy of `v` when its buffer is bf16 (64-byte
// aligned), else 0; its offset in *offset.
static int64_t fp32_copy(const tp_buffer_plan *plan, MlirValue v, int64_t *offset) {
  int dtype = TP_BUF_F32;
  nn_shape s = {0};
  if (!tp_buffer_of(plan, v, offset, &dtype) || dtype != TP_BUF_BF16 ||
      !nn_shape_of(mlirValueGetType(v), &s))
    return 0;
  int64_t count = 1;
  for (int d = 0; d < s.rank; ++d)
    count *= s.dims[d];
  return 4 * count + 64;
}

// The bf16 cpu backend's staging (runtime/cpu/bf16_stage.h): the most
// bytes of fp32 copies one op's bf16 operands and results take, a result
// in place of an operand sharing its copy. The collectives and their waits
// stage nothing: they move and sum bf16 as bf16.
static int64_t bf16_staging(const tp_buffer_plan *plan, MlirBlock body) {
  int64_t most = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (tp_is_collective(op) || tp_op_is(op, "nn.wait"))
      continue;
    int64_t bytes = 0, at, in_at;
    intptr_t ins = mlirOperationGetNumOperands(op);
    for (intptr_t i = 0; i < ins; ++i)
      bytes += fp32_copy(plan, mlirOperationGetOperand(op, i), &at);
    for (intptr_t r = 0; r < mlirOperationGetNumResults(op); ++r) {
      int64_t copy = fp32_copy(plan, mlirOperationGetResult(op, r), &at);
      for (intptr_t i = 0; i < ins && copy; ++i)
        if (fp32_copy(plan, mlirOperationGetOperand(op, i), &in_at) == copy && in_at == at)
          copy = 0; // in place: the operand's copy
      bytes += copy;
    }
    most = bytes > most ? bytes : most;
  }
  return most;
}

void tp_buffer_plan_figures(tp_buffer_plan *plan, MlirOperation func, const tp_mesh *mesh,
                            const tp_buffer_policy *policy, int64_t accum, int64_t staging) {
  tp_memory_figures *m = &plan->mem;
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  nn_shape ids = {0};
  nn_shape_of(mlirValueGetType(mlirBlockGetArgument(body, 0)), &ids);
  m->backend = policy->backend;
  // Axis 0 is dp x cp, and a rank's rows are cp chunk rows (tp-plan's check_cp).
  m->cp_traffic = tp_cp_traffic_of(mlirOperationGetParentOperation(func), func,
                                   policy->mixed_precision ? 2 : 4);
  m->cp = m->cp_traffic.cp;
  m->dp = mesh->size[0] / m->cp;
  m->tp = mesh->size[1];
  m->fsdp = false;
  for (int i = 0; i < plan->num_params; ++i)
    m->fsdp |= plan->params[i].layout.on[0].kind == TP_SHARD;
  m->micro_batch = ids.dims[0];
  m->accum = accum;
  m->batch = m->micro_batch * m->dp * accum;
  m->seq = ids.dims[1] * m->cp;
  m->persistent = plan->persistent;
  m->cpu_offload = policy->offload;
  if (policy->offload) { // the prefix stays on the host; the host mirrors the
                         // rest
    m->host_params = m->params;
    m->host_moments = m->moments;
    m->params = m->moments = 0;
    m->persistent = plan->persistent - plan->offload;
    m->host_staging = m->persistent;
    m->host_total = plan->persistent;
  }
  m->temporaries = plan->arena - plan->persistent;
  m->workspace = tp_buffer_workspace(body, policy) +
                  (policy->count_bf16_staging ? bf16_staging(plan, body) : 0) + staging;
  m->total = m->persistent + m->temporaries + m->workspace;
}
