// Elementwise sum of two tensors (residual connections) and its gradient,
// which hands the incoming gradient to both operands. Threaded over chunks.
// The cpu backend's entry points (srt_cpu_op_add) close the file.
#include "shardrt/kernels.h"

#include <string.h>

#include "ops_internal.h"
#include "vmath.h"

SRT_CPU_CLONES
void srt_cpu_add_serial(float *out, const float *a, const float *b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    out[i] = a[i] + b[i];
}

SRT_CPU_CLONES
void srt_cpu_add_bf16_serial(uint16_t *out, const uint16_t *a, const uint16_t *b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    out[i] = srt_bf16_store(srt_bf16_load(a[i]) + srt_bf16_load(b[i]));
}

void srt_cpu_add_forward(float *out, const float *a, const float *b,
                         int64_t n) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_cpu_add_serial(out + i0, a + i0, b + i0, srt_chunk_end(i0, n) - i0);
}

// dst = src over chunks on the kernels' threads (a no-op when they alias).
static void parallel_copy(float *dst, const float *src, int64_t n) {
  if (!dst || dst == src)
    return;
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    memcpy(dst + i0, src + i0, (size_t)(srt_chunk_end(i0, n) - i0) * sizeof *dst);
}

void srt_cpu_add_backward(float *da, float *db, const float *dout, int64_t n) {
  parallel_copy(da, dout, n);
  parallel_copy(db, dout, n);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                          int64_t dtype) {
  SRT_RETURN_IF_ERROR(ops_f32_only(e, "srt_cpu_op_add", dtype));
  srt_cpu_add_forward(ops_f32(e, y), ops_f32(e, a), ops_f32(e, b), n);
  return NULL;
}
