// The driver's choice of host plane (runtime/train/launch.c): an env launch
// (torchrun's or Slurm's variables, no MPI launcher) of more than one
// process meets over TCP; an MPI launch, no launcher and an env launch of
// one process use MPI. (That such a launch trains, bit for bit as under
// mpirun, is e2e/env_launch's.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "train_internal.h"

static srt_launch_env launch(srt_launch_kind kind, int rank, int world) {
  srt_launch_env e = {.kind = kind, .rank = rank, .world_size = world, .master_port = 29500};
  strcpy(e.master_addr, "node01");
  return e;
}

static void test_tcp(void **state) {
  (void)state;
  const srt_launch_env tcp[] = {launch(SRT_LAUNCH_TORCHRUN, 1, 4), launch(SRT_LAUNCH_TORCHRUN, 0, 2),
                                launch(SRT_LAUNCH_SLURM, 0, 8), launch(SRT_LAUNCH_SLURM, 7, 8)};
  for (size_t i = 0; i < sizeof tcp / sizeof tcp[0]; ++i)
    assert_true(train_launch_uses_tcp(&tcp[i]));
}

static void test_mpi(void **state) {
  (void)state;
  const srt_launch_env mpi[] = {launch(SRT_LAUNCH_MPI, 0, 1), launch(SRT_LAUNCH_NONE, 0, 1),
                                launch(SRT_LAUNCH_TORCHRUN, 0, 1), launch(SRT_LAUNCH_SLURM, 0, 1)};
  for (size_t i = 0; i < sizeof mpi / sizeof mpi[0]; ++i)
    assert_false(train_launch_uses_tcp(&mpi[i]));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_tcp), cmocka_unit_test(test_mpi)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
