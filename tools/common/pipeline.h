// Building pass managers from pipeline text, with our passes mixed in.
//
// LLVM 22's C API cannot register external passes in MLIR's global registry,
// so MLIR's own pipeline parser does not know our passes. We parse the
// nesting (`builtin.module(func.func(a,b{x=1}),c)`) ourselves, create our
// passes with tp_pass_create, nest with mlirOpPassManagerGetNestedUnder, and
// hand every other element to mlirOpPassManagerAddPipeline unchanged.
#ifndef SHARD_TOOLS_PIPELINE_H
#define SHARD_TOOLS_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "mlir-c/Pass.h"

/// Adds `text`, a full pipeline anchored on `builtin.module(...)` as in
/// mlir-opt's --pass-pipeline, to `pm` (a pass manager on builtin.module).
/// On error writes a message naming the offending element to `err` (size
/// `errlen`) and returns false; `pm` may then hold part of the pipeline.
bool tool_pipeline_add(MlirPassManager pm, const char *text, char *err,
                       size_t errlen);

/// Adds tp-plan for `plan` (a built-in plan's name or a plan file), tp, dp
/// and cp sizes (cp > 1 is refused by the pass, naming the values: context
/// parallelism is not implemented yet), sequence parallelism and (with `dp_replicate`) parameters
/// replicated over dp instead of FSDP's Shard(0) to `pm` at module level, created from
/// these values (tp_pass_create_with): the plan is never spliced into
/// pipeline text, so no name can add passes or options of its own.
bool tool_pipeline_add_tp_plan(MlirPassManager pm, const char *plan, int64_t tp, int64_t dp,
                               int64_t cp, bool sequence_parallel, bool dp_replicate,
                               char *err, size_t errlen);

/// Adds one pass given as a driver flag body: `name` or `name=options` (the
/// mlir-opt form `--name="a=1 b=2"`), ours or upstream, at module level; an
/// upstream pass restricted to another op (e.g. convert-gpu-to-nvvm, on
/// gpu.module) is nested under that op, as mlir-opt nests it. `ctx` is
/// `pm`'s context. Returns false with `err` set if no pass has that name or
/// an option is bad.
bool tool_pipeline_add_flag(MlirContext ctx, MlirPassManager pm, const char *flag, char *err,
                            size_t errlen);

/// Splits `text[0..len)` at top-level commas (outside (), {} and quotes),
/// calling `fn(elem, elem_len, data)` for each non-empty element (trimmed of
/// spaces) until it returns false. Returns false if brackets do not balance
/// or `fn` returned false.
bool tool_pipeline_split(const char *text, size_t len,
                         bool (*fn)(const char *elem, size_t elem_len, void *data),
                         void *data);

#endif // SHARD_TOOLS_PIPELINE_H
