// The moves of context parallelism that cpu ops make inside their calls
// (ops_internal.h): the attention's K/V all-gather and dK/dV
// reduce-scatter, the Mamba2 mixer's input gather and output
// reduce-scatter. The ranks' rows are in shardrt/cp.h's head-tail layout;
// the collectives see them in cp rank order, the kernels in token order.
#include "ops_internal.h"
#include "shardrt/collectives.h"
#include "shardrt/cp.h"

srt_status ops_cp_all_gather(srt_group *g, const void *local, void *global, void *staging,
                             srt_dtype dtype, int64_t rows, int64_t seq, int64_t token) {
  int cp = srt_group_size(g);
  const int64_t shape[3] = {1, rows * (seq / cp), token};
  SRT_RETURN_IF_ERROR(srt_all_gather(g, local, staging, dtype, 3, shape, 0));
  size_t bytes = (size_t)token * srt_dtype_size(dtype), part = (size_t)shape[1] * bytes;
  const void *parts[SRT_MAX_CP];
  for (int c = 0; c < cp; ++c)
    parts[c] = (const unsigned char *)staging + (size_t)c * part;
  return srt_cp_gather(parts, rows, seq, cp, bytes, global);
}

srt_status ops_cp_reduce_scatter(srt_group *g, const void *global, void *local, void *staging,
                                 srt_dtype dtype, int64_t rows, int64_t seq, int64_t token) {
  int cp = srt_group_size(g);
  size_t bytes = (size_t)token * srt_dtype_size(dtype), part = (size_t)(rows * (seq / cp)) * bytes;
  for (int r = 0; r < cp; ++r)
    SRT_RETURN_IF_ERROR(srt_cp_take(global, rows, seq, cp, r, bytes,
                                    (unsigned char *)staging + (size_t)r * part));
  const int64_t shape[3] = {cp, rows * (seq / cp), token};
  return srt_reduce_scatter(g, staging, local, dtype, 3, shape, 0, SRT_REDUCE_SUM);
}
