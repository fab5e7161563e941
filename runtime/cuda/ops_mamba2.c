// The Mamba2 mixer ops of the cuda backend (the cpu's: runtime/cpu/
// ops_mamba2.c). x, out, dout and dx are bf16 activations, the weights the
// bf16 compute copies, the weight gradients fp32 (WRITTEN). in_proj and
// out_proj are cuBLASLt GEMMs (bf16 in, fp32 accumulation; proj, dnormed
// and the weight gradients kept in fp32); everything between them runs in
// fp32 in the kernels of kernels/mamba2.cu on fp32 copies of the small
// weights, in the op's device scratch. Only normed (out_proj's input) and
// dproj (in_proj's gradient input) are rounded to bf16, for their GEMMs.
// The backward recomputes the forward from x, as the cpu's does.
//
// Context parallelism (cp > 1) has no cuda form yet: lower-to-runtime
// refuses it, and the ops say so if reached.
#include <math.h>

#include "kernels.h"
#include "ops_internal.h"

// The op's scratch (shardrt/op_facts.h: srt_cuda_mamba2_scratch_parts);
// each part 256-byte aligned (the GEMMs' operands among them).
typedef struct scratch {
  float *conv_w, *conv_b, *dt_bias, *a_log, *d, *norm_w; // fp32 copies
  float *proj, *xbc, *dt, *y, *rstd;
  srt_bf16 *normed;
  // the backward's
  float *dnormed, *dy, *dproj, *dxbc, *ddt, *scan;
  srt_bf16 *dproj16;
} scratch;

// The sizes the scratch formula reads (op_facts.h's config).
static srt_mamba2_config config_of(const m2_dims *d) {
  return (srt_mamba2_config){.batch = d->batch, .seq = d->seq, .heads = d->heads,
                             .head_dim = d->head_dim, .groups = d->groups, .state = d->state,
                             .conv_kernel = d->conv_kernel};
}

// Carves the scratch from `base` (srt_cuda_mamba2_scratch_parts' parts, in
// its order); NULL `base` only counts. Returns its floats.
static int64_t layout(const m2_dims *d, bool backward, float *base, scratch *s) {
  srt_mamba2_config c = config_of(d);
  int64_t count[SRT_CUDA_MAMBA2_SCRATCH_PARTS], at[SRT_CUDA_MAMBA2_SCRATCH_PARTS];
  int64_t total = srt_cuda_mamba2_scratch_parts(&c, backward, count);
  for (int i = 0; i < SRT_CUDA_MAMBA2_SCRATCH_PARTS; ++i)
    at[i] = i ? at[i - 1] + count[i - 1] : 0;
  if (!base)
    return total;
  float **f32[SRT_CUDA_MAMBA2_SCRATCH_PARTS] = {
      &s->conv_w, &s->conv_b, &s->dt_bias, &s->a_log,   &s->d,  &s->norm_w, &s->proj,
      &s->xbc,    &s->dt,     &s->y,       &s->rstd,    NULL,   &s->dnormed, &s->dy,
      &s->dproj,  &s->dxbc,   &s->ddt,     &s->scan,    NULL};
  for (int i = 0; i < SRT_CUDA_MAMBA2_SCRATCH_PARTS; ++i)
    if (f32[i])
      *f32[i] = base + at[i];
  s->normed = (srt_bf16 *)(void *)(base + at[11]);
  s->dproj16 = (srt_bf16 *)(void *)(base + at[18]);
  return total;
}

// The weights' arena offsets, in ops.def's operand order after x.
enum { kInProj, kConvW, kConvB, kDtBias, kALog, kD, kNormW, kOutProj, kWeights };

// The checks, the device, the sizes and the scratch with the small weights'
// fp32 copies in place.
static srt_status begin(srt_exec *e, const char *op, const int64_t w[kWeights], m2_dims dims,
                        int64_t cp, bool backward, srt_cuda_device **dev, scratch *s) {
  if (cp > 1)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "%s: cp %lld: the cuda Mamba2 mixer has no context parallelism yet "
                     "(compile with cp 1, or for the cpu backend)",
                     op, (long long)cp);
  if (dims.heads % dims.groups)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: groups %lld do not divide heads %lld", op,
                     (long long)dims.groups, (long long)dims.heads);
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, dev));
  int64_t count[SRT_CUDA_MAMBA2_SCRATCH_PARTS];
  srt_mamba2_config c = config_of(&dims);
  srt_cuda_mamba2_scratch_parts(&c, true, count);
  if (count[17] < srt_cuda_mamba2_scan_backward_scratch(&dims)) // op_facts.h's formula
    return SRT_ERROR(SRT_INTERNAL, "%s: the scan's scratch outgrew its part of the op's", op);
  void *base;
  SRT_RETURN_IF_ERROR(
      srt_cuda_scratch(*dev, (size_t)layout(&dims, backward, NULL, s) * sizeof(float), &base));
  layout(&dims, backward, base, s);
  const struct {
    float *to;
    int k;
    int64_t n;
  } copies[] = {{s->conv_w, kConvW, dims.conv_dim * dims.conv_kernel},
                {s->conv_b, kConvB, dims.conv_dim},
                {s->dt_bias, kDtBias, dims.heads},
                {s->a_log, kALog, dims.heads},
                {s->d, kD, dims.heads},
                {s->norm_w, kNormW, dims.inner}};
  for (size_t i = 0; i < sizeof copies / sizeof copies[0]; ++i)
    SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_cast_bf16_to_f32(
        copies[i].to, cu_bf16(e, w[copies[i].k]), copies[i].n, (*dev)->compute)));
  return NULL;
}

// in_proj, the conv, dt, the scan and the norm: s->normed is out_proj's
// input (and s->rstd the norm's 1/rms).
static srt_status forward_to_norm(srt_exec *e, srt_cuda_device *dev, const scratch *s,
                                  int64_t x, int64_t in_proj, const int64_t *seg,
                                  const m2_dims *d, int64_t hidden) {
  int64_t n = d->batch * d->seq;
  // proj [n, proj] = x [n, hidden] in_proj [proj, hidden]^T (as srt_cuda_op_linear).
  SRT_RETURN_IF_ERROR(srt_cuda_gemm(dev, true, false, d->proj, n, hidden, cu_bf16(e, in_proj),
                                    hidden, cu_bf16(e, x), hidden, s->proj, true, NULL));
  const float *w[5] = {s->conv_w, s->conv_b, s->dt_bias, s->a_log, s->d};
  SRT_RETURN_IF_ERROR(CU_LAUNCH(
      srt_cuda_mamba2_forward_inner(s->xbc, s->dt, s->y, s->proj, seg, w, d, dev->compute)));
  return CU_LAUNCH(srt_cuda_mamba2_norm_forward(s->normed, s->rstd, s->y, s->proj, s->norm_w, d,
                                                dev->compute));
}

static m2_dims dims_of(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                       int64_t groups, int64_t state, int64_t conv_kernel, double eps,
                       double dt_min) {
  return m2_dims_make(batch, seq, heads, head_dim, groups, state, conv_kernel, (float)eps,
                      (float)dt_min, INFINITY);
}

srt_status srt_cuda_op_mamba2_mixer(srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w,
                                    int64_t conv_b, int64_t dt_bias, int64_t a_log, int64_t d,
                                    int64_t norm_w, int64_t out_proj, int64_t segment_ids,
                                    int64_t batch, int64_t seq, int64_t hidden, int64_t heads,
                                    int64_t head_dim, int64_t groups, int64_t state,
                                    int64_t conv_kernel, int64_t chunk, double eps,
                                    double dt_min, int64_t cp, int64_t out) {
  (void)chunk; // the recurrence has no chunks (kernels/mamba2_math.h)
  m2_dims dims = dims_of(batch, seq, heads, head_dim, groups, state, conv_kernel, eps, dt_min);
  const int64_t w[kWeights] = {in_proj, conv_w, conv_b, dt_bias, a_log, d, norm_w, out_proj};
  srt_cuda_device *dev = NULL;
  scratch s;
  SRT_RETURN_IF_ERROR(begin(e, "srt_cuda_op_mamba2_mixer", w, dims, cp, false, &dev, &s));
  const int64_t *seg = segment_ids >= 0 ? cu_i64(e, segment_ids) : NULL;
  SRT_RETURN_IF_ERROR(forward_to_norm(e, dev, &s, x, in_proj, seg, &dims, hidden));
  // out [n, hidden] = normed [n, inner] out_proj [hidden, inner]^T.
  return srt_cuda_gemm(dev, true, false, hidden, batch * seq, dims.inner, cu_bf16(e, out_proj),
                       dims.inner, s.normed, dims.inner, cu_bf16(e, out), false, NULL);
}

// out_proj's and the norm's gradients: dnormed, d_out_proj, dy (the scan
// output's), dproj's z columns, d_norm_w.
static srt_status backward_norm(srt_exec *e, srt_cuda_device *dev, const scratch *s,
                                int64_t dout, int64_t out_proj, const int64_t *g,
                                const m2_dims *d, int64_t hidden) {
  int64_t n = d->batch * d->seq;
  // dnormed [n, inner] = dout [n, hidden] out_proj [hidden, inner].
  SRT_RETURN_IF_ERROR(srt_cuda_gemm(dev, false, false, d->inner, n, hidden,
                                    cu_bf16(e, out_proj), d->inner, cu_bf16(e, dout), hidden,
                                    s->dnormed, true, NULL));
  // d_out_proj [hidden, inner] = dout^T normed, fp32.
  SRT_RETURN_IF_ERROR(srt_cuda_gemm(dev, false, true, d->inner, hidden, n, s->normed, d->inner,
                                    cu_bf16(e, dout), hidden, cu_f32(e, g[kOutProj]), true,
                                    NULL));
  return CU_LAUNCH(srt_cuda_mamba2_norm_backward(s->dy, s->dproj, cu_f32(e, g[kNormW]),
                                                 s->dnormed, s->rstd, s->y, s->proj, s->norm_w,
                                                 d, dev->compute));
}

// The scan's, dt's and the conv's gradients into dproj and the weights';
// then in_proj's: dx and d_in_proj.
static srt_status backward_inner(srt_exec *e, srt_cuda_device *dev, const scratch *s, int64_t x,
                                 int64_t in_proj, int64_t dx, const int64_t *g,
                                 const int64_t *seg, const m2_dims *d, int64_t hidden) {
  int64_t n = d->batch * d->seq;
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_mamba2_scan_backward(
      s->dxbc, s->ddt, cu_f32(e, g[kALog]), cu_f32(e, g[kD]), s->dy, s->xbc, s->dt, seg,
      s->a_log, s->d, s->scan, d, dev->compute)));
  float *grads[3] = {cu_f32(e, g[kConvW]), cu_f32(e, g[kConvB]), cu_f32(e, g[kDtBias])};
  const float *w[3] = {s->conv_w, s->conv_b, s->dt_bias};
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_mamba2_conv_dt_backward(s->dproj, grads, s->dxbc,
                                                                 s->ddt, s->proj, seg, w, d,
                                                                 dev->compute)));
  SRT_RETURN_IF_ERROR(
      CU_LAUNCH(srt_cuda_cast_f32_to_bf16(s->dproj16, s->dproj, n * d->proj, dev->compute)));
  // dx [n, hidden] = dproj [n, proj] in_proj [proj, hidden] (as linear_grad_input).
  SRT_RETURN_IF_ERROR(srt_cuda_gemm(dev, false, false, hidden, n, d->proj, cu_bf16(e, in_proj),
                                    hidden, s->dproj16, d->proj, cu_bf16(e, dx), false, NULL));
  // d_in_proj [proj, hidden] = dproj^T x, fp32 (as linear_grad_weight).
  return srt_cuda_gemm(dev, false, true, hidden, d->proj, n, cu_bf16(e, x), hidden, s->dproj16,
                       d->proj, cu_f32(e, g[kInProj]), true, NULL);
}

srt_status srt_cuda_op_mamba2_mixer_grad(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b, int64_t dt_bias,
    int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj, int64_t segment_ids,
    int64_t batch, int64_t seq, int64_t hidden, int64_t heads, int64_t head_dim,
    int64_t groups, int64_t state, int64_t conv_kernel, int64_t chunk, double eps,
    double dt_min, int64_t cp, int64_t dout, int64_t dx,
    int64_t d_in_proj, int64_t d_conv_w, int64_t d_conv_b, int64_t d_dt_bias, int64_t d_a_log,
    int64_t d_d, int64_t d_norm_w, int64_t d_out_proj) {
  (void)chunk;
  m2_dims dims = dims_of(batch, seq, heads, head_dim, groups, state, conv_kernel, eps, dt_min);
  const int64_t w[kWeights] = {in_proj, conv_w, conv_b, dt_bias, a_log, d, norm_w, out_proj};
  const int64_t g[kWeights] = {d_in_proj, d_conv_w, d_conv_b, d_dt_bias,
                               d_a_log,   d_d,      d_norm_w, d_out_proj};
  srt_cuda_device *dev = NULL;
  scratch s;
  SRT_RETURN_IF_ERROR(begin(e, "srt_cuda_op_mamba2_mixer_grad", w, dims, cp, true, &dev, &s));
  const int64_t *seg = segment_ids >= 0 ? cu_i64(e, segment_ids) : NULL;
  SRT_RETURN_IF_ERROR(forward_to_norm(e, dev, &s, x, in_proj, seg, &dims, hidden));
  SRT_RETURN_IF_ERROR(backward_norm(e, dev, &s, dout, out_proj, g, &dims, hidden));
  return backward_inner(e, dev, &s, x, in_proj, dx, g, seg, &dims, hidden);
}
