// Backend-neutral facts of the runtime ops (shardrt/ops.h) that a compiler
// needs without linking or including a backend's kernels: the sizes of a
// Mamba2 mixer, the scratch formulas of the cpu kernels, the cuda Mamba2
// ops' scratch and the attention's context-parallel scratch (header-only, so
// that the compiler's memory report counts what the kernels will allocate). shardrt/kernels.h
// includes it; passes/ include this one instead.
#ifndef SHARDRT_OP_FACTS_H
#define SHARDRT_OP_FACTS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Groups (rows) per block of srt_cpu_rms_norm_backward's weight-gradient
/// partial sums: fixed, so the order of the sums does not depend on the
/// thread count.
enum { SRT_RMS_NORM_ROW_BLOCK = 64 };

/// Floats of workspace srt_cpu_rms_norm_backward needs for dweight:
/// ceil(n * features / group / 64) * group (group 0: the whole features);
/// 0 for empty shapes. Inline: the compiler's memory report counts it.
static inline int64_t srt_cpu_rms_norm_backward_workspace_floats(int64_t n, int64_t features,
                                                                 int64_t group) {
  int64_t g = group > 0 ? group : features;
  if (g <= 0 || n <= 0)
    return 0;
  int64_t rows = n * (features / g);
  return (rows + SRT_RMS_NORM_ROW_BLOCK - 1) / SRT_RMS_NORM_ROW_BLOCK * g;
}

/// The sizes of a Mamba2 mixer (Hugging Face NemotronHMamba2Mixer; Dao & Gu
/// 2024, "Transformers are SSMs", the SSD algorithm). inner = heads x
/// head_dim, conv_dim = inner + 2 groups x state, proj = inner + conv_dim +
/// heads.
typedef struct srt_mamba2_config {
  int64_t batch, seq, hidden;
  int64_t heads, head_dim, groups, state; ///< groups divides heads
  int64_t conv_kernel, chunk;             ///< chunk: the SSD chunk length
  float eps;                              ///< of the gated RMSNorm
  float dt_min, dt_max; ///< dt = clamp(softplus(.), dt_min, dt_max); max may be +inf
} srt_mamba2_config;

/// The parts of the Mamba2 kernels' scratch, in floats, in the order the
/// kernels lay them out: the forward's [n, proj], [n, conv_dim], [n, heads],
/// [n, inner] twice; the backward's chunk states [batch, heads, chunks,
/// head_dim, state] and its gradients [n, proj], [n, conv_dim], [n, heads],
/// [n, inner] twice, [n, groups], [batch, heads] twice; last, `threads`
/// tiles of 2 L + 3 L^2 + 4 L P + 3 L N + P N (L the chunk, or seq when
/// shorter; P head_dim, N state). Header-only so that the compiler's memory report counts what the
/// kernels use. Returns the total (0 sizes where a part is unused), or -1
/// when a size is not positive.
enum { SRT_MAMBA2_WORKSPACE_PARTS = 15 };
static inline double srt_mamba2_workspace_parts(const srt_mamba2_config *c, bool backward,
                                                int threads,
                                                double count[SRT_MAMBA2_WORKSPACE_PARTS]) {
  if (c->batch <= 0 || c->seq <= 0 || c->heads <= 0 || c->head_dim <= 0 || c->groups <= 0 ||
      c->state <= 0 || c->chunk <= 0 || threads <= 0)
    return -1;
  double n = (double)c->batch * (double)c->seq, bh = (double)c->batch * (double)c->heads;
  double inner = (double)c->heads * (double)c->head_dim;
  double conv = inner + 2.0 * (double)c->groups * (double)c->state;
  double proj = inner + conv + (double)c->heads;
  int64_t tile = c->chunk < c->seq ? c->chunk : c->seq; // a chunk past the sequence is cut
  double chunks = (double)((c->seq + tile - 1) / tile);
  double L = (double)tile, P = (double)c->head_dim, N = (double)c->state;
  const double parts[SRT_MAMBA2_WORKSPACE_PARTS] = {
      n * proj, n * conv, n * (double)c->heads, n * inner, n * inner,
      backward ? bh * chunks * P * N : 0, backward ? n * proj : 0, backward ? n * conv : 0,
      backward ? n * (double)c->heads : 0, backward ? n * inner : 0, backward ? n * inner : 0,
      backward ? n * (double)c->groups : 0, backward ? bh : 0, backward ? bh : 0,
      (double)threads * (2 * L + 3 * L * L + 4 * L * P + 3 * L * N + P * N)};
  double total = 0;
  for (int i = 0; i < SRT_MAMBA2_WORKSPACE_PARTS; ++i)
    total += count[i] = parts[i];
  return total;
}

/// The parts of the cuda Mamba2 ops' device scratch (runtime/cuda/
/// ops_mamba2.c carves it in this order), in floats, each rounded up to 64
/// (256 bytes, the GEMM operands' alignment): fp32 copies of conv_w
/// [conv_dim, conv_kernel], conv_b [conv_dim], dt_bias, A_log, D [heads]
/// and norm_w [inner]; proj [n, proj], xbc [n, conv_dim], dt [n, heads], y
/// [n, inner], rstd [n, groups] and normed (bf16 [n, inner]); the
/// backward's dnormed and dy [n, inner], dproj [n, proj], dxbc [n,
/// conv_dim], ddt [n, heads], the scan's (srt_cuda_mamba2_scan_backward's:
/// seq x heads x (2 state + 1) + 2 batch x heads) and dproj in bf16; n =
/// batch x seq. Parts the forward does not use count 0. Returns the total
/// floats. Header-only: the compiler's memory report counts it.
enum { SRT_CUDA_MAMBA2_SCRATCH_PARTS = 19 };
static inline int64_t srt_cuda_mamba2_scratch_parts(
    const srt_mamba2_config *c, bool backward, int64_t count[SRT_CUDA_MAMBA2_SCRATCH_PARTS]) {
  int64_t n = c->batch * c->seq, inner = c->heads * c->head_dim;
  int64_t conv = inner + 2 * c->groups * c->state, proj = inner + conv + c->heads;
  int64_t b = backward ? 1 : 0;
  const int64_t parts[SRT_CUDA_MAMBA2_SCRATCH_PARTS] = {
      conv * c->conv_kernel, conv, c->heads, c->heads, c->heads, inner,
      n * proj, n * conv, n * c->heads, n * inner, n * c->groups, (n * inner + 1) / 2,
      b * n * inner, b * n * inner, b * n * proj, b * n * conv, b * n * c->heads,
      b * (c->seq * c->heads * (2 * c->state + 1) + 2 * c->batch * c->heads),
      b * ((n * proj + 1) / 2)};
  int64_t total = 0;
  for (int i = 0; i < SRT_CUDA_MAMBA2_SCRATCH_PARTS; ++i)
    total += count[i] = (parts[i] + 63) / 64 * 64;
  return total;
}

/// Bytes of scratch the attention op (forward, or `backward`) takes under
/// context parallelism (cp > 1; 0 otherwise) for the whole sequence's K/V,
/// all-gathered over cp (shardrt/ops.h's srt_op_attention_config): batch
/// rows of seq = local_seq x cp tokens, kv_row = KV heads x head_dim
/// elements per token. The cpu backend (fp32, runtime/cpu/ops_attention.c):
/// the gathered k and v, one staging buffer, the backward's dk and dv, all
/// [batch, seq, kv_row], and the gathered segment ids (int64 [batch, seq]).
/// The cuda backend (bf16, runtime/cuda/ops_attention.c): the gathered k
/// and v, one staging buffer (at least the ids' size with segments; the
/// backward's token-order dk after the gathers), the backward's dv, and the
/// segment ids, each part then rounded up to 256 bytes. Neither counts the
/// kernels' own workspace. Header-only: the compiler's memory report counts
/// it.
static inline int64_t srt_attention_cp_scratch_bytes(int64_t batch, int64_t local_seq,
                                                     int64_t cp, int64_t kv_row,
                                                     bool segments, bool backward,
                                                     bool cuda) {
  if (cp <= 1)
    return 0;
  int64_t tokens = batch * local_seq * cp, ids = segments ? 8 * tokens : 0;
  if (!cuda)
    return (3 + (backward ? 2 : 0)) * 4 * tokens * kv_row + ids;
  int64_t kv = (2 * tokens * kv_row + 255) / 256 * 256;
  int64_t staging = ids > kv ? (ids + 255) / 256 * 256 : kv;
  return (2 + (backward ? 1 : 0)) * kv + staging + (ids + 255) / 256 * 256;
}

#ifdef __cplusplus
}
#endif

#endif // SHARDRT_OP_FACTS_H
