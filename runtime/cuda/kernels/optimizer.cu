// Multi-tensor optimizer kernels: the local gradient p-norm sum, AdamW with
// clipping, and the bf16 compute-copy refresh, each over every parameter in
// one launch (runtime/src/grad_norm.c, runtime/cpu/adamw.c).
#include <math.h>

#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// Slot holding flat element e: the last slot whose start <= e. An empty slot
// shares its successor's start and loses to it.
__device__ int find_slot(const srt_cuda_param_slot *slots, int n, int64_t e) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (slots[mid].start <= e)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The slot of increasing elements, searched again only when one leaves the
// current slot.
struct SlotCursor {
  const srt_cuda_param_slot *slots;
  int n;
  srt_cuda_param_slot cur;
  int64_t end;
  __device__ SlotCursor(const srt_cuda_param_slot *s, int count) : slots(s), n(count), end(-1) {
    cur.start = 0;
  }
  __device__ const srt_cuda_param_slot &at(int64_t e) {
    if (e >= end || e < cur.start) {
      cur = slots[find_slot(slots, n, e)];
      end = cur.start + cur.numel;
    }
    return cur;
  }
};

// Block b walks [b * span, (b + 1) * span) of the flat elements with its
// threads side by side (coalesced), so a thread's next element is usually
// in the same slot. The grid depends only on `total`: a fixed order.
struct BlockSpan {
  int64_t begin, end;
  __device__ BlockSpan(int64_t total) {
    int64_t span = (total + gridDim.x - 1) / gridDim.x;
    begin = (int64_t)blockIdx.x * span;
    end = begin + span < total ? begin + span : total;
  }
};

//===----------------------------------------------------------------------===//
// Gradient norm
//===----------------------------------------------------------------------===//

// Per-block partials of the norm, [value, NaN flag], live in the caller's
// scratch (SRT_CUDA_NORM_PARTIALS pairs).
constexpr int kNormBlocks = SRT_CUDA_NORM_PARTIALS;

enum NormKind { kNormOne, kNormTwo, kNormGeneral, kNormInf };

template <int KIND> __device__ __forceinline__ double accumulate(double acc, double a, double p) {
  if constexpr (KIND == kNormInf)
    return fmax(acc, a);
  else if constexpr (KIND == kNormOne)
    return acc + a;
  else if constexpr (KIND == kNormTwo)
    return acc + a * a;
  else
    return acc + pow(a, p);
}

// NaN elements only raise the flag, so the value stays the finite sum (or
// max) of the others, as srt_get_grad_norm sends [value, flag].
template <int KIND>
__global__ void __launch_bounds__(kThreads)
    norm_partial_kernel(const srt_cuda_param_slot *slots, int n_slots, int64_t total, double p,
                        double *partials) {
  __shared__ double smem[32];
  SlotCursor cursor(slots, n_slots);
  BlockSpan span(total);
  double acc = 0.0, nan = 0.0;
  for (int64_t e = span.begin + threadIdx.x; e < span.end; e += blockDim.x) {
    const srt_cuda_param_slot &s = cursor.at(e);
    if (!s.counted)
      continue;
    float g = s.grad[e - s.start];
    if (g != g)
      nan = 1.0;
    else
      acc = accumulate<KIND>(acc, fabs((double)g), p);
  }
  if constexpr (KIND == kNormInf)
    acc = block_reduce(acc, MaxOp(), 0.0, smem);
  else
    acc = block_reduce(acc, SumOp(), 0.0, smem);
  nan = block_reduce(nan, MaxOp(), 0.0, smem);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = acc;
    partials[2 * blockIdx.x + 1] = nan;
  }
}

// One block of kNormBlocks threads: thread b takes partial b, then a fixed
// tree. out[0] is 0 when the flag is set, as srt_get_grad_norm's wire pair.
__global__ void __launch_bounds__(kNormBlocks)
    norm_final_kernel(double *out, const double *partials, int blocks, bool is_max) {
  __shared__ double smem[32];
  int b = threadIdx.x;
  double v = b < blocks ? partials[2 * b] : 0.0;
  double nan = b < blocks ? partials[2 * b + 1] : 0.0;
  v = is_max ? block_reduce(v, MaxOp(), 0.0, smem) : block_reduce(v, SumOp(), 0.0, smem);
  nan = block_reduce(nan, MaxOp(), 0.0, smem);
  if (threadIdx.x == 0) {
    out[0] = nan != 0.0 ? 0.0 : v;
    out[1] = nan != 0.0 ? 1.0 : 0.0;
  }
}

template <int KIND>
void launch_norm_partial(unsigned blocks, const srt_cuda_param_slot *slots, int32_t n_slots,
                         int64_t total, double p, double *partials, cudaStream_t stream) {
  norm_partial_kernel<KIND><<<blocks, kThreads, 0, stream>>>(slots, n_slots, total, p, partials);
}

//===----------------------------------------------------------------------===//
// AdamW and the compute copies
//===----------------------------------------------------------------------===//

// The per-step fp32 scalars of srt_cpu_adamw_step, rounded from double on the
// host exactly as there.
struct AdamScalars {
  float decay, w1, one_minus_w1, w2, beta2, neg_step, bc2_sqrt, eps, clip;
};

AdamScalars adam_scalars(const srt_cuda_adamw_args &a) {
  double bc1 = 1.0 - pow((double)a.beta1, (double)a.step);
  double bc2 = 1.0 - pow((double)a.beta2, (double)a.step);
  AdamScalars s;
  s.decay = (float)(1.0 - (double)a.lr * (double)a.weight_decay);
  s.w1 = (float)(1.0 - (double)a.beta1);
  s.one_minus_w1 = 1.0f - s.w1;
  s.w2 = (float)(1.0 - (double)a.beta2);
  s.beta2 = a.beta2;
  s.neg_step = -(float)((double)a.lr / bc1);
  s.bc2_sqrt = (float)sqrt(bc2);
  s.eps = a.eps;
  s.clip = a.clip_coef;
  return s;
}

// Explicitly rounded operations (__fmul_rn, ...) keep nvcc from contracting
// them into FMAs, so every element follows the CPU's fp32 steps bit for bit:
//   g *= clip (the gradient buffer is left unscaled); p *= decay; m = lerp(m, g, w1);
//   v = v beta2 + w2 g g; p += (-step) m / (sqrt(v) / bc2_sqrt + eps).
__device__ __forceinline__ void adamw_element(const srt_cuda_param_slot &s, int64_t i,
                                              const AdamScalars &a) {
  float g = s.grad[i];
  if (a.clip < 1.0f)
    g = __fmul_rn(g, a.clip);
  float p = __fmul_rn(s.param[i], a.decay);
  float m = s.m[i], diff = __fsub_rn(g, m);
  // torch's lerp_: self + w (end - self) for w < 0.5, else end - (end - self)(1 - w).
  m = a.w1 < 0.5f ? __fadd_rn(m, __fmul_rn(a.w1, diff))
                  : __fsub_rn(g, __fmul_rn(diff, a.one_minus_w1));
  float v = __fadd_rn(__fmul_rn(s.v[i], a.beta2), __fmul_rn(__fmul_rn(a.w2, g), g));
  float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), a.bc2_sqrt), a.eps);
  p = __fadd_rn(p, __fdiv_rn(__fmul_rn(a.neg_step, m), denom));
  s.param[i] = p;
  s.m[i] = m;
  s.v[i] = v;
  if (s.compute)
    as_bf16(s.compute)[i] = __float2bfloat16_rn(p);
}

__global__ void __launch_bounds__(kThreads)
    adamw_kernel(const srt_cuda_param_slot *slots, int n_slots, int64_t total, AdamScalars a) {
  SlotCursor cursor(slots, n_slots);
  BlockSpan span(total);
  for (int64_t e = span.begin + threadIdx.x; e < span.end; e += blockDim.x) {
    const srt_cuda_param_slot &s = cursor.at(e);
    adamw_element(s, e - s.start, a);
  }
}

__global__ void __launch_bounds__(kThreads)
    refresh_kernel(const srt_cuda_param_slot *slots, int n_slots, int64_t total) {
  SlotCursor cursor(slots, n_slots);
  BlockSpan span(total);
  for (int64_t e = span.begin + threadIdx.x; e < span.end; e += blockDim.x) {
    const srt_cuda_param_slot &s = cursor.at(e);
    if (s.compute)
      as_bf16(s.compute)[e - s.start] = __float2bfloat16_rn(s.param[e - s.start]);
  }
}

} // namespace

/// out[0] is the value srt_get_grad_norm puts on the wire: the sum (or max)
/// over the non-NaN counted elements, and 0 when the NaN flag is set.
/// Deterministic: up to SRT_CUDA_NORM_PARTIALS blocks of fixed spans, their
/// partials in `partials`, then a fixed tree in a second launch. norm_type <= 0 or NaN
/// gives cudaErrorInvalidValue. With no elements out is zeroed (a memset).
cudaError_t srt_cuda_grad_norm_partial(double *out, const srt_cuda_param_slot *slots,
                                       int32_t n_slots, int64_t total, double norm_type,
                                       double *partials, cudaStream_t stream) {
  if (!(norm_type > 0.0))
    return cudaErrorInvalidValue;
  if (total <= 0 || n_slots <= 0)
    return cudaMemsetAsync(out, 0, 2 * sizeof(double), stream);
  unsigned blocks = grid_for(total, kThreads);
  blocks = blocks < (unsigned)kNormBlocks ? blocks : (unsigned)kNormBlocks;
  bool is_max = isinf(norm_type);
  if (is_max)
    launch_norm_partial<kNormInf>(blocks, slots, n_slots, total, norm_type, partials, stream);
  else if (norm_type == 1.0)
    launch_norm_partial<kNormOne>(blocks, slots, n_slots, total, norm_type, partials, stream);
  else if (norm_type == 2.0)
    launch_norm_partial<kNormTwo>(blocks, slots, n_slots, total, norm_type, partials, stream);
  else
    launch_norm_partial<kNormGeneral>(blocks, slots, n_slots, total, norm_type, partials, stream);
  norm_final_kernel<<<1, kNormBlocks, 0, stream>>>(out, partials, (int)blocks, is_max);
  return cudaGetLastError();
}

/// The slots may share no buffer (each element is updated by one thread);
/// a slot with a NULL compute pointer keeps only the fp32 update.
cudaError_t srt_cuda_adamw(const srt_cuda_param_slot *slots, int32_t n_slots, int64_t total,
                           srt_cuda_adamw_args args, cudaStream_t stream) {
  if (total <= 0 || n_slots <= 0)
    return cudaSuccess;
  adamw_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(slots, n_slots, total,
                                                                  adam_scalars(args));
  return cudaGetLastError();
}

cudaError_t srt_cuda_refresh_compute(const srt_cuda_param_slot *slots, int32_t n_slots,
                                     int64_t total, cudaStream_t stream) {
  if (total <= 0 || n_slots <= 0)
    return cudaSuccess;
  refresh_kernel<<<grid_for(total, kThreads), kThreads, 0, stream>>>(slots, n_slots, total);
  return cudaGetLastError();
}
