// Attention ops of a cuda step (shardrt/cuda.h): cuDNN's fused SDPA where
// it supports the shape (cudnn_attention.c), else our FlashAttention-2-style
// kernels (kernels/attention.cu: causal, sliding window, softcap, GQA and
// the replicated-KV head mapping). The forward writes the output (bf16)
// and the log-sum-exp (fp32 [B, H, S]); the backward reads both.
//
// cuDNN's path is trusted per shape only after it agreed with our kernels:
// the first forward and the first backward of every shape run both and
// compare (max |cudnn - ours| / max |ours| < kAgree, no NaN); on a mismatch
// cuDNN is disabled for that shape, with a message, and our result is used.
// SHARD_CUDA_ATTENTION=kernel skips cuDNN altogether, and so does an
// attention with segment ids (packed documents) unless the driver knows the
// batch to be one document per row (srt_exec.one_document): the cuDNN graph
// built here has no document mask, our kernels mask by segment.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_attention.h"
#include "ops_internal.h"

// The bound on both checks: outputs relative (bf16 results of two
// fp32-softmax implementations), the lse absolute, in nats (2e-2 scales
// every probability by at most 2%).
static const double kAgree = 2e-2;

// The kernels' shape of `c` (after srt_check_attention; cuDNN and our
// kernels take head_dim up to 256).
static srt_status shape_of(srt_exec *e, const char *op, const srt_op_attention_config *c,
                           srt_cuda_attention_shape *s) {
  memset(s, 0, sizeof *s); // shapes are compared with memcmp, padding included
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, op, c, &heads));
  if (c->head_dim > 256)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is above 256", op,
                     (long long)c->head_dim);
  *s = (srt_cuda_attention_shape){.batch = c->batch,
                                  .seq = c->seq,
                                  .heads = c->num_heads,
                                  .kv_heads = c->num_kv_heads,
                                  .head_dim = c->head_dim,
                                  .q_head_offset = heads.first_head,
                                  .global_heads = heads.global_heads,
                                  .causal = c->causal != 0,
                                  .sliding_window = c->sliding_window,
                                  .scale = (float)c->scale,
                                  .softcap = (float)c->softcap};
  return NULL;
}

// The slot recording whether cuDNN agreed with our kernels on shape `s`
// (added when new), or -1 when the table is full (cuDNN then unchecked:
// not used).
static int check_slot(srt_cuda_device *d, const srt_cuda_attention_shape *s) {
  for (int i = 0; i < d->num_checked; ++i)
    if (!memcmp(&d->checked[i], s, sizeof *s))
      return i;
  if (d->num_checked == (int)(sizeof d->checked / sizeof d->checked[0]))
    return -1;
  d->checked[d->num_checked] = *s;
  d->checked_ok[d->num_checked][0] = d->checked_ok[d->num_checked][1] = 0;
  return d->num_checked++;
}

static float host_value(const uint8_t *p, int64_t i, size_t width) {
  float f;
  if (width == 4) {
    memcpy(&f, p + 4 * i, 4);
  } else { // bf16: the upper half of an fp32
    uint16_t b;
    memcpy(&b, p + 2 * i, 2);
    uint32_t u = (uint32_t)b << 16;
    memcpy(&f, &u, 4);
  }
  return f;
}

// max |a - b| / max |b| (or, `absolute`, max |a - b|) over n device values
// of `width` bytes (4: fp32, 2: bf16); infinite on NaN.
static srt_status rel_err(srt_cuda_device *d, const void *a, const void *b, int64_t n,
                          size_t width, bool absolute, double *err) {
  size_t bytes = (size_t)n * width;
  SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the attention check"));
  uint8_t *h = malloc(2 * bytes + 1);
  if (!h)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "attention check: no host memory");
  cudaError_t e = cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess)
    e = cudaMemcpy(h + bytes, b, bytes, cudaMemcpyDeviceToHost);
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; e == cudaSuccess && i < n; ++i) {
    float fa = host_value(h, i, width), fb = host_value(h + bytes, i, width);
    diff = fmax(diff, isnan(fa) || isnan(fb) ? INFINITY : fabs((double)fa - fb));
    scale = fmax(scale, fabs((double)fb));
  }
  free(h);
  SRT_CUDA_CHECK(e);
  *err = absolute ? diff : diff / scale;
  return NULL;
}

static void report(srt_cuda_device *d, const srt_cuda_attention_shape *s, const char *pass,
                   double err) {
  if (srt_context_rank(d->ctx) != 0)
    return;
  fprintf(stderr,
          "cuda backend: attention %s [batch %lld, seq %lld, heads %lld/%lld, hd %lld]: cuDNN "
          "%s our kernel (rel err %.2g)%s\n",
          pass, (long long)s->batch, (long long)s->seq, (long long)s->heads,
          (long long)s->kv_heads, (long long)s->head_dim, err < kAgree ? "agrees with" :
          "DISAGREES with", err, err < kAgree ? "" : ": cuDNN disabled for this shape");
}

// Whether cuDNN may be tried for pass 0 (forward) or 1 (backward) of `s`;
// *slot receives the shape's check slot.
static bool try_cudnn(srt_cuda_device *d, const srt_cuda_attention_shape *s, int pass,
                      int *slot) {
  *slot = d->use_cudnn ? check_slot(d, s) : -1;
  return *slot >= 0 && d->checked_ok[*slot][pass] >= 0;
}

// The forward into out/lse: cuDNN when supported (and checked once against
// our kernel, for which `check` is scratch of the output's size plus lse),
// else our kernel.
static srt_status forward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                          const srt_bf16 *q, const srt_bf16 *k, const srt_bf16 *v,
                          const int64_t *seg, srt_bf16 *out, float *lse, srt_bf16 *check,
                          float *check_lse) {
  int slot;
  bool supported = false;
  if (!seg && try_cudnn(d, s, 0, &slot))
    SRT_RETURN_IF_ERROR(srt_cudnn_attention_forward(d, s, q, k, v, out, lse, &supported));
  if (supported && d->checked_ok[slot][0] == 1)
    return NULL;
  srt_bf16 *ours = supported ? check : out;
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_attention_forward(ours, supported ? check_lse : lse,
                                                           q, k, v, seg, s, d->compute)));
  if (!supported)
    return NULL;
  // The output and the log-sum-exp (the backward's input) must both agree;
  // the lse absolutely (nats), since exp(its error) scales every probability.
  double err, lse_err;
  SRT_RETURN_IF_ERROR(
      rel_err(d, out, ours, s->batch * s->seq * s->heads * s->head_dim, 2, false, &err));
  SRT_RETURN_IF_ERROR(
      rel_err(d, lse, check_lse, s->batch * s->heads * s->seq, 4, true, &lse_err));
  err = fmax(err, lse_err);
  d->checked_ok[slot][0] = err < kAgree ? 1 : -1;
  report(d, s, "forward", err);
  if (err >= kAgree) { // use ours
    SRT_CUDA_CHECK(cudaMemcpyAsync(out, ours, (size_t)(s->batch * s->seq * s->heads * s->head_dim) * 2,
                                   cudaMemcpyDeviceToDevice, d->compute));
    SRT_CUDA_CHECK(cudaMemcpyAsync(lse, check_lse, (size_t)(s->batch * s->heads * s->seq) * 4,
                                   cudaMemcpyDeviceToDevice, d->compute));
  }
  return NULL;
}

// Carves 256-byte aligned parts (cuDNN wants at least 16) out of scratch:
// sizes[i] bytes each; returns the total through the first call with
// base NULL.
static size_t carve(uint8_t *base, const size_t *sizes, int n, void **parts) {
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    if (base)
      parts[i] = base + at;
    at += (sizes[i] + 255) / 256 * 256;
  }
  return at;
}

srt_status srt_cuda_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                 int64_t segment_ids, int64_t out, int64_t lse,
                                 const srt_op_attention_config *config) {
  const char *op = "srt_cuda_op_attention";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  srt_cuda_attention_shape s;
  SRT_RETURN_IF_ERROR(shape_of(e, op, config, &s));
  // Scratch: the check's lse and output.
  size_t rows = (size_t)(s.batch * s.heads * s.seq), outn = (size_t)(s.batch * s.seq * s.heads * s.head_dim);
  const size_t sizes[2] = {4 * rows, 2 * outn};
  void *scratch, *part[2] = {NULL, NULL};
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, carve(NULL, sizes, 2, NULL), &scratch));
  carve(scratch, sizes, 2, part);
  const int64_t *seg = segment_ids >= 0 && !e->one_document ? cu_i64(e, segment_ids) : NULL;
  return forward(d, &s, cu_bf16(e, q), cu_bf16(e, k), cu_bf16(e, v), seg, cu_bf16(e, out),
                 cu_f32(e, lse), part[1], part[0]);
}

srt_status srt_cuda_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                      int64_t out, int64_t lse, int64_t dy,
                                      int64_t segment_ids, int64_t dq, int64_t dk, int64_t dv,
                                      const srt_op_attention_config *config) {
  const char *op = "srt_cuda_op_attention_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  srt_cuda_attention_shape s;
  SRT_RETURN_IF_ERROR(shape_of(e, op, config, &s));
  // Scratch: delta [rows] fp32; the check's dq [q elements] and dk, dv
  // [kv elements] bf16.
  size_t rows = (size_t)(s.batch * s.heads * s.seq), qn = (size_t)(s.batch * s.seq * s.heads * s.head_dim);
  size_t kn = (size_t)(s.batch * s.seq * s.kv_heads * s.head_dim);
  const size_t sizes[4] = {4 * rows, 2 * qn, 2 * kn, 2 * kn};
  void *scratch, *part[4] = {NULL, NULL, NULL, NULL};
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, carve(NULL, sizes, 4, NULL), &scratch));
  carve(scratch, sizes, 4, part);
  float *delta = part[0];
  srt_bf16 *rdq = part[1], *rdk = part[2], *rdv = part[3];
  const srt_bf16 *Q = cu_bf16(e, q), *K = cu_bf16(e, k), *V = cu_bf16(e, v), *dO = cu_bf16(e, dy);
  const srt_bf16 *o = cu_bf16(e, out);
  const float *L = cu_f32(e, lse);
  srt_bf16 *dQ = cu_bf16(e, dq), *dK = cu_bf16(e, dk), *dV = cu_bf16(e, dv);
  const int64_t *seg = segment_ids >= 0 && !e->one_document ? cu_i64(e, segment_ids) : NULL;
  int slot;
  bool supported = false;
  if (!seg && try_cudnn(d, &s, 1, &slot))
    SRT_RETURN_IF_ERROR(
        srt_cudnn_attention_backward(d, &s, Q, K, V, o, dO, L, dQ, dK, dV, &supported));
  if (supported && d->checked_ok[slot][1] == 1)
    return NULL;
  bool compare = supported;
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_attention_backward(
      compare ? rdq : dQ, compare ? rdk : dK, compare ? rdv : dV, dO, Q, K, V, o, L, delta,
      seg, &s, d->compute)));
  if (!compare)
    return NULL;
  double eq, ek, ev;
  SRT_RETURN_IF_ERROR(rel_err(d, dQ, rdq, (int64_t)qn, 2, false, &eq));
  SRT_RETURN_IF_ERROR(rel_err(d, dK, rdk, (int64_t)kn, 2, false, &ek));
  SRT_RETURN_IF_ERROR(rel_err(d, dV, rdv, (int64_t)kn, 2, false, &ev));
  double err = fmax(eq, fmax(ek, ev));
  d->checked_ok[slot][1] = err < kAgree ? 1 : -1;
  report(d, &s, "backward", err);
  if (err >= kAgree) {
    SRT_CUDA_CHECK(cudaMemcpyAsync(dQ, rdq, qn * 2, cudaMemcpyDeviceToDevice, d->compute));
    SRT_CUDA_CHECK(cudaMemcpyAsync(dK, rdk, kn * 2, cudaMemcpyDeviceToDevice, d->compute));
    SRT_CUDA_CHECK(cudaMemcpyAsync(dV, rdv, kn * 2, cudaMemcpyDeviceToDevice, d->compute));
  }
  return NULL;
}
