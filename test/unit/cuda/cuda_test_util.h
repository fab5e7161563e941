// What the cuda unit tests share: CUDA_OK, a runtime call that must
// succeed, else the test ends there naming the call and CUDA's error.
#ifndef SHARD_TEST_CUDA_TEST_UTIL_H
#define SHARD_TEST_CUDA_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                     \
              cudaGetErrorString(err_));                                                \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#endif // SHARD_TEST_CUDA_TEST_UTIL_H
