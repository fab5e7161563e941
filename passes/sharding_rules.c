// The decision procedure of the sharding rules: turns operand placements
// into required placements and result placements, one mesh axis at a time.
// (The rule of each op, factor tables and hooks, is rule_table.c's.)
#include "sharding_rules.h"

#include "mlir-c/BuiltinTypes.h"

#include <stdio.h>
#include <string.h>

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
