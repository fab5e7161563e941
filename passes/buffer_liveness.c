// The temporaries of the buffer plan: each op result lives from its
// definition to its last use (a value handed to nn.store_grad in its
// parameter's gradient slot), results that may share their operand's
// buffer take it (the op table's NN_BUFFER in_place), the rest are placed
// first fit (memory_plan.h) above the persistent region; and what is live
// at the peak, by phase.
#include <stdio.h>
#include <stdlib.h>

#include "buffer_plan_internal.h"
#include "memory_plan.h"
#include "shard_ops.h"

static MlirStringRef str(const char *s) { return mlirStringRefCreateFromCString(s); }

// Bytes of a buffer of `type` in its own element type.
static int64_t type_bytes(MlirType type) { return tp_buffer_bytes(type, TP_BUF_F32); }

// The most temporary bytes live at one op (of `nops`), and what they are:
// by the phase of the op that made each.
static void live_peak(tp_buffer_build *b, const tp_interval *iv, const int64_t *fixed,
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
  b->plan->mem.gathered_max = 0;
  for (int i = 0; i <= nops; ++i) {
    live_gathered += gathered[i];
    live += delta[i] + gathered[i];
    if (live > best) {
      best = live;
      at = i;
    }
    if (live_gathered > b->plan->mem.gathered_max)
      b->plan->mem.gathered_max = live_gathered;
  }
  free(delta);
  free(gathered);
  b->plan->mem.peak_live = best;
  int64_t by[4] = {0, 0, 0, 0};
  for (int j = 0; at >= 0 && j < n; ++j)
    if (!fixed[j] && iv[j].first <= at && at <= iv[j].last)
      by[(int)phase[j]] += iv[j].bytes;
  b->plan->mem.peak_forward = by[0];
  b->plan->mem.peak_backward = by[1];
  b->plan->mem.peak_optimizer = by[2];
  b->plan->mem.peak_gathered = by[3];
  for (int j = 0; at >= 0 && j < n; ++j)
    if (iv[j].first == at || (j + 1 == n)) { // the op defined at the peak
      MlirStringRef m = nn_module_of(owner[j]);
      snprintf(b->plan->mem.peak_module, sizeof b->plan->mem.peak_module, "%.*s", (int)m.length,
               m.data);
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
static void sum_in_place(tp_buffer_build *b, int64_t *fixed, const MlirValue *vals, size_t first,
                         int n) {
  for (int j = 0; j < n; ++j) {
    if (!fixed[j])
      continue;
    int at = j;
    for (int depth = 0; depth < 64 && mlirValueIsAOpResult(vals[at]); ++depth) {
      MlirOperation add = mlirOpResultGetOwner(vals[at]);
      tp_in_place how = tp_buffer_in_place(add);
      if (how != TP_IN_PLACE_SUM && how != TP_IN_PLACE_ALIAS && !tp_op_is(add, "shard.all_reduce"))
        break;
      MlirValue a = mlirOperationGetOperand(add, 0);
      intptr_t k;
      MlirOpOperand use = mlirValueGetFirstUse(a);
      if (!tp_ptr_map_get(&b->plan->index, a.ptr, &k) || (size_t)k < first ||
          (size_t)k >= first + (size_t)n || mlirOpOperandIsNull(use) ||
          !mlirOpOperandIsNull(mlirOpOperandGetNextUse(use)) || b->plan->dtypes[k] != TP_BUF_F32 ||
          b->plan->dtypes[first + (size_t)at] != TP_BUF_F32 || fixed[(size_t)k - first] ||
          type_bytes(mlirValueGetType(a)) != type_bytes(mlirValueGetType(vals[at])))
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
static void logits_grad_in_place(tp_buffer_build *b, tp_interval *iv, const int64_t *fixed,
                                 int *alias, const MlirValue *vals, size_t first, int n) {
  for (int j = 0; j < n; ++j) {
    if (!mlirValueIsAOpResult(vals[j]))
      continue;
    MlirOperation op = mlirOpResultGetOwner(vals[j]);
    if (tp_buffer_in_place(op) != TP_IN_PLACE_LAST_READ || mlirOperationGetNumResults(op) != 1)
      continue;
    intptr_t k;
    if (!tp_ptr_map_get(&b->plan->index, mlirOperationGetOperand(op, 0).ptr, &k) ||
        (size_t)k < first || (size_t)k >= first + (size_t)n)
      continue;
    int l = (int)((size_t)k - first);
    if (fixed[j] || fixed[l] || alias[l] || iv[l].last != iv[j].first ||
        iv[l].bytes != iv[j].bytes || b->plan->dtypes[k] != b->plan->dtypes[first + (size_t)j])
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
static void waits_in_place(tp_buffer_build *b, tp_interval *iv, const int64_t *fixed, int *alias,
                           const MlirValue *vals, size_t first, int n) {
  for (int j = 0; j < n; ++j) {
    if (!mlirValueIsAOpResult(vals[j]) ||
        tp_buffer_in_place(mlirOpResultGetOwner(vals[j])) != TP_IN_PLACE_ALIAS)
      continue;
    intptr_t k;
    MlirValue in = mlirOperationGetOperand(mlirOpResultGetOwner(vals[j]), 0);
    if (!tp_ptr_map_get(&b->plan->index, in.ptr, &k) || (size_t)k < first ||
        (size_t)k >= first + (size_t)n) {
      b->current = mlirOpResultGetOwner(vals[j]);
      tp_buffer_fail(b, "nn.wait of a value no collective of the step defines");
      continue;
    }
    int l = (int)((size_t)k - first);
    if (fixed[j] != fixed[l]) {
      b->current = mlirOpResultGetOwner(vals[j]);
      tp_buffer_fail(b, "internal error: an nn.wait and its collective in "
                        "different gradient slots");
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
void tp_buffer_plan_temporaries(tp_buffer_build *b) {
  int nops = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(b->body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    nops += (int)mlirOperationGetNumResults(op);
  tp_interval *iv = calloc((size_t)nops + 1, sizeof *iv);
  int64_t *fixed = calloc((size_t)nops + 1, sizeof *fixed);
  // 0 forward, 1 backward, 2 optimizer, 3 a parameter gathered over dp
  char *phase = calloc((size_t)nops + 1, 1);
  MlirValue *vals = calloc((size_t)nops + 1, sizeof *vals);
  MlirOperation *owner = calloc((size_t)nops + 1, sizeof *owner);
  bool backward_seen = false;
  size_t first = b->plan->num_values;
  int n = 0, index = 0;
  MlirOperation prev = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(b->body); !mlirOperationIsNull(op);
       prev = op, op = mlirOperationGetNextInBlock(op), ++index) {
    // A fused norm writes its result while the add reads its operands: the
    // result must not share their memory.
    int defined =
        tp_buffer_fused_norm(b->plan, b->policy->mixed_precision, prev, op) ? index - 1 : index;
    for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); ++i) {
      intptr_t k;
      if (!tp_ptr_map_get(&b->plan->index, mlirOperationGetOperand(op, i).ptr, &k) ||
          (size_t)k < first)
        continue; // an argument: persistent
      int j = (int)((size_t)k - first);
      iv[j].last = index;
      if (nn_op_kind_of(op) == NN_OP_STORE_GRAD) {
        const tp_program_param *p =
            tp_buffer_param_named(b, mlirOperationGetAttributeByName(op, str("nn.grad_of")));
        if (!p) {
          b->current = op;
          tp_buffer_fail(b, "nn.store_grad: nn.grad_of does not name a "
                            "parameter of the step");
        }
        fixed[j] = p ? p->grad + 1 : 0; // +1: 0 means "not fixed"
        if (b->plan->dtypes[k] != TP_BUF_F32) {
          b->current = op;
          tp_buffer_fail(b, "internal error: a gradient stored to its parameter is not fp32");
        }
      }
    }
    MlirOperation started =
        nn_op_kind_of(op) == NN_OP_WAIT ? waited_collective(op) : (MlirOperation){NULL};
    for (intptr_t i = 0; !mlirOperationIsNull(started) && i < mlirOperationGetNumOperands(started);
         ++i) {
      intptr_t k;
      if (tp_ptr_map_get(&b->plan->index, mlirOperationGetOperand(started, i).ptr, &k) &&
          (size_t)k >= first)
        iv[(size_t)k - first].last = index;
    }
    nn_op_phase ph = nn_op_phase_of(nn_op_kind_of(op));
    backward_seen |= ph == NN_PHASE_BACKWARD;
    for (intptr_t i = 0; i < mlirOperationGetNumResults(op); ++i) {
      MlirValue v = mlirOperationGetResult(op, i);
      int dtype = tp_buffer_result_dtype(b, op, i);
      // A collective (no nn phase) counts with the ops around it, but for
      // the FSDP gather of a parameter (an argument).
      bool gathered = tp_op_is(op, "shard.all_gather") &&
                      mlirValueIsABlockArgument(mlirOperationGetOperand(op, 0));
      phase[n] = gathered                                   ? 3
                 : ph == NN_PHASE_OPTIMIZER                 ? 2
                 : ph == NN_PHASE_BACKWARD || backward_seen ? 1
                                                            : 0;
      owner[n] = op;
      vals[n] = v;
      iv[n] = (tp_interval){defined, index, tp_buffer_bytes(mlirValueGetType(v), dtype), 0};
      // Defined before later ops look its dtype up (offset set below).
      tp_buffer_set(b, v, -1, dtype);
      ++n;
    }
  }
  intptr_t logits;
  if (b->policy->keep_logits && tp_ptr_map_get(&b->plan->index, b->plan->logits.ptr, &logits))
    iv[(size_t)logits - first].last = index;
  sum_in_place(b, fixed, vals, first, n);
  int *alias = calloc((size_t)nops + 1, sizeof *alias);
  logits_grad_in_place(b, iv, fixed, alias, vals, first, n);
  waits_in_place(b, iv, fixed, alias, vals, first, n);
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
  b->plan->arena = tp_plan_memory(free_iv, nfree, b->plan->persistent);
  for (int j = 0, k = 0; j < n; ++j)
    b->plan->offsets[first + (size_t)j] = fixed[j]   ? fixed[j] - 1
                                          : alias[j] ? -1
                                                     : free_iv[k++].offset;
  for (int j = 0; j < n; ++j)
    if (alias[j])
      b->plan->offsets[first + (size_t)j] = b->plan->offsets[first + (size_t)alias[j] - 1];
  live_peak(b, iv, skip, phase, owner, n, index);
  free(alias);
  free(skip);
  free(iv);
  free(fixed);
  free(free_iv);
  free(phase);
  free(owner);
  free(vals);
}
