// RMSNorm with a weight offset (Gemma's 1 + w) and per-head groups
// (q_norm/k_norm): forward, input gradient, and a deterministic two-pass
// weight gradient (runtime/cpu/rms_norm.c).
#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// A "team" of TEAM threads normalises one group of `g` features at a time:
// a warp for groups up to kWarpGroupMax (head_dim norms, small hidden sizes:
// no barrier, eight rows per block), the whole block above that.
constexpr int kWarpGroupMax = 1024;

template <int TEAM> struct Team {
  static constexpr int kPerBlock = kThreads / TEAM;
  int lane, index; // thread within the team, team within the block
  __device__ Team() : lane(threadIdx.x % TEAM), index(threadIdx.x / TEAM) {}
  // Sum over the team; every member gets it. `smem`: 32 floats.
  __device__ float sum(float v, float *smem) const {
    if constexpr (TEAM == 32)
      return warp_reduce(v, SumOp());
    else
      return block_reduce(v, SumOp(), 0.0f, smem);
  }
};

// 1/sqrt(mean(x^2) + eps) from the team's sum of squares; the last step in
// double, as runtime/cpu/rms_norm.c.
__device__ __forceinline__ float rstd_of(float ss, int64_t g, float eps) {
  return (float)(1.0 / sqrt((double)ss / (double)g + (double)eps));
}

template <int TEAM>
__device__ __forceinline__ float team_rstd(const Team<TEAM> &team, const bf16 *x, int64_t g,
                                           float eps, float *smem) {
  float ss = 0.0f;
  for (int64_t i = team.lane; i < g; i += TEAM) {
    float v = to_f32(x[i]);
    ss += v * v;
  }
  return rstd_of(team.sum(ss, smem), g, eps);
}

// Grid-stride over the n * features / g group rows; the loop bound is the
// same for every thread of a TEAM = kThreads block, as the barriers need.
template <int TEAM>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(bf16 *y, const bf16 *x, const bf16 *w, int64_t rows, int64_t g, float eps,
                   float offset) {
  __shared__ float smem[32];
  Team<TEAM> team;
  for (int64_t r = (int64_t)blockIdx.x * team.kPerBlock + team.index; r < rows;
       r += (int64_t)gridDim.x * team.kPerBlock) {
    const bf16 *xr = x + r * g;
    float rstd = team_rstd(team, xr, g, eps, smem);
    for (int64_t i = team.lane; i < g; i += TEAM)
      put(y + r * g + i, (offset + to_f32(w[i])) * (to_f32(xr[i]) * rstd));
  }
}

// The residual add fused with the norm that reads its result:
// sum = bf16(a + b) exactly as srt_cuda_add_bf16 rounds it, then y = the
// norm of that bf16 sum exactly as forward_kernel; one pass over a and b
// instead of writing the sum and reading it back in a second launch. Each
// element is read and written by the same thread in both loops.
template <int TEAM>
__global__ void __launch_bounds__(kThreads)
    add_forward_kernel(bf16 *sum, bf16 *y, const bf16 *a, const bf16 *b, const bf16 *w,
                       int64_t rows, int64_t g, float eps, float offset) {
  __shared__ float smem[32];
  Team<TEAM> team;
  for (int64_t r = (int64_t)blockIdx.x * team.kPerBlock + team.index; r < rows;
       r += (int64_t)gridDim.x * team.kPerBlock) {
    bf16 *sr = sum + r * g;
    float ss = 0.0f;
    for (int64_t i = team.lane; i < g; i += TEAM) {
      put(sr + i, to_f32(a[r * g + i]) + to_f32(b[r * g + i]));
      float v = to_f32(sr[i]);
      ss += v * v;
    }
    float rstd = rstd_of(team.sum(ss, smem), g, eps);
    for (int64_t i = team.lane; i < g; i += TEAM)
      put(y + r * g + i, (offset + to_f32(w[i])) * (to_f32(sr[i]) * rstd));
  }
}

// dx_i = r g_i dy_i - c x_i, c = r^3 / g * sum_j g_j dy_j x_j (g = offset + w).
template <int TEAM>
__global__ void __launch_bounds__(kThreads)
    backward_input_kernel(bf16 *dx, const bf16 *x, const bf16 *w, const bf16 *dy, int64_t rows,
                          int64_t g, float eps, float offset) {
  __shared__ float smem[32];
  Team<TEAM> team;
  for (int64_t r = (int64_t)blockIdx.x * team.kPerBlock + team.index; r < rows;
       r += (int64_t)gridDim.x * team.kPerBlock) {
    const bf16 *xr = x + r * g, *dyr = dy + r * g;
    float rstd = team_rstd(team, xr, g, eps, smem), dot = 0.0f;
    for (int64_t i = team.lane; i < g; i += TEAM)
      dot += (offset + to_f32(w[i])) * to_f32(dyr[i]) * to_f32(xr[i]);
    dot = team.sum(dot, smem);
    float c = (float)((double)dot * rstd * rstd * rstd / (double)g);
    for (int64_t i = team.lane; i < g; i += TEAM)
      put(dx + r * g + i, rstd * (offset + to_f32(w[i])) * to_f32(dyr[i]) - c * to_f32(xr[i]));
  }
}

// Weight gradient, pass 1: block b sums dy_j x_j rstd over its rows into
// per-team accumulators in shared memory (each column owned by one thread
// of the team), then writes the sum of its teams, in team order, to
// partial[b, :]. At most kPartials blocks, so pass 2 reads kPartials rows.
constexpr int64_t kPartials = 256;

template <int TEAM>
__global__ void __launch_bounds__(kThreads)
    weight_partial_kernel(float *partial, const bf16 *x, const bf16 *dy, int64_t rows,
                          int64_t g, float eps) {
  extern __shared__ float acc[]; // [kPerBlock][g]
  __shared__ float smem[32];
  Team<TEAM> team;
  float *mine = acc + team.index * g;
  for (int64_t i = threadIdx.x; i < team.kPerBlock * g; i += blockDim.x)
    acc[i] = 0.0f;
  __syncthreads();
  for (int64_t r = (int64_t)blockIdx.x * team.kPerBlock + team.index; r < rows;
       r += (int64_t)gridDim.x * team.kPerBlock) {
    const bf16 *xr = x + r * g, *dyr = dy + r * g;
    float rstd = team_rstd(team, xr, g, eps, smem);
    for (int64_t i = team.lane; i < g; i += TEAM)
      mine[i] += to_f32(dyr[i]) * to_f32(xr[i]) * rstd;
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < g; i += blockDim.x) {
    float s = 0.0f;
    for (int t = 0; t < team.kPerBlock; ++t)
      s += acc[t * g + i];
    partial[blockIdx.x * g + i] = s;
  }
}

// Pass 2: dw[j] = sum over the blocks of partial[b, j], in block order.
__global__ void __launch_bounds__(kThreads)
    weight_sum_kernel(float *dw, const float *partial, int64_t blocks, int64_t g) {
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < g;
       j += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int64_t b = 0; b < blocks; ++b)
      s += partial[b * g + j];
    dw[j] = s;
  }
}

int64_t group_of(int64_t features, int64_t group) { return group > 0 ? group : features; }

template <int TEAM>
cudaError_t weight_gradient(float *dw, const bf16 *x, const bf16 *dy, int64_t rows, int64_t g,
                            float eps, float *scratch, cudaStream_t stream) {
  constexpr int per_block = Team<TEAM>::kPerBlock;
  int64_t blocks = (rows + per_block - 1) / per_block;
  blocks = blocks < kPartials ? blocks : kPartials;
  size_t bytes = (size_t)per_block * (size_t)g * sizeof(float);
  cudaError_t err = allow_smem(weight_partial_kernel<TEAM>, bytes);
  if (err != cudaSuccess)
    return err;
  weight_partial_kernel<TEAM><<<(unsigned)blocks, kThreads, bytes, stream>>>(scratch, x, dy, rows,
                                                                             g, eps);
  weight_sum_kernel<<<grid_for(g, kThreads), kThreads, 0, stream>>>(dw, scratch, blocks, g);
  return cudaGetLastError();
}

// Launches a row kernel's warp-team instance for groups up to
// kWarpGroupMax, its block-team instance above.
template <class... P, class... A>
cudaError_t launch_rows(void (*warp)(P...), void (*block)(P...), int64_t g, int64_t rows,
                        cudaStream_t stream, A... args) {
  if (g <= kWarpGroupMax)
    warp<<<grid_for(rows, Team<32>::kPerBlock), kThreads, 0, stream>>>(args...);
  else
    block<<<grid_for(rows, 1), kThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

} // namespace

cudaError_t srt_cuda_rms_norm_forward(srt_bf16 *y, const srt_bf16 *x, const srt_bf16 *w,
                                      int64_t n, int64_t features, int64_t group, float eps,
                                      float offset, cudaStream_t stream) {
  int64_t g = group_of(features, group);
  if (n <= 0 || g <= 0)
    return cudaSuccess;
  int64_t rows = n * (features / g);
  return launch_rows(forward_kernel<32>, forward_kernel<kThreads>, g, rows, stream, as_bf16(y),
                     as_bf16(x), as_bf16(w), rows, g, eps, offset);
}

cudaError_t srt_cuda_add_rms_norm_forward(srt_bf16 *sum, srt_bf16 *y, const srt_bf16 *a,
                                          const srt_bf16 *b, const srt_bf16 *w, int64_t n,
                                          int64_t features, int64_t group, float eps,
                                          float offset, cudaStream_t stream) {
  int64_t g = group_of(features, group);
  if (n <= 0 || g <= 0)
    return cudaSuccess;
  int64_t rows = n * (features / g);
  return launch_rows(add_forward_kernel<32>, add_forward_kernel<kThreads>, g, rows, stream,
                     as_bf16(sum), as_bf16(y), as_bf16(a), as_bf16(b), as_bf16(w), rows, g, eps,
                     offset);
}

cudaError_t srt_cuda_rms_norm_backward_input(srt_bf16 *dx, const srt_bf16 *x,
                                             const srt_bf16 *w, const srt_bf16 *dy,
                                             int64_t n, int64_t features, int64_t group,
                                             float eps, float offset, cudaStream_t stream) {
  int64_t g = group_of(features, group);
  if (n <= 0 || g <= 0)
    return cudaSuccess;
  int64_t rows = n * (features / g);
  return launch_rows(backward_input_kernel<32>, backward_input_kernel<kThreads>, g, rows, stream,
                     as_bf16(dx), as_bf16(x), as_bf16(w), as_bf16(dy), rows, g, eps, offset);
}

/// kPartials (256) rows of `group` floats, whatever n: one per block of
/// pass 1 at most.
int64_t srt_cuda_rms_norm_backward_weight_scratch(int64_t n, int64_t features,
                                                  int64_t group) {
  (void)n;
  int64_t g = group_of(features, group);
  return g > 0 ? kPartials * g : 0;
}

/// With n == 0 the sums are empty: dw is zeroed (a memset, no kernel).
/// Groups above kWarpGroupMax keep one row of `group` floats in shared
/// memory: up to the device's opt-in limit (about 58000 floats on sm_90);
/// past it the launch fails with the attribute's error.
cudaError_t srt_cuda_rms_norm_backward_weight(float *dw, const srt_bf16 *x,
                                              const srt_bf16 *dy, int64_t n,
                                              int64_t features, int64_t group, float eps,
                                              float *scratch, cudaStream_t stream) {
  int64_t g = group_of(features, group);
  if (g <= 0)
    return cudaSuccess;
  if (n <= 0)
    return cudaMemsetAsync(dw, 0, (size_t)g * sizeof(float), stream);
  int64_t rows = n * (features / g);
  if (g <= kWarpGroupMax)
    return weight_gradient<32>(dw, as_bf16(x), as_bf16(dy), rows, g, eps, scratch, stream);
  return weight_gradient<kThreads>(dw, as_bf16(x), as_bf16(dy), rows, g, eps, scratch, stream);
}
