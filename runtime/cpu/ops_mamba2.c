// The Mamba2 mixer ops of the cpu backend: srt_cpu_mamba2_forward and
// _backward on arena buffers, their workspace in the context's op scratch
// (grown once, reused every step). segment_ids: the arena offset of the
// int64 [batch, seq] document ids, or -1 (each row one document).
//
// Context parallelism (cp > 1): the op holds one cp rank's chunk rows
// (shardrt/cp.h), but the conv and the scan run along the whole sequence.
// So the input (and the segment ids) are all-gathered over cp into token
// order, and this rank runs the mixer over the whole sequence for its 1/cp
// of the heads with their B/C groups: the head split of Megatron-LM's
// tensor parallelism (in_proj's rows part by part, conv channels, dt_bias,
// A_log, D and the norm per head, out_proj's columns), taken from the
// weights at run time. Its output is this rank's heads' share of every
// token, reduce-scattered back to the ranks' rows; in the backward dout is
// all-gathered, dx reduce-scattered, and each weight gradient holds its
// heads' rows (zero elsewhere), which the gradients' reduction over dp x cp
// sums. Per layer and rank this receives (cp - 1) x the local input twice
// (gather, reduce-scatter) where an all-to-all of the projections would
// move (cp - 1) / cp x their 2 x inner + 2 x groups x state + heads columns
// (NVIDIA Automodel's hidden-parallel scheme): fewer bytes up to cp 3 for
// NemotronH's proportions, and the tested head-split kernel unchanged.
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

srt_mamba2_config ops_mamba2_config(int64_t batch, int64_t seq, int64_t hidden, int64_t heads,
                                    int64_t head_dim, int64_t groups, int64_t state,
                                    int64_t conv_kernel, int64_t chunk, double eps,
                                    double dt_min) {
  return (srt_mamba2_config){.batch = batch, .seq = seq, .hidden = hidden, .heads = heads,
                             .head_dim = head_dim, .groups = groups, .state = state,
                             .conv_kernel = conv_kernel, .chunk = chunk, .eps = (float)eps,
                             .dt_min = (float)dt_min, .dt_max = INFINITY};
}

static const int64_t *segment_ids_of(srt_exec *e, int64_t off) {
  return off >= 0 ? ops_i64(e, off) : NULL;
}

static srt_status workspace(srt_exec *e, const srt_mamba2_config *c, bool backward,
                            const char *op, float **ws) {
  int64_t floats = srt_cpu_mamba2_workspace_floats(c, backward);
  if (floats < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: sizes batch %lld seq %lld heads %lld head_dim %lld groups %lld state "
                     "%lld chunk %lld have no workspace",
                     op, (long long)c->batch, (long long)c->seq, (long long)c->heads,
                     (long long)c->head_dim, (long long)c->groups, (long long)c->state,
                     (long long)c->chunk);
  return ops_scratch(e, floats, ws);
}

// The weights in the order of srt_mamba2_weights / srt_mamba2_grads.
enum { kInProj, kConvW, kConvB, kDtBias, kALog, kD, kNormW, kOutProj, kWeights };

// Moves this cp rank's heads' share of weight `k` between the whole
// (local) weight `full` and the packed `sub`: each weight is a list of
// parts (in_proj's rows z | x | B | C | dt; the conv's channels x | B | C;
// one part per head quantity), each part split evenly over cp, and rank c
// takes the c-th piece of every part, `row` floats per element; out_proj
// [hidden, inner] takes columns, row by row. `to_full` writes into full.
static void move_share(int k, const srt_mamba2_config *c, int cp, int rank, float *full,
                       float *sub, bool to_full) {
  int64_t inner = c->heads * c->head_dim, gn = c->groups * c->state;
  int64_t parts[5] = {inner, inner, gn, gn, c->heads}, n = 5, row = c->hidden, rows = 1;
  if (k == kConvW || k == kConvB) {
    parts[0] = inner, parts[1] = gn, parts[2] = gn, n = 3;
    row = k == kConvW ? c->conv_kernel : 1;
  } else if (k != kInProj) { // per head or per inner channel
    parts[0] = k == kNormW || k == kOutProj ? inner : c->heads, n = 1, row = 1;
    rows = k == kOutProj ? c->hidden : 1;
  }
  int64_t full_row = 0, sub_row = 0;
  for (int64_t i = 0; i < n; ++i)
    full_row += parts[i], sub_row += parts[i] / cp;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0, sub_at = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t piece = parts[i] / cp;
      float *f = full + (r * full_row + at + rank * piece) * row;
      float *s = sub + (r * sub_row + sub_at) * row;
      memcpy(to_full ? f : s, to_full ? s : f, (size_t)(piece * row) * sizeof(float));
      at += parts[i];
      sub_at += piece;
    }
  }
}

// Floats of weight k's share (a 1/cp of the weight).
static int64_t share_floats(int k, const srt_mamba2_config *c, int cp) {
  int64_t inner = c->heads * c->head_dim, conv = inner + 2 * c->groups * c->state;
  const int64_t n[kWeights] = {(inner + conv + c->heads) * c->hidden, conv * c->conv_kernel,
                               conv, c->heads, c->heads, c->heads, inner, c->hidden * inner};
  return n[k] / cp;
}

void ops_mamba2_weight_counts(const srt_mamba2_config *c, int64_t counts[8]) {
  for (int k = 0; k < kWeights; ++k)
    counts[k] = share_floats(k, c, 1);
}

// This rank's cp view: the whole sequence gathered (x, and the segment ids
// when given) and its heads' weights packed, in `scratch` after the kernel
// workspace; `sub` is the mixer of its heads over the whole sequence.
typedef struct cp_view {
  srt_mamba2_config sub;
  srt_group *group;
  float *ws, *x, *staging, *free;
  const int64_t *seg;
  srt_mamba2_weights w;
  float *packed[kWeights];
} cp_view;

static srt_status cp_view_init(srt_exec *e, const srt_mamba2_config *c, const int64_t *weights,
                               int64_t x, int64_t segment_ids, int cp, int64_t extra,
                               bool backward, srt_dtype dtype, cp_view *v) {
  v->group = srt_context_group(e->ctx, SRT_GROUP_CP);
  if (srt_group_size(v->group) != cp || c->heads % cp || c->groups % cp)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "mamba2 mixer: compiled for cp %d with %lld heads and %lld groups on this "
                     "rank: the cp group has %d ranks, and cp must divide heads and groups",
                     cp, (long long)c->heads, (long long)c->groups, srt_group_size(v->group));
  v->sub = *c;
  v->sub.seq = c->seq * cp;
  v->sub.heads = c->heads / cp;
  v->sub.groups = c->groups / cp;
  int64_t wsf = srt_cpu_mamba2_workspace_floats(&v->sub, backward), tokens = c->batch * v->sub.seq;
  int64_t act = tokens * c->hidden, packed = 0;
  for (int k = 0; k < kWeights; ++k)
    packed += share_floats(k, c, cp);
  float *s;
  SRT_RETURN_IF_ERROR(ops_scratch(e, wsf + 2 * act + 2 * tokens + packed * (backward ? 2 : 1) +
                                         extra * act, &s));
  v->ws = s;
  v->x = s + wsf;
  v->staging = v->x + act;
  int64_t *seg = (int64_t *)(void *)(v->staging + act);
  v->seg = segment_ids >= 0 ? seg : NULL;
  float *at = v->staging + act + 2 * tokens;
  const float **wp[kWeights] = {&v->w.in_proj, &v->w.conv_w, &v->w.conv_b, &v->w.dt_bias,
                                &v->w.A_log, &v->w.D, &v->w.norm_w, &v->w.out_proj};
  int rank = srt_group_rank(v->group);
  for (int k = 0; k < kWeights; ++k) {
    move_share(k, c, cp, rank, ops_f32(e, weights[k]), at, false);
    *wp[k] = v->packed[k] = at;
    at += share_floats(k, c, cp);
  }
  v->free = at;
  SRT_RETURN_IF_ERROR(ops_cp_gather_f32(v->group, e->arena + x, v->x, v->staging, dtype,
                                        c->batch, v->sub.seq, c->hidden));
  if (segment_ids >= 0)
    SRT_RETURN_IF_ERROR(ops_cp_all_gather(v->group, ops_i64(e, segment_ids), seg, v->staging,
                                          SRT_I64, c->batch, v->sub.seq, 1));
  return NULL;
}

// The forward under cp (weights: the arena offsets of the 9 inputs but
// segment_ids, in srt_mamba2_weights' order after x).
static srt_status cp_forward(srt_exec *e, const srt_mamba2_config *c, const int64_t *in,
                             int64_t segment_ids, int cp, int64_t out, srt_dtype dtype) {
  cp_view v;
  SRT_RETURN_IF_ERROR(cp_view_init(e, c, in + 1, in[0], segment_ids, cp, 1, false, dtype, &v));
  float *partial = v.free; // this rank's heads' share of every token's output
  SRT_RETURN_IF_ERROR(srt_cpu_mamba2_forward(partial, v.x, v.seg, &v.w, v.ws, &v.sub));
  return ops_cp_scatter_f32(v.group, partial, e->arena + out, v.staging, dtype, c->batch,
                            v.sub.seq, c->hidden);
}

// The backward under cp: grads (zeroed by the caller) get this rank's
// heads' rows.
static srt_status cp_backward(srt_exec *e, const srt_mamba2_config *c, const int64_t *in,
                              int64_t segment_ids, int cp, int64_t dout, int64_t dx,
                              const int64_t *grads, srt_dtype dtype) {
  cp_view v;
  SRT_RETURN_IF_ERROR(cp_view_init(e, c, in + 1, in[0], segment_ids, cp, 2, true, dtype, &v));
  int64_t act = c->batch * v.sub.seq * c->hidden, at = 0;
  float *gp[kWeights], *dy = v.free + act, *dx_all = v.free; // after the packed grads
  for (int k = 0; k < kWeights; ++k) {
    gp[k] = dy + act + at;
    at += share_floats(k, c, cp);
  }
  memset(gp[0], 0, (size_t)at * sizeof(float));
  SRT_RETURN_IF_ERROR(ops_cp_gather_f32(v.group, e->arena + dout, dy, v.staging, dtype, c->batch,
                                        v.sub.seq, c->hidden));
  srt_mamba2_grads g = {gp[0], gp[1], gp[2], gp[3], gp[4], gp[5], gp[6], gp[7]};
  SRT_RETURN_IF_ERROR(srt_cpu_mamba2_backward(dx_all, &g, dy, v.x, v.seg, &v.w, v.ws, &v.sub));
  int rank = srt_group_rank(v.group);
  for (int k = 0; k < kWeights; ++k)
    move_share(k, c, cp, rank, ops_f32(e, grads[k]), gp[k], true);
  return ops_cp_scatter_f32(v.group, dx_all, e->arena + dx, v.staging, dtype, c->batch,
                            v.sub.seq, c->hidden);
}

// Activations of `act` other than fp32 only under cp (the bf16 backend's).
static srt_status check_act(const char *op, int64_t cp, srt_dtype act) {
  if (act != SRT_F32 && (act != SRT_BF16 || cp <= 1))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: activations of dtype %s with cp %lld (fp32, or bf16 under cp)", op,
                     srt_dtype_name(act), (long long)cp);
  return NULL;
}

// The 8 weights at the arena offsets in[1..8] as fp32 pointers.
static srt_mamba2_weights weights_at(srt_exec *e, const int64_t in[9]) {
  return (srt_mamba2_weights){ops_f32(e, in[1]), ops_f32(e, in[2]), ops_f32(e, in[3]),
                              ops_f32(e, in[4]), ops_f32(e, in[5]), ops_f32(e, in[6]),
                              ops_f32(e, in[7]), ops_f32(e, in[8])};
}

srt_status ops_mamba2_mixer(srt_exec *e, const int64_t in[9], int64_t segment_ids,
                            const srt_mamba2_config *c, int64_t cp, int64_t out, srt_dtype act) {
  SRT_RETURN_IF_ERROR(check_act("srt_cpu_op_mamba2_mixer", cp, act));
  if (cp > 1)
    return cp_forward(e, c, in, segment_ids, (int)cp, out, act);
  float *ws = NULL; // set by workspace() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(workspace(e, c, false, "srt_cpu_op_mamba2_mixer", &ws));
  srt_mamba2_weights w = weights_at(e, in);
  return srt_cpu_mamba2_forward(ops_f32(e, out), ops_f32(e, in[0]),
                                segment_ids_of(e, segment_ids), &w, ws, c);
}

srt_status srt_cpu_op_mamba2_mixer(srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w,
                                   int64_t conv_b, int64_t dt_bias, int64_t a_log, int64_t d,
                                   int64_t norm_w, int64_t out_proj, int64_t segment_ids,
                                   int64_t batch, int64_t seq,
                                   int64_t hidden, int64_t heads, int64_t head_dim,
                                   int64_t groups, int64_t state, int64_t conv_kernel,
                                   int64_t chunk, double eps, double dt_min, int64_t cp,
                                   int64_t out) {
  srt_mamba2_config c = ops_mamba2_config(batch, seq, hidden, heads, head_dim, groups, state,
                                          conv_kernel, chunk, eps, dt_min);
  return ops_mamba2_mixer(
      e, (const int64_t[9]){x, in_proj, conv_w, conv_b, dt_bias, a_log, d, norm_w, out_proj},
      segment_ids, &c, cp, out, SRT_F32);
}

srt_status ops_mamba2_mixer_grad(srt_exec *e, const int64_t in[9], int64_t segment_ids,
                                 const srt_mamba2_config *c, int64_t cp, int64_t dout,
                                 int64_t dx, const int64_t grads[8], srt_dtype act) {
  SRT_RETURN_IF_ERROR(check_act("srt_cpu_op_mamba2_mixer_grad", cp, act));
  // The gradients are fresh buffers: zeroed, then accumulated by the kernel.
  for (int k = 0; k < kWeights; ++k)
    memset(ops_f32(e, grads[k]), 0, (size_t)share_floats(k, c, 1) * sizeof(float));
  if (cp > 1)
    return cp_backward(e, c, in, segment_ids, (int)cp, dout, dx, grads, act);
  float *ws = NULL; // set by workspace() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(workspace(e, c, true, "srt_cpu_op_mamba2_mixer_grad", &ws));
  srt_mamba2_weights w = weights_at(e, in);
  srt_mamba2_grads g = {ops_f32(e, grads[0]), ops_f32(e, grads[1]), ops_f32(e, grads[2]),
                        ops_f32(e, grads[3]), ops_f32(e, grads[4]), ops_f32(e, grads[5]),
                        ops_f32(e, grads[6]), ops_f32(e, grads[7])};
  return srt_cpu_mamba2_backward(ops_f32(e, dx), &g, ops_f32(e, dout), ops_f32(e, in[0]),
                                 segment_ids_of(e, segment_ids), &w, ws, c);
}

srt_status srt_cpu_op_mamba2_mixer_grad(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b, int64_t dt_bias,
    int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj, int64_t segment_ids,
    int64_t batch, int64_t seq, int64_t hidden, int64_t heads, int64_t head_dim,
    int64_t groups, int64_t state, int64_t conv_kernel, int64_t chunk, double eps,
    double dt_min, int64_t cp, int64_t dout, int64_t dx,
    int64_t d_in_proj, int64_t d_conv_w, int64_t d_conv_b, int64_t d_dt_bias, int64_t d_a_log,
    int64_t d_d, int64_t d_norm_w, int64_t d_out_proj) {
  srt_mamba2_config c = ops_mamba2_config(batch, seq, hidden, heads, head_dim, groups, state,
                                          conv_kernel, chunk, eps, dt_min);
  return ops_mamba2_mixer_grad(
      e, (const int64_t[9]){x, in_proj, conv_w, conv_b, dt_bias, a_log, d, norm_w, out_proj},
      segment_ids, &c, cp, dout, dx,
      (const int64_t[8]){d_in_proj, d_conv_w, d_conv_b, d_dt_bias, d_a_log, d_d, d_norm_w,
                         d_out_proj},
      SRT_F32);
}
