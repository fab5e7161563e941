// The GPU's bf16 GEMM peak: the datasheet figure for the GPUs we know by
// name, else measured through our own cuBLASLt path.
#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "peak.h"
#include "shardrt/gpu_peak.h"

// Random bf16 values of either sign with magnitudes in [0.5, 2) into `dst`
// (zeros draw less power, so clock higher, than real operands).
static srt_status fill_random(void *dst, int64_t count) {
  uint16_t *host = malloc((size_t)count * 2);
  if (!host)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "the GEMM peak: no host memory for %lld values",
                     (long long)count);
  uint32_t state = 1;
  for (int64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    // sign, exponent 126 or 127 (|x| in [0.5, 2)), random mantissa
    host[i] = (uint16_t)((state >> 16 & 0x8000) | (0x3F00 + (state >> 8 & 0xFF)));
  }
  cudaError_t e = cudaMemcpy(dst, host, (size_t)count * 2, cudaMemcpyHostToDevice);
  free(host);
  SRT_CUDA_CHECK(e);
  return NULL;
}

static srt_status time_gemms(srt_cuda_device *d, int64_t m, int warmup, int timed, uint8_t *buf,
                             float *ms) {
  int64_t bytes = m * m * 2;
  SRT_RETURN_IF_ERROR(fill_random(buf, 2 * m * m));
  cudaEvent_t start, stop;
  SRT_CUDA_CHECK(cudaEventCreate(&start));
  cudaError_t e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    SRT_CUDA_CHECK(e);
  }
  srt_status s = NULL;
  for (int i = 0; i < warmup + timed && !s && e == cudaSuccess; ++i) {
    if (i == warmup)
      e = cudaEventRecord(start, d->compute);
    s = srt_cuda_gemm(d, true, false, m, m, m, buf, m, buf + bytes, m, buf + 2 * bytes, false,
                      NULL);
  }
  if (!s && e == cudaSuccess)
    e = cudaEventRecord(stop, d->compute);
  if (!s && e == cudaSuccess)
    e = cudaEventSynchronize(stop);
  if (!s && e == cudaSuccess)
    e = cudaEventElapsedTime(ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (s)
    return s;
  SRT_CUDA_CHECK(e);
  return NULL;
}

srt_status srt_cuda_measure_gemm_flops(srt_cuda_device *d, int64_t m, int warmup, int timed,
                                       double *flops) {
  if (m <= 0 || m > 32768 || warmup < 0 || timed <= 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "srt_cuda_measure_gemm_flops: m %lld must lie in [1, 32768] and timed %d "
                     "be positive",
                     (long long)m, timed);
  void *buf = NULL;
  SRT_CUDA_CHECK(cudaMalloc(&buf, (size_t)(3 * m * m * 2)));
  float ms = 0;
  srt_status s = time_gemms(d, m, warmup, timed, buf, &ms);
  cudaFree(buf);
  SRT_RETURN_IF_ERROR(s);
  *flops = ms > 0 ? timed * 2.0 * (double)m * (double)m * (double)m / (ms * 1e-3) : 0;
  return NULL;
}

srt_status srt_cuda_peak_flops(void *device, double *flops, char *source, size_t size) {
  srt_cuda_device *d = device;
  struct cudaDeviceProp prop;
  SRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, d->ordinal));
  const char *label = NULL;
  *flops = srt_gpu_datasheet_bf16_flops(prop.name, &label);
  if (*flops > 0) {
    snprintf(source, size, "dense bf16 of the %s datasheet, per GPU", label);
    return NULL;
  }
  // Not in the table: what our GEMM reaches is a lower bound of the peak,
  // so MFU reads high rather than not at all; the source says so.
  SRT_RETURN_IF_ERROR(srt_cuda_measure_gemm_flops(d, 4096, 3, 10, flops));
  snprintf(source, size,
           "bf16 cuBLASLt GEMM 4096^3 measured on '%s' (not in the datasheet table: MFU reads "
           "high)",
           prop.name);
  return NULL;
}
