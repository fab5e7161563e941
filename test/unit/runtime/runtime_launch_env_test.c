// Unit tests of the launch read from the environment
// (shardrt/launch_env.h): torchrun's and Slurm's variables, an MPI
// launcher's precedence, Slurm host lists, and the refusal of each bad
// value with the variable and value named. The environment is a table
// here (srt_launch_env_read's lookup), never the process's own.
#include "runtime_test_util.h"

#include "shardrt/launch_env.h"

// A NULL-terminated list of "NAME=value" strings.
static const char *table_get(const char *name, void *user) {
  size_t n = strlen(name);
  for (const char *const *v = user; *v; ++v)
    if (!strncmp(*v, name, n) && (*v)[n] == '=')
      return *v + n + 1;
  return NULL;
}

static srt_status read_env(const char *const *vars, srt_launch_env *e) {
  return srt_launch_env_read(table_get, (void *)vars, e);
}

static void expect_env(const srt_launch_env *e, srt_launch_kind kind, int rank, int world,
                       int local, const char *addr, int port) {
  assert_int_equal(e->kind, kind);
  assert_int_equal(e->rank, rank);
  assert_int_equal(e->world_size, world);
  assert_int_equal(e->local_rank, local);
  assert_string_equal(e->master_addr, addr);
  assert_int_equal(e->master_port, port);
}

static void test_torchrun(void **state) {
  (void)state;
  const char *vars[] = {"RANK=3",          "WORLD_SIZE=8",      "LOCAL_RANK=1",
                        "MASTER_ADDR=n01", "MASTER_PORT=29500", NULL};
  srt_launch_env e;
  ASSERT_OK(read_env(vars, &e));
  expect_env(&e, SRT_LAUNCH_TORCHRUN, 3, 8, 1, "n01", 29500);
}

static void test_none_and_mpi(void **state) {
  (void)state;
  const char *none[] = {"HOME=/root", NULL};
  srt_launch_env e;
  ASSERT_OK(read_env(none, &e));
  assert_int_equal(e.kind, SRT_LAUNCH_NONE);
  assert_int_equal(e.world_size, 1);
  // mpirun's (or srun --mpi=pmix's) variables win over torchrun's and
  // Slurm's, which are then not read at all (even malformed).
  const char *ompi[] = {"OMPI_COMM_WORLD_SIZE=4", "RANK=x", "SLURM_PROCID=1", NULL};
  ASSERT_OK(read_env(ompi, &e));
  assert_int_equal(e.kind, SRT_LAUNCH_MPI);
  const char *pmix[] = {"PMIX_RANK=2", "SLURM_PROCID=2", "SLURM_NTASKS=4", NULL};
  ASSERT_OK(read_env(pmix, &e));
  assert_int_equal(e.kind, SRT_LAUNCH_MPI);
}

// torchrun's agent store holds MASTER_PORT: SHARD_RENDEZVOUS_PORT is needed.
static void test_rendezvous_port(void **state) {
  (void)state;
  const char *agent[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=n01",
                         "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=True", NULL};
  srt_launch_env e;
  ASSERT_ERROR(read_env(agent, &e), SRT_INVALID_ARGUMENT,
               "MASTER_PORT=29500 is torchrun's own store (TORCHELASTIC_USE_AGENT_STORE=True)");
  const char *ours[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=n01",
                        "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=True",
                        "SHARD_RENDEZVOUS_PORT=29611", NULL};
  ASSERT_OK(read_env(ours, &e));
  assert_int_equal(e.master_port, 29611);
  const char *not_shared[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=n01",
                              "MASTER_PORT=29500", "TORCHELASTIC_USE_AGENT_STORE=False", NULL};
  ASSERT_OK(read_env(not_shared, &e));
  assert_int_equal(e.master_port, 29500);
  const char *slurm[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                         "SLURM_JOB_NODELIST=n1", "SLURM_JOB_ID=9", "SHARD_RENDEZVOUS_PORT=x",
                         NULL};
  ASSERT_ERROR(read_env(slurm, &e), SRT_INVALID_ARGUMENT,
               "Slurm launch: SHARD_RENDEZVOUS_PORT='x' is not a decimal integer");
}

// The start-up deadline: 300 s unless SHARD_RENDEZVOUS_TIMEOUT says
// otherwise, in 1..86400 s.
static void test_start_timeout(void **state) {
  (void)state;
  const char *plain[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=n01",
                         "MASTER_PORT=29500", NULL};
  srt_launch_env e;
  ASSERT_OK(read_env(plain, &e));
  assert_int_equal(e.start_timeout_s, 300);
  const char *set[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=n01",
                       "MASTER_PORT=29500", "SHARD_RENDEZVOUS_TIMEOUT=20", NULL};
  ASSERT_OK(read_env(set, &e));
  assert_int_equal(e.start_timeout_s, 20);
  const char *zero[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=n01",
                        "MASTER_PORT=29500", "SHARD_RENDEZVOUS_TIMEOUT=0", NULL};
  ASSERT_ERROR(read_env(zero, &e), SRT_INVALID_ARGUMENT, "SHARD_RENDEZVOUS_TIMEOUT=0");
}

static void test_slurm(void **state) {
  (void)state;
  const char *vars[] = {"SLURM_PROCID=5",   "SLURM_NTASKS=6",
                        "SLURM_LOCALID=1",  "SLURM_JOB_NODELIST=gpu[03-05,09],login1",
                        "SLURM_JOB_ID=123456", NULL};
  srt_launch_env e;
  ASSERT_OK(read_env(vars, &e));
  // the first host of the list; port 15000 + the job id's last four digits
  expect_env(&e, SRT_LAUNCH_SLURM, 5, 6, 1, "gpu03", 15000 + 3456);
  // MASTER_ADDR and MASTER_PORT override the node list and the job id.
  const char *over[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2",    "SLURM_LOCALID=0",
                        "MASTER_ADDR=10.0.0.7", "MASTER_PORT=4000", NULL};
  ASSERT_OK(read_env(over, &e));
  assert_string_equal(e.master_addr, "10.0.0.7");
  assert_int_equal(e.master_port, 4000);
}

static void expect_first(const char *list, const char *host) {
  char out[64];
  ASSERT_OK(srt_slurm_first_host(list, out, sizeof out));
  assert_string_equal(out, host);
}

static void test_slurm_hostlist(void **state) {
  (void)state;
  expect_first("gpu[03-05,09],login1", "gpu03");
  expect_first("login1,gpu[03-05]", "login1");
  expect_first("node7", "node7");
  expect_first("gpu[009,011-012]", "gpu009");
  expect_first("rack[1-2]-n[07-08]", "rack1-n07");
  expect_first("n[4]x", "n4x");
  char out[8];
  const char *bad[] = {"", ",n1", "gpu[", "gpu[]", "gpu[1-2", "gpu]1", NULL};
  for (const char *const *b = bad; *b; ++b)
    ASSERT_ERROR(srt_slurm_first_host(*b, out, sizeof out), SRT_INVALID_ARGUMENT, *b);
  ASSERT_ERROR(srt_slurm_first_host("averylonghostname", out, sizeof out),
               SRT_INVALID_ARGUMENT, "too long");
  ASSERT_ERROR(srt_slurm_first_host("n[123456789]", out, sizeof out), SRT_INVALID_ARGUMENT,
               "longer than 7 bytes");
}

// Each malformed launch is refused with its variable and value named.
static void test_refusals(void **state) {
  (void)state;
  static const struct {
    const char *vars[8];
    const char *needle;
  } cases[] = {
      {{"RANK=0", NULL}, "WORLD_SIZE is not set"},
      {{"WORLD_SIZE=2", NULL}, "RANK is not set"},
      {{"RANK=abc", "WORLD_SIZE=2", NULL}, "RANK='abc' is not a decimal integer"},
      {{"RANK=1", "WORLD_SIZE=2x", NULL}, "WORLD_SIZE='2x' is not a decimal integer"},
      {{"RANK=0", "WORLD_SIZE=0", NULL}, "WORLD_SIZE=0 is outside [1, "},
      {{"RANK=-1", "WORLD_SIZE=2", NULL}, "RANK=-1 is outside [0, "},
      {{"RANK=2", "WORLD_SIZE=2", NULL}, "RANK=2 is not below WORLD_SIZE=2"},
      {{"RANK=1", "WORLD_SIZE=2", NULL}, "LOCAL_RANK is not set"},
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=2", NULL}, "LOCAL_RANK=2 is outside [0, 1]"},
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", NULL}, "MASTER_ADDR is not set"},
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=", NULL},
       "MASTER_ADDR='' is empty"},
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", NULL},
       "MASTER_PORT is not set"},
      {{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=70000", NULL},
       "MASTER_PORT=70000 is outside [1, 65535]"},
      {{"SLURM_PROCID=0", NULL}, "Slurm launch: SLURM_NTASKS is not set"},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", NULL},
       "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set"},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=n[", NULL},
       "SLURM_JOB_NODELIST='n['"},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=n1", NULL},
       "SLURM_JOB_ID is not set (needed for the port when MASTER_PORT is unset)"},
      {{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=n1",
        "MASTER_PORT=0", NULL},
       "Slurm launch: MASTER_PORT=0 is outside [1, 65535]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    srt_launch_env e = {.kind = SRT_LAUNCH_MPI, .rank = 77};
    ASSERT_ERROR(read_env(cases[i].vars, &e), SRT_INVALID_ARGUMENT, cases[i].needle);
    assert_int_equal(e.rank, 77); // untouched on error
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_torchrun),       cmocka_unit_test(test_none_and_mpi),
      cmocka_unit_test(test_slurm),          cmocka_unit_test(test_slurm_hostlist),
      cmocka_unit_test(test_refusals),       cmocka_unit_test(test_rendezvous_port), cmocka_unit_test(test_start_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
