// The driver's launcher check (runtime/train/launch.c): an env launch of
// more than one process is refused for the cpu and the cuda backend (each
// message naming the rank, the world, the variables and the launch to use;
// the cuda one what is missing: a TCP host plane), while an MPI launch, no
// launcher and an env launch of one process pass. The backends are stand-in
// tables (a name and the host flag), so no device is needed.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "train_internal.h"

static const srt_backend kCpu = {.name = "cpu", .host = true};
static const srt_backend kCuda = {.name = "cuda", .host = false};

static srt_launch_env launch(srt_launch_kind kind, int rank, int world) {
  srt_launch_env e = {.kind = kind, .rank = rank, .world_size = world, .master_port = 29500};
  strcpy(e.master_addr, "node01");
  return e;
}

static void expect_refused(const srt_launch_env *e, const srt_backend *b,
                           const char *const *needles) {
  srt_status s = train_check_launch(e, b);
  assert_non_null(s);
  assert_int_equal(srt_status_code(s), SRT_FAILED_PRECONDITION);
  for (; *needles; ++needles)
    if (!strstr(srt_status_message(s), *needles))
      fail_msg("'%s' lacks '%s'", srt_status_message(s), *needles);
  srt_status_free(s);
}

static void test_refused(void **state) {
  (void)state;
  srt_launch_env t = launch(SRT_LAUNCH_TORCHRUN, 1, 4);
  const char *cpu[] = {"rank 1 of 4 from torchrun's variables (RANK, WORLD_SIZE)",
                       "no MPI launcher", "a cpu program's collectives run over MPI",
                       "mpirun -np 4", NULL};
  expect_refused(&t, &kCpu, cpu);
  expect_refused(&t, NULL, cpu); // a table without a backend: as the cpu's
  srt_launch_env s = launch(SRT_LAUNCH_SLURM, 0, 8);
  const char *cuda[] = {"rank 0 of 8 from Slurm's variables (SLURM_PROCID, SLURM_NTASKS)",
                        "a cuda program's NCCL world could start from the TCP rendezvous at "
                        "MASTER_ADDR:MASTER_PORT node01:29500",
                        "have only an MPI implementation", "srun --mpi=pmix -n 8", NULL};
  expect_refused(&s, &kCuda, cuda);
}

static void test_passed(void **state) {
  (void)state;
  const srt_launch_env ok[] = {launch(SRT_LAUNCH_MPI, 0, 1), launch(SRT_LAUNCH_NONE, 0, 1),
                               launch(SRT_LAUNCH_TORCHRUN, 0, 1), launch(SRT_LAUNCH_SLURM, 0, 1)};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    assert_null(train_check_launch(&ok[i], &kCpu));
    assert_null(train_check_launch(&ok[i], &kCuda));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_refused),
                                     cmocka_unit_test(test_passed)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
