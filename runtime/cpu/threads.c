// Threads of the cpu backend's kernels: one OpenMP pool per process, which
// oneDNN's GEMMs use too, so that ranks x threads can be set to the cores
// of a node without two pools competing for them.
//
// oneDNN (with OpenMP threading) splits a primitive's work, and dnnl_sgemm its
// blocks, for omp_get_max_threads() threads and then runs the parts in a
// parallel region it assumes gets all of them: thread i computes part i. A
// smaller team leaves the other parts of C unwritten (garbage or NaN, exit 0).
// OpenMP grants a smaller team when OMP_THREAD_LIMIT caps it, when
// OMP_DYNAMIC lets the runtime shrink it (libgomp does under load), or when
// OMP_MAX_ACTIVE_LEVELS is 0 (every region runs on one thread). So the pool's
// size is fixed here to the team OpenMP actually grants: dynamic adjustment
// off, one active level allowed, the count capped by the thread limit, and
// then measured.
#include "shardrt/kernels.h"

#include <dnnl.h>
#include <omp.h>
#include <stdatomic.h>

// Whether the pool has been fixed (srt_cpu_set_threads ran) in this process.
static atomic_bool g_fixed;

// The team a top-level parallel region of the calling thread gets now.
static int granted_team(void) {
  int n = 1;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

int srt_cpu_set_threads(int threads) {
  if (threads < 1)
    threads = 1;
  omp_set_dynamic(0);
  if (omp_get_max_active_levels() < 1)
    omp_set_max_active_levels(1);
  int limit = omp_get_thread_limit();
  if (limit > 0 && threads > limit)
    threads = limit;
  omp_set_num_threads(threads);
  int got = granted_team();
  if (got != threads) {
    threads = got;
    omp_set_num_threads(threads);
  }
  // oneDNN marks every generated kernel's calls for VTune (ITT) unless told
  // not to: about 1.5% of the time of attention's small GEMMs. Profilers
  // that need it set DNNL_JIT_PROFILE themselves (this overrides it).
  dnnl_set_jit_profiling_flags(DNNL_JIT_PROFILE_NONE);
  atomic_store(&g_fixed, true);
  return threads;
}

void srt_cpu_fix_threads(void) {
  if (!atomic_load(&g_fixed) && omp_get_level() == 0)
    srt_cpu_set_threads(omp_get_max_threads());
}

int srt_cpu_threads(void) {
  srt_cpu_fix_threads();
  return omp_get_max_threads();
}
