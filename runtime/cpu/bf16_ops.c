// The bf16 cpu backend's entry points (srt_cpu_bf16_ops, shardrt/cpu.h):
// the buffers hold the dtypes the buffer plan gives them under mixed
// precision (passes/buffer_facts.c, from ops.def's NN_BUFFER letters), the
// same as on cuda: activations, their gradients and the parameters'
// compute copies bf16; parameter gradients, attention's lse, the rotary
// tables and the loss statistics fp32. The elementwise and norm ops run
// their fp32 kernels on row tiles of their bf16 buffers
// (bf16_elementwise.c); every other op stages its bf16 buffers in
// fp32 (bf16_stage.h), runs the cpu backend's fp32 entry point on them and
// rounds its bf16 results to nearest even: every op computes and
// accumulates in fp32 exactly as the fp32 backend, and rounds once per
// bf16 result, where the cuda kernels round. The linears' GEMMs read their
// bf16 operands directly where oneDNN has a bf16 matmul for the CPU (its
// avx512_core_bf16 or AMX kernels, fp32 accumulation: the same products up
// to the order of the fp32 sums) and take the staged fp32 path otherwise:
// a CPU without bf16 instructions runs the exact, slower path rather than
// being refused. Collectives move and reduce each buffer in its own dtype,
// as NCCL does on cuda: a bf16 gather, all-to-all or FSDP parameter gather
// sends two bytes an element, and a bf16 sum (an activation's Partial ->
// Replicate all-reduce, a reduce-scatter under sequence parallelism) adds
// in fp32 and rounds each partial sum to bf16 (shardrt/collectives.h);
// the gradients' reductions are fp32 because the gradients are. The
// non-blocking ones are started and waited for as the fp32 ones. The
// optimizer steps the fp32 master weights and refreshes each compute copy
// from its master, rounded to nearest even, as the cuda AdamW kernel does.
#include "bf16_elementwise.h"
#include "bf16_stage.h"
#include "ops_internal.h"
#include "shardrt/tensor.h"

#define STAGE(name)                                                            \
  srt_bf16_stage st = srt_bf16_stage_begin(e, "srt_cpu_bf16_op_" #name)
#define STAGE_IN(at, n) srt_bf16_stage_in(&st, at, n)
#define STAGE_OUT(at, n) srt_bf16_stage_out(&st, at, n)
#define RUN(call) return srt_bf16_stage_end(&st, st.error ? NULL : (call))

//===----------------------------------------------------------------------===//
// Embedding, linear
//===----------------------------------------------------------------------===//

static srt_status bf16_embedding_grad(srt_exec *e, int64_t ids, int64_t dy,
                                      int64_t dw, int64_t n, int64_t hidden,
                                      int64_t local_vocab, int64_t vocab_axis,
                                      double scale, int64_t padding_idx) {
  STAGE(embedding_grad);
  int64_t DY = STAGE_IN(dy, n * hidden);
  RUN(srt_cpu_op_embedding_grad(e, ids, DY, dw, n, hidden, local_vocab,
                                vocab_axis, scale, padding_idx));
}

// The bf16 buffer at arena offset `at`.
static const uint16_t *bf16_buffer(srt_exec *e, int64_t at) {
  return (const uint16_t *)(const void *)(e->arena + at);
}

// The bf16 buffer at arena offset `at`, to write.
static uint16_t *bf16_out(srt_exec *e, int64_t at) {
  return (uint16_t *)(void *)(e->arena + at);
}

// y = x w^T (+ b): without a bias oneDNN's bf16 matmul straight into y
// (rounded once by oneDNN); with one, into the fp32 staging of y (from the
// bias, beta 1, as the fp32 kernel); else the fp32 kernel on staged x and
// w; y rounded once.
static srt_status bf16_linear(srt_exec *e, int64_t x, int64_t w, int64_t b,
                              int64_t y, int64_t n, int64_t in, int64_t out) {
  bool direct = false;
  if (b < 0)
    SRT_RETURN_IF_ERROR(srt_cpu_gemm_bf16_out(&direct, false, true, n, out, in,
                                              bf16_buffer(e, x), in, bf16_buffer(e, w),
                                              in, bf16_out(e, y), out));
  if (direct)
    return NULL;
  STAGE(linear);
  int64_t B = STAGE_IN(b, out), Y = STAGE_OUT(y, n * out);
  bool used = false;
  if (!st.error) {
    for (int64_t t = 0; b >= 0 && t < n; ++t)
      memcpy(ops_f32(e, Y) + t * out, ops_f32(e, B),
             (size_t)out * sizeof(float));
    srt_status s = srt_cpu_gemm_bf16(
        &used, false, true, n, out, in, bf16_buffer(e, x), in,
        bf16_buffer(e, w), in, b >= 0 ? 1.0f : 0.0f, ops_f32(e, Y), out);
    if (s || used)
      RUN(s);
  }
  int64_t X = STAGE_IN(x, n * in), W = STAGE_IN(w, out * in);
  RUN(srt_cpu_op_linear(e, X, W, B, Y, n, in, out));
}

// dx = dy w, as bf16_linear without a bias.
static srt_status bf16_linear_grad_input(srt_exec *e, int64_t dy, int64_t w,
                                         int64_t dx, int64_t n, int64_t in,
                                         int64_t out) {
  bool direct = false;
  SRT_RETURN_IF_ERROR(srt_cpu_gemm_bf16_out(&direct, false, false, n, in, out,
                                            bf16_buffer(e, dy), out, bf16_buffer(e, w),
                                            in, bf16_out(e, dx), in));
  if (direct)
    return NULL;
  STAGE(linear_grad_input);
  int64_t DX = STAGE_OUT(dx, n * in);
  bool used = false;
  if (!st.error) {
    srt_status s =
        srt_cpu_gemm_bf16(&used, false, false, n, in, out, bf16_buffer(e, dy),
                          out, bf16_buffer(e, w), in, 0.0f, ops_f32(e, DX), in);
    if (s || used)
      RUN(s);
  }
  int64_t DY = STAGE_IN(dy, n * out), W = STAGE_IN(w, out * in);
  RUN(srt_cpu_op_linear_grad_input(e, DY, W, DX, n, in, out));
}

// dw = dy^T x written in fp32 (the parameter gradient, as cuBLASLt writes
// it on cuda): oneDNN's bf16 matmul straight into dw, else the fp32 kernel
// on staged dy and x.
static srt_status bf16_linear_grad_weight(srt_exec *e, int64_t dy, int64_t x,
                                          int64_t dw, int64_t n, int64_t in,
                                          int64_t out) {
  bool used = false;
  SRT_RETURN_IF_ERROR(
      srt_cpu_gemm_bf16(&used, true, false, out, in, n, bf16_buffer(e, dy), out,
                        bf16_buffer(e, x), in, 0.0f, ops_f32(e, dw), in));
  if (used)
    return NULL;
  STAGE(linear_grad_weight);
  int64_t DY = STAGE_IN(dy, n * out), X = STAGE_IN(x, n * in);
  RUN(srt_cpu_op_linear_grad_weight(e, DY, X, dw, n, in, out));
}

static srt_status bf16_linear_grad_bias(srt_exec *e, int64_t dy, int64_t db,
                                        int64_t n, int64_t out) {
  STAGE(linear_grad_bias);
  int64_t DY = STAGE_IN(dy, n * out);
  RUN(srt_cpu_op_linear_grad_bias(e, DY, db, n, out));
}

//===----------------------------------------------------------------------===//
// Attention and the unary activations
//===----------------------------------------------------------------------===//

// Elements of q (and out) and of k (and v) [batch, seq, heads * head_dim].
static int64_t q_count(const srt_op_attention_config *c) {
  return c->batch * c->seq * c->num_heads * c->head_dim;
}
static int64_t kv_count(const srt_op_attention_config *c) {
  return c->batch * c->seq * c->num_kv_heads * c->head_dim;
}

static srt_status bf16_attention_cp(srt_exec *e, int64_t q, int64_t k,
                                    int64_t v, int64_t segment_ids, int64_t out,
                                    int64_t lse,
                                    const srt_op_attention_config *config);
static srt_status
bf16_attention_grad_cp(srt_exec *e, int64_t q, int64_t k, int64_t v,
                       int64_t out, int64_t lse, int64_t dy, int64_t segment_ids,
                       int64_t dq, int64_t dk, int64_t dv,
                       const srt_op_attention_config *config);

// lse stays fp32.
static srt_status bf16_attention(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                 int64_t segment_ids, int64_t out, int64_t lse,
                                 const srt_op_attention_config *config) {
  if (config->cp_size > 1)
    return bf16_attention_cp(e, q, k, v, segment_ids, out, lse, config);
  STAGE(attention);
  int64_t qn = q_count(config), kn = kv_count(config);
  int64_t Q = STAGE_IN(q, qn), K = STAGE_IN(k, kn), V = STAGE_IN(v, kn),
          O = STAGE_OUT(out, qn);
  RUN(srt_cpu_op_attention(e, Q, K, V, segment_ids, O, lse, config));
}

static srt_status bf16_attention_grad(srt_exec *e, int64_t q, int64_t k,
                                      int64_t v, int64_t out, int64_t lse,
                                      int64_t dy, int64_t segment_ids,
                                      int64_t dq, int64_t dk, int64_t dv,
                                      const srt_op_attention_config *config) {
  if (config->cp_size > 1)
    return bf16_attention_grad_cp(e, q, k, v, out, lse, dy, segment_ids, dq, dk,
                                  dv, config);
  STAGE(attention_grad);
  int64_t qn = q_count(config), kn = kv_count(config);
  int64_t Q = STAGE_IN(q, qn), K = STAGE_IN(k, kn), V = STAGE_IN(v, kn),
          O = STAGE_IN(out, qn), DY = STAGE_IN(dy, qn);
  int64_t DQ = STAGE_OUT(dq, qn), DK = STAGE_OUT(dk, kn),
          DV = STAGE_OUT(dv, kn);
  RUN(srt_cpu_op_attention_grad(e, Q, K, V, O, lse, DY, segment_ids, DQ, DK, DV,
                                config));
}

#define SRT_UNARY_OP(KIND, name)                                               \
  static srt_status bf16_##name(srt_exec *e, int64_t x, int64_t y,             \
                                int64_t n) {                                   \
    STAGE(name);                                                               \
    int64_t X = STAGE_IN(x, n), Y = STAGE_OUT(y, n);                           \
    RUN(srt_cpu_op_##name(e, X, Y, n));                                        \
  }                                                                            \
  static srt_status bf16_##name##_grad(srt_exec *e, int64_t x, int64_t dy,     \
                                       int64_t dx, int64_t n) {                \
    STAGE(name##_grad);                                                        \
    int64_t X = STAGE_IN(x, n), DY = STAGE_IN(dy, n), DX = STAGE_OUT(dx, n);   \
    RUN(srt_cpu_op_##name##_grad(e, X, DY, DX, n));                            \
  }
#include "shardrt/ops.def"

// NemotronH's Mamba2 mixer: x and the weights' compute copies staged, the
// conv, scan and gated norm in fp32 as the fp32 op, out rounded once. Its
// backward writes dx in bf16 and the weight gradients in fp32 (the buffer
// plan's "cf"). Under cp the op moves x, out, dout and dx over the cp
// group as bf16 itself (ops_mamba2_mixer), so they are not staged.

// The mixer's configuration (sizes: batch, seq, hidden, heads, head_dim,
// groups, state, conv_kernel, chunk) with its weights in[1..8] staged in
// `s`, and x (in[0]) unless cp moves it.
static srt_mamba2_config stage_mixer(srt_bf16_stage *s, int64_t in[9],
                                     const int64_t z[9], double eps,
                                     double dt_min, int64_t cp) {
  srt_mamba2_config c = ops_mamba2_config(z[0], z[1], z[2], z[3], z[4], z[5],
                                          z[6], z[7], z[8], eps, dt_min);
  int64_t counts[8];
  ops_mamba2_weight_counts(&c, counts);
  for (int k = 0; k < 8; ++k)
    in[1 + k] = srt_bf16_stage_in(s, in[1 + k], counts[k]);
  if (cp <= 1)
    in[0] = srt_bf16_stage_in(s, in[0], z[0] * z[1] * z[2]);
  return c;
}

// The staging of a mixer op `name` (its arguments in scope): `in` the
// offsets its fp32 op reads x and the weights at, `c` its configuration,
// `moved` whether cp moves its activations (then not staged).
#define STAGE_MIXER(name)                                                      \
  STAGE(name);                                                                 \
  int64_t in[9] = {x,     in_proj, conv_w, conv_b,  dt_bias,                   \
                   a_log, d,       norm_w, out_proj};                          \
  srt_mamba2_config c = stage_mixer(                                           \
      &st, in,                                                                 \
      (const int64_t[9]){batch, seq, hidden, heads, head_dim, groups, state,   \
                         conv_kernel, chunk},                                  \
      eps, dt_min, cp);                                                        \
  bool moved = cp > 1

static srt_status bf16_mamba2_mixer(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b,
    int64_t dt_bias, int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj,
    int64_t segment_ids, int64_t batch, int64_t seq, int64_t hidden,
    int64_t heads, int64_t head_dim, int64_t groups, int64_t state,
    int64_t conv_kernel, int64_t chunk, double eps, double dt_min, int64_t cp,
    int64_t out) {
  STAGE_MIXER(mamba2_mixer); // x and out move over cp as bf16, by the op
  int64_t O = moved ? out : STAGE_OUT(out, batch * seq * hidden);
  RUN(ops_mamba2_mixer(e, in, segment_ids, &c, cp, O,
                       moved ? SRT_BF16 : SRT_F32));
}

static srt_status bf16_mamba2_mixer_grad(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b,
    int64_t dt_bias, int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj,
    int64_t segment_ids, int64_t batch, int64_t seq, int64_t hidden,
    int64_t heads, int64_t head_dim, int64_t groups, int64_t state,
    int64_t conv_kernel, int64_t chunk, double eps, double dt_min, int64_t cp,
    int64_t dout, int64_t dx, int64_t d_in_proj, int64_t d_conv_w,
    int64_t d_conv_b, int64_t d_dt_bias, int64_t d_a_log, int64_t d_d,
    int64_t d_norm_w, int64_t d_out_proj) {
  STAGE_MIXER(mamba2_mixer_grad); // x, dout gathered, dx scattered by the op
  int64_t n = batch * seq * hidden, DY = moved ? dout : STAGE_IN(dout, n),
          DX = moved ? dx : STAGE_OUT(dx, n);
  RUN(ops_mamba2_mixer_grad(
      e, in, segment_ids, &c, cp, DY, DX,
      (const int64_t[8]){d_in_proj, d_conv_w, d_conv_b, d_dt_bias, d_a_log, d_d,
                         d_norm_w, d_out_proj},
      moved ? SRT_BF16 : SRT_F32));
}

//===----------------------------------------------------------------------===//
// The causal-LM loss: bf16 logits, fp32 statistics
//===----------------------------------------------------------------------===//

static srt_status bf16_cross_entropy(srt_exec *e, int64_t logits,
                                     int64_t labels, int64_t loss,
                                     int64_t batch, int64_t seq, int64_t vocab,
                                     int64_t ignore_index, int64_t shift) {
  STAGE(cross_entropy);
  int64_t L = STAGE_IN(logits, batch * seq * vocab);
  RUN(srt_cpu_op_cross_entropy(e, L, labels, loss, batch, seq, vocab,
                               ignore_index, shift));
}

static srt_status bf16_cross_entropy_grad(srt_exec *e, int64_t logits,
                                          int64_t labels, int64_t dlogits,
                                          int64_t batch, int64_t seq,
                                          int64_t vocab, int64_t ignore_index,
                                          int64_t shift) {
  STAGE(cross_entropy_grad);
  int64_t n = batch * seq * vocab, L = STAGE_IN(logits, n),
          D = STAGE_OUT(dlogits, n);
  RUN(srt_cpu_op_cross_entropy_grad(e, L, labels, D, batch, seq, vocab,
                                    ignore_index, shift));
}

static srt_status bf16_ce_logit_max(srt_exec *e, int64_t logits, int64_t max,
                                    int64_t n, int64_t local_vocab) {
  STAGE(ce_logit_max);
  int64_t L = STAGE_IN(logits, n * local_vocab);
  RUN(srt_cpu_op_ce_logit_max(e, L, max, n, local_vocab));
}

static srt_status bf16_ce_partial_sums(srt_exec *e, int64_t logits,
                                       int64_t labels, int64_t max,
                                       int64_t sum_exp, int64_t target,
                                       int64_t batch, int64_t seq,
                                       int64_t local_vocab, int64_t vocab_axis,
                                       int64_t ignore_index, int64_t shift) {
  STAGE(ce_partial_sums);
  int64_t L = STAGE_IN(logits, batch * seq * local_vocab);
  RUN(srt_cpu_op_ce_partial_sums(e, L, labels, max, sum_exp, target, batch, seq,
                                 local_vocab, vocab_axis, ignore_index, shift));
}

static srt_status
bf16_ce_logits_grad(srt_exec *e, int64_t logits, int64_t labels, int64_t max,
                    int64_t sum_exp, int64_t sum_and_count, int64_t dlogits,
                    int64_t batch, int64_t seq, int64_t local_vocab,
                    int64_t vocab_axis, int64_t ignore_index, int64_t shift) {
  STAGE(ce_logits_grad);
  int64_t n = batch * seq * local_vocab, L = STAGE_IN(logits, n),
          D = STAGE_OUT(dlogits, n);
  RUN(srt_cpu_op_ce_logits_grad(e, L, labels, max, sum_exp, sum_and_count, D,
                                batch, seq, local_vocab, vocab_axis,
                                ignore_index, shift));
}

//===----------------------------------------------------------------------===//
// Collectives in the dtype of their buffer: bf16 moves as bf16, sums as
// bf16 (shardrt/collectives.h), non-blocking where the fp32 ones are
//===----------------------------------------------------------------------===//

// The element type of an op's `dtype` (srt_op_dtype).
static srt_dtype elem_type(int64_t dtype) {
  return dtype == SRT_OP_BF16 ? SRT_BF16 : SRT_F32;
}

static srt_status bf16_all_reduce(srt_exec *e, int64_t in, int64_t out,
                                  int64_t count, int64_t axis, int64_t is_max,
                                  int64_t dtype) {
  return ops_all_reduce(e, "srt_cpu_bf16_op_all_reduce", in, out, count, axis,
                        is_max, elem_type(dtype), -1);
}

static srt_status bf16_all_gather(srt_exec *e, int64_t in, int64_t out,
                                  int64_t axis, int64_t dim, int64_t rank,
                                  int64_t d0, int64_t d1, int64_t d2,
                                  int64_t d3, int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_gather_scatter(e, "srt_cpu_bf16_op_all_gather", false, in, out,
                            axis, dim, rank, shape, elem_type(dtype), -1);
}

static srt_status bf16_reduce_scatter(srt_exec *e, int64_t in, int64_t out,
                                      int64_t axis, int64_t dim, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2,
                                      int64_t d3, int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_gather_scatter(e, "srt_cpu_bf16_op_reduce_scatter", true, in, out,
                            axis, dim, rank, shape, elem_type(dtype), -1);
}

static srt_status bf16_all_to_all(srt_exec *e, int64_t in, int64_t out,
                                  int64_t axis, int64_t split_dim,
                                  int64_t concat_dim, int64_t rank, int64_t d0,
                                  int64_t d1, int64_t d2, int64_t d3,
                                  int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_all_to_all(e, "srt_cpu_bf16_op_all_to_all", in, out, axis,
                        split_dim, concat_dim, rank, shape, elem_type(dtype));
}

static srt_status bf16_all_slice(srt_exec *e, int64_t in, int64_t out,
                                 int64_t axis, int64_t dim, int64_t rank,
                                 int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                 int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_all_slice(e, "srt_cpu_bf16_op_all_slice", in, out, axis, dim,
                       rank, shape, elem_type(dtype));
}

static srt_status bf16_all_reduce_start(srt_exec *e, int64_t in, int64_t out,
                                        int64_t count, int64_t axis,
                                        int64_t is_max, int64_t dtype,
                                        int64_t slot) {
  return ops_all_reduce(e, "srt_cpu_bf16_op_all_reduce_start", in, out, count,
                        axis, is_max, elem_type(dtype), slot);
}

static srt_status bf16_all_gather_start(srt_exec *e, int64_t in, int64_t out,
                                        int64_t axis, int64_t dim, int64_t rank,
                                        int64_t d0, int64_t d1, int64_t d2,
                                        int64_t d3, int64_t dtype,
                                        int64_t slot) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_gather_scatter(e, "srt_cpu_bf16_op_all_gather_start", false, in,
                            out, axis, dim, rank, shape, elem_type(dtype),
                            slot);
}

static srt_status
bf16_reduce_scatter_start(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                          int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                          int64_t d2, int64_t d3, int64_t dtype, int64_t slot) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_gather_scatter(e, "srt_cpu_bf16_op_reduce_scatter_start", true,
                            in, out, axis, dim, rank, shape, elem_type(dtype),
                            slot);
}

static srt_status bf16_bucket_start(srt_exec *e, const int64_t *members,
                                    int64_t kind, int64_t axis, int64_t dtype,
                                    int64_t slot) {
  return ops_bucket_start(e, "srt_cpu_bf16_op_bucket_start", members, kind,
                          axis, elem_type(dtype), slot);
}

//===----------------------------------------------------------------------===//
// Context parallelism: the cp moves of bf16 buffers in bf16
//===----------------------------------------------------------------------===//

// Attention under cp: q and out staged, K and V handed over as bf16, which
// the op all-gathers as bf16 and widens (ops_attention).
static srt_status bf16_attention_cp(srt_exec *e, int64_t q, int64_t k,
                                    int64_t v, int64_t segment_ids, int64_t out,
                                    int64_t lse,
                                    const srt_op_attention_config *config) {
  STAGE(attention);
  int64_t qn = q_count(config), Q = STAGE_IN(q, qn), O = STAGE_OUT(out, qn);
  RUN(ops_attention(e, Q, k, v, segment_ids, O, lse, config, SRT_BF16));
}

// Its backward: q, out, dy and dq staged; dK and dV written as bf16 by the
// op's bf16 reduce-scatter.
static srt_status
bf16_attention_grad_cp(srt_exec *e, int64_t q, int64_t k, int64_t v,
                       int64_t out, int64_t lse, int64_t dy, int64_t segment_ids,
                       int64_t dq, int64_t dk, int64_t dv,
                       const srt_op_attention_config *config) {
  STAGE(attention_grad);
  int64_t qn = q_count(config), Q = STAGE_IN(q, qn), O = STAGE_IN(out, qn),
          DY = STAGE_IN(dy, qn), DQ = STAGE_OUT(dq, qn);
  RUN(ops_attention_grad(e, Q, k, v, O, lse, DY, segment_ids, DQ, dk, dv,
                         config, SRT_BF16));
}

// The elementwise and norm ops run on row tiles (bf16_elementwise.c).
#define bf16_add srt_cpu_bf16_op_add
#define bf16_embedding srt_cpu_bf16_op_embedding
#define bf16_bias_add srt_cpu_bf16_op_bias_add
#define bf16_rms_norm srt_cpu_bf16_op_rms_norm
#define bf16_add_rms_norm srt_cpu_bf16_op_add_rms_norm
#define bf16_rms_norm_grad_input srt_cpu_bf16_op_rms_norm_grad_input
#define bf16_rms_norm_grad_weight srt_cpu_bf16_op_rms_norm_grad_weight
#define bf16_apply_rotary srt_cpu_bf16_op_apply_rotary
#define bf16_apply_rotary_grad srt_cpu_bf16_op_apply_rotary_grad
#define bf16_glu srt_cpu_bf16_op_glu
#define bf16_glu_grad srt_cpu_bf16_op_glu_grad
// The optimizer step is the cpu backend's (grad norm, clipping, AdamW on
// the fp32 masters), which rounds each updated master into its compute copy.
#define bf16_optimizer_step srt_cpu_op_optimizer_step

// The ops whose buffers are fp32 under mixed precision too (the rotary
// tables, the loss statistics) and the waits (of either dtype) are the cpu
// backend's own.
#define bf16_rotary_embedding srt_cpu_op_rotary_embedding
#define bf16_ce_loss_sum srt_cpu_op_ce_loss_sum
#define bf16_ce_mean srt_cpu_op_ce_mean
#define bf16_collective_wait srt_cpu_op_collective_wait
#define bf16_bucket_wait srt_cpu_op_bucket_wait

const srt_ops srt_cpu_bf16_ops = {
#define SRT_OP(name, source, check, args) .name = bf16_##name,
#include "shardrt/ops.def"
};
