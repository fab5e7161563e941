// The driver's initialisation of a Mamba2 mixer's A_log, D and dt_bias
// (runtime/train/init.c) against NemotronHPreTrainedModel._init_weights,
// on a 1 x 2 mesh with the three split by heads over tp: A_log is log(1),
// ..., log(8) by global head, D is ones, and softplus(dt_bias) lies in
// [time_step_min, time_step_max] (here 0.01 and 0.1), spread over it
// (log-uniform: the smallest below 0.03, the largest above 0.03), and the
// draws differ between heads. Tolerances: 1e-6 (fp32 of O(1) values).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "shardrt/context.h"
#include "shardrt/dtensor.h"
#include "train_internal.h"

enum { H = 8 };

static srt_status no_step(srt_exec *e, const srt_step_options *o, srt_step_result *r) {
  return NULL;
}

static void test_mamba2_init(void **state) {
  (void)state;
  srt_context_options co = srt_context_default_options();
  co.tp = 2;
  srt_context *ctx = NULL;
  assert_null(srt_context_create(&co, &ctx));
  const int64_t local = H / 2, floats = 4 * local; // value, grad, m, v
  const srt_placement shard[2] = {{SRT_REPLICATE, 0}, {SRT_SHARD, 0}};
  srt_param_info params[3];
  const char *names[3] = {"backbone.layers.0.mixer.A_log", "backbone.layers.0.mixer.D",
                          "backbone.layers.0.mixer.dt_bias"};
  const srt_param_init kinds[3] = {SRT_INIT_A_LOG, SRT_INIT_ONES, SRT_INIT_DT_BIAS};
  for (int k = 0; k < 3; ++k) {
    memset(&params[k], 0, sizeof params[k]);
    params[k].name = names[k];
    params[k].init = kinds[k];
    params[k].rank = 1;
    params[k].global_shape[0] = H;
    params[k].local_shape[0] = local;
    params[k].placement[0] = shard[0];
    params[k].placement[1] = shard[1];
    int64_t base = k * floats * 4;
    params[k].offset = base;
    params[k].grad_offset = base + local * 4;
    params[k].m_offset = base + 2 * local * 4;
    params[k].v_offset = base + 3 * local * 4;
    params[k].compute_offset = -1;
    params[k].zero_row = -1;
  }
  srt_program p = {.abi = SRT_PROGRAM_ABI, .model = "init_test",
                   .config_json = "{\"time_step_min\": 0.01, \"time_step_max\": 0.1, "
                                  "\"time_step_floor\": 1e-4}",
                   .dp = 1, .tp = 2, .batch = 1, .seq = 1, .local_batch = 1, .vocab = 1,
                   .initializer_range = 0.02, .num_params = 3, .params = params,
                   .step = no_step};
  uint8_t *arena = calloc(3, (size_t)floats * 4);
  assert_null(train_init_weights(ctx, &p, arena, 1234));
  float full[3][H];
  for (int k = 0; k < 3; ++k) {
    srt_tensor t = train_param_view(&params[k], names[k], arena, params[k].offset);
    assert_null(srt_full_tensor(ctx, &t, full[k]));
  }
  double lo = 1, hi = 0;
  for (int h = 0; h < H; ++h) {
    assert_float_equal(full[0][h], log(h + 1.0), 1e-6);
    assert_float_equal(full[1][h], 1.0, 0);
    double dt = log1p(exp((double)full[2][h])); // softplus
    assert_true(dt >= 0.01 - 1e-6 && dt <= 0.1 + 1e-6);
    lo = fmin(lo, dt);
    hi = fmax(hi, dt);
    for (int g = 0; g < h; ++g)
      assert_true(full[2][g] != full[2][h]);
  }
  assert_true(lo < 0.03 && hi > 0.03);
  free(arena);
  assert_null(srt_context_destroy(ctx));
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mamba2_init)};
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  MPI_Finalize();
  return failed;
}
