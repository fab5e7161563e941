// Attention ops of the cpu backend (shardrt/cpu.h): forward and backward over the
// CPU kernel, including replicated-KV attention, where this rank holds a
// slice of the query heads but every KV head. There a query head's KV head
// follows from its GLOBAL index, so the local heads are taken in runs that
// share one KV head: each run's q (and that KV head's k, v) is gathered
// into contiguous scratch, run through the kernel with one KV head, and
// scattered back. The backward writes this rank's contribution to dk/dv
// (zero for KV heads none of its query heads reads): Partial over the axis.
//
// The forward writes out and the log-sum-exp lse [B, H, S]; the backward
// reads both (it does not run the forward again).
//
// Under context parallelism (config cp_size > 1) q, out, lse, dy and dq
// are this cp rank's local rows (its two chunks of each sequence,
// shardrt/cp.h) while k, v and the segment ids are all-gathered over the
// cp group into the token order; the backward's dk and dv for the whole
// sequence are reduce-scattered back to the local rows (Llama 3's
// all-gather context parallelism: the masks stay on global indices, and
// GQA sends only the KV heads). The backward gathers again rather than
// keeping the forward's gathered K/V alive in between. The bf16 backend's
// K, V, dK and dV are bf16 (ops_attention): they move as bf16, as on cuda
// (K, V widened after the gather; dK, dV rounded before their bf16 sum).
//
// Scratch (the context's op scratch, no allocation after the first step):
// the kernel workspace; under cp the gathered k, v, segment ids, and for
// the backward their gradients, plus one staging buffer; replicated KV
// adds a run's gathered lse [B, n, Sq], q/out/dy/dq [B, Sq, n*hd] and
// k/v/dk/dv [B, S, hd].
#include <stdbool.h>
#include <string.h>

#include "ops_internal.h"
#include "shardrt/context.h"
#include "shardrt/cp.h"
#include "shardrt/kernels.h"
#include "shardrt/op_facts.h"

// One run of local query heads [h0, h0 + count) reading KV head `kv`.
typedef struct head_run {
  int64_t h0, count, kv;
} head_run;

// The op's view of K/V: the whole sequence under cp (gathered), else the
// buffers themselves.
typedef struct kv_view {
  int cp, cp_rank;
  int64_t seq;          // keys per row: the config's seq x cp
  const float *k, *v;   // [B, seq, KV * hd]
  const int64_t *seg;   // [B, seq], or NULL
  float *staging;       // [cp, B, local seq, KV * hd] for the moves (cp > 1)
  float *free;          // scratch after the view's buffers
} kv_view;

// The kernel configuration of `c` with `heads` query and `kv` KV heads.
static srt_attention_config kernel_config(const srt_op_attention_config *c, const kv_view *w,
                                          int64_t heads, int64_t kv) {
  return (srt_attention_config){.batch = c->batch,
                                .seq = w->seq,
                                .heads = heads,
                                .kv_heads = kv,
                                .head_dim = c->head_dim,
                                .causal = c->causal != 0,
                                .scale = (float)c->scale,
                                .sliding_window = c->sliding_window,
                                .softcap = (float)c->softcap,
                                .cp_size = w->cp,
                                .cp_rank = w->cp_rank};
}

// Floats of scratch the view takes: under cp, the gathered k and v, the
// segment ids (int64: 2 floats each), `grads` (0 or 2) more K/V-sized
// buffers (the backward's dk and dv) and the staging buffer, as the
// compiler's memory report counts them (srt_attention_cp_scratch_bytes).
static int64_t view_floats(const srt_op_attention_config *c, int cp, int segments, int grads) {
  return srt_attention_cp_scratch_bytes(c->batch, c->seq, cp, c->num_kv_heads * c->head_dim,
                                        segments != 0, grads != 0, false) / 4;
}

// The K/V view of this rank (the cp all-gathers happen here, of K and V
// of element type `kv`) in `scratch`.
static srt_status kv_view_init(srt_exec *e, const srt_op_attention_config *c, int64_t k,
                               int64_t v, int64_t segment_ids, int grads, srt_dtype kv,
                               float *scratch, kv_view *w) {
  const int64_t *seg = segment_ids >= 0 ? ops_i64(e, segment_ids) : NULL;
  *w = (kv_view){.cp = 1, .seq = c->seq, .k = ops_f32(e, k), .v = ops_f32(e, v), .seg = seg,
                 .free = scratch};
  if (c->cp_size <= 1)
    return NULL;
  srt_group *g = srt_context_group(e->ctx, SRT_GROUP_CP);
  if (srt_group_size(g) != c->cp_size || c->cp_size > SRT_MAX_CP)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "attention: the step was compiled for cp %lld, but the cp group has %d "
                     "ranks (at most %d)",
                     (long long)c->cp_size, srt_group_size(g), SRT_MAX_CP);
  int64_t row = c->num_kv_heads * c->head_dim, n = c->batch * c->seq * c->cp_size * row;
  w->cp = (int)c->cp_size;
  w->cp_rank = srt_group_rank(g);
  w->seq = c->seq * c->cp_size;
  float *kg = scratch, *vg = kg + n;
  w->staging = vg + (1 + grads) * n;
  int64_t *sg = seg ? (int64_t *)(void *)(w->staging + n) : NULL;
  w->free = w->staging + n + (seg ? 2 * c->batch * w->seq : 0);
  SRT_RETURN_IF_ERROR(
      ops_cp_gather_f32(g, e->arena + k, kg, w->staging, kv, c->batch, w->seq, row));
  SRT_RETURN_IF_ERROR(
      ops_cp_gather_f32(g, e->arena + v, vg, w->staging, kv, c->batch, w->seq, row));
  if (seg)
    SRT_RETURN_IF_ERROR(ops_cp_all_gather(g, seg, sg, w->staging, SRT_I64, c->batch, w->seq, 1));
  w->k = kg;
  w->v = vg;
  w->seg = sg;
  return NULL;
}

// Reduce-scatters the whole sequence's `grad` [B, S, KV * hd] (this rank's
// share of every key's gradient) over cp into the local rows at arena
// offset `out`, of element type `dtype`.
static srt_status scatter_grad(srt_exec *e, const srt_op_attention_config *c, const kv_view *w,
                               const float *grad, int64_t out, srt_dtype dtype) {
  return ops_cp_scatter_f32(srt_context_group(e->ctx, SRT_GROUP_CP), grad, e->arena + out,
                            w->staging, dtype, c->batch, w->seq, c->num_kv_heads * c->head_dim);
}

// K and V of `kv` other than fp32 only under cp (the bf16 backend's).
static srt_status check_kv(const char *op, const srt_op_attention_config *c, srt_dtype kv) {
  if (kv != SRT_F32 && (kv != SRT_BF16 || c->cp_size <= 1))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: K/V of dtype %s with cp %lld (fp32, or bf16 under cp)", op,
                     srt_dtype_name(kv), (long long)c->cp_size);
  return NULL;
}

// The next run of local heads starting at h0 (replicated KV).
static head_run next_run(const srt_op_attention_config *c, int64_t first_head, int64_t group,
                         int64_t h0) {
  int64_t kv = (first_head + h0) / group;
  int64_t end = (kv + 1) * group - first_head; // first local head of the next KV head
  if (end > c->num_heads)
    end = c->num_heads;
  return (head_run){h0, end - h0, kv};
}

// Copies heads [h0, h0 + count) of lse [batch, heads, seq] to part
// [batch, count, seq] (gather) or back (scatter, when `to_full`).
static void move_lse(float *full, float *part, int64_t batch, int64_t heads, int64_t seq,
                     int64_t h0, int64_t count, int to_full) {
  size_t bytes = (size_t)(count * seq) * sizeof(float);
  for (int64_t b = 0; b < batch; ++b) {
    float *f = full + (b * heads + h0) * seq, *p = part + b * count * seq;
    if (to_full)
      memcpy(f, p, bytes);
    else
      memcpy(p, f, bytes);
  }
}

// Copies heads [h0, h0 + count) of src [rows, heads * hd] to dst [rows, count * hd]
// (gather) or back (scatter, when `to_full`).
static void move_heads(float *full, float *part, int64_t rows, int64_t heads, int64_t hd,
                       int64_t h0, int64_t count, int to_full) {
  size_t bytes = (size_t)(count * hd) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    float *f = full + r * heads * hd + h0 * hd, *p = part + r * count * hd;
    if (to_full)
      memcpy(f, p, bytes);
    else
      memcpy(p, f, bytes);
  }
}

// The op's scratch: the kernel workspace (*ws floats) first, then the K/V
// view's buffers (`grads` 0 in the forward, 2 in the backward), then
// replicated KV's per-run copies: the lse, 2 + grads q-sized and as many
// K/V-head-sized buffers.
static srt_status op_scratch(srt_exec *e, const srt_op_attention_config *c, int64_t segment_ids,
                             int grads, float **scratch, int64_t *ws) {
  int cp = c->cp_size > 1 ? (int)c->cp_size : 1;
  kv_view probe = {.cp = cp, .seq = c->seq * cp};
  srt_attention_config kc = kernel_config(c, &probe, c->num_heads, c->num_kv_heads);
  *ws = srt_cpu_attention_workspace_floats(&kc);
  int64_t qrows = c->batch * c->seq, copies = 2 + grads;
  int64_t runs = c->q_head_offset_axis < 0
                     ? 0
                     : c->batch * c->num_heads * c->seq +
                           copies * (qrows * c->num_heads + qrows * cp) * c->head_dim;
  return ops_scratch(e, *ws + view_floats(c, cp, segment_ids >= 0, grads) + runs, scratch);
}

srt_status ops_attention(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t segment_ids,
                         int64_t out, int64_t lse, const srt_op_attention_config *config,
                         srt_dtype kv) {
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, "srt_cpu_op_attention", config, &heads));
  SRT_RETURN_IF_ERROR(check_kv("srt_cpu_op_attention", config, kv));
  int64_t first = heads.first_head, group = heads.group;
  const srt_op_attention_config *c = config;
  int cp = c->cp_size > 1 ? (int)c->cp_size : 1;
  int64_t B = c->batch, Sq = c->seq, qrows = B * Sq, krows = qrows * cp, H = c->num_heads;
  int64_t hd = c->head_dim, KV = c->num_kv_heads, lse_n = B * H * Sq;
  int64_t qn = qrows * H * hd, kn = krows * hd, ws;
  bool replicated = c->q_head_offset_axis >= 0;
  float *scratch;
  SRT_RETURN_IF_ERROR(op_scratch(e, c, segment_ids, 0, &scratch, &ws));
  kv_view w;
  SRT_RETURN_IF_ERROR(kv_view_init(e, c, k, v, segment_ids, 0, kv, scratch + ws, &w));
  srt_attention_config kc = kernel_config(c, &w, H, KV);
  if (!replicated)
    return srt_cpu_attention_forward(ops_f32(e, out), ops_f32(e, lse), ops_f32(e, q), w.k, w.v,
                                     w.seg, scratch, &kc);
  // Replicated KV: per run, gathered lse, q [qrows, n*hd], out, k, v [krows, hd].
  float *ls = w.free, *qs = ls + lse_n, *os = qs + qn, *ks = os + qn, *vs = ks + kn;
  for (int64_t h0 = 0; h0 < H;) {
    head_run run = next_run(c, first, group, h0);
    move_heads(ops_f32(e, q), qs, qrows, H, hd, run.h0, run.count, 0);
    move_heads((float *)w.k, ks, krows, KV, hd, run.kv, 1, 0);
    move_heads((float *)w.v, vs, krows, KV, hd, run.kv, 1, 0);
    srt_attention_config rc = kernel_config(c, &w, run.count, 1);
    SRT_RETURN_IF_ERROR(srt_cpu_attention_forward(os, ls, qs, ks, vs, w.seg, scratch, &rc));
    move_heads(ops_f32(e, out), os, qrows, H, hd, run.h0, run.count, 1);
    move_lse(ops_f32(e, lse), ls, B, H, Sq, run.h0, run.count, 1);
    h0 += run.count;
  }
  return NULL;
}

srt_status srt_cpu_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                int64_t segment_ids, int64_t out, int64_t lse,
                                const srt_op_attention_config *config) {
  return ops_attention(e, q, k, v, segment_ids, out, lse, config, SRT_F32);
}

// Replicated KV's backward: per run of local heads sharing one KV head,
// gathered lse, q, out, dy, dq [qrows, n*hd] and k, v, dk, dv [krows, hd];
// KV heads no local query head reads get zero in dkw, dvw [krows, KV*hd].
static srt_status replicated_grad(srt_exec *e, const srt_op_attention_config *c,
                                  const srt_attention_heads *heads, const kv_view *w,
                                  float *scratch, const int64_t io[6], float *dkw, float *dvw) {
  int64_t B = c->batch, Sq = c->seq, qrows = B * Sq, krows = qrows * w->cp, H = c->num_heads;
  int64_t hd = c->head_dim, KV = c->num_kv_heads, lse_n = B * H * Sq;
  int64_t qn = qrows * H * hd, kn = krows * hd;
  float *ls = w->free, *qs = ls + lse_n, *os = qs + qn, *dys = os + qn, *dqs = dys + qn,
        *ks = dqs + qn, *vs = ks + kn, *dks = vs + kn, *dvs = dks + kn;
  memset(dkw, 0, (size_t)(krows * KV * hd) * sizeof(float));
  memset(dvw, 0, (size_t)(krows * KV * hd) * sizeof(float));
  for (int64_t h0 = 0; h0 < H;) {
    head_run run = next_run(c, heads->first_head, heads->group, h0);
    move_heads(ops_f32(e, io[0]), qs, qrows, H, hd, run.h0, run.count, 0);
    move_heads(ops_f32(e, io[1]), os, qrows, H, hd, run.h0, run.count, 0);
    move_heads(ops_f32(e, io[2]), dys, qrows, H, hd, run.h0, run.count, 0);
    move_lse(ops_f32(e, io[3]), ls, B, H, Sq, run.h0, run.count, 0);
    move_heads((float *)w->k, ks, krows, KV, hd, run.kv, 1, 0);
    move_heads((float *)w->v, vs, krows, KV, hd, run.kv, 1, 0);
    srt_attention_config rc = kernel_config(c, w, run.count, 1);
    SRT_RETURN_IF_ERROR(
        srt_cpu_attention_backward(dqs, dks, dvs, dys, qs, ks, vs, os, ls, w->seg, scratch, &rc));
    move_heads(ops_f32(e, io[4]), dqs, qrows, H, hd, run.h0, run.count, 1);
    // Runs are maximal, so each KV head gets at most one run's gradient.
    move_heads(dkw, dks, krows, KV, hd, run.kv, 1, 1);
    move_heads(dvw, dvs, krows, KV, hd, run.kv, 1, 1);
    h0 += run.count;
  }
  return NULL;
}

srt_status ops_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t out,
                              int64_t lse, int64_t dy, int64_t segment_ids, int64_t dq,
                              int64_t dk, int64_t dv, const srt_op_attention_config *config,
                              srt_dtype kv) {
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, "srt_cpu_op_attention_grad", config, &heads));
  SRT_RETURN_IF_ERROR(check_kv("srt_cpu_op_attention_grad", config, kv));
  const srt_op_attention_config *c = config;
  int cp = c->cp_size > 1 ? (int)c->cp_size : 1;
  int64_t krows = c->batch * c->seq * cp, KV = c->num_kv_heads, hd = c->head_dim, ws;
  bool replicated = c->q_head_offset_axis >= 0;
  float *scratch;
  SRT_RETURN_IF_ERROR(op_scratch(e, c, segment_ids, 2, &scratch, &ws));
  kv_view w;
  SRT_RETURN_IF_ERROR(kv_view_init(e, c, k, v, segment_ids, 2, kv, scratch + ws, &w));
  srt_attention_config kc = kernel_config(c, &w, c->num_heads, KV);
  // The whole sequence's dk, dv under cp (after the gathered k, v), else the outputs.
  int64_t kv_n = krows * KV * hd;
  float *dkw = cp > 1 ? (float *)w.v + kv_n : ops_f32(e, dk);
  float *dvw = cp > 1 ? dkw + kv_n : ops_f32(e, dv);
  if (!replicated)
    SRT_RETURN_IF_ERROR(srt_cpu_attention_backward(ops_f32(e, dq), dkw, dvw, ops_f32(e, dy),
                                                   ops_f32(e, q), w.k, w.v, ops_f32(e, out),
                                                   ops_f32(e, lse), w.seg, scratch, &kc));
  else
    SRT_RETURN_IF_ERROR(replicated_grad(e, c, &heads, &w, scratch,
                                        (const int64_t[6]){q, out, dy, lse, dq, 0}, dkw, dvw));
  if (cp == 1)
    return NULL;
  SRT_RETURN_IF_ERROR(scatter_grad(e, c, &w, dkw, dk, kv));
  return scatter_grad(e, c, &w, dvw, dv, kv);
}

srt_status srt_cpu_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                     int64_t out, int64_t lse, int64_t dy,
                                     int64_t segment_ids, int64_t dq, int64_t dk, int64_t dv,
                                     const srt_op_attention_config *config) {
  return ops_attention_grad(e, q, k, v, out, lse, dy, segment_ids, dq, dk, dv, config, SRT_F32);
}
