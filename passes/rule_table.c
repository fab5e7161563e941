// The sharding rule of each nn op: its factor table (sharding_rules.h's
// notation) and its partition hooks (partition_hooks.c), picked by the op
// table's `rule` column. It sits above both, so that neither the decision
// procedure (sharding_rules.c) nor the hooks need the other's table.
#include "rule_table.h"

#include "mlir-c/BuiltinTypes.h"
#include "partition_hooks.h"

#include <string.h>

//===----------------------------------------------------------------------===//
// The tables
//===----------------------------------------------------------------------===//

// Letters: b batch, s sequence, S query sequence and T key sequence (whole:
// causal attention needs them complete), d/f/n features, k contracted
// features, v vocabulary, h heads x head_dim (a last dim split in whole
// heads; in any other dim, the heads themselves: attention's lse
// [b, heads, S]), g head_dim.
static const tp_rule kEmbedding = {.operands = {"bs", "vd"},
                                   .results = {"bsd"},
                                   .reduction = "v",
                                   .localize = tp_localize_vocab};
static const tp_rule kLinear = {.operands = {"bsk", "nk", "n"},
                                .results = {"bsn"},
                                .reduction = "k",
                                .partition = tp_partition_linear};
static const tp_rule kLinear2 = {.operands = {"sk", "nk", "n"},
                                 .results = {"sn"},
                                 .reduction = "k",
                                 .partition = tp_partition_linear};
static const tp_rule kRmsNorm = {.operands = {"bsf", "f"}, .results = {"bsf"}, .whole = "f"};
static const tp_rule kRmsNorm2 = {.operands = {"sf", "f"}, .results = {"sf"}, .whole = "f"};
static const tp_rule kHeadNorm = {
    .operands = {"bsh", "g"}, .results = {"bsh"}, .whole = "g", .heads = "h"};
static const tp_rule kRotary = {.operands = {"bs"}, .results = {"bsg", "bsg"}, .whole = "g"};
static const tp_rule kApplyRotary = {
    .operands = {"bsh", "bsg", "bsg"}, .results = {"bsh"}, .whole = "g", .heads = "h"};
static const tp_rule kAttention = {.operands = {"bSh", "bTh", "bTh", "bS"},
                                   .results = {"bSh", "bhS"},
                                   .whole = "ST",
                                   .heads = "h",
                                   .localize = tp_localize_heads};
static const tp_rule kElementwise2 = {.operands = {"bsf", "bsf"}, .results = {"bsf"}};
static const tp_rule kElementwise1 = {.operands = {"bsf"}, .results = {"bsf"}};
static const tp_rule kBiasAdd = {.operands = {"bsf", "f"}, .results = {"bsf"}};
// The sequence stays whole: shifted labels cross any sequence split.
static const tp_rule kCrossEntropy = {.operands = {"bsv", "bs"},
                                      .results = {""},
                                      .reduction = "bv",
                                      .whole = "s",
                                      .partition = tp_partition_cross_entropy};
// The Mamba2 mixer: m is its heads (with their B/C groups), which every
// weight is split by as Megatron does (in_proj's rows and conv1d's channels
// part by part, dt_bias, A_log, D and the norm per head, out_proj's
// columns); the output of a split mixer is Partial. The scan needs the whole
// sequence (S), the hidden size (F) and the conv taps (K) stay whole. The
// optional segment_ids [B, S] (integers) follow the batch, replicated over
// the heads.
static const tp_rule kMamba2 = {.operands = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm",
                                             "bS"},
                                .results = {"bSF"},
                                .reduction = "m",
                                .whole = "SFWK",
                                .localize = tp_localize_mamba2};

// Backward ops: the same factors as their forward op; a factor the result
// lacks is reduced (Partial), e.g. the batch and sequence of a weight's
// gradient, or the heads of a per-head norm's weight gradient.
static const tp_rule kEmbeddingGrad = {.operands = {"bs", "bsd", "vd"},
                                       .results = {"vd"},
                                       .reduction = "bs",
                                       .placement_only = 3,
                                       .localize = tp_localize_vocab};
static const tp_rule kLinearGradInput = {
    .operands = {"bsn", "nk"}, .results = {"bsk"}, .reduction = "n"};
static const tp_rule kLinearGradInput2 = {
    .operands = {"sn", "nk"}, .results = {"sk"}, .reduction = "n"};
static const tp_rule kLinearGradWeight = {
    .operands = {"bsn", "bsk", "nk"}, .results = {"nk"}, .reduction = "bs", .placement_only = 3};
static const tp_rule kLinearGradWeight2 = {
    .operands = {"sn", "sk", "nk"}, .results = {"nk"}, .reduction = "s", .placement_only = 3};
static const tp_rule kLinearGradBias = {
    .operands = {"bsn"}, .results = {"n"}, .reduction = "bs"};
static const tp_rule kLinearGradBias2 = {
    .operands = {"sn"}, .results = {"n"}, .reduction = "s"};
static const tp_rule kRmsNormGradInput = {
    .operands = {"bsf", "f", "bsf"}, .results = {"bsf"}, .whole = "f"};
static const tp_rule kHeadNormGradInput = {
    .operands = {"bsh", "g", "bsh"}, .results = {"bsh"}, .whole = "g", .heads = "h"};
static const tp_rule kRmsNormGradWeight = {
    .operands = {"bsf", "bsf"}, .results = {"f"}, .reduction = "bs", .whole = "f"};
static const tp_rule kHeadNormGradWeight = {.operands = {"bsh", "bsh"},
                                            .results = {"g"},
                                            .reduction = "bsh",
                                            .whole = "g",
                                            .heads = "h"};
static const tp_rule kApplyRotaryGrad = {
    .operands = {"bsh", "bsg", "bsg"}, .results = {"bsh"}, .whole = "g", .heads = "h"};
static const tp_rule kAttentionGrad = {.operands = {"bSh", "bTh", "bTh", "bSh", "bhS", "bSh",
                                                    "bS"},
                                       .results = {"bSh", "bTh", "bTh"},
                                       .whole = "ST",
                                       .heads = "h",
                                       .refine = tp_refine_replicated_kv_grad,
                                       .localize = tp_localize_heads};
// The mixer's weight gradients sum over the batch (Partial where it is
// split) and keep the heads; dx sums over the heads (Partial where they are).
static const tp_rule kMamba2Grad = {
    .operands = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm", "bSF"},
    .results = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm"},
    .reduction = "bm",
    .whole = "SFWK",
    .localize = tp_localize_mamba2};
// With segment_ids (operand 9), dy moves to 10.
static const tp_rule kMamba2GradDocs = {
    .operands = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm", "bS", "bSF"},
    .results = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm"},
    .reduction = "bm",
    .whole = "SFWK",
    .localize = tp_localize_mamba2};
static const tp_rule kGluGrad = {.operands = {"bsf", "bsf", "bsf"}, .results = {"bsf", "bsf"}};
static const tp_rule kCrossEntropyGrad = {.operands = {"bsv", "bs"},
                                          .results = {"bsv"},
                                          .whole = "s",
                                          .partition = tp_partition_cross_entropy_grad};
// The optimizer step reads the (replicated) loss; its work is per parameter.
static const tp_rule kOptimizerStep = {.operands = {""}, .results = {NULL}};
// The gradient hand-off has no factors: its operand takes its parameter's
// layout.
static const tp_rule kStoreGrad = {
    .operands = {NULL}, .results = {NULL}, .rewrite = tp_rewrite_store_grad};
// nn.add: a sum of Partial gradients stays Partial.
static const tp_rule kAdd = {
    .operands = {"bsf", "bsf"}, .results = {"bsf"}, .refine = tp_refine_partial_sum};

// The rule families of the op table's `rule` column: each picks its table
// by the rank of the op's first operand and its attributes.
typedef bool (*rule_fn)(MlirOperation op, int rank, tp_rule *rule);

static bool per_head(MlirOperation op) { return nn_attr_int(op, "head_dim", 0) > 0; }

// Elementwise rules are written for rank 3; other ranks drop leading dims.
static bool elementwise(const tp_rule *table, int rank, tp_rule *rule) {
  *rule = *table;
  if (rank >= 1 && rank < 3) {
    for (int i = 0; i < TP_RULE_MAX_VALUES && rule->operands[i]; ++i)
      if (strlen(rule->operands[i]) == 3)
        rule->operands[i] += 3 - rank;
    for (int i = 0; i < TP_RULE_MAX_VALUES && rule->results[i]; ++i)
      rule->results[i] += 3 - rank;
  }
  return true;
}

static bool pick(const tp_rule *table, tp_rule *rule) {
  *rule = *table;
  return true;
}

#define RULE(family) static bool rule_##family(MlirOperation op, int rank, tp_rule *rule)
RULE(none) { return false; }
RULE(embedding) { return pick(&kEmbedding, rule); }
RULE(linear) { return pick(rank == 2 ? &kLinear2 : &kLinear, rule); }
RULE(rms_norm) {
  return pick(per_head(op) ? &kHeadNorm : rank == 2 ? &kRmsNorm2 : &kRmsNorm, rule);
}
RULE(rotary) { return pick(&kRotary, rule); }
RULE(apply_rotary) { return pick(&kApplyRotary, rule); }
RULE(attention) { return pick(&kAttention, rule); }
RULE(elementwise1) { return elementwise(&kElementwise1, rank, rule); }
RULE(elementwise2) { return elementwise(&kElementwise2, rank, rule); }
RULE(bias_add) { return elementwise(&kBiasAdd, rank, rule); }
RULE(cross_entropy) { return pick(&kCrossEntropy, rule); }
RULE(mamba2) { return pick(&kMamba2, rule); }
RULE(mamba2_grad) {
  return pick(mlirOperationGetNumOperands(op) > 10 ? &kMamba2GradDocs : &kMamba2Grad, rule);
}
RULE(embedding_grad) { return pick(&kEmbeddingGrad, rule); }
RULE(linear_grad_input) { return pick(rank == 2 ? &kLinearGradInput2 : &kLinearGradInput, rule); }
RULE(linear_grad_weight) {
  return pick(rank == 2 ? &kLinearGradWeight2 : &kLinearGradWeight, rule);
}
RULE(linear_grad_bias) { return pick(rank == 2 ? &kLinearGradBias2 : &kLinearGradBias, rule); }
RULE(rms_norm_grad_input) {
  return pick(per_head(op) ? &kHeadNormGradInput : &kRmsNormGradInput, rule);
}
RULE(rms_norm_grad_weight) {
  return pick(per_head(op) ? &kHeadNormGradWeight : &kRmsNormGradWeight, rule);
}
RULE(apply_rotary_grad) { return pick(&kApplyRotaryGrad, rule); }
RULE(attention_grad) { return pick(&kAttentionGrad, rule); }
RULE(glu_grad) { return elementwise(&kGluGrad, rank, rule); }
RULE(cross_entropy_grad) { return pick(&kCrossEntropyGrad, rule); }
RULE(optimizer_step) { return pick(&kOptimizerStep, rule); }
RULE(store_grad) { return pick(&kStoreGrad, rule); }
RULE(add) { return elementwise(&kAdd, rank, rule); }
#undef RULE

static const rule_fn kRules[NN_OP_COUNT] = {
#define NN_OP(KIND, name, phase, rule, verify) [NN_OP_##KIND] = rule_##rule,
#include "shardrt/ops.def"
};

bool tp_rule_of(MlirOperation op, tp_rule *rule) {
  nn_op_kind kind = nn_op_kind_of(op);
  if (kind == NN_OP_NONE)
    return false;
  int rank = 0;
  if (mlirOperationGetNumOperands(op) > 0) {
    MlirType t = mlirValueGetType(mlirOperationGetOperand(op, 0));
    rank = mlirTypeIsARankedTensor(t) ? (int)mlirShapedTypeGetRank(t) : 0;
  }
  return kRules[kind](op, rank, rule);
}

