// The `nn` dialect from C: loading the IRDL definition, typed builders and
// accessors over the generic MLIR C API (IRDL generates none).
//
// Every op is documented in nn.irdl.mlir (operands, shapes, attributes).
// Builders infer result types from operand shapes, attach the Hugging Face
// module path as `nn.module`, and append the op to the builder's block.
#ifndef SHARD_DIALECTS_NN_H
#define SHARD_DIALECTS_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "mlir-c/IR.h"

//===----------------------------------------------------------------------===//
// Dialect loading
//===----------------------------------------------------------------------===//

/// Loads the `nn` dialect (the IRDL text embedded at build time) into `ctx`,
/// together with the `irdl` dialect it needs. Idempotent: a second call on the
/// same context does nothing. Returns failure (with a diagnostic on `ctx`)
/// only if the embedded definition does not parse, which is a build bug.
MlirLogicalResult nn_load_dialect(MlirContext ctx);

/// Registers every upstream dialect and pass (mlirRegisterAllDialects /
/// mlirRegisterAllPasses) and loads `nn`: the context every tool works in.
/// The caller owns the returned context (mlirContextDestroy). Returns a null
/// context if the nn dialect fails to load.
MlirContext nn_context_create(void);

//===----------------------------------------------------------------------===//
// Op kinds
//===----------------------------------------------------------------------===//

/// The kind of every nn op, in the order of the op table (shardrt/ops.def).
typedef enum nn_op_kind {
#define NN_OP(KIND, name, phase, rule, verify) NN_OP_##KIND,
#include "shardrt/ops.def"
  NN_OP_COUNT,
  NN_OP_NONE = NN_OP_COUNT, // not an nn op
} nn_op_kind;

/// Where an op comes from (the `phase` of its op-table row).
typedef enum nn_op_phase {
  NN_PHASE_FORWARD,   // what model graphs are imported with (plans apply to these)
  NN_PHASE_PARTITION, // made by tp-partition in per-rank graphs
  NN_PHASE_BACKWARD,  // made by nn-autodiff (and partitioned backward ops)
  NN_PHASE_OPTIMIZER, // made by nn-optimizer
} nn_op_phase;

/// The backward of a forward op: one NN_VJP row of the op table.
typedef struct nn_vjp {
  nn_op_kind grad;     // the backward op, or NN_OP_NONE: pass the operand through
  const char *operands; // '0'..'9': forward operand i; 'A'..'J': forward result i;
                        // 'd': result 0's gradient
  const char *targets;  // the forward operands whose gradients the results are
} nn_vjp;

/// The full op name of `kind`, e.g. "nn.linear"; NULL for NN_OP_NONE.
const char *nn_op_name(nn_op_kind kind);

/// The kind of `op`, or NN_OP_NONE if it is not an nn op.
nn_op_kind nn_op_kind_of(MlirOperation op);

/// The phase of `kind` (NN_OP_NONE: NN_PHASE_FORWARD).
nn_op_phase nn_op_phase_of(nn_op_kind kind);

/// True for the ops a model graph is imported with (a plan's styles apply
/// to these only), false for partition, backward and optimizer ops.
bool nn_op_is_forward(nn_op_kind kind);

/// The backward ops of `kind` (its NN_VJP rows, in order): sets *vjps and
/// returns their count. Returns -1 for an op with no backward (one that is
/// not NN_NO_VJP), 0 for one that needs none.
int nn_op_vjps(nn_op_kind kind, const nn_vjp **vjps);

//===----------------------------------------------------------------------===//
// Attributes and shapes
//===----------------------------------------------------------------------===//

/// Name of the discardable attribute carrying an op's Hugging Face module
/// path ("model.layers.0.self_attn.q_proj").
#define NN_MODULE_ATTR "nn.module"
/// Name of the argument attribute carrying a parameter's Hugging Face tensor
/// name ("model.layers.0.self_attn.q_proj.weight").
#define NN_PARAM_ATTR "nn.param"
/// Name of the argument attribute carrying how a parameter starts when no
/// checkpoint is loaded (Hugging Face's _init_weights for its module), one
/// of nn_param_init_name's strings: shard-import stamps it on every
/// parameter, so no pass guesses it from a name.
#define NN_INIT_ATTR "nn.init"

/// The initialisations a parameter can have, in the order of the runtime's
/// srt_param_init: normal(0, initializer_range); zeros (biases, Gemma's
/// (1 + w) norms); ones (other norms, a Mamba2 mixer's D); a Mamba2 mixer's
/// A_log and dt_bias.
typedef enum nn_param_init {
  NN_INIT_NORMAL,
  NN_INIT_ZEROS,
  NN_INIT_ONES,
  NN_INIT_A_LOG,
  NN_INIT_DT_BIAS,
  NN_INIT_COUNT,
} nn_param_init;

/// The nn.init string of `init` ("normal", "zeros", "ones", "a_log",
/// "dt_bias"); NULL when `init` is out of range.
const char *nn_param_init_name(nn_param_init init);

/// The init whose nn.init string is `s`, or -1 for any other string.
int nn_param_init_parse(MlirStringRef s);

/// The op's `nn.module` string, or an empty string ref if it has none. The
/// returned data is owned by the context.
MlirStringRef nn_module_of(MlirOperation op);

/// The length of the decoder layer's path in module path `m`: through the
/// first all-digit segment after a "layers" segment ("model.layers.12" of
/// "model.layers.12.mlp.up_proj"); 0 when `m` is in no layer.
size_t nn_layer_prefix(MlirStringRef m);

/// Integer attribute `name` of `op` (i64 or i1); `fallback` if absent or not
/// an integer.
int64_t nn_attr_int(MlirOperation op, const char *name, int64_t fallback);

/// Float attribute `name` of `op` as a double; `fallback` if absent or not a
/// float.
double nn_attr_float(MlirOperation op, const char *name, double fallback);

/// String attribute `name` of `op`; an empty ref if absent or not a string.
MlirStringRef nn_attr_str(MlirOperation op, const char *name);

/// Maximum tensor rank the helpers below handle.
#define NN_MAX_RANK 8

/// The most arguments the passes take in a function (nn-autodiff refuses
/// more): the input ids, the labels and one per parameter tensor. The
/// importer refuses a config whose model would pass it (more parameter
/// tensors, or more layers: each holds one at least), so that a config too
/// deep to compile is refused in milliseconds, not after minutes of passes.
#define NN_MAX_FUNC_ARGS 4096

/// A statically shaped ranked tensor type, unpacked.
typedef struct nn_shape {
  int rank;
  int64_t dims[NN_MAX_RANK];
  MlirType element; // element type
} nn_shape;

/// Unpacks `type` into `out`. Returns false (leaving `out` unspecified) if
/// `type` is not a ranked tensor, has a dynamic dimension, or a rank above
/// NN_MAX_RANK.
bool nn_shape_of(MlirType type, nn_shape *out);

/// Builds tensor<dims x element>.
MlirType nn_tensor_type(MlirContext ctx, int rank, const int64_t *dims,
                        MlirType element);

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

/// Where builders put ops: appended at the end of `block`, with location
/// `loc`. The block must outlive the built ops' use of the builder.
typedef struct nn_builder {
  MlirContext ctx;
  MlirBlock block;
  MlirLocation loc;
} nn_builder;

/// ids [B, S] (integer), weight [V, D] -> [B, S, D] in the weight's element type.
/// padding_idx: the row whose lookups get no gradient (torch nn.Embedding's
/// padding_idx, in [0, V)), or -1 for none.
MlirValue nn_build_embedding(nn_builder *b, const char *module, MlirValue ids,
                             MlirValue weight, double scale, int64_t padding_idx);

/// x [..., in], weight [out, in], bias [out] or a null value -> [..., out].
MlirValue nn_build_linear(nn_builder *b, const char *module, MlirValue x,
                          MlirValue weight, MlirValue bias);

/// One attribute of nn_build_like: a 64-bit integer, an f64 float, a bool
/// or a string (the element types the nn builders give each kind).
typedef enum nn_attr_kind { NN_ATTR_INT, NN_ATTR_FLOAT, NN_ATTR_BOOL, NN_ATTR_STR } nn_attr_kind;

typedef struct nn_attr {
  const char *name;
  nn_attr_kind kind;
  int64_t i;
  double f;
  bool b;
  const char *s;
} nn_attr;

#define NN_INT(name_, v) ((nn_attr){.name = (name_), .kind = NN_ATTR_INT, .i = (v)})
#define NN_FLOAT(name_, v) ((nn_attr){.name = (name_), .kind = NN_ATTR_FLOAT, .f = (v)})
#define NN_BOOL(name_, v) ((nn_attr){.name = (name_), .kind = NN_ATTR_BOOL, .b = (v)})
#define NN_STR(name_, v) ((nn_attr){.name = (name_), .kind = NN_ATTR_STR, .s = (v)})

/// Attributes nn_build_like takes at most (besides nn.module).
enum { NN_MAX_BUILD_ATTRS = 11 };

/// Builds an op of `kind` whose one result has operand 0's type, with the
/// given operands (in the op's order) and attributes, under `module`: the
/// builder of every op of that shape, so that such an op has no builder of
/// its own (docs/architecture.md, "Adding an op"). The ops of the shape
/// (operands and attributes as nn.irdl.mlir defines them):
///   nn.rms_norm      x [..., F], weight [F] (head_dim = 0) or [head_dim];
///                    eps, offset (floats), head_dim (int)
///   nn.apply_rotary  x [B, S, N * head_dim], cos, sin [B, S, head_dim];
///                    head_dim (int)
///   nn.glu           gate, up of one type; activation "silu" / "gelu_tanh"
///   nn.add           lhs, rhs of one type
///   an SRT_UNARY_OP  x (such as NemotronH's nn.relu2)
/// At most NN_MAX_BUILD_ATTRS attributes (more aborts: a caller's bug).
MlirValue nn_build_like(nn_builder *b, nn_op_kind kind, const char *module, int num_operands,
                        const MlirValue *operands, int num_attrs, const nn_attr *attrs);

/// Rotary embedding parameters; the llama3 fields are used when
/// rope_type is "llama3" (Hugging Face's `rope_scaling`).
typedef struct nn_rope {
  int64_t head_dim;
  double theta;
  const char *rope_type; // "default", "llama3" or "linear"
  double factor, low_freq_factor, high_freq_factor;
  int64_t original_max_position_embeddings;
} nn_rope;

/// Builds the rotary tuple: cos and sin, each [batch, seq, head_dim] in
/// `element`, for the positions in `position_ids` (int64 [batch, seq]), or
/// for 0..S-1 when it is null (no operand).
void nn_build_rotary_embedding(nn_builder *b, const char *module,
                               const nn_rope *rope, MlirValue position_ids,
                               int64_t batch, int64_t seq, MlirType element,
                               MlirValue *cos, MlirValue *sin);

/// Attention configuration (see nn.irdl.mlir for the sentinels).
typedef struct nn_attention_config {
  int64_t num_heads, num_kv_heads, head_dim;
  bool causal;
  double scale;
  int64_t sliding_window; // 0 = none
  double softcap;         // 0 = none
  int64_t cp_size;        // > 1: the queries are one cp rank's chunks and
                          // K/V are all-gathered over cp (0 or 1: none)
} nn_attention_config;

/// q [B, S, H * hd], k/v [B, S, KV * hd] -> the output, q's type (the op's
/// second result, the log-sum-exp [B, H, S] f32 the backward reads, is
/// result 1 of the output's owner). `segment_ids` (int64 [B, S], each
/// token's document in its row, -1 padding; null: one document) becomes the
/// optional fourth operand: queries see keys of their own document only.
MlirValue nn_build_attention(nn_builder *b, const char *module, MlirValue q,
                             MlirValue k, MlirValue v, MlirValue segment_ids,
                             const nn_attention_config *cfg);

/// Creates an nn op of `kind` with `module`, the given operands and result
/// types, and every attribute of `attrs_from` (if not null) except its
/// nn.module: the generic builder behind the backward ops, which share
/// their forward op's attributes.
MlirOperation nn_build_op(nn_builder *b, nn_op_kind kind, MlirStringRef module,
                          int num_operands, const MlirValue *operands,
                          int num_results, const MlirType *results,
                          MlirOperation attrs_from);

/// logits [B, S, V], labels [B, S] -> tensor<f32> (mean over kept labels).
MlirValue nn_build_cross_entropy(nn_builder *b, const char *module,
                                 MlirValue logits, MlirValue labels,
                                 int64_t ignore_index, bool shift);

/// Mamba2 mixer configuration (Hugging Face NemotronH names in comments).
typedef struct nn_mamba2_config {
  int64_t num_heads;   // mamba_num_heads
  int64_t head_dim;    // mamba_head_dim
  int64_t n_groups;    // n_groups (B/C groups)
  int64_t state_size;  // ssm_state_size
  int64_t conv_kernel; // conv_kernel
  int64_t chunk_size;  // chunk_size
  double eps;          // layer_norm_epsilon (gated RMSNorm)
  double dt_min;       // time_step_min: dt's lower clamp (transformers' time_step_limit[0])
  int64_t cp_size;     // > 1: one cp rank's chunk rows; the op gathers the sequence
} nn_mamba2_config;

/// The mixer's parameters; shapes as documented on nn.mamba2_mixer.
typedef struct nn_mamba2_params {
  MlirValue in_proj_weight, conv1d_weight, conv1d_bias, dt_bias, A_log, D,
      norm_weight, out_proj_weight;
} nn_mamba2_params;

/// x [B, S, hidden] -> x's type. segment_ids: i64 [B, S] document ids of
/// packed rows (the conv and the scan restart where they change), or a null
/// value for one document per row.
MlirValue nn_build_mamba2_mixer(nn_builder *b, const char *module, MlirValue x,
                                MlirValue segment_ids, const nn_mamba2_params *params,
                                const nn_mamba2_config *cfg);

#endif // SHARD_DIALECTS_NN_H
