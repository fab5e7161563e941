// Sharding rules of the nn ops (factor tables) and the decision procedure
// that turns operand placements into required placements and result
// placements, one mesh axis at a time.
#include "sharding_rules.h"

#include "mlir-c/BuiltinTypes.h"
#include "partition_hooks.h"

#include <stdio.h>
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
static const tp_rule kAttention = {.operands = {"bSh", "bTh", "bTh"},
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
// sequence (S), the hidden size (F) and the conv taps (K) stay whole.
static const tp_rule kMamba2 = {.operands = {"bSF", "mF", "mWK", "m", "m", "m", "m", "m", "Fm"},
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
static const tp_rule kAttentionGrad = {.operands = {"bSh", "bTh", "bTh", "bSh", "bhS", "bSh"},
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
RULE(mamba2_grad) { return pick(&kMamba2Grad, rule); }
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

//===----------------------------------------------------------------------===//
// Deciding
//===----------------------------------------------------------------------===//

static int dim_of(const char *labels, char factor) {
  const char *p = labels && factor ? strchr(labels, factor) : NULL;
  return p ? (int)(p - labels) : -1;
}

static bool contains(const char *set, char factor) {
  return factor && set && strchr(set, factor) != NULL;
}

static int count(const char *const *labels) {
  int n = 0;
  while (n < TP_RULE_MAX_VALUES && labels[n])
    ++n;
  return n;
}

static bool static_dims(MlirValue v, nn_shape *s) { return nn_shape_of(mlirValueGetType(v), s); }

// Can `v` be split on `dim` into `parts` pieces of whole heads? (The last
// dim holds heads x head_dim; any other, the heads.)
static bool whole_heads(MlirValue v, int dim, int64_t parts, int64_t head_dim) {
  nn_shape s;
  if (!static_dims(v, &s) || dim >= s.rank || head_dim <= 0)
    return false;
  int64_t unit = dim == s.rank - 1 ? head_dim : 1;
  return s.dims[dim] % parts == 0 && (s.dims[dim] / parts) % unit == 0;
}

// The factor to shard on `axis`: a sharded parameter decides first, then the
// first sharded operand; whole factors and the other axis's factor are out.
static char choose_factor(const tp_rule *rule, int n, const tp_layout *current,
                          const bool *is_param, int axis, char taken) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      if ((pass == 0) != is_param[i] || current[i].on[axis].kind != TP_SHARD)
        continue;
      char f = rule->operands[i][current[i].on[axis].dim];
      if (!contains(rule->whole, f) && f != taken)
        return f;
    }
  return 0;
}

bool tp_rule_decide(MlirOperation op, const tp_rule *rule, const tp_mesh *mesh,
                    const tp_layout *current, const bool *is_param,
                    tp_decision *out, char *err, size_t errlen) {
  int n = count(rule->operands), m = count(rule->results);
  if (n > mlirOperationGetNumOperands(op))
    n = (int)mlirOperationGetNumOperands(op);
  *out = (tp_decision){0};
  int64_t head_dim = nn_attr_int(op, "head_dim", 0);
  for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
    char f = mesh->size[axis] > 1
                 ? choose_factor(rule, n, current, is_param, axis, out->factor[1 - axis])
                 : 0;
    out->factor[axis] = f;
    for (int i = 0; i < n; ++i) {
      int d = dim_of(rule->operands[i], f);
      tp_placement p = d >= 0 ? TP_S(d) : TP_R;
      MlirValue v = mlirOperationGetOperand(op, i);
      if (d >= 0 && contains(rule->heads, f) &&
          !whole_heads(v, d, mesh->size[axis], head_dim)) {
        // An operand that cannot be split in whole heads (fewer KV heads than
        // ranks) stays replicated: each rank keeps every KV head it needs.
        if (current[i].on[axis].kind == TP_REPLICATE && i > 0) {
          p = TP_R;
        } else {
          nn_shape s;
          static_dims(v, &s);
          MlirStringRef module = nn_module_of(op);
          snprintf(err, errlen,
                   "'%.*s': cannot split operand %d (dim %d of size %lld) over %lld "
                   "ranks in whole heads of %lld",
                   (int)module.length, module.data, i, d, (long long)s.dims[d],
                   (long long)mesh->size[axis], (long long)head_dim);
          return false;
        }
      }
      out->operands[i].on[axis] = p;
    }
    for (int r = 0; r < m; ++r) {
      int d = dim_of(rule->results[r], f);
      // A reduction factor makes the results that lack it Partial; one that
      // keeps it (the Mamba2 gradient's dx keeps the batch its weight
      // gradients sum over) is split along it.
      out->results[r].on[axis] =
          d >= 0 ? TP_S(d) : contains(rule->reduction, f) ? TP_P : TP_R;
    }
  }
  return true;
}

bool tp_local_shape(const tp_mesh *mesh, const tp_layout *layout, int rank,
                    const int64_t *dims, int64_t *local, char *err, size_t errlen) {
  for (int d = 0; d < rank; ++d)
    local[d] = dims[d];
  for (int axis = 0; axis < TP_MESH_AXES; ++axis) {
    tp_placement p = layout->on[axis];
    if (p.kind != TP_SHARD)
      continue;
    if (p.dim >= rank || local[p.dim] % mesh->size[axis] != 0) {
      snprintf(err, errlen, "dim %d of size %lld is not divisible by the %s size %lld",
               p.dim, p.dim < rank ? (long long)local[p.dim] : -1LL,
               axis == 0 ? "dp" : "tp", (long long)mesh->size[axis]);
      return false;
    }
    local[p.dim] /= mesh->size[axis];
  }
  return true;
}
