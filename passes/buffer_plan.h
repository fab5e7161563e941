// The buffer plan of a partitioned training step: where every value of the
// step lives in the rank's one arena and in which element type, the
// parameter table, the regions of the arena and the memory figures. It is
// built from the step function, the mesh and a policy (mixed precision,
// offload, keep-logits), reads per-op facts from the op table
// (shardrt/ops.def: NN_BUFFER), and is plain data afterwards:
// lower-to-runtime emits its calls from it, shard-opt --report shows it.
//
// The arena: [0, persistent) holds each parameter's fp32 weights, gradient,
// AdamW m and v (and its bf16 compute copy under mixed precision), then the
// input ids and labels; with offload the fp32 weights and moments of every
// parameter come first, [0, offload), a prefix the device never holds.
// [persistent, arena) holds the temporaries, each placed by liveness
// (memory_plan.h), gradients summed in their parameter's slot and in-place
// results in their operand's buffer.
#ifndef SHARD_PASSES_BUFFER_PLAN_H
#define SHARD_PASSES_BUFFER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory_report.h"
#include "mlir-c/IR.h"
#include "nn.h"
#include "program_table.h"
#include "ptr_map.h"
#include "sharding_rules.h"
#include "shardrt/ops.h"

/// Element types of arena buffers: TP_BUF_F32 and TP_BUF_BF16 are
/// srt_op_dtype values; TP_BUF_I64 (input ids, labels) is never an op's.
enum { TP_BUF_F32 = SRT_OP_F32, TP_BUF_BF16 = SRT_OP_BF16, TP_BUF_I64 = 2 };

/// What the plan is for.
typedef struct tp_buffer_policy {
  /// Mixed precision (backend=cuda, or param-dtype bf16 on the cpu): bf16
  /// activations and a bf16 compute copy of each parameter; fp32 where the
  /// op table says (NN_BUFFER).
  bool mixed_precision;
  /// The backend the plan is for ("cpu", "cuda"): named in the memory figures.
  const char *backend;
  /// The fp32 weights and moments in a host-only prefix (mixed precision only).
  bool offload;
  /// The logits (the lm_head linear's [B, S, V] result) live to the end of
  /// the step; refused with mixed precision or Partial logits.
  bool keep_logits;
  /// The ops' own scratch is counted (the cpu kernels' formulas; the
  /// attention's context-parallel K/V gather is counted either way).
  bool count_workspace;
  /// The bf16 cpu backend's staging is counted in the scratch: the fp32
  /// copies of the largest op's bf16 operands and results
  /// (runtime/cpu/bf16_stage.h).
  bool count_bf16_staging;
  const char *pass; // names the errors (tp_verror)
} tp_buffer_policy;

/// The plan. Offsets are bytes from the arena's start.
typedef struct tp_buffer_plan {
  /// Every value of the step (arguments and op results): its offset and
  /// element type (TP_BUF_*), by MlirValue.ptr -> index into the arrays.
  tp_ptr_map index;
  int64_t *offsets;
  char *dtypes;
  size_t num_values, cap;
  /// The parameters in argument order (nn.param arguments).
  tp_program_param *params;
  int num_params;
  /// Regions: the persistent region's end, the host-only prefix's end (0
  /// without offload), the input ids and labels, the arena's end.
  int64_t persistent, offload, ids_offset, labels_offset, arena;
  // position_ids and segment_ids (int64 [local_batch, seq], arguments 2
  // and 3), or -1 for a step that takes only input_ids and labels.
  int64_t position_ids_offset, segment_ids_offset;
  /// The logits kept (policy keep_logits), else null.
  MlirValue logits;
  /// The global vocabulary (the embedding's rows times its tp parts), 0 if
  /// none.
  int64_t vocab;
  /// The memory figures but those of the lowering's own staging (the
  /// buckets': tp_buffer_plan_figures adds them).
  tp_memory_figures mem;
} tp_buffer_plan;

/// Builds the plan of step function `func` (its first block: input_ids and
/// labels, then nn.param arguments; one nn.optimizer_step) on `mesh`.
/// Returns false after reporting each error at its op (tp_verror, the
/// policy's pass name): bad parameter attributes, a gradient stored to no
/// parameter, a refused keep-logits, out of memory. `plan` is then to be
/// freed all the same.
bool tp_buffer_plan_build(MlirOperation func, const tp_mesh *mesh, const tp_buffer_policy *policy,
                          tp_buffer_plan *plan);

/// Frees what the plan holds (not `plan` itself).
void tp_buffer_plan_free(tp_buffer_plan *plan);

/// The offset and element type of value `v`; false if the plan has no
/// buffer for it.
bool tp_buffer_of(const tp_buffer_plan *plan, MlirValue v, int64_t *offset, int *dtype);

/// Whether `norm` is an nn.rms_norm of the bf16 result of `add`, the nn.add
/// just before it, under mixed precision: the two run as one call
/// (srt_op_add_rms_norm) at the add, so the plan defines the norm's result
/// there too.
bool tp_buffer_fused_norm(const tp_buffer_plan *plan, bool mixed_precision, MlirOperation add,
                          MlirOperation norm);

/// Completes the figures of the plan for a step of `accum` micro-batches:
/// the mesh, batch and sequence, the offload split, the temporaries, and
/// the total with `staging` bytes of the runtime's own (bucket staging).
void tp_buffer_plan_figures(tp_buffer_plan *plan, MlirOperation func, const tp_mesh *mesh,
                            const tp_buffer_policy *policy, int64_t accum, int64_t staging);

#endif // SHARD_PASSES_BUFFER_PLAN_H
