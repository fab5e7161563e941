// The Mamba2 mixer ops of the cuda backend: no CUDA kernel yet, so
// lower-to-runtime refuses nn.mamba2_mixer for backend=cuda before a step
// is built; these entry points (the op table needs one per op) say the same
// if a program reaches them by another route.
#include "ops_internal.h"

static srt_status no_kernel(const char *op) {
  return SRT_ERROR(SRT_FAILED_PRECONDITION,
                   "%s: the cuda backend has no Mamba2 kernel yet (NemotronH trains on the cpu "
                   "backend: shard-compile --backend=cpu)",
                   op);
}

srt_status srt_cuda_op_mamba2_mixer(srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w,
                                    int64_t conv_b, int64_t dt_bias, int64_t a_log, int64_t d,
                                    int64_t norm_w, int64_t out_proj, int64_t segment_ids,
                                    int64_t batch, int64_t seq, int64_t hidden, int64_t heads,
                                    int64_t head_dim, int64_t groups, int64_t state,
                                    int64_t conv_kernel, int64_t chunk, double eps,
                                    double dt_min, int64_t cp, int64_t out) {
  return no_kernel("srt_cuda_op_mamba2_mixer");
}

srt_status srt_cuda_op_mamba2_mixer_grad(
    srt_exec *e, int64_t x, int64_t in_proj, int64_t conv_w, int64_t conv_b, int64_t dt_bias,
    int64_t a_log, int64_t d, int64_t norm_w, int64_t out_proj, int64_t segment_ids,
    int64_t batch, int64_t seq, int64_t hidden, int64_t heads, int64_t head_dim,
    int64_t groups, int64_t state, int64_t conv_kernel, int64_t chunk, double eps,
    double dt_min, int64_t cp, int64_t dout, int64_t dx,
    int64_t d_in_proj, int64_t d_conv_w, int64_t d_conv_b, int64_t d_dt_bias, int64_t d_a_log,
    int64_t d_d, int64_t d_norm_w, int64_t d_out_proj) {
  return no_kernel("srt_cuda_op_mamba2_mixer_grad");
}
