// The sharding rule of each nn op (rule_table.c): which factor table and
// which partition hooks apply to an op.
#ifndef SHARD_PASSES_RULE_TABLE_H
#define SHARD_PASSES_RULE_TABLE_H

#include <stdbool.h>

#include "mlir-c/IR.h"
#include "sharding_rules.h"

/// The rule of `op` (which depends on its operand ranks and attributes), or
/// false if `op` has none (not an nn op).
bool tp_rule_of(MlirOperation op, tp_rule *rule);

#endif // SHARD_PASSES_RULE_TABLE_H
