// Token embedding over a local vocabulary range (vocabulary-parallel): the
// forward gathers rows; the backward sums token gradients into rows
// deterministically, without atomics (runtime/cpu/embedding.c).
#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// The local row of token id `id`, or -1 when another rank owns it. The
// unsigned compare covers ids below and above the range in one test.
__device__ __forceinline__ int64_t local_row(int64_t id, int64_t vocab_start,
                                             int64_t local_vocab) {
  uint64_t row = (uint64_t)id - (uint64_t)vocab_start;
  return row < (uint64_t)local_vocab ? (int64_t)row : -1;
}

// One block per token row (grid-stride over rows), threads over 8-element
// chunks of the hidden dim. `vec`: hidden % 8 == 0 and aligned pointers.
__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(bf16 *y, const int64_t *ids, const bf16 *w, int64_t n,
                             int64_t hidden, int64_t vocab_start, int64_t local_vocab,
                             float scale, bool vec) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    int64_t row = local_row(ids[t], vocab_start, local_vocab);
    for (int64_t i = (int64_t)threadIdx.x * kVec; i < hidden; i += (int64_t)blockDim.x * kVec) {
      int count = hidden - i < kVec ? (int)(hidden - i) : kVec;
      bool full = vec && count == kVec;
      float v[kVec] = {};
      if (row >= 0) {
        load_vec(v, w + row * hidden + i, count, full);
#pragma unroll
        for (int k = 0; k < kVec; ++k)
          v[k] *= scale;
      }
      store_vec(y + t * hidden + i, v, count, full);
    }
  }
}

// Backward. Each (row, column) of dw is owned by one thread, which adds the
// tokens hitting that row in token order, so the result does not depend on
// scheduling. A warp owns 32 columns of the rows r with r % parts == p (the
// modulo spreads a skewed id distribution over warps); the grid is
// (hidden / 32 column slabs) x (parts / kWarps). The block stages a tile of
// ids with their partition in shared memory, and each warp finds its tokens
// 32 at a time with a ballot, so scanning the ids costs n / 32 steps a warp.
constexpr int kWarps = kThreads / 32;
constexpr int kIdTile = 1024;

__global__ void __launch_bounds__(kThreads)
    embedding_backward_kernel(float *dw, const bf16 *dy, const int64_t *ids, int64_t n,
                              int64_t hidden, int64_t vocab_start, int64_t local_vocab,
                              float scale, int64_t padding_idx) {
  __shared__ int64_t rows[kIdTile];
  __shared__ int part[kIdTile];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int parts = gridDim.y * kWarps, p = blockIdx.y * kWarps + warp;
  int64_t col = (int64_t)blockIdx.x * 32 + lane;
  for (int64_t t0 = 0; t0 < n; t0 += kIdTile) {
    __syncthreads(); // the previous tile is consumed
    for (int k = threadIdx.x; k < kIdTile; k += blockDim.x) {
      int64_t row = t0 + k < n && ids[t0 + k] != padding_idx
                        ? local_row(ids[t0 + k], vocab_start, local_vocab)
                        : -1;
      rows[k] = row;
      part[k] = row < 0 ? -1 : (int)(row % parts);
    }
    __syncthreads();
    for (int base = 0; base < kIdTile; base += 32) {
      unsigned hits = __ballot_sync(0xffffffffu, part[base + lane] == p);
      while (hits) {
        int k = base + __ffs(hits) - 1;
        hits &= hits - 1;
        if (col < hidden) {
          float *d = dw + rows[k] * hidden + col;
          *d = __fadd_rn(*d, __fmul_rn(scale, to_f32(dy[(t0 + k) * hidden + col])));
        }
      }
    }
  }
}

// Partitions of the backward: about 4096 warps over the whole grid (some 30
// resident warps per SM of an H200), at least one block row, at most 64.
int backward_block_rows(int64_t slabs) {
  int64_t rows = 4096 / kWarps / slabs;
  return (int)(rows < 1 ? 1 : rows > 64 ? 64 : rows);
}

} // namespace

cudaError_t srt_cuda_embedding_forward(srt_bf16 *y, const int64_t *ids, const srt_bf16 *w,
                                       int64_t n, int64_t hidden, int64_t vocab_start,
                                       int64_t local_vocab, float scale,
                                       cudaStream_t stream) {
  if (n <= 0 || hidden <= 0)
    return cudaSuccess;
  bool vec = hidden % kVec == 0 && aligned16(y) && aligned16(w);
  unsigned blocks = (unsigned)(n < kMaxBlocks ? n : kMaxBlocks);
  embedding_forward_kernel<<<blocks, kThreads, 0, stream>>>(
      as_bf16(y), ids, as_bf16(w), n, hidden, vocab_start, local_vocab, scale, vec);
  return cudaGetLastError();
}

/// dw is zeroed with a memset, then each row hit by tokens receives their sum
/// in token order (the same fp32 additions as srt_cpu_embedding_backward on a
/// zeroed dw, so the two agree bit for bit); tokens equal to padding_idx add
/// nothing.
cudaError_t srt_cuda_embedding_backward(float *dw, const srt_bf16 *dy, const int64_t *ids,
                                        int64_t n, int64_t hidden, int64_t vocab_start,
                                        int64_t local_vocab, float scale, int64_t padding_idx,
                                        cudaStream_t stream) {
  if (hidden <= 0 || local_vocab <= 0)
    return cudaSuccess;
  cudaError_t err =
      cudaMemsetAsync(dw, 0, (size_t)local_vocab * (size_t)hidden * sizeof(float), stream);
  if (err != cudaSuccess || n <= 0)
    return err;
  int64_t slabs = (hidden + 31) / 32;
  dim3 grid((unsigned)slabs, (unsigned)backward_block_rows(slabs));
  embedding_backward_kernel<<<grid, kThreads, 0, stream>>>(dw, as_bf16(dy), ids, n, hidden,
                                                           vocab_start, local_vocab, scale,
                                                           padding_idx);
  return cudaGetLastError();
}
