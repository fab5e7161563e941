// Checked calls of the CUDA runtime, cuBLASLt, cuDNN and NCCL: a failure
// becomes an srt_status naming the call as written, its source location and
// the library's own error name and message, and returns from the caller.
#ifndef SHARDRT_CUDA_CHECK_H
#define SHARDRT_CUDA_CHECK_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "shardrt/status.h"

#define SRT_CUDA_CHECK(call)                                                              \
  do {                                                                                     \
    cudaError_t srt_e_ = (call);                                                           \
    if (srt_e_ != cudaSuccess)                                                             \
      return SRT_ERROR(SRT_UNAVAILABLE, "%s failed at %s:%d: %s (%s)", #call,            \
                       __FILE__, __LINE__, cudaGetErrorName(srt_e_), cudaGetErrorString(srt_e_));              \
  } while (0)

#define SRT_CUBLAS_CHECK(call)                                                            \
  do {                                                                                     \
    cublasStatus_t srt_e_ = (call);                                                        \
    if (srt_e_ != CUBLAS_STATUS_SUCCESS)                                                   \
      return SRT_ERROR(SRT_UNAVAILABLE, "%s failed at %s:%d: cuBLAS status %d", #call, \
                       __FILE__, __LINE__, (int)srt_e_); \
  } while (0)

#define SRT_CUDNN_CHECK(call)                                                             \
  do {                                                                                     \
    cudnnStatus_t srt_e_ = (call);                                                         \
    if (srt_e_ != CUDNN_STATUS_SUCCESS)                                                    \
      return SRT_ERROR(SRT_UNAVAILABLE, "%s failed at %s:%d: %s", #call, __FILE__,        \
                       __LINE__, cudnnGetErrorString(srt_e_));                                       \
  } while (0)

#define SRT_NCCL_CHECK(call)                                                              \
  do {                                                                                     \
    ncclResult_t srt_e_ = (call);                                                          \
    if (srt_e_ != ncclSuccess)                                                             \
      return SRT_ERROR(SRT_UNAVAILABLE, "%s failed at %s:%d: %s", #call, __FILE__,        \
                       __LINE__, ncclGetErrorString(srt_e_)); \
  } while (0)

/// Ends an NCCL group that `body` (an srt_status expression of NCCL calls)
/// filled, also when body failed (a group left open would swallow every
/// later NCCL call); returns body's error, else ncclGroupEnd's.
#define SRT_NCCL_GROUP(body)                                                              \
  do {                                                                                     \
    SRT_NCCL_CHECK(ncclGroupStart());                                                      \
    srt_status srt_s_ = (body);                                                            \
    ncclResult_t srt_end_ = ncclGroupEnd();                                                \
    if (srt_s_)                                                                            \
      return srt_s_;                                                                       \
    if (srt_end_ != ncclSuccess)                                                           \
      return SRT_ERROR(SRT_UNAVAILABLE, "ncclGroupEnd() failed at %s:%d: %s", __FILE__,    \
                       __LINE__, ncclGetErrorString(srt_end_));                            \
  } while (0)

#endif // SHARDRT_CUDA_CHECK_H
