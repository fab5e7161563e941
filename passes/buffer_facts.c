// The op table's buffer columns (shardrt/ops.def: NN_BUFFER)
// as the buffer plan reads them: each result's element type under mixed
// precision, whether a result may share its operand's buffer, the cpu
// kernels' scratch formulas and the attention's context-parallel scratch
// on either backend (shardrt/op_facts.h, backend-neutral).
#include <string.h>

#include "buffer_plan_internal.h"
#include "shard_ops.h"
#include "shardrt/op_facts.h"

typedef struct buffer_facts {
  const char *dtypes; // one letter per result (NN_BUFFER); NULL: no row
  tp_in_place in_place;
  int64_t (*workspace)(MlirOperation op); // bytes, or NULL
} buffer_facts;

// A norm's group: its head_dim (per-head q/k norms), else the whole row.
static int64_t norm_group(MlirOperation norm) {
  int64_t group = nn_attr_int(norm, "head_dim", 0);
  if (group > 0)
    return group;
  nn_shape x = {0};
  nn_shape_of(mlirValueGetType(mlirOperationGetOperand(norm, 0)), &x);
  return x.rank ? x.dims[x.rank - 1] : 1;
}

// The RMSNorm weight gradient's per-block partial sums.
static int64_t ws_rms_norm_grad_weight(MlirOperation op) {
  nn_shape x = {0};
  nn_shape_of(mlirValueGetType(mlirOperationGetOperand(op, 0)), &x);
  int64_t features = x.dims[x.rank - 1], rows = 1;
  for (int d = 0; d + 1 < x.rank; ++d)
    rows *= x.dims[d];
  return 4 * srt_cpu_rms_norm_backward_workspace_floats(rows, features, norm_group(op));
}

// A Mamba2 mixer op's sizes.
static srt_mamba2_config mamba2_config(MlirOperation op) {
  nn_shape x = {0};
  nn_shape_of(mlirValueGetType(mlirOperationGetOperand(op, 0)), &x);
  return (srt_mamba2_config){.batch = x.dims[0],
                             .seq = x.dims[1],
                             .hidden = x.dims[2],
                             .heads = nn_attr_int(op, "num_heads", 0),
                             .head_dim = nn_attr_int(op, "head_dim", 0),
                             .groups = nn_attr_int(op, "n_groups", 0),
                             .state = nn_attr_int(op, "state_size", 0),
                             .conv_kernel = nn_attr_int(op, "conv_kernel", 0),
                             .chunk = nn_attr_int(op, "chunk_size", 0)};
}

// The Mamba2 kernels' scratch for one thread; 0 when it overflows.
static int64_t mamba2_bytes(MlirOperation op, bool backward) {
  srt_mamba2_config c = mamba2_config(op);
  double parts[SRT_MAMBA2_WORKSPACE_PARTS];
  double floats = srt_mamba2_workspace_parts(&c, backward, 1, parts);
  return floats * 4 > 0 && floats * 4 < 9e18 ? (int64_t)(floats * 4) : 0;
}

static int64_t ws_mamba2(MlirOperation op) { return mamba2_bytes(op, false); }
static int64_t ws_mamba2_grad(MlirOperation op) { return mamba2_bytes(op, true); }

#define ws_none NULL
static const buffer_facts kFacts[NN_OP_COUNT] = {
#define NN_BUFFER(KIND, dtypes, in_place, workspace)                                               \
  [NN_OP_##KIND] = {dtypes, TP_IN_PLACE_##in_place, ws_##workspace},
#include "shardrt/ops.def"
};
#undef ws_none

// The NN_BUFFER letter of `op`'s result `i`: 'c', 'f' or '0'.
static char dtype_letter(MlirOperation op, intptr_t i) {
  nn_op_kind k = nn_op_kind_of(op);
  const char *d = k < NN_OP_COUNT ? kFacts[k].dtypes : NULL;
  size_t n = d ? strlen(d) : 0;
  return n == 0 ? 'c' : d[(size_t)i < n ? (size_t)i : n - 1];
}

int tp_buffer_result_dtype(tp_buffer_build *b, MlirOperation op, intptr_t i) {
  if (!b->policy->mixed_precision)
    return TP_BUF_F32;
  if (nn_op_kind_of(op) != NN_OP_NONE) {
    char letter = dtype_letter(op, i);
    return letter == 'f'   ? TP_BUF_F32
           : letter == '0' ? tp_buffer_dtype_of(b, mlirOperationGetOperand(op, 0))
                           : TP_BUF_BF16;
  }
  // Collectives keep their operand's (shard.sharding has no buffer).
  if (mlirOperationGetNumOperands(op) == 0)
    return TP_BUF_F32;
  int dtype = tp_buffer_dtype_of(b, mlirOperationGetOperand(op, 0));
  if (dtype == TP_BUF_I64) {
    b->current = op;
    tp_buffer_fail(b, "collectives of integer tensors (input ids, labels) are not supported "
                      "on the cuda backend");
  }
  return dtype;
}

tp_in_place tp_buffer_in_place(MlirOperation op) {
  nn_op_kind k = nn_op_kind_of(op);
  return k < NN_OP_COUNT && kFacts[k].dtypes ? kFacts[k].in_place : TP_IN_PLACE_NONE;
}

// The attention's scratch under context parallelism (its cp_size > 1): the
// whole sequence's K/V gathered over cp (srt_attention_cp_scratch_bytes,
// from k's local shape [B, S/cp, KV * hd]); 0 for other ops and at cp 1.
static int64_t attention_cp_bytes(MlirOperation op, bool cuda) {
  nn_op_kind k = nn_op_kind_of(op);
  if (k != NN_OP_ATTENTION && k != NN_OP_ATTENTION_GRAD)
    return 0;
  int64_t cp = nn_attr_int(op, "cp_size", 1);
  nn_shape kv = {0};
  nn_shape_of(mlirValueGetType(mlirOperationGetOperand(op, 1)), &kv);
  if (cp <= 1 || kv.rank != 3)
    return 0;
  bool backward = k == NN_OP_ATTENTION_GRAD;
  bool segments = mlirOperationGetNumOperands(op) > (backward ? 6 : 3);
  return srt_attention_cp_scratch_bytes(kv.dims[0], kv.dims[1], cp, kv.dims[2], segments,
                                        backward, cuda);
}

// The cuda Mamba2 ops' device scratch (srt_cuda_mamba2_scratch_parts); 0
// for other ops.
static int64_t mamba2_cuda_bytes(MlirOperation op) {
  nn_op_kind k = nn_op_kind_of(op);
  if (k != NN_OP_MAMBA2_MIXER && k != NN_OP_MAMBA2_MIXER_GRAD)
    return 0;
  srt_mamba2_config c = mamba2_config(op);
  int64_t count[SRT_CUDA_MAMBA2_SCRATCH_PARTS];
  return 4 * srt_cuda_mamba2_scratch_parts(&c, k == NN_OP_MAMBA2_MIXER_GRAD, count);
}

int64_t tp_buffer_workspace(MlirBlock body, const tp_buffer_policy *policy) {
  int64_t most = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    nn_op_kind k = nn_op_kind_of(op);
    int64_t bytes = policy->count_workspace && k < NN_OP_COUNT && kFacts[k].workspace
                        ? kFacts[k].workspace(op)
                        : 0;
    bool cuda = policy->backend && !strcmp(policy->backend, "cuda");
    int64_t cp = attention_cp_bytes(op, cuda), mixer = cuda ? mamba2_cuda_bytes(op) : 0;
    bytes = cp > bytes ? cp : bytes;
    bytes = mixer > bytes ? mixer : bytes;
    most = bytes > most ? bytes : most;
  }
  return most;
}
