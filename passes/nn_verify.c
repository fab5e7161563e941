// nn-verify: the checks on nn ops that IRDL cannot express: static shapes,
// dimensions that must agree between operands, element types and ranges of
// attributes. Every error names the op, its `nn.module`, the dimension and
// the values involved, at the op's location.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"
#include "nn.h"
#include "pass.h"

typedef struct checker {
  MlirOperation op;
  int errors;
} checker;

// Emits "'nn.X' (module): <message>" at the op's location.
__attribute__((format(printf, 2, 3))) static void fail(checker *c,
                                                        const char *fmt, ...) {
  char msg[768];
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(c->op));
  MlirStringRef module = nn_module_of(c->op);
  if (module.length == 0)
    module = mlirStringRefCreateFromCString("no nn.module");
  int n = snprintf(msg, sizeof msg, "'%.*s' (%.*s): ", (int)name.length,
                   name.data, (int)(module.length < 256 ? module.length : 256), module.data);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  mlirEmitError(mlirOperationGetLocation(c->op), msg);
  ++c->errors;
}

// Writes "[d0, d1, ...]" into buf.
static const char *dims_str(const nn_shape *s, char *buf, size_t len) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < s->rank && n < len; ++i)
    n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "",
                          (long long)s->dims[i]);
  if (n < len)
    snprintf(buf + n, len - n, "]");
  return buf;
}

static int64_t last(const nn_shape *s) { return s->dims[s->rank - 1]; }

static bool is_int(MlirType t) { return mlirTypeIsAInteger(t); }
static bool is_float(MlirType t) { return mlirTypeIsAFloat(t); }

// Unpacks operand i; reports a non-static or unranked type.
static bool operand_shape(checker *c, intptr_t i, const char *what, nn_shape *s) {
  if (nn_shape_of(mlirValueGetType(mlirOperationGetOperand(c->op, i)), s))
    return true;
  fail(c, "%s must be a statically shaped ranked tensor", what);
  return false;
}

static bool result_shape(checker *c, intptr_t i, nn_shape *s) {
  if (nn_shape_of(mlirValueGetType(mlirOperationGetResult(c->op, i)), s))
    return true;
  fail(c, "result %d must be a statically shaped ranked tensor", (int)i);
  return false;
}

static bool want_rank(checker *c, const char *what, const nn_shape *s, int rank) {
  if (s->rank == rank)
    return true;
  char b[128];
  fail(c, "%s must have rank %d, got shape %s", what, rank,
       dims_str(s, b, sizeof b));
  return false;
}

// Checks that `got` equals `want`, naming both shapes on failure.
static void want_shape(checker *c, const char *what, const nn_shape *got,
                       const nn_shape *want) {
  bool same = got->rank == want->rank;
  for (int i = 0; same && i < got->rank; ++i)
    same = got->dims[i] == want->dims[i];
  if (!same) {
    char b1[128], b2[128];
    fail(c, "%s has shape %s, expected %s", what, dims_str(got, b1, sizeof b1),
         dims_str(want, b2, sizeof b2));
  } else if (!mlirTypeEqual(got->element, want->element)) {
    fail(c, "%s has a different element type than expected", what);
  }
}

static void want_positive(checker *c, const char *attr, int64_t v) {
  if (v <= 0)
    fail(c, "attribute '%s' must be positive, got %lld", attr, (long long)v);
}

//===----------------------------------------------------------------------===//
// Per-op checks
//===----------------------------------------------------------------------===//

static void check_embedding(checker *c) {
  nn_shape ids, w, out;
  if (!operand_shape(c, 0, "input_ids", &ids) || !operand_shape(c, 1, "weight", &w) ||
      !result_shape(c, 0, &out))
    return;
  if (!want_rank(c, "input_ids", &ids, 2) || !want_rank(c, "weight", &w, 2))
    return;
  if (!is_int(ids.element))
    fail(c, "input_ids must have an integer element type");
  nn_shape expect = {3, {ids.dims[0], ids.dims[1], w.dims[1]}, w.element};
  want_shape(c, "output", &out, &expect);
  // A global row id: below the local row count only while the vocabulary is
  // not split (tp-partition marks a split one with nn.vocab_parallel_axis).
  int64_t pad = nn_attr_int(c->op, "padding_idx", -1);
  bool split = !mlirAttributeIsNull(
      mlirOperationGetAttributeByName(c->op, mlirStringRefCreateFromCString("nn.vocab_parallel_axis")));
  if (pad < -1 || (!split && pad >= w.dims[0]))
    fail(c, "attribute 'padding_idx' must be -1 (none) or a row of the weight [0, %lld), got %lld",
         (long long)w.dims[0], (long long)pad);
}

static void check_linear(checker *c) {
  nn_shape x, w, out;
  if (!operand_shape(c, 0, "input", &x) || !operand_shape(c, 1, "weight", &w) ||
      !result_shape(c, 0, &out))
    return;
  if (!want_rank(c, "weight", &w, 2))
    return;
  if (x.rank < 1 || w.dims[1] != last(&x)) {
    fail(c, "weight in_features (dim 1) is %lld but the input's last dim is %lld",
         (long long)w.dims[1], (long long)(x.rank ? last(&x) : 0));
    return;
  }
  if (mlirOperationGetNumOperands(c->op) == 3) {
    nn_shape bias;
    if (!operand_shape(c, 2, "bias", &bias))
      return;
    if (bias.rank != 1 || bias.dims[0] != w.dims[0]) {
      char b[128];
      fail(c, "bias has shape %s, expected [%lld] (out_features)",
           dims_str(&bias, b, sizeof b), (long long)w.dims[0]);
    }
  }
  nn_shape expect = x;
  expect.dims[x.rank - 1] = w.dims[0];
  want_shape(c, "output", &out, &expect);
}

static void check_rms_norm(checker *c) {
  nn_shape x, w;
  if (!operand_shape(c, 0, "input", &x) || !operand_shape(c, 1, "weight", &w))
    return;
  double eps = nn_attr_float(c->op, "eps", 0);
  if (!(eps > 0))
    fail(c, "attribute 'eps' must be positive, got %g", eps);
  int64_t group = nn_attr_int(c->op, "head_dim", 0);
  if (!want_rank(c, "weight", &w, 1) || x.rank < 1)
    return;
  if (group < 0) {
    fail(c, "attribute 'head_dim' must be 0 (whole last dim) or positive, got %lld",
         (long long)group);
  } else if (group == 0 && w.dims[0] != last(&x)) {
    fail(c, "weight has %lld elements but the input's last dim is %lld",
         (long long)w.dims[0], (long long)last(&x));
  } else if (group > 0 && w.dims[0] != group) {
    fail(c, "weight has %lld elements but head_dim is %lld", (long long)w.dims[0],
         (long long)group);
  } else if (group > 0 && last(&x) % group != 0) {
    fail(c, "input's last dim %lld is not a multiple of head_dim %lld",
         (long long)last(&x), (long long)group);
  }
}

static void check_llama3(checker *c) {
  static const char *const keys[] = {"factor", "low_freq_factor", "high_freq_factor"};
  for (int i = 0; i < 3; ++i) {
    double v = nn_attr_float(c->op, keys[i], -1);
    if (!(v > 0))
      fail(c, "rope_type 'llama3' needs a positive float attribute '%s'", keys[i]);
  }
  if (nn_attr_float(c->op, "low_freq_factor", 0) >=
      nn_attr_float(c->op, "high_freq_factor", 0))
    fail(c, "llama3 low_freq_factor %g must be below high_freq_factor %g",
         nn_attr_float(c->op, "low_freq_factor", 0),
         nn_attr_float(c->op, "high_freq_factor", 0));
  want_positive(c, "original_max_position_embeddings",
                nn_attr_int(c->op, "original_max_position_embeddings", 0));
}

static void check_rotary_embedding(checker *c) {
  nn_shape cs;
  if (!result_shape(c, 0, &cs) || !want_rank(c, "cos", &cs, 3))
    return;
  int64_t hd = nn_attr_int(c->op, "head_dim", 0);
  if (hd <= 0 || hd % 2 != 0)
    fail(c, "attribute 'head_dim' must be positive and even, got %lld", (long long)hd);
  else if (last(&cs) != hd)
    fail(c, "cos/sin last dim is %lld but head_dim is %lld", (long long)last(&cs),
         (long long)hd);
  double theta = nn_attr_float(c->op, "theta", 0);
  if (!(theta > 0))
    fail(c, "attribute 'theta' must be positive, got %g", theta);
  if (mlirOperationGetNumOperands(c->op) == 1) {
    nn_shape pos;
    if (!operand_shape(c, 0, "position_ids", &pos))
      return;
    nn_shape expect = {2, {cs.dims[0], cs.dims[1]}, pos.element};
    want_shape(c, "position_ids", &pos, &expect);
    if (!is_int(pos.element))
      fail(c, "position_ids must have an integer element type");
  }
  MlirStringRef type = nn_attr_str(c->op, "rope_type");
  if (type.length == 6 && !memcmp(type.data, "llama3", 6))
    check_llama3(c);
  else if (type.length == 6 && !memcmp(type.data, "linear", 6))
  {
    if (!(nn_attr_float(c->op, "factor", -1) > 0))
      fail(c, "rope_type 'linear' needs a positive float attribute 'factor'");
  }
  else if (type.length && !(type.length == 7 && !memcmp(type.data, "default", 7)))
    fail(c, "rope_type '%.*s' is not default, llama3 or linear", (int)type.length, type.data);
}

static void check_apply_rotary(checker *c) {
  nn_shape x, cs;
  if (!operand_shape(c, 0, "input", &x) || !operand_shape(c, 1, "cos", &cs))
    return;
  if (!want_rank(c, "input", &x, 3) || !want_rank(c, "cos", &cs, 3))
    return;
  int64_t hd = nn_attr_int(c->op, "head_dim", 0);
  if (hd <= 0 || hd % 2 != 0) {
    fail(c, "attribute 'head_dim' must be positive and even, got %lld", (long long)hd);
    return;
  }
  if (last(&x) % hd != 0)
    fail(c, "input's last dim %lld is not a multiple of head_dim %lld",
         (long long)last(&x), (long long)hd);
  nn_shape expect = {3, {x.dims[0], x.dims[1], hd}, cs.element};
  want_shape(c, "cos/sin", &cs, &expect);
}

// An attention's lse: [batch, num_heads, seq] of f32.
static void want_lse(checker *c, const nn_shape *lse, const nn_shape *q, int64_t heads) {
  MlirType f32 = mlirF32TypeGet(mlirTypeGetContext(lse->element));
  if (!mlirTypeEqual(lse->element, f32)) {
    fail(c, "lse must have element type f32 (the log-sum-exp is kept in fp32)");
    return;
  }
  nn_shape want = {.rank = 3, .dims = {q->dims[0], heads, q->dims[1]}, .element = f32};
  want_shape(c, "lse", lse, &want);
}

static void check_static(checker *c);

// An attention's optional segment_ids (operand i): integer [batch, seq] of
// its query q.
static void want_segments(checker *c, intptr_t i, const nn_shape *q) {
  nn_shape seg;
  if (mlirOperationGetNumOperands(c->op) <= i || !operand_shape(c, i, "segment_ids", &seg))
    return;
  if (!is_int(seg.element)) {
    fail(c, "segment_ids must have an integer element type");
    return;
  }
  nn_shape expect = {2, {q->dims[0], q->dims[1]}, seg.element};
  want_shape(c, "segment_ids", &seg, &expect);
}

static void check_attention(checker *c) {
  nn_shape q, k;
  if (!operand_shape(c, 0, "query", &q) || !operand_shape(c, 1, "key", &k))
    return;
  if (!want_rank(c, "query", &q, 3) || !want_rank(c, "key", &k, 3))
    return;
  int64_t h = nn_attr_int(c->op, "num_heads", 0);
  int64_t kv = nn_attr_int(c->op, "num_kv_heads", 0);
  int64_t hd = nn_attr_int(c->op, "head_dim", 0);
  want_positive(c, "num_heads", h);
  want_positive(c, "num_kv_heads", kv);
  want_positive(c, "head_dim", hd);
  if (h <= 0 || kv <= 0 || hd <= 0)
    return;
  int64_t product;
  if (__builtin_mul_overflow(h, hd, &product) || __builtin_mul_overflow(kv, hd, &product)) {
    fail(c, "num_heads %lld / num_kv_heads %lld x head_dim %lld overflows int64",
         (long long)h, (long long)kv, (long long)hd);
    return;
  }
  if (h % kv != 0)
    fail(c, "num_heads %lld is not divisible by num_kv_heads %lld (GQA)",
         (long long)h, (long long)kv);
  if (last(&q) != h * hd)
    fail(c, "query's last dim is %lld but num_heads x head_dim = %lld x %lld = %lld",
         (long long)last(&q), (long long)h, (long long)hd, (long long)(h * hd));
  if (last(&k) != kv * hd)
    fail(c, "key/value last dim is %lld but num_kv_heads x head_dim = %lld x %lld = %lld",
         (long long)last(&k), (long long)kv, (long long)hd, (long long)(kv * hd));
  if (q.dims[0] != k.dims[0] || q.dims[1] != k.dims[1])
    fail(c, "query batch x seq %lld x %lld differs from key's %lld x %lld",
         (long long)q.dims[0], (long long)q.dims[1], (long long)k.dims[0],
         (long long)k.dims[1]);
  double scale = nn_attr_float(c->op, "scale", 0);
  if (!(scale > 0))
    fail(c, "attribute 'scale' must be positive, got %g", scale);
  int64_t window = nn_attr_int(c->op, "sliding_window", 0);
  if (window < 0)
    fail(c, "attribute 'sliding_window' must be 0 (none) or positive, got %lld",
         (long long)window);
  double softcap = nn_attr_float(c->op, "softcap", 0);
  if (!(softcap >= 0))
    fail(c, "attribute 'softcap' must be 0 (none) or positive, got %g", softcap);
  nn_shape lse;
  if (result_shape(c, 1, &lse))
    want_lse(c, &lse, &q, h);
  want_segments(c, 3, &q);
}

// nn.attention_grad: statically shaped, its lse operand as the forward's.
static void check_attention_grad(checker *c) {
  check_static(c);
  nn_shape q, lse;
  if (nn_shape_of(mlirValueGetType(mlirOperationGetOperand(c->op, 0)), &q) && q.rank == 3 &&
      nn_shape_of(mlirValueGetType(mlirOperationGetOperand(c->op, 4)), &lse)) {
    want_lse(c, &lse, &q, nn_attr_int(c->op, "num_heads", 0));
    want_segments(c, 6, &q);
  }
}

static void check_float_elementwise(checker *c) {
  nn_shape x;
  if (operand_shape(c, 0, "input", &x) && !is_float(x.element))
    fail(c, "operands must have a floating-point element type");
}

static void check_cross_entropy(checker *c) {
  nn_shape logits, labels, loss;
  if (!operand_shape(c, 0, "logits", &logits) ||
      !operand_shape(c, 1, "labels", &labels) || !result_shape(c, 0, &loss))
    return;
  if (!want_rank(c, "logits", &logits, 3) || !want_rank(c, "labels", &labels, 2))
    return;
  if (!is_int(labels.element))
    fail(c, "labels must have an integer element type");
  if (labels.dims[0] != logits.dims[0] || labels.dims[1] != logits.dims[1])
    fail(c, "labels shape [%lld, %lld] does not match logits batch x seq %lld x %lld",
         (long long)labels.dims[0], (long long)labels.dims[1],
         (long long)logits.dims[0], (long long)logits.dims[1]);
  if (loss.rank != 0 || !mlirTypeIsAF32(loss.element))
    fail(c, "loss must be tensor<f32>");
  if (nn_attr_int(c->op, "shift", 0) && logits.dims[1] < 2)
    fail(c, "shifted labels need a sequence of at least 2, got %lld",
         (long long)logits.dims[1]);
}

// Checks `what` (operand i) against rank/dims in `dims` and x's element type.
static void want_param(checker *c, intptr_t i, const char *what, int rank,
                       const int64_t *dims, MlirType element) {
  nn_shape got;
  if (!operand_shape(c, i, what, &got))
    return;
  nn_shape expect = {rank, {0}, element};
  for (int d = 0; d < rank; ++d)
    expect.dims[d] = dims[d];
  want_shape(c, what, &got, &expect);
}

// Operand i, document ids: i64 [B, S] of `x`'s batch and sequence (the
// runtime reads them as int64).
static void want_segment_ids(checker *c, intptr_t i, const nn_shape *x) {
  nn_shape seg;
  if (!operand_shape(c, i, "segment_ids", &seg))
    return;
  nn_shape expect = {2, {x->dims[0], x->dims[1]}, seg.element};
  want_shape(c, "segment_ids", &seg, &expect);
  if (!mlirTypeIsAInteger(seg.element) || mlirIntegerTypeGetWidth(seg.element) != 64)
    fail(c, "segment_ids must have element type i64");
}

static void check_mamba2_mixer(checker *c) {
  nn_shape x, out;
  if (!operand_shape(c, 0, "input", &x) || !result_shape(c, 0, &out) ||
      !want_rank(c, "input", &x, 3))
    return;
  if (!is_float(x.element))
    fail(c, "input must have a floating-point element type");
  static const char *const keys[] = {"num_heads",  "head_dim",    "n_groups",
                                     "state_size", "conv_kernel", "chunk_size"};
  int64_t v[6];
  bool ok = true;
  for (int i = 0; i < 6; ++i) {
    v[i] = nn_attr_int(c->op, keys[i], 0);
    want_positive(c, keys[i], v[i]);
    ok = ok && v[i] > 0;
  }
  double eps = nn_attr_float(c->op, "eps", 0);
  if (!(eps > 0))
    fail(c, "attribute 'eps' must be positive, got %g", eps);
  double dt_min = nn_attr_float(c->op, "dt_min", -1);
  if (!(dt_min >= 0) || !isfinite(dt_min))
    fail(c, "attribute 'dt_min' (time_step_min, dt's lower clamp) must be finite and >= 0, "
            "got %g", dt_min);
  if (!ok)
    return;
  // Sizes far beyond any model would overflow the shape arithmetic below.
  for (int i = 0; i < 6; ++i)
    if (v[i] > (int64_t)1 << 24) {
      fail(c, "attribute '%s' is %lld, beyond the supported 16777216", keys[i], (long long)v[i]);
      return;
    }
  int64_t heads = v[0], inner = v[0] * v[1], groups = v[2], state = v[3];
  if (heads % groups != 0) {
    fail(c, "num_heads %lld is not divisible by n_groups %lld", (long long)heads,
         (long long)groups);
    return;
  }
  int64_t hidden = last(&x), conv = inner + 2 * groups * state;
  want_param(c, 1, "in_proj_weight", 2, (int64_t[]){inner + conv + heads, hidden},
             x.element);
  want_param(c, 2, "conv1d_weight", 3, (int64_t[]){conv, 1, v[4]}, x.element);
  want_param(c, 3, "conv1d_bias", 1, (int64_t[]){conv}, x.element);
  want_param(c, 4, "dt_bias", 1, (int64_t[]){heads}, x.element);
  want_param(c, 5, "A_log", 1, (int64_t[]){heads}, x.element);
  want_param(c, 6, "D", 1, (int64_t[]){heads}, x.element);
  want_param(c, 7, "norm_weight", 1, (int64_t[]){inner}, x.element);
  want_param(c, 8, "out_proj_weight", 2, (int64_t[]){hidden, inner}, x.element);
  want_shape(c, "output", &out, &x);
  if (mlirOperationGetNumOperands(c->op) > 9)
    want_segment_ids(c, 9, &x);
}

static void check_bias_add(checker *c) {
  nn_shape x, b;
  if (!operand_shape(c, 0, "input", &x) || !operand_shape(c, 1, "bias", &b))
    return;
  if (x.rank < 1 || b.rank != 1 || b.dims[0] != last(&x)) {
    char b1[128], b2[128];
    fail(c, "bias has shape %s but the input %s needs [%lld]", dims_str(&b, b1, sizeof b1),
         dims_str(&x, b2, sizeof b2), (long long)(x.rank ? last(&x) : 0));
  }
}

// The cross-entropy steps: [B, S] statistics of [B, S, V] logits.
static void check_ce_step(checker *c) {
  nn_shape first;
  if (!operand_shape(c, 0, "operand 0", &first))
    return;
  nn_shape stat;
  intptr_t stat_index = nn_op_kind_of(c->op) == NN_OP_CE_LOGIT_MAX ? -1 : 0;
  if (stat_index < 0) {
    if (!want_rank(c, "logits", &first, 3) || !result_shape(c, 0, &stat))
      return;
    nn_shape expect = {2, {first.dims[0], first.dims[1]}, stat.element};
    want_shape(c, "max", &stat, &expect);
  } else if (nn_op_kind_of(c->op) == NN_OP_CE_PARTIAL_SUMS) {
    if (!want_rank(c, "logits", &first, 3) || !operand_shape(c, 2, "max", &stat))
      return;
    nn_shape expect = {2, {first.dims[0], first.dims[1]}, stat.element};
    want_shape(c, "max", &stat, &expect);
  } else if (nn_op_kind_of(c->op) == NN_OP_CE_LOSS_SUM) {
    want_rank(c, "max", &first, 2);
  } else if (first.rank != 1 || first.dims[0] != 2) {
    fail(c, "sum_and_count must be tensor<2xf32>");
  }
}

// Backward and optimizer ops: every operand and result statically shaped;
// a gradient has the type of what it is the gradient of (IRDL checks the
// ones it can tie to an operand; the rest are checked here).
static void check_static(checker *c) {
  nn_shape s;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(c->op); ++i)
    if (!nn_shape_of(mlirValueGetType(mlirOperationGetOperand(c->op, i)), &s)) {
      fail(c, "operand %d must be a statically shaped ranked tensor", (int)i);
      return;
    }
  for (intptr_t i = 0; i < mlirOperationGetNumResults(c->op); ++i)
    if (!result_shape(c, i, &s))
      return;
}

typedef void (*check_fn)(checker *);

// Each op's check: the `verify` column of the op table.
static const check_fn kChecks[NN_OP_COUNT] = {
#define NN_OP(KIND, name, phase, rule, verify) [NN_OP_##KIND] = check_##verify,
#include "shardrt/ops.def"
};

// Argument `i`'s nn.init, when it has one, is one of the known inits and
// sits on a parameter (with `param`, its nn.param).
static void check_param_init(MlirOperation func, intptr_t i, MlirAttribute dict,
                             MlirAttribute param, int *errors) {
  MlirAttribute init =
      mlirDictionaryAttrGetElementByName(dict, mlirStringRefCreateFromCString(NN_INIT_ATTR));
  if (mlirAttributeIsNull(init))
    return;
  bool known =
      mlirAttributeIsAString(init) && nn_param_init_parse(mlirStringAttrGetValue(init)) >= 0;
  if (known && !mlirAttributeIsNull(param))
    return;
  char msg[200];
  snprintf(msg, sizeof msg,
           known ? "argument %ld: nn.init is only for parameters (arguments with nn.param)"
                 : "argument %ld: nn.init must be one of \"normal\", \"zeros\", \"ones\", "
                   "\"a_log\", \"dt_bias\"",
           (long)i);
  mlirEmitError(mlirOperationGetLocation(func), msg);
  ++*errors;
}

// A function's parameters (arguments with nn.param) have distinct names:
// checkpoints and plans address them by name.
static void check_param_names(MlirOperation func, int *errors) {
  MlirAttribute all = mlirOperationGetAttributeByName(func, mlirStringRefCreateFromCString("arg_attrs"));
  intptr_t n = mlirAttributeIsNull(all) ? 0 : mlirArrayAttrGetNumElements(all);
  MlirStringRef param = mlirStringRefCreateFromCString(NN_PARAM_ATTR);
  for (intptr_t i = 0; i < n; ++i) {
    MlirAttribute a = mlirDictionaryAttrGetElementByName(mlirArrayAttrGetElement(all, i), param);
    check_param_init(func, i, mlirArrayAttrGetElement(all, i), a, errors);
    if (!mlirAttributeIsNull(a) && !mlirAttributeIsAString(a)) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "argument %ld: nn.param must be a string (the Hugging Face tensor name)",
               (long)i);
      mlirEmitError(mlirOperationGetLocation(func), msg);
      ++*errors;
      continue;
    }
    for (intptr_t j = 0; !mlirAttributeIsNull(a) && j < i; ++j) {
      MlirAttribute b =
          mlirDictionaryAttrGetElementByName(mlirArrayAttrGetElement(all, j), param);
      if (mlirAttributeIsNull(b) || !mlirAttributeEqual(a, b))
        continue;
      MlirStringRef name = mlirStringAttrGetValue(a);
      char msg[512];
      snprintf(msg, sizeof msg,
               "arguments %ld and %ld are both the parameter '%.*s' (nn.param names must "
               "be unique)",
               (long)j, (long)i, (int)(name.length < 256 ? name.length : 256), name.data);
      mlirEmitError(mlirOperationGetLocation(func), msg);
      ++*errors;
      break;
    }
  }
}

static MlirWalkResult verify_op(MlirOperation op, void *data) {
  int *errors = data;
  MlirStringRef op_name = mlirIdentifierStr(mlirOperationGetName(op));
  if (mlirStringRefEqual(op_name, mlirStringRefCreateFromCString("func.func")))
    check_param_names(op, errors);
  nn_op_kind kind = nn_op_kind_of(op);
  if (kind == NN_OP_NONE)
    return MlirWalkResultAdvance;
  checker c = {op, 0};
  MlirAttribute module = mlirOperationGetAttributeByName(
      op, mlirStringRefCreateFromCString(NN_MODULE_ATTR));
  if (mlirAttributeIsNull(module) || !mlirAttributeIsAString(module) ||
      nn_module_of(op).length == 0)
    fail(&c, "missing the '" NN_MODULE_ATTR "' string attribute (the Hugging Face "
             "module path)");
  else if (kChecks[kind])
    kChecks[kind](&c);
  *errors += c.errors;
  return MlirWalkResultAdvance;
}

static MlirLogicalResult run_nn_verify(MlirOperation op,
                                       const tp_option_value *options) {
  (void)options;
  int errors = 0;
  mlirOperationWalk(op, verify_op, &errors, MlirWalkPreOrder);
  return errors ? mlirLogicalResultFailure() : mlirLogicalResultSuccess();
}

const tp_pass_info tp_nn_verify_pass = {
    .argument = "nn-verify",
    .summary = "Check nn op shapes, element types and attributes beyond IRDL",
    .anchor = "",
    .options = NULL,
    .num_options = 0,
    .run = run_nn_verify,
};
