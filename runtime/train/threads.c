// Threads per rank of the cpu kernels: by default the node's cores shared
// evenly by the ranks on the node (ranks x threads = cores), never more than
// the cores the launcher bound this rank to; OMP_NUM_THREADS, then
// --threads N, override it.
#define _GNU_SOURCE // sched_getaffinity, CPU_COUNT
#include <ctype.h>
#include <sys/resource.h>
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shardrt/kernels.h"
#include "shardrt/tcp_mesh.h"
#include "train_internal.h"

// Ranks of this job on this node (MPI-3 shared-memory split; over an env
// launch's TCP plane, the ranks whose host name is this one's).
static int local_ranks(void) {
  MPI_Comm node = MPI_COMM_NULL;
  int size = 1;
  if (train_plane_mesh())
    return train_plane_mesh()->local_size;
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

// One stack-size variable as libgomp reads it (its parse_stacksize): blanks,
// strtoul's number (a sign allowed), blanks, an optional unit B, K, M or G
// (K without one), blanks; the value in bytes, or -1 when unset or invalid
// (libgomp warns and reads the next variable).
static int64_t stack_var(const char *name) {
  const char *v = getenv(name);
  if (!v)
    return -1;
  while (isspace((unsigned char)*v))
    ++v;
  char *end;
  errno = 0;
  unsigned long n = strtoul(v, &end, 10);
  if (!*v || errno || end == v)
    return -1;
  while (isspace((unsigned char)*end))
    ++end;
  int shift = 10;
  if (*end) {
    switch (tolower((unsigned char)*end)) {
    case 'b': shift = 0; break;
    case 'k': break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    default: return -1;
    }
    for (++end; isspace((unsigned char)*end); ++end) {
    }
    if (*end)
      return -1;
  }
  if (((n << shift) >> shift) != n || (n << shift) > (unsigned long)INT64_MAX)
    return -1;
  return (int64_t)(n << shift);
}

srt_status train_check_stacks(void) {
  // The kernels' and oneDNN's frames on an OpenMP worker thread crashed
  // below about 20 KiB, the driver's main thread below about 64 KiB (tiny
  // models and the kernel tests); the floor leaves a margin.
  enum { kMinStack = 128 << 10, kPthreadMin = 16 << 10 };
  struct rlimit rl;
  int64_t limit = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                      ? (int64_t)rl.rlim_cur
                      : -1;
  if (limit >= 0 && limit < kMinStack)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "the stack limit (ulimit -s) is %" PRId64 " KiB; the driver and its cpu "
                     "kernels need at least %d KiB (a smaller stack crashes them): raise it",
                     limit >> 10, kMinStack >> 10);
  // OpenMP's worker threads: OMP_STACKSIZE, else GOMP_STACKSIZE, when
  // libgomp takes it (it keeps its default below the system's 16 KiB
  // minimum); else the default, the stack limit checked above.
  static const char *const names[] = {"OMP_STACKSIZE", "GOMP_STACKSIZE"};
  for (int i = 0; i < 2; ++i) {
    int64_t bytes = stack_var(names[i]);
    if (bytes < 0)
      continue;
    if (bytes >= kPthreadMin && bytes < kMinStack)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s=%s gives each OpenMP thread %" PRId64 " bytes of stack; the cpu "
                       "kernels need at least %d KiB (a smaller stack crashes them): raise it "
                       "or unset it",
                       names[i], getenv(names[i]), bytes, kMinStack >> 10);
    break;
  }
  return NULL;
}
