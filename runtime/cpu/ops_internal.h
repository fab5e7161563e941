// Helpers of the cpu backend's op entry points (shardrt/cpu.h), which live
// with the kernel each calls (runtime/cpu/<kernel>.c; the collectives in
// ops_collectives.c): typed views of arena offsets, the context's scratch,
// zeroing, and the fp32-only dtype check.
#ifndef SHARDRT_CPU_OPS_INTERNAL_H
#define SHARDRT_CPU_OPS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "shardrt/backend.h"
#include "shardrt/context.h"
#include "shardrt/cpu.h"
#include "shardrt/kernels.h"

/// The fp32 buffer at byte offset `off` of the rank's arena.
static inline float *ops_f32(srt_exec *e, int64_t off) {
  return (float *)(void *)(e->arena + off);
}

/// The int64 buffer at byte offset `off` of the rank's arena.
static inline int64_t *ops_i64(srt_exec *e, int64_t off) {
  return (int64_t *)(void *)(e->arena + off);
}

/// Zeroes n floats at p: an output the kernel accumulates into (a parameter
/// gradient) is WRITTEN by the op, so it starts from zero.
static inline void ops_zero(float *p, int64_t n) {
  if (n > 0)
    memset(p, 0, (size_t)n * sizeof(float));
}

/// The ops' scratch (srt_op_scratch): at least `floats` floats.
static inline srt_status ops_scratch(srt_exec *e, int64_t floats, float **out) {
  void *p;
  SRT_RETURN_IF_ERROR(srt_op_scratch(e, (size_t)(floats > 0 ? floats : 1) * sizeof(float), &p));
  *out = p;
  return NULL;
}

/// The cpu backend computes fp32 only. Errors: SRT_INVALID_ARGUMENT for
/// another dtype, naming `op`.
static inline srt_status ops_f32_only(srt_exec *e, const char *op, int64_t dtype) {
  if (dtype != SRT_OP_F32)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: dtype %lld on the cpu backend, which computes fp32 only",
                     op, (long long)dtype);
  return NULL;
}

/// The collectives of ops_collectives.c on buffers of element type `dtype`
/// (SRT_F32; SRT_BF16 for the bf16 backend, whose bf16 buffers move as two
/// bytes an element and sum as shardrt/collectives.h says), over mesh
/// axis `axis`'s group (0: dp x cp, 1: tp), out of place, named `op` in
/// errors; blocking for slot < 0, else started into `slot` (completed by
/// srt_cpu_op_collective_wait or, for a bucket, srt_cpu_op_bucket_wait).
/// Shapes are the local input's rank and up to four dims (a
/// reduce-scatter's the full, Partial tensor). Errors: SRT_INVALID_ARGUMENT
/// for another axis or a dim that does not split over the group, and the
/// collective's (shardrt/collectives.h).
srt_status ops_all_reduce(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t count,
                          int64_t axis, int64_t is_max, srt_dtype dtype, int64_t slot);
/// An all-gather on dim `dim`, or (`scatter`) a reduce-scatter (a sum).
srt_status ops_gather_scatter(srt_exec *e, const char *op, bool scatter, int64_t in,
                              int64_t out, int64_t axis, int64_t dim, int64_t rank,
                              const int64_t shape[4], srt_dtype dtype, int64_t slot);
/// Shard(concat_dim) -> Shard(split_dim), blocking.
srt_status ops_all_to_all(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t axis,
                          int64_t split_dim, int64_t concat_dim, int64_t rank,
                          const int64_t shape[4], srt_dtype dtype);
/// This rank's slice of `dim` (by its index on the axis), local: no traffic.
srt_status ops_all_slice(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t axis,
                         int64_t dim, int64_t rank, const int64_t shape[4], srt_dtype dtype);
/// A bucket (srt_bucket_start) of the members table `members` (srt_check_bucket's).
srt_status ops_bucket_start(srt_exec *e, const char *op, const int64_t *members, int64_t kind,
                            int64_t axis, srt_dtype dtype, int64_t slot);

/// srt_cpu_op_attention and srt_cpu_op_attention_grad with K and V (and
/// dK, dV) of element type `kv`: SRT_F32, or SRT_BF16 under cp (the bf16
/// backend's buffers: K, V all-gathered as bf16 and widened; dK, dV
/// rounded to bf16 and reduce-scattered as a bf16 sum); q, out, lse, dy and
/// dq fp32. Errors: theirs, and SRT_INVALID_ARGUMENT for bf16 K/V without
/// cp.
srt_status ops_attention(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t segment_ids,
                         int64_t out, int64_t lse, const srt_op_attention_config *config,
                         srt_dtype kv);
srt_status ops_attention_grad(srt_exec *e, int64_t q, int64_t k, int64_t v, int64_t out,
                              int64_t lse, int64_t dy, int64_t segment_ids, int64_t dq,
                              int64_t dk, int64_t dv, const srt_op_attention_config *config,
                              srt_dtype kv);

/// Context parallelism (shardrt/cp.h): all-gathers every cp rank's
/// `local` [rows, seq / cp, token] over the cp group `g` into `global`
/// [rows, seq, token] in token order, through `staging` (as large as
/// `global`: the ranks' rows in rank order). Errors: the collective's.
srt_status ops_cp_all_gather(srt_group *g, const void *local, void *global, void *staging,
                             srt_dtype dtype, int64_t rows, int64_t seq, int64_t token);

/// The inverse for a partial sum: `global` [rows, seq, token] of `dtype`
/// (F32, or BF16: a bf16 sum, shardrt/collectives.h), this rank's
/// contribution to every token, is summed over the cp group `g` and this
/// rank's tokens left in `local` [rows, seq / cp, token], through `staging`
/// (as large as `global`). Errors: the collective's.
srt_status ops_cp_reduce_scatter(srt_group *g, const void *global, void *local, void *staging,
                                 srt_dtype dtype, int64_t rows, int64_t seq, int64_t token);

/// ops_cp_all_gather of rows of `dtype` into fp32 `global` [rows, seq,
/// token]: F32 as it is; BF16 (the bf16 backend's activations) moved as
/// bf16 through the two halves of `staging` (rank order, then token order;
/// `staging` holds rows x seq x token floats) and widened. Errors: the
/// collective's.
srt_status ops_cp_gather_f32(srt_group *g, const void *local, float *global, float *staging,
                             srt_dtype dtype, int64_t rows, int64_t seq, int64_t token);

/// ops_cp_reduce_scatter of fp32 `global` into `local` of `dtype`: BF16
/// rounded to bf16 first (into the second half of `staging`) and summed
/// as bf16 (shardrt/collectives.h). Errors: the collective's.
srt_status ops_cp_scatter_f32(srt_group *g, const float *global, void *local, float *staging,
                              srt_dtype dtype, int64_t rows, int64_t seq, int64_t token);

/// The Mamba2 mixer ops (srt_cpu_op_mamba2_mixer, _grad) with x, out,
/// dout and dx of element type `act`: SRT_F32, or SRT_BF16 under cp (the
/// bf16 backend's, moved over cp as bf16: ops_cp_gather_f32,
/// ops_cp_scatter_f32); the weights and their gradients fp32. `in` holds
/// the arena offsets of x and the 8 weights (srt_mamba2_weights' order),
/// `grads` those of the 8 gradients. Errors: theirs, and
/// SRT_INVALID_ARGUMENT for bf16 activations without cp.
srt_status ops_mamba2_mixer(srt_exec *e, const int64_t in[9], int64_t segment_ids,
                            const srt_mamba2_config *c, int64_t cp, int64_t out, srt_dtype act);
srt_status ops_mamba2_mixer_grad(srt_exec *e, const int64_t in[9], int64_t segment_ids,
                                 const srt_mamba2_config *c, int64_t cp, int64_t dout,
                                 int64_t dx, const int64_t grads[8], srt_dtype act);

/// The elements of the mixer's 8 weights (srt_mamba2_weights' order) for
/// the local sizes in `c` (its batch and seq unused).
void ops_mamba2_weight_counts(const srt_mamba2_config *c, int64_t counts[8]);

/// The mixer's configuration from its op's arguments (dt_max unbounded).
srt_mamba2_config ops_mamba2_config(int64_t batch, int64_t seq, int64_t hidden, int64_t heads,
                                    int64_t head_dim, int64_t groups, int64_t state,
                                    int64_t conv_kernel, int64_t chunk, double eps,
                                    double dt_min);

#endif // SHARDRT_CPU_OPS_INTERNAL_H
