// Threads per rank of the cpu kernels: by default the node's cores shared
// evenly by the ranks on the node (ranks x threads = cores), never more than
// the cores the launcher bound this rank to; --threads N overrides it.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
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

train_threads train_choose_threads(int64_t requested) {
  train_threads t = {.cores = (int)sysconf(_SC_NPROCESSORS_ONLN),
                     .local_ranks = local_ranks(),
                     .bound = bound_cpus()};
  if (t.cores < 1)
    t.cores = 1;
  if (requested > 0) {
    t.threads = (int)requested;
  } else {
    t.threads = t.cores / t.local_ranks > 0 ? t.cores / t.local_ranks : 1;
    if (t.bound > 0 && t.bound < t.threads)
      t.threads = t.bound;
  }
  srt_cpu_set_threads(t.threads);
  return t;
}
