// Activation checkpointing for nn-autodiff: before the backward of a
// segment of the forward graph (a decoder layer, or only its attention),
// the segment's forward ops are cloned from the values it takes in, and the
// segment's backward ops read the clones. The originals' results then die
// as soon as the forward has used them (the memory plan reuses their
// memory); the recomputed values are the same bytes (the same kernels on
// the same inputs), so losses and gradients are bit-identical. As
// torch.utils.checkpoint around each layer (NeMo-RL's
// activation_checkpointing) and Megatron's selective recomputation.
#ifndef SHARD_PASSES_RECOMPUTE_H
#define SHARD_PASSES_RECOMPUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "mlir-c/IR.h"
#include "ptr_map.h"

typedef enum tp_recompute_mode {
  TP_RECOMPUTE_NONE,
  TP_RECOMPUTE_FULL,      ///< every decoder layer ("<...>layers.N")
  TP_RECOMPUTE_ATTENTION, ///< the module of each nn.attention and its submodules
} tp_recompute_mode;

typedef struct tp_recompute {
  tp_recompute_mode mode;
  const MlirOperation *ops; // the forward ops, in order
  size_t num_ops;
  tp_ptr_map clone_of;      // original value -> its recomputed value
  MlirOperation *clones;    // every clone, in order
  size_t num_clones, cap_clones;
  char **done;              // segments recomputed so far
  size_t num_done, cap_done;
} tp_recompute;

/// Parses "none", "full" or "attention" into *mode; false for anything else.
bool tp_recompute_parse(const char *text, tp_recompute_mode *mode);

/// Before the backward of forward op `ops[index]` (walking them in
/// reverse): when it is the last op of a segment not recomputed yet, appends
/// clones of the segment's ops, in order, to `block`.
void tp_recompute_before(tp_recompute *rc, MlirBlock block, size_t index);

/// The recomputed value of `v`, or `v` itself (saved: a segment's input, a
/// parameter, or no segment).
MlirValue tp_recompute_value(const tp_recompute *rc, MlirValue v);

/// Erases the clones nothing reads (a segment's output, whose original the
/// next layer keeps) and frees `rc`.
void tp_recompute_finish(tp_recompute *rc);

#endif // SHARD_PASSES_RECOMPUTE_H
