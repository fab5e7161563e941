// Rotary position embeddings: the (cos, sin) tables for given positions (or
// 0..S-1) and
// the rotate-half rotation of q/k heads and its transpose
// (runtime/cpu/rotary.c).
#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// One thread per (token, i < head_dim / 2), grid-stride. The angle is the
// fp32 product (no FMA can touch a single multiply), cos/sin of it in double
// then rounded, exactly the CPU's steps; double cos/sin run once per table.
__global__ void __launch_bounds__(kThreads)
    tables_kernel(float *cos_out, float *sin_out, const float *inv_freq,
                  const int64_t *positions, int64_t tokens, int64_t seq, int64_t half) {
  int64_t total = tokens * half;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t t = e / half, i = e % half;
    int64_t pos = positions ? positions[t] : t % seq;
    float angle = __fmul_rn((float)pos, inv_freq[i]);
    float c = (float)cos((double)angle), s = (float)sin((double)angle);
    int64_t o = t * 2 * half + i;
    cos_out[o] = cos_out[o + half] = c;
    sin_out[o] = sin_out[o + half] = s;
  }
}

// One block per token (grid-stride), threads over the heads x half pairs;
// each thread reads both halves before writing, so dy/dx may alias.
// `transpose` selects the backward rotation.
__global__ void __launch_bounds__(kThreads)
    rotate_kernel(bf16 *y, const bf16 *x, const float *cos, const float *sin, int64_t tokens,
                  int64_t heads, int64_t head_dim, bool transpose) {
  int64_t half = head_dim / 2, pairs = heads * half;
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float *c = cos + t * head_dim, *s = sin + t * head_dim;
    for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
      int64_t h = p / half, i = p % half, o = t * heads * head_dim + h * head_dim + i;
      float a = to_f32(x[o]), b = to_f32(x[o + half]);
      if (!transpose) {
        put(y + o, a * c[i] - b * s[i]);
        put(y + o + half, b * c[i + half] + a * s[i + half]);
      } else {
        put(y + o, a * c[i] + b * s[i + half]);
        put(y + o + half, b * c[i + half] - a * s[i]);
      }
    }
  }
}

cudaError_t rotate(srt_bf16 *y, const srt_bf16 *x, const float *cos, const float *sin,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, bool transpose,
                   cudaStream_t stream) {
  if (head_dim % 2 != 0)
    return cudaErrorInvalidValue;
  int64_t tokens = batch * seq;
  if (tokens <= 0 || heads <= 0 || head_dim <= 0)
    return cudaSuccess;
  unsigned blocks = (unsigned)(tokens < kMaxBlocks ? tokens : kMaxBlocks);
  rotate_kernel<<<blocks, kThreads, 0, stream>>>(as_bf16(y), as_bf16(x), cos, sin, tokens, heads,
                                                 head_dim, transpose);
  return cudaGetLastError();
}

} // namespace

/// An odd head_dim gives cudaErrorInvalidValue, here and in the two apply
/// launchers (rotate-half needs two equal halves).
cudaError_t srt_cuda_rotary_tables(float *cos, float *sin, const float *inv_freq,
                                   const int64_t *position_ids, int64_t batch, int64_t seq,
                                   int64_t head_dim, cudaStream_t stream) {
  if (head_dim % 2 != 0)
    return cudaErrorInvalidValue;
  int64_t tokens = batch * seq, half = head_dim / 2;
  if (tokens <= 0 || half <= 0)
    return cudaSuccess;
  tables_kernel<<<grid_for(tokens * half, kThreads), kThreads, 0, stream>>>(
      cos, sin, inv_freq, position_ids, tokens, seq, half);
  return cudaGetLastError();
}

cudaError_t srt_cuda_apply_rotary_forward(srt_bf16 *y, const srt_bf16 *x, const float *cos,
                                          const float *sin, int64_t batch, int64_t seq,
                                          int64_t heads, int64_t head_dim,
                                          cudaStream_t stream) {
  return rotate(y, x, cos, sin, batch, seq, heads, head_dim, false, stream);
}

cudaError_t srt_cuda_apply_rotary_backward(srt_bf16 *dx, const srt_bf16 *dy, const float *cos,
                                           const float *sin, int64_t batch, int64_t seq,
                                           int64_t heads, int64_t head_dim,
                                           cudaStream_t stream) {
  return rotate(dx, dy, cos, sin, batch, seq, heads, head_dim, true, stream);
}
