// The program table of a lowered step (program_table.h): LLVM types from
// program.h's field lists, and the globals that fill them.
#include "program_table.h"

#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "shardrt/program.h"

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

enum field_kind { FK_I32, FK_I64, FK_F64, FK_PLACEMENT, FK_STR, FK_PARAMS, FK_STEP, FK_BACKEND };

static MlirType kind_type(lb_builder *b, enum field_kind k) {
  switch (k) {
  case FK_I32: return b->i32;
  case FK_I64: return b->i64;
  case FK_F64: return b->f64;
  case FK_PLACEMENT: { // srt_placement: {srt_placement_kind kind; int dim;}
    MlirType two[2] = {b->i32, b->i32};
    return mlirLLVMStructTypeLiteralGet(b->ctx, 2, two, false);
  }
  default: return b->ptr;
  }
}

#define FIELD_TYPE(kind, name) kind_type(b, FK_##kind),
#define ARRAY_TYPE(kind, name, n) mlirLLVMArrayTypeGet(kind_type(b, FK_##kind), n),

MlirType tp_param_info_type(lb_builder *b) {
  MlirType fields[] = {SRT_PARAM_INFO_FIELDS(FIELD_TYPE, ARRAY_TYPE)};
  return mlirLLVMStructTypeLiteralGet(b->ctx, sizeof fields / sizeof *fields, fields, false);
}

MlirType tp_program_type(lb_builder *b) {
  MlirType fields[] = {SRT_PROGRAM_FIELDS(FIELD_TYPE, ARRAY_TYPE)};
  return mlirLLVMStructTypeLiteralGet(b->ctx, sizeof fields / sizeof *fields, fields, false);
}

// Field indices, by name.
#define FIELD_INDEX(kind, name) kParam_##name,
#define ARRAY_INDEX(kind, name, n) kParam_##name,
enum { SRT_PARAM_INFO_FIELDS(FIELD_INDEX, ARRAY_INDEX) };
#undef FIELD_INDEX
#undef ARRAY_INDEX
#define FIELD_INDEX(kind, name) kProgram_##name,
#define ARRAY_INDEX(kind, name, n) kProgram_##name,
enum { SRT_PROGRAM_FIELDS(FIELD_INDEX, ARRAY_INDEX) };

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

// An aggregate being filled: its value so far and the path prefix of its
// position in the enclosing value (the element of an array of structs).
typedef struct aggregate {
  lb_builder *b;
  MlirValue value;
  int depth;
  int64_t prefix[2];
} aggregate;

// Sets the field at path prefix + (f[, i[, j]]) (n of them) to v.
static void set(aggregate *a, MlirValue v, int n, int64_t f, int64_t i, int64_t j) {
  int64_t path[5];
  int len = 0;
  for (int k = 0; k < a->depth; ++k)
    path[len++] = a->prefix[k];
  int64_t rest[3] = {f, i, j};
  for (int k = 0; k < n; ++k)
    path[len++] = rest[k];
  a->value = lb_insert(a->b, a->value, v, len, path);
}

static void set_i32(aggregate *a, int64_t f, int64_t v) {
  set(a, lb_const_int(a->b, a->b->i32, v), 1, f, 0, 0);
}
static void set_i64(aggregate *a, int64_t f, int64_t v) {
  set(a, lb_const_int(a->b, a->b->i64, v), 1, f, 0, 0);
}
static void set_ptr(aggregate *a, int64_t f, const char *symbol) {
  set(a, symbol ? lb_address_of(a->b, symbol) : lb_zero(a->b, a->b->ptr), 1, f, 0, 0);
}
static void set_i64_array(aggregate *a, int64_t f, int n, const int64_t *v) {
  for (int i = 0; i < n; ++i)
    set(a, lb_const_int(a->b, a->b->i64, v[i]), 2, f, i, 0);
}
// Element `i` of the srt_placement array at field f.
static void set_placement(aggregate *a, int64_t f, int i, tp_placement p) {
  srt_placement_kind kind = p.kind == TP_SHARD     ? SRT_SHARD
                            : p.kind == TP_PARTIAL ? SRT_PARTIAL
                                                   : SRT_REPLICATE;
  set(a, lb_const_int(a->b, a->b->i32, kind), 3, f, i, 0);
  set(a, lb_const_int(a->b, a->b->i32, p.kind == TP_SHARD ? p.dim : 0), 3, f, i, 1);
}

static void param_info(aggregate *a, const tp_program_param *p, const char *name) {
  set_ptr(a, kParam_name, name);
  set_i32(a, kParam_init, p->init);
  set_i32(a, kParam_rank, p->local.rank);
  int64_t global[SRT_MAX_RANK], local[SRT_MAX_RANK];
  for (int d = 0; d < SRT_MAX_RANK; ++d) {
    global[d] = d < p->local.rank ? p->global[d] : 1;
    local[d] = d < p->local.rank ? p->local.dims[d] : 1;
  }
  set_i64_array(a, kParam_global_shape, SRT_MAX_RANK, global);
  set_i64_array(a, kParam_local_shape, SRT_MAX_RANK, local);
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    set_placement(a, kParam_placement, axis, p->layout.on[axis]);
  set_i64(a, kParam_offset, p->offset);
  set_i64(a, kParam_grad_offset, p->grad);
  set_i64(a, kParam_m_offset, p->m);
  set_i64(a, kParam_v_offset, p->v);
  set_i64(a, kParam_compute_offset, p->compute);
  set_i64(a, kParam_zero_row, p->zero_row);
  set_i32(a, kParam_num_tp_blocks, p->num_tp_blocks);
  int64_t blocks[SRT_MAX_TP_BLOCKS] = {0};
  for (int b = 0; b < p->num_tp_blocks; ++b)
    blocks[b] = p->tp_blocks[b];
  set_i64_array(a, kParam_tp_blocks, SRT_MAX_TP_BLOCKS, blocks);
}

// The logits' placements: Shard(d) where the local size differs from the
// global [batch, seq, vocab]: the batch over dp; the sequence (sequence
// parallel) or the vocabulary over tp.
static tp_placement logits_placement(const tp_program_desc *d, int axis) {
  // The graph's view under cp: the rows cut into cp chunk rows.
  const int64_t global[3] = {d->batch * d->cp, d->seq / d->cp, d->vocab};
  int dim = -1;
  for (int k = axis == 0 ? 0 : 1; d->keep_logits && d->logits.rank == 3 && k < (axis == 0 ? 1 : 3);
       ++k)
    if (d->logits.dims[k] != global[k])
      dim = k;
  return dim >= 0 ? TP_S(dim) : TP_R;
}

static void program(aggregate *a, const tp_program_desc *d) {
  set_i32(a, kProgram_abi, SRT_PROGRAM_ABI);
  set_ptr(a, kProgram_model, "model_path");
  set_ptr(a, kProgram_config_json, "config_json");
  set_ptr(a, kProgram_checkpoint_names, "checkpoint_names");
  set_ptr(a, kProgram_tokenizer_json, "tokenizer_json");
  int64_t dp = d->mesh.size[0] / d->cp;
  set_i64(a, kProgram_dp, dp);
  set_i64(a, kProgram_cp, d->cp);
  set_i64(a, kProgram_tp, d->mesh.size[1]);
  set_i64(a, kProgram_batch, d->batch);
  set_i64(a, kProgram_seq, d->seq);
  set_i64(a, kProgram_local_batch, d->batch / dp / (d->accum > 0 ? d->accum : 1));
  set_i32(a, kProgram_grad_accum_steps, d->accum > 0 ? d->accum : 1);
  set_i64(a, kProgram_vocab, d->vocab);
  set(a, lb_const_f64(a->b, d->initializer_range), 1, kProgram_initializer_range, 0, 0);
  set(a, lb_const_f64(a->b, d->flops_per_token), 1, kProgram_flops_per_token, 0, 0);
  set_i64(a, kProgram_arena_bytes, d->arena);
  set_i64(a, kProgram_persistent_bytes, d->persistent);
  set_i64(a, kProgram_offload_bytes, d->offload);
  set_i64(a, kProgram_input_ids_offset, d->ids_offset);
  set_i64(a, kProgram_labels_offset, d->labels_offset);
  set_i64(a, kProgram_position_ids_offset, d->position_ids_offset);
  set_i64(a, kProgram_segment_ids_offset, d->segment_ids_offset);
  set_i32(a, kProgram_num_params, d->num_params);
  set_ptr(a, kProgram_params, "params");
  set_ptr(a, kProgram_step, d->step);
  set_i32(a, kProgram_logits_kept, d->keep_logits);
  set_i64(a, kProgram_logits_offset, d->keep_logits ? d->logits_offset : -1);
  int64_t shape[3];
  for (int k = 0; k < 3; ++k)
    shape[k] = d->keep_logits && k < d->logits.rank ? d->logits.dims[k] : 0;
  set_i64_array(a, kProgram_logits_local_shape, 3, shape);
  for (int axis = 0; axis < TP_MESH_AXES; ++axis)
    set_placement(a, kProgram_logits_placement, axis, logits_placement(d, axis));
  set_ptr(a, kProgram_backend, d->backend);
}

void tp_emit_program_table(lb_builder *b, const tp_program_desc *d) {
  char name[32];
  for (int i = 0; i < d->num_params; ++i) {
    snprintf(name, sizeof name, "param_name_%d", i);
    lb_global_string(b, name, d->params[i].name.data, d->params[i].name.length);
  }
  lb_global_string(b, "model_path", d->model, strlen(d->model));
  lb_global_string(b, "config_json", d->config_json.data, d->config_json.length);
  lb_global_string(b, "checkpoint_names", d->checkpoint_names.data,
                   d->checkpoint_names.length);
  lb_global_string(b, "tokenizer_json", d->tokenizer_json.data, d->tokenizer_json.length);

  // srt_param_info params[num_params] (one zero entry when there is none).
  int n = d->num_params > 0 ? d->num_params : 1;
  MlirType info = tp_param_info_type(b);
  MlirType array = mlirLLVMArrayTypeGet(info, (unsigned)n);
  MlirBlock init;
  lb_global(b, "params", array, false, &init);
  lb_builder ib = *b;
  ib.block = init;
  aggregate a = {&ib, lb_zero(&ib, array), 1, {0}};
  for (int i = 0; i < d->num_params; ++i) {
    a.prefix[0] = i;
    snprintf(name, sizeof name, "param_name_%d", i);
    param_info(&a, &d->params[i], name);
  }
  lb_return(&ib, a.value);

  MlirType type = tp_program_type(b);
  lb_global(b, "shard_program", type, true, &init);
  ib.block = init;
  a = (aggregate){&ib, lb_zero(&ib, type), 0, {0}};
  program(&a, d);
  lb_return(&ib, a.value);
  // Defined by the backend's library (libshardrt for the cpu's).
  lb_global(b, d->backend, mlirLLVMArrayTypeGet(mlirIntegerTypeGet(b->ctx, 8), 1), true, NULL);
}
