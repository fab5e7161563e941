// Tensor-parallel plans as data: placements, parallel styles, plan entries
// (Hugging Face module pattern -> style and layouts), parsing of custom JSON
// plans and the built-in ones (passes/plans/*.json), and module matching.
// Semantics: PyTorch DTensor's parallel styles as used by NeMo-RL; see
// docs/plans.md and ../shared/spec/reference-behavior.md §1-§2.
#ifndef SHARD_PASSES_PLAN_H
#define SHARD_PASSES_PLAN_H

#include <stdbool.h>
#include <stddef.h>

//===----------------------------------------------------------------------===//
// Placements
//===----------------------------------------------------------------------===//

/// How a tensor lives on one mesh axis: Replicate, Shard(dim) or Partial
/// (sum). `dim` may be negative (from the end) as written in plans until
/// tp_placement_normalize resolves it against a rank.
typedef enum tp_placement_kind { TP_REPLICATE, TP_SHARD, TP_PARTIAL } tp_placement_kind;

typedef struct tp_placement {
  tp_placement_kind kind;
  int dim;
} tp_placement;

#define TP_R ((tp_placement){TP_REPLICATE, 0})
#define TP_P ((tp_placement){TP_PARTIAL, 0})
#define TP_S(d) ((tp_placement){TP_SHARD, (d)})

/// Parses "Replicate", "Shard(d)" (d may be negative) or "Partial" (plans
/// accept only the first two as layouts).
bool tp_placement_parse(const char *text, tp_placement *out);

/// Writes "Replicate", "Shard(d)" or "Partial" to buf; returns buf.
const char *tp_placement_str(tp_placement p, char *buf, size_t len);

/// Resolves a negative Shard dim against `rank`; false if out of range.
bool tp_placement_normalize(tp_placement *p, int rank);

bool tp_placement_equal(tp_placement a, tp_placement b);

//===----------------------------------------------------------------------===//
// Styles
//===----------------------------------------------------------------------===//

typedef enum tp_style {
  TP_STYLE_COLWISE,
  TP_STYLE_ROWWISE,
  TP_STYLE_COLWISE_REP,
  TP_STYLE_ROWWISE_REP,
  TP_STYLE_COLWISE_GATHER_OUTPUT,
  TP_STYLE_SEQUENCE_PARALLEL,
  // Hugging Face's style for Qwen3's q_norm/k_norm: weight replicated, its
  // gradient all-reduced; the activation keeps its placement.
  TP_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE,
  TP_STYLE_COUNT,
} tp_style;

/// NeMo-RL's translate_parallel_style: exactly "colwise", "rowwise",
/// "colwise_rep", "rowwise_rep", "colwise_gather_output",
/// "sequence_parallel" (plus Hugging Face's "replicated_with_grad_allreduce").
/// Returns false for anything else.
bool tp_style_parse(const char *text, tp_style *out);

/// The style's name as written in plans.
const char *tp_style_name(tp_style style);

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

enum { TP_MAX_LAYOUTS = 4 };

/// One plan entry: modules matching `pattern` get `style`; layouts default
/// to the style's (num_* = 0 means "not given").
typedef struct tp_plan_entry {
  char *pattern; // e.g. "model.layers.*.self_attn.q_proj"; '*' = one segment
  tp_style style;
  int num_inputs, num_outputs;
  tp_placement inputs[TP_MAX_LAYOUTS], outputs[TP_MAX_LAYOUTS];
  bool use_local_output;
  int matches; // modules matched so far (filled by the tp-plan pass)
} tp_plan_entry;

typedef struct tp_plan {
  tp_plan_entry *entries;
  int num_entries;
  char *source; // "built-in plan 'qwen2'" or the file path, for messages
} tp_plan;

/// What a built-in plan needs to know about the model.
typedef struct tp_model_facts {
  const char *model_type; // config.json's model_type, e.g. "qwen2" (for "hf")
  /// Returns true if some op's nn.module starts with `prefix` + ".".
  bool (*has_prefix)(const char *prefix, void *data);
  void *data;
} tp_model_facts;

/// The built-in plans, one row each, the one list every place that names
/// them reads: X(name, file, model_types): `file` the embedded
/// passes/plans/<file>.json, `model_types` the config.json model_types it
/// is written for (" a b "; tp-plan warns on another). "hf" (the model's
/// own base_model_tp_plan, from shard-import's tables) comes after them.
#define TP_BUILTIN_PLANS(X)                                                                    \
  X(qwen2, qwen2, " qwen2 qwen3 ")                                                             \
  X(qwen3, qwen2, " qwen2 qwen3 ")                                                             \
  X(llama, llama, " llama ")                                                                   \
  X(gemma3, gemma3, " gemma3 gemma3_text ")                                                    \
  X(nemotron_h, nemotron_h, " nemotron_h ")

#define TP_PLAN_NAME_(name, file, model_types) #name ", "
/// Every plan name, for help and error texts: "qwen2, qwen3, ..., hf".
#define TP_PLAN_NAMES TP_BUILTIN_PLANS(TP_PLAN_NAME_) "hf"

/// The model_types the built-in plan `name` is written for (" a b "), or
/// NULL for "hf" and for a name that is no built-in plan.
const char *tp_plan_model_types(const char *name);

/// Loads the plan named `spec`: a built-in name (TP_PLAN_NAMES) with its
/// sequence-parallel variant when
/// `sequence_parallel` is set, or a path to a JSON plan file (used as it is,
/// like the reference's custom plans). On failure writes a message naming
/// the plan, the entry and the offending value (JSON syntax errors with line
/// and column) to `err` and returns false with `out` empty. Free a loaded
/// plan with tp_plan_free.
bool tp_plan_load(const char *spec, bool sequence_parallel,
                  const tp_model_facts *facts, tp_plan *out, char *err,
                  size_t errlen);

/// Parses a custom plan: a JSON object mapping module patterns to a style
/// string or {"style", "input_layouts", "output_layouts", "use_local_output"}.
/// `source` names the text in messages. On failure writes the message to
/// `err` and returns false with `out` empty (nothing to free).
bool tp_plan_parse(const char *text, size_t len, const char *source,
                   tp_plan *out, char *err, size_t errlen);

void tp_plan_free(tp_plan *plan);

/// The first entry whose pattern matches `module` (segments split at '.',
/// '*' matching one whole segment), or NULL.
tp_plan_entry *tp_plan_match(tp_plan *plan, const char *module, size_t len);

/// True if `pattern` matches `module[0..len)`.
bool tp_pattern_match(const char *pattern, const char *module, size_t len);

#endif // SHARD_PASSES_PLAN_H
