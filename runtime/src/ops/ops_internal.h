// Helpers shared by the graph-level ops (ops.h): arena addressing, argument
// checks that name the op, the rank's index on a mesh axis, and the ops'
// scratch buffer (owned by the context).
#ifndef SHARDRT_OPS_INTERNAL_H
#define SHARDRT_OPS_INTERNAL_H

#include <stdint.h>

#include "shardrt/kernels.h"
#include "shardrt/ops.h"

/// The fp32 buffer at byte offset `off` of the rank's arena.
static inline float *ops_f32(srt_exec *e, int64_t off) {
  return (float *)(void *)(e->arena + off);
}

/// The int64 buffer at byte offset `off` of the rank's arena.
static inline int64_t *ops_i64(srt_exec *e, int64_t off) {
  return (int64_t *)(void *)(e->arena + off);
}

/// Checks that `e` has a context and an arena, and that the `n` byte offsets
/// `offsets[0..n)` and sizes `sizes[0..n_sizes)` are non-negative.
/// Errors: SRT_INVALID_ARGUMENT naming `op` and the first bad value.
srt_status ops_check(const srt_exec *e, const char *op, int n, const int64_t *offsets,
                     int n_sizes, const int64_t *sizes);

/// A literal list of int64 arguments as (count, array) for ops_check:
/// ops_check(e, "srt_op_add", OPS_LIST(a, b, y), OPS_LIST(n)).
#define OPS_LIST(...)                                                          \
  (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/// This rank's index and the group size on mesh `axis` (0 = dp, 1 = tp);
/// axis -1 gives index 0 of 1. Errors: SRT_INVALID_ARGUMENT for another axis,
/// naming `op`.
srt_status ops_axis(srt_exec *e, const char *op, int64_t axis, int64_t *index,
                    int64_t *size);

/// The ops' scratch (srt_context_op_scratch): at least `floats` floats.
srt_status ops_scratch(srt_exec *e, int64_t floats, float **out);

/// The GLU activation of ops.h's code (0 = silu, 1 = gelu tanh).
/// Errors: SRT_INVALID_ARGUMENT for another code, naming `op`.
srt_status ops_glu_activation(srt_exec *e, const char *op, int64_t activation,
                              srt_glu_activation *act);

/// The rotary configuration of the graph's rotary_embedding arguments.
/// Errors: SRT_INVALID_ARGUMENT for a rope_type other than 0 (default) or 1
/// (llama3), naming `op`.
srt_status ops_rope_config(const char *op, int64_t head_dim, double theta, int64_t rope_type,
                           double factor, double low_freq_factor, double high_freq_factor,
                           int64_t original_max_positions, srt_rope_config *config);

/// This rank's world rank (for messages).
int ops_rank(const srt_exec *e);

#endif // SHARDRT_OPS_INTERNAL_H
