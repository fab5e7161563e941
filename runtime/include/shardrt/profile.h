// Where a step's time goes: wall seconds per kind of runtime op, summed over
// the calls of srt_op_X (shardrt/ops.h) while a profile is attached to the
// context (srt_context_set_profile). `train --profile` prints it.
#ifndef SHARDRT_PROFILE_H
#define SHARDRT_PROFILE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Kinds of runtime ops, by what bounds them.
typedef enum srt_op_kind {
  SRT_OP_KIND_GEMM,        ///< linear and its input and weight gradients
                           ///< (the lm_head too)
  SRT_OP_KIND_ATTENTION,   ///< attention and its gradient
  SRT_OP_KIND_ELEMENTWISE, ///< embedding, norms, rotary, GLU, add, slices,
                           ///< bias gradients
  SRT_OP_KIND_LOSS,        ///< cross-entropy phases (their vocab-parallel
                           ///< collectives included)
  SRT_OP_KIND_COLLECTIVE,  ///< all_reduce, all_gather, reduce_scatter, all_to_all
  SRT_OP_KIND_OPTIMIZER,   ///< optimizer_step: grad norm, clipping, AdamW
  SRT_OP_KIND_COUNT
} srt_op_kind;

/// Accumulated seconds and calls per kind, and the steps they cover.
typedef struct srt_profile {
  double seconds[SRT_OP_KIND_COUNT];
  int64_t calls[SRT_OP_KIND_COUNT];
  double step_seconds; ///< wall time of the profiled steps (the caller adds it)
  int64_t steps;       ///< steps profiled (the caller counts them)
} srt_profile;

/// The kind of runtime op `name` ("linear_grad_input", without srt_op_).
srt_op_kind srt_op_kind_of(const char *name);

/// "GEMM", "attention", "elementwise", "loss", "collectives", "optimizer".
const char *srt_op_kind_name(srt_op_kind kind);

#ifdef __cplusplus
}
#endif

#endif // SHARDRT_PROFILE_H
