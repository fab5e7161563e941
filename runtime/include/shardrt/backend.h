// What a backend of the graph-level ops (shardrt/ops.h) builds on: the
// checks srt_op_X runs for every backend before it calls the backend's
// entry point, and the rank arithmetic both backends share (a rank's index
// on a mesh axis, the heads of replicated-KV attention, a collective's
// shape, the rotary and GLU configurations of the graph's codes). A backend
// includes this header, never another backend's or the common runtime's
// private headers.
//
// Every check returns NULL or SRT_INVALID_ARGUMENT naming `op`, the
// argument and the offending values; neither a check nor a backend names
// the rank: srt_op_X adds it once to whatever error it returns.
#ifndef SHARDRT_BACKEND_H
#define SHARDRT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "shardrt/kernels.h"
#include "shardrt/ops.h"

//===----------------------------------------------------------------------===//
// The rank
//===----------------------------------------------------------------------===//

/// This rank's world rank (for messages), -1 without a context.
int srt_op_rank(const srt_exec *e);

/// This rank's index and the group size on mesh `axis` (0 = dp, 1 = tp);
/// axis -1 gives index 0 of 1. Errors: another axis.
srt_status srt_op_axis(const srt_exec *e, const char *op, int64_t axis, int64_t *index,
                       int64_t *size);

/// The context's op scratch (host memory, kept for the context's life, no
/// allocation once large enough): at least `bytes` bytes. Errors:
/// SRT_RESOURCE_EXHAUSTED when it cannot grow.
srt_status srt_op_scratch(srt_exec *e, size_t bytes, void **out);

//===----------------------------------------------------------------------===//
// Checks of single arguments (the dispatcher runs these per ops.def kind)
//===----------------------------------------------------------------------===//

/// e, its context, its arena and its backend are set.
srt_status srt_check_exec(const srt_exec *e, const char *op);
/// A buffer offset is >= 0 (or -1 when `optional`).
srt_status srt_check_offset(const srt_exec *e, const char *op, const char *name,
                            int64_t offset, int optional);
/// A size is >= 0.
srt_status srt_check_size(const srt_exec *e, const char *op, const char *name, int64_t size);
/// A mesh axis is -1, 0 (dp) or 1 (tp).
srt_status srt_check_axis(const srt_exec *e, const char *op, const char *name, int64_t axis);
/// A dtype is SRT_OP_F32 or SRT_OP_BF16.
srt_status srt_check_dtype(const srt_exec *e, const char *op, const char *name,
                           int64_t dtype);
/// A pointer is not NULL.
srt_status srt_check_ptr(const srt_exec *e, const char *op, const char *name, const void *p);

//===----------------------------------------------------------------------===//
// Checks of ops (the `check` column of ops.def)
//===----------------------------------------------------------------------===//

/// A norm's group of features: 0 (all of them) or a divisor of `features`.
srt_status srt_check_norm_group(const srt_exec *e, const char *op, int64_t features,
                                int64_t group);

/// head_dim is positive and even (RoPE rotates halves).
srt_status srt_check_even_head_dim(const srt_exec *e, const char *op, int64_t head_dim);

/// An attribute code (ops.def's ATTR_CODE: the index of the attribute's
/// string among the values the op takes, which the kernel's enum lists in
/// the same order) in [0, count): the backends then cast it to that enum.
/// Errors: SRT_INVALID_ARGUMENT naming `op`, the argument `name` and the
/// code.
srt_status srt_check_code(const srt_exec *e, const char *op, const char *name, int64_t code,
                          int64_t count);

/// An even positive head_dim and a rope_type code of srt_rope_type
/// (srt_check_code).
srt_status srt_check_rope(const srt_exec *e, const char *op, int64_t head_dim,
                          int64_t rope_type);

/// The query heads of an attention op as this rank runs them: local head i
/// is global head first_head + i, whose KV head is (first_head + i) /
/// group (global_heads / num_kv_heads query heads share a KV head).
typedef struct srt_attention_heads {
  int64_t first_head, global_heads, group;
} srt_attention_heads;

/// Positive batch, seq, heads, KV heads and head_dim; a window and a
/// softcap >= 0 and a scale > 0; query heads that share the KV heads evenly
/// (with replicated KV, q_head_offset_axis >= 0: global heads = local heads
/// x the axis size). Fills *heads when it is not NULL.
srt_status srt_check_attention(const srt_exec *e, const char *op,
                               const srt_op_attention_config *config,
                               srt_attention_heads *heads);

/// A collective's local input shape: rank 1..4 and tensor dims dim_a,
/// dim_b inside it; copies d0..d3 to shape[0..4) when shape is not NULL.
srt_status srt_check_collective_shape(const srt_exec *e, const char *op, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                      int64_t dim_a, int64_t dim_b, int64_t shape[4]);

/// A non-blocking collective's in-flight slot: in [0, SRT_MAX_PENDING)
/// (shardrt/collectives.h).
srt_status srt_check_slot(const srt_exec *e, const char *op, int64_t slot);

/// srt_check_collective_shape (dim_a = dim_b = dim, no copy) and
/// srt_check_slot, for the _start forms of a gather or scatter.
srt_status srt_check_collective_start(const srt_exec *e, const char *op, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                      int64_t dim, int64_t slot);

/// A bucket's table `members` ([n, then in, out, count per member]): n in
/// [1, SRT_MAX_BUCKET], offsets >= 0, counts >= 0; a known srt_bucket_kind
/// and a slot as srt_check_slot.
srt_status srt_check_bucket(const srt_exec *e, const char *op, const int64_t *members,
                            int64_t kind, int64_t slot);

/// An AdamW step count >= 1.
srt_status srt_check_step_options(const srt_exec *e, const char *op,
                                  const srt_step_options *options);

//===----------------------------------------------------------------------===//
// Configurations from the graph's codes (after the checks above)
//===----------------------------------------------------------------------===//

/// The rotary configuration of rotary_embedding's arguments.
srt_rope_config srt_op_rope_config(int64_t head_dim, double theta, int64_t rope_type,
                                   double factor, double low_freq_factor,
                                   double high_freq_factor, int64_t original_max_positions);

#endif // SHARDRT_BACKEND_H
