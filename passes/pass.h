// Our passes as data: each pass is a `tp_pass_info` (argument, summary,
// anchor op, typed options, run function), wrapped into an MLIR external pass
// by tp_pass_create. LLVM 22's C API cannot add external passes to MLIR's
// global registry, so drivers look ours up here (tp_pass_lookup) and hand
// everything else to MLIR's textual pipeline parser.
#ifndef SHARD_PASSES_PASS_H
#define SHARD_PASSES_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

typedef enum tp_option_type {
  TP_OPTION_INT,    // int64, decimal
  TP_OPTION_FLOAT,  // double, strtod syntax
  TP_OPTION_BOOL,   // true/false/1/0
  TP_OPTION_STRING, // any text; may be "quoted"
} tp_option_type;

typedef struct tp_option_info {
  const char *name;          // as written in `{name=value}`
  tp_option_type type;
  const char *default_value; // text, parsed like a user value
  const char *help;
} tp_option_info;

/// One parsed option value; the member matching the option's type is set.
/// `s` is owned by the pass instance holding it.
typedef struct tp_option_value {
  int64_t i;
  double f;
  bool b;
  char *s;
} tp_option_value;

//===----------------------------------------------------------------------===//
// Passes
//===----------------------------------------------------------------------===//

typedef struct tp_pass_info {
  const char *argument; // pipeline name and driver flag, e.g. "nn-verify"
  const char *summary;  // one line for --help
  const char *anchor;   // op the pass runs on ("builtin.module"), "" = any op
  const tp_option_info *options;
  int num_options;
  /// The dialect whose ops the pass creates, loaded before it runs (NULL:
  /// none beyond those already in the IR).
  MlirDialectHandle (*creates)(void);
  /// Runs the pass on `op` with `options[i]` parsed from `options` info i.
  /// Reports problems as diagnostics on the ops' locations and returns
  /// failure if any is an error.
  MlirLogicalResult (*run)(MlirOperation op, const tp_option_value *options);
} tp_pass_info;

/// All our passes, `*count` of them, in --help order.
const tp_pass_info *const *tp_pass_list(int *count);

/// The pass whose argument is exactly `name[0..len)`, or NULL.
const tp_pass_info *tp_pass_lookup(const char *name, size_t len);

/// Creates an MLIR pass running `info` with options parsed from `options`
/// (MLIR's `key=value key=value` syntax, without the braces; NULL or "" for
/// the defaults). On a malformed or unknown option, writes a message naming
/// the pass, the option and the value to `err` (size `errlen`) and returns a
/// pass whose `ptr` is NULL. The caller owns the pass until it is added to a
/// pass manager.
MlirPass tp_pass_create(const tp_pass_info *info, const char *options,
                        char *err, size_t errlen);

/// One option set by value: its name and, by the option's type, the member
/// of `value` to use (a string is copied).
typedef struct tp_option_setting {
  const char *name;
  tp_option_value value;
} tp_option_setting;

/// Creates an MLIR pass running `info` with its defaults and then the `n`
/// settings: no text is parsed, so a value (a plan's file name) cannot be
/// read as pipeline or option syntax. Errors (an unknown option name, no
/// string for a string option) as tp_pass_create.
MlirPass tp_pass_create_with(const tp_pass_info *info, int n, const tp_option_setting *settings,
                             char *err, size_t errlen);

//===----------------------------------------------------------------------===//
// The passes
//===----------------------------------------------------------------------===//

/// nn-verify: the checks IRDL cannot express (shapes, element types, ranges).
extern const tp_pass_info tp_nn_verify_pass;

/// nn-autodiff: append the backward graph; functions also return gradients.
extern const tp_pass_info tp_nn_autodiff_pass;

/// nn-optimizer{max-grad-norm= norm-type= lr= betas= eps= weight-decay=}:
/// consume the gradients with one nn.optimizer_step.
extern const tp_pass_info tp_nn_optimizer_pass;

/// tp-plan{plan= tp= dp= sequence-parallel= model-type=}: match a plan's
/// entries to ops by nn.module, check splits, annotate with shard ops.
extern const tp_pass_info tp_plan_pass;

/// tp-partition: rewrite annotated graphs into per-rank graphs with
/// explicit collectives.
extern const tp_pass_info tp_partition_pass;

/// overlap-collectives: parameter gathers started a layer ahead, gradient
/// reductions completed under the backward (nn.wait after each).
extern const tp_pass_info tp_overlap_pass;

/// lower-to-runtime{backend=cpu}: a partitioned step as LLVM-dialect calls
/// into libshardrt with a static memory plan and the program table.
extern const tp_pass_info tp_lower_to_runtime_pass;

/// shard-report: per-rank memory and collective traffic of partitioned graphs.
extern const tp_pass_info tp_shard_report_pass;

#endif // SHARD_PASSES_PASS_H
