// Threads of the cpu backend's kernels: one OpenMP pool per process, which
// oneDNN's GEMMs use too, so that ranks x threads can be set to the cores
// of a node without two pools competing for them.
#include "shardrt/kernels.h"

#include <dnnl.h>
#include <omp.h>

void srt_cpu_set_threads(int threads) {
  omp_set_num_threads(threads > 0 ? threads : 1);
  // oneDNN marks every generated kernel's calls for VTune (ITT) unless told
  // not to: about 1.5% of the time of attention's small GEMMs. Profilers
  // that need it set DNNL_JIT_PROFILE themselves (this overrides it).
  dnnl_set_jit_profiling_flags(DNNL_JIT_PROFILE_NONE);
}

int srt_cpu_threads(void) { return omp_get_max_threads(); }
