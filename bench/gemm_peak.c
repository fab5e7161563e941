// The bf16 GEMM peak of this GPU as cuBLASLt reaches it (the denominator of
// bench/gpu.sh's MFU): 8192^3 bf16 x bf16 -> bf16 with fp32 accumulation
// through the cuda backend's own GEMM path (srt_cuda_measure_gemm_flops, on
// random operands), 5 warm-up calls then 20 timed with CUDA events. Prints
// "TFLOPS <value>"; then the device-to-device copy bandwidth of a 128 MiB
// cudaMemcpyAsync, 2 warm-up and 20 timed, as "COPY_GBPS <value>" counting
// bytes read plus written (STREAM's convention).
// Without a CUDA device prints "SKIP: no CUDA device" and exits 77.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "device.h"
#include "peak.h"
#include "shardrt/cuda.h"

enum { M = 8192 };

static srt_status no_step(srt_exec *e, const srt_step_options *o, srt_step_result *r) {
  return NULL;
}

// Seconds per call of `n` timed calls of cudaMemcpyAsync(dst, src, bytes) on
// `stream`, after 2 untimed ones.
static srt_status time_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream,
                            double *seconds) {
  cudaEvent_t start, stop;
  SRT_CUDA_CHECK(cudaEventCreate(&start));
  SRT_CUDA_CHECK(cudaEventCreate(&stop));
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < 22 && e == cudaSuccess; ++i) {
    if (i == 2)
      e = cudaEventRecord(start, stream);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
  }
  float ms = 0;
  if (e == cudaSuccess)
    e = cudaEventRecord(stop, stream);
  if (e == cudaSuccess)
    e = cudaEventSynchronize(stop);
  if (e == cudaSuccess)
    e = cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  SRT_CUDA_CHECK(e);
  *seconds = ms * 1e-3 / 20;
  return NULL;
}

static srt_status run(srt_context *ctx, double *tflops, double *copy_gbps) {
  int64_t bytes = (int64_t)M * M * 2;
  srt_program p = {.abi = SRT_PROGRAM_ABI, .model = "gemm_peak", .dp = 1, .tp = 1, .batch = 1,
                   .seq = 1, .local_batch = 1, .vocab = 1, .arena_bytes = 2 * bytes,
                   .step = no_step, .backend = &srt_cuda_backend};
  void *device;
  uint8_t *arena;
  SRT_RETURN_IF_ERROR(srt_cuda_backend.open(ctx, &p, &device, &arena));
  srt_cuda_device *d = device;
  double flops = 0, seconds = 0;
  srt_status s = srt_cuda_measure_gemm_flops(d, M, 5, 20, &flops);
  *tflops = flops / 1e12;
  if (!s)
    s = time_copy(arena + bytes, arena, (size_t)bytes, d->compute, &seconds);
  if (!s)
    *copy_gbps = 2.0 * (double)bytes / seconds / 1e9;
  srt_status c = srt_cuda_backend.close(device);
  if (!s)
    return c;
  srt_status_free(c);
  return s;
}

int main(int argc, char **argv) {
  if (srt_cuda_device_count() == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  srt_context_options co = srt_context_default_options();
  co.arena_bytes = 4096;
  srt_context *ctx = NULL;
  srt_status s = srt_context_create(&co, &ctx);
  double tflops = 0, copy_gbps = 0;
  if (!s)
    s = run(ctx, &tflops, &copy_gbps);
  if (s) {
    char buf[1024];
    fprintf(stderr, "gemm_peak: %s\n", srt_status_format(s, buf, sizeof buf));
    srt_status_free(s);
  } else {
    printf("TFLOPS %.1f\nCOPY_GBPS %.0f\n", tflops, copy_gbps);
  }
  if (ctx)
    srt_status_free(srt_context_destroy(ctx));
  MPI_Finalize();
  return s ? 1 : 0;
}
