// Helpers of the CUDA graph-level ops (shardrt/cuda.h): typed views of
// device arena offsets and the argument checks they share with the cpu ops
// (runtime/src/ops/ops_internal.h).
#ifndef SHARDRT_CUDA_OPS_INTERNAL_H
#define SHARDRT_CUDA_OPS_INTERNAL_H

#include "../src/ops/ops_internal.h"
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

/// ops_check, then the exec's device.
static inline srt_status cu_begin(srt_exec *e, const char *op, int n, const int64_t *offsets,
                                  int n_sizes, const int64_t *sizes, srt_cuda_device **d) {
  SRT_RETURN_IF_ERROR(ops_check(e, op, n, offsets, n_sizes, sizes));
  return srt_cuda_device_of(e, op, d);
}

/// A norm's group of features: 0 means all of them; otherwise it must
/// divide them. Errors: SRT_INVALID_ARGUMENT naming `op` and both sizes.
static inline srt_status cu_group(srt_exec *e, const char *op, int64_t features,
                                  int64_t *group) {
  if (*group < 0 || (*group > 0 && features % *group != 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: group %lld does not divide features %lld (rank %d)", op,
                     (long long)*group, (long long)features, ops_rank(e));
  if (*group == 0)
    *group = features;
  return NULL;
}

/// The result of a kernel launch, named.
#define CU_LAUNCH(call) srt_cuda_launched((call), #call, __FILE__, __LINE__)

#endif // SHARDRT_CUDA_OPS_INTERNAL_H
