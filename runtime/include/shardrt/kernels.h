// CPU kernels of libshardrt: one fp32 forward and backward per `nn` op
// (dialects/nn.irdl.mlir), plain float pointers and explicit sizes, row-major.
//
// Conventions shared by every kernel here (they are the `nn` dialect's):
// - activations are [B, S, F] contiguous; a kernel that treats every token
//   alike takes `n` = B * S rows (or `n` elements for elementwise ops);
// - attention activations keep heads folded in the last dim: q and out are
//   [B, S, H * hd], k and v are [B, S, KV * hd];
// - linear weights are [out, in] (torch.nn.Linear): y = x W^T + b;
// - backward kernels ACCUMULATE (+=) into parameter gradients and WRITE (=)
//   input gradients, unless the doc comment says otherwise;
// - pointers named by the caller are not retained; no kernel allocates
//   memory: scratch space is passed in, sized by the documented formula;
// - no kernel keeps state between calls; kernels are reentrant.
// Kernels whose only failure is a violated precondition return void; the
// others return srt_status (NULL = OK). Sizes are element counts.
#ifndef SHARDRT_KERNELS_H
#define SHARDRT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardrt/op_facts.h" // srt_mamba2_config, workspace formulas
#include "shardrt/status.h"
#include "shardrt/types.h"

#ifdef __cplusplus
extern "C" {
#endif

//===----------------------------------------------------------------------===//
// gemm and threads (runtime/cpu/gemm.c, runtime/cpu/threads.c)
//===----------------------------------------------------------------------===//

/// C = alpha op(A) op(B) + beta C in fp32, row-major (BLAS sgemm semantics):
/// op(A) [m, k], op(B) [k, n], C [m, n]; op(X) = X^T when trans_x; lda, ldb,
/// ldc are row strides in elements (>= the stored row length). Through
/// oneDNN, which dispatches on the CPU's feature bits and runs on the
/// kernels' OpenMP threads (srt_cpu_set_threads): its matmul primitive
/// (created once per shape and layout, cached) for products of at least 128^3
/// multiply-adds with alpha 1 and beta 0 or 1, dnnl_sgemm otherwise; called
/// from inside an OpenMP parallel region it is always dnnl_sgemm on the
/// calling thread only. beta = 0 ignores C's old contents (NaN included).
/// Errors: SRT_INVALID_ARGUMENT for a negative size or a stride oneDNN
/// refuses (the message names the entry point, sizes and strides).
srt_status srt_cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                        int64_t k, float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc);

/// C = op(A) op(B) + beta C with A and B bf16 (raw bits, row-major as for
/// srt_cpu_gemm) and C fp32, accumulated in fp32: oneDNN's bf16 matmul
/// primitive (its avx512_core_bf16 or AMX kernels where the CPU has them),
/// cached as srt_cpu_gemm's. beta is 0 or 1. *used is false, nothing
/// written, where that primitive does not apply (an empty size, a product
/// under 128^3 multiply-adds, a call inside an OpenMP parallel region, or
/// oneDNN making none for this CPU): the caller then computes the product
/// another way. Errors: SRT_INVALID_ARGUMENT when oneDNN refuses to run it.
srt_status srt_cpu_gemm_bf16(bool *used, bool trans_a, bool trans_b, int64_t m, int64_t n,
                             int64_t k, const uint16_t *a, int64_t lda, const uint16_t *b,
                             int64_t ldb, float beta, float *c, int64_t ldc);

/// C = op(A) op(B) as srt_cpu_gemm_bf16 (beta 0) with C bf16 too: oneDNN
/// accumulates in fp32 and rounds each element of C once to nearest even
/// (the values of srt_cpu_gemm_bf16's fp32 C rounded, except that its bf16
/// instructions flush results below 2^-126 to zero). *used and errors as
/// srt_cpu_gemm_bf16.
srt_status srt_cpu_gemm_bf16_out(bool *used, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                 int64_t k, const uint16_t *a, int64_t lda, const uint16_t *b,
                                 int64_t ldb, uint16_t *c, int64_t ldc);

/// Writes the GEMM library, its version and the widest instruction set it
/// dispatches to on this CPU (fp32 GEMMs use its fp32 part: AVX-512 on
/// avx512_core_amx), e.g. "oneDNN 2.6.3 matmul and sgemm, widest isa
/// avx512_core_amx", into buf (NUL-terminated, truncated to size).
void srt_cpu_gemm_library(char *buf, size_t size);

/// Sets the threads every cpu kernel (GEMMs included) uses from now on in this
/// process, the OpenMP pool's size, to `threads` (< 1 means 1) or the team
/// OpenMP grants, whichever is smaller, and returns that count. oneDNN assumes
/// every parallel region gets omp_get_max_threads() threads, so this turns
/// dynamic adjustment off (OMP_DYNAMIC), allows one active level when
/// OMP_MAX_ACTIVE_LEVELS is 0, caps the count at OMP_THREAD_LIMIT and measures
/// the team a region then gets. Call it from the thread that runs the kernels,
/// outside any parallel region. Results of every kernel except the GEMMs are
/// bit-identical for any count.
int srt_cpu_set_threads(int threads);

/// Fixes the pool as srt_cpu_set_threads(omp_get_max_threads()) would, once
/// per process and only outside a parallel region, unless
/// srt_cpu_set_threads already ran: the kernels call it so that a program
/// that never sets the threads still gets the team every GEMM assumes.
void srt_cpu_fix_threads(void);

/// The threads the cpu kernels use (omp_get_max_threads, after
/// srt_cpu_fix_threads).
int srt_cpu_threads(void);

//===----------------------------------------------------------------------===//
// embedding (runtime/cpu/embedding.c)
//===----------------------------------------------------------------------===//

/// Token embedding with a local vocabulary range (vocabulary-parallel
/// embedding, torch's RowwiseParallel on nn.Embedding):
///   out[t, :] = scale * weight[ids[t] - vocab_start, :]
///                 if vocab_start <= ids[t] < vocab_start + local_vocab,
///   out[t, :] = 0 otherwise (another rank owns the row; the all-reduce of
///                 the Partial result assembles the full embedding).
/// out: [n, hidden]; ids: [n] (int64, any values); weight: [local_vocab, hidden].
/// scale: 1.0f, or Gemma's sqrt(hidden) rounded to the weight dtype.
/// Preconditions: n, hidden, local_vocab >= 0; out does not overlap weight.
void srt_cpu_embedding_forward(float *out, const int64_t *ids,
                               const float *weight, int64_t n, int64_t hidden,
                               int64_t vocab_start, int64_t local_vocab,
                               float scale);

/// Gradient of srt_cpu_embedding_forward with respect to the weight:
///   dweight[ids[t] - vocab_start, :] += scale * dout[t, :]  (ids in range,
///                                       and ids[t] != padding_idx).
/// ACCUMULATES into dweight [local_vocab, hidden]; dout: [n, hidden]. Rows hit
/// by several tokens receive the sum of their gradients, in token order.
/// ids have no gradient. padding_idx (a global id, -1: none) is torch
/// nn.Embedding's: its lookups give its row no gradient. Threaded over column
/// blocks: the same bytes for any thread count.
void srt_cpu_embedding_backward(float *dweight, const float *dout,
                                const int64_t *ids, int64_t n, int64_t hidden,
                                int64_t vocab_start, int64_t local_vocab,
                                float scale, int64_t padding_idx);

//===----------------------------------------------------------------------===//
// linear (runtime/cpu/linear.c)
//===----------------------------------------------------------------------===//

/// y = x W^T (+ b), torch.nn.Linear, through one srt_cpu_gemm.
/// y: [n, out]; x: [n, in]; weight: [out, in]; bias: [out] or NULL.
/// Errors: SRT_INVALID_ARGUMENT when a size is negative or an operand would
/// pass 2^63 bytes.
srt_status srt_cpu_linear_forward(float *y, const float *x, const float *weight,
                                  const float *bias, int64_t n, int64_t in,
                                  int64_t out);

/// Gradients of srt_cpu_linear_forward given dy [n, out]:
///   dx  = dy W            [n, in]   WRITTEN (skipped when dx is NULL);
///   dw += dy^T x          [out, in] ACCUMULATED (skipped when NULL);
///   db += sum_t dy[t, :]  [out]     ACCUMULATED (skipped when NULL).
/// Errors: as srt_cpu_linear_forward.
srt_status srt_cpu_linear_backward(float *dx, float *dweight, float *dbias,
                                   const float *dy, const float *x,
                                   const float *weight, int64_t n, int64_t in,
                                   int64_t out);

/// dw = dy^T x [out, in], WRITTEN (no zeroing pass, no read of dw) from
/// dy [n, out] and x [n, in]: the weight gradient of one use of a weight,
/// through one srt_cpu_gemm with beta 0 (n = 0 gives zeros).
/// Errors: as srt_cpu_linear_forward.
srt_status srt_cpu_linear_grad_weight(float *dweight, const float *dy, const float *x,
                                      int64_t n, int64_t in, int64_t out);

//===----------------------------------------------------------------------===//
// rms_norm (runtime/cpu/rms_norm.c)
//===----------------------------------------------------------------------===//

/// RMSNorm in fp32 (Hugging Face LlamaRMSNorm / Gemma3RMSNorm):
///   y = (offset + w) * x / sqrt(mean(x^2) + eps)
/// where the mean runs over groups of `group` consecutive elements of the
/// last dim: group = features for a plain norm, group = head_dim for the
/// per-head q_norm/k_norm of Qwen3/Gemma3 on [B, S, heads * head_dim]
/// (group = 0 means features).
/// y, x: [n, features]; weight: [group]; offset: 0.0f, or 1.0f for Gemma's
/// (1 + w). Sums of squares accumulate in double. y may equal x (in place).
/// Preconditions: group divides features; eps > 0 or no all-zero group.
void srt_cpu_rms_norm_forward(float *y, const float *x, const float *weight,
                              int64_t n, int64_t features, int64_t group,
                              float eps, float offset);

/// srt_cpu_rms_norm_forward of `rows` groups of g elements (x, y: [rows,
/// g]; weight: [g]) on the calling thread: the same bytes per row. For the
/// tiles of a caller that splits the rows over threads itself (the bf16
/// backend, runtime/cpu/bf16_rows.h).
void srt_cpu_rms_norm_forward_serial(float *y, const float *x, const float *weight,
                                     int64_t rows, int64_t g, float eps, float offset);

/// The residual add and the norm of its result in one pass over each row
/// (the decoder's `hidden = residual + h; y = norm(hidden)`):
///   sum = a + b (WRITTEN, [n, features]); y = srt_cpu_rms_norm_forward(sum)
/// with the same bytes as srt_cpu_add_forward then srt_cpu_rms_norm_forward.
/// sum may equal a or b, and y may equal a or b (rows are read before
/// written); y must not equal sum.
void srt_cpu_add_rms_norm_forward(float *sum, float *y, const float *a, const float *b,
                                  const float *weight, int64_t n, int64_t features,
                                  int64_t group, float eps, float offset);

/// Gradients of srt_cpu_rms_norm_forward given dy (same shape as x). With
/// r = 1/sqrt(mean(x^2) + eps) per group and g = offset + w:
///   dx_i  = r g_i dy_i - r^3 x_i / group * sum_j g_j dy_j x_j   WRITTEN
///   dw_j += sum over groups of dy_j x_j r                       ACCUMULATED
/// The 1/rms is recomputed from x (no saved statistics). dx or dweight may be
/// NULL to skip it. dx must not alias x or dy. workspace:
/// srt_cpu_rms_norm_backward_workspace_floats(n, features, group) floats
/// (the weight gradient's partial sums per block of 64 groups) when dweight
/// is set, else unused (may be NULL). One pass over x and dy, threaded over
/// the blocks; the partials are summed in block order: the same bytes for
/// any thread count.
void srt_cpu_rms_norm_backward(float *dx, float *dweight, const float *dy,
                               const float *x, const float *weight, int64_t n,
                               int64_t features, int64_t group, float eps,
                               float offset, float *workspace);

/// srt_cpu_rms_norm_backward's dx alone over `rows` groups of g elements
/// (dx, dy, x: [rows, g]; weight: [g]) on the calling thread; same bytes.
void srt_cpu_rms_norm_backward_serial(float *dx, const float *dy, const float *x,
                                      const float *weight, int64_t rows, int64_t g, float eps,
                                      float offset);

/// One block of srt_cpu_rms_norm_backward's weight gradient on the calling
/// thread: partial[g] WRITTEN = sum over the rows (in order) of dy x r, for
/// `rows` groups of g elements (dy, x: [rows, g]). srt_cpu_rms_norm_backward
/// sums these partials of its blocks of SRT_RMS_NORM_ROW_BLOCK rows in
/// block order into dweight.
void srt_cpu_rms_norm_weight_grad_block(float *partial, const float *dy, const float *x,
                                        int64_t rows, int64_t g, float eps);


//===----------------------------------------------------------------------===//
// rotary (runtime/cpu/rotary.c)
//===----------------------------------------------------------------------===//


/// RoPE frequency scaling; rope_type "default" is no scaling (pass NULL).
/// The codes of nn.rotary_embedding's "rope_type" in the order ops.def's
/// ATTR_CODE lists them.
typedef enum srt_rope_type {
  SRT_ROPE_DEFAULT,
  SRT_ROPE_LLAMA3,
  SRT_ROPE_LINEAR,
  SRT_ROPE_TYPE_COUNT
} srt_rope_type;

/// Rotary-embedding parameters (Hugging Face config names).
typedef struct srt_rope_config {
  int64_t head_dim;     ///< rotated dims per head; even
  double theta;         ///< rope_theta (base), > 0
  srt_rope_type type;   ///< default, llama3 or linear
  // llama3 and linear (rope_scaling / rope_parameters):
  double factor;                            ///< e.g. 8 (Llama 3.1, Gemma 3 4B), 32 (3.2)
  // llama3 only:
  double low_freq_factor;                   ///< e.g. 1
  double high_freq_factor;                  ///< e.g. 4; > low_freq_factor
  double original_max_position_embeddings;  ///< e.g. 8192
} srt_rope_config;

/// The head_dim/2 inverse frequencies of `config`, as Hugging Face's
/// _compute_default_rope_parameters: inv_freq[i] = theta^(-2i/head_dim), and
/// for llama3 as _compute_llama3_parameters: with wavelen = 2 pi / inv_freq,
/// low = L / low_freq_factor, high = L / high_freq_factor
/// (L = original_max_position_embeddings):
///   wavelen < high:          inv_freq unchanged;
///   wavelen > low:           inv_freq / factor;
///   otherwise, with s = (L / wavelen - low_freq_factor)
///                       / (high_freq_factor - low_freq_factor):
///                           (1 - s) inv_freq / factor + s inv_freq;
/// for linear as _compute_linear_scaling_rope_parameters: inv_freq / factor
/// (positions divided by factor).
/// Computed in double, rounded once to float (Hugging Face computes in fp32;
/// the two agree to about one ulp). inv_freq: [head_dim / 2].
/// Errors: SRT_INVALID_ARGUMENT for an odd or non-positive head_dim, theta <= 0,
/// llama3 factors that are not positive or high <= low, or a linear factor
/// that is not positive.
srt_status srt_cpu_rotary_inv_freq(float *inv_freq,
                                   const srt_rope_config *config);

/// The rotary tuple (cos, sin), each [B, S, head_dim] (Hugging Face's
/// rotary_emb forward): angle[b, s, i] = pos[b, s] * inv_freq[i mod head_dim/2]
/// with the product rounded to fp32 as Hugging Face's fp32 matmul does, then
/// cos/sin of that angle (attention scaling factor 1 for default and llama3).
/// position_ids: [B, S] int64, or NULL for 0..S-1 in every batch row.
/// cos/sin depend only on positions: they have no gradient (no backward).
/// Errors: as srt_cpu_rotary_inv_freq; SRT_INVALID_ARGUMENT for negative B, S.
srt_status srt_cpu_rotary_embedding_forward(float *cos, float *sin,
                                            const int64_t *position_ids,
                                            int64_t B, int64_t S,
                                            const srt_rope_config *config);

/// Applies RoPE to every head (Hugging Face apply_rotary_pos_emb,
/// rotate-half convention): with h = head_dim / 2, per head,
///   out[i]     = x[i] cos[i]         - x[i + h] sin[i]      (i < h)
///   out[i + h] = x[i + h] cos[i + h] + x[i] sin[i + h]
/// out, x: [B, S, heads * head_dim]; cos, sin: [B, S, head_dim].
/// out may equal x (in place). Precondition: head_dim even.
void srt_cpu_apply_rotary_forward(float *out, const float *x, const float *cos,
                                  const float *sin, int64_t B, int64_t S,
                                  int64_t heads, int64_t head_dim);

/// Gradient of srt_cpu_apply_rotary_forward with respect to x (the transpose
/// rotation): dx[i] = dy[i] cos[i] + dy[i + h] sin[i + h],
/// dx[i + h] = dy[i + h] cos[i + h] - dy[i] sin[i]. dx WRITTEN; dx may equal
/// dy (in place). cos/sin get no gradient.
void srt_cpu_apply_rotary_backward(float *dx, const float *dy, const float *cos,
                                   const float *sin, int64_t B, int64_t S,
                                   int64_t heads, int64_t head_dim);

/// srt_cpu_apply_rotary_forward (backward false) or _backward (true) of
/// `tokens` tokens (B x S flattened) on the calling thread; same bytes.
void srt_cpu_apply_rotary_serial(float *out, const float *x, const float *cos,
                                 const float *sin, int64_t tokens, int64_t heads,
                                 int64_t head_dim, bool backward);

//===----------------------------------------------------------------------===//
// attention (runtime/cpu/attention.c)
//===----------------------------------------------------------------------===//

/// Shape and options of one scaled dot-product attention (the `nn.attention`
/// op's attributes).
typedef struct srt_attention_config {
  int64_t batch;        ///< B
  int64_t seq;          ///< S, keys (and queries unless cp_size > 1)
  int64_t heads;        ///< H, query heads
  int64_t kv_heads;     ///< KV, divides H; query head h reads KV head
                        ///< h / (H / KV) (Hugging Face repeat_kv)
  int64_t head_dim;     ///< hd
  bool causal;          ///< key j visible from query i only when j <= i
  float scale;          ///< multiplies q.k, e.g. 1/sqrt(hd) or Gemma3's
                        ///< query_pre_attn_scalar^-0.5
  int64_t sliding_window; ///< 0: none; W > 0: key j visible from query i only
                          ///< when |i - j| < W (causal: i - j < W, W keys
                          ///< counting i itself, as Hugging Face's
                          ///< sliding_window_causal mask)
  float softcap;        ///< 0: none; c > 0: logits = c tanh(scale q.k / c)
  int64_t cp_size;      ///< 0 or 1: the queries are the S tokens in order.
                        ///< N > 1 (context parallelism, all-gathered K/V):
                        ///< the queries are S / N local rows, the two chunks
                        ///< cp_rank and 2N - 1 - cp_rank of S / (2N) tokens
                        ///< each, in that order (Megatron-LM's head-tail
                        ///< load balance); 2N must divide S. Masks compare
                        ///< the queries' global positions with the keys'.
  int64_t cp_rank;      ///< in [0, cp_size) (0 when cp_size <= 1)
} srt_attention_config;

/// Floats of scratch space srt_cpu_attention_forward/backward need with the
/// current srt_cpu_threads() (size it after the last srt_cpu_set_threads):
/// threads * (2 * 128 * 512 + 3 * 128), two 128-query by 512-key tiles and
/// three per-query vectors per thread (about 0.5 MiB), whatever the sequence
/// length. 0 for S <= 0.
int64_t srt_cpu_attention_workspace_floats(const srt_attention_config *config);

/// Attention forward, per batch b and head h (kv = h / (H / KV)):
///   logits[i, j] = softcap(scale * q_i . k_j) for visible j, -inf otherwise
///   p[i, :] = softmax(logits[i, :]);  out_i = sum_j p[i, j] v_j
/// q, out: [B, Sq, H * hd]; k, v: [B, S, KV * hd], where Sq = S, or S / cp
/// under context parallelism (config.cp_size > 1: local query row r of a
/// batch row is global position r < C ? cp_rank C + r : (2 cp - 1 -
/// cp_rank) C + r - C with C = S / (2 cp); k, v and segment_ids are the
/// whole sequence in global order; the result rows equal those rows of the
/// unsharded attention);
/// lse: [B, H, Sq], WRITTEN with log(sum_j exp(logits[i, j])) per query, the
/// only state the backward needs besides the inputs and out;
/// segment_ids: [B, S] the document of each token (packed rows), or NULL for
/// one document per row: key j is visible from query i only inside i's run
/// of equal ids (with the causal and window rules), a padding token (id
/// -1) sees no key (out row 0, lse -inf) and is seen by none; key tiles of
/// other documents are skipped (cost ~ the sum of squared document lengths);
/// workspace: srt_cpu_attention_workspace_floats(config) floats.
/// FlashAttention-2 tiling (Dao 2023): per (b, h, block of 128 queries), key
/// tiles of 512 with the online softmax, QK^T and PV as GEMMs on tiles; tiles
/// the causal/sliding mask hides are skipped. Threaded over (b, h, block);
/// the same bytes for any thread count. Query blocks are cut from each
/// chunk's start: with cp_size <= 1 the bytes are those of before cp
/// existed, and under cp they equal the unsharded ones where C is a multiple
/// of the block (64 for a masked S <= 512, else 128), else agree to ~1e-7.
/// Errors: SRT_INVALID_ARGUMENT for non-positive sizes, KV not dividing H,
/// a negative window, a negative softcap, cp_rank outside [0, cp_size), 2
/// cp_size not dividing S.
srt_status srt_cpu_attention_forward(float *out, float *lse, const float *q,
                                     const float *k, const float *v,
                                     const int64_t *segment_ids, float *workspace,
                                     const srt_attention_config *config);

/// Attention backward (FlashAttention-style: probabilities are recomputed
/// from q, k and lse). Given dout [B, Sq, H * hd] and the forward's out and
/// lse [B, H, Sq], WRITES dq [B, Sq, H * hd], dk and dv [B, S, KV * hd] (a
/// KV head's gradient sums over the query heads that share it; under cp,
/// over this rank's queries only: the cp ranks' dk/dv sum to the unsharded
/// ones, a reduce-scatter's job):
///   dp = dout_i . v_j;  dlogit = p (dp - dout_i . out_i)
///   dscore = dlogit * (1 - tanh^2) with softcap;  dq_i = scale sum_j dscore k_j
///   dk_j = scale sum_i dscore q_i;  dv_j = sum_i p[i, j] dout_i
/// Threaded over (b, KV head): each task owns its dk/dv rows and sums them
/// over its query heads and blocks in order (the same bytes for any thread
/// count). segment_ids, workspace: as forward (a padding query's rows of
/// dq are 0, and so are dk/dv of keys no query sees). Errors: as forward.
srt_status srt_cpu_attention_backward(float *dq, float *dk, float *dv,
                                      const float *dout, const float *q,
                                      const float *k, const float *v,
                                      const float *out, const float *lse,
                                      const int64_t *segment_ids, float *workspace,
                                      const srt_attention_config *config);

//===----------------------------------------------------------------------===//
// glu (runtime/cpu/glu.c)
//===----------------------------------------------------------------------===//

/// Activation of a gated MLP; the codes of nn.glu's "activation" in the
/// order ops.def's ATTR_CODE lists them ("silu", "gelu_tanh").
typedef enum srt_glu_activation {
  SRT_GLU_SILU,      ///< silu(x) = x sigmoid(x) (Llama, Qwen)
  SRT_GLU_GELU_TANH, ///< 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
                     ///< (torch gelu approximate="tanh", Gemma)
  SRT_GLU_ACTIVATION_COUNT
} srt_glu_activation;

/// out = act(gate) * up, elementwise over n elements. out may equal gate or up.
void srt_cpu_glu_forward(float *out, const float *gate, const float *up,
                         int64_t n, srt_glu_activation act);

/// dgate = dout * up * act'(gate), dup = dout * act(gate); both WRITTEN
/// (either may be NULL). dgate/dup may alias dout but not gate or up.
void srt_cpu_glu_backward(float *dgate, float *dup, const float *dout,
                          const float *gate, const float *up, int64_t n,
                          srt_glu_activation act);

/// srt_cpu_glu_forward and _backward on the calling thread; same bytes.
void srt_cpu_glu_forward_serial(float *out, const float *gate, const float *up, int64_t n,
                                srt_glu_activation act);
void srt_cpu_glu_backward_serial(float *dgate, float *dup, const float *dout,
                                 const float *gate, const float *up, int64_t n,
                                 srt_glu_activation act);

/// The two on the calling thread with bf16 operands and results (raw
/// bits): each result the fp32 kernel's value of the exactly widened
/// operands, rounded once to nearest even. The backward writes both dgate
/// and dup (neither NULL); they may alias dout, not gate or up.
void srt_cpu_glu_forward_bf16_serial(uint16_t *out, const uint16_t *gate, const uint16_t *up,
                                     int64_t n, srt_glu_activation act);
void srt_cpu_glu_backward_bf16_serial(uint16_t *dgate, uint16_t *dup, const uint16_t *dout,
                                      const uint16_t *gate, const uint16_t *up, int64_t n,
                                      srt_glu_activation act);

//===----------------------------------------------------------------------===//
// relu2 (runtime/cpu/relu2.c)
//===----------------------------------------------------------------------===//

/// Squared ReLU (NemotronH MLP): out = max(x, 0)^2 over n elements.
/// out may equal x.
void srt_cpu_relu2_forward(float *out, const float *x, int64_t n);

/// dx = dout * 2 max(x, 0), WRITTEN; dx may equal dout, not x.
void srt_cpu_relu2_backward(float *dx, const float *dout, const float *x,
                            int64_t n);

//===----------------------------------------------------------------------===//
// add (runtime/cpu/add.c)
//===----------------------------------------------------------------------===//

/// out = a + b over n elements (residual connections); out may equal a or b.
void srt_cpu_add_forward(float *out, const float *a, const float *b, int64_t n);

/// srt_cpu_add_forward on the calling thread (a tile of a caller that
/// splits the elements over threads itself).
void srt_cpu_add_serial(float *out, const float *a, const float *b, int64_t n);

/// out = a + b of bf16 operands (raw bits) on the calling thread: the fp32
/// sum of the exactly widened values, rounded once to nearest even (ties to
/// even, NaN kept quiet); out may equal a or b.
void srt_cpu_add_bf16_serial(uint16_t *out, const uint16_t *a, const uint16_t *b, int64_t n);

/// da = dout, db = dout, both WRITTEN (either may be NULL, or equal dout, in
/// which case nothing is copied for it).
void srt_cpu_add_backward(float *da, float *db, const float *dout, int64_t n);

//===----------------------------------------------------------------------===//
// bias_add (runtime/cpu/bias_add.c)
//===----------------------------------------------------------------------===//

/// nn.bias_add: y[t, :] = x[t, :] + bias, the bias broadcast over n rows
/// (a rowwise-parallel linear's bias, added once after the all-reduce).
/// y, x: [n, features]; bias: [features]. y may equal x (in place).
void srt_cpu_bias_add_forward(float *y, const float *x, const float *bias,
                              int64_t n, int64_t features);

/// dx = dy WRITTEN (skipped when dx is NULL or equals dy);
/// dbias += sum over rows of dy ACCUMULATED (skipped when NULL).
void srt_cpu_bias_add_backward(float *dx, float *dbias, const float *dy,
                               int64_t n, int64_t features);

//===----------------------------------------------------------------------===//
// mamba2 (runtime/cpu/mamba2.c)
//===----------------------------------------------------------------------===//


/// The mixer's weights (Hugging Face names; all fp32, row-major).
typedef struct srt_mamba2_weights {
  const float *in_proj;         ///< [proj, hidden]: rows z | x B C | dt
  const float *conv_w, *conv_b; ///< [conv_dim, conv_kernel] (conv1d.weight [c, 1, k]), [conv_dim]
  const float *dt_bias, *A_log, *D; ///< [heads] each
  const float *norm_w;              ///< [inner]
  const float *out_proj;            ///< [hidden, inner]
} srt_mamba2_weights;

/// Their gradients, each the shape of its weight, ACCUMULATED (+=).
typedef struct srt_mamba2_grads {
  float *in_proj, *conv_w, *conv_b, *dt_bias, *A_log, *D, *norm_w, *out_proj;
} srt_mamba2_grads;


/// Scratch floats of srt_cpu_mamba2_forward (backward false) or _backward,
/// for the current srt_cpu_threads(); -1 when the sizes overflow int64.
int64_t srt_cpu_mamba2_workspace_floats(const srt_mamba2_config *c, bool backward);

/// The Mamba2 mixer in fp32, as transformers' torch path computes it:
///   [z | xBC | dt] = x W_in^T; xBC = silu(causal depthwise conv1d(xBC) + b);
///   dt = clamp(softplus(dt + dt_bias), dt_min, dt_max); A = -exp(A_log);
///   per head h (B, C of its group): h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,
///   y_t = h_t C_t + D x_t, computed by chunks of `chunk` steps (the
///   within-chunk quadratic form and the state passed between chunks);
///   y = RMSNorm per group of inner / groups (y * silu(z)) * norm_w;
///   out = y W_out^T.
/// x, out: [batch, seq, hidden] (out must not alias x). segment_ids
/// [batch, seq] (NULL: each row one document) packs documents in a row, as
/// mamba_ssm's seq_idx: where a token's id differs from the previous
/// token's, a document starts, and the conv reads no input before it and the
/// scan's state restarts from zero there (inside a chunk or at its edge);
/// the values are those of each document run alone. NULL and ids that never
/// change give the same bytes. Threaded over
/// (batch, group); dot products accumulate in fp32 in a fixed order, so the
/// bytes do not depend on the thread count.
/// Errors: SRT_INVALID_ARGUMENT for a non-positive size, groups not dividing
/// heads, or a workspace size that overflows; those of srt_cpu_gemm.
srt_status srt_cpu_mamba2_forward(float *out, const float *x, const int64_t *segment_ids,
                                  const srt_mamba2_weights *w, float *workspace,
                                  const srt_mamba2_config *c);

/// Gradients of srt_cpu_mamba2_forward given dout ([batch, seq, hidden])
/// and the same segment_ids: dx WRITTEN, every weight's gradient in `g` ACCUMULATED. The forward is
/// recomputed from x (nothing is saved between the calls); the scan's
/// backward is the chunked one (per chunk the quadratic form's transpose and
/// the state gradient passed back between chunks), exact for the same
/// chunking. dt's gradient is zero where the clamp is active (torch.clamp),
/// and softplus follows torch (threshold 20). Reductions over tokens
/// accumulate in double. Errors: as srt_cpu_mamba2_forward.
srt_status srt_cpu_mamba2_backward(float *dx, const srt_mamba2_grads *g, const float *dout,
                                   const float *x, const int64_t *segment_ids,
                                   const srt_mamba2_weights *w, float *workspace,
                                   const srt_mamba2_config *c);

//===----------------------------------------------------------------------===//
// cross_entropy (runtime/cpu/cross_entropy.c)
//===----------------------------------------------------------------------===//

/// Causal-LM cross-entropy over a (possibly vocabulary-sharded) logits tensor.
/// Rows are the B * S positions; with shift, row (b, s) is scored against
/// labels[b, s + 1] and row (b, S - 1) is never scored.
typedef struct srt_cross_entropy_config {
  int64_t batch;        ///< B
  int64_t seq;          ///< S
  int64_t vocab;        ///< full vocabulary size V (labels lie in [0, V))
  int64_t vocab_start;  ///< this rank's first vocabulary row
  int64_t local_vocab;  ///< this rank's rows: [vocab_start, vocab_start + local_vocab)
  bool shift;           ///< score logits at s = 0..S-2 against labels at s+1
  int64_t ignore_index; ///< labels equal to it are skipped (-100)
  /// All-reduce over the ranks sharing the vocabulary (the tp group), or NULL
  /// for a single rank owning the whole vocabulary. Used only by
  /// srt_cpu_cross_entropy_forward.
  srt_allreduce_f32_fn allreduce;
  void *group;          ///< passed to allreduce unchanged
} srt_cross_entropy_config;

/// Floats of scratch space srt_cpu_cross_entropy_forward needs: 2 * B * S.
int64_t srt_cpu_cross_entropy_workspace_floats(
    const srt_cross_entropy_config *config);

/// Mean cross-entropy over the kept labels (torch F.cross_entropy,
/// reduction="mean", and Hugging Face's shifted causal-LM loss):
///   loss = (1 / K) sum over kept rows r of [lse(r) - logits[r, y(r)]]
/// with y(r) the row's label, kept = y != ignore_index, K = kept count.
/// Vocabulary-parallel (Megatron's vocab-parallel cross-entropy): each rank
/// holds logits[..., vocab_start : vocab_start + local_vocab] and runs the
/// phase kernels below around the config's all-reduce:
///   logit_max -> all-reduce MAX -> partial_sums -> all-reduce SUM of
///   (sum_exp, target) as ONE call of 2 * B * S floats (the reference's two
///   SUM all-reduces fused: same values, one latency fewer) -> loss_sum -> mean.
/// With allreduce NULL it is the plain single-rank loss.
/// logits: [B, S, local_vocab]; labels: [B, S] int64; loss: one float,
/// identical on every rank; K = 0 gives 0 (the `nn.ce_mean` convention;
/// torch's mean would be 0/0 = NaN).
/// lse: [B, S], WRITTEN with the global log-sum-exp of each row (for the
/// backward; 0 for the unscored row s = S-1 when shifting);
/// workspace: srt_cpu_cross_entropy_workspace_floats floats.
/// Errors (returned before any collective, so every rank of a group fails
/// alike given the same labels): SRT_INVALID_ARGUMENT for bad sizes or a
/// local range outside [0, V); SRT_OUT_OF_RANGE for a scored label outside
/// [0, V) that is not ignore_index; a failed all-reduce's status is passed up.
srt_status srt_cpu_cross_entropy_forward(float *loss, float *lse,
                                         const float *logits,
                                         const int64_t *labels,
                                         float *workspace,
                                         const srt_cross_entropy_config *config);

/// Number of kept labels of this rank's batch (the K of the mean): scored
/// rows whose label is not ignore_index. Under data parallelism the mean's K
/// is the sum of this over the dp group.
int64_t srt_cpu_cross_entropy_count(const int64_t *labels,
                                    const srt_cross_entropy_config *config);

/// Gradient of the mean loss with respect to this rank's logits, given dloss
/// and the count K the mean divided by (srt_cpu_cross_entropy_count, summed
/// over dp when the batch is split):
///   dlogits[r, v] = dloss / K * (exp(logits[r, v] - lse[r]) - [v == y(r)])
/// for kept rows, 0 for ignored and unscored rows. K <= 0 gives all zeros
/// (the loss was 0 by convention). WRITTEN [B, S, local_vocab]; needs no
/// collective; dlogits may equal logits (in place). lse: [B, S] global
/// log-sum-exp (from srt_cpu_cross_entropy_forward or
/// srt_cpu_cross_entropy_lse). The config's allreduce is not used.
/// Precondition: labels as validated by the forward.
void srt_cpu_cross_entropy_backward(float *dlogits, const float *logits,
                                    const float *lse, const int64_t *labels,
                                    float dloss, float count,
                                    const srt_cross_entropy_config *config);

// Phase kernels: one per `nn` op that tp-partition emits for a
// vocabulary-parallel (and/or batch-split) cross-entropy, with the
// collectives between them left to the caller.

/// nn.ce_logit_max: max[r] = max over the local vocabulary of logits[r, :].
/// max: [rows]; logits: [rows, local_vocab]; rows = B * S. The caller
/// all-reduces max with MAX over the vocabulary group.
void srt_cpu_cross_entropy_logit_max(float *max, const float *logits,
                                     int64_t rows, int64_t local_vocab);

/// nn.ce_partial_sums: with the global row max, the local sum of
/// exp(logit - max) (summed in double, rounded once) and the local target
/// logit (0 where the row's label is outside the local range, ignored or
/// unscored), each [B, S]. The caller all-reduces both with SUM over the
/// vocabulary group (they may be adjacent in memory for one call).
/// Errors: as srt_cpu_cross_entropy_forward (bad sizes, labels).
srt_status srt_cpu_cross_entropy_partial_sums(
    float *sum_exp, float *target, const float *logits, const int64_t *labels,
    const float *max, const srt_cross_entropy_config *config);

/// nn.ce_loss_sum: from the global max, sum_exp and target of every row,
/// sum_and_count[0] = sum over kept rows of (max + log(sum_exp) - target)
/// (accumulated in double) and sum_and_count[1] = K (exact up to 2^24). The
/// caller all-reduces the pair with SUM over dp when the batch is split.
void srt_cpu_cross_entropy_loss_sum(float sum_and_count[2], const float *max,
                                    const float *sum_exp, const float *target,
                                    const int64_t *labels,
                                    const srt_cross_entropy_config *config);

/// nn.ce_mean: sum / count, or 0 when count is 0 (no label kept).
float srt_cpu_cross_entropy_mean(const float sum_and_count[2]);

/// lse[r] = max[r] + log(sum_exp[r]) over rows = B * S: the backward's input
/// when the forward ran as phases.
void srt_cpu_cross_entropy_lse(float *lse, const float *max,
                               const float *sum_exp, int64_t rows);

//===----------------------------------------------------------------------===//
// adamw (runtime/cpu/adamw.c)
//===----------------------------------------------------------------------===//

/// AdamW hyper-parameters (torch.optim.AdamW names).
typedef struct srt_adamw_config {
  float lr;
  float beta1, beta2;
  float eps;
  float weight_decay;
} srt_adamw_config;

/// One AdamW step over n parameters, in torch.optim.AdamW's order
/// (single-tensor path, amsgrad=False, maximize=False), step t >= 1 being the
/// step count after this update, on g = grad_scale * grad (fp32 product:
/// the bytes of scaling grad first, as clipping by total norm does, then
/// stepping with grad_scale 1; the grad buffer is not written):
///   p *= 1 - lr wd                       (decoupled weight decay)
///   m  = m + (1 - beta1) (g - m)          (torch lerp_)
///   v  = beta2 v + (1 - beta2) g^2
///   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// Bias corrections are computed in double, elementwise math in fp32, as
/// torch does for fp32 tensors. param, m (exp_avg), v (exp_avg_sq): [n],
/// updated in place; grad: [n]. Preconditions: t >= 1; buffers distinct.
void srt_cpu_adamw_step(float *param, float *m, float *v, const float *grad,
                        float grad_scale, int64_t n, int64_t t,
                        const srt_adamw_config *config);

/// srt_cpu_adamw_step (the same bytes in param, m, v) that also writes
/// compute [n], the parameters' bf16 copy, each updated fp32 value rounded
/// to nearest even (ties to even, NaN kept quiet), chunk by chunk while the
/// chunk is in cache: the mixed-precision refresh of the compute copies.
void srt_cpu_adamw_step_bf16(float *param, uint16_t *compute, float *m, float *v,
                             const float *grad, float grad_scale, int64_t n, int64_t t,
                             const srt_adamw_config *config);

#ifdef __cplusplus
}
#endif

#endif // SHARDRT_KERNELS_H
