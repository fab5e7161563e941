// Threads per rank of the cpu kernels: by default the node's cores shared
// evenly by the ranks on the node (ranks x threads = cores), never more than
// the cores the launcher bound this rank to; OMP_NUM_THREADS, then
// --threads N, override it.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include <ctype.h>
#include <inttypes.h>
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shardrt/kernels.h"
#include "train_internal.h"

// Ranks of this job on this node (MPI-3 shared-memory split).
static int local_ranks(void) {
  MPI_Comm node = MPI_COMM_NULL;
  int size = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
          MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &size);
    MPI_Comm_free(&node);
  }
  return size > 0 ? size : 1;
}

// CPUs this process may run on (its affinity mask), or -1 if unknown.
static int bound_cpus(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

// OMP_NUM_THREADS as OpenMP reads it for the first level: its leading
// positive count ("4" or "4,2"), or 0 when unset or not a count.
static int omp_num_threads_env(void) {
  const char *v = getenv("OMP_NUM_THREADS");
  if (!v || !isdigit((unsigned char)*v))
    return 0;
  long n = strtol(v, NULL, 10);
  return n > 0 && n <= 4096 ? (int)n : 0;
}

train_threads train_choose_threads(int64_t requested) {
  train_threads t = {.cores = (int)sysconf(_SC_NPROCESSORS_ONLN),
                     .local_ranks = local_ranks(),
                     .bound = bound_cpus()};
  if (t.cores < 1)
    t.cores = 1;
  int from_env = omp_num_threads_env();
  if (requested > 0) {
    t.threads = (int)requested;
  } else if (from_env > 0) {
    t.threads = from_env;
    t.from_env = true;
  } else {
    t.threads = t.cores / t.local_ranks > 0 ? t.cores / t.local_ranks : 1;
    if (t.bound > 0 && t.bound < t.threads)
      t.threads = t.bound;
  }
  t.asked = t.threads;
  t.thread_limit = omp_get_thread_limit();
  t.was_dynamic = omp_get_dynamic();
  t.had_no_level = omp_get_max_active_levels() < 1;
  t.threads = srt_cpu_set_threads(t.threads);
  return t;
}

// OMP_STACKSIZE as OpenMP reads it ("<n>[B|K|M|G]", K without a unit, blanks
// around), else GOMP_STACKSIZE (libgomp's older name, read when the first is
// unset), in bytes; -1 when unset or unreadable (libgomp then warns and
// keeps its default). *name gets the variable read.
static int64_t omp_stack_env(const char **name) {
  static const char *const names[] = {"OMP_STACKSIZE", "GOMP_STACKSIZE"};
  for (int i = 0; i < 2; ++i) {
    const char *v = getenv(names[i]);
    if (!v)
      continue;
    *name = names[i];
    char *end;
    while (isspace((unsigned char)*v))
      ++v;
    if (!isdigit((unsigned char)*v))
      return -1;
    uintmax_t n = strtoumax(v, &end, 10);
    while (isspace((unsigned char)*end))
      ++end;
    int shift = 10;
    switch (toupper((unsigned char)*end)) {
    case 'B': shift = 0; ++end; break;
    case 'K': ++end; break;
    case 'M': shift = 20; ++end; break;
    case 'G': shift = 30; ++end; break;
    default: break;
    }
    while (isspace((unsigned char)*end))
      ++end;
    if (*end || n > (UINTMAX_C(1) << 40))
      return -1;
    return (int64_t)(n << shift);
  }
  return -1;
}

srt_status train_check_omp_stack(void) {
  // The kernels' and oneDNN's frames on an OpenMP worker thread: measured to
  // crash below about 20 KiB (tiny models and the kernel tests); the floor
  // leaves a margin of six.
  enum { kMinStack = 128 << 10 };
  const char *name = NULL;
  int64_t bytes = omp_stack_env(&name);
  if (bytes >= 0 && bytes < kMinStack)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s=%s gives each OpenMP thread %" PRId64 " bytes of stack; the cpu "
                     "kernels need at least %d KiB (a smaller stack crashes them): raise it "
                     "or unset it",
                     name, getenv(name), bytes, kMinStack >> 10);
  return NULL;
}
