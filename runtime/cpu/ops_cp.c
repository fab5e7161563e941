// The moves of context parallelism that cpu ops make inside their calls
// (ops_internal.h): the attention's K/V all-gather and dK/dV
// reduce-scatter, the Mamba2 mixer's input gather and output
// reduce-scatter. The ranks' rows are in shardrt/cp.h's head-tail layout;
// the collectives see them in cp rank order, the kernels in token order.
// The bf16 backend's rows move as bf16 (ops_cp_gather_f32,
// ops_cp_scatter_f32), the kernels computing on fp32 either way.
#include "bf16_stage.h"
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

// The token-order half of a staging of `n` floats that holds bf16 rows:
// the rank-order rows (n bf16) first, then these.
static uint16_t *token_half(float *staging, int64_t n) {
  return (uint16_t *)(void *)staging + n;
}

srt_status ops_cp_gather_f32(srt_group *g, const void *local, float *global, float *staging,
                             srt_dtype dtype, int64_t rows, int64_t seq, int64_t token) {
  if (dtype == SRT_F32)
    return ops_cp_all_gather(g, local, global, staging, SRT_F32, rows, seq, token);
  uint16_t *ordered = token_half(staging, rows * seq * token);
  SRT_RETURN_IF_ERROR(ops_cp_all_gather(g, local, ordered, staging, SRT_BF16, rows, seq, token));
  srt_bf16_widen(global, ordered, rows * seq * token);
  return NULL;
}

srt_status ops_cp_scatter_f32(srt_group *g, const float *global, void *local, float *staging,
                              srt_dtype dtype, int64_t rows, int64_t seq, int64_t token) {
  if (dtype == SRT_F32)
    return ops_cp_reduce_scatter(g, global, local, staging, SRT_F32, rows, seq, token);
  uint16_t *ordered = token_half(staging, rows * seq * token);
  srt_bf16_round(ordered, global, rows * seq * token);
  return ops_cp_reduce_scatter(g, ordered, local, staging, SRT_BF16, rows, seq, token);
}
