// srt_op_optimizer_step on a program of two parameters, one sharded over tp
// and one replicated: the reported norm equals the float64 norm of the
// unsharded gradients (p = 2 and inf), each element counted once; AdamW
// updates exactly as srt_cpu_adamw_step on the (clipped) gradients; a NaN in
// one rank's shard skips the step on every rank and changes nothing.
#include "runtime_ops_test_util.h"

#include <string.h>

#include "shardrt/kernels.h"

enum { A0 = 6, A1 = 4, BN = 5 };

static float grad_a(int64_t i) { return (float)(0.25 * (double)((i * 37) % 11) - 1.2); }
static float grad_b(int64_t i) { return (float)(0.5 * (double)i - 0.7); }

typedef struct fixture {
  srt_param_info params[2];
  srt_program program;
  int64_t la, loss; // local rows of a; loss offset
} fixture;

static void build(fixture *f) {
  arena_reset();
  int tp = tp_size(), idx = tp_index();
  f->la = A0 / tp;
  int64_t na = f->la * A1;
  srt_param_info a = {"a.weight", SRT_INIT_NORMAL, 2, {A0, A1}, {f->la, A1},
                      {{SRT_REPLICATE, 0}, {SRT_SHARD, 0}}, 0, 0, 0, 0, -1, -1, 0, {0}};
  srt_param_info b = {"b.bias", SRT_INIT_ZEROS, 1, {BN}, {BN},
                      {{SRT_REPLICATE, 0}, {SRT_REPLICATE, 0}}, 0, 0, 0, 0, -1, -1, 0, {0}};
  a.offset = arena_floats(41, na);
  a.grad_offset = arena_alloc(na * 4);
  a.m_offset = arena_alloc(na * 4);
  a.v_offset = arena_alloc(na * 4);
  b.offset = arena_floats(42, BN);
  b.grad_offset = arena_alloc(BN * 4);
  b.m_offset = arena_alloc(BN * 4);
  b.v_offset = arena_alloc(BN * 4);
  for (int64_t i = 0; i < na; ++i)
    F(a.grad_offset)[i] = grad_a(idx * na + i);
  for (int64_t i = 0; i < BN; ++i)
    F(b.grad_offset)[i] = grad_b(i);
  memset(F(a.m_offset), 0, (size_t)na * 4);
  memset(F(a.v_offset), 0, (size_t)na * 4);
  memset(F(b.m_offset), 0, BN * 4);
  memset(F(b.v_offset), 0, BN * 4);
  f->params[0] = a;
  f->params[1] = b;
  f->loss = arena_alloc(4);
  *F(f->loss) = 3.5f;
  memset(&f->program, 0, sizeof f->program);
  f->program.abi = SRT_PROGRAM_ABI;
  f->program.num_params = 2;
  f->program.params = f->params;
}

static double reference_norm(double p) {
  double acc = 0;
  for (int64_t i = 0; i < A0 * A1; ++i)
    acc = isinf(p) ? fmax(acc, fabs(grad_a(i))) : acc + pow(fabs(grad_a(i)), p);
  for (int64_t i = 0; i < BN; ++i)
    acc = isinf(p) ? fmax(acc, fabs(grad_b(i))) : acc + pow(fabs(grad_b(i)), p);
  return isinf(p) ? acc : pow(acc, 1.0 / p);
}

// One step with max_norm; checks the norm, then the parameters against
// AdamW on the gradients scaled by the clip coefficient.
static void step_and_check(double max_norm, double norm_type) {
  fixture f;
  build(&f);
  srt_exec e = test_exec();
  int64_t na = f.la * A1;
  float *pa = malloc((size_t)na * 4), *pb = malloc(BN * 4), *ga = malloc((size_t)na * 4),
        *gb = malloc(BN * 4), *m = calloc((size_t)na + BN, 4), *v = calloc((size_t)na + BN, 4);
  memcpy(pa, F(f.params[0].offset), (size_t)na * 4);
  memcpy(pb, F(f.params[1].offset), BN * 4);
  memcpy(ga, F(f.params[0].grad_offset), (size_t)na * 4);
  memcpy(gb, F(f.params[1].grad_offset), BN * 4);
  srt_step_options o = {.step = 3, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                        .weight_decay = 0.1f, .max_grad_norm = (float)max_norm,
                        .norm_type = norm_type};
  srt_step_result r;
  ASSERT_OK(srt_op_optimizer_step(&e, &f.program, &o, f.loss, &r));
  double want = reference_norm(norm_type);
  assert_true(fabs(r.grad_norm - want) <= 1e-6 * want);
  assert_true(r.loss == 3.5f);
  assert_false(r.skipped);
  double coef = (float)max_norm / (r.grad_norm + 1e-6);
  if (max_norm > 0 && coef < 1) {
    for (int64_t i = 0; i < na; ++i)
      ga[i] *= (float)coef;
    for (int64_t i = 0; i < BN; ++i)
      gb[i] *= (float)coef;
  }
  srt_adamw_config ac = {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  srt_cpu_adamw_step(pa, m, v, ga, 1.0f, na, 3, &ac);
  srt_cpu_adamw_step(pb, m + na, v + na, gb, 1.0f, BN, 3, &ac);
  assert_close(F(f.params[0].offset), pa, na, 0, "AdamW on the sharded parameter");
  assert_close(F(f.params[1].offset), pb, BN, 0, "AdamW on the replicated parameter");
  assert_close(F(f.params[0].m_offset), m, na, 0, "first moment");
  free(pa), free(pb), free(ga), free(gb), free(m), free(v);
}

static void test_norm_and_adamw(void **state) {
  (void)state;
  step_and_check(0.0, 2.0);      // no clipping
  step_and_check(1000.0, 2.0);   // coef >= 1: untouched
  step_and_check(1.0, 2.0);      // clipped
  step_and_check(0.5, INFINITY); // inf norm, clipped
}

static void test_nan_skips_everywhere(void **state) {
  (void)state;
  fixture f;
  build(&f);
  srt_exec e = test_exec();
  int64_t na = f.la * A1;
  if (tp_index() == tp_size() - 1)
    F(f.params[0].grad_offset)[1] = NAN; // in one rank's shard only
  float before = F(f.params[0].offset)[0], before_b = F(f.params[1].offset)[2];
  srt_step_options o = {.step = 1, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                        .weight_decay = 0.1f, .max_grad_norm = 1.0f, .norm_type = 2.0};
  srt_step_result r;
  ASSERT_OK(srt_op_optimizer_step(&e, &f.program, &o, f.loss, &r));
  assert_true(r.skipped);
  assert_true(isnan(r.grad_norm));
  assert_true(F(f.params[0].offset)[0] == before);
  assert_true(F(f.params[1].offset)[2] == before_b);
  for (int64_t i = 0; i < na; ++i)
    assert_true(F(f.params[0].m_offset)[i] == 0.0f);
  o.step = 0;
  ASSERT_ERROR(srt_op_optimizer_step(&e, &f.program, &o, f.loss, &r), SRT_INVALID_ARGUMENT,
               "step 0");
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_norm_and_adamw),
      cmocka_unit_test(test_nan_skips_everywhere),
  };
  int failed = cmocka_run_group_tests(tests, ops_setup, ops_teardown);
  MPI_Finalize();
  return failed;
}
