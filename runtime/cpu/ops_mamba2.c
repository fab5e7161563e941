// The Mamba2 mixer ops of the cpu backend: srt_cpu_mamba2_forward and
// _backward on arena buffers, their workspace in the context's op scratch
// (grown once, reused every step). segment_ids: the arena offset of the
// int64 [batch, seq] document ids, or -1 (each row one document).
#include <math.h>
#include <string.h>

#include "ops_internal.h"
#include "shardrt/kernels.h"

static srt_mamba2_config config_of(int64_t batch, int64_t seq, int64_t hidden, int64_t heads,
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

srt_status srt_cpu_op_mamba2_mixer(srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w,
                                   int64_t conv_b, int64_t dt_bias, int64_t a_log, int64_t d,
                                   int64_t norm_w, int64_t out_proj, int64_t segment_ids,
                                   int64_t batch, int64_t seq,
                                   int64_t hidden, int64_t heads, int64_t head_dim,
                                   int64_t groups, int64_t state, int64_t conv_kernel,
                                   int64_t chunk, double eps, double dt_min, int64_t out) {
  srt_mamba2_config c = config_of(batch, seq, hidden, heads, head_dim, groups, state,
                                  conv_kernel, chunk, eps, dt_min);
  float *ws = NULL; // set by workspace() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(workspace(e, &c, false, "srt_cpu_op_mamba2_mixer", &ws));
  srt_mamba2_weights w = {ops_f32(e, in_proj), ops_f32(e, conv_w), ops_f32(e, conv_b),
                          ops_f32(e, dt_bias), ops_f32(e, a_log),  ops_f32(e, d),
                          ops_f32(e, norm_w),  ops_f32(e, out_proj)};
  return srt_cpu_mamba2_forward(ops_f32(e, out), ops_f32(e, x), segment_ids_of(e, segment_ids),
                                &w, ws, &c);
}

srt_status srt_cpu_op_mamba2_mixer_grad(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b, int64_t dt_bias,
    int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj, int64_t segment_ids,
    int64_t batch, int64_t seq, int64_t hidden, int64_t heads, int64_t head_dim,
    int64_t groups, int64_t state, int64_t conv_kernel, int64_t chunk, double eps,
    double dt_min, int64_t dout, int64_t dx,
    int64_t d_in_proj, int64_t d_conv_w, int64_t d_conv_b, int64_t d_dt_bias, int64_t d_a_log,
    int64_t d_d, int64_t d_norm_w, int64_t d_out_proj) {
  srt_mamba2_config c = config_of(batch, seq, hidden, heads, head_dim, groups, state,
                                  conv_kernel, chunk, eps, dt_min);
  float *ws = NULL; // set by workspace() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(workspace(e, &c, true, "srt_cpu_op_mamba2_mixer_grad", &ws));
  int64_t inner = heads * head_dim, conv_dim = inner + 2 * groups * state;
  // The gradients are fresh buffers: zeroed, then accumulated by the kernel.
  const struct {
    int64_t off, n;
  } grads[8] = {{d_in_proj, (inner + conv_dim + heads) * hidden},
                {d_conv_w, conv_dim * conv_kernel},
                {d_conv_b, conv_dim},
                {d_dt_bias, heads},
                {d_a_log, heads},
                {d_d, heads},
                {d_norm_w, inner},
                {d_out_proj, hidden * inner}};
  for (int i = 0; i < 8; ++i)
    memset(ops_f32(e, grads[i].off), 0, (size_t)grads[i].n * sizeof(float));
  srt_mamba2_weights w = {ops_f32(e, in_proj), ops_f32(e, conv_w), ops_f32(e, conv_b),
                          ops_f32(e, dt_bias), ops_f32(e, a_log),  ops_f32(e, d),
                          ops_f32(e, norm_w),  ops_f32(e, out_proj)};
  srt_mamba2_grads g = {ops_f32(e, d_in_proj), ops_f32(e, d_conv_w),  ops_f32(e, d_conv_b),
                        ops_f32(e, d_dt_bias), ops_f32(e, d_a_log),   ops_f32(e, d_d),
                        ops_f32(e, d_norm_w),  ops_f32(e, d_out_proj)};
  return srt_cpu_mamba2_backward(ops_f32(e, dx), &g, ops_f32(e, dout), ops_f32(e, x),
                                 segment_ids_of(e, segment_ids), &w, ws, &c);
}
