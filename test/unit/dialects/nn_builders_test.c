// Unit tests of the nn dialect's C builders and accessors: every builder
// makes an op that MLIR's verifier (IRDL constraints) and nn-verify accept,
// with the result shapes the op's semantics require; accessors read back
// what the builders wrote.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Pass.h"
#include "nn.h"
#include "pass.h"

typedef struct fixture {
  MlirContext ctx;
  MlirModule module;
  MlirBlock body; // body of func.func @f
  nn_builder b;
  int errors;
} fixture;

static void print_stderr(MlirStringRef s, void *data) {
  (void)data;
  fprintf(stderr, "%.*s", (int)s.length, s.data);
}

// Counts errors, and prints every diagnostic so a failure explains itself.
static MlirLogicalResult count_errors(MlirDiagnostic d, void *data) {
  mlirDiagnosticPrint(d, print_stderr, NULL);
  fputc('\n', stderr);
  if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError)
    ++((fixture *)data)->errors;
  return mlirLogicalResultSuccess();
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->ctx = nn_context_create();
  assert_false(mlirContextIsNull(f->ctx));
  mlirContextAttachDiagnosticHandler(f->ctx, count_errors, f, NULL);
  MlirLocation loc = mlirLocationUnknownGet(f->ctx);
  f->module = mlirModuleCreateEmpty(loc);
  f->body = mlirBlockCreate(0, NULL, NULL);
  f->b = (nn_builder){f->ctx, f->body, loc};
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mlirModuleDestroy(f->module);
  mlirContextDestroy(f->ctx);
  free(f);
  return 0;
}

static MlirValue arg(fixture *f, int rank, const int64_t *dims, MlirType elem) {
  MlirType t = nn_tensor_type(f->ctx, rank, dims, elem);
  return mlirBlockAddArgument(f->body, t, mlirLocationUnknownGet(f->ctx));
}

// Wraps the built block in func.func @f returning `result`, asserts that
// MLIR's verifier accepts it, runs nn-verify and returns the number of
// failures and errors it reported.
static int finish_and_verify(fixture *f, MlirValue result) {
  MlirOperationState ret = mlirOperationStateGet(
      mlirStringRefCreateFromCString("func.return"), f->b.loc);
  mlirOperationStateAddOperands(&ret, 1, &result);
  mlirBlockAppendOwnedOperation(f->body, mlirOperationCreate(&ret));
  intptr_t nargs = mlirBlockGetNumArguments(f->body);
  MlirType inputs[32];
  for (intptr_t i = 0; i < nargs; ++i)
    inputs[i] = mlirValueGetType(mlirBlockGetArgument(f->body, i));
  MlirType out = mlirValueGetType(result);
  MlirType fn = mlirFunctionTypeGet(f->ctx, nargs, inputs, 1, &out);
  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, f->body);
  MlirOperationState st = mlirOperationStateGet(
      mlirStringRefCreateFromCString("func.func"), f->b.loc);
  MlirNamedAttribute attrs[2] = {
      mlirNamedAttributeGet(mlirIdentifierGet(f->ctx, mlirStringRefCreateFromCString("sym_name")),
                            mlirStringAttrGet(f->ctx, mlirStringRefCreateFromCString("f"))),
      mlirNamedAttributeGet(mlirIdentifierGet(f->ctx, mlirStringRefCreateFromCString("function_type")),
                            mlirTypeAttrGet(fn))};
  mlirOperationStateAddAttributes(&st, 2, attrs);
  mlirOperationStateAddOwnedRegions(&st, 1, &region);
  mlirBlockAppendOwnedOperation(mlirModuleGetBody(f->module), mlirOperationCreate(&st));
  MlirOperation m = mlirModuleGetOperation(f->module);
  // The structure (func, IRDL constraints) must be valid: only nn-verify's
  // checks are under test here.
  assert_true(mlirOperationVerify(m));
  char err[256];
  MlirPassManager pm = mlirPassManagerCreate(f->ctx);
  mlirPassManagerAddOwnedPass(pm, tp_pass_create(&tp_nn_verify_pass, NULL, err, sizeof err));
  int failed = mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, m));
  mlirPassManagerDestroy(pm);
  return failed + f->errors;
}

static void assert_shape(MlirValue v, int rank, const int64_t *dims) {
  nn_shape s;
  assert_true(nn_shape_of(mlirValueGetType(v), &s));
  assert_int_equal(s.rank, rank);
  for (int i = 0; i < rank; ++i)
    assert_int_equal(s.dims[i], dims[i]);
}

// A Qwen2-style attention + MLP block through every forward builder.
static void test_layer_builds_and_verifies(void **state) {
  fixture *f = *state;
  MlirType i64 = mlirIntegerTypeGet(f->ctx, 64), f32 = mlirF32TypeGet(f->ctx);
  MlirValue ids = arg(f, 2, (int64_t[]){2, 8}, i64);
  MlirValue emb = arg(f, 2, (int64_t[]){256, 64}, f32);
  MlirValue ln = arg(f, 1, (int64_t[]){64}, f32);
  MlirValue wq = arg(f, 2, (int64_t[]){64, 64}, f32);
  MlirValue bq = arg(f, 1, (int64_t[]){64}, f32);
  MlirValue wk = arg(f, 2, (int64_t[]){32, 64}, f32);
  MlirValue qn = arg(f, 1, (int64_t[]){16}, f32);
  MlirValue wg = arg(f, 2, (int64_t[]){128, 64}, f32);
  MlirValue wd = arg(f, 2, (int64_t[]){64, 128}, f32);

  MlirValue x = nn_build_embedding(&f->b, "model.embed_tokens", ids, emb, 8.0, 0);
  assert_shape(x, 3, (int64_t[]){2, 8, 64});
  nn_rope rope = {.head_dim = 16, .theta = 500000.0, .rope_type = "llama3",
                  .factor = 32, .low_freq_factor = 1, .high_freq_factor = 4,
                  .original_max_position_embeddings = 8192};
  MlirValue cos, sin;
  nn_build_rotary_embedding(&f->b, "model.rotary_emb", &rope, (MlirValue){NULL}, 2, 8, f32,
                            &cos, &sin);
  assert_shape(sin, 3, (int64_t[]){2, 8, 16});
  MlirValue h = nn_build_like(&f->b, NN_OP_RMS_NORM, "model.layers.0.input_layernorm", 2,
                              (MlirValue[]){x, ln}, 3,
                              (nn_attr[]){NN_FLOAT("eps", 1e-6), NN_FLOAT("offset", 1.0),
                                          NN_INT("head_dim", 0)});
  MlirValue q = nn_build_linear(&f->b, "model.layers.0.self_attn.q_proj", h, wq, bq);
  MlirValue k = nn_build_linear(&f->b, "model.layers.0.self_attn.k_proj", h, wk,
                                (MlirValue){NULL});
  assert_shape(k, 3, (int64_t[]){2, 8, 32});
  q = nn_build_like(&f->b, NN_OP_RMS_NORM, "model.layers.0.self_attn.q_norm", 2,
                    (MlirValue[]){q, qn}, 3,
                    (nn_attr[]){NN_FLOAT("eps", 1e-6), NN_FLOAT("offset", 0.0),
                                NN_INT("head_dim", 16)});
  nn_attr head_dim = NN_INT("head_dim", 16);
  q = nn_build_like(&f->b, NN_OP_APPLY_ROTARY, "model.layers.0.self_attn", 3,
                    (MlirValue[]){q, cos, sin}, 1, &head_dim);
  k = nn_build_like(&f->b, NN_OP_APPLY_ROTARY, "model.layers.0.self_attn", 3,
                    (MlirValue[]){k, cos, sin}, 1, &head_dim);
  nn_attention_config cfg = {4, 2, 16, true, 0.25, 4, 50.0, 1};
  MlirValue a = nn_build_attention(&f->b, "model.layers.0.self_attn", q, k, k, (MlirValue){NULL},
                                   &cfg);
  // Result 1: the log-sum-exp [batch, num_heads, seq], f32.
  MlirValue lse = mlirOperationGetResult(mlirOpResultGetOwner(a), 1);
  assert_shape(lse, 3, (int64_t[]){2, 4, 8});
  assert_true(mlirTypeIsAF32(mlirShapedTypeGetElementType(mlirValueGetType(lse))));
  x = nn_build_like(&f->b, NN_OP_ADD, "model.layers.0", 2, (MlirValue[]){x, a}, 0, NULL);
  MlirValue g = nn_build_linear(&f->b, "model.layers.0.mlp.gate_proj", x, wg, (MlirValue){NULL});
  MlirValue m = nn_build_like(&f->b, NN_OP_GLU, "model.layers.0.mlp", 2, (MlirValue[]){g, g}, 1,
                              (nn_attr[]){NN_STR("activation", "gelu_tanh")});
  m = nn_build_like(&f->b, NN_OP_RELU2, "model.layers.0.mlp", 1, &m, 0, NULL);
  MlirValue d = nn_build_linear(&f->b, "model.layers.0.mlp.down_proj", m, wd, (MlirValue){NULL});
  MlirValue logits = nn_build_linear(&f->b, "lm_head", d, emb, (MlirValue){NULL});
  assert_shape(logits, 3, (int64_t[]){2, 8, 256});
  MlirValue loss = nn_build_cross_entropy(&f->b, "loss", logits, ids, -100, true);
  assert_shape(loss, 0, NULL);
  assert_int_equal(finish_and_verify(f, loss), 0);

  // Accessors read back what the builders wrote.
  MlirOperation att = mlirOpResultGetOwner(a);
  assert_int_equal(nn_op_kind_of(att), NN_OP_ATTENTION);
  assert_int_equal(nn_attr_int(att, "num_kv_heads", -1), 2);
  assert_int_equal(nn_attr_int(att, "causal", -1), 1);
  assert_true(nn_attr_float(att, "softcap", -1) == 50.0);
  MlirStringRef module = nn_module_of(att);
  assert_int_equal(module.length, strlen("model.layers.0.self_attn"));
  assert_memory_equal(module.data, "model.layers.0.self_attn", module.length);
  MlirOperation rot = mlirOpResultGetOwner(cos);
  assert_int_equal(nn_attr_int(rot, "original_max_position_embeddings", 0), 8192);
  MlirStringRef type = nn_attr_str(rot, "rope_type");
  assert_memory_equal(type.data, "llama3", 6);
  assert_int_equal(nn_attr_int(rot, "missing", 7), 7);
  // nn_build_like's attributes, each of its kind's type.
  MlirOperation norm = mlirOpResultGetOwner(h);
  assert_true(nn_attr_float(norm, "offset", -1) == 1.0);
  assert_true(nn_attr_float(norm, "eps", -1) == 1e-6);
  assert_int_equal(nn_attr_int(mlirOpResultGetOwner(k), "head_dim", 0), 16);
}

// A builder given inconsistent shapes yields an op nn-verify rejects.
static void test_bad_shapes_are_caught(void **state) {
  fixture *f = *state;
  MlirType f32 = mlirF32TypeGet(f->ctx);
  MlirValue x = arg(f, 3, (int64_t[]){1, 4, 64}, f32);
  MlirValue w = arg(f, 2, (int64_t[]){32, 48}, f32); // in_features 48 != 64
  MlirValue y = nn_build_linear(&f->b, "bad", x, w, (MlirValue){NULL});
  assert_true(finish_and_verify(f, y) > 0);
}

static void test_op_kinds(void **state) {
  (void)state;
  for (int k = 0; k < NN_OP_COUNT; ++k)
    assert_non_null(nn_op_name((nn_op_kind)k));
  assert_null(nn_op_name(NN_OP_NONE));
  assert_string_equal(nn_op_name(NN_OP_CROSS_ENTROPY), "nn.cross_entropy");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_layer_builds_and_verifies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_shapes_are_caught, setup, teardown),
      cmocka_unit_test(test_op_kinds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
