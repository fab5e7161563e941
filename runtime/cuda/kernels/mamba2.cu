// The Mamba2 mixer's kernels (all but its two GEMMs, which the op runs with
// cuBLASLt): conv1d + SiLU and dt, the SSD scan, the gated RMSNorm, and
// their gradients. The math is mamba2_math.h's, which a host test runs
// against the cpu backend; each kernel here only maps its elements (or, for
// the scan, one (batch row, head) per block) onto threads.
//
// Cost: the scan is the token-by-token recurrence, one block per (batch
// row, head) walking the sequence with three barriers per token, its state
// in shared memory: per token each thread does head_dim x state / 256 state
// updates and one head_dim- or state-long dot product, so a block spends
// about seq x (state + head_dim x state / 256) FMA latencies; NemotronH-8B
// (head_dim 64, state 128, 128 heads) at batch 8 x 2048 runs 1024 blocks
// of ~0.5 M dependent steps, a few ms per layer, where the chunked form on
// tensor cores (mamba_ssm's) would take a fraction of that: a first,
// correct version. The elementwise kernels are one thread per element (the
// norm: per row group; the weight gradients: per column, summing the rows
// in order), deterministic, no atomics.
#include "../kernels.h"
#include "common.cuh"
#include "mamba2_math.h"

using namespace srt_cuda;

namespace {

// Threads of a scan block: 8 warps share a head's state updates.
constexpr int kScanThreads = 256;

#define M2_EACH(i, n)                                                                       \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                  \
       i += (int64_t)gridDim.x * blockDim.x)

__global__ void conv_dt_forward_kernel(float *xbc, float *dt, const float *proj,
                                       const int64_t *seg, const float *conv_w,
                                       const float *conv_b, const float *dt_bias, m2_dims d) {
  int64_t n = d.batch * d.seq;
  M2_EACH(i, n * d.conv_dim)
  m2_conv_forward_at(xbc, proj, seg, conv_w, conv_b, &d, i);
  M2_EACH(i, n * d.heads)
  m2_dt_forward_at(dt, proj, dt_bias, &d, i);
}

__global__ void __launch_bounds__(kScanThreads)
    scan_forward_kernel(float *y, const float *xbc, const float *dt, const int64_t *seg,
                        const float *A_log, const float *D, m2_dims d) {
  extern __shared__ float sm[];
  m2_scan_forward(y, xbc, dt, seg, A_log, D, &d, blockIdx.x / d.heads, blockIdx.x % d.heads, sm,
                  threadIdx.x, blockDim.x);
}

__global__ void __launch_bounds__(kScanThreads)
    scan_states_kernel(float *part, float *ds, const float *dy, const float *xbc,
                       const float *dt, const int64_t *seg, const float *A_log, const float *D,
                       m2_dims d, int64_t b) {
  extern __shared__ float sm[];
  m2_scan_backward_states(part, ds, dy, xbc, dt, seg, A_log, D, &d, b, blockIdx.x, sm,
                          threadIdx.x, blockDim.x);
}

__global__ void __launch_bounds__(kScanThreads)
    scan_adjoint_kernel(float *dxbc, float *part, float *ddt, float *dA_part, float *dD_part,
                        const float *ds, const float *dy, const float *xbc, const float *dt,
                        const int64_t *seg, const float *A_log, const float *D, m2_dims d,
                        int64_t b) {
  extern __shared__ float sm[];
  m2_scan_backward_adjoint(dxbc, part, ddt, dA_part, dD_part, ds, dy, xbc, dt, seg, A_log, D,
                           &d, b, blockIdx.x, sm, threadIdx.x, blockDim.x);
}

__global__ void group_sum_kernel(float *dxbc, const float *part, m2_dims d, int64_t b) {
  M2_EACH(i, d.seq * d.groups * 2 * d.state)
  m2_group_sum_at(dxbc, part, &d, b, i);
}

__global__ void head_grads_kernel(float *dA_log, float *dD, const float *dA_part,
                                  const float *dD_part, const float *A_log, m2_dims d) {
  M2_EACH(h, d.heads)
  m2_head_grads_at(dA_log, dD, dA_part, dD_part, A_log, &d, h);
}

__global__ void norm_forward_kernel(bf16 *normed, float *rstd, const float *y,
                                    const float *proj, const float *norm_w, m2_dims d) {
  int64_t gs = d.inner / d.groups;
  M2_EACH(i, d.batch * d.seq * d.groups) {
    int64_t r = i / d.groups, q = i % d.groups;
    float rs = m2_norm_rstd(y, proj, &d, r, q);
    if (rstd)
      rstd[i] = rs;
    for (int64_t k = q * gs; k < (q + 1) * gs; ++k)
      put(normed + r * d.inner + k, m2_norm_out(y, proj, norm_w, rs, &d, r, k));
  }
}

__global__ void norm_backward_kernel(float *dy, float *dproj, const float *dnormed,
                                     const float *rstd, const float *y, const float *proj,
                                     const float *norm_w, m2_dims d) {
  M2_EACH(i, d.batch * d.seq * d.groups)
  m2_norm_backward_at(dy, dproj, dnormed, rstd, y, proj, norm_w, &d, i);
}

__global__ void norm_dweight_kernel(float *dw, const float *dnormed, const float *rstd,
                                    const float *y, const float *proj, m2_dims d) {
  M2_EACH(k, d.inner)
  m2_norm_dweight_at(dw, dnormed, rstd, y, proj, &d, k);
}

__global__ void dt_backward_kernel(float *dproj, const float *ddt, const float *proj,
                                   const float *dt_bias, m2_dims d) {
  M2_EACH(i, d.batch * d.seq * d.heads)
  m2_dt_backward_at(dproj, ddt, proj, dt_bias, &d, i);
}

__global__ void conv_dpre_kernel(float *dxbc, const float *proj, const int64_t *seg,
                                 const float *conv_w, const float *conv_b, m2_dims d) {
  M2_EACH(i, d.batch * d.seq * d.conv_dim)
  m2_conv_dpre_at(dxbc, proj, seg, conv_w, conv_b, &d, i);
}

// After conv_dpre_kernel: dproj's xBC columns, the conv weight's and bias's
// gradients and dt_bias's (from dproj's dt columns).
__global__ void conv_grads_kernel(float *dproj, float *dconv_w, float *dconv_b,
                                  float *ddt_bias, const float *dpre, const float *proj,
                                  const int64_t *seg, const float *conv_w, m2_dims d) {
  int64_t n = d.batch * d.seq;
  M2_EACH(i, n * d.conv_dim)
  m2_conv_dinput_at(dproj, dpre, seg, conv_w, &d, i);
  M2_EACH(i, d.conv_dim * d.conv_kernel)
  m2_conv_dweight_at(dconv_w, dpre, proj, seg, &d, i);
  M2_EACH(ch, d.conv_dim)
  m2_column_sum_at(dconv_b, dpre, d.conv_dim, n, ch);
  M2_EACH(h, d.heads)
  m2_column_sum_at(ddt_bias, dproj + d.inner + d.conv_dim, d.proj, n, h);
}

// Shared-memory bytes of a scan block, with the opt-in past 48 KiB.
template <class K> cudaError_t scan_smem(K *kernel, const m2_dims *d, size_t *bytes) {
  *bytes = (size_t)m2_scan_smem_floats(d) * sizeof(float);
  return allow_smem(kernel, *bytes);
}

} // namespace

cudaError_t srt_cuda_mamba2_forward_inner(float *xbc, float *dt, float *y, const float *proj,
                                          const int64_t *seg, const float *const w[5],
                                          const m2_dims *d, cudaStream_t stream) {
  int64_t n = d->batch * d->seq;
  if (n == 0)
    return cudaSuccess;
  conv_dt_forward_kernel<<<grid_for(n * d->conv_dim, kThreads), kThreads, 0, stream>>>(
      xbc, dt, proj, seg, w[0], w[1], w[2], *d);
  size_t smem;
  cudaError_t err = scan_smem(scan_forward_kernel, d, &smem);
  if (err != cudaSuccess)
    return err;
  scan_forward_kernel<<<(unsigned)(d->batch * d->heads), kScanThreads, smem, stream>>>(
      y, xbc, dt, seg, w[3], w[4], *d);
  return cudaGetLastError();
}

cudaError_t srt_cuda_mamba2_norm_forward(srt_bf16 *normed, float *rstd, const float *y,
                                         const float *proj, const float *norm_w,
                                         const m2_dims *d, cudaStream_t stream) {
  int64_t rows = d->batch * d->seq * d->groups;
  if (rows == 0)
    return cudaSuccess;
  norm_forward_kernel<<<grid_for(rows, kThreads), kThreads, 0, stream>>>(
      as_bf16(normed), rstd, y, proj, norm_w, *d);
  return cudaGetLastError();
}

cudaError_t srt_cuda_mamba2_norm_backward(float *dy, float *dproj, float *dnorm_w,
                                          const float *dnormed, const float *rstd,
                                          const float *y, const float *proj,
                                          const float *norm_w, const m2_dims *d,
                                          cudaStream_t stream) {
  int64_t rows = d->batch * d->seq * d->groups;
  if (rows == 0)
    return cudaSuccess;
  norm_backward_kernel<<<grid_for(rows, kThreads), kThreads, 0, stream>>>(
      dy, dproj, dnormed, rstd, y, proj, norm_w, *d);
  norm_dweight_kernel<<<grid_for(d->inner, kThreads), kThreads, 0, stream>>>(
      dnorm_w, dnormed, rstd, y, proj, *d);
  return cudaGetLastError();
}

int64_t srt_cuda_mamba2_scan_backward_scratch(const m2_dims *d) {
  return d->seq * d->heads * (2 * d->state + 1) + 2 * d->batch * d->heads;
}

cudaError_t srt_cuda_mamba2_scan_backward(float *dxbc, float *ddt, float *dA_log, float *dD,
                                          const float *dy, const float *xbc, const float *dt,
                                          const int64_t *seg, const float *A_log,
                                          const float *D, float *scratch, const m2_dims *d,
                                          cudaStream_t stream) {
  if (d->batch * d->seq == 0)
    return cudaSuccess;
  float *part = scratch, *ds = part + d->seq * d->heads * 2 * d->state;
  float *dA_part = ds + d->seq * d->heads, *dD_part = dA_part + d->batch * d->heads;
  size_t smem;
  cudaError_t err = scan_smem(scan_states_kernel, d, &smem);
  if (err == cudaSuccess)
    err = scan_smem(scan_adjoint_kernel, d, &smem);
  if (err != cudaSuccess)
    return err;
  unsigned heads = (unsigned)d->heads;
  for (int64_t b = 0; b < d->batch; ++b) { // part and ds hold one batch row
    scan_states_kernel<<<heads, kScanThreads, smem, stream>>>(part, ds, dy, xbc, dt, seg, A_log,
                                                              D, *d, b);
    scan_adjoint_kernel<<<heads, kScanThreads, smem, stream>>>(
        dxbc, part, ddt, dA_part, dD_part, ds, dy, xbc, dt, seg, A_log, D, *d, b);
    group_sum_kernel<<<grid_for(d->seq * d->groups * 2 * d->state, kThreads), kThreads, 0,
                       stream>>>(dxbc, part, *d, b);
  }
  head_grads_kernel<<<grid_for(d->heads, kThreads), kThreads, 0, stream>>>(
      dA_log, dD, dA_part, dD_part, A_log, *d);
  return cudaGetLastError();
}

cudaError_t srt_cuda_mamba2_conv_dt_backward(float *dproj, float *const grads[3], float *dxbc,
                                             const float *ddt, const float *proj,
                                             const int64_t *seg, const float *const w[3],
                                             const m2_dims *d, cudaStream_t stream) {
  int64_t n = d->batch * d->seq;
  if (n == 0)
    return cudaSuccess;
  unsigned blocks = grid_for(n * d->conv_dim, kThreads);
  dt_backward_kernel<<<grid_for(n * d->heads, kThreads), kThreads, 0, stream>>>(
      dproj, ddt, proj, w[2], *d);
  conv_dpre_kernel<<<blocks, kThreads, 0, stream>>>(dxbc, proj, seg, w[0], w[1], *d);
  conv_grads_kernel<<<blocks, kThreads, 0, stream>>>(dproj, grads[0], grads[1], grads[2], dxbc,
                                                     proj, seg, w[0], *d);
  return cudaGetLastError();
}
