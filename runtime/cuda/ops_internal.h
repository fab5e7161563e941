// Helpers of the CUDA graph-level ops (shardrt/cuda.h): typed views of
// device arena offsets. The checks every backend shares run before these
// ops are called (shardrt/backend.h).
#ifndef SHARDRT_CUDA_OPS_INTERNAL_H
#define SHARDRT_CUDA_OPS_INTERNAL_H

#include "shardrt/backend.h"
#include "device.h"
#include "shardrt/cuda.h"

static inline srt_bf16 *cu_bf16(const srt_exec *e, int64_t off) {
  return (srt_bf16 *)srt_cuda_at(e, off);
}
static inline float *cu_f32(const srt_exec *e, int64_t off) {
  return (float *)srt_cuda_at(e, off);
}
static inline int64_t *cu_i64(const srt_exec *e, int64_t off) {
  return (int64_t *)srt_cuda_at(e, off);
}

/// The result of a kernel launch, named.
#define CU_LAUNCH(call) srt_cuda_launched((call), #call, __FILE__, __LINE__)

#endif // SHARDRT_CUDA_OPS_INTERNAL_H
