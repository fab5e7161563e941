// --summary: what a model is, in numbers a reader can check against the
// model card: parameter counts (total and per kind), layers by kind, heads
// and tied parameters.
#ifndef SHARD_IMPORT_SUMMARY_H
#define SHARD_IMPORT_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "graph.h"

/// Total number of parameter elements of `m` (a tied lm_head counts once).
int64_t import_summary_total(const import_model *m);

/// Elements of the parameters of `kind`.
int64_t import_summary_count(const import_model *m, import_param_kind kind);

/// Prints the summary of `cfg` / `m` to `out`, counts with thousands
/// separators ("parameters: 494,032,768").
void import_summary_print(FILE *out, const import_config *cfg,
                          const import_model *m);

#endif // SHARD_IMPORT_SUMMARY_H
