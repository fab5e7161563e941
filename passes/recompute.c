// Activation checkpointing: recomputing forward segments before their
// backward (see recompute.h).
#include "recompute.h"

#include <stdlib.h>
#include <string.h>

#include "nn.h"

bool tp_recompute_parse(const char *text, tp_recompute_mode *mode) {
  static const char *const names[] = {"none", "full", "attention"};
  for (int i = 0; i < 3; ++i)
    if (!strcmp(text, names[i])) {
      *mode = (tp_recompute_mode)i;
      return true;
    }
  return false;
}

static bool has_prefix(MlirStringRef m, MlirStringRef p) {
  return p.length && m.length >= p.length && !memcmp(m.data, p.data, p.length) &&
         (m.length == p.length || m.data[p.length] == '.');
}

// The segment of `op`: its layer (full), or the module of the nn.attention
// whose submodule it is (attention); length 0 for none.
static MlirStringRef segment_of(const tp_recompute *rc, MlirOperation op) {
  MlirStringRef m = nn_module_of(op);
  if (rc->mode == TP_RECOMPUTE_FULL)
    return (MlirStringRef){m.data, nn_layer_prefix(m)};
  for (size_t i = 0; rc->mode == TP_RECOMPUTE_ATTENTION && i < rc->num_ops; ++i)
    if (nn_op_kind_of(rc->ops[i]) == NN_OP_ATTENTION && has_prefix(m, nn_module_of(rc->ops[i])))
      return nn_module_of(rc->ops[i]);
  return (MlirStringRef){NULL, 0};
}

static bool is_done(const tp_recompute *rc, MlirStringRef seg) {
  for (size_t i = 0; i < rc->num_done; ++i)
    if (strlen(rc->done[i]) == seg.length && !memcmp(rc->done[i], seg.data, seg.length))
      return true;
  return false;
}

static void mark_done(tp_recompute *rc, MlirStringRef seg) {
  if (rc->num_done == rc->cap_done) {
    rc->cap_done = rc->cap_done ? 2 * rc->cap_done : 64;
    rc->done = realloc(rc->done, rc->cap_done * sizeof *rc->done);
  }
  char *s = malloc(seg.length + 1);
  memcpy(s, seg.data, seg.length);
  s[seg.length] = 0;
  rc->done[rc->num_done++] = s;
}

static void add_clone(tp_recompute *rc, MlirOperation clone) {
  if (rc->num_clones == rc->cap_clones) {
    rc->cap_clones = rc->cap_clones ? 2 * rc->cap_clones : 256;
    rc->clones = realloc(rc->clones, rc->cap_clones * sizeof *rc->clones);
  }
  rc->clones[rc->num_clones++] = clone;
}

void tp_recompute_before(tp_recompute *rc, MlirBlock block, size_t index) {
  if (rc->mode == TP_RECOMPUTE_NONE)
    return;
  MlirStringRef seg = segment_of(rc, rc->ops[index]);
  if (!seg.length || is_done(rc, seg))
    return;
  mark_done(rc, seg);
  for (size_t i = 0; i <= index; ++i) {
    MlirOperation op = rc->ops[i];
    MlirStringRef s = segment_of(rc, op);
    if (s.length != seg.length || memcmp(s.data, seg.data, seg.length) ||
        nn_op_kind_of(op) == NN_OP_NONE)
      continue;
    MlirOperation clone = mlirOperationClone(op);
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(clone); ++k)
      mlirOperationSetOperand(clone, k,
                              tp_recompute_value(rc, mlirOperationGetOperand(clone, k)));
    mlirBlockAppendOwnedOperation(block, clone);
    for (intptr_t k = 0; k < mlirOperationGetNumResults(op); ++k)
      tp_ptr_map_put(&rc->clone_of, mlirOperationGetResult(op, k).ptr,
                     (intptr_t)mlirOperationGetResult(clone, k).ptr);
    add_clone(rc, clone);
  }
}

MlirValue tp_recompute_value(const tp_recompute *rc, MlirValue v) {
  intptr_t c;
  return tp_ptr_map_get(&rc->clone_of, v.ptr, &c) ? (MlirValue){(void *)c} : v;
}

void tp_recompute_finish(tp_recompute *rc) {
  for (size_t i = rc->num_clones; i-- > 0;) { // users before what they read
    MlirOperation op = rc->clones[i];
    bool used = false;
    for (intptr_t k = 0; k < mlirOperationGetNumResults(op) && !used; ++k)
      used = !mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(op, k)));
    if (!used)
      mlirOperationDestroy(op);
  }
  for (size_t i = 0; i < rc->num_done; ++i)
    free(rc->done[i]);
  free(rc->done);
  free(rc->clones);
  tp_ptr_map_free(&rc->clone_of);
  memset(rc, 0, sizeof *rc);
}
