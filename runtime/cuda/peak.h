// The GPU's bf16 GEMM peak (the MFU denominator); internal to runtime/cuda.
#ifndef SHARDRT_CUDA_PEAK_H
#define SHARDRT_CUDA_PEAK_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/// The rate of `timed` m x m x m bf16 GEMMs (bf16 out, fp32 accumulation)
/// through srt_cuda_gemm on `d`'s compute stream, after `warmup` untimed
/// ones, in FLOP/s (2 m^3 per GEMM), timed with CUDA events. Operands are
/// random bf16 in a temporary 3 m^2 x 2 byte device buffer, freed after.
/// Errors: SRT_INVALID_ARGUMENT for m outside [1, 32768] or timed <= 0;
/// SRT_UNAVAILABLE from CUDA or cuBLASLt (e.g. out of device memory).
srt_status srt_cuda_measure_gemm_flops(srt_cuda_device *d, int64_t m, int warmup, int timed,
                                       double *flops);

/// srt_backend.peak_flops of the cuda backend: this rank's GPU's dense bf16
/// peak in FLOP/s, from the datasheet table (srt_gpu_datasheet_bf16_flops)
/// by cudaDeviceProp.name, else measured (srt_cuda_measure_gemm_flops,
/// 4096^3, about 0.1 s); `source` (of `size` bytes) says which.
/// Errors: SRT_UNAVAILABLE from CUDA or cuBLASLt.
srt_status srt_cuda_peak_flops(void *device, double *flops, char *source, size_t size);

#endif // SHARDRT_CUDA_PEAK_H
