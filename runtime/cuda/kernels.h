// CUDA kernels of the GPU backend: launchers with C linkage, one per kernel,
// each enqueued on `stream` and returning cudaGetLastError() of the launch
// (cudaSuccess when the launch was accepted; execution errors surface at the
// next synchronising call). The semantics are those of the CPU kernels of
// the same name (runtime/include/shardrt/kernels.h) and of the graph ops in
// runtime/src/ops/, with the GPU backend's mixed precision (the reference's
// MixedPrecisionPolicy: param_dtype bf16, reduce_dtype fp32):
// - activations and the bf16 compute copies of parameters are srt_bf16
//   (bit pattern of __nv_bfloat16, round-to-nearest-even on conversion);
// - all arithmetic is fp32 (sums over rows or features too), every loss
//   statistic and every parameter gradient is fp32;
// - sizes are element counts (int64), layouts row-major as in kernels.h.
// Every launcher handles n == 0 and sizes past 2^31 elements. Outputs are
// WRITTEN, never accumulated: a sum over nothing writes zeros.
#ifndef SHARDRT_CUDA_KERNELS_H
#define SHARDRT_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/mamba2_math.h" // m2_dims

#ifdef __cplusplus
extern "C" {
#endif

/// bfloat16 as stored: the upper 16 bits of an IEEE fp32.
typedef uint16_t srt_bf16;

//===----------------------------------------------------------------------===//
// Conversions and elementwise ops (kernels/elementwise.cu)
//===----------------------------------------------------------------------===//

/// y[i] = bf16(x[i]) (round to nearest even; NaN stays NaN).
cudaError_t srt_cuda_cast_f32_to_bf16(srt_bf16 *y, const float *x, int64_t n,
                                      cudaStream_t stream);
/// y[i] = float(x[i]) (exact).
cudaError_t srt_cuda_cast_bf16_to_f32(float *y, const srt_bf16 *x, int64_t n,
                                      cudaStream_t stream);
/// y = a + b over n elements (fp32 sum, rounded once). y may equal a or b.
cudaError_t srt_cuda_add_bf16(srt_bf16 *y, const srt_bf16 *a, const srt_bf16 *b, int64_t n,
                              cudaStream_t stream);
cudaError_t srt_cuda_add_f32(float *y, const float *a, const float *b, int64_t n,
                             cudaStream_t stream);
/// y[t, f] = x[t, f] + bias[f]; y, x: [n, features]; bias: [features].
cudaError_t srt_cuda_bias_add(srt_bf16 *y, const srt_bf16 *x, const srt_bf16 *bias,
                              int64_t n, int64_t features, cudaStream_t stream);
/// Floats of scratch srt_cuda_column_sum needs (per-chunk partial sums).
int64_t srt_cuda_column_sum_scratch(int64_t n, int64_t features);
/// db[f] = sum over t of dy[t, f] (fp32), WRITTEN; dy: [n, features]. The
/// bias gradient of nn.linear / nn.bias_add. Deterministic (no atomics):
/// per-chunk partials in `scratch` (device, srt_cuda_column_sum_scratch
/// floats), then a sum in chunk order.
cudaError_t srt_cuda_column_sum(float *db, const srt_bf16 *dy, int64_t n, int64_t features,
                                float *scratch, cudaStream_t stream);
/// y = act(gate) * up; activation 0 = silu, 1 = gelu (tanh form), as
/// srt_cpu_glu_forward. n elements.
cudaError_t srt_cuda_glu_forward(srt_bf16 *y, const srt_bf16 *gate, const srt_bf16 *up,
                                 int64_t n, int activation, cudaStream_t stream);
/// dgate = dy * up * act'(gate), dup = dy * act(gate) (srt_cpu_glu_backward).
cudaError_t srt_cuda_glu_backward(srt_bf16 *dgate, srt_bf16 *dup, const srt_bf16 *dy,
                                  const srt_bf16 *gate, const srt_bf16 *up, int64_t n,
                                  int activation, cudaStream_t stream);
/// y = max(x, 0)^2 and dx = dy * 2 max(x, 0) (NemotronH's relu2).
cudaError_t srt_cuda_relu2_forward(srt_bf16 *y, const srt_bf16 *x, int64_t n,
                                   cudaStream_t stream);
cudaError_t srt_cuda_relu2_backward(srt_bf16 *dx, const srt_bf16 *dy, const srt_bf16 *x,
                                    int64_t n, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Embedding (kernels/embedding.cu)
//===----------------------------------------------------------------------===//

/// y[t, :] = scale * w[ids[t] - vocab_start, :] for ids in
/// [vocab_start, vocab_start + local_vocab), else 0. y: [n, hidden];
/// w: [local_vocab, hidden].
cudaError_t srt_cuda_embedding_forward(srt_bf16 *y, const int64_t *ids, const srt_bf16 *w,
                                       int64_t n, int64_t hidden, int64_t vocab_start,
                                       int64_t local_vocab, float scale,
                                       cudaStream_t stream);
/// dw[ids[t] - vocab_start, :] = sum over tokens t hitting that row of
/// scale * dy[t, :] (fp32), WRITTEN: rows no token hits are zero.
/// dw: [local_vocab, hidden] fp32; dy: [n, hidden].
cudaError_t srt_cuda_embedding_backward(float *dw, const srt_bf16 *dy, const int64_t *ids,
                                        int64_t n, int64_t hidden, int64_t vocab_start,
                                        int64_t local_vocab, float scale, int64_t padding_idx,
                                        cudaStream_t stream);

//===----------------------------------------------------------------------===//
// RMSNorm (kernels/rms_norm.cu)
//===----------------------------------------------------------------------===//

/// y = (offset + w) * x / sqrt(mean(x^2) + eps) over groups of `group`
/// consecutive features (group = features for a plain norm, head_dim for
/// q_norm/k_norm). y, x: [n, features]; w: [group].
cudaError_t srt_cuda_rms_norm_forward(srt_bf16 *y, const srt_bf16 *x, const srt_bf16 *w,
                                      int64_t n, int64_t features, int64_t group, float eps,
                                      float offset, cudaStream_t stream);
/// The residual add and the norm of its result in one pass: sum = a + b
/// (bf16, as srt_cuda_add_bf16) and y = srt_cuda_rms_norm_forward(sum):
/// the same values as the two launches. sum, y, a, b: [n, features]; no
/// two of them may overlap.
cudaError_t srt_cuda_add_rms_norm_forward(srt_bf16 *sum, srt_bf16 *y, const srt_bf16 *a,
                                          const srt_bf16 *b, const srt_bf16 *w, int64_t n,
                                          int64_t features, int64_t group, float eps,
                                          float offset, cudaStream_t stream);
/// dx of srt_cpu_rms_norm_backward (1/rms recomputed from x).
cudaError_t srt_cuda_rms_norm_backward_input(srt_bf16 *dx, const srt_bf16 *x,
                                             const srt_bf16 *w, const srt_bf16 *dy,
                                             int64_t n, int64_t features, int64_t group,
                                             float eps, float offset, cudaStream_t stream);
/// Floats of scratch srt_cuda_rms_norm_backward_weight needs.
int64_t srt_cuda_rms_norm_backward_weight_scratch(int64_t n, int64_t features,
                                                  int64_t group);
/// dw[j] = sum over every group of every row of dy_j x_j / rms (fp32),
/// WRITTEN; dw: [group]. Deterministic: per-block partials in `scratch`
/// (device, srt_cuda_rms_norm_backward_weight_scratch floats), then a sum.
cudaError_t srt_cuda_rms_norm_backward_weight(float *dw, const srt_bf16 *x,
                                              const srt_bf16 *dy, int64_t n,
                                              int64_t features, int64_t group, float eps,
                                              float *scratch, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Rotary embedding (kernels/rotary.cu)
//===----------------------------------------------------------------------===//

/// cos/sin [batch, seq, head_dim] (fp32) for the positions position_ids
/// [batch, seq] (int64, on the device), or 0..seq-1 when NULL:
/// angle = (float)pos * inv_freq[i mod head_dim/2] rounded to fp32, as
/// srt_cpu_rotary_embedding_forward. inv_freq: [head_dim / 2] on the device
/// (from srt_cpu_rotary_inv_freq).
cudaError_t srt_cuda_rotary_tables(float *cos, float *sin, const float *inv_freq,
                                   const int64_t *position_ids, int64_t batch, int64_t seq,
                                   int64_t head_dim, cudaStream_t stream);
/// RoPE on every head (rotate-half), as srt_cpu_apply_rotary_forward;
/// y, x: [batch, seq, heads * head_dim]; cos, sin: [batch, seq, head_dim].
cudaError_t srt_cuda_apply_rotary_forward(srt_bf16 *y, const srt_bf16 *x, const float *cos,
                                          const float *sin, int64_t batch, int64_t seq,
                                          int64_t heads, int64_t head_dim,
                                          cudaStream_t stream);
/// The transpose rotation (srt_cpu_apply_rotary_backward).
cudaError_t srt_cuda_apply_rotary_backward(srt_bf16 *dx, const srt_bf16 *dy, const float *cos,
                                           const float *sin, int64_t batch, int64_t seq,
                                           int64_t heads, int64_t head_dim,
                                           cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Attention, our own kernel (kernels/attention.cu): the fallback for what
// cuDNN's fused SDPA refuses
//===----------------------------------------------------------------------===//

/// One attention call. Local query head i (0 <= i < heads) is global head
/// g = q_head_offset + i; it reads local KV head g / (global_heads /
/// kv_heads) (Hugging Face repeat_kv; q_head_offset 0 and global_heads =
/// heads when the KV heads are sharded like the query heads).
typedef struct srt_cuda_attention_shape {
  int64_t batch, seq, heads, kv_heads, head_dim;
  int64_t q_head_offset, global_heads;
  int causal;             // key j visible from query i only when j <= i
  int64_t sliding_window; // 0: none; W: |i - j| < W (causal: i - j < W)
  float scale;            // multiplies q.k
  float softcap;          // 0: none; c: logits = c tanh(scale q.k / c)
  int64_t cp_size;        // 0 or 1: queries are the seq tokens; N > 1: a
                          // context-parallel rank's seq / N (its chunks
                          // cp_rank and 2N - 1 - cp_rank of seq / (2N)), as
                          // srt_attention_config's; 2N divides seq
  int64_t cp_rank;        // in [0, cp_size)
} srt_cuda_attention_shape;

/// out = softmax(mask(softcap(scale q k^T))) v, fp32 online softmax;
/// lse [batch, heads, sq] fp32 WRITTEN with each query's log-sum-exp.
/// q, out: [batch, sq, heads * hd]; k, v: [batch, seq, kv_heads * hd];
/// sq = seq, or seq / cp_size under context parallelism (masks on global
/// positions; k, v, segment_ids the whole sequence in global order).
/// segment_ids: [batch, seq] on the device (packed documents, as
/// srt_cpu_attention_forward's; a document is a run of equal ids, and ids
/// do not repeat in non-adjacent runs of a row) or NULL: a key of another
/// document is masked, and the tiles of other documents are never visited
/// (cost ~ the sum of squared document lengths); a padding query (-1) gets
/// out 0 and lse -inf.
/// head_dim <= 256.
cudaError_t srt_cuda_attention_forward(srt_bf16 *out, float *lse, const srt_bf16 *q,
                                       const srt_bf16 *k, const srt_bf16 *v,
                                       const int64_t *segment_ids,
                                       const srt_cuda_attention_shape *shape,
                                       cudaStream_t stream);
/// dq, dk, dv (all WRITTEN; a KV head's gradient sums over the LOCAL query
/// heads that read it) from dout, the inputs, the forward's out and lse.
/// delta: [batch, heads, sq] fp32 scratch (rowsum(dout * out)); dq, dout,
/// out: [batch, sq, heads * hd]; dk, dv: all seq keys (under cp this
/// rank's share, which the ranks' dk/dv sum to).
/// segment_ids: as the forward's. Deterministic (no atomics).
cudaError_t srt_cuda_attention_backward(srt_bf16 *dq, srt_bf16 *dk, srt_bf16 *dv,
                                        const srt_bf16 *dout, const srt_bf16 *q,
                                        const srt_bf16 *k, const srt_bf16 *v,
                                        const srt_bf16 *out, const float *lse, float *delta,
                                        const int64_t *segment_ids,
                                        const srt_cuda_attention_shape *shape,
                                        cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Cross-entropy phases (kernels/cross_entropy.cu), vocabulary-parallel as
// srt_cpu_cross_entropy_*: rows r = b * seq + s of [batch, seq, local_vocab]
// logits; with shift, row r is scored against labels[r + 1] and the last
// position of every sequence is not scored.
//===----------------------------------------------------------------------===//

typedef struct srt_cuda_ce_shape {
  int64_t batch, seq;
  int64_t vocab;       // full vocabulary (labels must lie in [0, vocab))
  int64_t vocab_start; // this rank's first row of the vocabulary
  int64_t local_vocab;
  int64_t ignore_index;
  int shift;
} srt_cuda_ce_shape;

/// max[r] = max over the local vocabulary of logits[r, :] (fp32 [rows]).
cudaError_t srt_cuda_ce_logit_max(float *max, const srt_bf16 *logits, int64_t rows,
                                  int64_t local_vocab, cudaStream_t stream);
/// sum_exp[r] = sum_v exp(logits[r, v] - max[r]) over the local vocabulary;
/// target[r] = the logit of row r's label when this rank owns it, else 0.
/// A scored label outside [0, vocab) that is not ignore_index sets
/// bad_label[0] = r + 1 and bad_label[1] = the label (first writer wins,
/// device int64[2], zeroed by the caller) instead of being read.
cudaError_t srt_cuda_ce_partial_sums(float *sum_exp, float *target, const srt_bf16 *logits,
                                     const int64_t *labels, const float *max,
                                     const srt_cuda_ce_shape *shape, int64_t *bad_label,
                                     cudaStream_t stream);
/// sum_and_count[0] = sum over scored rows of max + log(sum_exp) - target
/// (accumulated in double), sum_and_count[1] = the number of scored rows.
cudaError_t srt_cuda_ce_loss_sum(float *sum_and_count, const float *max,
                                 const float *sum_exp, const float *target,
                                 const int64_t *labels, const srt_cuda_ce_shape *shape,
                                 cudaStream_t stream);
/// loss[0] = sum / count, or 0 when count is 0.
cudaError_t srt_cuda_ce_mean(float *loss, const float *sum_and_count, cudaStream_t stream);
/// dlogits[r, v] = (exp(logits[r, v] - lse[r]) - [v is r's label]) / count
/// for scored rows (count = sum_and_count[1], read on the device), 0 for
/// rows not scored; lse = max + log(sum_exp).
/// dlogits may equal logits (in place: each element is read before written).
cudaError_t srt_cuda_ce_logits_grad(srt_bf16 *dlogits, const srt_bf16 *logits,
                                    const int64_t *labels, const float *max,
                                    const float *sum_exp, const float *sum_and_count,
                                    const srt_cuda_ce_shape *shape, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Optimizer (kernels/optimizer.cu): every parameter in one launch
//===----------------------------------------------------------------------===//

/// One parameter as the multi-tensor kernels see it (device pointers).
/// `start` is the sum of numel over the slots before it (the table is
/// sorted by start, the first is 0).
typedef struct srt_cuda_param_slot {
  float *param, *grad, *m, *v; // fp32 master weights, gradient, AdamW moments
  srt_bf16 *compute;           // the bf16 copy the step's ops read
  int64_t numel, start;
  int32_t counted; // 1: this rank adds the gradient to the norm (srt_get_grad_norm's rule)
  int32_t pad;
} srt_cuda_param_slot;

/// Pairs of per-block partials srt_cuda_grad_norm_partial needs.
#define SRT_CUDA_NORM_PARTIALS 1024

/// One pass over every gradient of the `counted` slots: out[0] = sum |g|^p
/// (norm_type p finite) or max |g| (norm_type INFINITY) over the non-NaN
/// elements, in double; out[1] = 1 if any counted element is NaN (then
/// out[0] = 0: the pair srt_get_grad_norm sends), else 0. out: device
/// double[2], WRITTEN (zeros when there is no element). slots: device table
/// of n_slots; total: sum of numel; partials: device scratch of
/// 2 * SRT_CUDA_NORM_PARTIALS doubles.
cudaError_t srt_cuda_grad_norm_partial(double *out, const srt_cuda_param_slot *slots,
                                       int32_t n_slots, int64_t total, double norm_type,
                                       double *partials, cudaStream_t stream);

/// AdamW hyper-parameters of one step, with the step's clipping factor.
typedef struct srt_cuda_adamw_args {
  int64_t step; // 1-based
  float lr, beta1, beta2, eps, weight_decay;
  float clip_coef; // gradients are multiplied by it as read when < 1 (the buffer is not written)
} srt_cuda_adamw_args;

/// srt_cpu_adamw_step on every slot in one launch (same order of fp32
/// operations), then compute = bf16(param).
cudaError_t srt_cuda_adamw(const srt_cuda_param_slot *slots, int32_t n_slots, int64_t total,
                           srt_cuda_adamw_args args, cudaStream_t stream);

/// compute = bf16(param) for every slot in one launch (after loading).
cudaError_t srt_cuda_refresh_compute(const srt_cuda_param_slot *slots, int32_t n_slots,
                                     int64_t total, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// The Mamba2 mixer (kernels/mamba2.cu; the math in kernels/mamba2_math.h)
//===----------------------------------------------------------------------===//
// Intermediates are fp32, laid out as runtime/cpu/mamba2.c's: proj [n,
// proj] (in_proj's output, z | xBC | dt), xbc [n, conv_dim], dt [n, heads],
// y [n, inner]; seg: the int64 segment ids [batch, seq] or NULL (one
// document per row). Weights: the fp32 values of the bf16 compute copies.

/// xbc = SiLU(causal conv1d of proj's xBC columns), dt = clamp(softplus(
/// proj's dt columns + dt_bias)), then the scan's y; w: conv_w [conv_dim,
/// conv_kernel], conv_b [conv_dim], dt_bias, A_log, D [heads].
cudaError_t srt_cuda_mamba2_forward_inner(float *xbc, float *dt, float *y, const float *proj,
                                          const int64_t *seg, const float *const w[5],
                                          const m2_dims *d, cudaStream_t stream);
/// normed (bf16) = the gated group RMSNorm of y * silu(proj's z columns)
/// times norm_w [inner]; rstd [n, groups] (1/rms per row group) or NULL.
cudaError_t srt_cuda_mamba2_norm_forward(srt_bf16 *normed, float *rstd, const float *y,
                                         const float *proj, const float *norm_w,
                                         const m2_dims *d, cudaStream_t stream);
/// From dnormed [n, inner]: dy [n, inner], dproj's z columns and dnorm_w
/// [inner] (WRITTEN); rstd: the forward's.
cudaError_t srt_cuda_mamba2_norm_backward(float *dy, float *dproj, float *dnorm_w,
                                          const float *dnormed, const float *rstd,
                                          const float *y, const float *proj,
                                          const float *norm_w, const m2_dims *d,
                                          cudaStream_t stream);
/// Floats of scratch srt_cuda_mamba2_scan_backward needs: per-head B/C
/// gradients and dS of one batch row, the per-row dA and dD.
int64_t srt_cuda_mamba2_scan_backward_scratch(const m2_dims *d);
/// The scan's gradient from dy: dxbc [n, conv_dim] (every column), ddt [n,
/// heads], dA_log and dD [heads], all WRITTEN.
cudaError_t srt_cuda_mamba2_scan_backward(float *dxbc, float *ddt, float *dA_log, float *dD,
                                          const float *dy, const float *xbc, const float *dt,
                                          const int64_t *seg, const float *A_log,
                                          const float *D, float *scratch, const m2_dims *d,
                                          cudaStream_t stream);
/// dt's and the conv's gradients: dproj's dt and xBC columns, grads =
/// {dconv_w, dconv_b, ddt_bias} (WRITTEN); dxbc (the scan's) becomes the
/// pre-activation's gradient; w = {conv_w, conv_b, dt_bias}.
cudaError_t srt_cuda_mamba2_conv_dt_backward(float *dproj, float *const grads[3], float *dxbc,
                                             const float *ddt, const float *proj,
                                             const int64_t *seg, const float *const w[3],
                                             const m2_dims *d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif // SHARDRT_CUDA_KERNELS_H
