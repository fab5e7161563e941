// Device helpers shared by the CUDA kernels of kernels/*.cu: bf16/fp32 loads
// and stores, 8-element vector chunks, deterministic warp and block
// reductions, and grid sizing. Private to this folder (not part of the C API).
#ifndef SHARDRT_CUDA_KERNELS_COMMON_CUH
#define SHARDRT_CUDA_KERNELS_COMMON_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace srt_cuda {

typedef __nv_bfloat16 bf16;

// Threads per block of the one-dimensional kernels.
constexpr int kThreads = 256;
// Elements per vector chunk: 16 bytes of bf16, two float4 of fp32.
constexpr int kVec = 8;
// Grid-stride kernels stop growing the grid here: 8192 x 256 threads is
// about 8 resident waves of an H200 (132 SMs x 2048 threads), enough to hide
// memory latency, and each thread then loops.
constexpr int64_t kMaxBlocks = 8192;

__host__ __device__ inline const bf16 *as_bf16(const uint16_t *p) {
  return reinterpret_cast<const bf16 *>(p);
}
__host__ __device__ inline bf16 *as_bf16(uint16_t *p) { return reinterpret_cast<bf16 *>(p); }

// Blocks for `items` work items of `per_block` each, capped for grid-stride.
inline unsigned grid_for(int64_t items, int64_t per_block) {
  int64_t blocks = (items + per_block - 1) / per_block;
  if (blocks < 1)
    blocks = 1;
  return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// Vector loads need 16-byte alignment of every chunk; chunks start at
// multiples of 8 elements, so the base pointer's alignment decides.
inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ void put(bf16 *p, float x) { *p = __float2bfloat16_rn(x); }
__device__ __forceinline__ void put(float *p, float x) { *p = x; }

// v[0..count) = p[0..count), v[count..8) = 0; `vec` (count == 8 and p
// 16-byte aligned) takes one 16-byte load per 8 bf16 or 4 floats.
__device__ __forceinline__ void load_vec(float (&v)[kVec], const bf16 *p, int count, bool vec) {
  if (vec) {
    uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < kVec / 2; ++k) {
      float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    v[k] = k < count ? to_f32(p[k]) : 0.0f;
}

__device__ __forceinline__ void load_vec(float (&v)[kVec], const float *p, int count, bool vec) {
  if (vec) {
    float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    v[k] = k < count ? p[k] : 0.0f;
}

__device__ __forceinline__ void store_vec(bf16 *p, const float (&v)[kVec], int count, bool vec) {
  if (vec) {
    uint4 raw;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < kVec / 2; ++k)
      h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4 *>(p) = raw;
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) // unrolled with a test: v stays in registers
    if (k < count)
      put(p + k, v[k]);
}

__device__ __forceinline__ void store_vec(float *p, const float (&v)[kVec], int count, bool vec) {
  if (vec) {
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    if (k < count)
      p[k] = v[k];
}

struct SumOp {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
// Max that drops NaN (fmax), as the CPU kernels' `x > m ? x : m` does.
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ __forceinline__ double operator()(double a, double b) const { return fmax(a, b); }
};

// Butterfly over the full warp: every lane ends with the same value, and
// since a + b == b + a exactly, the result does not depend on the lane.
template <class T, class Op> __device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduction over a one-dimensional block (blockDim.x a multiple of 32, at
// most 1024) in a fixed order; every thread gets the result. `smem` holds
// 32 values; the leading barrier makes back-to-back calls safe.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T *smem) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0)
    smem[warp] = v;
  __syncthreads();
  v = lane < warps ? smem[lane] : identity;
  return warp_reduce(v, op);
}

// Dynamic shared memory whose sum with the kernel's static shared memory
// passes the 48 KiB default needs an opt-in per kernel.
template <class K> inline cudaError_t allow_smem(K *kernel, size_t bytes) {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess || bytes + attr.sharedSizeBytes <= 48 * 1024)
    return err;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

} // namespace srt_cuda

#endif // SHARDRT_CUDA_KERNELS_COMMON_CUH
