// The static memory plan of a compiled step: every temporary value gets a
// byte offset in the rank's one arena, reused once the value is dead
// (liveness intervals, first fit). Parameters, gradients and optimizer
// state live in a persistent region before the temporaries.
#ifndef SHARD_PASSES_MEMORY_PLAN_H
#define SHARD_PASSES_MEMORY_PLAN_H

#include <stdint.h>

/// Alignment of every buffer, bytes (a cache line; enough for AVX-512).
#define TP_BUFFER_ALIGN 64

/// One value: live from op index `first` (its definition) to `last` (its
/// last use), inclusive, `bytes` long. `offset` is the result.
typedef struct tp_interval {
  int64_t first, last;
  int64_t bytes;
  int64_t offset;
} tp_interval;

/// Rounds `bytes` up to TP_BUFFER_ALIGN.
int64_t tp_align(int64_t bytes);

/// Assigns offsets >= `base` to `n` intervals so that no two intervals live
/// at the same op index overlap in memory, placing each at the lowest
/// fitting offset (first fit, in order of definition). Returns the end of
/// the highest buffer (the arena size needed), or -1 when out of memory.
int64_t tp_plan_memory(tp_interval *intervals, int n, int64_t base);

#endif // SHARD_PASSES_MEMORY_PLAN_H
