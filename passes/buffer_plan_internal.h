// The state of one tp_buffer_plan_build (buffer_plan.c), shared by the
// files that build the plan's parts: buffer_params.c (the persistent
// region), buffer_liveness.c (the temporaries) and buffer_facts.c (the
// op table's NN_BUFFER columns). Private to them.
#ifndef SHARD_PASSES_BUFFER_BUILD_H
#define SHARD_PASSES_BUFFER_BUILD_H

#include "buffer_plan.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "nn.h"

typedef struct tp_buffer_build {
  tp_buffer_plan *plan;
  const tp_buffer_policy *policy;
  tp_mesh mesh;
  MlirOperation func, current; // current: where errors are reported
  MlirBlock body;
  int errors;
} tp_buffer_build;

/// Reports an error at b->current (tp_verror, the policy's pass) and counts it.
__attribute__((format(printf, 2, 3))) void tp_buffer_fail(tp_buffer_build *b, const char *fmt, ...);

/// Records value `v` at `offset` with element type `dtype` (TP_BUF_*).
void tp_buffer_set(tp_buffer_build *b, MlirValue v, int64_t offset, int dtype);

/// The index of `v` in the plan's arrays; (size_t)-1 after an error if none.
size_t tp_buffer_index(tp_buffer_build *b, MlirValue v);

/// The element type of `v`'s buffer (TP_BUF_F32 after an error if none).
int tp_buffer_dtype_of(tp_buffer_build *b, MlirValue v);

/// Bytes of a buffer of `type` stored as `dtype` (a float tensor stored as
/// bf16 takes 2 bytes per element); 0 for an unranked type.
int64_t tp_buffer_bytes(MlirType type, int dtype);

/// The parameter named by string attribute `name`, or NULL.
const tp_program_param *tp_buffer_param_named(const tp_buffer_build *b, MlirAttribute name);

/// The persistent region: the parameter table, input ids and labels
/// (buffer_params.c).
void tp_buffer_plan_params(tp_buffer_build *b);

/// The temporaries: liveness, in-place results, the arena, the peak
/// (buffer_liveness.c).
void tp_buffer_plan_temporaries(tp_buffer_build *b);

/// How an op's result may share its operand 0's buffer (NN_BUFFER in_place).
typedef enum tp_in_place {
  TP_IN_PLACE_NONE,
  TP_IN_PLACE_SUM,
  TP_IN_PLACE_ALIAS,
  TP_IN_PLACE_LAST_READ
} tp_in_place;

/// The element type of `op`'s result `i` under the build's policy
/// (NN_BUFFER dtypes; a collective keeps its operand's).
int tp_buffer_result_dtype(tp_buffer_build *b, MlirOperation op, intptr_t i);

/// The in-place class of `op` (NONE for ops that are not nn ops).
tp_in_place tp_buffer_in_place(MlirOperation op);

/// The largest scratch, in bytes, that one op of the step allocates at run
/// time by the cpu kernels' formulas (NN_BUFFER workspace; only with
/// policy->count_workspace) and, on either backend (policy->mixed_precision:
/// cuda), the attention's K/V gathered under context parallelism
/// (srt_attention_cp_scratch_bytes); on cuda the Mamba2 mixer's device
/// scratch (srt_cuda_mamba2_scratch_parts); 0 if none.
int64_t tp_buffer_workspace(MlirBlock body, const tp_buffer_policy *policy);

#endif // SHARD_PASSES_BUFFER_BUILD_H
