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
//
// Under context parallelism (config cp_size > 1) q, out, lse, dy and dq are
// this cp rank's local rows (its two chunks of each sequence, shardrt/cp.h)
// while k, v and the segment ids are all-gathered over the cp group
// (ncclAllGather on the cp communicator, rank order) and moved into token
// order (cp_layout.h); our kernel takes the local queries against every
// key with the masks on global positions (cuDNN is not tried: its graph has
// no such mask). The backward writes the whole sequence's dK/dV (this
// rank's share), moves them back to rank order and reduce-scatters them
// (sum, bf16 as the dk/dv buffers) into the local rows: Llama 3's
// all-gather context parallelism, as the cpu backend's. The backward
// gathers again rather than keeping the forward's K/V alive in between.
// Every NCCL call goes on the comm stream, as the other collectives'
// (device.h), so that no two communicators' kernels run concurrently.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp_layout.h"
#include "cudnn_attention.h"
#include "ops_internal.h"
#include "shardrt/cp.h"

// The bound on both checks: outputs relative (bf16 results of two
// fp32-softmax implementations), the lse absolute, in nats (2e-2 scales
// every probability by at most 2%).
static const double kAgree = 2e-2;

// This rank's index in the cp group under context parallelism (0
// without): the step's cp must be the group's (whose communicator
// device.c opened), and 2 x cp must divide the sequence.
static srt_status cp_rank_of(srt_exec *e, srt_cuda_device *d, const char *op,
                             const srt_op_attention_config *c, int *rank) {
  *rank = 0;
  if (c->cp_size <= 1)
    return NULL;
  srt_group *g = srt_context_group(e->ctx, SRT_GROUP_CP);
  if (srt_group_size(g) != c->cp_size)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: the step was compiled for cp %lld, but the cp group has %d ranks", op,
                     (long long)c->cp_size, srt_group_size(g));
  if (!d->has_comms[SRT_CUDA_COMM_CP])
    return SRT_ERROR(SRT_UNAVAILABLE, "%s: the cp NCCL communicator was aborted after an "
                     "earlier failure", op);
  *rank = srt_group_rank(g);
  return srt_cp_check(c->seq * c->cp_size, (int)c->cp_size, *rank);
}

// The kernels' shape of `c` (after srt_check_attention; cuDNN and our
// kernels take head_dim up to 256): under cp, seq is the whole sequence's
// (the keys'), the queries being this rank's seq / cp.
static srt_status shape_of(srt_exec *e, srt_cuda_device *d, const char *op,
                           const srt_op_attention_config *c, srt_cuda_attention_shape *s) {
  memset(s, 0, sizeof *s); // shapes are compared with memcmp, padding included
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, op, c, &heads));
  if (c->head_dim > 256)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: head_dim %lld is above 256", op,
                     (long long)c->head_dim);
  int cp_rank;
  SRT_RETURN_IF_ERROR(cp_rank_of(e, d, op, c, &cp_rank));
  bool cp = c->cp_size > 1;
  *s = (srt_cuda_attention_shape){.batch = c->batch,
                                  .seq = cp ? c->seq * c->cp_size : c->seq,
                                  .heads = c->num_heads,
                                  .kv_heads = c->num_kv_heads,
                                  .head_dim = c->head_dim,
                                  .q_head_offset = heads.first_head,
                                  .global_heads = heads.global_heads,
                                  .causal = c->causal != 0,
                                  .sliding_window = c->sliding_window,
                                  .scale = (float)c->scale,
                                  .softcap = (float)c->softcap,
                                  .cp_size = cp ? c->cp_size : 0,
                                  .cp_rank = cp_rank};
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
  if (!seg && s->cp_size <= 1 && try_cudnn(d, s, 0, &slot))
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

// The parts of the cp view's scratch (all empty without cp): the gathered
// k and v [B, S, KV * hd] bf16 (after the backward's kernel: its dK and dV
// in rank order), the staging buffer of the gathers (rank order; the
// backward's dK in token order after them), the backward's dV in token
// order, the gathered segment ids [B, S] int64.
enum { kViewK, kViewV, kViewStaging, kViewDv, kViewSeg, kViewParts };

// The byte sizes of the view's parts for shape `s` (`grads`: the backward).
static void view_sizes(const srt_cuda_attention_shape *s, bool segments, bool grads,
                       size_t sizes[kViewParts]) {
  for (int i = 0; i < kViewParts; ++i)
    sizes[i] = 0;
  if (s->cp_size <= 1)
    return;
  size_t kv = (size_t)(s->batch * s->seq * s->kv_heads * s->head_dim) * 2;
  size_t ids = (size_t)(s->batch * s->seq) * 8;
  sizes[kViewK] = sizes[kViewV] = kv;
  sizes[kViewStaging] = segments && ids > kv ? ids : kv;
  sizes[kViewDv] = grads ? kv : 0;
  sizes[kViewSeg] = segments ? ids : 0;
}

// The op's K/V: under cp gathered into scratch in token order, else the
// buffers themselves.
typedef struct kv_view {
  const srt_bf16 *k, *v; // [B, S, KV * hd]
  const int64_t *seg;    // [B, S], or NULL
  void *const *part;     // the scratch parts (kView*), under cp
} kv_view;

// All-gathers `local` [B, S/cp, token] (`elem`-byte elements of NCCL type
// `type`) over cp into `global` [B, S, token] in token order, through
// `staging` (the ranks' rows in rank order): the gather on the comm stream,
// the move on the compute stream after it.
static srt_status gather_tokens(srt_cuda_device *d, const char *op,
                                const srt_cuda_attention_shape *s, const void *local,
                                void *global, void *staging, ncclDataType_t type, size_t elem,
                                int64_t token) {
  int cp = (int)s->cp_size;
  size_t count = (size_t)(s->batch * (s->seq / cp) * token);
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d)); // staging's last reader is done
  d->last_collective[SRT_CUDA_COMM_CP] = op;
  SRT_NCCL_CHECK(ncclAllGather(local, staging, count, type, d->comms[SRT_CUDA_COMM_CP], d->comm));
  SRT_RETURN_IF_ERROR(srt_cuda_comm_end(d));
  SRT_CUDA_CHECK(srt_cuda_cp_to_tokens(global, staging, s->batch, s->seq, cp,
                                       (size_t)token * elem, d->compute));
  return NULL;
}

// The K/V view of this rank (the cp all-gathers happen here) in the
// scratch parts `part` (view_sizes').
static srt_status kv_view_init(srt_cuda_device *d, const char *op,
                               const srt_cuda_attention_shape *s, const srt_bf16 *k,
                               const srt_bf16 *v, const int64_t *seg, void *const *part,
                               kv_view *w) {
  *w = (kv_view){.k = k, .v = v, .seg = seg, .part = part};
  if (s->cp_size <= 1)
    return NULL;
  int64_t row = s->kv_heads * s->head_dim;
  void *staging = part[kViewStaging];
  SRT_RETURN_IF_ERROR(gather_tokens(d, op, s, k, part[kViewK], staging, ncclBfloat16, 2, row));
  SRT_RETURN_IF_ERROR(gather_tokens(d, op, s, v, part[kViewV], staging, ncclBfloat16, 2, row));
  if (seg)
    SRT_RETURN_IF_ERROR(
        gather_tokens(d, op, s, seg, part[kViewSeg], staging, ncclInt64, 8, 1));
  w->k = part[kViewK];
  w->v = part[kViewV];
  w->seg = seg ? part[kViewSeg] : NULL;
  return NULL;
}

static srt_status reduce_scatter_pair(srt_cuda_device *d, const void *a, void *out_a,
                                      const void *b, void *out_b, size_t count) {
  ncclComm_t comm = d->comms[SRT_CUDA_COMM_CP];
  SRT_NCCL_CHECK(ncclReduceScatter(a, out_a, count, ncclBfloat16, ncclSum, comm, d->comm));
  SRT_NCCL_CHECK(ncclReduceScatter(b, out_b, count, ncclBfloat16, ncclSum, comm, d->comm));
  return NULL;
}

// Reduce-scatters the whole sequence's dK/dV (the view's staging and dV
// parts, token order: this rank's share of every key's gradient) over cp
// into the local rows dk, dv [B, S/cp, KV * hd]: moved into rank order in
// the gathered K/V's parts (no longer read), then summed by NCCL.
static srt_status scatter_grads(srt_cuda_device *d, const char *op,
                                const srt_cuda_attention_shape *s, const kv_view *w,
                                srt_bf16 *dk, srt_bf16 *dv) {
  int cp = (int)s->cp_size;
  int64_t row = s->kv_heads * s->head_dim;
  void *const *part = w->part;
  SRT_CUDA_CHECK(srt_cuda_cp_to_ranks(part[kViewK], part[kViewStaging], s->batch, s->seq, cp,
                                      (size_t)row * 2, d->compute));
  SRT_CUDA_CHECK(srt_cuda_cp_to_ranks(part[kViewV], part[kViewDv], s->batch, s->seq, cp,
                                      (size_t)row * 2, d->compute));
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  d->last_collective[SRT_CUDA_COMM_CP] = op;
  size_t count = (size_t)(s->batch * (s->seq / cp) * row);
  SRT_NCCL_GROUP(reduce_scatter_pair(d, part[kViewK], dk, part[kViewV], dv, count));
  return srt_cuda_comm_end(d);
}

srt_status srt_cuda_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                 int64_t segment_ids, int64_t out, int64_t lse,
                                 const srt_op_attention_config *config) {
  const char *op = "srt_cuda_op_attention";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  srt_cuda_attention_shape s;
  SRT_RETURN_IF_ERROR(shape_of(e, d, op, config, &s));
  const int64_t *seg = segment_ids >= 0 && !e->one_document ? cu_i64(e, segment_ids) : NULL;
  // Scratch: the check's lse and output (none under cp, where cuDNN is not
  // tried), then the cp view's parts. The queries are the config's seq.
  bool cp = s.cp_size > 1;
  size_t rows = (size_t)(s.batch * s.heads * config->seq);
  size_t outn = (size_t)(s.batch * config->seq * s.heads * s.head_dim);
  enum { kParts = 2 + kViewParts };
  size_t sizes[kParts] = {cp ? 0 : 4 * rows, cp ? 0 : 2 * outn};
  view_sizes(&s, seg != NULL, false, sizes + 2);
  void *scratch, *part[kParts] = {NULL};
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, carve(NULL, sizes, kParts, NULL), &scratch));
  carve(scratch, sizes, kParts, part);
  kv_view w;
  SRT_RETURN_IF_ERROR(kv_view_init(d, op, &s, cu_bf16(e, k), cu_bf16(e, v), seg, part + 2, &w));
  return forward(d, &s, cu_bf16(e, q), w.k, w.v, w.seg, cu_bf16(e, out), cu_f32(e, lse),
                 part[1], part[0]);
}

// The backward's kernels into dq and (token order) dk, dv: cuDNN when
// supported (never under cp) and checked once against our kernel, for which
// `check` holds scratch dq, dk, dv of their sizes; else our kernel.
static srt_status backward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                           const srt_bf16 *const in[3], const float *L, float *delta,
                           const kv_view *w, srt_bf16 *dQ, srt_bf16 *dK, srt_bf16 *dV,
                           srt_bf16 *const check[3], int64_t qn, int64_t kn) {
  const srt_bf16 *Q = in[0], *o = in[1], *dO = in[2], *K = w->k, *V = w->v;
  int slot;
  bool supported = false;
  if (!w->seg && s->cp_size <= 1 && try_cudnn(d, s, 1, &slot))
    SRT_RETURN_IF_ERROR(
        srt_cudnn_attention_backward(d, s, Q, K, V, o, dO, L, dQ, dK, dV, &supported));
  if (supported && d->checked_ok[slot][1] == 1)
    return NULL;
  bool compare = supported;
  srt_bf16 *rdq = check[0], *rdk = check[1], *rdv = check[2];
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_attention_backward(
      compare ? rdq : dQ, compare ? rdk : dK, compare ? rdv : dV, dO, Q, K, V, o, L, delta,
      w->seg, s, d->compute)));
  if (!compare)
    return NULL;
  double eq, ek, ev;
  SRT_RETURN_IF_ERROR(rel_err(d, dQ, rdq, qn, 2, false, &eq));
  SRT_RETURN_IF_ERROR(rel_err(d, dK, rdk, kn, 2, false, &ek));
  SRT_RETURN_IF_ERROR(rel_err(d, dV, rdv, kn, 2, false, &ev));
  double err = fmax(eq, fmax(ek, ev));
  d->checked_ok[slot][1] = err < kAgree ? 1 : -1;
  report(d, s, "backward", err);
  if (err >= kAgree) {
    SRT_CUDA_CHECK(cudaMemcpyAsync(dQ, rdq, (size_t)qn * 2, cudaMemcpyDeviceToDevice, d->compute));
    SRT_CUDA_CHECK(cudaMemcpyAsync(dK, rdk, (size_t)kn * 2, cudaMemcpyDeviceToDevice, d->compute));
    SRT_CUDA_CHECK(cudaMemcpyAsync(dV, rdv, (size_t)kn * 2, cudaMemcpyDeviceToDevice, d->compute));
  }
  return NULL;
}

srt_status srt_cuda_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                      int64_t out, int64_t lse, int64_t dy,
                                      int64_t segment_ids, int64_t dq, int64_t dk, int64_t dv,
                                      const srt_op_attention_config *config) {
  const char *op = "srt_cuda_op_attention_grad";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  srt_cuda_attention_shape s;
  SRT_RETURN_IF_ERROR(shape_of(e, d, op, config, &s));
  const int64_t *seg = segment_ids >= 0 && !e->one_document ? cu_i64(e, segment_ids) : NULL;
  // Scratch: delta [rows] fp32; the check's dq [q elements] and dk, dv [kv
  // elements] bf16 (none under cp); the cp view's parts. The queries are
  // the config's seq, the keys the shape's.
  bool cp = s.cp_size > 1;
  size_t rows = (size_t)(s.batch * s.heads * config->seq);
  size_t qn = (size_t)(s.batch * config->seq * s.heads * s.head_dim);
  size_t kn = (size_t)(s.batch * s.seq * s.kv_heads * s.head_dim);
  enum { kParts = 4 + kViewParts };
  size_t sizes[kParts] = {4 * rows, cp ? 0 : 2 * qn, cp ? 0 : 2 * kn, cp ? 0 : 2 * kn};
  view_sizes(&s, seg != NULL, true, sizes + 4);
  void *scratch, *part[kParts] = {NULL};
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, carve(NULL, sizes, kParts, NULL), &scratch));
  carve(scratch, sizes, kParts, part);
  kv_view w;
  SRT_RETURN_IF_ERROR(kv_view_init(d, op, &s, cu_bf16(e, k), cu_bf16(e, v), seg, part + 4, &w));
  // Under cp the whole sequence's dK, dV go to scratch (token order) first.
  srt_bf16 *dK = cp ? part[4 + kViewStaging] : cu_bf16(e, dk);
  srt_bf16 *dV = cp ? part[4 + kViewDv] : cu_bf16(e, dv);
  const srt_bf16 *in[3] = {cu_bf16(e, q), cu_bf16(e, out), cu_bf16(e, dy)};
  srt_bf16 *const check[3] = {part[1], part[2], part[3]};
  SRT_RETURN_IF_ERROR(backward(d, &s, in, cu_f32(e, lse), part[0], &w, cu_bf16(e, dq), dK, dV,
                               check, (int64_t)qn, (int64_t)kn));
  if (!cp)
    return NULL;
  return scatter_grads(d, op, &s, &w, cu_bf16(e, dk), cu_bf16(e, dv));
}
