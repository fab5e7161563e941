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
// Scratch (the context's op scratch, no allocation after the first step):
// the kernel workspace; replicated KV adds a run's gathered lse [B, n, S],
// q/out/dy/dq [B, S, n*hd] and k/v/dk/dv [B, S, hd].
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

// One run of local query heads [h0, h0 + count) reading KV head `kv`.
typedef struct head_run {
  int64_t h0, count, kv;
} head_run;

// The kernel configuration of `c` with `heads` query and `kv` KV heads.
static srt_attention_config kernel_config(const srt_op_attention_config *c, int64_t heads,
                                          int64_t kv) {
  return (srt_attention_config){.batch = c->batch,
                                .seq = c->seq,
                                .heads = heads,
                                .kv_heads = kv,
                                .head_dim = c->head_dim,
                                .causal = c->causal != 0,
                                .scale = (float)c->scale,
                                .sliding_window = c->sliding_window,
                                .softcap = (float)c->softcap};
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

srt_status srt_cpu_op_attention(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                int64_t segment_ids, int64_t out, int64_t lse,
                                const srt_op_attention_config *config) {
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, "srt_cpu_op_attention", config, &heads));
  int64_t first = heads.first_head, group = heads.group;
  const srt_op_attention_config *c = config;
  int64_t B = c->batch, S = c->seq, rows = B * S, H = c->num_heads, hd = c->head_dim;
  srt_attention_config kc = kernel_config(c, H, c->num_kv_heads);
  int64_t ws = srt_cpu_attention_workspace_floats(&kc), lse_n = B * H * S;
  const int64_t *seg = segment_ids >= 0 ? ops_i64(e, segment_ids) : NULL;
  float *scratch;
  if (c->q_head_offset_axis < 0) {
    SRT_RETURN_IF_ERROR(ops_scratch(e, ws, &scratch));
    return srt_cpu_attention_forward(ops_f32(e, out), ops_f32(e, lse), ops_f32(e, q),
                                     ops_f32(e, k), ops_f32(e, v), seg, scratch, &kc);
  }
  // Replicated KV: per run, gathered lse, q [rows, n*hd], out, k, v [rows, hd].
  int64_t qn = rows * H * hd, kn = rows * hd;
  SRT_RETURN_IF_ERROR(ops_scratch(e, ws + lse_n + 2 * qn + 2 * kn, &scratch));
  float *ls = scratch + ws, *qs = ls + lse_n, *os = qs + qn, *ks = os + qn, *vs = ks + kn;
  for (int64_t h0 = 0; h0 < H;) {
    head_run run = next_run(c, first, group, h0);
    move_heads(ops_f32(e, q), qs, rows, H, hd, run.h0, run.count, 0);
    move_heads(ops_f32(e, k), ks, rows, c->num_kv_heads, hd, run.kv, 1, 0);
    move_heads(ops_f32(e, v), vs, rows, c->num_kv_heads, hd, run.kv, 1, 0);
    srt_attention_config rc = kernel_config(c, run.count, 1);
    SRT_RETURN_IF_ERROR(srt_cpu_attention_forward(os, ls, qs, ks, vs, seg, scratch, &rc));
    move_heads(ops_f32(e, out), os, rows, H, hd, run.h0, run.count, 1);
    move_lse(ops_f32(e, lse), ls, B, H, S, run.h0, run.count, 1);
    h0 += run.count;
  }
  return NULL;
}

srt_status srt_cpu_op_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v,
                                     int64_t out, int64_t lse, int64_t dy,
                                     int64_t segment_ids, int64_t dq, int64_t dk, int64_t dv,
                                     const srt_op_attention_config *config) {
  srt_attention_heads heads;
  SRT_RETURN_IF_ERROR(srt_check_attention(e, "srt_cpu_op_attention_grad", config, &heads));
  int64_t first = heads.first_head, group = heads.group;
  const srt_op_attention_config *c = config;
  int64_t B = c->batch, S = c->seq, rows = B * S, H = c->num_heads, hd = c->head_dim;
  srt_attention_config kc = kernel_config(c, H, c->num_kv_heads);
  int64_t ws = srt_cpu_attention_workspace_floats(&kc), lse_n = B * H * S;
  int64_t qn = rows * H * hd, kn = rows * hd;
  const int64_t *seg = segment_ids >= 0 ? ops_i64(e, segment_ids) : NULL;
  float *scratch;
  if (c->q_head_offset_axis < 0) {
    SRT_RETURN_IF_ERROR(ops_scratch(e, ws, &scratch));
    return srt_cpu_attention_backward(ops_f32(e, dq), ops_f32(e, dk), ops_f32(e, dv),
                                      ops_f32(e, dy), ops_f32(e, q), ops_f32(e, k),
                                      ops_f32(e, v), ops_f32(e, out), ops_f32(e, lse), seg,
                                      scratch, &kc);
  }
  // Replicated KV: gathered lse, q, out, dy, dq [rows, n*hd] and k, v, dk,
  // dv [rows, hd] per run; KV heads no local query head reads get zero.
  SRT_RETURN_IF_ERROR(ops_scratch(e, ws + lse_n + 4 * qn + 4 * kn, &scratch));
  float *ls = scratch + ws, *qs = ls + lse_n, *os = qs + qn, *dys = os + qn, *dqs = dys + qn,
        *ks = dqs + qn, *vs = ks + kn, *dks = vs + kn, *dvs = dks + kn;
  int64_t kv_floats = rows * c->num_kv_heads * hd;
  memset(ops_f32(e, dk), 0, (size_t)kv_floats * sizeof(float));
  memset(ops_f32(e, dv), 0, (size_t)kv_floats * sizeof(float));
  for (int64_t h0 = 0; h0 < H;) {
    head_run run = next_run(c, first, group, h0);
    move_heads(ops_f32(e, q), qs, rows, H, hd, run.h0, run.count, 0);
    move_heads(ops_f32(e, out), os, rows, H, hd, run.h0, run.count, 0);
    move_heads(ops_f32(e, dy), dys, rows, H, hd, run.h0, run.count, 0);
    move_lse(ops_f32(e, lse), ls, B, H, S, run.h0, run.count, 0);
    move_heads(ops_f32(e, k), ks, rows, c->num_kv_heads, hd, run.kv, 1, 0);
    move_heads(ops_f32(e, v), vs, rows, c->num_kv_heads, hd, run.kv, 1, 0);
    srt_attention_config rc = kernel_config(c, run.count, 1);
    SRT_RETURN_IF_ERROR(
        srt_cpu_attention_backward(dqs, dks, dvs, dys, qs, ks, vs, os, ls, seg, scratch, &rc));
    move_heads(ops_f32(e, dq), dqs, rows, H, hd, run.h0, run.count, 1);
    // Runs are maximal, so each KV head gets at most one run's gradient.
    move_heads(ops_f32(e, dk), dks, rows, c->num_kv_heads, hd, run.kv, 1, 1);
    move_heads(ops_f32(e, dv), dvs, rows, c->num_kv_heads, hd, run.kv, 1, 1);
    h0 += run.count;
  }
  return NULL;
}
