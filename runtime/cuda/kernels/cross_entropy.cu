// Vocabulary-parallel causal-LM cross-entropy as phase kernels (row max,
// partial exp-sums and target logits, loss sum, mean, logits gradient), the
// collectives between them left to the caller (runtime/cpu/cross_entropy.c).
#include <math.h>

#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// Label scored by logits row r, or ignore_index when the row is not scored
// (the last position of a sequence when shifting).
__device__ __forceinline__ int64_t target_of(const srt_cuda_ce_shape &c, const int64_t *labels,
                                             int64_t r) {
  if (!c.shift)
    return labels[r];
  return r % c.seq + 1 < c.seq ? labels[r + 1] : c.ignore_index;
}

// The row kernels: one block per row of local_vocab logits (grid-stride over
// rows), threads over 8-element chunks; `vec`: local_vocab % 8 == 0 and
// aligned pointers, so every full chunk is one 16-byte access.
__device__ __forceinline__ int chunk_count(int64_t i, int64_t lv) {
  return lv - i < kVec ? (int)(lv - i) : kVec;
}

__global__ void __launch_bounds__(kThreads)
    logit_max_kernel(float *max, const bf16 *logits, int64_t rows, int64_t lv, bool vec) {
  __shared__ float smem[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16 *x = logits + r * lv;
    float m = -INFINITY;
    for (int64_t i = (int64_t)threadIdx.x * kVec; i < lv; i += (int64_t)blockDim.x * kVec) {
      int count = chunk_count(i, lv);
      float v[kVec];
      load_vec(v, x + i, count, vec && count == kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        if (k < count)
          m = fmaxf(m, v[k]);
    }
    m = block_reduce(m, MaxOp(), -INFINITY, smem);
    if (threadIdx.x == 0)
      max[r] = m;
  }
}

__global__ void __launch_bounds__(kThreads)
    partial_sums_kernel(float *sum_exp, float *target, const bf16 *logits, const int64_t *labels,
                        const float *max, srt_cuda_ce_shape c, int64_t *bad_label, bool vec) {
  __shared__ float smem[32];
  int64_t rows = c.batch * c.seq, lv = c.local_vocab;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16 *x = logits + r * lv;
    float mx = max[r], s = 0.0f;
    for (int64_t i = (int64_t)threadIdx.x * kVec; i < lv; i += (int64_t)blockDim.x * kVec) {
      int count = chunk_count(i, lv);
      float v[kVec];
      load_vec(v, x + i, count, vec && count == kVec);
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        if (k < count)
          s += expf(v[k] - mx);
    }
    s = block_reduce(s, SumOp(), 0.0f, smem);
    if (threadIdx.x != 0)
      continue;
    sum_exp[r] = s;
    int64_t y = target_of(c, labels, r);
    float t = 0.0f;
    if (y != c.ignore_index && (y < 0 || y >= c.vocab)) {
      // First writer wins: the CAS claims the pair, only the claimer fills it.
      if (atomicCAS(reinterpret_cast<unsigned long long *>(bad_label), 0ull,
                    (unsigned long long)(r + 1)) == 0ull)
        bad_label[1] = y;
    } else {
      // ignore_index and other ranks' labels fall outside [0, lv) unsigned.
      uint64_t local = (uint64_t)y - (uint64_t)c.vocab_start;
      if (local < (uint64_t)lv)
        t = to_f32(x[local]);
    }
    target[r] = t;
  }
}

// One block, grid-stride over rows, double sums combined in a fixed tree.
constexpr int kLossThreads = 1024;

__global__ void __launch_bounds__(kLossThreads)
    loss_sum_kernel(float *sum_and_count, const float *max, const float *sum_exp,
                    const float *target, const int64_t *labels, srt_cuda_ce_shape c) {
  __shared__ double dsmem[32];
  __shared__ long long csmem[32];
  int64_t rows = c.batch * c.seq;
  double total = 0.0;
  long long kept = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (target_of(c, labels, r) == c.ignore_index)
      continue;
    total += (double)max[r] + log((double)sum_exp[r]) - (double)target[r];
    kept++;
  }
  total = block_reduce(total, SumOp(), 0.0, dsmem);
  kept = block_reduce(kept, SumOp(), 0ll, csmem);
  if (threadIdx.x == 0) {
    sum_and_count[0] = (float)total;
    sum_and_count[1] = (float)kept;
  }
}

__global__ void mean_kernel(float *loss, const float *sum_and_count) {
  loss[0] = sum_and_count[1] > 0.0f ? sum_and_count[0] / sum_and_count[1] : 0.0f;
}

// dlogits of one row: g exp(x - lse) - g [v is the label], g = 1 / count,
// as srt_cpu_cross_entropy_backward with dloss 1; zeros for rows not scored.
__global__ void __launch_bounds__(kThreads)
    logits_grad_kernel(bf16 *dlogits, const bf16 *logits, const int64_t *labels,
                       const float *max, const float *sum_exp, const float *sum_and_count,
                       srt_cuda_ce_shape c, bool vec) {
  int64_t rows = c.batch * c.seq, lv = c.local_vocab;
  float count = sum_and_count[1];
  float g = count > 0.0f ? (float)(1.0 / (double)count) : 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t y = target_of(c, labels, r);
    bool zero = y == c.ignore_index || g == 0.0f;
    int64_t local = y - c.vocab_start; // may lie outside [0, lv): no match
    float lse = max[r] + logf(sum_exp[r]);
    const bf16 *x = logits + r * lv;
    bf16 *dx = dlogits + r * lv;
    for (int64_t i = (int64_t)threadIdx.x * kVec; i < lv; i += (int64_t)blockDim.x * kVec) {
      int count_i = chunk_count(i, lv);
      bool full = vec && count_i == kVec;
      float v[kVec] = {};
      if (!zero)
        load_vec(v, x + i, count_i, full);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        if (zero)
          continue;
        v[k] = g * expf(v[k] - lse);
        if (i + k == local)
          v[k] -= g;
      }
      store_vec(dx + i, v, count_i, full);
    }
  }
}

unsigned row_grid(int64_t rows) { return (unsigned)(rows < kMaxBlocks ? rows : kMaxBlocks); }

bool rows_aligned(int64_t lv, const void *a, const void *b = nullptr) {
  return lv % kVec == 0 && aligned16(a) && (!b || aligned16(b));
}

} // namespace

cudaError_t srt_cuda_ce_logit_max(float *max, const srt_bf16 *logits, int64_t rows,
                                  int64_t local_vocab, cudaStream_t stream) {
  if (rows <= 0)
    return cudaSuccess;
  logit_max_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
      max, as_bf16(logits), rows, local_vocab, rows_aligned(local_vocab, logits));
  return cudaGetLastError();
}

/// Rows are read whatever their label; a bad label's target is 0.
cudaError_t srt_cuda_ce_partial_sums(float *sum_exp, float *target, const srt_bf16 *logits,
                                     const int64_t *labels, const float *max,
                                     const srt_cuda_ce_shape *shape, int64_t *bad_label,
                                     cudaStream_t stream) {
  int64_t rows = shape->batch * shape->seq;
  if (rows <= 0)
    return cudaSuccess;
  partial_sums_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
      sum_exp, target, as_bf16(logits), labels, max, *shape, bad_label,
      rows_aligned(shape->local_vocab, logits));
  return cudaGetLastError();
}

/// One block of 1024 threads: the rows are a few per thread even at a
/// million tokens, and one block needs no second pass. With no rows the
/// pair is zeroed (a memset, no kernel).
cudaError_t srt_cuda_ce_loss_sum(float *sum_and_count, const float *max,
                                 const float *sum_exp, const float *target,
                                 const int64_t *labels, const srt_cuda_ce_shape *shape,
                                 cudaStream_t stream) {
  int64_t rows = shape->batch * shape->seq;
  if (rows <= 0)
    return cudaMemsetAsync(sum_and_count, 0, 2 * sizeof(float), stream);
  loss_sum_kernel<<<1, kLossThreads, 0, stream>>>(sum_and_count, max, sum_exp, target, labels,
                                                  *shape);
  return cudaGetLastError();
}

cudaError_t srt_cuda_ce_mean(float *loss, const float *sum_and_count, cudaStream_t stream) {
  mean_kernel<<<1, 1, 0, stream>>>(loss, sum_and_count);
  return cudaGetLastError();
}

cudaError_t srt_cuda_ce_logits_grad(srt_bf16 *dlogits, const srt_bf16 *logits,
                                    const int64_t *labels, const float *max,
                                    const float *sum_exp, const float *sum_and_count,
                                    const srt_cuda_ce_shape *shape, cudaStream_t stream) {
  int64_t rows = shape->batch * shape->seq;
  if (rows <= 0 || shape->local_vocab <= 0)
    return cudaSuccess;
  logits_grad_kernel<<<row_grid(rows), kThreads, 0, stream>>>(
      as_bf16(dlogits), as_bf16(logits), labels, max, sum_exp, sum_and_count, *shape,
      rows_aligned(shape->local_vocab, logits, dlogits));
  return cudaGetLastError();
}
